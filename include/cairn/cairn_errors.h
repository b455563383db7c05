/* cairn error codes: the one list.
 *
 * Every public call returns 0 on success or one of these negative codes. This X-macro list is the
 * single source: the C enum below, cairn_strerror(), `cairn strerror`, and the docs' error table
 * (docs/errors.md, checked against this list by a test) all come from it.
 *
 * X(NAME, value, "short description")
 *
 * Codes are part of the ABI: a new code is appended with the next free value; none is renumbered.
 */
#ifndef CAIRN_ERRORS_H
#define CAIRN_ERRORS_H

#define CAIRN_ERROR_LIST(X)                                                                       \
  X(SUCCESS, 0, "success")                                                                        \
  X(ERR_INVALID_ARG, -1, "invalid argument")                                                      \
  X(ERR_NOT_INITIALIZED, -2, "cairn is not initialized (call cairn_init first)")                  \
  X(ERR_ALREADY_INITIALIZED, -3, "cairn is already initialized")                                  \
  X(ERR_CONFIG, -4, "invalid configuration")                                                      \
  X(ERR_IO, -5, "I/O error")                                                                      \
  X(ERR_NO_SPACE, -6, "no space left on the device")                                              \
  X(ERR_MPI, -7, "an MPI call failed")                                                            \
  X(ERR_NO_CHECKPOINT, -8, "no recoverable checkpoint")                                           \
  X(ERR_CORRUPT, -9, "checkpoint data failed verification")                                       \
  X(ERR_SIZE_MISMATCH, -10, "region size differs from the checkpoint")                            \
  X(ERR_UNKNOWN_REGION, -11, "no such region")                                                    \
  X(ERR_SEQUENCE, -12, "call made out of order")                                                  \
  X(ERR_NO_MEMORY, -13, "out of memory")                                                          \
  X(ERR_UNRECOVERABLE, -14, "more failures than the redundancy scheme tolerates")                 \
  X(ERR_FORMAT, -15, "unknown or unsupported on-disk format")                                     \
  X(ERR_NOT_SUPPORTED, -16, "operation not supported in this configuration")                      \
  X(ERR_INVALID_VERSION, -17, "a rank declared the checkpoint invalid")                           \
  X(ERR_TRUNCATED, -18, "value truncated: the buffer is too small")                               \
  X(ERR_PREFIX_IN_USE, -19, "the prefix belongs to another job")                                  \
  X(ERR_CANCELLED, -20, "the operation was cancelled before it completed")                        \
  X(ERR_INTERNAL, -99, "internal error (please report)")

#endif
