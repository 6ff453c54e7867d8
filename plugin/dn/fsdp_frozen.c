#include <math.h>
#include <stdlib.h>
#include "activations.h"
#include "blas.h"
#include "fsdp_frozen.h"
#include "fsdp_layers.h"

/* A frozen layer with trainable layers below it passes gradients back with
 * its gradient buffers gone (NULL).  Darknet's convolutional and connected
 * layers skip those (patches 0009, 0015), batch norm is the plugin's own
 * (below); deconvolutional and local layers would write through
 * NULL, and recurrent layers with batch norm would run their sub-layers'
 * training-mode batch-norm backward (NULL gradients, statistics the
 * inference-mode forward never made).  Refused rather than patched: no
 * probe freezes those above a trained layer. */
fsdp_status fsdp_frozen_check_plan(const fsdp_layout_plan *p, const fsdp_cfg *cfg, const network *net)
{
    for (int i = 0; i < p->nlayers; ++i) {
        const layer *l = &net->layers[i];
        if (!p->frozen[i] || !p->need_bwd[i]) continue;
        const char *what = l->type == LOCAL ? "local" : l->type == DECONVOLUTIONAL ? "deconvolutional"
                         : fsdp_layer_recurrent_bn(l) ? "recurrent, with batch_normalize" : NULL;
        if (!what) continue;
        return fsdp_fail(FSDP_ERR_CONFIG,
                         "%s:%d: layer %d (%s) is frozen but has trainable layers below it, so it "
                         "must pass gradients back: darknet-fsdp does that for frozen convolutional, "
                         "connected, batch-norm and plain recurrent layers only; unfreeze it or freeze "
                         "the layers below", cfg->file ? cfg->file : "cfg", cfg->layers[i].frozen_line, i,
                         what);
    }
    return FSDP_OK;
}

/* Darknet calls layer functions without a context; the wrappers find the
 * layers' own functions here (one network per process), and the device
 * half, if any (fsdp_frozen.h). */
static fsdp_layer_fns *the_orig;
static const fsdp_frozen_device *device_half;

void fsdp_frozen_use_device(const fsdp_frozen_device *d) { device_half = d; }

static void host_gradient(float *output, int n, ACTIVATION a, float *delta) { gradient_array(output, n, a, delta); }
static void host_add(int n, float *x, float *y) { axpy_cpu(n, 1, x, 1, y, 1); }
/* Darknet's CPU forward normalizes by sqrt(var) + .000001f. */
static void host_bn_delta(float *delta, const float *scales, const float *rolling_variance, int batch,
                          int channels, int spatial)
{
    for (int b = 0; b < batch; ++b)
        for (int c = 0; c < channels; ++c) {
            float k = scales[c] / (sqrtf(rolling_variance[c]) + .000001f);
            float *d = delta + ((size_t)b * channels + c) * spatial;
            for (int s = 0; s < spatial; ++s) d[s] *= k;
        }
}
static const fsdp_frozen_math host_math = { host_gradient, host_bn_delta, host_add };

/* Backward through a frozen layer whose batch norm ran in inference mode:
 * y = act(scale * (x - rolling_mean) / sd(rolling_var) + bias), so the delta
 * is scaled per channel; the rest is the layer's own backward with no batch
 * norm and no gradient buffers (NULL: skipped, see patches/0009 and 0015). */
static void frozen_backward_with(layer l, network net, const fsdp_frozen_math *math, const fsdp_frozen_arrays *a,
                                 void (*own_backward)(struct layer, struct network))
{
    /* Forward was the identity (no dropout outside training), and dropout
     * shares its input's delta: backward is nothing.  Darknet's own would
     * apply the mask of an earlier training forward. */
    if (l.type == DROPOUT) return;
    if (fsdp_layer_has_bn(&l)) {
        int n = l.outputs * l.batch;
        if (l.type != BATCHNORM) math->gradient(a->output, n, l.activation, a->delta);
        math->bn_delta(a->delta, a->scales, a->rolling_variance, l.batch, l.out_c, l.out_w * l.out_h);
        if (l.type == BATCHNORM) {
            if (a->input_delta) math->add(n, a->delta, a->input_delta);
            return;
        }
        l.batch_normalize = 0;
        l.activation = LINEAR;
    }
    own_backward(l, net);
}

static void frozen_forward(layer l, network net)
{
    net.train = 0;   /* batch norm uses and keeps its rolling statistics; no dropout */
    the_orig[net.index].forward(l, net);
}

static void frozen_backward(layer l, network net)
{
    fsdp_frozen_arrays a = { l.output, l.delta, l.scales, l.rolling_variance, net.delta };
    frozen_backward_with(l, net, &host_math, &a, the_orig[net.index].backward);
}

static void frozen_forward_gpu(layer l, network net)
{
    net.train = 0;
    the_orig[net.index].forward_gpu(l, net);
}

static void frozen_backward_gpu(layer l, network net)
{
    fsdp_frozen_arrays a;
    void (*own)(struct layer, struct network) = the_orig[net.index].backward_gpu;
    device_half->arrays(&l, &net, &a);
    if (l.type == CONNECTED && fsdp_layer_has_bn(&l)) {
        device_half->clip(l.outputs * l.batch, a.delta);
        own = device_half->connected_rest;
    }
    frozen_backward_with(l, net, &device_half->math, &a, own);
}

fsdp_status fsdp_frozen_install(const fsdp_layout_plan *p, network *net, fsdp_layer_fns **orig)
{
    fsdp_layer_fns *o = calloc((size_t)net->n, sizeof *o);
    if (!o) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < net->n; ++i) {
        layer *l = &net->layers[i];
        o[i] = (fsdp_layer_fns){ l->forward, l->backward, l->forward_gpu, l->backward_gpu };
        if (!p->frozen[i]) continue;
        l->forward = frozen_forward;
        if (p->need_bwd[i]) l->backward = frozen_backward;
        if (!device_half) continue;
        l->forward_gpu = frozen_forward_gpu;
        if (p->need_bwd[i]) l->backward_gpu = frozen_backward_gpu;
    }
    the_orig = *orig = o;
    return FSDP_OK;
}

void fsdp_frozen_uninstall(network *net, fsdp_layer_fns *orig)
{
    for (int i = 0; i < net->n && orig; ++i) {
        layer *l = &net->layers[i];
        l->forward = orig[i].forward;
        l->backward = orig[i].backward;
        l->forward_gpu = orig[i].forward_gpu;
        l->backward_gpu = orig[i].backward_gpu;
    }
    if (orig == the_orig) the_orig = NULL;
    free(orig);
}
