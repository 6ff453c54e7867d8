/* test_frozen_order: the order in which a frozen layer's device backward
 * (fsdp_frozen.c) runs its steps, with a recording device half in place of
 * CUDA's.  Darknet's backward_connected_layer_gpu clips the delta to [-1, 1]
 * first; a frozen connected layer with batch norm must clip before it
 * scales the delta, and must not clip the scaled delta again. */
#include <string.h>
#include <criterion/criterion.h>
#include "fsdp_frozen.h"

static char steps[16][16];
static int nsteps;
static void note(const char *s)
{
    cr_assert_lt(nsteps, 16);
    strcpy(steps[nsteps++], s);
}

static void rec_gradient(float *o, int n, ACTIVATION a, float *d) { (void)o; (void)n; (void)a; (void)d; note("gradient"); }
static void rec_scale(float *d, const float *s, const float *v, int b, int c, int sp)
{
    (void)d; (void)s; (void)v; (void)b; (void)c; (void)sp;
    note("scale");
}
static void rec_add(int n, float *x, float *y) { (void)n; (void)x; (void)y; note("add"); }
static void rec_arrays(const layer *l, const network *net, fsdp_frozen_arrays *a)
{
    *a = (fsdp_frozen_arrays){ l->output, l->delta, l->scales, l->rolling_variance, net->delta };
}
static void rec_clip(int n, float *d)
{
    (void)d;
    cr_assert_eq(n, 3 * 2, "the clip covers outputs x batch");
    note("clip");
}
/* What runs after the scaling must see a plain layer: no batch norm, linear. */
static void rec_rest(layer l, network net)
{
    (void)net;
    note(l.batch_normalize || l.activation != LINEAR ? "rest, not plain" : "rest");
}
static void own_backward_gpu(layer l, network net)
{
    (void)net;
    note(l.batch_normalize ? "own, with bn" : "own");
}

static const fsdp_frozen_device recording = {
    { rec_gradient, rec_scale, rec_add }, rec_arrays, rec_clip, rec_rest,
};

/* One frozen layer of TYPE that passes deltas back, its device backward run
 * through the wrapper; the steps it took, joined by spaces, in `out`. */
static void run_backward(LAYER_TYPE type, int bn, char *out, size_t n)
{
    float buf[6] = { 0 };
    layer l = { .type = type, .batch_normalize = bn, .activation = LEAKY, .outputs = 3, .batch = 2, .out_c = 3,
                .out_w = 1, .out_h = 1, .output = buf, .delta = buf, .backward_gpu = own_backward_gpu };
    network net = { .n = 1, .layers = &l, .index = 0 };
    unsigned char yes = 1;
    fsdp_layout_plan p = { .frozen = &yes, .need_bwd = &yes, .nlayers = 1 };
    fsdp_layer_fns *orig = NULL;
    fsdp_frozen_use_device(&recording);
    cr_assert_eq(fsdp_frozen_install(&p, &net, &orig), FSDP_OK);
    nsteps = 0;
    l.backward_gpu(l, net);
    fsdp_frozen_uninstall(&net, orig);
    out[0] = 0;
    for (int i = 0; i < nsteps; ++i) {
        strncat(out, steps[i], n - strlen(out) - 1);
        if (i + 1 < nsteps) strncat(out, ", ", n - strlen(out) - 1);
    }
}

Test(frozen_order, connected_with_bn_clips_before_scaling)
{
    char got[128];
    run_backward(CONNECTED, 1, got, sizeof got);
    cr_assert_str_eq(got, "clip, gradient, scale, rest");
}

/* Other layers with batch norm: scale, then their own backward, plain. */
Test(frozen_order, convolutional_with_bn_scales_then_runs_its_own)
{
    char got[128];
    run_backward(CONVOLUTIONAL, 1, got, sizeof got);
    cr_assert_str_eq(got, "gradient, scale, own");
}

/* Without batch norm the layer's own backward does everything, Darknet's clip included. */
Test(frozen_order, connected_without_bn_is_its_own)
{
    char got[128];
    run_backward(CONNECTED, 0, got, sizeof got);
    cr_assert_str_eq(got, "own");
}
