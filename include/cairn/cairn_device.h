/* cairn: device (GPU) memory -- the contract of cairn_protect for CUDA device memory, and the calls that
 * order an application's CUDA stream with cairn's copies. Include it beside cairn/cairn.h (it includes
 * it). docs/gpu.md explains the two copy modes.
 *
 * cairn_protect (and cairn_protect_distributed) accept CUDA device memory as they accept host memory:
 * there is no separate call. cairn tells a device pointer from a host one through the CUDA driver, which
 * it loads at run time (the cuda_driver knob, default libcuda.so.1; no CUDA is needed to build or run
 * cairn otherwise), at the first cairn_protect. A device region is copied by cairn on its own CUDA
 * stream, in pieces, into its L1 slot (pinned once), each piece hashed as it lands; it goes through L2
 * and L3 as any version; a restart writes it back into the device only once its bytes are verified.
 *
 * What the application does for a device region:
 *  - before cairn_checkpoint, its writes of the region are complete, or queued on the stream named
 *    with cairn_device_stream();
 *  - with device_copy = wait (the default) it may write the region once cairn_checkpoint returned;
 *    with device_copy = return, it orders its next write of the region after cairn_device_wait_copied();
 *  - the buffer stays allocated until unprotected or finalize (as for host memory);
 *  - at a restart on another rank count, a BLOCK-distributed device region's resize callback
 *    (cairn_set_resize) returns device memory of the same device.
 * One CUDA context (device) per process holds the device regions. Managed (unified) memory counts as
 * host memory. A live cairn_redistribute refuses device regions (CAIRN_ERR_NOT_SUPPORTED).
 *
 * Errors of cairn_protect for memory the host cannot read: CAIRN_ERR_NOT_SUPPORTED when no CUDA driver
 * can be loaded or it sees no GPU (nothing could tell whether it is device memory); CAIRN_ERR_INVALID_ARG
 * for memory the driver does not know either (freed device memory), or a device range past the end of
 * its allocation. A device copy that fails (a buffer freed after cairn_protect) fails its checkpoint with
 * CAIRN_ERR_IO and the driver's message; earlier versions stay.
 */
#ifndef CAIRN_CAIRN_DEVICE_H
#define CAIRN_CAIRN_DEVICE_H

#include "cairn/cairn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The application's CUDA stream (a CUstream or cudaStream_t; NULL: none) whose queued work every later
 * checkpoint's device copy follows: in cairn_checkpoint cairn records an event on it and its own stream
 * waits for that event, so the application need not synchronize before checkpointing. Without one, the
 * application's writes of protected device buffers must be complete when it calls cairn_checkpoint.
 * Local. */
CAIRN_EXPORT int cairn_device_stream(void *stream);

/* Order the application after the newest checkpoint's device copy: with a stream (CUstream /
 * cudaStream_t), the work queued on it from now on waits for the copy (cuStreamWaitEvent: the calling
 * thread does not wait); with NULL, the calling thread waits until the copy is done. With device_copy =
 * return, call it before the next write of a protected device buffer. Returns at once when there was no
 * device copy. Local. */
CAIRN_EXPORT int cairn_device_wait_copied(void *stream);

/* *event = the CUevent (cudaEvent_t) recorded after the newest checkpoint's device copy, or NULL before
 * any: for applications that manage their own waits. It stays owned by cairn and valid until
 * cairn_finalize; the next checkpoint records it again. Local. */
CAIRN_EXPORT int cairn_device_copied_event(void **event);

#ifdef __cplusplus
}
#endif

#endif
