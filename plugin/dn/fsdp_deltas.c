#include <stdlib.h>
#include "fsdp_deltas.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"

unsigned char *fsdp_deltas_keepers(const fsdp_layout_plan *p, const network *net)
{
    int n = net->n;
    unsigned char *keep = calloc((size_t)n, 1);
    if (!keep) return NULL;
    for (int i = 0; i < n; ++i) {
        const layer *l = &net->layers[i];
        if (p->need_bwd[i] || fsdp_layer_writes_delta_in_forward(l)) keep[i] = 1;
        /* A standalone batch norm copies its delta into its input's
         * unchecked: a trainable one on a frozen prefix needs that buffer. */
        if (l->type == BATCHNORM && p->need_bwd[i] && i > 0) keep[i - 1] = 1;
        /* rnn and crnn share their output sub-layer's delta and zero it in
         * every forward, backward or not. */
        if (l->type == RNN || l->type == CRNN) keep[i] = 1;
        if ((l->type == ROUTE || l->type == SHORTCUT) && p->need_bwd[i]) {
            int in[FSDP_MAX_INPUTS], k = fsdp_layer_inputs(net, i, in);
            for (int j = 0; j < k; ++j) if (in[j] >= 0) keep[in[j]] = 1;
        }
    }
    return keep;
}

static float **delta(network *net, int i, int device) { return fsdp_layer_act(&net->layers[i], FSDP_ACT_DELTA, device); }

/* Dropout shares its input's delta, so a buffer is freed only when no layer
 * that keeps it points at it.  device: the *_gpu twins, Darknet's device
 * memory. */
static void drop(network *net, const unsigned char *keep, int device)
{
    const fsdp_mem_ctx darknet = { .device = device };
    int n = net->n;
    for (int i = 0; i < n; ++i) {
        float *d = *delta(net, i, device);
        if (keep[i] || !d) continue;
        int shared = 0;
        for (int j = 0; j < n; ++j) if (keep[j] && *delta(net, j, device) == d) shared = 1;
        if (shared) continue;
        for (int j = 0; j < n; ++j) if (*delta(net, j, device) == d) *delta(net, j, device) = NULL;
        fsdp_mem_free_darknet(&darknet, &d);
    }
}

void fsdp_deltas_drop_unneeded(const fsdp_layout_plan *p, network *net)
{
    unsigned char *keep = fsdp_deltas_keepers(p, net);
    if (!keep) return;   /* out of memory: keeping every buffer is always correct */
    for (int device = 0; device <= fsdp_layers_have_device_arrays(); ++device) drop(net, keep, device);
    free(keep);
}
