#include <string.h>
#include "fsdp_grad.h"
#include "fsdp_sum.h"

static float *slot_of(const fsdp_node *n, const float *slots)
{
    return (float *)slots + (size_t)n->at.rank * n->slot_floats;
}

fsdp_grad_place fsdp_grad_place_of(const fsdp_flat_ctx *c, const fsdp_flat *f, int slot_busy)
{
    return f->opt.grad_in_m ? FSDP_GRAD_AT_MOMENTUM
           : !slot_busy && fsdp_flat_fits_slot(c, f) ? FSDP_GRAD_AT_SLOT : FSDP_GRAD_AT_BUFFER;
}

fsdp_status fsdp_grad_point(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f)
{
    if (!f->lay.nt) return FSDP_OK;
    FSDP_ASSERT(g->state == FSDP_GRAD_NONE || g->state == FSDP_GRAD_ACCUMULATING, "grad point: NONE or ACCUMULATING");
    if (g->state == FSDP_GRAD_NONE) {
        fsdp_node *n = c->node;
        fsdp_grad_place at = fsdp_grad_place_of(c, f, n->slot_busy);
        if (at == FSDP_GRAD_AT_MOMENTUM) {
            g->home = FSDP_GRAD_HOME_MOMENTUM;
        } else if (at == FSDP_GRAD_AT_SLOT) {
            g->buf = slot_of(n, n->grad_slots);
            FSDP_TRY(fsdp_mem_zero(c->mem, g->buf, f->lay.nfull));
            g->home = FSDP_GRAD_HOME_SLOT;
            n->slot_busy = 1;
        } else {
            g->buf = fsdp_mem_take(c->mem, f->lay.nfull, 1);
            if (!g->buf) return FSDP_ERR_NOMEM;
            g->home = FSDP_GRAD_HOME_POOL;
        }
        g->state = FSDP_GRAD_ACCUMULATING;
    }
    fsdp_flat_point_grad(f, g->home == FSDP_GRAD_HOME_MOMENTUM ? f->opt.m : g->buf);
    FSDP_CHECK(fsdp_grad_check(c, g, f));
    return FSDP_OK;
}

void fsdp_grad_unpoint(const fsdp_grad *g, const fsdp_flat *f)
{
    if (!f->lay.nt) return;
    FSDP_ASSERT(g->state == FSDP_GRAD_ACCUMULATING, "grad unpoint: ACCUMULATING");
    fsdp_flat_point_grad(f, NULL);
}

/* Several machines: a gradient that accumulated in a buffer of its own
 * moves into node memory, to be summed on the machine before anything
 * crosses between machines: into the slot when free, else (another
 * gradient accumulates there) into the reduce slot, which is free: it
 * holds one from a reduce to the group's step, and groups reduce and step
 * one at a time. */
static fsdp_status move_to_slot(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f)
{
    fsdp_node *n = c->node;
    if (g->home != FSDP_GRAD_HOME_POOL || n->at.machines == 1 || !fsdp_flat_fits_slot(c, f)) return FSDP_OK;
    int reduce_slot = n->slot_busy;
    float *slot = slot_of(n, reduce_slot ? n->reduce_slots : n->grad_slots);
    FSDP_TRY(fsdp_mem_copy(c->mem, slot, g->buf, f->lay.nfull));
    fsdp_mem_give(c->mem, g->buf);
    g->buf = slot;
    g->home = reduce_slot ? FSDP_GRAD_HOME_REDUCE_SLOT : FSDP_GRAD_HOME_SLOT;
    n->reduce_slot_used |= reduce_slot;
    n->slot_busy = 1;
    return FSDP_OK;
}

/* Several machines: for this rank's part and each peer's, the sum over
 * this machine's slots, in place order; the peers exchange them, so that
 * `part` holds this rank's part summed on each machine, in machine order. */
static fsdp_status sum_machines(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f)
{
    const fsdp_node *n = c->node;
    size_t m = (size_t)n->at.machines, sh = f->lay.shard;
    float *send = fsdp_mem_take(c->mem, m * sh, 0);
    g->part = send ? fsdp_mem_take(c->mem, m * sh, 0) : NULL;
    if (!g->part) {
        fsdp_mem_give(c->mem, send);
        return FSDP_ERR_NOMEM;
    }
    /* Every rank of the machine holds this flat's gradient in the same kind of slot. */
    const float *slots = g->home == FSDP_GRAD_HOME_REDUCE_SLOT ? n->reduce_slots : n->grad_slots;
    /* Over the count placement there is nothing to add. */
    size_t sums = fsdp_mem_computes(c->mem) ? m : 0;
    for (size_t k = 0; k < sums; ++k) {
        size_t at = (size_t)n->at.peers[k] * sh;
        for (int q = 0; q < n->at.ranks; ++q) n->terms[q] = slots + (size_t)q * n->slot_floats + at;
        fsdp_sum_rows(send + k * sh, n->terms, n->at.ranks, 0, sh);
    }
    fsdp_status s = fsdp_coll_peer_all_to_all(c->coll, send, g->part, sh);
    fsdp_mem_give(c->mem, send);
    return s;
}

/* A reduce-scatter of the full gradient into this rank's part, started
 * where the backend starts them (it overlaps the backward of the groups
 * below; the full gradient lives until fsdp_grad_reduce_wait). */
static fsdp_status reduce_scatter(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f, float *full)
{
    g->part = fsdp_mem_take(c->mem, f->lay.shard, 0);
    if (!g->part) {
        fsdp_mem_give(c->mem, full);
        return FSDP_ERR_NOMEM;
    }
    if (fsdp_coll_starts_reduce_scatter(c->coll)) {
        fsdp_status s = fsdp_coll_reduce_scatter_start(c->coll, full, g->part, f->lay.shard, &g->rs_ticket);
        if (s != FSDP_OK) {
            /* Nothing in flight: no wait may follow. */
            fsdp_mem_give(c->mem, full);
            g->state = FSDP_GRAD_REDUCED;
            return s;
        }
        g->rs_source = full;
        g->state = FSDP_GRAD_REDUCING;
        return FSDP_OK;
    }
    g->state = FSDP_GRAD_REDUCED;
    fsdp_status s = fsdp_coll_reduce_scatter(c->coll, full, g->part, f->lay.shard);
    fsdp_mem_give(c->mem, full);
    return s;
}

/* The table's reduce, from ACCUMULATING. */
static fsdp_status reduce(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f, uint64_t *rs, uint64_t *ar)
{
    fsdp_grad_unpoint(g, f);
    FSDP_TRY(move_to_slot(c, g, f));
    if (g->home == FSDP_GRAD_HOME_SLOT || g->home == FSDP_GRAD_HOME_REDUCE_SLOT) {
        /* Every rank's gradient complete in its slot: the optimizer sums
         * this rank's part as it steps (fsdp_grad_slot_terms). */
        *rs = f->lay.nfull * sizeof(float);
        g->state = FSDP_GRAD_IN_SLOTS;
        FSDP_TRY(fsdp_flat_node_sync(c));
        return c->node->at.machines > 1 ? sum_machines(c, g, f) : FSDP_OK;
    }
    /* The buffer (the pool's, or the momentum) becomes the reduced part: in
     * a world of one and under `none` (all-reduced in place) as it is. */
    float *full = g->buf;
    g->buf = NULL;
    g->state = FSDP_GRAD_REDUCED;
    if (c->ctl->world == 1) {
        g->part = full;
        *(f->kind.whole ? ar : rs) = (f->kind.whole ? f->lay.count : f->lay.nfull) * sizeof(float);
        return FSDP_OK;
    }
    if (f->kind.whole) {
        /* `none`: every rank needs the whole sum. */
        g->part = full;
        *ar = f->lay.count * sizeof(float);
        return fsdp_coll_all_reduce(c->coll, g->part, f->lay.count);
    }
    *rs = f->lay.nfull * sizeof(float);
    return reduce_scatter(c, g, f, full);
}

fsdp_status fsdp_grad_reduce(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f, uint64_t *rs, uint64_t *ar)
{
    *rs = *ar = 0;
    if (!f->lay.nt) return FSDP_OK;
    FSDP_ASSERT(g->state == FSDP_GRAD_ACCUMULATING, "grad reduce: ACCUMULATING");
    FSDP_TRY(reduce(c, g, f, rs, ar));
    FSDP_CHECK(fsdp_grad_check(c, g, f));
    return FSDP_OK;
}

fsdp_status fsdp_grad_reduce_wait(const fsdp_flat_ctx *c, fsdp_grad *g)
{
    FSDP_ASSERT(g->state == FSDP_GRAD_REDUCING, "grad reduce_wait: REDUCING");
    fsdp_status s = fsdp_coll_wait(c->coll, g->rs_ticket);
    fsdp_mem_give(c->mem, g->rs_source);
    g->rs_source = NULL;
    g->state = FSDP_GRAD_REDUCED;
    FSDP_CHECK(fsdp_grad_check(c, g, NULL));
    return s;
}

const float *const *fsdp_grad_slot_terms(const fsdp_flat_ctx *c, const fsdp_grad *g, const fsdp_flat *f, size_t off,
                                         int *nterms)
{
    FSDP_ASSERT(g->state == FSDP_GRAD_IN_SLOTS, "grad slot_terms: IN_SLOTS");
    const fsdp_node *n = c->node;
    if (n->at.machines > 1) {
        *nterms = n->at.machines;
        for (int k = 0; k < n->at.machines; ++k) n->terms[k] = g->part + (size_t)k * f->lay.shard + off;
        return n->terms;
    }
    size_t at = (size_t)c->ctl->rank * f->lay.shard + off;
    *nterms = n->at.ranks;
    for (int q = 0; q < n->at.ranks; ++q) n->terms[q] = n->grad_slots + (size_t)q * n->slot_floats + at;
    return n->terms;
}

/* The slot a gradient leaves: free again unless it was the reduce slot
 * (the gradient accumulating in the slot keeps it). */
static void leave_slot(const fsdp_flat_ctx *c, fsdp_grad *g)
{
    if (g->home == FSDP_GRAD_HOME_SLOT) {
        FSDP_ASSERT(c->node->slot_busy, "grad leaves the slot: the slot is taken");
        c->node->slot_busy = 0;
    }
}

fsdp_status fsdp_grad_spent(const fsdp_flat_ctx *c, fsdp_grad *g)
{
    FSDP_ASSERT(g->state == FSDP_GRAD_NONE || g->state == FSDP_GRAD_REDUCED || g->state == FSDP_GRAD_IN_SLOTS,
                "grad spent: NONE, REDUCED or IN_SLOTS");
    fsdp_grad_state was = g->state;
    if (was == FSDP_GRAD_NONE) return FSDP_OK;
    /* The reduced part, or the machines' sums where there were several;
     * in a world of one under SGD the momentum itself, which stays. */
    if (g->home != FSDP_GRAD_HOME_MOMENTUM) fsdp_mem_give(c->mem, g->part);
    leave_slot(c, g);
    *g = (fsdp_grad){ 0 };
    /* The slot is free again once every rank has summed its part. */
    return was == FSDP_GRAD_IN_SLOTS ? fsdp_flat_node_sync(c) : FSDP_OK;
}

void fsdp_grad_release(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f)
{
    /* Nothing may still be writing into a buffer about to be given back. */
    if (g->state == FSDP_GRAD_REDUCING) fsdp_grad_reduce_wait(c, g);
    if (f->lay.nt) fsdp_flat_point_grad(f, NULL);
    if (g->home != FSDP_GRAD_HOME_MOMENTUM) fsdp_mem_give(c->mem, g->part);
    if (g->home == FSDP_GRAD_HOME_POOL) fsdp_mem_give(c->mem, g->buf);
    leave_slot(c, g);
    *g = (fsdp_grad){ 0 };
}
