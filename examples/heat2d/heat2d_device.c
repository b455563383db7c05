/* heat2d --device: the grid lives in GPU memory between steps. The CUDA driver is loaded with dlopen and
 * the sweep is a kernel written in PTX below, which the driver compiles for the GPU at hand (cuModuleLoadData),
 * so no CUDA compiler or CUDA header is needed to build it. Halo rows travel through the host (one row each
 * way per neighbour and step), as in the host version.
 *
 * The kernel does exactly the host version's arithmetic, in the same order, with rounding to nearest and no
 * fused multiply-add: next = 0.25 * (((above + below) + left) + right). So the device run's result is the
 * host run's, bit for bit. */
#define _POSIX_C_SOURCE 200809L

#include "heat2d_device.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* heat2d_sweep(double *next, const double *cur, long n, long rows, long first_row): one thread per cell;
 * blockIdx.y + 1 is the local row (1..rows), blockIdx.x * blockDim.x + threadIdx.x the column. Global edge
 * rows and the edge columns are never written. PTX ISA 7.0; the driver JIT-compiles it for the GPU at hand.
 * Its .target line is filled in at load: sm_52 (Maxwell and newer), else sm_75, for drivers whose compiler
 * no longer takes the oldest targets (CUDA 13 dropped Maxwell to Volta). */
static const char kSweepPtxTarget[] = ".target sm_52\n";
static const char kSweepPtx[] = /* after ".version 7.0" and the .target line */
    ".address_size 64\n"
    "\n"
    ".visible .entry heat2d_sweep(\n"
    "    .param .u64 p_next,\n"
    "    .param .u64 p_cur,\n"
    "    .param .u64 p_n,\n"
    "    .param .u64 p_rows,\n"
    "    .param .u64 p_first\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<24>;\n"
    "    .reg .f64 %fd<8>;\n"
    "\n"
    "    ld.param.u64 %rd1, [p_next];\n"
    "    ld.param.u64 %rd2, [p_cur];\n"
    "    ld.param.u64 %rd3, [p_n];\n"
    "    ld.param.u64 %rd4, [p_rows];\n"
    "    ld.param.u64 %rd5, [p_first];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    cvta.to.global.u64 %rd2, %rd2;\n"
    "    mov.u32 %r1, %ctaid.x;\n"
    "    mov.u32 %r2, %ntid.x;\n"
    "    mov.u32 %r3, %tid.x;\n"
    "    mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "    cvt.s64.s32 %rd6, %r4;\n"          /* c */
    "    mov.u32 %r5, %ctaid.y;\n"
    "    cvt.s64.s32 %rd7, %r5;\n"
    "    add.s64 %rd7, %rd7, 1;\n"          /* r */
    "    add.s64 %rd8, %rd3, -1;\n"         /* n - 1 */
    "    setp.lt.s64 %p1, %rd6, 1;\n"
    "    @%p1 bra DONE;\n"
    "    setp.ge.s64 %p2, %rd6, %rd8;\n"
    "    @%p2 bra DONE;\n"
    "    setp.gt.s64 %p3, %rd7, %rd4;\n"
    "    @%p3 bra DONE;\n"
    "    add.s64 %rd9, %rd5, %rd7;\n"
    "    add.s64 %rd9, %rd9, -1;\n"         /* global row */
    "    setp.eq.s64 %p1, %rd9, 0;\n"
    "    @%p1 bra DONE;\n"
    "    setp.eq.s64 %p2, %rd9, %rd8;\n"
    "    @%p2 bra DONE;\n"
    "    mul.lo.s64 %rd10, %rd7, %rd3;\n"
    "    add.s64 %rd10, %rd10, %rd6;\n"
    "    shl.b64 %rd11, %rd10, 3;\n"        /* byte offset of [r][c] */
    "    add.s64 %rd12, %rd2, %rd11;\n"
    "    shl.b64 %rd13, %rd3, 3;\n"         /* bytes per row */
    "    sub.s64 %rd14, %rd12, %rd13;\n"
    "    add.s64 %rd15, %rd12, %rd13;\n"
    "    ld.global.f64 %fd1, [%rd14];\n"    /* above */
    "    ld.global.f64 %fd2, [%rd15];\n"    /* below */
    "    ld.global.f64 %fd3, [%rd12+-8];\n" /* left */
    "    ld.global.f64 %fd4, [%rd12+8];\n"  /* right */
    "    add.rn.f64 %fd5, %fd1, %fd2;\n"
    "    add.rn.f64 %fd5, %fd5, %fd3;\n"
    "    add.rn.f64 %fd5, %fd5, %fd4;\n"
    "    mul.rn.f64 %fd6, %fd5, 0d3FD0000000000000;\n" /* 0.25 */
    "    add.s64 %rd16, %rd1, %rd11;\n"
    "    st.global.f64 [%rd16], %fd6;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

/* The driver's functions, looked up by the names in device/cuda_driver.h. */
static struct {
#define HEAT2D_CU_MEMBER(name, symbol, params) cairn_cu_##name##_t name;
  CAIRN_CUDA_FUNCTIONS(HEAT2D_CU_MEMBER)
#undef HEAT2D_CU_MEMBER
} cu;

static int failed(CUresult rc, const char *call, char *err, size_t len) {
  const char *text = NULL;
  if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(rc, &text) != CUDA_SUCCESS || text == NULL) text = "?";
  snprintf(err, len, "%s: CUDA error %d (%s)", call, rc, text);
  return -1;
}
#define CU(call)                                                  \
  do {                                                            \
    CUresult rc_ = (call);                                        \
    if (rc_ != CUDA_SUCCESS) return failed(rc_, #call, err, len); \
  } while (0)

static size_t row_bytes(const gpu_grid *g) { return (size_t)g->n * sizeof(double); }

int gpu_open(gpu_grid *g, int local_rank, long n, long rows, long first_row, const double *cur,
             const double *next, char *err, size_t len) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->rows = rows;
  g->first_row = first_row;
  if (rows > 65535) { /* one block row per grid row: gridDim.y is at most 65535 */
    snprintf(err, len, "--device takes at most 65535 rows per rank, this rank has %ld", rows);
    return -1;
  }
  const char *path = getenv("CAIRN_CUDA_DRIVER");
  if (path == NULL || *path == '\0') path = "libcuda.so.1";
  g->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (g->library == NULL) {
    snprintf(err, len, "cannot load the CUDA driver %s: %s", path, dlerror());
    return -1;
  }
#define HEAT2D_CU_RESOLVE(name, symbol, params)                                 \
  *(void **)(&cu.name) = dlsym(g->library, symbol);                            \
  if (cu.name == NULL) {                                                        \
    snprintf(err, len, "the CUDA driver %s lacks %s", path, symbol);            \
    return -1;                                                                  \
  }
  CAIRN_CUDA_FUNCTIONS(HEAT2D_CU_RESOLVE)
#undef HEAT2D_CU_RESOLVE
  int devices = 0;
  CUdevice dev = 0;
  CU(cu.cuInit(0));
  CU(cu.cuDeviceGetCount(&devices));
  if (devices < 1) {
    snprintf(err, len, "the CUDA driver %s sees no GPU", path);
    return -1;
  }
  CU(cu.cuDeviceGet(&dev, local_rank % devices));
  CU(cu.cuDevicePrimaryCtxRetain(&g->context, dev));
  CU(cu.cuCtxSetCurrent(g->context));
  {
    static char ptx[sizeof kSweepPtx + 64];
    const char *targets[] = {kSweepPtxTarget, ".target sm_75\n"};
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; i < 2; i++) {
      strcpy(ptx, ".version 7.0\n");
      strcat(ptx, targets[i]);
      strcat(ptx, kSweepPtx);
      rc = cu.cuModuleLoadData(&g->module, ptx);
      if (rc == CUDA_SUCCESS) break;
    }
    if (rc != CUDA_SUCCESS) return failed(rc, "cuModuleLoadData (the sweep's PTX)", err, len);
  }
  CU(cu.cuModuleGetFunction(&g->sweep, g->module, "heat2d_sweep"));
  CU(cu.cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING));
  size_t bytes = (size_t)(rows + 2) * row_bytes(g);
  CU(cu.cuMemAlloc(&g->cur, bytes));
  CU(cu.cuMemAlloc(&g->next, bytes));
  CU(cu.cuMemcpyHtoDAsync(g->cur, cur, bytes, g->stream));
  CU(cu.cuMemcpyHtoDAsync(g->next, next, bytes, g->stream));
  CU(cu.cuStreamSynchronize(g->stream));
  return 0;
}

int gpu_rows_out(gpu_grid *g, double *host, char *err, size_t len) {
  size_t rb = row_bytes(g);
  CU(cu.cuMemcpyDtoHAsync((char *)host + rb, g->cur + rb, rb, g->stream));
  CU(cu.cuMemcpyDtoHAsync((char *)host + (size_t)g->rows * rb, g->cur + (size_t)g->rows * rb, rb, g->stream));
  CU(cu.cuStreamSynchronize(g->stream));
  return 0;
}

int gpu_halos_in(gpu_grid *g, const double *host, char *err, size_t len) {
  size_t rb = row_bytes(g);
  /* queued before the sweep on the same stream; the host rows must stay until the copies ran */
  CU(cu.cuMemcpyHtoDAsync(g->cur, host, rb, g->stream));
  CU(cu.cuMemcpyHtoDAsync(g->cur + (size_t)(g->rows + 1) * rb, (const char *)host + (size_t)(g->rows + 1) * rb, rb,
                          g->stream));
  CU(cu.cuStreamSynchronize(g->stream));
  return 0;
}

int gpu_sweep(gpu_grid *g, char *err, size_t len) {
  const unsigned threads = 128;
  unsigned blocks_x = (unsigned)((g->n + threads - 1) / threads);
  void *params[] = {&g->next, &g->cur, &g->n, &g->rows, &g->first_row};
  CU(cu.cuLaunchKernel(g->sweep, blocks_x, (unsigned)g->rows, 1, threads, 1, 1, 0, g->stream, params, NULL));
  CUdeviceptr t = g->cur;
  g->cur = g->next;
  g->next = t;
  return 0;
}

int gpu_grid_out(gpu_grid *g, double *host, char *err, size_t len) {
  size_t rb = row_bytes(g);
  CU(cu.cuMemcpyDtoHAsync((char *)host + rb, g->cur + rb, (size_t)g->rows * rb, g->stream));
  CU(cu.cuStreamSynchronize(g->stream));
  return 0;
}

void *gpu_owned_rows(const gpu_grid *g) { return (void *)(uintptr_t)(g->cur + row_bytes(g)); }

void gpu_close(gpu_grid *g) {
  if (g->library == NULL) return;
  if (g->stream) cu.cuStreamSynchronize(g->stream);
  if (g->cur) cu.cuMemFree(g->cur);
  if (g->next) cu.cuMemFree(g->next);
  if (g->stream) cu.cuStreamDestroy(g->stream);
}
