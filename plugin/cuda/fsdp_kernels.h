/* fsdp_kernels.h: the engine's CUDA kernels (GPU builds only).  Every kernel
 * runs on Darknet's compute stream (the legacy default stream) and returns
 * without synchronising; fsdp_kernels_status() reports a launch error. */
#ifndef FSDP_KERNELS_H
#define FSDP_KERNELS_H

#ifdef GPU
#include <stddef.h>
#include "fsdp.h"
#include "fsdp_optim_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exactly fsdp_sgd / fsdp_adam (fsdp_optim.c) on device arrays; g may be NULL. */
void fsdp_sgd_gpu(float *w, float *m, const float *g, size_t n, int decays, const fsdp_optim_args *a);
void fsdp_adam_gpu(float *w, float *m, float *v, const float *g, size_t n, const fsdp_optim_args *a);
/* delta[b][c][s] *= scales[c] / sqrt(rolling_variance[c] + .00001f): the
 * backward of batch norm run in inference mode (frozen layers), as Darknet's
 * GPU forward normalizes (normalize_kernel; its CPU forward uses
 * (sqrt(var) + .000001f) instead, and so does the engine's CPU backward). */
void fsdp_bn_inference_delta_gpu(float *delta, const float *scales, const float *rolling_variance,
                                 int batch, int channels, int spatial);
/* x[0 .. n) *= a (synchronized batch norm's global factor, through fsdp_mem_scale). */
void fsdp_bn_scale_gpu(float *x, int n, float a);
/* x[i] = rand[i] < probability ? 0 : x[i] * scale for i < n: a dropout
 * layer's device forward replayed with the draws it kept (rand), as
 * Darknet's dropout kernel computes it (activation recomputation,
 * fsdp_recompute.h). */
void fsdp_dropout_replay_gpu(float *x, const float *rand, size_t n, float probability, float scale);
/* FSDP_OK, or FSDP_ERR_CUDA with the pending launch error printed. */
fsdp_status fsdp_kernels_status(void);

#ifdef __cplusplus
}
#endif
#endif
#endif
