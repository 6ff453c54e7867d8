#include <math.h>
#include "fsdp_optim.h"
#include "fsdp_kernels.h"

void fsdp_sgd(float *w, float *m, const float *g, size_t n, int decays, const fsdp_optim_args *a)
{
    /* The same float scalars as update_convolutional_layer computes. */
    float step = a->learning_rate / a->batch;
    float wd = -a->decay * a->batch;
    for (size_t i = 0; i < n; ++i) {
        float u = m[i];
        if (g) u += g[i];
        if (decays) u += wd * w[i];
        w[i] += step * u;
        m[i] = a->momentum * u;
    }
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

fsdp_status fsdp_optim_status(int device)
{
#ifdef GPU
    if (device) return fsdp_kernels_status();
#endif
    (void)device;
    return FSDP_OK;
}
