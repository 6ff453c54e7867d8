/* Synchronized batch norm (fsdp_bn.h): the bn_sync hook. */
#include <stdlib.h>
#include <string.h>
#include "fsdp_bn.h"
#include "fsdp_hash.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"

static const char *what_str(dn_bn_what what)
{
    switch (what) {
    case DN_BN_MEAN: return "mean";
    case DN_BN_VARIANCE: return "variance";
    case DN_BN_MEAN_DELTA: return "mean_delta";
    case DN_BN_VARIANCE_DELTA: return "variance_delta";
    }
    return "?";
}

/* What turns the sum over ranks into the global value (fsdp_bn.h). */
static float global_factor(dn_bn_what what, int world, int count)
{
    if (what == DN_BN_VARIANCE) return (float)((double)(count - 1) / ((double)world * count - 1));
    return (float)(1.0 / world);
}

/* buf[0 .. n) = a * (its sum over ranks), host memory. */
static fsdp_status reduce_host(fsdp_bn *bn, float *buf, size_t n, float a)
{
    FSDP_TRY(fsdp_coll_all_reduce(bn->coll, buf, n));   /* host runs: the host collectives */
    for (size_t c = 0; c < n; ++c) buf[c] *= a;
    return FSDP_OK;
}

/* On the host each all-reduce is a point where both ranks must be running;
 * Darknet reads mean_delta only after variance_delta (normalize_delta), so
 * the two travel in one all-reduce: mean_delta waits in bn->pending. */
static fsdp_status host_sync(fsdp_bn *bn, int layer, dn_bn_what what, float *x, int channels, float a)
{
    if (bn->pending && !(what == DN_BN_VARIANCE_DELTA && bn->pending_channels == channels)) {
        /* Not Darknet's order: the waiting mean_delta goes alone first. */
        float *p = bn->pending;
        bn->pending = NULL;
        FSDP_TRY(reduce_host(bn, p, (size_t)bn->pending_channels, (float)(1.0 / bn->ctl->world)));
    }
    if (what == DN_BN_MEAN_DELTA) {
        bn->pending = x;
        bn->pending_channels = channels;
        return FSDP_OK;
    }
    float *md = what == DN_BN_VARIANCE_DELTA && bn->pending_channels == channels ? bn->pending : NULL;
    bn->pending = NULL;
    size_t n = (size_t)channels * (md ? 2 : 1);
    float stack[2048], *buf = x;
    if (md) {
        buf = n <= sizeof stack / sizeof *stack ? stack : malloc(n * sizeof *buf);
        if (!buf) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
        memcpy(buf, md, (size_t)channels * sizeof *buf);
        memcpy(buf + channels, x, (size_t)channels * sizeof *buf);
    }
    fsdp_status s = reduce_host(bn, buf, n, a);
    if (s == FSDP_OK) {
        if (md) {
            memcpy(md, buf, (size_t)channels * sizeof *buf);
            memcpy(x, buf + channels, (size_t)channels * sizeof *buf);
        }
    }
    if (buf != stack && buf != x) free(buf);
    if (s != FSDP_OK)
        return fsdp_fail(s, "layer %d: synchronized batch norm (%s): all-reduce failed", layer, what_str(what));
    return FSDP_OK;
}

fsdp_status fsdp_bn_attach(fsdp_bn *bn, const network *net, fsdp_ctl *ctl, fsdp_coll *coll,
                           const fsdp_mem_ctx *mem, const fsdp_layout_plan *plan)
{
    bn->net = net;
    bn->ctl = ctl;
    bn->coll = coll;
    bn->mem = mem;
    bn->plan = plan;
    free(bn->group_bytes);
    bn->group_bytes = calloc((size_t)plan->ngroups, sizeof *bn->group_bytes);
    return bn->group_bytes ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
}

void fsdp_bn_free(fsdp_bn *bn)
{
    free(bn->group_bytes);
    *bn = (fsdp_bn){ 0 };
}

int fsdp_bn_of_run(const fsdp_bn *bn, const network *net)
{
    /* net is Darknet's by-value copy: the layers array names the network. */
    return bn->net && net->layers && net->layers == bn->net->layers;
}

fsdp_status fsdp_bn_check_recurrent(const fsdp_bn_run *run, const network *net)
{
    if (run->world < 2 || !run->sync_bn) return FSDP_OK;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        /* CRNN hands its sub-layers the run's network everywhere, rnn and
         * gru on the host; lstm nowhere. */
        if (run->frozen[i] || l->type == CRNN || !fsdp_layer_recurrent_bn(l)) continue;
        if (!run->device && l->type != LSTM) continue;
        return fsdp_fail(FSDP_ERR_UNSUPPORTED,
                         "%s: layer %d (%s, with batch_normalize): synchronized batch norm cannot reach the "
                         "batch norm inside lstm layers, nor inside rnn and gru layers on the GPU (Darknet runs "
                         "their sub-layers in a network of their own there); set sync_bn=0 in [net]%s",
                         run->file ? run->file : "cfg", i, l->type == RNN ? "rnn" : l->type == GRU ? "gru" : "lstm",
                         l->type == LSTM ? "" : ", or train on the CPU (-nogpu)");
    }
    return FSDP_OK;
}

fsdp_status fsdp_bn_sync(fsdp_bn *bn, network *net, int layer, dn_bn_what what, float *x, int channels, int count)
{
    if (!fsdp_bn_of_run(bn, net) || !net->train || bn->ctl->world == 1 || channels <= 0)
        return FSDP_OK;
    if (count < 2)
        /* Darknet divides this rank's variance by count - 1 = 0: nothing
         * left to combine.  Same cfg, same layer: every rank stops here. */
        return fsdp_fail(FSDP_ERR_CONFIG, "layer %d: synchronized batch norm needs at least 2 values per "
                         "channel on each rank (batch x height x width is %d); raise batch, or set "
                         "sync_bn=0 in [net]", layer, count);
    float a = global_factor(what, bn->ctl->world, count);
    if (bn->mem->device) {
        FSDP_TRY(fsdp_coll_all_reduce(bn->coll, x, (size_t)channels));
        fsdp_status s = fsdp_mem_scale(bn->mem, x, channels, a);
        if (s != FSDP_OK)
            return fsdp_fail(s, "layer %d: synchronized batch norm (%s)", layer, what_str(what));
    } else {
        FSDP_TRY(host_sync(bn, layer, what, x, channels, a));
    }
    uint64_t bytes = (uint64_t)channels * sizeof(float);
    bn->bytes += bytes;
    if (layer >= 0 && layer < bn->plan->nlayers) bn->group_bytes[bn->plan->layer_group[layer]] += bytes;
    return FSDP_OK;
}

fsdp_status fsdp_bn_check_rolling(fsdp_bn *bn, network *net)
{
    if (!bn->net || net != bn->net) return FSDP_OK;
    uint64_t h = FSDP_FNV1A_START, lo, hi;
    float *tmp = NULL;
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < net->n && s == FSDP_OK; ++i) {
        layer *l = &net->layers[i];
        if (!fsdp_layer_has_bn(l) || !l->rolling_mean || !l->rolling_variance) continue;
        float *m, *v;
        fsdp_layer_rolling(l, bn->mem->device, &m, &v);
        if (bn->mem->device) {
            /* Darknet trains the device copies; the host ones are stale. */
            float *t = realloc(tmp, 2 * (size_t)l->out_c * sizeof *t);
            if (!t) { s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory"); break; }
            tmp = t;
            s = fsdp_mem_to_host(bn->mem, tmp, m, (size_t)l->out_c);
            if (s == FSDP_OK) s = fsdp_mem_to_host(bn->mem, tmp + l->out_c, v, (size_t)l->out_c);
            m = tmp;
            v = tmp + l->out_c;
        }
        size_t bytes = (size_t)l->out_c * sizeof *m;
        h = fsdp_fnv1a(fsdp_fnv1a(h, m, bytes), v, bytes);
    }
    free(tmp);
    /* Every rank takes part even after a local failure, so none waits alone. */
    FSDP_TRY(fsdp_ctl_all_ok(bn->ctl, s, FSDP_ERR_COMM, "could not read its rolling statistics"));
    FSDP_TRY(fsdp_ctl_min_max_u64(bn->ctl, h, &lo, &hi));
    ++bn->rolling_checks;
    if (lo != hi) ++bn->rolling_differ;
    return FSDP_OK;
}
