/* The few declarations of the CUDA driver API that cairn uses, written for cairn (no CUDA header or
 * library is needed to build). They follow the CUDA 12.0 driver API (cuda.h of CUDA 12.0; the same
 * since CUDA 11.x for everything here): the types, the values of the constants, and the symbol names
 * that libcuda.so.1 exports for the versioned entry points (the "_v2" names, which cuda.h's macros
 * select). cairn loads libcuda.so.1 at run time with dlopen (src/device/driver.cpp) and looks each
 * function up by the name in the table below. Plain C, so that the example (examples/heat2d) and the
 * test driver (tests/device/fake_cuda.cpp) use the same lines. */
#ifndef CAIRN_DEVICE_CUDA_DRIVER_H
#define CAIRN_DEVICE_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;                 /* enum cudaError_enum */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_DEINITIALIZED 4
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define CUDA_ERROR_NOT_READY 600

/* CUpointer_attribute */
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define CU_POINTER_ATTRIBUTE_RANGE_SIZE 12

/* CUmemorytype */
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_ARRAY 3
#define CU_MEMORYTYPE_UNIFIED 4

#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

/* The functions, as X(return-type-less name, symbol, parameter list). */
#define CAIRN_CUDA_FUNCTIONS(X)                                                                          \
  X(cuInit, "cuInit", (unsigned int flags))                                                              \
  X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char **text))                          \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                                        \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                                                  \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice device))          \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext * ctx))                                               \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                                 \
  X(cuPointerGetAttribute, "cuPointerGetAttribute", (void *data, int attribute, CUdeviceptr ptr))       \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * dptr, size_t bytes))                                     \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr dptr))                                                       \
  X(cuMemHostRegister, "cuMemHostRegister_v2", (void *p, size_t bytes, unsigned int flags))             \
  X(cuMemHostUnregister, "cuMemHostUnregister", (void *p))                                               \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *dst, CUdeviceptr src, size_t bytes, CUstream s))  \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr dst, const void *src, size_t bytes, CUstream s)) \
  X(cuStreamCreate, "cuStreamCreate", (CUstream * stream, unsigned int flags))                          \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                                       \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned int flags))       \
  X(cuEventCreate, "cuEventCreate", (CUevent * event, unsigned int flags))                              \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))                                                \
  X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))                                    \
  X(cuEventQuery, "cuEventQuery", (CUevent event))                                                       \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                                           \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))                       \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction * fn, CUmodule module, const char *name))   \
  X(cuLaunchKernel, "cuLaunchKernel",                                                                    \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,  \
     unsigned int bz, unsigned int shared_bytes, CUstream stream, void **params, void **extra))

/* A pointer type per function: cairn_cu_cuInit_t, ... */
#define CAIRN_CUDA_TYPEDEF(name, symbol, params) typedef CUresult (*cairn_cu_##name##_t) params;
CAIRN_CUDA_FUNCTIONS(CAIRN_CUDA_TYPEDEF)
#undef CAIRN_CUDA_TYPEDEF

#ifdef __cplusplus
}
#endif

#endif
