/* test_kernels_gpu: the plugin's CUDA kernels (fsdp_kernels.h) against the
 * host code they reproduce: fsdp_sgd_gpu / fsdp_adam_gpu against fsdp_sgd /
 * fsdp_adam (fsdp_optim.c), with and without a gradient, with and without
 * decay, on seeded random data; fsdp_bn_inference_delta_gpu against the
 * engine's host loop; fsdp_dropout_replay_gpu against Darknet's dropout
 * formula.  Each comparison passes with a largest relative error
 * of at most 1e-6 (the kernels round as the host does, so 0 is expected; the
 * count of elements that differ in any bit is printed too).  Arrays longer
 * than INT_MAX elements are checked where the GPU has the memory.
 *
 * A plain program, not Criterion: Criterion forks, and CUDA does not survive
 * a fork.  Exit 0 passed, 1 failed, 77 skipped (no GPU).
 *
 * `test_kernels_gpu --probe` only describes GPU 0 as the CUDA runtime sees
 * it (tools/gpu-check): exit 0, or 77 without a GPU. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "gpu_test.h"
#include "fsdp_kernels.h"
#include "fsdp_optim.h"

#define MAX_REL_ERR 1e-6

static int failures, checks;

static void launched(const char *what)
{
    if (fsdp_kernels_status() != FSDP_OK) {
        fprintf(stderr, "test_kernels_gpu: %s: launch failed\n", what);
        exit(1);
    }
}

/* --- seeded data --------------------------------------------------------- */

static uint64_t rng = 0x5eed5eed5eedULL;

static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
}

static float *host_floats(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "test_kernels_gpu: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = uniform(lo, hi);
    return p;
}

static float *to_device(const float *h, size_t n)
{
    float *d = NULL;
    cuda_must(cudaMalloc((void **)&d, (n ? n : 1) * sizeof(float)), "cudaMalloc");
    cuda_must(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return d;
}

/* Copies the device array back and compares it; frees nothing.  Returns
 * how many elements differ in some bit. */
static size_t expect_close(const char *what, const float *dev, const float *want, size_t n,
                           size_t base)
{
    float *got = host_floats(n, 0, 0);
    cuda_must(cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    double worst = 0;
    size_t at = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        double rel = g == w ? 0 : fabs(g - w) / fmax(fabs(w), 1e-30);
        if (isnan(rel) || isnan(g) != isnan(w))
            rel = INFINITY;
        differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
        if (rel > worst) {
            worst = rel;
            at = i;
        }
    }
    checks++;
    int ok = worst <= MAX_REL_ERR;
    printf("%-4s %-52s n=%-10zu max rel err %.3g%s, %zu of %zu differ in some bit\n",
           ok ? "ok" : "FAIL", what, n, worst, ok ? "" : " (limit 1e-6)", differ, n);
    if (!ok) {
        fprintf(stderr, "FAIL %s: element %zu: got %.9g, want %.9g\n", what, base + at,
                got[at], want[at]);
        failures++;
    }
    free(got);
    return differ;
}

/* --- optimizers ---------------------------------------------------------- */

static fsdp_optim_args sgd_args(void)
{
    return (fsdp_optim_args){ .learning_rate = 0.0137f, .momentum = 0.9f, .decay = 0.0005f,
                              .batch = 96 };
}

static fsdp_optim_args adam_args(int t)
{
    return (fsdp_optim_args){ .learning_rate = 0.001f, .momentum = 0.9f, .decay = 0.0005f,
                              .batch = 64, .adam = 1, .B1 = 0.9f, .B2 = 0.999f,
                              .eps = 0.000001f, .t = t };
}

static void check_sgd(size_t n, int with_g, int decays)
{
    fsdp_optim_args a = sgd_args();
    float *w = host_floats(n, -1, 1), *m = host_floats(n, -0.5f, 0.5f);
    float *g = with_g ? host_floats(n, -3, 3) : NULL;
    float *dw = to_device(w, n), *dm = to_device(m, n), *dg = g ? to_device(g, n) : NULL;
    /* Two steps, so the second starts from the first's momentum. */
    for (int step = 0; step < 2; step++) {
        fsdp_sgd(w, m, g, n, decays, &a);
        fsdp_sgd_gpu(dw, dm, dg, n, decays, &a);
        launched("fsdp_sgd_gpu");
    }
    char what[96];
    snprintf(what, sizeof what, "sgd %s gradient, decays=%d: w", with_g ? "with" : "no", decays);
    expect_close(what, dw, w, n, 0);
    snprintf(what, sizeof what, "sgd %s gradient, decays=%d: momentum", with_g ? "with" : "no",
             decays);
    expect_close(what, dm, m, n, 0);
    cudaFree(dw);
    cudaFree(dm);
    cudaFree(dg);
    free(w);
    free(m);
    free(g);
}

static void check_adam(size_t n, int with_g, float decay)
{
    float *w = host_floats(n, -1, 1), *m = host_floats(n, -0.1f, 0.1f);
    float *v = host_floats(n, 0, 0.01f);
    float *g = with_g ? host_floats(n, -3, 3) : NULL;
    float *dw = to_device(w, n), *dm = to_device(m, n), *dv = to_device(v, n);
    float *dg = g ? to_device(g, n) : NULL;
    for (int t = 1; t <= 3; t++) {
        fsdp_optim_args a = adam_args(t);
        a.decay = decay;
        fsdp_adam(w, m, v, g, n, &a);
        fsdp_adam_gpu(dw, dm, dv, dg, n, &a);
        launched("fsdp_adam_gpu");
    }
    const char *parts[] = { "w", "m", "v" };
    const float *dev[] = { dw, dm, dv }, *host[] = { w, m, v };
    for (int i = 0; i < 3; i++) {
        char what[96];
        snprintf(what, sizeof what, "adam %s gradient, decay=%g, t=1..3: %s",
                 with_g ? "with" : "no", decay, parts[i]);
        expect_close(what, dev[i], host[i], n, 0);
    }
    cudaFree(dw);
    cudaFree(dm);
    cudaFree(dv);
    cudaFree(dg);
    free(w);
    free(m);
    free(v);
    free(g);
}

/* --- batch norm in inference mode ---------------------------------------- */

/* The engine's host loop (fsdp_engine.c, frozen_backward). */
static void bn_host(float *delta, const float *scales, const float *var, int batch, int channels,
                    int spatial)
{
    for (int b = 0; b < batch; ++b)
        for (int c = 0; c < channels; ++c) {
            float k = scales[c] / sqrtf(var[c] + .00001f);
            float *d = delta + ((size_t)b * channels + c) * spatial;
            for (int s = 0; s < spatial; ++s)
                d[s] *= k;
        }
}

static void check_bn(int batch, int channels, int spatial)
{
    size_t n = (size_t)batch * channels * spatial;
    float *delta = host_floats(n, -2, 2), *scales = host_floats((size_t)channels, -1.5f, 1.5f);
    float *var = host_floats((size_t)channels, 0, 4);
    var[0] = 0; /* the epsilon alone */
    float *dd = to_device(delta, n), *ds = to_device(scales, (size_t)channels);
    float *dv = to_device(var, (size_t)channels);
    bn_host(delta, scales, var, batch, channels, spatial);
    fsdp_bn_inference_delta_gpu(dd, ds, dv, batch, channels, spatial);
    launched("fsdp_bn_inference_delta_gpu");
    char what[96];
    snprintf(what, sizeof what, "bn inference delta, batch %d x %d channels x %d", batch,
             channels, spatial);
    expect_close(what, dd, delta, n, 0);
    cudaFree(dd);
    cudaFree(ds);
    cudaFree(dv);
    free(delta);
    free(scales);
    free(var);
}

/* --- dropout replay ------------------------------------------------------ */

/* Darknet's dropout kernel (dropout_layer_kernels.cu), which the replay
 * must match bit for bit; every element differing counts. */
static void check_dropout(size_t n, float probability)
{
    float *x = host_floats(n, -3, 3), *rnd = host_floats(n, 0, 1);
    float *dx = to_device(x, n), *dr = to_device(rnd, n);
    float scale = 1.f / (1.f - probability);
    for (size_t i = 0; i < n; i++)
        x[i] = rnd[i] < probability ? 0 : x[i] * scale;
    fsdp_dropout_replay_gpu(dx, dr, n, probability, scale);
    launched("fsdp_dropout_replay_gpu");
    char what[96];
    snprintf(what, sizeof what, "dropout replay, probability %.2f", probability);
    if (expect_close(what, dx, x, n, 0)) {
        fprintf(stderr, "FAIL %s: must match Darknet's kernel bit for bit\n", what);
        failures++;
    }
    cudaFree(dx);
    cudaFree(dr);
    free(x);
    free(rnd);
}

/* --- more than INT_MAX elements ------------------------------------------ */

/* Does the GPU have `bytes` free, with 1 GiB to spare?  If not, say that
 * `what` is skipped. */
static int fits(size_t bytes, const char *what)
{
    size_t free_b = 0, total = 0;
    cuda_must(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo");
    if (free_b > bytes + ((size_t)1 << 30))
        return 1;
    printf("skip %s past INT_MAX elements: needs %.1f GiB of free GPU memory\n", what,
           bytes / 1073741824.0);
    return 0;
}

/* `bytes` of device memory, every byte `fill`. */
static float *device_filled(size_t bytes, int fill)
{
    float *d = NULL;
    cuda_must(cudaMalloc((void **)&d, bytes), "cudaMalloc");
    cuda_must(cudaMemset(d, fill, bytes), "cudaMemset");
    return d;
}

/* Windows of `win` elements checked: the start, around INT_MAX, the end. */
static void windows(size_t n, size_t win, size_t starts[3])
{
    starts[0] = 0;
    starts[1] = (size_t)INT_MAX - win / 2;
    starts[2] = n - win;
}

/* SGD without gradient or decay on 2^31 + 2^20 + 5 floats filled with one
 * byte pattern: every element ends the same, so windows of the result can be
 * checked against the host update of one element. */
static void check_sgd_huge(void)
{
    size_t n = ((size_t)1 << 31) + ((size_t)1 << 20) + 5, win = (size_t)1 << 20;
    size_t bytes = n * sizeof(float);
    if (!fits(2 * bytes, "sgd"))
        return;
    float *dw = device_filled(bytes, 0x3f), *dm = device_filled(bytes, 0xbe);
    float w0, m0;
    memset(&w0, 0x3f, sizeof w0);
    memset(&m0, 0xbe, sizeof m0);
    fsdp_optim_args a = sgd_args();
    fsdp_sgd(&w0, &m0, NULL, 1, 0, &a);
    fsdp_sgd_gpu(dw, dm, NULL, n, 0, &a);
    launched("fsdp_sgd_gpu");
    float *want_w = host_floats(win, 0, 0), *want_m = host_floats(win, 0, 0);
    for (size_t i = 0; i < win; i++) {
        want_w[i] = w0;
        want_m[i] = m0;
    }
    size_t at[3];
    windows(n, win, at);
    for (int k = 0; k < 3; k++) {
        char what[96];
        snprintf(what, sizeof what, "sgd on 2^31+2^20+5 floats, [%zu, +2^20): w", at[k]);
        expect_close(what, dw + at[k], want_w, win, at[k]);
        snprintf(what, sizeof what, "sgd on 2^31+2^20+5 floats, [%zu, +2^20): momentum", at[k]);
        expect_close(what, dm + at[k], want_m, win, at[k]);
    }
    cudaFree(dw);
    cudaFree(dm);
    free(want_w);
    free(want_m);
}

/* batch norm delta on 1 x 3 x 716,000,000 (2.1e9) elements: per channel,
 * one value. */
static void check_bn_huge(void)
{
    int batch = 1, channels = 3, spatial = 716000000;
    size_t n = (size_t)batch * channels * spatial, win = (size_t)1 << 20;
    size_t bytes = n * sizeof(float);
    if (!fits(bytes, "bn delta"))
        return;
    float scales[3] = { 0.5f, -1.25f, 2.0f }, var[3] = { 0.25f, 1.0f, 3.0f }, d0;
    memset(&d0, 0x3f, sizeof d0);
    float *dd = device_filled(bytes, 0x3f), *ds = to_device(scales, 3), *dv = to_device(var, 3);
    fsdp_bn_inference_delta_gpu(dd, ds, dv, batch, channels, spatial);
    launched("fsdp_bn_inference_delta_gpu");
    float *want = host_floats(win, 0, 0);
    size_t at[3];
    windows(n, win, at);
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < win; i++) {
            int c = (int)((at[k] + i) / (size_t)spatial);
            float one = d0;
            bn_host(&one, &scales[c], &var[c], 1, 1, 1);
            want[i] = one;
        }
        char what[96];
        snprintf(what, sizeof what, "bn delta on 1x3x716e6 floats, [%zu, +2^20)", at[k]);
        expect_close(what, dd + at[k], want, win, at[k]);
    }
    cudaFree(dd);
    cudaFree(ds);
    cudaFree(dv);
    free(want);
}

static void describe_gpu(int gpus)
{
    struct cudaDeviceProp p;
    int driver = 0, runtime = 0;
    cuda_must(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("GPU 0 of %d: %s, compute capability %d.%d, %d SMs, %.1f GiB; CUDA driver %d.%d, "
           "runtime %d.%d\n", gpus, p.name, p.major, p.minor, p.multiProcessorCount,
           p.totalGlobalMem / 1073741824.0, driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10);
    /* Several ranks on one GPU (-fsdp-backend mpi-staged, the 2-rank tests)
     * need the default mode; EXCLUSIVE_PROCESS lets one process in. */
    int mode = 0;
    cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0);
    printf("compute mode: %s\n", mode == cudaComputeModeDefault ? "default (shared)"
           : mode == cudaComputeModeExclusiveProcess ? "EXCLUSIVE_PROCESS (one process: two ranks cannot share it)"
           : mode == cudaComputeModeProhibited ? "PROHIBITED (no process may use it)" : "other");
    /* The plugin allocates with cudaMallocAsync where the device has pools. */
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0);
    void *a = NULL;
    cudaError_t e = pools ? cudaMallocAsync(&a, 1 << 20, cudaStreamLegacy) : cudaSuccess;
    if (a) cudaFreeAsync(a, cudaStreamLegacy);
    cuda_must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    printf("stream-ordered memory pools: %s\n",
           !pools ? "none (the plugin uses cudaMalloc)" : e == cudaSuccess ? "yes" : cudaGetErrorString(e));
}

int main(int argc, char **argv)
{
    int gpus = gpu_count(1);
    if (!gpus)
        return GPU_TEST_SKIP;
    cuda_must(cudaSetDevice(0), "cudaSetDevice(0)");
    describe_gpu(gpus);
    if (argc > 1 && strcmp(argv[1], "--probe") == 0)
        return 0;
    /* Several blocks, and more elements than the bounded grid has threads
     * (32768 blocks of 256), so the grid-stride loops go round. */
    const size_t sizes[] = { 1, 1000, ((size_t)1 << 20) + 17, 9000001 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int with_g = 0; with_g <= 1; with_g++) {
            for (int decays = 0; decays <= 1; decays++)
                check_sgd(sizes[i], with_g, decays);
            check_adam(sizes[i], with_g, 0);
            check_adam(sizes[i], with_g, 0.0005f);
        }
    check_bn(1, 1, 1);
    check_bn(3, 17, 49);
    check_bn(2, 5, 1);
    check_bn(8, 64, 32 * 32);
    check_dropout(1000, .5f);
    check_dropout(9000001, .1f);
    /* n == 0 launches nothing and reports nothing. */
    fsdp_optim_args a = sgd_args();
    fsdp_sgd_gpu(NULL, NULL, NULL, 0, 1, &a);
    fsdp_adam_gpu(NULL, NULL, NULL, NULL, 0, &a);
    fsdp_bn_inference_delta_gpu(NULL, NULL, NULL, 0, 4, 4);
    fsdp_dropout_replay_gpu(NULL, NULL, 0, .5f, 2);
    launched("zero-length launches");
    check_sgd_huge();
    check_bn_huge();
    cuda_must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    printf("test_kernels_gpu: %s (%d of %d comparisons failed)\n", failures ? "FAILED" : "passed",
           failures, checks);
    return failures ? 1 : 0;
}
