#include <stdlib.h>
#include <string.h>
#include "fsdp_acts.h"
#include "fsdp_deltas.h"
#include "fsdp_layers.h"
#include "fsdp_env.h"

int fsdp_acts_wanted(void)
{
    return fsdp_env_switch("FSDP_ACTS");
}

/* ---- a layer's activation arrays, host or device ------------------------ */

/* A layer's arrays (fsdp_layer_act) are Darknet's own: given back and made
 * again as Darknet frees and makes them (fsdp_mem.h). */
static void give_back(float **p, int device) { fsdp_mem_free_darknet(&(fsdp_mem_ctx){ .device = device }, p); }

static fsdp_status remake(float **p, size_t n, int device)
{
    *p = fsdp_mem_alloc_darknet(&(fsdp_mem_ctx){ .device = device }, n);
    return *p ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory for %zu floats of activations", n);
}

/* Batch norm a frozen layer runs in inference mode, through x. */
static int has_bn(const layer *l)
{
    return ((l->type == CONVOLUTIONAL || l->type == CONNECTED) && l->batch_normalize) || l->type == BATCHNORM;
}


/* Where a layer's output stays even when it needs no backward: the
 * network's output (the last layer, or the one before a final cost
 * layer) is read after the forward pass. */
static int read_after_forward(const network *net, int i) { return i >= net->n - 2; }

/* ---- building ------------------------------------------------------------ */

fsdp_status fsdp_acts_layer_built(fsdp_acts *a, const fsdp_cfg *cfg, network *net, int i)
{
    if (!a->enabled) return FSDP_OK;
    if (!a->n) {
        a->need = calloc((size_t)net->n, 1);
        a->freed = calloc((size_t)net->n, 1);
        if (!a->need || !a->freed) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory building layer %d", i);
        a->n = net->n;
        a->device = net->gpu_index >= 0;
    }
    if (i < 0 || i >= a->n) return fsdp_fail(FSDP_ERR_UNSUPPORTED, "layer %d built outside the network", i);
    layer *l = &net->layers[i];
    fsdp_tensor t[FSDP_MAX_TENSORS];
    int frozen = i < cfg->nlayers && cfg->layers[i].frozen;
    int need = fsdp_layer_needs_backward(net, i, fsdp_layer_tensors(l, t) > 0 && !frozen, a->need);
    a->need[i] = (unsigned char)need;
    if (need || !fsdp_layer_plain_arrays(l) || read_after_forward(net, i)) return FSDP_OK;
    /* Every layer reading it comes later: the plan decides at setup. */
    for (fsdp_act_array f = FSDP_ACT_OUTPUT; f <= FSDP_ACT_X_NORM; ++f) {
        if (f != FSDP_ACT_OUTPUT || !a->device) give_back(fsdp_layer_act(l, f, 0), 0);
        if (a->device) give_back(fsdp_layer_act(l, f, 1), 1);
    }
    a->freed[i] = 1;
    return FSDP_OK;
}

/* ---- set-up ---------------------------------------------------------------- */

/* The members of producer c's output: c and the dropout layers after it. */
#define FOR_MEMBERS(a, c, m) for (int m = (c); m < (a)->n && (a)->prod[m] == (c); ++m)

static void point_members(const fsdp_acts *a, network *net, int c, float *p)
{
    FOR_MEMBERS(a, c, m) *fsdp_layer_act(&net->layers[m], FSDP_ACT_OUTPUT, a->device) = p;
}

/* A delta given back while building that the plan keeps (fsdp_deltas.h),
 * for c or a dropout layer sharing it: made again, shared again. */
static fsdp_status restore_delta(const fsdp_acts *a, network *net, int c, const unsigned char *keep)
{
    int kept = 0;
    FOR_MEMBERS(a, c, m) kept |= keep[m];
    if (!a->freed[c] || !kept) return FSDP_OK;
    layer *l = &net->layers[c];
    for (int d = 0; d <= a->device; ++d) {
        /* GPU runs: the host twin too, as Darknet would have it. */
        float **delta = fsdp_layer_act(l, FSDP_ACT_DELTA, d);
        FSDP_TRY(remake(delta, fsdp_layer_act_floats(l), d));
        FOR_MEMBERS(a, c, m) *fsdp_layer_act(&net->layers[m], FSDP_ACT_DELTA, d) = *delta;
    }
    return FSDP_OK;
}

/* Transient outputs share buffers by lifetime (fsdp_bufs.h), from their
 * own forward to their last reader's. */
static fsdp_status assign_buffers(fsdp_acts *a, const network *net, const fsdp_mem_ctx *m)
{
    FSDP_TRY(fsdp_bufs_init(&a->bufs, a->n, 1));
    for (int c = 0; c < a->n; ++c)
        if (a->buf[c] >= 0)
            a->buf[c] = fsdp_bufs_take(&a->bufs, fsdp_layer_act_floats(&net->layers[c]), c, a->last[c]);
    return fsdp_bufs_alloc(&a->bufs, m);
}

/* Which outputs are transient, and until when each output is read. */
static void lifetimes(fsdp_acts *a, const fsdp_layout_plan *p, const network *net)
{
    for (int i = 0; i < a->n; ++i) {
        a->prod[i] = i > 0 && net->layers[i].type == DROPOUT ? a->prod[i - 1] : i;
        a->last[i] = i;
        /* -2: a candidate until a reader needing backward says otherwise */
        a->buf[i] = a->prod[i] == i && !p->need_bwd[i] && fsdp_layer_plain_arrays(&net->layers[i]) &&
                    !read_after_forward(net, i) ? -2 : -1;
    }
    for (int j = 0; j < a->n; ++j) {
        if (a->prod[j] != j && p->need_bwd[j]) a->buf[a->prod[j]] = -1;
        int in[FSDP_MAX_INPUTS], k = fsdp_layer_inputs(net, j, in);
        for (int r = 0; r < k; ++r) {
            if (in[r] < 0 || in[r] >= a->n) continue;
            int c = a->prod[in[r]];
            if (j > a->last[c]) a->last[c] = j;
            if (p->need_bwd[j]) a->buf[c] = -1;
        }
    }
    for (int c = 0; c < a->n; ++c) {
        if (a->buf[c] != -2) continue;
        a->buf[c] = 0;
        FOR_MEMBERS(a, c, m) if (read_after_forward(net, m)) a->buf[c] = -1;   /* a dropout at the end */
    }
}

fsdp_status fsdp_acts_setup(fsdp_acts *a, const fsdp_layout_plan *p, const fsdp_mem_ctx *m, network *net)
{
    if (!a->enabled) return FSDP_OK;
    if (!a->n) {   /* built without the layer_built hook (the planner): nothing was given back yet */
        a->need = calloc((size_t)net->n, 1);
        a->freed = calloc((size_t)net->n, 1);
        a->n = net->n;
    }
    a->device = m->device;
    int n = a->n;
    a->prod = calloc((size_t)n, sizeof *a->prod);
    a->buf = calloc((size_t)n, sizeof *a->buf);
    a->last = calloc((size_t)n, sizeof *a->last);
    a->bn = calloc((size_t)n, 1);
    if (!a->need || !a->freed || !a->prod || !a->buf || !a->last || !a->bn)
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    lifetimes(a, p, net);
    /* What the plan needs of the buffers given back while building. */
    unsigned char *keep = fsdp_deltas_keepers(p, net);
    if (!keep) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < n && s == FSDP_OK; ++i) {
        layer *l = &net->layers[i];
        if (a->prod[i] == i) s = restore_delta(a, net, i, keep);
        if (s == FSDP_OK && a->freed[i] && a->prod[i] == i && a->buf[i] < 0) {
            float **out = fsdp_layer_act(l, FSDP_ACT_OUTPUT, a->device);
            s = remake(out, fsdp_layer_act_floats(l), a->device);
            if (s == FSDP_OK) point_members(a, net, i, *out);
        }
        if (a->prod[i] == i && a->buf[i] >= 0) {
            give_back(fsdp_layer_act(l, FSDP_ACT_OUTPUT, a->device), a->device);
            point_members(a, net, i, NULL);
            a->transient += 1;
        }
        if (p->frozen[i] && has_bn(l)) {
            a->bn[i] = 1;
            for (int d = 0; d <= a->device; ++d) {
                give_back(fsdp_layer_act(l, FSDP_ACT_X, d), d);
                give_back(fsdp_layer_act(l, FSDP_ACT_X_NORM, d), d);
            }
        }
    }
    free(keep);
    if (s == FSDP_OK) s = assign_buffers(a, net, m);
    if (s == FSDP_OK) s = fsdp_bufs_index(a->n, a->buf, a->last, &a->close_at, &a->close_list);
    a->set_up = s == FSDP_OK;
    return s;
}

/* ---- the forward pass -------------------------------------------------------- */

void fsdp_acts_forward(const fsdp_acts *a, network *net, int i, dn_when when)
{
    if (!a->set_up || i < 0 || i >= a->n) return;
    layer *l = &net->layers[i];
    if (when == DN_BEFORE) {
        if (a->prod[i] == i && a->buf[i] >= 0) point_members(a, net, i, a->bufs.ptr[a->buf[i]]);
        if (a->bn[i]) *fsdp_layer_act(l, FSDP_ACT_X, a->device) = *fsdp_layer_act(l, FSDP_ACT_OUTPUT, a->device);
        return;
    }
    for (int k = a->close_at[i]; k < a->close_at[i + 1]; ++k) point_members(a, net, a->close_list[k], NULL);
    if (a->bn[i]) *fsdp_layer_act(l, FSDP_ACT_X, a->device) = NULL;
}

/* ---- resizing and the end -------------------------------------------------- */

fsdp_status fsdp_acts_resized(fsdp_acts *a, const fsdp_mem_ctx *m, network *net)
{
    if (!a->set_up) return FSDP_OK;
    for (int i = 0; i < a->n; ++i) {
        layer *l = &net->layers[i];
        if (a->prod[i] == i && a->buf[i] >= 0) {
            give_back(fsdp_layer_act(l, FSDP_ACT_OUTPUT, a->device), a->device);
            point_members(a, net, i, NULL);
        }
        for (int d = 0; a->bn[i] && d <= a->device; ++d) {
            give_back(fsdp_layer_act(l, FSDP_ACT_X, d), d);
            give_back(fsdp_layer_act(l, FSDP_ACT_X_NORM, d), d);
        }
    }
    for (int i = 0; i < a->n; ++i)
        if (a->prod[i] == i && a->buf[i] >= 0)
            FSDP_TRY(fsdp_bufs_grow(&a->bufs, m, a->buf[i], fsdp_layer_act_floats(&net->layers[i])));
    return FSDP_OK;
}

size_t fsdp_acts_bytes(const fsdp_acts *a)
{
    return a->set_up ? fsdp_bufs_bytes(&a->bufs) : 0;
}

void fsdp_acts_release(fsdp_acts *a, const fsdp_mem_ctx *m, network *net)
{
    if (a->set_up && net)
        for (int i = 0; i < a->n; ++i) {
            if (a->prod[i] == i && a->buf[i] >= 0) point_members(a, net, i, NULL);
            if (a->bn[i]) *fsdp_layer_act(&net->layers[i], FSDP_ACT_X, a->device) = NULL;
        }
    fsdp_bufs_free(&a->bufs, m);
    free(a->need); free(a->freed); free(a->prod); free(a->buf); free(a->last); free(a->bn);
    free(a->close_at); free(a->close_list);
    *a = (fsdp_acts){ .enabled = a->enabled };
}
