#include <stdlib.h>
#include <string.h>
#include "fsdp_flat.h"

static void point(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->t[k].data = base ? base + f->off[k] : NULL;
}

static void point_grad(fsdp_flat *f, float *base)
{
    for (int k = 0; k < f->nt; ++k) *f->t[k].grad = base ? base + f->off[k] : NULL;
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
    for (int k = 0; k < nt; ++k) {
        f->off[k] = f->count;
        f->count += t[k].count;
    }
    f->shard = fsdp_shard_count(f->count, world);
    f->sharded = sharded;
    /* `none` keeps a replica and updates all of it; the others update a shard. */
    int whole = !sharded && state && e->strategy == FSDP_SHARD_NONE;
    size_t nfull = (sharded || state) && !whole ? f->shard * (size_t)world : f->count;
    f->nfull = nfull;

    float *full = calloc(nfull ? nfull : 1, sizeof(float));
    if (!full) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory: %zu floats for a group", nfull);
    for (int k = 0; k < nt; ++k) memcpy(full + f->off[k], *t[k].data, t[k].count * sizeof(float));
    /* Ranks may have initialised differently (no -seed, no weights file). */
    fsdp_status s = e->be->broadcast(e->be, full, nfull * sizeof(float), 0);
    if (s != FSDP_OK) { free(full); return s; }
    e->bytes_bcast += nfull * sizeof(float);

    for (int k = 0; k < nt; ++k) {
        free(*t[k].data);
        *t[k].data = NULL;
        free(*t[k].grad);
        *t[k].grad = NULL;
    }
    if (whole) {
        f->own = f->full = full;
        f->own_count = f->count;
    } else if (sharded || state) {
        f->own_count = f->shard;
        f->own = malloc(f->shard * sizeof(float) + 1);
        if (!f->own) { free(full); return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for a shard"); }
        memcpy(f->own, full + (size_t)rank * f->shard, f->shard * sizeof(float));
        if (sharded) free(full);
        else f->full = full;   /* grad_op: replicated parameters, sharded state */
    } else {
        f->full = full;        /* replicated frozen parameters */
    }
    if (f->full) point(f, f->full);
    int adam = e->net && e->net->adam;
    if (state) {
        /* SGD keeps momentum only; Adam a second moment too. */
        f->m = calloc(f->own_count + 1, sizeof(float));
        f->v = adam ? calloc(f->own_count + 1, sizeof(float)) : NULL;
        if (!f->m || (adam && !f->v)) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for optimizer state");
        FSDP_TRY(make_runs(f, whole ? 0 : (size_t)rank * f->shard));
    }
    size_t bytes = (f->own && f->own != f->full ? f->own_count : 0) + (f->full ? nfull : 0);
    if (state) bytes += (size_t)(1 + adam) * f->own_count;
    e->model_state_bytes += bytes * sizeof(float);
    return FSDP_OK;
}

void fsdp_flat_free(fsdp_flat *f)
{
    if (f->nt) point(f, NULL);
    if (f->nt) point_grad(f, NULL);
    if (f->own != f->full) free(f->own);
    free(f->full);
    if (f->gown != f->grad) free(f->gown);
    free(f->grad);
    free(f->m);
    free(f->v);
    free(f->t);
    free(f->off);
    free(f->runs);
    memset(f, 0, sizeof *f);
}

fsdp_status fsdp_flat_gather(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    if (!f->nt || !f->sharded || f->full) return FSDP_OK;
    size_t n = f->nfull;
    f->full = malloc(n * sizeof(float) + 1);
    if (!f->full) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory gathering %zu floats", n);
    FSDP_TRY(e->be->all_gather(e->be, f->own, f->full, f->shard));
    *bytes = n * sizeof(float);
    point(f, f->full);
    return FSDP_OK;
}

void fsdp_flat_release(fsdp_flat *f)
{
    if (!f->sharded || !f->full) return;  /* replicated parameters stay */
    point(f, NULL);
    free(f->full);
    f->full = NULL;
}

fsdp_status fsdp_flat_grad_begin(fsdp_engine *e, fsdp_flat *f)
{
    if (!f->nt) return FSDP_OK;
    if (!f->grad) {
        size_t n = f->nfull;
        f->grad = calloc(n + 1, sizeof(float));
        if (!f->grad) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for %zu gradient floats", n);
    }
    point_grad(f, f->grad);
    return FSDP_OK;
}

void fsdp_flat_grad_unpoint(fsdp_flat *f)
{
    if (f->nt) point_grad(f, NULL);
}

fsdp_status fsdp_flat_reduce(fsdp_engine *e, fsdp_flat *f, uint64_t *rs, uint64_t *ar)
{
    *rs = *ar = 0;
    if (!f->grad) return FSDP_OK;
    fsdp_flat_grad_unpoint(f);
    if (f->own == f->full) {
        /* `none`: every rank needs the whole sum. */
        FSDP_TRY(e->be->all_reduce(e->be, f->grad, f->count));
        *ar = f->count * sizeof(float);
        f->gown = f->grad;
        f->grad = NULL;
    } else {
        if (!f->gown) {
            f->gown = malloc(f->shard * sizeof(float) + 1);
            if (!f->gown) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for a gradient shard");
        }
        FSDP_TRY(e->be->reduce_scatter(e->be, f->grad, f->gown, f->shard));
        *rs = f->nfull * sizeof(float);
        free(f->grad);
        f->grad = NULL;
    }
    f->has_grad = 1;
    return FSDP_OK;
}
