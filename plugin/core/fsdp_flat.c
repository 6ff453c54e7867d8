#include <stdlib.h>
#include <string.h>
#include "fsdp_flat.h"

static void point(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->lay.nt; ++k) *f->res.data_at[k] = base ? base + f->lay.off[k] : NULL;
}

void fsdp_flat_point_grad(const fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->lay.nt; ++k) *f->res.grad_at[k] = base ? base + f->lay.off[k] : NULL;
}

/* Where this rank's own part starts in the flat's whole layout: its shard,
 * or all of it under `none`. */
static size_t own_lo(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    return f->kind.whole ? 0 : (size_t)c->ctl->rank * f->lay.shard;
}

/* Which part of each tensor this rank updates: its intersection with
 * [lo, lo + own_count) of the full buffer. */
static fsdp_status make_runs(fsdp_flat *f, size_t lo)
{
    f->lay.runs = calloc((size_t)f->lay.nt + 1, sizeof *f->lay.runs);
    if (!f->lay.runs) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory laying out a group");
    size_t hi = lo + f->lay.own_count;
    for (int k = 0; k < f->lay.nt; ++k) {
        size_t a = f->lay.off[k], b = f->lay.off[k] + f->lay.t[k].count;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        f->lay.runs[f->lay.nruns++] = (fsdp_run){ a - lo, b - a, f->lay.t[k].is_weight, f->lay.t[k].owner };
    }
    return FSDP_OK;
}

/* Frees Darknet's copies of what the flat now holds.  On the device the
 * host parameter arrays go too (Darknet has loaded its weights by now):
 * saving lends them one group at a time (fsdp_flat_save_begin). */
static void free_darknet_arrays(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    for (int k = 0; k < f->lay.nt; ++k) {
        fsdp_tensor *t = &f->lay.t[k];
        free(*t->grad);
        *t->grad = NULL;
        if (c->mem->device) {
            free(*t->data);
            *t->data = NULL;
        }
        fsdp_mem_free_darknet(c->mem, f->res.data_at[k]);
        fsdp_mem_free_darknet(c->mem, f->res.grad_at[k]);
    }
}

/* *out = a zeroed buffer of n floats holding [lo, lo + n) of the flat,
 * copied piece by piece from the tensors' host arrays (padding stays 0). */
static fsdp_status fill_from_tensors(const fsdp_flat_ctx *c, const fsdp_flat *f, float **out, size_t lo, size_t n)
{
    float *p = fsdp_mem_alloc(c->mem, n, 1);
    if (!p) return FSDP_ERR_NOMEM;
    for (int k = 0; k < f->lay.nt; ++k) {
        size_t a = f->lay.off[k], b = f->lay.off[k] + f->lay.t[k].count;
        if (a < lo) a = lo;
        if (b > lo + n) b = lo + n;
        if (a >= b) continue;
        fsdp_status s = fsdp_mem_from_host(c->mem, p + (a - lo), *f->lay.t[k].data + (a - f->lay.off[k]), b - a);
        if (s != FSDP_OK) {
            fsdp_mem_free(c->mem, p);
            return s;
        }
    }
    *out = p;
    return FSDP_OK;
}

/* Offsets, sizes and the arrays each tensor is re-pointed through. */
static fsdp_status lay_out(const fsdp_flat_ctx *c, fsdp_flat *f, const fsdp_tensor *t, int nt)
{
    f->lay.t = malloc((size_t)nt * sizeof *f->lay.t);
    f->lay.off = malloc((size_t)nt * sizeof *f->lay.off);
    f->res.data_at = malloc((size_t)nt * sizeof *f->res.data_at);
    f->res.grad_at = malloc((size_t)nt * sizeof *f->res.grad_at);
    if (!f->lay.t || !f->lay.off || !f->res.data_at || !f->res.grad_at)
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory laying out a group");
    memcpy(f->lay.t, t, (size_t)nt * sizeof *t);
    f->lay.nt = nt;
    for (int k = 0; k < nt; ++k) {
        f->res.data_at[k] = fsdp_tensor_array(&t[k], c->mem->device, 0);
        f->res.grad_at[k] = fsdp_tensor_array(&t[k], c->mem->device, 1);
        /* Gaps before aligned tensors are zeros no run covers: never updated. */
        f->lay.off[k] = fsdp_mem_aligned(c->mem, f->lay.count);
        f->lay.count = f->lay.off[k] + t[k].count;
        f->lay.params += t[k].count;
    }
    /* Shards aligned too: each rank's part of a gathered buffer starts aligned. */
    f->lay.shard = fsdp_mem_aligned(c->mem, fsdp_shard_count(f->lay.count, c->ctl->world));
    const fsdp_flat_kind *k = &f->kind;
    f->lay.nfull = (k->sharded || k->trainable) && !k->whole ? f->lay.shard * (size_t)c->ctl->world : f->lay.count;
    /* Replicated frozen parameters have no own part: nobody updates them. */
    f->lay.own_count = !k->sharded && !k->trainable ? 0 : k->whole ? f->lay.count : f->lay.shard;
    return FSDP_OK;
}

fsdp_status fsdp_flat_setup(const fsdp_flat_ctx *c, fsdp_flat *f, const fsdp_tensor *t, int nt,
                            fsdp_flat_kind kind)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->res.state = kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED;
    if (!nt) return FSDP_OK;
    FSDP_TRY(lay_out(c, f, t, nt));

    /* Rank 0's values for every rank (ranks may have initialised differently),
     * broadcast in Darknet's own host arrays: no second copy of the model. */
    for (int k = 0; k < nt && !c->values_agreed; ++k) {
        FSDP_TRY(fsdp_ctl_broadcast(c->ctl, *t[k].data, t[k].count * sizeof(float), 0));
        f->lay.bcast_bytes += t[k].count * sizeof(float);
    }
    if (kind.sharded) {
        FSDP_TRY(fill_from_tensors(c, f, &f->res.own, own_lo(c, f), f->lay.shard));
    } else if (kind.trainable) {
        /* A replica; this rank updates all of it (`none`) or its own part of
         * it in place (grad_op), then all-gathers in place. */
        FSDP_TRY(fill_from_tensors(c, f, &f->res.full, 0, f->lay.nfull));
        f->res.own = f->res.full + own_lo(c, f);
        f->res.own_in_full = 1;
    } else {
        FSDP_TRY(fill_from_tensors(c, f, &f->res.full, 0, f->lay.count));   /* replicated frozen parameters */
    }
    free_darknet_arrays(c, f);
    if (f->res.state == FSDP_FLAT_GATHERED) point(f, f->res.full);

    if (kind.trainable) {
        /* SGD keeps momentum only; Adam a second moment too. */
        FSDP_TRY(fsdp_optim_state_alloc(c->mem, &f->opt, f->lay.own_count, kind.adam, c->ctl->world));
        FSDP_TRY(make_runs(f, own_lo(c, f)));
    }
    size_t floats = (f->res.own && !f->res.own_in_full ? f->lay.own_count : 0) + (f->res.full ? f->lay.nfull : 0);
    if (kind.trainable) floats += (size_t)(1 + kind.adam) * f->lay.own_count;
    f->lay.state_bytes = floats * sizeof(float);
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

void fsdp_flat_free(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    /* Nothing may still be writing into a buffer about to be freed. */
    if (f->res.state == FSDP_FLAT_GATHERING) fsdp_coll_wait(c->coll, f->res.gather_ticket);
    if (f->lay.nt) {
        point(f, NULL);
        fsdp_flat_point_grad(f, NULL);
    }
    if (f->res.in_node) {
        /* Node memory lives as long as the backend. */
    } else if (f->res.own_in_full) {
        fsdp_mem_free(c->mem, f->res.full);   /* a replica holding own */
    } else {
        if (f->res.full != f->res.own) {
            if (f->kind.sharded) fsdp_mem_give(c->mem, f->res.full);   /* gathered for a step */
            else fsdp_mem_free(c->mem, f->res.full);                   /* replicated frozen parameters */
        }
        fsdp_mem_free(c->mem, f->res.own);
    }
    fsdp_mem_give(c->mem, f->save.grad);
    fsdp_mem_give(c->mem, f->res.pending);
    free(f->lay.t);
    free(f->lay.off);
    free(f->res.data_at);
    free(f->res.grad_at);
    fsdp_optim_state_free(c->mem, &f->opt);
    free(f->lay.runs);
    memset(f, 0, sizeof *f);
}

fsdp_status fsdp_flat_move_to_node(const fsdp_flat_ctx *c, fsdp_flat *f, float *node)
{
    if (!f->lay.nt || !f->kind.sharded || f->res.state != FSDP_FLAT_SHARDED)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "only a sharded flat between uses moves to node memory");
    float *mine = node + own_lo(c, f);
    memcpy(mine, f->res.own, f->lay.shard * sizeof(float));
    fsdp_mem_free(c->mem, f->res.own);
    f->res.own = mine;
    f->res.node = node;
    f->res.in_node = 1;
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

int fsdp_flat_fits_slot(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    return f->res.in_node && f->lay.nfull <= c->node->slot_floats;
}

fsdp_status fsdp_flat_own_written(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->res.in_node) return FSDP_OK;
    fsdp_node *n = c->node;
    n->stale = 1;
    f->res.written_at = n->syncs + 1;
    FSDP_CHECK(fsdp_flat_check(c, f));
    if (n->at.machines == 1) return FSDP_OK;
    *bytes = f->lay.nfull * sizeof(float);
    /* One on its way at a time, so that a model of many groups stays
     * within the backend's tickets: the one before has had the exchanges
     * since to travel with. */
    FSDP_TRY(fsdp_flat_node_settle(c));
    fsdp_wire before = c->coll->wire ? *c->coll->wire : (fsdp_wire){ 0 };
    int ev = fsdp_tl_begin(c->tl, "parts", -1);   /* ended at the wait (fsdp_flat_node_settle) */
    FSDP_TRY(fsdp_coll_peer_all_gather_start(c->coll, f->res.node, f->lay.shard, &n->publish_ticket));
    if (c->coll->wire) {
        n->publish_out = c->coll->wire->out - before.out;
        n->publish_in = c->coll->wire->in - before.in;
        fsdp_tl_add_bytes(c->tl, ev, n->publish_out, n->publish_in);
    }
    n->publishing = 1;
    n->publishing_flat = f;
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

fsdp_status fsdp_flat_node_settle(const fsdp_flat_ctx *c)
{
    fsdp_node *n = c->node;
    if (!n->publishing) return FSDP_OK;
    n->publishing = 0;
    fsdp_status s = fsdp_coll_wait(c->coll, n->publish_ticket);
    /* The peers' parts landed in this machine's memory: the next sync shows
     * them to its other ranks. */
    n->stale = 1;
    if (n->publishing_flat) n->publishing_flat->res.written_at = n->syncs + 1;
    n->publishing_flat = NULL;
    fsdp_tl_end(c->tl, fsdp_tl_find_open(c->tl, "parts", -2), 0, 0);
    return s;
}

fsdp_status fsdp_flat_unshard_start(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->lay.nt) return FSDP_OK;
    FSDP_ASSERT(f->res.state == FSDP_FLAT_SHARDED, "flat unshard_start: SHARDED");
    if (c->ctl->world == 1 || !fsdp_coll_starts_all_gather(c->coll) || f->res.in_node) return FSDP_OK;
    f->res.pending = fsdp_mem_take(c->mem, f->lay.nfull, 0);
    if (!f->res.pending) return FSDP_ERR_NOMEM;
    f->res.state = FSDP_FLAT_GATHERING;
    FSDP_TRY(fsdp_coll_all_gather_start(c->coll, f->res.own, f->res.pending, f->lay.shard, &f->res.gather_ticket));
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

fsdp_status fsdp_flat_unshard(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->lay.nt || f->res.state == FSDP_FLAT_GATHERED) return FSDP_OK;
    if (f->res.state == FSDP_FLAT_GATHERING) {
        FSDP_TRY(fsdp_coll_wait(c->coll, f->res.gather_ticket));
        f->res.full = f->res.pending;
        f->res.pending = NULL;
    } else if (c->ctl->world == 1) {
        f->res.full = f->res.own;   /* a world of one: the shard is the whole buffer */
    } else if (f->res.in_node) {
        const fsdp_node *n = c->node;
        if (f->res.written_at > n->syncs || (n->publishing && n->publishing_flat == f)) {
            FSDP_TRY(fsdp_flat_node_settle(c));
            if (n->stale) FSDP_TRY(fsdp_flat_node_sync(c));
        }
        f->res.full = f->res.node;
        f->res.state = FSDP_FLAT_GATHERED;
        point(f, f->res.full);
        FSDP_CHECK(fsdp_flat_check(c, f));
        return FSDP_OK;     /* nothing moved */
    } else {
        f->res.full = fsdp_mem_take(c->mem, f->lay.nfull, 0);
        if (!f->res.full) return FSDP_ERR_NOMEM;
        FSDP_TRY(fsdp_coll_all_gather(c->coll, f->res.own, f->res.full, f->lay.shard));
    }
    f->res.state = FSDP_FLAT_GATHERED;
    *bytes = f->lay.nfull * sizeof(float);
    point(f, f->res.full);
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

void fsdp_flat_reshard(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->lay.nt || !f->kind.sharded) return;   /* replicated parameters stay */
    FSDP_ASSERT(f->res.state == FSDP_FLAT_GATHERED, "flat reshard: GATHERED");
    point(f, NULL);
    if (f->res.full != f->res.own && !f->res.in_node) fsdp_mem_give(c->mem, f->res.full);
    f->res.full = NULL;
    f->res.state = FSDP_FLAT_SHARDED;
    FSDP_CHECK(fsdp_flat_check(c, f));
}

fsdp_status fsdp_flat_node_sync(const fsdp_flat_ctx *c)
{
    FSDP_TRY(fsdp_coll_node_sync(c->coll));
    ++c->node->syncs;
    /* Every rank's writes before the sync are everyone's now, whichever
     * sync it was: the update's own sync after the last group leaves the
     * next forward nothing to sync.  Parts still arriving from the peers
     * are not among them. */
    c->node->stale = c->node->publishing;
    return FSDP_OK;
}

fsdp_flat_part fsdp_flat_own_part(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    fsdp_flat_part p = { 0 };
    if (!f->res.own) return p;
    p.n = f->lay.own_count;
    p.lo = own_lo(c, f);
    float *bufs[3] = { f->res.own, f->opt.m, f->opt.v };
    for (int k = 0; k < 3; ++k)
        if (bufs[k]) p.buf[p.nbuf++] = bufs[k];
    return p;
}

fsdp_status fsdp_flat_count_copy(const fsdp_flat_ctx *c, const fsdp_flat *src, fsdp_flat *f, float **sink)
{
    /* The kind and the layout are src's; residency, optimizer state and
     * saving's scratch the copy's own. */
    *f = (fsdp_flat){ .kind = src->kind, .lay = src->lay };
    f->res = (fsdp_flat_residency){ .state = f->kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED,
                                    .own_in_full = src->res.own_in_full, .in_node = src->res.in_node,
                                    .written_at = src->res.written_at };
    f->opt.grad_in_m = src->opt.grad_in_m;
    if (!f->lay.nt) return FSDP_OK;
    f->res.data_at = malloc((size_t)f->lay.nt * sizeof *f->res.data_at);
    f->res.grad_at = malloc((size_t)f->lay.nt * sizeof *f->res.grad_at);
    if (!f->res.data_at || !f->res.grad_at) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < f->lay.nt; ++k) f->res.data_at[k] = f->res.grad_at[k] = sink;
    size_t at = own_lo(c, f);
    if (f->res.in_node) {
        f->res.node = fsdp_mem_alloc(c->mem, f->lay.nfull, 0);
        f->res.own = f->res.node ? f->res.node + at : NULL;
    } else if (f->res.own_in_full) {
        f->res.full = fsdp_mem_alloc(c->mem, f->lay.nfull, 0);
        f->res.own = f->res.full ? f->res.full + at : NULL;
    } else if (f->kind.sharded) {
        f->res.own = fsdp_mem_alloc(c->mem, f->lay.shard, 0);
    } else {
        f->res.full = fsdp_mem_alloc(c->mem, f->lay.count, 0);
    }
    if (src->opt.m) f->opt.m = fsdp_mem_alloc(c->mem, f->lay.own_count, 0);
    if (src->opt.v) f->opt.v = fsdp_mem_alloc(c->mem, f->lay.own_count, 0);
    if ((!f->res.own && !f->res.full) || (src->opt.m && !f->opt.m) || (src->opt.v && !f->opt.v)) return FSDP_ERR_NOMEM;
    if (f->res.state == FSDP_FLAT_GATHERED) point(f, f->res.full);
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

void fsdp_flat_count_free(fsdp_flat *f)
{
    free(f->res.data_at);
    free(f->res.grad_at);
    f->res.data_at = f->res.grad_at = NULL;
}
