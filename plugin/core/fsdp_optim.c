#include <math.h>
#include "fsdp_optim.h"
#include "fsdp_kernels.h"
#include "fsdp_sum.h"

/* One SGD step whose gradient is g[0] + ... + g[ng-1], added in that order
 * (none when ng is 0), with the same float scalars as
 * update_convolutional_layer computes.  Inlined with ng a constant, each
 * term is one more stream of the loop: summing the terms into a block
 * first and stepping from it took the node-shared update of big.cfg about
 * twice as long (the block's round trips break the streams' prefetch). */
static inline __attribute__((always_inline)) void sgd_terms(float *restrict w, float *restrict m,
                                                            const float *const *g, int ng, size_t n,
                                                            int decays, const fsdp_optim_args *a)
{
    float step = a->learning_rate / a->batch;
    float wd = -a->decay * a->batch;
    for (size_t i = 0; i < n; ++i) {
        float u = m[i];
        if (ng) {
            float s = g[0][i];
            for (int q = 1; q < ng; ++q) s += g[q][i];
            u += s;
        }
        if (decays) u += wd * w[i];
        w[i] += step * u;
        m[i] = a->momentum * u;
    }
}

/* The term counts with a loop of their own: one rank's reduced gradient,
 * or the slots of up to four ranks on one machine. */
#define FSDP_SGD_MAX_TERMS 4

static void sgd_sum(float *w, float *m, const float *const *g, int ng, size_t n, int decays,
                    const fsdp_optim_args *a)
{
    switch (ng) {
    case 0: sgd_terms(w, m, g, 0, n, decays, a); break;
    case 1: sgd_terms(w, m, g, 1, n, decays, a); break;
    case 2: sgd_terms(w, m, g, 2, n, decays, a); break;
    case 3: sgd_terms(w, m, g, 3, n, decays, a); break;
    case 4: sgd_terms(w, m, g, 4, n, decays, a); break;
    default: sgd_terms(w, m, g, ng, n, decays, a); break;   /* right for any count, if slower */
    }
}

void fsdp_sgd(float *w, float *m, const float *g, size_t n, int decays, const fsdp_optim_args *a)
{
    sgd_sum(w, m, &g, g ? 1 : 0, n, decays, a);
}

void fsdp_adam(float *w, float *m, float *v, const float *g, size_t n, const fsdp_optim_args *a)
{
    float wd = -a->decay * a->batch;
    float c1 = 1.f - powf(a->B1, a->t), c2 = 1.f - powf(a->B2, a->t);
    for (size_t i = 0; i < n; ++i) {
        float d = (g ? g[i] : 0.f) + wd * w[i];
        float mi = a->B1 * m[i] + (1 - a->B1) * d;
        float vi = a->B2 * v[i] + (1 - a->B2) * d * d;
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i] + a->learning_rate * (mi / c1) / (sqrtf(vi / c2) + a->eps);
    }
}

void fsdp_optim_step(int device, float *w, float *m, float *v, const float *g, size_t n, int decays,
                     const fsdp_optim_args *a)
{
#ifdef GPU
    if (device) {
        if (a->adam) fsdp_adam_gpu(w, m, v, g, n, a);
        else fsdp_sgd_gpu(w, m, g, n, decays, a);
        return;
    }
#endif
    (void)device;
    if (a->adam) fsdp_adam(w, m, v, g, n, a);
    else fsdp_sgd(w, m, g, n, decays, a);
}

void fsdp_optim_step_sum(float *w, float *m, float *v, const float *const *g, int ng, size_t n, int decays,
                         const fsdp_optim_args *a)
{
    if (!a->adam && ng <= FSDP_SGD_MAX_TERMS) {
        sgd_sum(w, m, g, ng, n, decays, a);
        return;
    }
    /* Adam, or more terms: each block summed aside, then stepped. */
    float block[FSDP_SUM_BLOCK];
    for (size_t j = 0; j < n; j += FSDP_SUM_BLOCK) {
        size_t b = n - j < FSDP_SUM_BLOCK ? n - j : FSDP_SUM_BLOCK;
        fsdp_sum_rows(block, g, ng, j, b);
        fsdp_optim_step(0, w + j, m + j, v ? v + j : NULL, block, b, decays, a);
    }
}

fsdp_status fsdp_optim_status(int device)
{
#ifdef GPU
    if (device) return fsdp_kernels_status();
#endif
    (void)device;
    return FSDP_OK;
}
