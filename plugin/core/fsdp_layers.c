#include <stdlib.h>
#include "fsdp_layers.h"

/* ADD(owner, weights, weight_updates, ...): the host arrays and, in GPU
 * builds, their *_gpu twins.  Designated initializers: the GPU fields sit in
 * the middle of the struct. */
#ifdef GPU
#define ADD_GPU(o, d, g) , .data_gpu = &(o)->d##_gpu, .grad_gpu = &(o)->g##_gpu
#else
#define ADD_GPU(o, d, g)
#endif
#define ADD(o, d, g, cnt, w) \
    add(out, n, (fsdp_tensor){ .owner = (o), .data = &(o)->d, .grad = &(o)->g, .count = (cnt), \
                               .is_weight = (w) ADD_GPU(o, d, g) })

static int add(fsdp_tensor *out, int n, fsdp_tensor t)
{
    if (!t.count) return n;
    out[n] = t;
    return n + 1;
}

/* weights, biases, and batch-norm scales of a convolutional-like layer. */
static int conv_like(layer *l, size_t nweights, size_t nbiases, fsdp_tensor *out, int n)
{
    n = ADD(l, weights, weight_updates, nweights, 1);
    n = ADD(l, biases, bias_updates, nbiases, 0);
    /* Not l->scales: a layer's arrays may be staged away (fsdp_stage.h),
     * and every constructor with batch_normalize allocates scales. */
    if (l->batch_normalize)
        n = ADD(l, scales, scale_updates, nbiases, 0);
    return n;
}

static int sub_connected(layer *s, fsdp_tensor *out, int n)
{
    return conv_like(s, (size_t)s->inputs * s->outputs, (size_t)s->outputs, out, n);
}

static int sub_conv(layer *s, fsdp_tensor *out, int n)
{
    return conv_like(s, (size_t)s->nweights, (size_t)s->n, out, n);
}

int fsdp_layer_tensors(layer *l, fsdp_tensor *out)
{
    int n = 0;
    switch (l->type) {
    case CONVOLUTIONAL:
    case DECONVOLUTIONAL:
        return sub_conv(l, out, 0);
    case CONNECTED:
        return sub_connected(l, out, 0);
    case LOCAL: {
        size_t locations = (size_t)l->out_w * l->out_h;
        return conv_like(l, (size_t)l->size * l->size * l->c * l->n * locations,
                         (size_t)l->outputs, out, 0);
    }
    case BATCHNORM:
        n = ADD(l, scales, scale_updates, (size_t)l->c, 0);
        return ADD(l, biases, bias_updates, (size_t)l->c, 0);
    case RNN:
        n = sub_connected(l->input_layer, out, n);
        n = sub_connected(l->self_layer, out, n);
        return sub_connected(l->output_layer, out, n);
    case CRNN:
        n = sub_conv(l->input_layer, out, n);
        n = sub_conv(l->self_layer, out, n);
        return sub_conv(l->output_layer, out, n);
    case GRU: {
        layer *subs[] = { l->uz, l->wz, l->ur, l->wr, l->uh, l->wh };
        for (int i = 0; i < 6; ++i) n = sub_connected(subs[i], out, n);
        return n;
    }
    case LSTM: {
        layer *subs[] = { l->wf, l->wi, l->wg, l->wo, l->uf, l->ui, l->ug, l->uo };
        for (int i = 0; i < 8; ++i) n = sub_connected(subs[i], out, n);
        return n;
    }
    default:
        return 0;
    }
}

float **fsdp_tensor_array(const fsdp_tensor *t, int device, int grad)
{
#ifdef GPU
    if (device) return grad ? t->grad_gpu : t->data_gpu;
#endif
    (void)device;
    return grad ? t->grad : t->data;
}

void fsdp_tensor_free_device(const fsdp_tensor *t)
{
#ifdef GPU
    cuda_free(*t->data_gpu);
    cuda_free(*t->grad_gpu);
    *t->data_gpu = *t->grad_gpu = NULL;
#endif
    (void)t;
}

int fsdp_layers_have_device_arrays(void)
{
#ifdef GPU
    return 1;
#else
    return 0;
#endif
}

float **fsdp_layer_act(layer *l, fsdp_act_array which, int device)
{
#ifdef GPU
    if (device) {
        switch (which) {
        case FSDP_ACT_OUTPUT: return &l->output_gpu;
        case FSDP_ACT_DELTA: return &l->delta_gpu;
        case FSDP_ACT_X: return &l->x_gpu;
        case FSDP_ACT_X_NORM: return &l->x_norm_gpu;
        }
    }
#endif
    (void)device;
    switch (which) {
    case FSDP_ACT_OUTPUT: return &l->output;
    case FSDP_ACT_DELTA: return &l->delta;
    case FSDP_ACT_X: return &l->x;
    default: return &l->x_norm;
    }
}

void fsdp_layer_rolling(const layer *l, int device, float **mean, float **variance)
{
#ifdef GPU
    if (device) {
        *mean = l->rolling_mean_gpu;
        *variance = l->rolling_variance_gpu;
        return;
    }
#endif
    (void)device;
    *mean = l->rolling_mean;
    *variance = l->rolling_variance;
}

int fsdp_layer_inputs(const network *net, int index, int *in)
{
    const layer *l = &net->layers[index];
    int n = 0;
    if (l->type == ROUTE) {
        for (int i = 0; i < l->n && n < FSDP_MAX_INPUTS; ++i) in[n++] = l->input_layers[i];
        return n;
    }
    if (index > 0) in[n++] = index - 1;
    if (l->type == SHORTCUT && l->index >= 0 && l->index != index - 1) in[n++] = l->index;
    return n;
}

int *fsdp_layer_last_readers(const network *net)
{
    int *last = malloc(((size_t)net->n + 1) * sizeof *last);
    if (!last) return NULL;
    for (int i = 0; i < net->n; ++i) last[i] = i;
    for (int k = 0; k < net->n; ++k) {
        int in[FSDP_MAX_INPUTS], c = fsdp_layer_inputs(net, k, in);
        for (int r = 0; r < c; ++r)
            if (in[r] >= 0 && in[r] < k && k > last[in[r]]) last[in[r]] = k;
    }
    return last;
}

int fsdp_layer_writes_delta_in_forward(const layer *l)
{
    switch (l->type) {
    case SOFTMAX: case COST: case REGION: case YOLO: case DETECTION: case LOGXENT: case ISEG:
        return 1;
    default:
        return 0;
    }
}

static void free_opt(layer *l)
{
    free(l->m); free(l->v);
    free(l->bias_m); free(l->bias_v);
    free(l->scale_m); free(l->scale_v);
    l->m = l->v = l->bias_m = l->bias_v = l->scale_m = l->scale_v = NULL;
#ifdef GPU
    float **g[] = { &l->m_gpu, &l->v_gpu, &l->bias_m_gpu, &l->bias_v_gpu, &l->scale_m_gpu, &l->scale_v_gpu };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; ++i) {
        if (*g[i]) cuda_free(*g[i]);
        *g[i] = NULL;
    }
#endif
}

void fsdp_layer_free_darknet_optimizer(layer *l)
{
    free_opt(l);
    layer *subs[] = { l->input_layer, l->self_layer, l->output_layer, l->uz, l->wz, l->ur, l->wr,
                      l->uh, l->wh, l->wf, l->wi, l->wg, l->wo, l->uf, l->ui, l->ug, l->uo };
    if (l->type != RNN && l->type != CRNN && l->type != GRU && l->type != LSTM) return;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; ++i)
        if (subs[i]) free_opt(subs[i]);
}

int fsdp_layer_is_loss(const layer *l)
{
    switch (l->type) {
    case YOLO: case REGION: case DETECTION: case COST: case SOFTMAX: case LOGXENT: case ISEG: return 1;
    default: return 0;
    }
}

int fsdp_layer_plain_arrays(const layer *l)
{
    switch (l->type) {
    case CONVOLUTIONAL: case CONNECTED: case MAXPOOL: case AVGPOOL: case ROUTE: case SHORTCUT:
    case UPSAMPLE: case REORG:
        return !l->truth;
    default:
        return 0;
    }
}

size_t fsdp_layer_act_floats(const layer *l)
{
    return (size_t)l->outputs * l->batch;
}

int fsdp_layer_has_bn(const layer *l)
{
    return l->batch_normalize || l->type == BATCHNORM;
}

int fsdp_layer_recurrent_bn(const layer *l)
{
    switch (l->type) {
    case RNN:
    case CRNN: return l->input_layer && l->input_layer->batch_normalize;
    case GRU: return l->uz && l->uz->batch_normalize;
    case LSTM: return l->uf && l->uf->batch_normalize;
    default: return 0;
    }
}
