"""cairn.Session: the C API (include/cairn/cairn.h) with a Python shape.

The extension (cairn._cairn) makes the C calls; this module turns their codes into exceptions, keeps a
memoryview of every protected buffer (so the memory stays valid, and numpy refuses to resize it, until
unprotect or close), and gives the file API its context managers.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sys
import weakref
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, NoReturn, Optional, Tuple, Union

from . import _cairn
from ._error_base import CairnError
from .errors import InvalidArgError, NotSupportedError, error_class

PathLike = Union[str, "os.PathLike[str]"]
#: A resize callback: (region name, new element count) -> a writable contiguous buffer of at least that
#: many elements of the region's type (a numpy array, a bytearray, ...).
ResizeFn = Callable[[str, int], Any]


class Level(IntEnum):
    """Where a restart read its data from (enum cairn_level)."""

    NONE = _cairn.LEVELS["NONE"]
    L1 = _cairn.LEVELS["L1"]  #: the node-local cache
    L2 = _cairn.LEVELS["L2"]  #: rebuilt from the redundancy data of other failure groups
    L3 = _cairn.LEVELS["L3"]  #: the parallel file system (prefix)


class DistKind(IntEnum):
    """How a region is spread over the ranks (enum cairn_dist_kind); see Distribution."""

    PRIVATE = _cairn.DIST_KINDS["PRIVATE"]
    REPLICATED = _cairn.DIST_KINDS["REPLICATED"]
    BLOCK = _cairn.DIST_KINDS["BLOCK"]
    BLOCK_CYCLIC = _cairn.DIST_KINDS["BLOCK_CYCLIC"]
    BLOCK_ROWS = _cairn.DIST_KINDS["BLOCK_ROWS"]
    BLOCK_COLS = _cairn.DIST_KINDS["BLOCK_COLS"]


@dataclass(frozen=True)
class Distribution:
    """struct cairn_distribution. Counts are in elements of the region's type (docs/malleability.md).

    BLOCK_ROWS splits a C-ordered (rows, cols) array by its first index, as numpy stores it.
    """

    kind: DistKind
    global_count: int = 0
    block_size: int = 0
    rows: int = 0
    cols: int = 0

    @classmethod
    def private(cls) -> "Distribution":
        """Per-rank data: a restart needs the same number of ranks (what protect() without dist means)."""
        return cls(DistKind.PRIVATE)

    @classmethod
    def replicated(cls, count: int = 0) -> "Distribution":
        """The same on every rank, stored once (rank 0's copy); count 0: any size."""
        return cls(DistKind.REPLICATED, global_count=count)

    @classmethod
    def block(cls, global_count: int) -> "Distribution":
        """A 1-D array in contiguous pieces: rank r of P holds global_count // P, one more if r < global_count % P."""
        return cls(DistKind.BLOCK, global_count=global_count)

    @classmethod
    def block_cyclic(cls, global_count: int, block_size: int) -> "Distribution":
        """A 1-D array dealt in blocks of block_size elements: block j to rank j % P."""
        return cls(DistKind.BLOCK_CYCLIC, global_count=global_count, block_size=block_size)

    @classmethod
    def block_rows(cls, rows: int, cols: int) -> "Distribution":
        """A (rows, cols) array split by rows as block() splits elements."""
        return cls(DistKind.BLOCK_ROWS, rows=rows, cols=cols)

    @classmethod
    def block_cols(cls, rows: int, cols: int) -> "Distribution":
        """A (rows, cols) array split by columns; a rank stores its (rows, my_cols) part C-ordered."""
        return cls(DistKind.BLOCK_COLS, rows=rows, cols=cols)

    def as_tuple(self) -> Tuple[int, int, int, int, int]:
        return (int(self.kind), self.global_count, self.block_size, self.rows, self.cols)


class RestartInfo(NamedTuple):
    """The version a restart restored and the level it was read from."""

    version: int
    level: Level


# ---- buffers ----------------------------------------------------------------------------------------

_SIGNED = {1: "BYTE", 4: "INT32", 8: "INT64"}
_UNSIGNED = {1: "BYTE", 4: "UINT32", 8: "UINT64"}
_BY_FORMAT = {("d", 8): "DOUBLE", ("f", 4): "FLOAT", ("Zd", 16): "COMPLEX_DOUBLE", ("Zf", 8): "COMPLEX_FLOAT",
              ("?", 1): "BYTE", ("c", 1): "CHAR"}


@dataclass(frozen=True)
class _Layout:
    type: int          # cairn_type
    count: int         # elements of that type
    elem_bytes: int    # bytes per element of that type
    splittable: bool   # the elements are the buffer's own: BLOCK-like distributions can count them


def _layout(view: memoryview) -> _Layout:
    """The cairn type and element count of a buffer, from its struct-module format (numpy's included)."""
    fmt = view.format.lstrip("@=<>!")
    size = view.itemsize
    name = _BY_FORMAT.get((fmt, size))
    if name is None and fmt in ("b", "h", "i", "l", "q", "n"):
        name = _SIGNED.get(size)
    if name is None and fmt in ("B", "H", "I", "L", "Q", "N"):
        name = _UNSIGNED.get(size)
    if name is None:  # float16, int16, structured dtypes, ...: their bytes
        return _Layout(_cairn.TYPES["BYTE"], view.nbytes, 1, size == 1)
    elem = size
    return _Layout(_cairn.TYPES[name], view.nbytes // elem, elem, True)


class _DeviceView:
    """Stands in for a memoryview of a device (GPU) buffer: its address, element format and size, and
    whatever keeps the memory alive (the object; a DLPack capsule). release() lets go of the capsule."""

    def __init__(self, address: int, format: str, itemsize: int, nbytes: int, keep: Any) -> None:
        self.address, self.format, self.itemsize, self.nbytes, self._keep = address, format, itemsize, nbytes, keep

    def release(self) -> None:
        self._keep = None


# (kind, bytes) of __cuda_array_interface__'s typestr, or DLPack's (code, bits): the struct format _layout reads
_DEVICE_FORMATS = {("f", 8): "d", ("f", 4): "f", ("f", 2): "e", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i",
                   ("i", 8): "q", ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("c", 8): "Zf",
                   ("c", 16): "Zd", ("b", 1): "?"}
_DLPACK_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b", 4: "V"}
_DLPACK_CUDA = 2


def _contiguous(shape: Any, strides: Any, itemsize: int, in_bytes: bool) -> bool:
    if strides is None:
        return True
    expect = itemsize if in_bytes else 1
    for n, s in zip(reversed(list(shape)), reversed(list(strides))):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _device_view(obj: Any, call: str, name: str) -> Optional[_DeviceView]:
    """A device object's view (None for anything else): __cuda_array_interface__ (CuPy, Numba, PyTorch),
    else DLPack on a CUDA device. Never a copy: cairn protects the device memory itself."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        address, readonly = cai["data"]
        typestr = cai["typestr"]
        kind, size = typestr[1], int(typestr[2:])
        count = 1
        for n in cai["shape"]:
            count *= n
        if readonly:
            _refuse(InvalidArgError, call, f"region '{name}' is read-only: a restart writes into it")
        if not _contiguous(cai["shape"], cai.get("strides"), size, True):
            _refuse(InvalidArgError, call, f"region '{name}' is not contiguous: protect a contiguous array")
        return _DeviceView(address, _DEVICE_FORMATS.get((kind, size), "V"), size, count * size, obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        device_type, _ = obj.__dlpack_device__()
        if int(device_type) != _DLPACK_CUDA:
            return None
        capsule = obj.__dlpack__()
        address, _, _, code, bits, lanes, shape, strides = _cairn.dlpack_info(capsule)
        size = bits * lanes // 8
        count = 1
        for n in shape:
            count *= n
        if not _contiguous(shape, strides, size, False):
            _refuse(InvalidArgError, call, f"region '{name}' is not contiguous: protect a contiguous tensor")
        kind = _DLPACK_KINDS.get(code, "V") if lanes == 1 else "V"
        return _DeviceView(address, _DEVICE_FORMATS.get((kind, size), "V"), size, count * size, (obj, capsule))
    return None


@dataclass
class _Region:
    obj: Any
    view: memoryview
    layout: _Layout
    dist: Optional[Distribution]


def _fail(rc: int, call: str, cause: Optional[BaseException] = None) -> NoReturn:
    detail = _cairn.last_error()
    cls = error_class(rc)
    raise cls(f"{call} failed: {_cairn.strerror(rc)}: {detail}", call=call, detail=detail, code=rc) from cause


def _check(rc: int, call: str) -> None:
    if rc != 0:
        _fail(rc, call)


def _refuse(cls: type, call: str, reason: str, cause: Optional[BaseException] = None) -> NoReturn:
    raise cls(f"{call} failed: {cls.description}: {reason}", call=call, detail=reason) from cause


def _writable_view(obj: Any, call: str, name: str) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError as e:
        _refuse(InvalidArgError, call, f"region '{name}': {type(obj).__name__} has no buffer protocol "
                                       "(use a numpy array, bytearray, array.array, ...)", e)
    if view.readonly:
        view.release()
        _refuse(InvalidArgError, call, f"region '{name}' is read-only: a restart writes into it")
    if not view.contiguous:
        view.release()
        _refuse(InvalidArgError, call, f"region '{name}' is not contiguous (a strided view?): cairn copies a "
                                       "region as one block of memory; protect a contiguous array")
    return view


# ---- a session left open at exit ---------------------------------------------------------------------

_open_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
_exit_hook_installed = False


def _watch_at_exit(session: "Session") -> None:
    """Registered after mpi4py's own exit handler (mpi4py.MPI is imported before any Session), so it
    runs before MPI_Finalize: cairn's background work must not meet a finalized MPI."""
    global _exit_hook_installed
    _open_sessions.add(session)
    if not _exit_hook_installed:
        atexit.register(_close_at_exit)
        _exit_hook_installed = True


def _close_at_exit() -> None:
    for session in list(_open_sessions):
        if session.closed:
            continue
        if hasattr(sys, "last_value"):  # an uncaught exception ends the program: the other ranks may not
            print("cairn: the program ends on an exception with a Session open; not finalizing it "  # come here
                  "(cairn_finalize is collective)", file=sys.stderr, flush=True)
            continue
        print("cairn: a Session was left open; finalizing it at exit (use `with cairn.Session(...)` or close())",
              file=sys.stderr, flush=True)
        try:
            session.close()
        except CairnError as e:
            print(f"cairn: {e}", file=sys.stderr, flush=True)


# ---- the session ----------------------------------------------------------------------------------------

def _name_the_application(config: Optional[PathLike]) -> None:
    """The application in the prefix's identity (docs/config.md, app_name) is the script's name, not the
    interpreter's, unless CAIRN_APP_NAME or the config file names it."""
    if "CAIRN_APP_NAME" in os.environ or not sys.argv or sys.argv[0] in ("", "-c", "-m"):
        return
    path = os.fspath(config) if config is not None else os.environ.get("CAIRN_CONFIG")
    if path:
        try:
            import tomllib
            with open(path, "rb") as f:
                table = tomllib.load(f)
            if "app_name" in table or "app_name" in table.get("cairn", {}):
                return
        except (OSError, ValueError):
            pass  # cairn_init reports a config file it cannot read
    os.environ["CAIRN_APP_NAME"] = os.path.basename(sys.argv[0])


class Session:
    """cairn on a communicator, from cairn_init to cairn_finalize.

    `with cairn.Session(comm, config=...) as c:` finalizes on leaving the block, also by an exception
    (cairn_finalize is collective: every rank must leave it). Without `with`, call close(). cairn is
    one per process: a second Session while one is open is AlreadyInitializedError. Calls are made from
    the thread that created the session.
    """

    def __init__(self, comm: Any = None, config: Optional[PathLike] = None) -> None:
        """Starts cairn on `comm` (an mpi4py communicator; default MPI.COMM_WORLD), duplicated inside.

        config: a TOML config file; None: defaults and CAIRN_* variables. Collective.
        """
        self._regions: Dict[str, _Region] = {}
        self._resize: Dict[str, Callable[[str, int], memoryview]] = {}
        self._retired: List[memoryview] = []  # old buffers of resized regions, kept until the call returns
        self._open = False
        if comm is None:
            from mpi4py import MPI
            comm = MPI.COMM_WORLD
        _name_the_application(config)
        _check(_cairn.init(comm, None if config is None else os.fspath(config)), "cairn_init")
        self._open = True  # nothing below can fail: cairn is either started and owned here, or not at all
        _watch_at_exit(self)

    # ---- life cycle ----
    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        if exc is None:
            self.close()
            return
        try:  # the body's exception goes on; a failure to finalize is noted on it
            self.close()
        except CairnError as e:
            if hasattr(exc, "add_note"):
                exc.add_note(f"and then: {e}")

    @property
    def closed(self) -> bool:
        """True once finalized (close(), the end of `with`, or leaving by redistribute(None))."""
        return not self._open

    def close(self) -> None:
        """cairn_finalize: waits for background work, flushes the newest version if the policy asks,
        releases the buffers. Collective; does nothing when already closed."""
        if not self._open:
            return
        try:
            rc = _cairn.finalize()
        finally:
            self._forget_all()
        _check(rc, "cairn_finalize")

    def _forget_all(self) -> None:
        self._open = False
        for r in self._regions.values():
            r.view.release()
        self._regions.clear()
        self._resize.clear()
        self._release_retired()

    def _release_retired(self) -> None:
        for v in self._retired:
            v.release()
        self._retired.clear()

    # ---- memory API ----
    def protect(self, name: str, buffer: Any, dist: Optional[Distribution] = None,
                resize: Optional[ResizeFn] = None) -> None:
        """Registers (or updates) region `name`: the whole of `buffer`, without copying it.

        buffer: any writable, contiguous object with the buffer protocol (numpy arrays of any dtype and
        shape, bytearray, array.array); the session keeps it (and numpy keeps it from being resized)
        until unprotect() or close(). A scalar counter is a one-element array. dist: a Distribution
        (None: private). resize: see set_resize(). Local.
        """
        call = "cairn_protect" if dist is None else "cairn_protect_distributed"
        device = _device_view(buffer, call, name)
        view = device if device is not None else _writable_view(buffer, call, name)
        layout = _layout(view)
        if dist is not None and not layout.splittable and dist.kind not in (DistKind.PRIVATE, DistKind.REPLICATED):
            fmt = view.format
            view.release()
            _refuse(NotSupportedError, call,
                    f"region '{name}': elements of format '{fmt}' have no cairn type, so a "
                    f"{dist.kind.name} distribution cannot count them; use a PRIVATE or REPLICATED region")
        try:
            d = None if dist is None else dist.as_tuple()
            rc = (_cairn.protect_address(name, device.address, layout.count, layout.type, d) if device is not None
                  else _cairn.protect(name, view, layout.count, layout.type, d))
        except BaseException:
            view.release()
            raise
        if rc != 0:
            view.release()
            _fail(rc, call)
        old = self._regions.pop(name, None)
        if old is not None:
            old.view.release()
        self._regions[name] = _Region(buffer, view, layout, dist)
        if resize is not None:
            self.set_resize(name, resize)

    def unprotect(self, name: str) -> None:
        """Forgets region `name` and lets go of its buffer. Local."""
        _check(_cairn.unprotect(name), "cairn_unprotect")
        old = self._regions.pop(name, None)
        if old is not None:
            old.view.release()
        self._resize.pop(name, None)

    def region(self, name: str) -> Any:
        """The object protected as `name` now: the one given to protect(), or the one a resize callback
        returned since."""
        try:
            return self._regions[name].obj
        except KeyError:
            raise KeyError(f"no region named '{name}' is protected") from None

    # ---- device (GPU) memory: docs/gpu.md ----
    @staticmethod
    def _stream_handle(stream: Any) -> int:
        """A CUDA stream as its handle: an int, a torch.cuda.Stream (cuda_stream), a cupy Stream (ptr), None."""
        if stream is None:
            return 0
        for attr in ("cuda_stream", "ptr", "handle"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        return int(stream)

    def device_stream(self, stream: Any) -> None:
        """The application's CUDA stream whose queued work every later checkpoint's device copy follows
        (cairn_device_stream). Local."""
        _check(_cairn.device_stream(self._stream_handle(stream)), "cairn_device_stream")

    def device_wait_copied(self, stream: Any = None) -> None:
        """Orders the application after the newest checkpoint's device copy: the work queued on `stream`
        from now on waits for it, or with None this thread waits (cairn_device_wait_copied). With
        device_copy = return, call it before the next write of a protected device buffer. Local."""
        _check(_cairn.device_wait_copied(self._stream_handle(stream)), "cairn_device_wait_copied")

    def device_copied_event(self) -> int:
        """The CUevent recorded after the newest checkpoint's device copy, as an int (0: none yet). Local."""
        rc, event = _cairn.device_copied_event()
        _check(rc, "cairn_device_copied_event")
        return event

    def checkpoint(self) -> None:
        """Takes a new version of every protected region; returns after the node-local copy. Collective."""
        _check(_cairn.checkpoint(), "cairn_checkpoint")

    def wait(self) -> None:
        """Blocks until the newest version reached every level its policy asks for. Collective."""
        _check(_cairn.wait(), "cairn_wait")

    def restart_available(self) -> bool:
        """Whether a version can be rebuilt completely (verified). Checkpoints that exist but cannot be
        rebuilt raise UnrecoverableError (a silent fresh start would lose the run). Collective."""
        rc, available, _ = _cairn.restart_available()
        _check(rc, "cairn_restart_available")
        return available

    def newest_version(self) -> Optional[int]:
        """The newest version a restart would restore, or None. Collective."""
        rc, available, version = _cairn.restart_available()
        _check(rc, "cairn_restart_available")
        return version if available else None

    def restart(self) -> RestartInfo:
        """Restores every protected region from the newest recoverable version; returns which and from
        where. A region whose size differs from the checkpoint's is SizeMismatchError (nothing restored).
        Collective."""
        rc, exc = _cairn.restart()
        self._release_retired()
        if rc != 0:
            _fail(rc, "cairn_restart", exc)
        return self.restart_level()

    def restart_level(self) -> RestartInfo:
        """After a restart: its version and level (0 and Level.NONE before any). Local."""
        rc, version, level = _cairn.restart_level()
        _check(rc, "cairn_restart_level")
        return RestartInfo(version, Level(level))

    # ---- distributions ----
    def local_count(self, dist: Distribution) -> int:
        """Elements this rank holds under `dist` on cairn's current communicator. Local."""
        rc, count = _cairn.local_count(dist.as_tuple())
        _check(rc, "cairn_local_count")
        return count

    def set_resize(self, name: str, fn: Optional[ResizeFn]) -> None:
        """Registers fn(name, new_count) -> buffer, called by restart() and redistribute() when region
        `name`'s local count changes: return a writable contiguous buffer of at least new_count
        elements of the region's type; it becomes the region (region(name) returns it). An exception in
        fn makes the call fail with NoMemoryError raised from it. None removes the callback. Local."""
        if fn is None:
            _check(_cairn.set_resize(name, None), "cairn_set_resize")
            self._resize.pop(name, None)
            return
        if name not in self._regions:
            _refuse(InvalidArgError, "cairn_set_resize", f"no region named '{name}' is protected")
        trampoline = self._resize_trampoline(name, fn)
        _check(_cairn.set_resize(name, trampoline), "cairn_set_resize")
        self._resize[name] = trampoline  # keeps the callable alive while cairn holds it

    def _resize_trampoline(self, name: str, fn: ResizeFn) -> Callable[[str, int], memoryview]:
        def call(region: str, new_count: int) -> memoryview:
            obj = fn(region, new_count)
            view = _writable_view(obj, "resize callback", region)
            old = self._regions[name]
            layout = _layout(view)
            if view.nbytes < new_count * old.layout.elem_bytes:
                view.release()
                _refuse(InvalidArgError, "resize callback",
                        f"region '{region}' needs {new_count} elements of {old.layout.elem_bytes} bytes, "
                        f"the buffer returned has {layout.count} ({view.nbytes} bytes)")
            self._retired.append(old.view)  # still the source of the data being moved
            self._regions[name] = _Region(obj, view, old.layout, old.dist)
            return view
        return call

    def redistribute(self, new_comm: Any) -> None:
        """Moves every distributed region onto `new_comm` and makes it cairn's communicator; None
        (MPI_COMM_NULL) on a process that leaves, which hands its data over and is closed after.
        Collective over the larger communicator (docs/malleability.md)."""
        rc, exc = _cairn.redistribute(new_comm)
        self._release_retired()
        if rc != 0:
            _fail(rc, "cairn_redistribute", exc)
        if new_comm is None:
            self._forget_all()

    # ---- file API ----
    def route_file(self, name: str) -> str:
        """The path to write (during an output) or read (during a restart) the file `name`; outside
        them, its path in the newest restored version, else `name`. Local."""
        rc, path = _cairn.route_file(name)
        _check(rc, "cairn_route_file")
        return path

    @contextlib.contextmanager
    def output(self, label: Optional[str] = None, flags: int = 0) -> Iterator["OutputVersion"]:
        """A new version of your own files and the protected regions: `with c.output("step-4") as out:
        path = out.route("rank3.dat")`. The version is kept only if every rank leaves the block without
        an exception and without out.invalidate(); otherwise it is discarded everywhere (a rank that
        left normally gets InvalidVersionError). Collective."""
        _check(_cairn.start_output(label, flags), "cairn_start_output")
        out = OutputVersion(self)
        try:
            yield out
        except BaseException:
            _cairn.complete_output(False)  # the version is dropped on every rank; the exception goes on
            raise
        _check(_cairn.complete_output(out.valid), "cairn_complete_output")

    @contextlib.contextmanager
    def output_file(self, name: str, label: Optional[str] = None) -> Iterator[str]:
        """One file per rank in a new version: `with c.output_file("rank3.dat") as path:` (see output())."""
        with self.output(label) as out:
            yield out.route(name)

    def have_restart(self) -> Optional[str]:
        """The label of the newest recoverable version, or None. Collective."""
        rc, available, label = _cairn.have_restart()
        _check(rc, "cairn_have_restart")
        return label if available else None

    @contextlib.contextmanager
    def restart_files(self) -> Iterator["RestartVersion"]:
        """Loads the newest recoverable version (its files and the protected regions): `with
        c.restart_files() as r: path = r.route("rank3.dat")`. An exception in the block, or r.reject(),
        on any rank marks the version bad: every rank that left the block normally gets
        InvalidVersionError (what it read is from a rejected version), and the next have_restart()
        offers the one before. Collective."""
        rc, label = _cairn.start_restart()
        _check(rc, "cairn_start_restart")
        version = RestartVersion(self, label)
        try:
            yield version
        except BaseException:
            _cairn.complete_restart(False)
            raise
        _check(_cairn.complete_restart(not version.rejected), "cairn_complete_restart")

    @contextlib.contextmanager
    def restart_file(self, name: str) -> Iterator[str]:
        """One file per rank from the newest version: `with c.restart_file("rank3.dat") as path:`."""
        with self.restart_files() as version:
            yield version.route(name)

    # ---- policy ----
    def need_checkpoint(self) -> bool:
        """Whether a checkpoint is due (interval, halt, end time, signal); the same on every rank. Collective."""
        rc, flag = _cairn.need_checkpoint()
        _check(rc, "cairn_need_checkpoint")
        return flag

    def should_exit(self) -> bool:
        """Whether the job should exit now (halt, end time, signal); the same on every rank. Collective."""
        rc, flag = _cairn.should_exit()
        _check(rc, "cairn_should_exit")
        return flag

    def probe_agents(self) -> bool:
        """Service mode's dynamic agents: take an agent the controller offered now; whether this rank's agent
        changed since the last call. Local to the rank (not collective); always False without the service."""
        rc, changed = _cairn.probe_agents()
        _check(rc, "cairn_probe_agents")
        return changed


class _Version:
    """A version being written or read in a file-API block: routes the block's files."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def route(self, name: str) -> str:
        """The path of your file `name` (a plain file name) in this version."""
        return self._session.route_file(name)


class OutputVersion(_Version):
    """The version being written in a `with session.output():` block."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.valid = True

    def invalidate(self) -> None:
        """This rank declares the version invalid: it is discarded on every rank at the block's end."""
        self.valid = False


class RestartVersion(_Version):
    """The version being read in a `with session.restart_files():` block."""

    def __init__(self, session: Session, label: str) -> None:
        super().__init__(session)
        self.label = label
        self.rejected = False

    def reject(self) -> None:
        """This rank found the data bad: the version is marked bad on every rank at the block's end."""
        self.rejected = True
