/* docs/gpu.md: device memory protected as host memory is. The two CUDA names stand in for <cuda.h>
 * (CUDA 12's declarations; cairn needs no CUDA to build, nor does this check). */
#include <stddef.h>

#include <mpi.h>

#include <cairn/cairn.h>
#include <cairn/cairn_device.h>

typedef unsigned long long CUdeviceptr;
int cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
void launch_step(void *stream, CUdeviceptr grid); /* the application's kernels */

void doc_fragment(void *stream, size_t bytes) {
#include DOC_FRAGMENT
}
