#include <math.h>
#include <stdlib.h>
#include "activations.h"
#include "blas.h"
#include "fsdp_frozen.h"
#include "fsdp_kernels.h"

/* Darknet calls layer functions without a context; the wrappers find the
 * engine here (one engine per process). */
static fsdp_engine *the_engine;

static void frozen_forward(layer l, network net)
{
    net.train = 0;   /* batch norm uses and keeps its rolling statistics; no dropout */
    the_engine->orig_forward[net.index](l, net);
}

/* Backward through a frozen layer whose batch norm ran in inference mode:
 * y = act(scale * (x - rolling_mean) / (sqrt(rolling_var) + eps) + bias), so
 * the delta is scaled per channel; the rest is the layer's own backward with
 * no batch norm and no gradient buffers (NULL: skipped, see patches/0007). */
static void frozen_backward(layer l, network net)
{
    /* Forward was the identity (no dropout outside training), and dropout
     * shares its input's delta: backward is nothing.  Darknet's own would
     * apply the mask of an earlier training forward. */
    if (l.type == DROPOUT) return;
    if (l.batch_normalize || l.type == BATCHNORM) {
        int spatial = l.out_w * l.out_h, channels = l.out_c;
        if (l.type != BATCHNORM) gradient_array(l.output, l.outputs * l.batch, l.activation, l.delta);
        for (int b = 0; b < l.batch; ++b)
            for (int c = 0; c < channels; ++c) {
                float k = l.scales[c] / (sqrtf(l.rolling_variance[c]) + .000001f);
                float *d = l.delta + ((size_t)b * channels + c) * spatial;
                for (int s = 0; s < spatial; ++s) d[s] *= k;
            }
        if (l.type == BATCHNORM) {
            if (net.delta) axpy_cpu(l.outputs * l.batch, 1, l.delta, 1, net.delta, 1);
            return;
        }
        l.batch_normalize = 0;
        l.activation = LINEAR;
    }
    the_engine->orig_backward[net.index](l, net);
}

#ifdef GPU
static void frozen_forward_gpu(layer l, network net)
{
    net.train = 0;
    the_engine->orig_forward_gpu[net.index](l, net);
}

static void frozen_backward_gpu(layer l, network net)
{
    if (l.type == DROPOUT) return;   /* as in frozen_backward */
    if (l.batch_normalize || l.type == BATCHNORM) {
        if (l.type != BATCHNORM) gradient_array_gpu(l.output_gpu, l.outputs * l.batch, l.activation, l.delta_gpu);
        fsdp_bn_inference_delta_gpu(l.delta_gpu, l.scales_gpu, l.rolling_variance_gpu, l.batch, l.out_c,
                                    l.out_w * l.out_h);
        if (l.type == BATCHNORM) {
            if (net.delta_gpu) axpy_gpu(l.outputs * l.batch, 1, l.delta_gpu, 1, net.delta_gpu, 1);
            return;
        }
        l.batch_normalize = 0;
        l.activation = LINEAR;
    }
    the_engine->orig_backward_gpu[net.index](l, net);
}
#endif

/* Layers that need no backward keep no delta buffer, and the first trainable
 * layer then computes no delta into them (net.delta is NULL).  Kept: deltas a
 * loss layer writes in forward, and deltas a route or shortcut that needs
 * backward writes into.  Dropout shares its input's delta, so a buffer is
 * freed only when no layer that keeps it points at it. */
void fsdp_frozen_drop_deltas(fsdp_engine *e, network *net)
{
    int n = net->n;
    unsigned char *keep = calloc((size_t)n, 1);
    if (!keep) return;
    for (int i = 0; i < n; ++i) {
        layer *l = &net->layers[i];
        if (e->plan.need_bwd[i] || fsdp_layer_writes_delta_in_forward(l)) keep[i] = 1;
        /* A standalone batch norm copies its delta into its input's
         * unchecked: a trainable one on a frozen prefix needs that buffer. */
        if (l->type == BATCHNORM && e->plan.need_bwd[i] && i > 0) keep[i - 1] = 1;
        /* rnn and crnn share their output sub-layer's delta and zero it in
         * every forward, backward or not. */
        if (l->type == RNN || l->type == CRNN) keep[i] = 1;
        if ((l->type == ROUTE || l->type == SHORTCUT) && e->plan.need_bwd[i]) {
            int in[FSDP_MAX_INPUTS], k = fsdp_layer_inputs(net, i, in);
            for (int j = 0; j < k; ++j) if (in[j] >= 0) keep[in[j]] = 1;
        }
    }
    for (int i = 0; i < n; ++i) {
        float *d = net->layers[i].delta;
        if (keep[i] || !d) continue;
        int shared = 0;
        for (int j = 0; j < n; ++j) if (keep[j] && net->layers[j].delta == d) shared = 1;
        if (shared) continue;
        for (int j = 0; j < n; ++j) if (net->layers[j].delta == d) net->layers[j].delta = NULL;
        free(d);
    }
#ifdef GPU
    for (int i = 0; i < n; ++i) {
        float *d = net->layers[i].delta_gpu;
        if (keep[i] || !d) continue;
        int shared = 0;
        for (int j = 0; j < n; ++j) if (keep[j] && net->layers[j].delta_gpu == d) shared = 1;
        if (shared) continue;
        for (int j = 0; j < n; ++j) if (net->layers[j].delta_gpu == d) net->layers[j].delta_gpu = NULL;
        cuda_free(d);
    }
#endif
    free(keep);
}

fsdp_status fsdp_frozen_install(fsdp_engine *e, network *net)
{
    the_engine = e;
    size_t n = (size_t)net->n;
    e->orig_forward = calloc(n, sizeof *e->orig_forward);
    e->orig_backward = calloc(n, sizeof *e->orig_backward);
    if (!e->orig_forward || !e->orig_backward) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
#ifdef GPU
    e->orig_forward_gpu = calloc(n, sizeof *e->orig_forward_gpu);
    e->orig_backward_gpu = calloc(n, sizeof *e->orig_backward_gpu);
    if (!e->orig_forward_gpu || !e->orig_backward_gpu) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
#endif
    for (int i = 0; i < net->n; ++i) {
        layer *l = &net->layers[i];
        e->orig_forward[i] = l->forward;
        e->orig_backward[i] = l->backward;
#ifdef GPU
        e->orig_forward_gpu[i] = l->forward_gpu;
        e->orig_backward_gpu[i] = l->backward_gpu;
#endif
        if (!e->plan.frozen[i]) continue;
        l->forward = frozen_forward;
        if (e->plan.need_bwd[i]) l->backward = frozen_backward;
#ifdef GPU
        l->forward_gpu = frozen_forward_gpu;
        if (e->plan.need_bwd[i]) l->backward_gpu = frozen_backward_gpu;
#endif
    }
    return FSDP_OK;
}
