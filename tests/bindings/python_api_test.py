"""Every call of the Python package cairn, with its error paths, on 4 ranks (2 simulated nodes).

Run under mpirun with the build tree's package on PYTHONPATH (tests/bindings/CMakeLists.txt). Each check
runs on every rank in the same order; the first failure prints the rank, the check and the traceback
and aborts the job (a failing rank must not leave the others waiting in a collective call).
"""
import array
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
from mpi4py import MPI

import cairn
from cairn import _cairn

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def raises(cls, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except cls as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {cls.__name__}")


@check
def errors_come_from_the_one_list():
    classes = [getattr(cairn.errors, n) for n in cairn.errors.__all__ if n not in ("CairnError", "error_class")]
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes) and all(c < 0 for c in codes), codes
    for c in classes:  # the generated text is the library's own
        assert issubclass(c, cairn.CairnError) and issubclass(c, RuntimeError)
        assert c.description == cairn.strerror(c.code), (c, c.description, cairn.strerror(c.code))
        assert c.code_name.startswith("CAIRN_ERR_") and cairn.errors.error_class(c.code) is c
    assert cairn.errors.error_class(-12345) is cairn.CairnError
    assert cairn.NoCheckpointError.code == -8 and cairn.CairnIOError.code_name == "CAIRN_ERR_IO"
    assert cairn.CancelledError.code == -20 and cairn.CancelledError.code_name == "CAIRN_ERR_CANCELLED"
    assert cairn.__version__ == "%d.%d.%d" % _cairn.VERSION and cairn.strerror(0) == "success"
    assert [int(lv) for lv in cairn.Level] == [0, 1, 2, 3] and int(cairn.DistKind.BLOCK_COLS) == 5


@check
def a_bad_start_leaves_nothing_behind():
    raises(TypeError, cairn.Session, "not a communicator")
    bad = os.path.join(WORK, "bad.toml")
    if rank == 0:
        with open(bad, "w") as f:
            f.write("no_such_knob = 1\n")
    comm.Barrier()
    e = raises(cairn.ConfigError, cairn.Session, comm, config=bad)
    assert e.call == "cairn_init" and "no_such_knob" in str(e), e
    # nothing was left initialized: a session starts, and a second one is refused while it is open
    with cairn.Session(comm) as c:
        e = raises(cairn.AlreadyInitializedError, cairn.Session, comm)
        assert "cairn_init" in str(e)
        assert c.restart_available() is False and c.newest_version() is None
        raises(cairn.NoCheckpointError, c.restart)
        assert c.restart_level() == (0, cairn.Level.NONE)
    assert c.closed
    e = raises(cairn.NotInitializedError, c.checkpoint)
    assert e.code == -2 and "cairn_init" in e.detail
    c.close()  # closing twice does nothing


@check
def an_exception_in_the_block_finalizes():
    class Boom(Exception):
        pass
    def body():
        with cairn.Session(comm) as c:
            c.protect("x", np.zeros(4))
            raise Boom()
    raises(Boom, body)
    with cairn.Session(comm) as c:  # cairn was finalized on the way out
        assert c.restart_available() is False


DTYPES = [np.float64, np.float32, np.int32, np.int64, np.uint32, np.uint64, np.complex64, np.complex128, np.bool_,
          np.int8, np.uint8, np.int16, np.float16]


@check
def protect_checkpoint_restart_every_type():
    with cairn.Session(comm) as c:
        arrays = {}
        for i, dt in enumerate(DTYPES):
            a = (np.arange(12).reshape(3, 4) + rank * 100 + i).astype(dt)
            arrays[np.dtype(dt).name] = a
            c.protect(np.dtype(dt).name, a)
        fortran_order = np.asfortranarray(np.arange(6.0).reshape(2, 3) + rank)
        c.protect("fortran_order", fortran_order)
        structured = np.zeros(3, dtype=[("x", np.float64), ("n", np.int32)])
        structured["x"], structured["n"] = rank + 0.5, rank
        c.protect("structured", structured)
        raw, doubles = bytearray(b"rank%d" % rank), array.array("d", [rank, 2.5])
        c.protect("bytearray", raw)
        c.protect("array", doubles)
        counter = np.array([7], dtype=np.int64)
        c.protect("counter", counter)
        expect = {k: v.copy() for k, v in arrays.items()}
        c.checkpoint()
        c.wait()
        for a in arrays.values():
            a[...] = 0
        fortran_order[...] = -1
        structured["x"] = 0
        raw[:] = b"xxxxx"
        doubles[0] = -1
        counter[0] = 0
        assert c.restart_available() and c.newest_version() == 1
        info = c.restart()
        assert info == (1, cairn.Level.L1) and info.level is cairn.Level.L1, info
        for k, a in arrays.items():
            assert np.array_equal(a, expect[k]), (k, a, expect[k])
        assert np.array_equal(fortran_order, np.asfortranarray(np.arange(6.0).reshape(2, 3) + rank))
        assert (structured["x"] == rank + 0.5).all() and bytes(raw) == b"rank%d" % rank and doubles[0] == rank
        assert counter[0] == 7 and c.region("counter") is counter
        assert c.restart_level() == (1, cairn.Level.L1)


@check
def the_buffers_stay_alive_and_in_place():
    with cairn.Session(comm) as c:
        a = np.zeros(8)
        c.protect("a", a)
        raises(ValueError, a.resize, 16)  # numpy refuses: cairn holds a view of its memory
        c.unprotect("a")
        a.resize(16, refcheck=False)
        raises(KeyError, c.region, "a")
        b = np.ones(4)
        c.protect("b", b)
        c.protect("b", np.full(4, 2.0))  # protecting again replaces the region and lets go of b
        b.resize(8, refcheck=False)
        e = raises(cairn.UnknownRegionError, c.unprotect, "nope")
        assert e.call == "cairn_unprotect" and "nope" in e.detail


@check
def what_cannot_be_protected():
    with cairn.Session(comm) as c:
        a = np.arange(10.0)
        e = raises(cairn.InvalidArgError, c.protect, "strided", a[::2])
        assert "not contiguous" in str(e) and e.call == "cairn_protect"
        e = raises(cairn.InvalidArgError, c.protect, "readonly", b"bytes are immutable")
        assert "read-only" in str(e)
        e = raises(cairn.InvalidArgError, c.protect, "none", None)
        assert "buffer protocol" in str(e)
        raises(cairn.InvalidArgError, c.protect, "", a)
        raises(cairn.InvalidArgError, c.protect, "n" * 256, a)
        e = raises(cairn.NotSupportedError, c.protect, "halves", np.zeros(8, np.int16),
                   dist=cairn.Distribution.block(8 * size))
        assert "cannot count them" in str(e)
        c.protect("halves", np.zeros(8, np.int16), dist=cairn.Distribution.replicated())
        raises(cairn.InvalidArgError, c.set_resize, "unprotected", lambda n, k: None)


@check
def a_restart_into_a_wrong_size_is_refused():
    with cairn.Session(comm) as c:
        a = np.arange(6.0) + rank
        c.protect("a", a)
        c.checkpoint()
    with cairn.Session(comm) as c:
        bigger = np.zeros(7)
        c.protect("a", bigger)
        e = raises(cairn.SizeMismatchError, c.restart)
        assert e.code == -10 and "56 bytes protected now, 48 bytes" in e.detail, e.detail
        assert not bigger.any()  # nothing restored
        c.protect("a", np.zeros(6))
        c.protect("extra", np.zeros(1))
        raises(cairn.UnknownRegionError, c.restart)
        c.unprotect("extra")
        right = np.zeros(6)
        c.protect("a", right)
        c.restart()
        assert np.array_equal(right, np.arange(6.0) + rank)


@check
def policy_calls():
    with cairn.Session(comm) as c:
        assert c.need_checkpoint() is False and c.should_exit() is False


@check
def distributions_and_redistribute():
    n = 12
    block = cairn.Distribution.block(n)
    assert block.as_tuple() == (2, 12, 0, 0, 0)
    with cairn.Session(comm) as c:
        counts = [3, 3, 3, 3]
        assert c.local_count(block) == counts[rank]
        assert c.local_count(cairn.Distribution.block_cyclic(10, 2)) == [4, 2, 2, 2][rank]
        assert c.local_count(cairn.Distribution.block_rows(5, 3)) == [6, 3, 3, 3][rank]
        e = raises(cairn.InvalidArgError, c.local_count, cairn.Distribution.block_cyclic(10, 0))
        assert "block_size" in e.detail
        first = sum(counts[:rank])
        mine = np.arange(first, first + counts[rank], dtype=np.float64)
        raises(cairn.SizeMismatchError, c.protect, "g", np.zeros(counts[rank] + 1), dist=block)
        c.protect("g", mine, dist=block)
        # ranks 0 and 1 stay, 2 and 3 leave: the staying ones get 6 elements each
        stay = rank < 2
        sub = comm.Split(0 if stay else MPI.UNDEFINED, rank)
        new_comm = sub if stay else None

        def fails(name, count):
            raise MemoryError(f"no room for {count} elements of {name}")
        c.set_resize("g", fails)
        e = raises(cairn.NoMemoryError, c.redistribute, new_comm)
        assert e.call == "cairn_redistribute"
        if stay:
            assert isinstance(e.__cause__, MemoryError) and "no room for 6 elements of g" in str(e.__cause__)
        assert not c.closed and c.region("g") is mine
        c.set_resize("g", lambda name, count: np.full(count, -1.0))
        c.redistribute(new_comm)
        if stay:
            got = c.region("g")
            assert np.array_equal(got, np.arange(6 * rank, 6 * rank + 6, dtype=np.float64)), got
            assert c.local_count(block) == 6
            c.set_resize("g", None)
            c.checkpoint()
            c.close()
            sub.Free()
        else:
            assert c.closed
            raises(cairn.NotInitializedError, c.checkpoint)
    comm.Barrier()


@check
def the_file_api():
    with cairn.Session(comm) as c:
        meta = np.array([rank], dtype=np.int64)
        c.protect("meta", meta)
        assert c.route_file("plain.dat") == "plain.dat"  # outside an output: the name itself
        with c.output("step-1") as out:
            with open(out.route(f"rank{rank}.dat"), "w") as f:
                f.write(f"one from {rank}")
        with c.output_file(f"rank{rank}.dat", label="step-2") as path:
            with open(path, "w") as f:
                f.write(f"two from {rank}")
        e = raises(cairn.InvalidVersionError, _invalid_output, c)  # rank 2 declares step-3 invalid
        assert e.call == "cairn_complete_output"

        class Boom(Exception):
            pass
        def failing_output():
            with c.output_file(f"rank{rank}.dat", label="step-4") as path:
                open(path, "w").close()
                raise Boom()
        raises(Boom, failing_output)
        raises(cairn.InvalidArgError, lambda: c.output("x" * 256).__enter__())
        e = raises(cairn.InvalidArgError, c.route_file, "a/b")
        assert "plain file name" in e.detail
        assert c.have_restart() == "step-2"
        e = raises(cairn.InvalidVersionError, _rejected_restart, c)  # rank 1 rejects step-2
        assert e.call == "cairn_complete_restart"
        assert c.have_restart() == "step-1"  # step-2 rejected; step-3 and step-4 never taken
        with c.restart_file(f"rank{rank}.dat") as path:
            with open(path) as f:
                assert f.read() == f"one from {rank}"
        assert meta[0] == rank
        assert c.route_file(f"rank{rank}.dat").startswith(os.environ["CAIRN_CACHE_DIR"])


def _rejected_restart(c):
    with c.restart_files() as version:
        assert version.label == "step-2"
        with open(version.route(f"rank{rank}.dat")) as f:
            assert f.read() == f"two from {rank}"
        raises(cairn.InvalidArgError, version.route, "missing.dat")
        if rank == 1:
            version.reject()


def _invalid_output(c):
    with c.output("step-3") as out:
        open(out.route(f"rank{rank}.dat"), "w").close()
        if rank == 2:
            out.invalidate()


def main():
    global WORK
    WORK = comm.bcast(tempfile.mkdtemp(prefix="cairn-python-api-") if rank == 0 else None)
    os.environ.update({"CAIRN_PREFIX": os.path.join(WORK, "prefix"), "CAIRN_CACHE_DIR": os.path.join(WORK, "cache"),
                       "CAIRN_NODE": f"node{rank * 2 // size}", "CAIRN_REDUNDANCY": "partner"})
    for i, fn in enumerate(CHECKS):
        os.environ["CAIRN_JOB"] = f"pyapi-{os.getpid() if rank == 0 else 0}-{i}"
        os.environ["CAIRN_JOB"] = comm.bcast(os.environ["CAIRN_JOB"])
        os.environ["CAIRN_PREFIX"] = os.path.join(WORK, f"prefix-{i}")  # one job per prefix
        try:
            fn()
        except BaseException:
            print(f"FAIL rank {rank}: {fn.__name__}\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            comm.Abort(1)
        comm.Barrier()
        if rank == 0:
            print(f"ok   - {fn.__name__}", flush=True)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(WORK, ignore_errors=True)
        print(f"python_api: {len(CHECKS)} checks passed on {size} ranks")


if __name__ == "__main__":
    main()
