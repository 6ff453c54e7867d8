/* Synchronized batch norm (fsdp_bn.h): the bn_sync hook. */
#include <stdlib.h>
#include <string.h>
#include "fsdp_bn.h"
#include "fsdp_hash.h"
#ifdef GPU
#include "fsdp_kernels.h"
#endif

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
static fsdp_status reduce_host(fsdp_engine *e, float *buf, size_t n, float a)
{
    FSDP_TRY(fsdp_coll_all_reduce(e->dbe, buf, n));   /* host runs: the host collectives */
    for (size_t c = 0; c < n; ++c) buf[c] *= a;
    return FSDP_OK;
}

/* On the host each all-reduce is a point where both ranks must be running;
 * Darknet reads mean_delta only after variance_delta (normalize_delta), so
 * the two travel in one all-reduce: mean_delta waits in e->bn_pending. */
static fsdp_status host_sync(fsdp_engine *e, int layer, dn_bn_what what, float *x, int channels, float a)
{
    if (e->bn_pending && !(what == DN_BN_VARIANCE_DELTA && e->bn_pending_channels == channels)) {
        /* Not Darknet's order: the waiting mean_delta goes alone first. */
        float *p = e->bn_pending;
        e->bn_pending = NULL;
        FSDP_TRY(reduce_host(e, p, (size_t)e->bn_pending_channels, (float)(1.0 / e->be->world)));
    }
    if (what == DN_BN_MEAN_DELTA) {
        e->bn_pending = x;
        e->bn_pending_channels = channels;
        return FSDP_OK;
    }
    float *md = what == DN_BN_VARIANCE_DELTA && e->bn_pending_channels == channels ? e->bn_pending : NULL;
    e->bn_pending = NULL;
    size_t n = (size_t)channels * (md ? 2 : 1);
    float stack[2048], *buf = x;
    if (md) {
        buf = n <= sizeof stack / sizeof *stack ? stack : malloc(n * sizeof *buf);
        if (!buf) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
        memcpy(buf, md, (size_t)channels * sizeof *buf);
        memcpy(buf + channels, x, (size_t)channels * sizeof *buf);
    }
    fsdp_status s = reduce_host(e, buf, n, a);
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

fsdp_status fsdp_bn_sync(fsdp_engine *e, network *net, int layer, dn_bn_what what, float *x,
                         int channels, int count)
{
    /* net is Darknet's by-value copy: the layers array names the network. */
    if (!e->net || net->layers != e->net->layers || !net->train || e->be->world == 1 || channels <= 0)
        return FSDP_OK;
    if (count < 2)
        /* Darknet divides this rank's variance by count - 1 = 0: nothing
         * left to combine.  Same cfg, same layer: every rank stops here. */
        return fsdp_fail(FSDP_ERR_CONFIG, "layer %d: synchronized batch norm needs at least 2 values per "
                         "channel on each rank (batch x height x width is %d); raise batch, or set "
                         "sync_bn=0 in [net]", layer, count);
    float a = global_factor(what, e->be->world, count);
    if (e->mem.device) {
#ifdef GPU
        FSDP_TRY(fsdp_coll_all_reduce(e->dbe, x, (size_t)channels));
        fsdp_bn_scale_gpu(x, channels, a);
        fsdp_status s = fsdp_kernels_status();
        if (s != FSDP_OK)
            return fsdp_fail(s, "layer %d: synchronized batch norm (%s)", layer, what_str(what));
#endif
    } else {
        FSDP_TRY(host_sync(e, layer, what, x, channels, a));
    }
    uint64_t bytes = (uint64_t)channels * sizeof(float);
    e->bytes_bn += bytes;
    if (layer >= 0 && layer < e->plan.nlayers) e->groups[e->plan.layer_group[layer]].bn_bytes += bytes;
    return FSDP_OK;
}

fsdp_status fsdp_bn_check_rolling(fsdp_engine *e, network *net)
{
    if (net != e->net) return FSDP_OK;
    uint64_t h = FSDP_FNV1A_START, lo, hi;
    float *tmp = NULL;
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < net->n && s == FSDP_OK; ++i) {
        layer *l = &net->layers[i];
        if (!(l->batch_normalize || l->type == BATCHNORM) || !l->rolling_mean || !l->rolling_variance) continue;
        const float *m = l->rolling_mean, *v = l->rolling_variance;
#ifdef GPU
        if (e->mem.device) {
            /* Darknet trains the device copies; the host ones are stale. */
            float *t = realloc(tmp, 2 * (size_t)l->out_c * sizeof *t);
            if (!t) { s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory"); break; }
            tmp = t;
            s = fsdp_mem_to_host(&e->mem, tmp, l->rolling_mean_gpu, (size_t)l->out_c);
            if (s == FSDP_OK) s = fsdp_mem_to_host(&e->mem, tmp + l->out_c, l->rolling_variance_gpu, (size_t)l->out_c);
            m = tmp;
            v = tmp + l->out_c;
        }
#endif
        size_t bytes = (size_t)l->out_c * sizeof *m;
        h = fsdp_fnv1a(fsdp_fnv1a(h, m, bytes), v, bytes);
    }
    free(tmp);
    /* Every rank takes part even after a local failure, so none waits alone. */
    FSDP_TRY(fsdp_ctl_all_ok(e->be, s, FSDP_ERR_COMM, "could not read its rolling statistics"));
    FSDP_TRY(fsdp_ctl_min_max_u64(e->be, h, &lo, &hi));
    ++e->bn_rolling_checks;
    if (lo != hi) ++e->bn_rolling_differ;
    return FSDP_OK;
}
