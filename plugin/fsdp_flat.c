#include <stdlib.h>
#include <string.h>
#include "fsdp_flat.h"

/* Darknet's arrays the engine manages: the device copies on GPU runs (the
 * host copies stay Darknet's, for loading and saving), the host ones else. */
static float **data_ptr(const fsdp_engine *e, const fsdp_tensor *t)
{
#ifdef GPU
    if (e->mem.device) return t->data_gpu;
#endif
    return t->data;
}

static float **grad_ptr(const fsdp_engine *e, const fsdp_tensor *t)
{
#ifdef GPU
    if (e->mem.device) return t->grad_gpu;
#endif
    return t->grad;
}

static void point(const fsdp_engine *e, fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *data_ptr(e, &f->t[k]) = base ? base + f->off[k] : NULL;
}

static void point_grad(const fsdp_engine *e, fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *grad_ptr(e, &f->t[k]) = base ? base + f->off[k] : NULL;
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

/* Frees Darknet's copies of what the flat now holds. */
static void free_darknet_arrays(const fsdp_engine *e, fsdp_flat *f)
{
    for (int k = 0; k < f->nt; ++k) {
        fsdp_tensor *t = &f->t[k];
        free(*t->grad);
        *t->grad = NULL;
#ifdef GPU
        if (e->mem.device) {
            if (*t->data_gpu) cuda_free(*t->data_gpu);
            if (*t->grad_gpu) cuda_free(*t->grad_gpu);
            *t->data_gpu = *t->grad_gpu = NULL;
            continue;
        }
#endif
        free(*t->data);
        *t->data = NULL;
    }
}

/* *out = a zeroed buffer of n floats holding [lo, lo + n) of the flat,
 * copied piece by piece from the tensors' host arrays (padding stays 0). */
static fsdp_status fill_from_tensors(const fsdp_engine *e, const fsdp_flat *f, float **out, size_t lo, size_t n)
{
    float *p = fsdp_mem_alloc(&e->mem, n, 1);
    if (!p) return FSDP_ERR_NOMEM;
    for (int k = 0; k < f->nt; ++k) {
        size_t a = f->off[k], b = f->off[k] + f->t[k].count;
        if (a < lo) a = lo;
        if (b > lo + n) b = lo + n;
        if (a >= b) continue;
        fsdp_status s = fsdp_mem_from_host(&e->mem, p + (a - lo), *f->t[k].data + (a - f->off[k]), b - a);
        if (s != FSDP_OK) {
            fsdp_mem_free(&e->mem, p);
            return s;
        }
    }
    *out = p;
    return FSDP_OK;
}

fsdp_status fsdp_flat_setup(fsdp_engine *e, fsdp_flat *f, const fsdp_tensor *t, int nt, int sharded,
                            int state)
{
    int world = e->be->world, rank = e->be->rank;
    memset(f, 0, sizeof *f);
    if (!nt) return FSDP_OK;
    f->t = malloc((size_t)nt * sizeof *f->t);
    f->off = malloc((size_t)nt * sizeof *f->off);
    if (!f->t || !f->off) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory laying out a group");
    memcpy(f->t, t, (size_t)nt * sizeof *t);
    f->nt = nt;
    size_t align = e->mem.align;
    for (int k = 0; k < nt; ++k) {
        /* Gaps before aligned tensors are zeros no run covers: never updated. */
        f->off[k] = (f->count + align - 1) / align * align;
        f->count = f->off[k] + t[k].count;
        f->params += t[k].count;
    }
    /* Shards aligned too: each rank's part of a gathered buffer starts aligned. */
    f->shard = (fsdp_shard_count(f->count, world) + align - 1) / align * align;
    f->sharded = sharded;
    /* `none` keeps a replica and updates all of it; the others update a shard. */
    int whole = !sharded && state && e->strategy == FSDP_SHARD_NONE;
    f->nfull = (sharded || state) && !whole ? f->shard * (size_t)world : f->count;

    /* Rank 0's values for every rank (ranks may have initialised differently),
     * broadcast in Darknet's own host arrays: no second copy of the model. */
    for (int k = 0; k < nt; ++k) {
        FSDP_TRY(e->be->broadcast(e->be, *t[k].data, t[k].count * sizeof(float), 0));
        e->bytes_bcast += t[k].count * sizeof(float);
    }
    f->whole = whole;
    if (state && !sharded) {
        /* A replica; this rank updates all of it (`none`) or its own part of
         * it in place (grad_op), then all-gathers in place. */
        f->own_count = whole ? f->count : f->shard;
        FSDP_TRY(fill_from_tensors(e, f, &f->full, 0, f->nfull));
        f->own = f->full + (whole ? 0 : (size_t)rank * f->shard);
        f->own_in_full = 1;
    } else if (sharded) {
        f->own_count = f->shard;
        FSDP_TRY(fill_from_tensors(e, f, &f->own, (size_t)rank * f->shard, f->shard));
    } else {
        FSDP_TRY(fill_from_tensors(e, f, &f->full, 0, f->count));   /* replicated frozen parameters */
    }
    free_darknet_arrays(e, f);
    if (f->full) point(e, f, f->full);

    int adam = e->net && e->net->adam;
    if (state) {
        /* SGD keeps momentum only; Adam a second moment too. */
        f->m = fsdp_mem_alloc(&e->mem, f->own_count, 1);
        f->v = adam ? fsdp_mem_alloc(&e->mem, f->own_count, 1) : NULL;
        if (!f->m || (adam && !f->v)) return FSDP_ERR_NOMEM;
        FSDP_TRY(make_runs(f, whole ? 0 : (size_t)rank * f->shard));
    }
    size_t floats = (f->own && !f->own_in_full ? f->own_count : 0) + (f->full ? f->nfull : 0);
    if (state) floats += (size_t)(1 + adam) * f->own_count;
    e->model_state_bytes += floats * sizeof(float);
    return FSDP_OK;
}

void fsdp_flat_free(fsdp_engine *e, fsdp_flat *f)
{
    /* Nothing may still be writing into a buffer about to be freed. */
    if (f->pending) e->dbe->wait(e->dbe, f->gather_ticket);
    fsdp_flat_reduce_finish(e, f);
    if (f->nt) {
        point(e, f, NULL);
        point_grad(e, f, NULL);
    }
    if (f->own_in_full) {
        fsdp_mem_free(&e->mem, f->full);
    } else {
        if (f->full != f->own) fsdp_mem_free(&e->mem, f->full);
        fsdp_mem_free(&e->mem, f->own);
    }
    if (f->gown != f->grad) fsdp_mem_free(&e->mem, f->gown);
    fsdp_mem_free(&e->mem, f->grad);
    fsdp_mem_free(&e->mem, f->save_grad);
    fsdp_mem_free(&e->mem, f->pending);
    fsdp_mem_free(&e->mem, f->rs_source);
    fsdp_mem_free(&e->mem, f->m);
    fsdp_mem_free(&e->mem, f->v);
    free(f->t);
    free(f->off);
    free(f->runs);
    memset(f, 0, sizeof *f);
}

fsdp_status fsdp_flat_gather(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->nt || !f->sharded || f->full) return FSDP_OK;
    if (f->pending) {
        FSDP_TRY(e->dbe->wait(e->dbe, f->gather_ticket));
        f->full = f->pending;
        f->pending = NULL;
    } else if (e->be->world == 1) {
        f->full = f->own;   /* a world of one: the shard is the whole buffer */
    } else {
        f->full = fsdp_mem_alloc(&e->mem, f->nfull, 0);
        if (!f->full) return FSDP_ERR_NOMEM;
        FSDP_TRY(e->dbe->all_gather(e->dbe, f->own, f->full, f->shard));
    }
    *bytes = f->nfull * sizeof(float);
    point(e, f, f->full);
    return FSDP_OK;
}

fsdp_status fsdp_flat_gather_start(fsdp_engine *e, fsdp_flat *f)
{
    if (!f->nt || !f->sharded || f->full || f->pending || e->be->world == 1 || !e->dbe->all_gather_start)
        return FSDP_OK;
    f->pending = fsdp_mem_alloc(&e->mem, f->nfull, 0);
    if (!f->pending) return FSDP_ERR_NOMEM;
    return e->dbe->all_gather_start(e->dbe, f->own, f->pending, f->shard, &f->gather_ticket);
}

void fsdp_flat_release(fsdp_engine *e, fsdp_flat *f)
{
    if (!f->sharded || !f->full) return;  /* replicated parameters stay */
    point(e, f, NULL);
    if (f->full != f->own) fsdp_mem_free(&e->mem, f->full);
    f->full = NULL;
}

fsdp_status fsdp_flat_grad_begin(fsdp_engine *e, fsdp_flat *f)
{
    if (!f->nt) return FSDP_OK;
    if (!f->grad) {
        f->grad = fsdp_mem_alloc(&e->mem, f->nfull, 1);
        if (!f->grad) return FSDP_ERR_NOMEM;
    }
    point_grad(e, f, f->grad);
    return FSDP_OK;
}

void fsdp_flat_grad_unpoint(fsdp_engine *e, fsdp_flat *f)
{
    if (f->nt) point_grad(e, f, NULL);
}

fsdp_status fsdp_flat_reduce(fsdp_engine *e, fsdp_flat *f, uint64_t *rs, uint64_t *ar)
{
    *rs = *ar = 0;
    if (!f->grad) return FSDP_OK;
    fsdp_flat_grad_unpoint(e, f);
    int one = e->be->world == 1;
    if (f->whole) {
        /* `none`: every rank needs the whole sum. */
        if (!one) FSDP_TRY(e->dbe->all_reduce(e->dbe, f->grad, f->count));
        *ar = f->count * sizeof(float);
    } else {
        if (!one) {
            float *g = fsdp_mem_alloc(&e->mem, f->shard, 0);
            if (!g) return FSDP_ERR_NOMEM;
            if (e->dbe->reduce_scatter_start) {
                /* Overlaps the backward of the groups below; the gradient
                 * buffer lives until fsdp_flat_reduce_finish. */
                fsdp_status s = e->dbe->reduce_scatter_start(e->dbe, f->grad, g, f->shard, &f->rs_ticket);
                f->rs_source = f->grad;
                f->grad = g;
                FSDP_TRY(s);
            } else {
                fsdp_status s = e->dbe->reduce_scatter(e->dbe, f->grad, g, f->shard);
                fsdp_mem_free(&e->mem, f->grad);
                f->grad = g;
                FSDP_TRY(s);
            }
        }
        *rs = f->nfull * sizeof(float);
    }
    /* The reduced gradient for own: in a world of one, the buffer itself. */
    f->gown = f->grad;
    f->grad = NULL;
    f->has_grad = 1;
    return FSDP_OK;
}

fsdp_status fsdp_flat_reduce_finish(fsdp_engine *e, fsdp_flat *f)
{
    if (!f->rs_source) return FSDP_OK;
    fsdp_status s = e->dbe->wait(e->dbe, f->rs_ticket);
    fsdp_mem_free(&e->mem, f->rs_source);
    f->rs_source = NULL;
    return s;
}

void fsdp_flat_drop_grad(fsdp_engine *e, fsdp_flat *f)
{
    fsdp_mem_free(&e->mem, f->gown);
    f->gown = NULL;
    f->has_grad = 0;
}

fsdp_status fsdp_flat_save_begin(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (f->sharded && !f->full) {
        FSDP_TRY(fsdp_flat_gather(e, f, bytes));
        f->gathered_for_save = 1;
    }
#ifdef GPU
    /* Darknet's pull_*_layer also copies the gradient arrays to the host. */
    if (e->mem.device && f->nt && !f->save_grad) {
        f->save_grad = fsdp_mem_alloc(&e->mem, f->nfull, 1);
        if (!f->save_grad) return FSDP_ERR_NOMEM;
        point_grad(e, f, f->save_grad);
        for (int k = 0; k < f->nt; ++k) {
            *f->t[k].grad = calloc(f->t[k].count, sizeof(float));
            if (!*f->t[k].grad) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory saving");
        }
    }
#endif
    return FSDP_OK;
}

void fsdp_flat_save_end(fsdp_engine *e, fsdp_flat *f)
{
    if (f->gathered_for_save) fsdp_flat_release(e, f);
    f->gathered_for_save = 0;
    if (f->save_grad) {
        point_grad(e, f, NULL);
        for (int k = 0; k < f->nt; ++k) {
            free(*f->t[k].grad);
            *f->t[k].grad = NULL;
        }
        fsdp_mem_free(&e->mem, f->save_grad);
        f->save_grad = NULL;
    }
}
