#include <stdlib.h>
#include <string.h>
#include "fsdp_flat.h"
#include "fsdp_sum.h"

static void point(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->data_at[k] = base ? base + f->off[k] : NULL;
}

static void point_grad(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->grad_at[k] = base ? base + f->off[k] : NULL;
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
    f->shard = fsdp_mem_aligned(c->mem, fsdp_shard_count(f->count, c->be->world));
    const fsdp_flat_kind *k = &f->kind;
    f->nfull = (k->sharded || k->state) && !k->whole ? f->shard * (size_t)c->be->world : f->count;
    /* Replicated frozen parameters have no own part: nobody updates them. */
    f->own_count = !k->sharded && !k->state ? 0 : k->whole ? f->count : f->shard;
    return FSDP_OK;
}

fsdp_status fsdp_flat_setup(const fsdp_flat_ctx *c, fsdp_flat *f, const fsdp_tensor *t, int nt,
                            fsdp_flat_kind kind)
{
    int rank = c->be->rank;
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->state = kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED;
    if (!nt) return FSDP_OK;
    FSDP_TRY(lay_out(c, f, t, nt));

    /* Rank 0's values for every rank (ranks may have initialised differently),
     * broadcast in Darknet's own host arrays: no second copy of the model. */
    for (int k = 0; k < nt && !c->values_agreed; ++k) {
        FSDP_TRY(fsdp_ctl_broadcast(c->be, *t[k].data, t[k].count * sizeof(float), 0));
        f->bcast_bytes += t[k].count * sizeof(float);
    }
    if (kind.sharded) {
        FSDP_TRY(fill_from_tensors(c, f, &f->own, (size_t)rank * f->shard, f->shard));
    } else if (kind.state) {
        /* A replica; this rank updates all of it (`none`) or its own part of
         * it in place (grad_op), then all-gathers in place. */
        FSDP_TRY(fill_from_tensors(c, f, &f->full, 0, f->nfull));
        f->own = f->full + (kind.whole ? 0 : (size_t)rank * f->shard);
        f->own_in_full = 1;
    } else {
        FSDP_TRY(fill_from_tensors(c, f, &f->full, 0, f->count));   /* replicated frozen parameters */
    }
    free_darknet_arrays(c, f);
    if (f->state == FSDP_FLAT_GATHERED) point(f, f->full);

    if (kind.state) {
        /* SGD keeps momentum only; Adam a second moment too. */
        f->m = fsdp_mem_alloc(c->mem, f->own_count, 1);
        f->v = kind.adam ? fsdp_mem_alloc(c->mem, f->own_count, 1) : NULL;
        if (!f->m || (kind.adam && !f->v)) return FSDP_ERR_NOMEM;
        FSDP_TRY(make_runs(f, kind.whole ? 0 : (size_t)rank * f->shard));
        /* Alone, SGD's gradient can accumulate straight into the momentum,
         * as in Darknet's weight_updates: the same floats and no buffer. */
        f->grad_in_m = c->be->world == 1 && !kind.adam;
    }
    size_t floats = (f->own && !f->own_in_full ? f->own_count : 0) + (f->full ? f->nfull : 0);
    if (kind.state) floats += (size_t)(1 + kind.adam) * f->own_count;
    f->state_bytes = floats * sizeof(float);
    return FSDP_OK;
}

void fsdp_flat_free(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    /* Nothing may still be writing into a buffer about to be freed. */
    if (f->state == FSDP_FLAT_GATHERING) fsdp_coll_wait(c->dbe, f->gather_ticket);
    fsdp_flat_reduce_wait(c, f);
    if (f->nt) {
        point(f, NULL);
        point_grad(f, NULL);
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
    fsdp_mem_give(c->mem, f->gown);
    if (f->grad_in_node && !f->grad_in_reduce_slot) c->node->slot_busy = 0;
    else if (!f->grad_in_node) fsdp_mem_give(c->mem, f->grad);
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
    float *mine = node + (size_t)c->be->rank * f->shard;
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

fsdp_status fsdp_flat_own_written(const fsdp_flat_ctx *c, const fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->in_node) return FSDP_OK;
    fsdp_node *n = c->node;
    n->stale = 1;
    if (n->at.machines == 1) return FSDP_OK;
    *bytes = f->nfull * sizeof(float);
    /* One on its way at a time, so that a model of many groups stays
     * within the backend's tickets: the one before has had the exchanges
     * since to travel with. */
    FSDP_TRY(fsdp_flat_node_settle(c));
    FSDP_TRY(fsdp_coll_peer_all_gather_start(c->dbe, f->node, f->shard, &n->publish_ticket));
    n->publishing = 1;
    return FSDP_OK;
}

fsdp_status fsdp_flat_node_settle(const fsdp_flat_ctx *c)
{
    fsdp_node *n = c->node;
    if (!n->publishing) return FSDP_OK;
    n->publishing = 0;
    return fsdp_coll_wait(c->dbe, n->publish_ticket);
}

fsdp_status fsdp_flat_unshard_start(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->nt || f->state != FSDP_FLAT_SHARDED || c->be->world == 1 || !fsdp_coll_starts_all_gather(c->dbe) ||
        f->in_node)
        return FSDP_OK;
    f->pending = fsdp_mem_take(c->mem, f->nfull, 0);
    if (!f->pending) return FSDP_ERR_NOMEM;
    f->state = FSDP_FLAT_GATHERING;
    return fsdp_coll_all_gather_start(c->dbe, f->own, f->pending, f->shard, &f->gather_ticket);
}

fsdp_status fsdp_flat_unshard(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->nt || f->state == FSDP_FLAT_GATHERED) return FSDP_OK;
    if (f->state == FSDP_FLAT_GATHERING) {
        FSDP_TRY(fsdp_coll_wait(c->dbe, f->gather_ticket));
        f->full = f->pending;
        f->pending = NULL;
    } else if (c->be->world == 1) {
        f->full = f->own;   /* a world of one: the shard is the whole buffer */
    } else if (f->in_node) {
        FSDP_TRY(fsdp_flat_node_settle(c));
        if (c->node->stale) FSDP_TRY(fsdp_flat_node_sync(c));
        f->full = f->node;
        f->state = FSDP_FLAT_GATHERED;
        point(f, f->full);
        return FSDP_OK;     /* nothing moved */
    } else {
        f->full = fsdp_mem_take(c->mem, f->nfull, 0);
        if (!f->full) return FSDP_ERR_NOMEM;
        FSDP_TRY(fsdp_coll_all_gather(c->dbe, f->own, f->full, f->shard));
    }
    f->state = FSDP_FLAT_GATHERED;
    *bytes = f->nfull * sizeof(float);
    point(f, f->full);
    return FSDP_OK;
}

void fsdp_flat_reshard(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->kind.sharded || f->state != FSDP_FLAT_GATHERED) return;  /* replicated parameters stay */
    point(f, NULL);
    if (f->full != f->own && !f->in_node) fsdp_mem_give(c->mem, f->full);
    f->full = NULL;
    f->state = FSDP_FLAT_SHARDED;
}

fsdp_grad_place fsdp_flat_grad_place(const fsdp_flat_ctx *c, const fsdp_flat *f, int slot_busy)
{
    return f->grad_in_m ? FSDP_GRAD_AT_MOMENTUM
           : !slot_busy && fsdp_flat_fits_slot(c, f) ? FSDP_GRAD_AT_SLOT : FSDP_GRAD_AT_BUFFER;
}

fsdp_status fsdp_flat_grad_point(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (!f->nt) return FSDP_OK;
    if (f->grad_state == FSDP_GRAD_NONE) {
        fsdp_node *n = c->node;
        fsdp_grad_place at = fsdp_flat_grad_place(c, f, n->slot_busy);
        if (at == FSDP_GRAD_AT_MOMENTUM) {
            /* no buffer */
        } else if (at == FSDP_GRAD_AT_SLOT) {
            f->grad = n->grad_slots + (size_t)n->at.rank * n->slot_floats;
            FSDP_TRY(fsdp_mem_zero(c->mem, f->grad, f->nfull));
            f->grad_in_node = 1;
            n->slot_busy = 1;
        } else {
            f->grad = fsdp_mem_take(c->mem, f->nfull, 1);
            if (!f->grad) return FSDP_ERR_NOMEM;
        }
        f->grad_state = FSDP_GRAD_ACCUMULATING;
    }
    point_grad(f, f->grad_in_m ? f->m : f->grad);
    return FSDP_OK;
}

void fsdp_flat_grad_unpoint(fsdp_flat *f)
{
    if (f->nt) point_grad(f, NULL);
}

/* Several machines: a gradient that accumulated in a buffer of its own
 * moves into node memory, to be summed on the machine before anything
 * crosses between machines: into the slot when free, else (another
 * gradient accumulates there) into the reduce slot, which is free: it
 * holds one from a reduce to the group's step, and groups reduce and step
 * one at a time. */
static fsdp_status move_to_slot(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    fsdp_node *n = c->node;
    if (f->grad_in_node || f->grad_in_m || n->at.machines == 1 || !fsdp_flat_fits_slot(c, f)) return FSDP_OK;
    float *slot = (n->slot_busy ? n->reduce_slots : n->grad_slots) + (size_t)n->at.rank * n->slot_floats;
    FSDP_TRY(fsdp_mem_copy(c->mem, slot, f->grad, f->nfull));
    fsdp_mem_give(c->mem, f->grad);
    f->grad = slot;
    f->grad_in_node = 1;
    f->grad_in_reduce_slot = n->slot_busy;
    n->reduce_slot_used |= n->slot_busy;
    n->slot_busy = 1;
    return FSDP_OK;
}

/* Several machines: for this rank's part and each peer's, the sum over
 * this machine's slots, in place order; the peers exchange them, so that
 * `gown` holds this rank's part summed on each machine, in machine order. */
static fsdp_status sum_machines(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    const fsdp_node *n = c->node;
    size_t m = (size_t)n->at.machines, sh = f->shard;
    float *send = fsdp_mem_take(c->mem, m * sh, 0);
    f->gown = send ? fsdp_mem_take(c->mem, m * sh, 0) : NULL;
    if (!f->gown) {
        fsdp_mem_give(c->mem, send);
        return FSDP_ERR_NOMEM;
    }
    /* Every rank of the machine holds this flat's gradient in the same kind of slot. */
    const float *slots = f->grad_in_reduce_slot ? n->reduce_slots : n->grad_slots;
    for (size_t k = 0; k < m && fsdp_mem_computes(c->mem); ++k) {
        size_t at = (size_t)n->at.peers[k] * sh;
        for (int q = 0; q < n->at.ranks; ++q) n->terms[q] = slots + (size_t)q * n->slot_floats + at;
        fsdp_sum_rows(send + k * sh, n->terms, n->at.ranks, 0, sh);
    }
    fsdp_status s = fsdp_coll_peer_all_to_all(c->dbe, send, f->gown, sh);
    fsdp_mem_give(c->mem, send);
    return s;
}

fsdp_status fsdp_flat_reduce(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *rs, uint64_t *ar)
{
    *rs = *ar = 0;
    if (f->grad_state != FSDP_GRAD_ACCUMULATING) return FSDP_OK;
    fsdp_flat_grad_unpoint(f);
    FSDP_TRY(move_to_slot(c, f));
    if (f->grad_in_node) {
        /* Every rank's gradient complete in its slot: the optimizer sums
         * this rank's part as it steps (fsdp_flat_slot_terms). */
        *rs = f->nfull * sizeof(float);
        f->grad_state = FSDP_GRAD_IN_SLOTS;
        FSDP_TRY(fsdp_flat_node_sync(c));
        return c->node->at.machines > 1 ? sum_machines(c, f) : FSDP_OK;
    }
    /* The reduced gradient for own: in a world of one, the buffer itself. */
    f->gown = f->grad;
    f->grad = NULL;
    f->grad_state = FSDP_GRAD_REDUCED;
    if (c->be->world == 1) {
        *(f->kind.whole ? ar : rs) = (f->kind.whole ? f->count : f->nfull) * sizeof(float);
        return FSDP_OK;
    }
    if (f->kind.whole) {
        /* `none`: every rank needs the whole sum. */
        *ar = f->count * sizeof(float);
        return fsdp_coll_all_reduce(c->dbe, f->gown, f->count);
    }
    *rs = f->nfull * sizeof(float);
    float *full = f->gown;
    f->gown = fsdp_mem_take(c->mem, f->shard, 0);
    if (!f->gown) {
        fsdp_mem_give(c->mem, full);
        return FSDP_ERR_NOMEM;
    }
    if (fsdp_coll_starts_reduce_scatter(c->dbe)) {
        /* Overlaps the backward of the groups below; the full gradient
         * lives until fsdp_flat_reduce_wait. */
        f->rs_source = full;
        f->grad_state = FSDP_GRAD_REDUCING;
        return fsdp_coll_reduce_scatter_start(c->dbe, full, f->gown, f->shard, &f->rs_ticket);
    }
    fsdp_status s = fsdp_coll_reduce_scatter(c->dbe, full, f->gown, f->shard);
    fsdp_mem_give(c->mem, full);
    return s;
}

fsdp_status fsdp_flat_reduce_wait(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (f->grad_state != FSDP_GRAD_REDUCING) return FSDP_OK;
    fsdp_status s = fsdp_coll_wait(c->dbe, f->rs_ticket);
    fsdp_mem_give(c->mem, f->rs_source);
    f->rs_source = NULL;
    f->grad_state = FSDP_GRAD_REDUCED;
    return s;
}

fsdp_status fsdp_flat_node_sync(const fsdp_flat_ctx *c)
{
    FSDP_TRY(fsdp_coll_node_sync(c->dbe));
    /* Every rank's writes before the sync are everyone's now, whichever
     * sync it was: the update's own sync after the last group leaves the
     * next forward nothing to sync.  Parts still arriving from the peers
     * are not among them. */
    c->node->stale = c->node->publishing;
    return FSDP_OK;
}

const float *const *fsdp_flat_slot_terms(const fsdp_flat_ctx *c, const fsdp_flat *f, size_t off, int *nterms)
{
    const fsdp_node *n = c->node;
    if (n->at.machines > 1) {
        *nterms = n->at.machines;
        for (int k = 0; k < n->at.machines; ++k) n->terms[k] = f->gown + (size_t)k * f->shard + off;
        return n->terms;
    }
    size_t at = (size_t)c->be->rank * f->shard + off;
    *nterms = n->at.ranks;
    for (int q = 0; q < n->at.ranks; ++q) n->terms[q] = n->grad_slots + (size_t)q * n->slot_floats + at;
    return n->terms;
}

fsdp_status fsdp_flat_grad_spent(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    if (f->grad_state == FSDP_GRAD_IN_SLOTS) {
        /* The slot is free again once every rank has summed its part. */
        fsdp_mem_give(c->mem, f->gown);   /* the machines' sums, where there were several */
        f->gown = NULL;
        f->grad = NULL;
        /* From the reduce slot: the gradient accumulating in the slot keeps it. */
        if (!f->grad_in_reduce_slot) c->node->slot_busy = 0;
        f->grad_in_node = f->grad_in_reduce_slot = 0;
        f->grad_state = FSDP_GRAD_NONE;
        return fsdp_flat_node_sync(c);
    }
    if (f->grad_state != FSDP_GRAD_REDUCED) return FSDP_OK;
    fsdp_mem_give(c->mem, f->gown);
    f->gown = NULL;
    f->grad_state = FSDP_GRAD_NONE;
    return FSDP_OK;
}

fsdp_status fsdp_flat_save_begin(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (f->nt && f->state != FSDP_FLAT_GATHERED) {
        FSDP_TRY(fsdp_flat_unshard(c, f, bytes));
        f->gathered_for_save = 1;
    }
    /* Darknet's pull_*_layer copies the parameters and the gradients to
     * host arrays, which GPU runs do not keep: lent for the group's save. */
    if (c->mem->device && f->nt && !f->save_grad) {
        f->save_grad = fsdp_mem_take(c->mem, f->nfull, 1);
        if (!f->save_grad) return FSDP_ERR_NOMEM;
        point_grad(f, f->save_grad);
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
        point_grad(f, NULL);
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
    f->grad_state = FSDP_GRAD_NONE;
    f->own = f->full = f->node = f->pending = f->grad = f->rs_source = f->gown = f->m = f->v = f->save_grad = NULL;
    f->grad_in_node = f->grad_in_reduce_slot = f->gathered_for_save = 0;
    f->data_at = f->grad_at = NULL;
    if (!f->nt) return FSDP_OK;
    f->data_at = malloc((size_t)f->nt * sizeof *f->data_at);
    f->grad_at = malloc((size_t)f->nt * sizeof *f->grad_at);
    if (!f->data_at || !f->grad_at) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < f->nt; ++k) f->data_at[k] = f->grad_at[k] = sink;
    size_t at = f->kind.whole ? 0 : (size_t)c->be->rank * f->shard;
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
