#include <stdlib.h>
#include <string.h>
#include "fsdp_stage.h"

/* *yes: layer i is in state `want`; then its tensors in t[0..*nt), checked
 * against what was staged (the list must not change between the layer's
 * build and its load or take-back). */
static fsdp_status in_state(fsdp_stage *s, network *net, int i, fsdp_stage_state want, fsdp_tensor *t, int *nt,
                            int *yes)
{
    *yes = i >= 0 && i < s->nlayers && s->layers[i].state == want;
    if (!*yes) return FSDP_OK;
    *nt = fsdp_layer_tensors(&net->layers[i], t);
    if (*nt != s->layers[i].nt)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "layer %d: its parameter tensors changed after it was built", i);
    return FSDP_OK;
}

/* The part of a tensor of `count` floats in this rank's slice [lo, lo + n). */
static size_t own_part(const fsdp_stage *s, size_t count, size_t *lo)
{
    size_t q = fsdp_stage_slice(count, s->world);
    *lo = (size_t)s->rank * q;
    return *lo >= count ? 0 : count - *lo < q ? count - *lo : q;
}

fsdp_status fsdp_stage_layer_built(fsdp_stage *s, network *net, int i)
{
    if (!s->enabled) return FSDP_OK;
    if (!s->layers) {
        s->layers = calloc((size_t)net->n, sizeof *s->layers);
        if (!s->layers) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory building layer %d", i);
        s->nlayers = net->n;
    }
    if (i < 0 || i >= s->nlayers) return fsdp_fail(FSDP_ERR_UNSUPPORTED, "layer %d built outside the network", i);
    fsdp_stage_layer *L = &s->layers[i];
    fsdp_tensor t[FSDP_MAX_TENSORS];
    int nt = fsdp_layer_tensors(&net->layers[i], t);
    fsdp_layer_free_darknet_optimizer(&net->layers[i]);
    for (int k = 0; k < nt; ++k) {
        if (!*t[k].data)
            return fsdp_fail(FSDP_ERR_UNSUPPORTED, "layer %d: Darknet built it without the parameter array "
                             "%d of %d the plugin expects", i, k + 1, nt);
        size_t lo, n = own_part(s, t[k].count, &lo);
        float *p = calloc(fsdp_stage_slice(t[k].count, s->world), sizeof *p);
        if (!p) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory keeping layer %d's parameters", i);
        if (n) memcpy(p, *t[k].data + lo, n * sizeof *p);
        L->slice[L->nt++] = p;
        free(*t[k].data);
        free(*t[k].grad);
        *t[k].data = *t[k].grad = NULL;
        /* GPU runs: the device twins Darknet made go too; loading's
         * push_*_layer then skips them (patch 0041) and setup copies the
         * host values gathered back into the device shards. */
        if (net->gpu_index >= 0) fsdp_tensor_free_device(&t[k]);
    }
    L->state = FSDP_STAGE_SLICED;
    return FSDP_OK;
}

fsdp_status fsdp_stage_load_begin(fsdp_stage *s, network *net, int i)
{
    fsdp_tensor t[FSDP_MAX_TENSORS];
    int nt, yes;
    FSDP_TRY(in_state(s, net, i, FSDP_STAGE_SLICED, t, &nt, &yes));
    if (!yes) return FSDP_OK;
    fsdp_stage_layer *L = &s->layers[i];
    for (int k = 0; k < nt; ++k) {
        size_t lo, n = own_part(s, t[k].count, &lo);
        float *p = calloc(t[k].count, sizeof *p);
        if (!p) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory loading layer %d", i);
        if (n) memcpy(p + lo, L->slice[k], n * sizeof *p);
        *t[k].data = p;
    }
    L->state = FSDP_STAGE_LOADING;
    return FSDP_OK;
}

fsdp_status fsdp_stage_load_end(fsdp_stage *s, network *net, int i)
{
    fsdp_tensor t[FSDP_MAX_TENSORS];
    int nt, yes;
    FSDP_TRY(in_state(s, net, i, FSDP_STAGE_LOADING, t, &nt, &yes));
    if (!yes) return FSDP_OK;
    fsdp_stage_layer *L = &s->layers[i];
    for (int k = 0; k < nt; ++k) {
        size_t lo, n = own_part(s, t[k].count, &lo);
        if (n) memcpy(L->slice[k], *t[k].data + lo, n * sizeof(float));
        free(*t[k].data);
        *t[k].data = NULL;
    }
    L->state = FSDP_STAGE_SLICED;
    return FSDP_OK;
}

fsdp_status fsdp_stage_take_back(fsdp_stage *s, network *net, int i)
{
    fsdp_tensor t[FSDP_MAX_TENSORS];
    int nt, yes;
    FSDP_TRY(in_state(s, net, i, FSDP_STAGE_SLICED, t, &nt, &yes));
    if (!yes) return FSDP_OK;
    fsdp_stage_layer *L = &s->layers[i];
    for (int k = 0; k < nt; ++k) {
        size_t q = fsdp_stage_slice(t[k].count, s->world);
        float *full = malloc((size_t)s->world * q * sizeof *full);
        if (!full) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory gathering layer %d's parameters", i);
        fsdp_status st = fsdp_coll_all_gather(s->coll, L->slice[k], full, q);
        if (st != FSDP_OK) {
            free(full);
            return st;
        }
        free(L->slice[k]);
        L->slice[k] = NULL;
        *t[k].data = full;
        s->gather_bytes += (uint64_t)s->world * q * sizeof *full;
    }
    L->state = FSDP_STAGE_GATHERED;
    return FSDP_OK;
}

void fsdp_stage_free(fsdp_stage *s)
{
    for (int i = 0; i < s->nlayers; ++i)
        for (int k = 0; k < s->layers[i].nt; ++k) free(s->layers[i].slice[k]);
    free(s->layers);
    s->layers = NULL;
    s->nlayers = 0;
}
