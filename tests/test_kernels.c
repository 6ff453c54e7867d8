/* Darknet's CPU kernels as patched (patches 0031-0034: im2col, maxpool,
 * activations, col2im) against copies of the stock ones (tests/kernels_stock.c), on
 * seeded random inputs over many shapes.  The patches keep each element's
 * operations, so the results must be the same bits (any NaN for a NaN),
 * indexes included; the inputs mix in the values where a rewrite could differ (signed zeros, ties,
 * -FLT_MAX, infinities, NaN, subnormals). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "col2im.h"
#include "im2col.h"
#include "kernels_stock.h"

static uint64_t rng_state;

static float rand_float(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t r = (uint32_t)(rng_state >> 33);
    switch (r % 64) {  /* one in ~5 is a value that needs care */
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return -FLT_MAX;
    case 3: return INFINITY;
    case 4: return -INFINITY;
    case 5: return NAN;
    case 6: return 1e-40f;   /* subnormal: .1 of it rounds */
    case 7: return -1e-40f;
    case 8: return 0.5f;     /* ties in a pooling window */
    case 9: return 0.5f;
    case 10: return 90.0f;   /* exp overflows in the float activations */
    case 11: return -90.0f;
    }
    return ((float)(r >> 8) / (float)(1 << 23) - 0.5f) * 8.0f;
}

static float *rand_array(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; ++i) x[i] = rand_float();
    return x;
}

/* The first index where two float arrays differ, or -1: the same bits, except
 * that any NaN equals any NaN (when two NaNs meet in an addition, which one
 * comes out depends on the operands' order in the instruction, and a
 * vectorized loop may swap them; IEEE leaves it open). */
static long first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (memcmp(&a[i], &b[i], sizeof(float)) && !(isnan(a[i]) && isnan(b[i]))) return (long)i;
    return -1;
}

/* im2col, and col2im adding the same column matrix back into a random image
 * (each pixel sums several values: their order shows in the bits) */
static int check_im2col(int channels, int h, int w, int ksize, int stride, int pad)
{
    int hc = (h + 2 * pad - ksize) / stride + 1;
    int wc = (w + 2 * pad - ksize) / stride + 1;
    if (hc <= 0 || wc <= 0) return 0;
    size_t ncol = (size_t)channels * ksize * ksize * hc * wc, nim = (size_t)channels * h * w;
    float *im = rand_array(nim);
    float *got = rand_array(ncol), *want = rand_array(ncol);
    im2col_cpu(im, channels, h, w, ksize, stride, pad, got);
    stock_im2col_cpu(im, channels, h, w, ksize, stride, pad, want);
    long d = first_diff(got, want, ncol);
    cr_assert_eq(d, -1, "im2col c=%d h=%d w=%d k=%d s=%d p=%d: element %ld is %g, stock %g",
                 channels, h, w, ksize, stride, pad, d, got[d < 0 ? 0 : d], want[d < 0 ? 0 : d]);

    float *im_got = malloc(nim * sizeof(float)), *im_want = malloc(nim * sizeof(float));
    memcpy(im_got, im, nim * sizeof(float));
    memcpy(im_want, im, nim * sizeof(float));
    for (size_t i = 0; i < ncol; ++i) got[i] = rand_float();
    col2im_cpu(got, channels, h, w, ksize, stride, pad, im_got);
    stock_col2im_cpu(got, channels, h, w, ksize, stride, pad, im_want);
    d = first_diff(im_got, im_want, nim);
    cr_assert_eq(d, -1, "col2im c=%d h=%d w=%d k=%d s=%d p=%d: pixel %ld is %g, stock %g",
                 channels, h, w, ksize, stride, pad, d, im_got[d < 0 ? 0 : d], im_want[d < 0 ? 0 : d]);
    free(im); free(got); free(want); free(im_got); free(im_want);
    return 1;
}

Test(kernels, im2col_and_col2im_equal_stock)
{
    static const int sides[] = { 1, 2, 3, 5, 8, 13, 17 };
    const int nsides = sizeof sides / sizeof *sides;
    int cases = 0;
    rng_state = 1;
    for (int channels = 1; channels <= 5; channels += 2)
        for (int hi = 0; hi < nsides; ++hi)
            for (int wi = 0; wi < nsides; ++wi)
                for (int ksize = 1; ksize <= 5; ++ksize)
                    for (int stride = 1; stride <= 3; ++stride)
                        for (int pad = 0; pad <= 2; ++pad)
                            cases += check_im2col(channels, sides[hi], sides[wi], ksize, stride, pad);
    /* the probe's three convolutions */
    check_im2col(3, 64, 64, 3, 1, 1);
    check_im2col(16, 32, 32, 3, 1, 1);
    check_im2col(32, 16, 16, 3, 1, 1);
    cr_assert_gt(cases, 3000, "only %d shapes ran", cases);
}

static void check_maxpool(int batch, int c, int h, int w, int size, int stride, int padding)
{
    maxpool_layer got = make_maxpool_layer(batch, h, w, c, size, stride, padding);
    maxpool_layer want = make_maxpool_layer(batch, h, w, c, size, stride, padding);
    network net = { 0 };
    net.input = rand_array((size_t)batch * c * h * w);
    size_t n = (size_t)got.outputs * batch;
    for (size_t i = 0; i < n; ++i) { got.output[i] = want.output[i] = 7; got.indexes[i] = want.indexes[i] = 7; }
    forward_maxpool_layer(got, net);
    stock_forward_maxpool_layer(want, net);
    long d = first_diff(got.output, want.output, n);
    cr_assert_eq(d, -1, "maxpool b=%d c=%d h=%d w=%d size=%d stride=%d padding=%d: output %ld "
                 "is %g, stock %g", batch, c, h, w, size, stride, padding, d,
                 got.output[d < 0 ? 0 : d], want.output[d < 0 ? 0 : d]);
    for (d = 0; d < (long)n && got.indexes[d] == want.indexes[d]; ++d) {}
    if (d == (long)n) d = -1;
    cr_assert_eq(d, -1, "maxpool b=%d c=%d h=%d w=%d size=%d stride=%d padding=%d: index %ld "
                 "is %d, stock %d", batch, c, h, w, size, stride, padding, d,
                 got.indexes[d < 0 ? 0 : d], want.indexes[d < 0 ? 0 : d]);
    free(net.input);
    free_layer(got);
    free_layer(want);
}

Test(kernels, maxpool_equals_stock)
{
    int cases = 0;
    rng_state = 2;
    for (int size = 1; size <= 4; ++size)
        for (int stride = 1; stride <= 3; ++stride)
            for (int h = 1; h <= 9; h += 2)
                for (int w = 1; w <= 10; w += 3) {
                    /* Darknet's default padding is size - 1; 0 and 3 move
                     * windows off the border on one or both sides. */
                    const int pads[] = { size - 1, 0, 3 };
                    for (int p = 0; p < 3; ++p) {
                        if ((h + pads[p] - size) / stride + 1 <= 0 ||
                            (w + pads[p] - size) / stride + 1 <= 0) continue;
                        check_maxpool(2, 3, h, w, size, stride, pads[p]);
                        ++cases;
                    }
                }
    /* the probe's shapes: even sides, 2x2 windows, stride 2 */
    check_maxpool(2, 16, 64, 64, 2, 2, 1);
    check_maxpool(3, 5, 17, 16, 2, 2, 1);
    cr_assert_gt(cases, 300, "only %d shapes ran", cases);
}

Test(kernels, activations_equal_stock)
{
    static const ACTIVATION all[] = { LOGISTIC, RELU, RELIE, LINEAR, RAMP, TANH, PLSE, LEAKY,
                                      ELU, LOGGY, STAIR, HARDTAN, LHTAN, SELU };
    static const int lengths[] = { 0, 1, 7, 1003 };
    rng_state = 3;
    for (size_t ai = 0; ai < sizeof all / sizeof *all; ++ai)
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; ++li) {
            int n = lengths[li];
            ACTIVATION a = all[ai];
            float *x = rand_array(n), *got = malloc((n + 1) * sizeof(float));
            float *want = malloc((n + 1) * sizeof(float));
            memcpy(got, x, n * sizeof(float));
            memcpy(want, x, n * sizeof(float));
            activate_array(got, n, a);
            stock_activate_array(want, n, a);
            long d = first_diff(got, want, n);
            cr_assert_eq(d, -1, "activate_array %s n=%d: element %ld (x=%g) is %g, stock %g",
                         get_activation_string(a), n, d, x[d < 0 ? 0 : d],
                         got[d < 0 ? 0 : d], want[d < 0 ? 0 : d]);

            /* gradient_array takes the activated values, as Darknet's layers pass them */
            float *delta = rand_array(n);
            memcpy(got, delta, n * sizeof(float));
            memcpy(want, delta, n * sizeof(float));
            gradient_array(x, n, a, got);
            stock_gradient_array(x, n, a, want);
            d = first_diff(got, want, n);
            cr_assert_eq(d, -1, "gradient_array %s n=%d: element %ld (x=%g) is %g, stock %g",
                         get_activation_string(a), n, d, x[d < 0 ? 0 : d],
                         got[d < 0 ? 0 : d], want[d < 0 ? 0 : d]);
            free(x); free(got); free(want); free(delta);
        }
}
