"""Session.protect on device memory without a GPU: objects with __cuda_array_interface__ and with DLPack
(CUDA device type) whose memory is the simulated CUDA driver's (tests/device/fake_cuda.cpp, loaded by
cairn through the cuda_driver knob, CAIRN_CUDA_DRIVER). Checkpoint, the device buffer overwritten, restart:
the device bytes come back, bit for bit, and nothing was copied at protect. Run under mpirun (2 ranks)
with the build tree's package on PYTHONPATH and FAKE_CUDA set to the simulated driver's path.
"""
import ctypes
import os
import shutil
import sys
import tempfile

import numpy as np
from mpi4py import MPI

import cairn

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
lib = ctypes.CDLL(os.environ["FAKE_CUDA"])
os.environ["CAIRN_CUDA_DRIVER"] = os.environ["FAKE_CUDA"]


def ok(rc):
    assert rc == 0, f"CUDA error {rc}"


ctx = ctypes.c_void_p()
ok(lib.cuInit(0))
ok(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
ok(lib.cuCtxSetCurrent(ctx))


def device_array(values):
    """Device memory holding `values` (float64)."""
    ptr = ctypes.c_ulonglong()
    ok(lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(values.nbytes)))
    ok(lib.cuMemcpyHtoDAsync_v2(ptr, values.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(values.nbytes), None))
    ok(lib.cuStreamSynchronize(None))
    return ptr.value


def read(ptr, n):
    out = np.empty(n, dtype=np.float64)
    ok(lib.cuMemcpyDtoHAsync_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_ulonglong(ptr), ctypes.c_size_t(out.nbytes), None))
    ok(lib.cuStreamSynchronize(None))
    return out


class CudaArray:
    """What CuPy and PyTorch show of a CUDA array: the interface, no buffer protocol."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f8", "strides": None,
                                         "version": 3}


class DLPackArray:
    """A CUDA tensor seen through DLPack only: __dlpack_device__ says CUDA; the capsule is built by numpy's
    DLPack of a host array of the same shape, its data pointer swapped for the device one."""

    def __init__(self, ptr, n):
        self.ptr, self.n = ptr, n
        self.host = np.zeros(n, dtype=np.float64)

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        capsule = self.host.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        tensor = get(capsule, b"dltensor")
        ctypes.c_void_p.from_address(tensor).value = self.ptr  # DLTensor.data
        return capsule


def main():
    work = tempfile.mkdtemp(prefix="cairn-pydev-") if rank == 0 else None
    work = comm.bcast(work, root=0)
    os.environ.update({"CAIRN_PREFIX": work + "/prefix", "CAIRN_CACHE_DIR": work + "/cache", "CAIRN_JOB": "pydev",
                       "CAIRN_REDUNDANCY": "single", "CAIRN_FLUSH_EVERY": "0", "CAIRN_NODE": f"node{rank}"})
    n = 300000
    a_vals = np.arange(n, dtype=np.float64) * (rank + 1)
    b_vals = np.sin(np.arange(n, dtype=np.float64)) + rank
    a, b = device_array(a_vals), device_array(b_vals)
    try:
        with cairn.Session(comm) as c:
            c.protect("a", CudaArray(a, n))
            c.protect("b", DLPackArray(b, n))
            c.device_wait_copied()  # nothing copied yet: returns at once
            c.checkpoint()
            c.device_wait_copied()
            assert c.device_copied_event() != 0
            c.wait()
            junk = np.full(n, -1.0)
            device_junk = device_array(junk)
            ok(lib.cuMemcpyHtoDAsync_v2(ctypes.c_ulonglong(a), junk.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(junk.nbytes), None))
            ok(lib.cuMemcpyHtoDAsync_v2(ctypes.c_ulonglong(b), junk.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(junk.nbytes), None))
            ok(lib.cuStreamSynchronize(None))
            version, level = c.restart()
            assert np.array_equal(read(a, n), a_vals), "region a (__cuda_array_interface__) not restored"
            assert np.array_equal(read(b, n), b_vals), "region b (DLPack) not restored"
            # a read-only device array is refused: a restart writes into it
            ro = CudaArray(device_junk, n)
            ro.__cuda_array_interface__["data"] = (device_junk, True)
            try:
                c.protect("ro", ro)
                raise AssertionError("a read-only device array was accepted")
            except cairn.InvalidArgError:
                pass
            # freed device memory: a clear error, the checkpoint taken stays
            gone = device_array(np.zeros(16))
            ok(lib.cuMemFree_v2(ctypes.c_ulonglong(gone)))
            try:
                c.protect("gone", CudaArray(gone, 16))
                raise AssertionError("freed device memory was accepted")
            except cairn.CairnError as e:
                assert "freed device memory" in str(e), str(e)
            assert c.newest_version() == version
        # a device pointer while no CUDA driver can be loaded: a clear error, not a fault
        os.environ["CAIRN_CUDA_DRIVER"] = "/nonexistent/libcuda.so.1"
        os.environ["CAIRN_JOB"] = "pydev-nodriver"
        os.environ["CAIRN_PREFIX"] = work + "/prefix-nodriver"
        with cairn.Session(comm) as c:
            try:
                c.protect("a", CudaArray(a, n))
                raise AssertionError("a device pointer was accepted without a driver")
            except cairn.CairnError as e:
                assert "no CUDA driver could tell" in str(e) and "/nonexistent/libcuda.so.1" in str(e), str(e)
        print(f"rank {rank}: device regions restored from version {version} at level {level}", flush=True)
    finally:
        comm.barrier()
        if rank == 0:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException as e:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        comm.Abort(1)
