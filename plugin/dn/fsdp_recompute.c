/* Activation checkpointing per group (fsdp_recompute.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_layers.h"
#include "fsdp_recompute.h"
#include "network.h"

#define NO_OFF SIZE_MAX
/* A layer's role (fsdp_recompute.h); WHOLE: a last layer whose output a
 * dropout after it (outside the group) scales in place, so its backward
 * reads the scaled values: it keeps everything and is not run again.
 * ALIAS: a dropout inside the group, whose output and delta are its
 * input's: it follows that layer's pointers, and runs again by replaying
 * the draws its forward kept (l.rand). */
enum { OUTSIDE = 0, INNER, KEPT, WHOLE, ALIAS };
/* The roles whose own arrays the arena holds some of. */
static int in_arena(int role) { return role == INNER || role == KEPT; }

/* ---- running a layer's forward again ------------------------------------- */

static void host_forward(network *net, int k)
{
    layer l = net->layers[k];
    network n = *net;
    if (k) n.input = net->layers[k - 1].output;
    n.index = k;
    l.forward(l, n);
}

/* As forward_dropout_layer scaled its input (a dropout never starts a
 * recomputed group: k - 1 is in it). */
static fsdp_status host_dropout(network *net, int k)
{
    const layer *l = &net->layers[k];
    float *input = net->layers[k - 1].output;
    for (size_t i = 0; i < (size_t)l->batch * l->inputs; ++i)
        input[i] = l->rand[i] < l->probability ? 0 : input[i] * l->scale;
    return FSDP_OK;
}

static const fsdp_recompute_ops host_ops = { host_forward, host_dropout };
static const fsdp_recompute_ops *device_ops;

void fsdp_recompute_use_device(const fsdp_recompute_ops *ops) { device_ops = ops; }

/* A layer's array `f` in the memory the layers compute with. */
static float **act(const fsdp_recompute *r, layer *l, fsdp_act_array f)
{
    return fsdp_layer_act(l, f, r->mem.device);
}

/* One of layer l's arrays in the arena: its floats, rounded up to the
 * alignment of the memory (fsdp_mem.h: device arrays start 256 bytes
 * apart, as cuDNN expects; 1 float on the host). */
static size_t stride(const fsdp_recompute *r, const layer *l)
{
    return fsdp_mem_aligned(&r->mem, fsdp_layer_act_floats(l));
}

/* An inner layer's output, delta (unless the delta pool holds it), x and
 * x_norm; a kept one's x and x_norm. */
static size_t arena_floats(const fsdp_recompute *r, const layer *l, int k)
{
    size_t bn = fsdp_layer_has_bn(l) ? 2 : 0;
    if (r->role[k] == INNER) return stride(r, l) * (1 + !r->pooled[k] + bn);
    return r->role[k] == KEPT ? bn * stride(r, l) : 0;
}

/* Why layer l's forward cannot run again to the same bits, or NULL. */
static const char *unrecomputable(const layer *l)
{
    if (fsdp_layer_is_loss(l)) return "which computes the loss in its forward";
    switch (l->type) {
    case CONVOLUTIONAL: case CONNECTED: case MAXPOOL: case AVGPOOL: case SHORTCUT: case ROUTE:
    case UPSAMPLE: case REORG: case BATCHNORM: case ACTIVE: case DROPOUT:
        return NULL;
    case RNN: case GRU: case LSTM: case CRNN:
        return "which carries its state from one step to the next";
    default:
        return "not among the types whose forward runs again exactly (convolutional, connected, "
               "maxpool, avgpool, shortcut, route, upsample, reorg, batchnorm, activation, dropout)";
    }
}

/* Why group g cannot recompute (*bad: the layer that says so, or -1), or NULL. */
static const char *cannot(const fsdp_layout_plan *p, const fsdp_cfg *cfg, const network *net, int g, int *bad)
{
    static char why[320];
    const fsdp_group_info *info = &p->groups[g];
    *bad = -1;
    if (g == 0)
        return "the root group holds the head and the loss, which cannot run twice; name a group below them";
    for (int k = 1; k < p->ngroups; ++k)
        if (p->groups[k].parent == g) return "it has nested groups: name the innermost ones";
    for (int k = 0; k < info->nlayers; ++k) {
        int i = info->layers[k];
        if (k && i != info->layers[k - 1] + 1)
            return "its layers are not one run: a layer of another group stands between them";
        if (!k && net->layers[i].type == DROPOUT)
            return "it starts with a dropout, which scales the layer below the group in place: start it a layer lower";
        *bad = i;
        if (i < cfg->nlayers && cfg->layers[i].frozen) return "is frozen (a frozen layer runs as in inference)";
        if (!p->need_bwd[i]) return "needs no backward, so it keeps no activations already";
        const char *w = unrecomputable(&net->layers[i]);
        if (w) {
            snprintf(why, sizeof why, "is a [%s] layer, %s", get_layer_string(net->layers[i].type), w);
            return why;
        }
    }
    *bad = -1;
    /* A dropout after the group scales its output in place again, which
     * replaying the group's own dropout would not. */
    int last = info->nlayers ? info->layers[info->nlayers - 1] : -1;
    if (last >= 0 && net->layers[last].type == DROPOUT && last + 1 < net->n && net->layers[last + 1].type == DROPOUT)
        return "it ends with a dropout that another dropout after it scales again: end it a layer earlier";
    return NULL;
}

fsdp_status fsdp_recompute_plan(fsdp_recompute *r, const fsdp_layout_plan *p, const fsdp_cfg *cfg,
                                const network *net, int device)
{
    r->n = net->n;
    r->group_on = calloc((size_t)p->ngroups, sizeof *r->group_on);
    if (!r->group_on) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    /* Other commands read layers' outputs after forward: they keep them. */
    if (!r->enabled) return FSDP_OK;
    const char *file = cfg->file ? cfg->file : "cfg";
    int line = 0;
    for (int i = 0; i < cfg->nlayers && i < net->n; ++i) {
        if (!cfg->layers[i].recompute) continue;
        int g = p->layer_group[i], bad;
        const char *why = cannot(p, cfg, net, g, &bad);
        if (why && bad >= 0)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s:%d: recompute=1: group %s cannot run its forward again: layer %d %s",
                             file, cfg->layers[i].recompute_line, p->groups[g].name, bad, why);
        if (why)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s:%d: recompute=1: group %s cannot run its forward again: %s", file,
                             cfg->layers[i].recompute_line, p->groups[g].name, why);
        r->group_on[g] = 1;
        if (!line) line = cfg->layers[i].recompute_line;
    }
    if (cfg->recompute) {
        for (int g = 1; g < p->ngroups; ++g) {
            int bad;
            if (!cannot(p, cfg, net, g, &bad)) r->group_on[g] = 1;
        }
        if (!line) line = cfg->recompute_line;
    }
    for (int g = 0; g < p->ngroups; ++g) r->ngroups_on += r->group_on[g];
    r->ngroups = p->ngroups;
    r->span = malloc(2 * (size_t)p->ngroups * sizeof *r->span);
    if (!r->span) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int g = 0; g < p->ngroups; ++g) {
        /* A recomputed group's layers are one run (cannot() saw to it). */
        const fsdp_group_info *info = &p->groups[g];
        r->span[2 * g] = r->group_on[g] ? info->layers[0] : -1;
        r->span[2 * g + 1] = r->group_on[g] ? info->layers[info->nlayers - 1] : -1;
    }
    if (r->ngroups_on && device && !device_ops)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s:%d: recompute=1: this plugin was built without the device "
                         "recomputation a GPU run needs (-nogpu runs on the host)", file, line);
    return FSDP_OK;
}

/* Whether layer k's output is its group's output or read past the group
 * (last; reader: each layer's last reader): its own, or through the
 * dropouts after it that share it. */
static int kept(const network *net, const int *reader, int k, int last)
{
    for (int j = k; j <= last && (j == k || net->layers[j].type == DROPOUT); ++j)
        if (j == last || reader[j] > last) return 1;
    return 0;
}

/* Inner layers, their places in the arena (one group's at a time, so every
 * group starts at 0) and the statistics' places; the sizes needed.  Again
 * after a resize: the layers' sizes change, not which are inner. */
static fsdp_status layout(fsdp_recompute *r, const network *net)
{
    int *reader = fsdp_layer_last_readers(net);
    if (!reader) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    size_t arena = 0, stats = 0;
    for (int g = 0; g < r->ngroups; ++g) {
        if (!r->group_on[g]) continue;
        int first = r->span[2 * g], last = r->span[2 * g + 1];
        size_t at = 0;
        for (int k = first; k <= last; ++k) {
            const layer *l = &net->layers[k];
            int whole = k == last && k + 1 < net->n && net->layers[k + 1].type == DROPOUT;
            r->role[k] = l->type == DROPOUT ? ALIAS : whole ? WHOLE : kept(net, reader, k, last) ? KEPT : INNER;
            if (fsdp_layer_has_bn(l) && !whole) {
                r->bn.off[k] = stats;
                stats += 2 * (size_t)l->out_c;
            }
            r->off[k] = at;
            at += arena_floats(r, l, k);
        }
        if (at > arena) arena = at;
    }
    r->bn.floats = stats;
    r->arena_need = arena;
    free(reader);
    return FSDP_OK;
}

/* A dropout follows its input's output and delta. */
static void follow(const fsdp_recompute *r, layer *l, layer *input)
{
    *act(r, l, FSDP_ACT_OUTPUT) = *act(r, input, FSDP_ACT_OUTPUT);
    *act(r, l, FSDP_ACT_DELTA) = *act(r, input, FSDP_ACT_DELTA);
}

/* Darknet's own arrays of the inner layers go back (NULL). */
static void give_back(const fsdp_recompute *r, const fsdp_mem_ctx *m, network *net)
{
    for (int k = 0; k < r->n; ++k) {
        if (r->role[k] == ALIAS) follow(r, &net->layers[k], &net->layers[k - 1]);
        if (!in_arena(r->role[k])) continue;
        layer *l = &net->layers[k];
        if (r->role[k] == INNER) {
            fsdp_mem_free_darknet(m, act(r, l, FSDP_ACT_OUTPUT));
            if (!r->pooled[k]) fsdp_mem_free_darknet(m, act(r, l, FSDP_ACT_DELTA));
        }
        fsdp_mem_free_darknet(m, act(r, l, FSDP_ACT_X));
        fsdp_mem_free_darknet(m, act(r, l, FSDP_ACT_X_NORM));
    }
}

fsdp_status fsdp_recompute_setup(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net,
                                 const fsdp_delta_pool *deltas)
{
    r->set_up = 1;
    r->mem = (fsdp_mem_ctx){ .device = m->device, .align = m->align, .no_pool = m->no_pool };
    r->ops = m->device ? device_ops : &host_ops;
    if (!r->ngroups_on) return FSDP_OK;
    r->role = calloc((size_t)r->n, sizeof *r->role);
    r->pooled = calloc((size_t)r->n, sizeof *r->pooled);
    if (r->pooled)
        for (int k = 0; k < r->n; ++k) r->pooled[k] = (unsigned char)fsdp_delta_pool_has(deltas, k);
    r->off = malloc((size_t)r->n * sizeof *r->off);
    r->bn.off = malloc((size_t)r->n * sizeof *r->bn.off);
    if (!r->role || !r->pooled || !r->off || !r->bn.off) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < r->n; ++k) r->off[k] = r->bn.off[k] = NO_OFF;
    FSDP_TRY(layout(r, net));
    give_back(r, m, net);
    r->arena_floats = r->arena_need;
    r->arena = r->arena_floats ? fsdp_mem_alloc(m, r->arena_floats, 0) : NULL;
    r->bn.rolling = r->bn.floats ? fsdp_mem_alloc(m, r->bn.floats, 0) : NULL;
    r->bn.replay = r->bn.floats ? fsdp_mem_alloc(m, r->bn.floats, 1) : NULL;
    if ((r->arena_floats && !r->arena) || (r->bn.floats && (!r->bn.rolling || !r->bn.replay)))
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for the recomputed groups' activations (%zu MB)",
                         fsdp_recompute_bytes(r) >> 20);
    return FSDP_OK;
}

/* Points layer k's arrays into the arena: an inner layer's output, x and
 * x_norm (and, when `delta`, its delta, zeroed, unless the pool holds it);
 * a kept one's x and x_norm; a dropout's after its input's. */
static fsdp_status point(const fsdp_recompute *r, layer *l, int k, int delta)
{
    if (r->role[k] == ALIAS) follow(r, l, l - 1);
    if (!in_arena(r->role[k])) return FSDP_OK;
    size_t n = fsdp_layer_act_floats(l), step = stride(r, l);
    float *at = r->arena + r->off[k];
    if (r->role[k] == INNER) {
        *act(r, l, FSDP_ACT_OUTPUT) = at;
        at += step;
    }
    if (r->role[k] == INNER && !r->pooled[k]) {
        *act(r, l, FSDP_ACT_DELTA) = delta ? at : NULL;
        if (delta) FSDP_TRY(fsdp_mem_zero(&r->mem, at, n));
        at += step;
    }
    if (fsdp_layer_has_bn(l)) {
        *act(r, l, FSDP_ACT_X) = at;
        *act(r, l, FSDP_ACT_X_NORM) = at + step;
    }
    return FSDP_OK;
}

void fsdp_recompute_enter_forward(const fsdp_recompute *r, network *net, int g)
{
    /* No delta is zeroed: nothing can fail. */
    for (int k = r->span[2 * g]; k <= r->span[2 * g + 1]; ++k) (void)point(r, &net->layers[k], k, 0);
}

void fsdp_recompute_leave(const fsdp_recompute *r, network *net, int g)
{
    for (int k = r->span[2 * g]; k <= r->span[2 * g + 1]; ++k) {
        layer *l = &net->layers[k];
        if (r->role[k] == ALIAS) follow(r, l, l - 1);
        if (!in_arena(r->role[k])) continue;
        if (r->role[k] == INNER) *act(r, l, FSDP_ACT_OUTPUT) = NULL;
        if (r->role[k] == INNER && !r->pooled[k]) *act(r, l, FSDP_ACT_DELTA) = NULL;
        *act(r, l, FSDP_ACT_X) = *act(r, l, FSDP_ACT_X_NORM) = NULL;
    }
}

/* Batch norm's rolling statistics of layers first..last: to r->bn.rolling
 * (save), or back from it. */
static fsdp_status rolling(fsdp_recompute *r, network *net, int first, int last, int save)
{
    for (int k = first; k <= last; ++k) {
        if (r->bn.off[k] == NO_OFF) continue;
        layer *l = &net->layers[k];
        float *s = r->bn.rolling + r->bn.off[k], *mean, *variance;
        size_t c = (size_t)l->out_c;
        fsdp_layer_rolling(l, r->mem.device, &mean, &variance);
        if (save) {
            FSDP_TRY(fsdp_mem_copy(&r->mem, s, mean, c));
            FSDP_TRY(fsdp_mem_copy(&r->mem, s + c, variance, c));
        } else {
            FSDP_TRY(fsdp_mem_copy(&r->mem, mean, s, c));
            FSDP_TRY(fsdp_mem_copy(&r->mem, variance, s + c, c));
        }
    }
    return FSDP_OK;
}

fsdp_status fsdp_recompute_enter_backward(const fsdp_recompute *r, network *net, int g)
{
    for (int k = r->span[2 * g]; k <= r->span[2 * g + 1]; ++k) FSDP_TRY(point(r, &net->layers[k], k, 1));
    return FSDP_OK;
}

fsdp_status fsdp_recompute_run(fsdp_recompute *r, network *net, int g)
{
    int first = r->span[2 * g], last = r->span[2 * g + 1];
    FSDP_TRY(fsdp_recompute_enter_backward(r, net, g));
    FSDP_TRY(rolling(r, net, first, last, 1));
    fsdp_status s = FSDP_OK;
    r->running = 1;
    for (int k = first; k <= last && r->role[k] != WHOLE && s == FSDP_OK; ++k) {
        if (r->role[k] == ALIAS) s = r->ops->dropout(net, k);
        else r->ops->forward(net, k);
    }
    r->running = 0;
    fsdp_status back = rolling(r, net, first, last, 0);
    return s != FSDP_OK ? s : back;
}

/* Where layer's forward mean or variance is kept for replay, or NULL:
 * another statistic, or a layer no recomputed group runs again. */
static float *replay_slot(const fsdp_recompute *r, int layer, dn_bn_what what, int channels)
{
    if (layer < 0 || layer >= r->n || !r->bn.off || r->bn.off[layer] == NO_OFF) return NULL;
    if (what != DN_BN_MEAN && what != DN_BN_VARIANCE) return NULL;
    return r->bn.replay + r->bn.off[layer] + (what == DN_BN_VARIANCE ? channels : 0);
}

fsdp_status fsdp_recompute_bn_replay(const fsdp_recompute *r, int layer, dn_bn_what what, float *x, int channels,
                                     int *replayed)
{
    const float *slot = r->running ? replay_slot(r, layer, what, channels) : NULL;
    *replayed = slot != NULL;
    return slot ? fsdp_mem_copy(&r->mem, x, slot, (size_t)channels) : FSDP_OK;
}

fsdp_status fsdp_recompute_bn_record(const fsdp_recompute *r, int layer, dn_bn_what what, const float *x,
                                     int channels)
{
    float *slot = r->running ? NULL : replay_slot(r, layer, what, channels);
    return slot ? fsdp_mem_copy(&r->mem, slot, x, (size_t)channels) : FSDP_OK;
}

fsdp_status fsdp_recompute_resized(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net)
{
    if (!r->set_up || !r->ngroups_on) return FSDP_OK;
    give_back(r, m, net);
    FSDP_TRY(layout(r, net));
    size_t most = r->arena_need;
    if (most <= r->arena_floats) return FSDP_OK;
    fsdp_mem_free(m, r->arena);
    r->arena = fsdp_mem_alloc(m, most, 0);
    r->arena_floats = most;
    return r->arena ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory growing the recomputed groups' "
                                          "activations to %zu MB", (most * sizeof(float)) >> 20);
}

size_t fsdp_recompute_bytes(const fsdp_recompute *r)
{
    return (r->arena_floats + 2 * r->bn.floats) * sizeof(float);
}

void fsdp_recompute_release(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net)
{
    /* A pass a failure cut short may have left layers pointing into it. */
    if (r->role && net)
        for (int g = 0; g < r->ngroups; ++g)
            if (r->group_on[g]) fsdp_recompute_leave(r, net, g);
    if (r->arena) fsdp_mem_free(m, r->arena);
    if (r->bn.rolling) fsdp_mem_free(m, r->bn.rolling);
    if (r->bn.replay) fsdp_mem_free(m, r->bn.replay);
    free(r->group_on);
    free(r->role);
    free(r->pooled);
    free(r->off);
    free(r->bn.off);
    free(r->span);
    int enabled = r->enabled;
    *r = (fsdp_recompute){ .enabled = enabled };
}
