/* Deltas that live only through backward (fsdp_delta_pool.h). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_delta_pool.h"
#include "fsdp_layers.h"


/* The delta a run computes with: the host one, or on a GPU run its device twin. */
static float **delta(layer *l, int device) { return fsdp_layer_act(l, FSDP_ACT_DELTA, device); }

static int poolable(const fsdp_layout_plan *p, network *net, int i, int last, int device)
{
    layer *l = &net->layers[i];
    return p->need_bwd[i] && fsdp_layer_plain_arrays(l) && *delta(l, device) && last > i &&
           !(i + 1 < net->n && net->layers[i + 1].type == DROPOUT);
}

/* Deltas share buffers by lifetime (fsdp_bufs.h), in backward's time,
 * which runs down the layers: from before its last reader's backward
 * (-last) to after its own (-j). */
static fsdp_status assign(fsdp_delta_pool *d, const network *net, const int *last, const fsdp_mem_ctx *m)
{
    FSDP_TRY(fsdp_bufs_init(&d->bufs, d->n, 0));
    for (int s = d->n - 1; s >= 0; --s)
        for (int k = d->open_at[s]; k < d->open_at[s + 1]; ++k) {
            int j = d->open_list[k];
            d->buf[j] = fsdp_bufs_take(&d->bufs, fsdp_layer_act_floats(&net->layers[j]), -last[j], -j);
        }
    return fsdp_bufs_alloc(&d->bufs, m);
}

fsdp_status fsdp_delta_pool_setup(fsdp_delta_pool *d, const fsdp_layout_plan *p, const fsdp_mem_ctx *m,
                                  network *net)
{
    d->n = net->n;
    d->buf = malloc((size_t)d->n * sizeof *d->buf);
    if (!d->buf) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < d->n; ++i) d->buf[i] = -1;
    d->set_up = 1;
    d->device = m->device;
    if (!d->enabled) return FSDP_OK;
    int *last = fsdp_layer_last_readers(net);
    if (!last) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    /* A GPU run gives back the device delta (the host twin stays: Darknet's). */
    for (int i = 0; i < d->n; ++i)
        if (poolable(p, net, i, last[i], d->device)) {
            d->buf[i] = 0;
            d->pooled += 1;
            fsdp_mem_free_darknet(&(fsdp_mem_ctx){ .device = d->device }, delta(&net->layers[i], d->device));
        }
    fsdp_status s = fsdp_bufs_index(d->n, d->buf, last, &d->open_at, &d->open_list);
    if (s == FSDP_OK) s = assign(d, net, last, m);
    free(last);
    return s;
}

int fsdp_delta_pool_has(const fsdp_delta_pool *d, int i)
{
    return d->set_up && i >= 0 && i < d->n && d->buf[i] >= 0;
}

fsdp_status fsdp_delta_pool_backward(const fsdp_delta_pool *d, network *net, int i, dn_when when)
{
    if (!d->pooled || i < 0 || i >= d->n) return FSDP_OK;
    if (when == DN_AFTER) {
        if (d->buf[i] >= 0) *delta(&net->layers[i], d->device) = NULL;
        return FSDP_OK;
    }
    const fsdp_mem_ctx m = { .device = d->device };
    for (int k = d->open_at[i]; k < d->open_at[i + 1]; ++k) {
        layer *l = &net->layers[d->open_list[k]];
        float **p = delta(l, d->device);
        *p = d->bufs.ptr[d->buf[d->open_list[k]]];
        FSDP_TRY(fsdp_mem_zero(&m, *p, fsdp_layer_act_floats(l)));
    }
    return FSDP_OK;
}

fsdp_status fsdp_delta_pool_resized(fsdp_delta_pool *d, const fsdp_mem_ctx *m, network *net)
{
    if (!d->pooled) return FSDP_OK;
    for (int i = 0; i < d->n; ++i)
        if (d->buf[i] >= 0) {
            fsdp_mem_free_darknet(&(fsdp_mem_ctx){ .device = d->device }, delta(&net->layers[i], d->device));
            FSDP_TRY(fsdp_bufs_grow(&d->bufs, m, d->buf[i], fsdp_layer_act_floats(&net->layers[i])));
        }
    return FSDP_OK;
}

size_t fsdp_delta_pool_bytes(const fsdp_delta_pool *d)
{
    return fsdp_bufs_bytes(&d->bufs);
}

void fsdp_delta_pool_release(fsdp_delta_pool *d, const fsdp_mem_ctx *m, network *net)
{
    /* A backward a failure cut short may have left deltas open. */
    for (int i = 0; net && d->buf && i < d->n; ++i)
        if (d->buf[i] >= 0) *delta(&net->layers[i], d->device) = NULL;
    fsdp_bufs_free(&d->bufs, m);
    free(d->buf); free(d->open_at); free(d->open_list);
    *d = (fsdp_delta_pool){ .enabled = d->enabled };
}
