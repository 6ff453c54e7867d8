#include <stdlib.h>
#include <string.h>
#include "fsdp_flat.h"

static void point(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->data_at[k] = base ? base + f->off[k] : NULL;
}

void fsdp_flat_point_grad(const fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->grad_at[k] = base ? base + f->off[k] : NULL;
}

/* Where this rank's own part starts in the flat's whole layout: its shard,
 * or all of it under `none`. */
static size_t own_lo(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    return f->kind.whole ? 0 : (size_t)c->ctl->rank * f->shard;
}

/* Which part of each tensor this rank updates: its intersection with
 * [lo, lo + own_count) of the full buffer. */
static fsdp_status make_runs(fsdp_flat *f, size_t lo)
{
    f->runs = calloc((size_t)f->nt + 1, sizeof *f->runs);
    if (!f->runs) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory laying out a group");
    size_t hi = lo + f->own_count;
    for (int k = 0; k < f->nt; ++k) {
        size_t a = f->off[k], b = f->off[k] + f->t[k].count;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        f->runs[f->nruns++] = (fsdp_run){ a - lo, b - a, f->t[k].is_weight, f->t[k].owner };
    }
    return FSDP_OK;
}

/* Frees Darknet's copies of what the flat now holds.  On the device the
 * host parameter arrays go too (Darknet has loaded its weights by now):
 * saving lends them one group at a time (fsdp_flat_save_begin). */
static void free_darknet_arrays(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    for (int k = 0; k < f->nt; ++k) {
        fsdp_tensor *t = &f->t[k];
        free(*t->grad);
        *t->grad = NULL;
        if (c->mem->device) {
            free(*t->data);
            *t->data = NULL;
        }
        fsdp_mem_free_darknet(c->mem, f->data_at[k]);
        fsdp_mem_free_darknet(c->mem, f->grad_at[k]);
    }
}

/* *out = a zeroed buffer of n floats holding [lo, lo + n) of the flat,
 * copied piece by piece from the tensors' host arrays (padding stays 0). */
static fsdp_status fill_from_tensors(const fsdp_flat_ctx *c, const fsdp_flat *f, float **out, size_t lo, size_t n)
{
    float *p = fsdp_mem_alloc(c->mem, n, 1);
    if (!p) return FSDP_ERR_NOMEM;
    for (int k = 0; k < f->nt; ++k) {
        size_t a = f->off[k], b = f->off[k] + f->t[k].count;
        if (a < lo) a = lo;
        if (b > lo + n) b = lo + n;
        if (a >= b) continue;
        fsdp_status s = fsdp_mem_from_host(c->mem, p + (a - lo), *f->t[k].data + (a - f->off[k]), b - a);
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
    f->t = malloc((size_t)nt * sizeof *f->t);
    f->off = malloc((size_t)nt * sizeof *f->off);
    f->data_at = malloc((size_t)nt * sizeof *f->data_at);
    f->grad_at = malloc((size_t)nt * sizeof *f->grad_at);
    if (!f->t || !f->off || !f->data_at || !f->grad_at)
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory laying out a group");
    memcpy(f->t, t, (size_t)nt * sizeof *t);
    f->nt = nt;
    for (int k = 0; k < nt; ++k) {
        f->data_at[k] = fsdp_tensor_array(&t[k], c->mem->device, 0);
        f->grad_at[k] = fsdp_tensor_array(&t[k], c->mem->device, 1);
        /* Gaps before aligned tensors are zeros no run covers: never updated. */
        f->off[k] = fsdp_mem_aligned(c->mem, f->count);
        f->count = f->off[k] + t[k].count;
        f->params += t[k].count;
    }
    /* Shards aligned too: each rank's part of a gathered buffer starts aligned. */
    f->shard = fsdp_mem_aligned(c->mem, fsdp_shard_count(f->count, c->ctl->world));
    const fsdp_flat_kind *k = &f->kind;
    f->nfull = (k->sharded || k->trainable) && !k->whole ? f->shard * (size_t)c->ctl->world : f->count;
    /* Replicated frozen parameters have no own part: nobody updates them. */
    f->own_count = !k->sharded && !k->trainable ? 0 : k->whole ? f->count : f->shard;
    return FSDP_OK;
}

fsdp_status fsdp_flat_setup(const fsdp_flat_ctx *c, fsdp_flat *f, const fsdp_tensor *t, int nt,
                            fsdp_flat_kind kind)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->state = kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED;
    if (!nt) return FSDP_OK;
    FSDP_TRY(lay_out(c, f, t, nt));

    /* Rank 0's values for every rank (ranks may have initialised differently),
     * broadcast in Darknet's own host arrays: no second copy of the model. */
    for (int k = 0; k < nt && !c->values_agreed; ++k) {
        FSDP_TRY(fsdp_ctl_broadcast(c->ctl, *t[k].data, t[k].count * sizeof(float), 0));
        f->bcast_bytes += t[k].count * sizeof(float);
    }
    if (kind.sharded) {
        FSDP_TRY(fill_from_tensors(c, f, &f->own, own_lo(c, f), f->shard));
    } else if (kind.trainable) {
        /* A replica; this rank updates all of it (`none`) or its own part of
         * it in place (grad_op), then all-gathers in place. */
        FSDP_TRY(fill_from_tensors(c, f, &f->full, 0, f->nfull));
        f->own = f->full + own_lo(c, f);
        f->own_in_full = 1;
    } else {
        FSDP_TRY(fill_from_tensors(c, f, &f->full, 0, f->count));   /* replicated frozen parameters */
    }
    free_darknet_arrays(c, f);
    if (f->state == FSDP_FLAT_GATHERED) point(f, f->full);

    if (kind.trainable) {
        /* SGD keeps momentum only; Adam a second moment too. */
        f->m = fsdp_mem_alloc(c->mem, f->own_count, 1);
        f->v = kind.adam ? fsdp_mem_alloc(c->mem, f->own_count, 1) : NULL;
        if (!f->m || (kind.adam && !f->v)) return FSDP_ERR_NOMEM;
        FSDP_TRY(make_runs(f, own_lo(c, f)));
        /* Alone, SGD's gradient can accumulate straight into the momentum,
         * as in Darknet's weight_updates: the same floats and no buffer. */
        f->grad_in_m = c->ctl->world == 1 && !kind.adam;
    }
    size_t floats = (f->own && !f->own_in_full ? f->own_count : 0) + (f->full ? f->nfull : 0);
    if (kind.trainable) floats += (size_t)(1 + kind.adam) * f->own_count;
    f->state_bytes = floats * sizeof(float);
    return FSDP_OK;
}

void fsdp_flat_free(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    /* Nothing may still be writing into a buffer about to be freed. */
    if (f->state == FSDP_FLAT_GATHERING) fsdp_coll_wait(c->coll, f->gather_ticket);
    if (f->nt) {
        point(f, NULL);
        fsdp_flat_point_grad(f, NULL);
    }
    if (f->in_node) {
        /* Node memory lives as long as the backend. */
    } else if (f->own_in_full) {
        fsdp_mem_free(c->mem, f->full);   /* a replica holding own */
    } else {
        if (f->full != f->own) {
            if (f->kind.sharded) fsdp_mem_give(c->mem, f->full);   /* gathered for a step */
            else fsdp_mem_free(c->mem, f->full);                   /* replicated frozen parameters */
        }
        fsdp_mem_free(c->mem, f->own);
    }
    fsdp_mem_give(c->mem, f->save_grad);
    fsdp_mem_give(c->mem, f->pending);
    free(f->t);
    free(f->off);
    free(f->data_at);
    free(f->grad_at);
    fsdp_mem_free(c->mem, f->m);
    fsdp_mem_free(c->mem, f->v);
    free(f->runs);
    memset(f, 0, sizeof *f);
}

fsdp_status fsdp_flat_move_to_node(const fsdp_flat_ctx *c, fsdp_flat *f, float *node)
{
    if (!f->nt || !f->kind.sharded || f->state != FSDP_FLAT_SHARDED)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "only a sharded flat between uses moves to node memory");
    float *mine = node + own_lo(c, f);
    memcpy(mine, f->own, f->shard * sizeof(float));
    fsdp_mem_free(c->mem, f->own);
    f->own = mine;
    f->node = node;
    f->in_node = 1;
    return FSDP_OK;
}

int fsdp_flat_fits_slot(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    return f->in_node && f->nfull <= c->node->slot_floats;
}

fsdp_status fsdp_flat_own_written(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->in_node) return FSDP_OK;
    fsdp_node *n = c->node;
    n->stale = 1;
    f->written_at = n->syncs + 1;
    if (n->at.machines == 1) return FSDP_OK;
    *bytes = f->nfull * sizeof(float);
    /* One on its way at a time, so that a model of many groups stays
     * within the backend's tickets: the one before has had the exchanges
     * since to travel with. */
    FSDP_TRY(fsdp_flat_node_settle(c));
    fsdp_wire before = c->coll->wire ? *c->coll->wire : (fsdp_wire){ 0 };
    int ev = fsdp_tl_begin(c->tl, "parts", -1);   /* ended at the wait (fsdp_flat_node_settle) */
    FSDP_TRY(fsdp_coll_peer_all_gather_start(c->coll, f->node, f->shard, &n->publish_ticket));
    if (c->coll->wire) {
        n->publish_out = c->coll->wire->out - before.out;
        n->publish_in = c->coll->wire->in - before.in;
        fsdp_tl_add_bytes(c->tl, ev, n->publish_out, n->publish_in);
    }
    n->publishing = 1;
    n->publishing_flat = f;
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
    if (n->publishing_flat) n->publishing_flat->written_at = n->syncs + 1;
    n->publishing_flat = NULL;
    fsdp_tl_end(c->tl, fsdp_tl_find_open(c->tl, "parts", -2), 0, 0);
    return s;
}

fsdp_status fsdp_flat_unshard_start(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->nt) return FSDP_OK;
    FSDP_ASSERT(f->state == FSDP_FLAT_SHARDED, "flat unshard_start: SHARDED");
    if (c->ctl->world == 1 || !fsdp_coll_starts_all_gather(c->coll) || f->in_node) return FSDP_OK;
    f->pending = fsdp_mem_take(c->mem, f->nfull, 0);
    if (!f->pending) return FSDP_ERR_NOMEM;
    f->state = FSDP_FLAT_GATHERING;
    return fsdp_coll_all_gather_start(c->coll, f->own, f->pending, f->shard, &f->gather_ticket);
}

fsdp_status fsdp_flat_unshard(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->nt || f->state == FSDP_FLAT_GATHERED) return FSDP_OK;
    if (f->state == FSDP_FLAT_GATHERING) {
        FSDP_TRY(fsdp_coll_wait(c->coll, f->gather_ticket));
        f->full = f->pending;
        f->pending = NULL;
    } else if (c->ctl->world == 1) {
        f->full = f->own;   /* a world of one: the shard is the whole buffer */
    } else if (f->in_node) {
        const fsdp_node *n = c->node;
        if (f->written_at > n->syncs || (n->publishing && n->publishing_flat == f)) {
            FSDP_TRY(fsdp_flat_node_settle(c));
            if (n->stale) FSDP_TRY(fsdp_flat_node_sync(c));
        }
        f->full = f->node;
        f->state = FSDP_FLAT_GATHERED;
        point(f, f->full);
        return FSDP_OK;     /* nothing moved */
    } else {
        f->full = fsdp_mem_take(c->mem, f->nfull, 0);
        if (!f->full) return FSDP_ERR_NOMEM;
        FSDP_TRY(fsdp_coll_all_gather(c->coll, f->own, f->full, f->shard));
    }
    f->state = FSDP_FLAT_GATHERED;
    *bytes = f->nfull * sizeof(float);
    point(f, f->full);
    return FSDP_OK;
}

void fsdp_flat_reshard(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->nt || !f->kind.sharded) return;   /* replicated parameters stay */
    FSDP_ASSERT(f->state == FSDP_FLAT_GATHERED, "flat reshard: GATHERED");
    point(f, NULL);
    if (f->full != f->own && !f->in_node) fsdp_mem_give(c->mem, f->full);
    f->full = NULL;
    f->state = FSDP_FLAT_SHARDED;
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
    if (!f->own) return p;
    p.n = f->own_count;
    p.lo = own_lo(c, f);
    float *bufs[3] = { f->own, f->m, f->v };
    for (int k = 0; k < 3; ++k)
        if (bufs[k]) p.buf[p.nbuf++] = bufs[k];
    return p;
}

fsdp_status fsdp_flat_save_begin(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    FSDP_ASSERT(f->state != FSDP_FLAT_GATHERING, "flat save_begin: not GATHERING");
    if (f->nt && f->state != FSDP_FLAT_GATHERED) {
        FSDP_TRY(fsdp_flat_unshard(c, f, bytes));
        f->gathered_for_save = 1;
    }
    /* Darknet's pull_*_layer copies the parameters and the gradients to
     * host arrays, which GPU runs do not keep: lent for the group's save. */
    if (c->mem->device && f->nt && !f->save_grad) {
        f->save_grad = fsdp_mem_take(c->mem, f->nfull, 1);
        if (!f->save_grad) return FSDP_ERR_NOMEM;
        fsdp_flat_point_grad(f, f->save_grad);
        for (int k = 0; k < f->nt; ++k) {
            *f->t[k].grad = calloc(f->t[k].count, sizeof(float));
            *f->t[k].data = calloc(f->t[k].count, sizeof(float));
            if (!*f->t[k].grad || !*f->t[k].data) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory saving");
        }
    }
    return FSDP_OK;
}

void fsdp_flat_save_end(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (f->gathered_for_save) fsdp_flat_reshard(c, f);
    f->gathered_for_save = 0;
    if (f->save_grad) {
        fsdp_flat_point_grad(f, NULL);
        for (int k = 0; k < f->nt; ++k) {
            free(*f->t[k].grad);
            free(*f->t[k].data);
            *f->t[k].grad = *f->t[k].data = NULL;
        }
        fsdp_mem_give(c->mem, f->save_grad);
        f->save_grad = NULL;
    }
}

fsdp_status fsdp_flat_count_copy(const fsdp_flat_ctx *c, const fsdp_flat *src, fsdp_flat *f, float **sink)
{
    *f = *src;
    f->state = f->kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED;
    f->own = f->full = f->node = f->pending = f->m = f->v = f->save_grad = NULL;
    f->gathered_for_save = 0;
    f->data_at = f->grad_at = NULL;
    if (!f->nt) return FSDP_OK;
    f->data_at = malloc((size_t)f->nt * sizeof *f->data_at);
    f->grad_at = malloc((size_t)f->nt * sizeof *f->grad_at);
    if (!f->data_at || !f->grad_at) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < f->nt; ++k) f->data_at[k] = f->grad_at[k] = sink;
    size_t at = own_lo(c, f);
    if (f->in_node) {
        f->node = fsdp_mem_alloc(c->mem, f->nfull, 0);
        f->own = f->node ? f->node + at : NULL;
    } else if (f->own_in_full) {
        f->full = fsdp_mem_alloc(c->mem, f->nfull, 0);
        f->own = f->full ? f->full + at : NULL;
    } else if (f->kind.sharded) {
        f->own = fsdp_mem_alloc(c->mem, f->shard, 0);
    } else {
        f->full = fsdp_mem_alloc(c->mem, f->count, 0);
    }
    if (src->m) f->m = fsdp_mem_alloc(c->mem, f->own_count, 0);
    if (src->v) f->v = fsdp_mem_alloc(c->mem, f->own_count, 0);
    if ((!f->own && !f->full) || (src->m && !f->m) || (src->v && !f->v)) return FSDP_ERR_NOMEM;
    if (f->state == FSDP_FLAT_GATHERED) point(f, f->full);
    return FSDP_OK;
}

void fsdp_flat_count_free(fsdp_flat *f)
{
    free(f->data_at);
    free(f->grad_at);
    f->data_at = f->grad_at = NULL;
}
