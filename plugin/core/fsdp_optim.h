/* fsdp_optim.h: Darknet's SGD and Adam, applied to a shard.
 *
 * Darknet keeps the gradient and the momentum in one buffer (weight_updates):
 * backward adds the batch's (negative) gradient into it, the update adds
 * -decay*batch*w, moves w by lr/batch times it, then scales it by momentum.
 * Here the gradient arrives reduced over ranks and the momentum lives in m,
 * so m += g reproduces that buffer.  Adam follows Darknet's GPU update
 * (adam_update_gpu): decay on every tensor, no division by the batch. */
#ifndef FSDP_OPTIM_H
#define FSDP_OPTIM_H

#include <stddef.h>
#include "fsdp.h"
#include "fsdp_mem.h"
#include "fsdp_optim_args.h"

/* The optimizer's state for a rank's own part of a trainable flat. */
typedef struct fsdp_optim_state {
    float *m;            /* SGD's momentum, Adam's first moment */
    float *v;            /* Adam's second moment; NULL under SGD */
    int grad_in_m;       /* gradients accumulate into m (a world of one under SGD: fsdp_grad.h) */
} fsdp_optim_state;

/* Zeroed state for n floats in m's kind of memory.  Alone, SGD's gradient
 * can accumulate straight into the momentum, as in Darknet's
 * weight_updates: the same floats and no buffer. */
fsdp_status fsdp_optim_state_alloc(const fsdp_mem_ctx *mem, fsdp_optim_state *s, size_t n, int adam, int world);
void fsdp_optim_state_free(const fsdp_mem_ctx *mem, fsdp_optim_state *s);

/* w, m (and v for Adam) hold n floats; g may be NULL (no gradient this step). */
void fsdp_sgd(float *w, float *m, const float *g, size_t n, int decays, const fsdp_optim_args *a);
void fsdp_adam(float *w, float *m, float *v, const float *g, size_t n, const fsdp_optim_args *a);

/* SGD or Adam (a->adam) on n floats of host arrays, or of device arrays on
 * the GPU kernels (fsdp_kernels.h) when `device`: the one place the
 * optimizer chooses between them.  v is NULL for SGD. */
void fsdp_optim_step(int device, float *w, float *m, float *v, const float *g, size_t n, int decays,
                     const fsdp_optim_args *a);
/* The host step on n floats whose gradient is g[0] + g[1] + ... + g[ng-1]
 * (ng >= 1, each n floats from where it points), added in that order: the
 * floats of a reduce-scatter that sums in rank order (fsdp_sum.h), read
 * straight from the ranks' buffers. */
void fsdp_optim_step_sum(float *w, float *m, float *v, const float *const *g, int ng, size_t n, int decays,
                         const fsdp_optim_args *a);
/* After a step: FSDP_OK, or the error a device kernel launch left. */
fsdp_status fsdp_optim_status(int device);

#endif
