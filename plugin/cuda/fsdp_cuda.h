/* fsdp_cuda.h: what the plugin's CUDA code shares (GPU builds only): the
 * compute stream and cudaCheck, which returns a status instead of exiting. */
#ifndef FSDP_CUDA_H
#define FSDP_CUDA_H

#ifdef GPU
#include <cuda_runtime.h>
#include "fsdp.h"

/* Darknet's compute stream.  This Darknet (2018) has no get_cuda_stream():
 * every kernel, cuBLAS and cuDNN call runs on the legacy default stream.
 * Named explicitly so that the plugin means that stream even if it were
 * built with per-thread default streams. */
#define DN_COMPUTE_STREAM cudaStreamLegacy

#define cudaCheck(call) do { \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) \
        return fsdp_fail(FSDP_ERR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(e_)); \
} while (0)

#endif
#endif
