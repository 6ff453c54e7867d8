/* fsdp_kernels.cu: the engine's CUDA kernels (fsdp_kernels.h).
 *
 * Every kernel runs on Darknet's compute stream (the legacy default stream)
 * and returns without synchronising; fsdp_kernels_status() reports a launch
 * error.  Sizes may exceed INT_MAX elements: indices are size_t and every
 * kernel walks its array with a grid-stride loop over a bounded grid.
 *
 * The optimizer kernels compute exactly what fsdp_sgd / fsdp_adam
 * (fsdp_optim.c) compute on the host: the same float scalars (computed here
 * on the host by the same expressions), the same operations in the same
 * order.  nvcc would contract a * b + c into one fused multiply-add, which
 * rounds once instead of twice; the _rn intrinsics are never contracted, so
 * every operation rounds as the host's does and the results match bit for
 * bit (the host code is built without FMA contraction: plain x86-64 SSE).
 */
#include <stddef.h>
#include <math.h>
#include "fsdp.h"
#include "fsdp_cuda.h"
#include "fsdp_kernels.h"

#define FSDP_BLOCK 256
/* Enough resident threads for any current GPU; larger arrays loop. */
#define FSDP_MAX_BLOCKS 32768

static unsigned int blocks_for(size_t n)
{
    size_t b = (n + FSDP_BLOCK - 1) / FSDP_BLOCK;
    return (unsigned int)(b < FSDP_MAX_BLOCKS ? b : FSDP_MAX_BLOCKS);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

/* fsdp_sgd, element by element:
 *   u = m + g + wd * w;  w += step * u;  m = momentum * u */
__global__ void sgd_kernel(float *w, float *m, const float *g, size_t n, int decays,
                           float step, float wd, float momentum)
{
    GRID_STRIDE(i, n) {
        float u = m[i];
        if (g) u = __fadd_rn(u, g[i]);
        if (decays) u = __fadd_rn(u, __fmul_rn(wd, w[i]));
        w[i] = __fadd_rn(w[i], __fmul_rn(step, u));
        m[i] = __fmul_rn(momentum, u);
    }
}

/* fsdp_adam, element by element (one_b1 = 1 - B1, one_b2 = 1 - B2):
 *   d = g + wd * w;  m = B1 m + (1 - B1) d;  v = B2 v + (1 - B2) d d;
 *   w = w + lr * (m / c1) / (sqrt(v / c2) + eps) */
__global__ void adam_kernel(float *w, float *m, float *v, const float *g, size_t n, float wd,
                            float b1, float one_b1, float b2, float one_b2, float c1, float c2,
                            float lr, float eps)
{
    GRID_STRIDE(i, n) {
        float d = __fadd_rn(g ? g[i] : 0.f, __fmul_rn(wd, w[i]));
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_b1, d));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_b2, d), d));
        m[i] = mi;
        v[i] = vi;
        float num = __fmul_rn(lr, __fdiv_rn(mi, c1));
        float den = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, c2)), eps);
        w[i] = __fadd_rn(w[i], __fdiv_rn(num, den));
    }
}

/* delta[b][c][s] *= scales[c] / sqrtf(rolling_variance[c] + .00001f), the
 * factor rounded to float first, as the engine's host loop does. */
__global__ void bn_inference_delta_kernel(float *delta, const float *scales,
                                          const float *rolling_variance, size_t n,
                                          size_t channels, size_t spatial)
{
    GRID_STRIDE(i, n) {
        size_t c = (i / spatial) % channels;
        float k = __fdiv_rn(scales[c], __fsqrt_rn(__fadd_rn(rolling_variance[c], .00001f)));
        delta[i] = __fmul_rn(delta[i], k);
    }
}

extern "C" void fsdp_sgd_gpu(float *w, float *m, const float *g, size_t n, int decays,
                             const fsdp_optim_args *a)
{
    if (n == 0) return;
    /* The same float scalars as fsdp_sgd. */
    float step = a->learning_rate / a->batch;
    float wd = -a->decay * a->batch;
    sgd_kernel<<<blocks_for(n), FSDP_BLOCK, 0, DN_COMPUTE_STREAM>>>(w, m, g, n, decays, step, wd,
                                                                    a->momentum);
}

extern "C" void fsdp_adam_gpu(float *w, float *m, float *v, const float *g, size_t n,
                              const fsdp_optim_args *a)
{
    if (n == 0) return;
    /* The same float scalars as fsdp_adam. */
    float wd = -a->decay * a->batch;
    float c1 = 1.f - powf(a->B1, a->t), c2 = 1.f - powf(a->B2, a->t);
    adam_kernel<<<blocks_for(n), FSDP_BLOCK, 0, DN_COMPUTE_STREAM>>>(
        w, m, v, g, n, wd, a->B1, 1 - a->B1, a->B2, 1 - a->B2, c1, c2, a->learning_rate, a->eps);
}

extern "C" void fsdp_bn_inference_delta_gpu(float *delta, const float *scales,
                                            const float *rolling_variance, int batch,
                                            int channels, int spatial)
{
    if (batch <= 0 || channels <= 0 || spatial <= 0) return;
    size_t n = (size_t)batch * (size_t)channels * (size_t)spatial;
    bn_inference_delta_kernel<<<blocks_for(n), FSDP_BLOCK, 0, DN_COMPUTE_STREAM>>>(
        delta, scales, rolling_variance, n, (size_t)channels, (size_t)spatial);
}

/* One multiplication, rounded as Darknet's kernel rounds it: nothing to contract. */
__global__ void dropout_replay_kernel(float *x, const float *rand, size_t n, float probability, float scale)
{
    GRID_STRIDE(i, n) x[i] = rand[i] < probability ? 0 : __fmul_rn(x[i], scale);
}

extern "C" void fsdp_dropout_replay_gpu(float *x, const float *rand, size_t n, float probability, float scale)
{
    if (!n) return;
    dropout_replay_kernel<<<blocks_for(n), FSDP_BLOCK, 0, DN_COMPUTE_STREAM>>>(x, rand, n, probability, scale);
}

/* cudaGetLastError also clears a launch error, so one failure is reported once. */
extern "C" fsdp_status fsdp_kernels_status(void)
{
    cudaCheck(cudaGetLastError());
    return FSDP_OK;
}
