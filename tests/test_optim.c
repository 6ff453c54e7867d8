/* test_optim: the sharded optimizer against Darknet's update_connected_layer
 * and its GPU Adam, and the node-shared step from 1-7 ranks' gradient slots
 * against the step from their sum in rank order, bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_optim.h"
#include "fsdp_sum.h"
#include "connected_layer.h"

/* ---- the optimizer against Darknet's own update ------------------------- */

Test(optim, sgd_matches_update_connected_layer)
{
    int in = 13, out = 5;
    layer l = make_connected_layer(4, in, out, LINEAR, 0, 0);
    size_t nw = (size_t)in * out;
    float *w = malloc(nw * sizeof(float)), *m = malloc(nw * sizeof(float)), *g = malloc(nw * sizeof(float));
    float *b = malloc(out * sizeof(float)), *bm = malloc(out * sizeof(float)), *bg = malloc(out * sizeof(float));
    srand(3);
    for (size_t i = 0; i < nw; ++i) {
        w[i] = l.weights[i] = rand_uniform(-1, 1);
        m[i] = rand_uniform(-1, 1);
        g[i] = rand_uniform(-1, 1);
        l.weight_updates[i] = m[i] + g[i];   /* Darknet's one buffer: momentum plus new gradient */
    }
    for (int i = 0; i < out; ++i) {
        b[i] = l.biases[i] = rand_uniform(-1, 1);
        bm[i] = rand_uniform(-1, 1);
        bg[i] = rand_uniform(-1, 1);
        l.bias_updates[i] = bm[i] + bg[i];
    }
    update_args a = { .batch = 24, .learning_rate = 0.1f, .momentum = 0.9f, .decay = 0.0005f };
    update_connected_layer(l, a);
    fsdp_optim_args o = { 0.1f, 0.9f, 0.0005f, 24, 0, 0, 0, 0, 1 };
    fsdp_sgd(w, m, g, nw, 1, &o);
    fsdp_sgd(b, bm, bg, out, 0, &o);
    for (size_t i = 0; i < nw; ++i) {
        cr_assert_float_eq(w[i], l.weights[i], 1e-6, "weight %zu", i);
        cr_assert_float_eq(m[i], l.weight_updates[i], 1e-6, "momentum %zu", i);
    }
    for (int i = 0; i < out; ++i) {
        cr_assert_float_eq(b[i], l.biases[i], 1e-6, "bias %d (no decay)", i);
        cr_assert_float_eq(bm[i], l.bias_updates[i], 1e-6);
    }
}

Test(optim, adam_matches_darknets_gpu_update)
{
    /* adam_update_gpu: m = B1 m + (1-B1) d, v = B2 v + (1-B2) d^2 with
     * d = g - decay*batch*w, x += rate * mhat / (sqrt(vhat) + eps). */
    float w[3] = { 0.5f, -1.f, 2.f }, m[3] = { 0.1f, 0, -0.2f }, v[3] = { 0.01f, 0.02f, 0 };
    float g[3] = { 1.f, -2.f, 0.5f };
    fsdp_optim_args o = { 0.01f, 0, 0.001f, 8, 1, 0.9f, 0.999f, 1e-7f, 3 };
    double ew[3];
    for (int i = 0; i < 3; ++i) {
        double d = g[i] - 0.001 * 8 * w[i];
        double mi = 0.9 * m[i] + 0.1 * d, vi = 0.999 * v[i] + 0.001 * d * d;
        ew[i] = w[i] + 0.01 * (mi / (1 - pow(0.9, 3))) / (sqrt(vi / (1 - pow(0.999, 3))) + 1e-7);
    }
    fsdp_adam(w, m, v, g, 3, &o);
    for (int i = 0; i < 3; ++i) cr_assert_float_eq(w[i], ew[i], 1e-5, "w[%d] %g vs %g", i, w[i], ew[i]);
}

Test(optim, no_gradient_still_decays_and_keeps_momentum)
{
    float w = 1.f, m = 0.5f;
    fsdp_optim_args o = { 0.1f, 0.9f, 0.01f, 10, 0, 0, 0, 0, 1 };
    fsdp_sgd(&w, &m, NULL, 1, 1, &o);
    /* u = 0.5 - 0.01*10*1 = 0.4; w = 1 + 0.01*0.4; m = 0.36 */
    cr_assert_float_eq(w, 1.004f, 1e-6);
    cr_assert_float_eq(m, 0.36f, 1e-6);
}

/* The node-shared update reads the ranks' gradient slots straight into the
 * step: it must move exactly the floats of a reduced buffer summed in rank
 * order, for every term count (its own loops up to four, blocks beyond),
 * SGD with and without decay, and Adam; n crosses block boundaries. */
Test(optim, summed_terms_step_as_the_reduced_gradient)
{
    size_t n = 2 * FSDP_SUM_BLOCK + 37;
    float *w0 = malloc(n * sizeof(float)), *m0 = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
    float *w[2], *m[2], *v[2], *g[7], *sum = malloc(n * sizeof(float));
    for (int k = 0; k < 2; ++k) {
        w[k] = malloc(n * sizeof(float));
        m[k] = malloc(n * sizeof(float));
        v[k] = malloc(n * sizeof(float));
    }
    srand(11);
    for (int q = 0; q < 7; ++q) {
        g[q] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) g[q][i] = rand_uniform(-1, 1) * (q + 1);
    }
    for (size_t i = 0; i < n; ++i) {
        w0[i] = rand_uniform(-1, 1);
        m0[i] = rand_uniform(-1, 1);
        v0[i] = rand_uniform(0, 1);
    }
    for (int adam = 0; adam < 2; ++adam)
        for (int decays = 0; decays < 2; ++decays)
            for (int ng = 1; ng <= 7; ++ng) {
                fsdp_optim_args o = { 0.1f, 0.9f, 0.0005f, 24, adam, 0.9f, 0.999f, 1e-7f, 3 };
                for (int k = 0; k < 2; ++k) {
                    memcpy(w[k], w0, n * sizeof(float));
                    memcpy(m[k], m0, n * sizeof(float));
                    memcpy(v[k], v0, n * sizeof(float));
                }
                fsdp_sum_rows(sum, (const float *const *)g, ng, 0, n);
                fsdp_optim_step(0, w[0], m[0], adam ? v[0] : NULL, sum, n, decays, &o);
                fsdp_optim_step_sum(w[1], m[1], adam ? v[1] : NULL, (const float *const *)g, ng, n, decays, &o);
                cr_assert(memcmp(w[0], w[1], n * sizeof(float)) == 0, "weights differ: adam %d decays %d, %d terms",
                          adam, decays, ng);
                cr_assert(memcmp(m[0], m[1], n * sizeof(float)) == 0, "momentum differs: adam %d decays %d, %d terms",
                          adam, decays, ng);
                cr_assert(memcmp(v[0], v[1], n * sizeof(float)) == 0, "adam's v differs: %d terms", ng);
                cr_assert(memcmp(w[0], w0, n * sizeof(float)) != 0, "the step moved nothing");
            }
    for (int q = 0; q < 7; ++q) free(g[q]);
    for (int k = 0; k < 2; ++k) {
        free(w[k]);
        free(m[k]);
        free(v[k]);
    }
    free(w0);
    free(m0);
    free(v0);
    free(sum);
}
