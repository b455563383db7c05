/* heat2d --device: the grid in GPU memory, the sweep a kernel loaded from PTX text through the CUDA
 * driver API, which is loaded at run time (no CUDA is needed to build the example). See heat2d_device.c. */
#ifndef HEAT2D_DEVICE_H
#define HEAT2D_DEVICE_H

#include <stddef.h>

#include "device/cuda_driver.h"

typedef struct gpu_grid {
  void *library;
  CUcontext context;
  CUstream stream;
  CUmodule module;
  CUfunction sweep;
  CUdeviceptr cur, next; /* (rows + 2) x n doubles each: halo, owned rows, halo */
  long n, rows, first_row;
} gpu_grid;

/* Load the driver (CAIRN_CUDA_DRIVER, else libcuda.so.1), take device local_rank % devices, load the
 * kernel, allocate both buffers and copy the host buffers (already initialized) in. 0, or -1 with a
 * message in err. */
int gpu_open(gpu_grid *g, int local_rank, long n, long rows, long first_row, const double *cur,
             const double *next, char *err, size_t len);
/* Copy the owned rows' first and last row out into the host buffer `host` (same layout). */
int gpu_rows_out(gpu_grid *g, double *host, char *err, size_t len);
/* Copy the halo rows of `host` in. */
int gpu_halos_in(gpu_grid *g, const double *host, char *err, size_t len);
/* One Jacobi sweep (queued on g->stream), then swap cur and next. */
int gpu_sweep(gpu_grid *g, char *err, size_t len);
/* Copy every owned row out into `host` (for the result) and wait. */
int gpu_grid_out(gpu_grid *g, double *host, char *err, size_t len);
/* The owned rows of the current buffer, as a pointer for cairn_protect. */
void *gpu_owned_rows(const gpu_grid *g);
void gpu_close(gpu_grid *g);

#endif
