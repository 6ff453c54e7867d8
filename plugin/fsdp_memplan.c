#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "fsdp_engine.h"
#include "fsdp_memplan.h"
#include "fsdp_shm.h"

size_t fsdp_memplan_resident(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return n == 2 ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Darknet's gemm (gemm.c, OpenBLAS under patch 0001); not in darknet.h. */
void gemm(int TA, int TB, int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb,
          float BETA, float *C, int ldc);

fsdp_status fsdp_memplan_warm_up(fsdp_coll *be)
{
    /* 512: past one of OpenBLAS's packing blocks in each dimension, a few
     * milliseconds of work. */
    enum { N = 512 };
    size_t world = be ? (size_t)be->world : 1, n = 2 * world * FSDP_SHM_PART_FLOATS;
    size_t floats = 3 * (size_t)N * N > world * n ? 3 * (size_t)N * N : world * n;
    float *a = calloc(floats + n, sizeof *a);
    if (!a) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory at start-up");
    gemm(0, 0, N, N, N, 1, a, N, a + N * N, N, 1, a + 2 * N * N, N);
    fsdp_status s = FSDP_OK;
    if (be && world > 1) {
        s = fsdp_coll_all_gather(be, a + floats, a, n);
        if (s == FSDP_OK) s = fsdp_coll_reduce_scatter(be, a, a + floats, n);
    }
    free(a);
    return s;
}

/* ---- activations ----------------------------------------------------------- */

/* Adds n floats at p once, however many layers share it (dropout shares
 * its input's output and delta). */
static void add_once(const float **seen, int *nseen, size_t *bytes, const float *p, size_t n)
{
    if (!p) return;
    for (int i = 0; i < *nseen; ++i) if (seen[i] == p) return;
    seen[(*nseen)++] = p;
    *bytes += n * sizeof(float);
}

static size_t activations(const network *net)
{
    const float **seen = malloc((size_t)net->n * 4 * sizeof *seen);
    if (!seen) return 0;
    int nseen = 0;
    size_t bytes = 0, workspace = 0;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        size_t n = (size_t)l->outputs * l->batch;
        add_once(seen, &nseen, &bytes, l->output, n);
        add_once(seen, &nseen, &bytes, l->delta, n);   /* NULL once the engine dropped it */
        add_once(seen, &nseen, &bytes, l->x, n);
        add_once(seen, &nseen, &bytes, l->x_norm, n);
        if (l->workspace_size > workspace) workspace = l->workspace_size;
    }
    free(seen);
    /* The input and truth batch, and the loader's two batches (the one
     * training and the one loading) of batch * subdivisions samples. */
    size_t samples = (size_t)net->batch * net->subdivisions;
    bytes += ((size_t)net->inputs + net->truths) * net->batch * sizeof(float);
    bytes += 2 * samples * ((size_t)net->inputs + net->outputs) * sizeof(float);
    return bytes + workspace;
}

/* ---- build and setup ------------------------------------------------------- */

static void track(size_t *live, size_t *peak, long long delta)
{
    *live = (size_t)((long long)*live + delta);
    if (*live > *peak) *peak = *live;
}

/* Bytes of a flat's tensors as Darknet's arrays: whole, or (staged) as
 * gathered back from the slices, world * slice each. */
static size_t flat_arrays(const fsdp_flat *f, int staged, int world)
{
    size_t n = 0;
    for (int k = 0; k < f->nt; ++k)
        n += staged ? (size_t)world * fsdp_stage_slice(f->t[k].count, world) : f->t[k].count;
    return n * sizeof(float);
}

static size_t flat_slices(const fsdp_flat *f, int world)
{
    size_t n = 0;
    for (int k = 0; k < f->nt; ++k) n += fsdp_stage_slice(f->t[k].count, world);
    return n * sizeof(float);
}

/* A staged build (fsdp_stage.h), layer by layer: the layer whole (Adam's
 * moments too), then its slices; loading lends each layer whole arrays
 * again, one at a time. */
static size_t staged_build(const fsdp_engine *e, const network *net)
{
    int world = e->be->world;
    size_t live = 0, peak = 0, slices = 0, most_whole = 0;
    for (int i = 0; i < net->n; ++i) {
        fsdp_tensor t[FSDP_MAX_TENSORS];
        int nt = fsdp_layer_tensors((layer *)&net->layers[i], t);
        size_t whole = 0, kept = 0;
        for (int k = 0; k < nt; ++k) {
            whole += t[k].count * sizeof(float);
            kept += fsdp_stage_slice(t[k].count, world) * sizeof(float);
        }
        track(&live, &peak, (long long)(whole * (net->adam ? 3 : 1)));
        track(&live, &peak, (long long)kept - (long long)(whole * (net->adam ? 3 : 1)));
        slices += kept;
        if (whole > most_whole) most_whole = whole;
    }
    if (e->weights_file && slices + most_whole > peak) peak = slices + most_whole;
    return peak;
}

/* Darknet's parameter arrays (and Adam's moments), or a staged build's
 * slices; then the engine's setup order: per group its layers whole again
 * (staged), then per flat its own part, Darknet's arrays of it freed, its
 * optimizer state. */
static void build_and_setup(const fsdp_engine *e, const network *net, size_t *build, size_t *setup)
{
    int staged = e->stage.enabled, world = e->be->world;
    size_t live = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) live += staged ? flat_slices(fl[k], world) : flat_arrays(fl[k], 0, world);
    }
    *build = staged ? staged_build(e, net) : live * (net->adam ? 3 : 1);
    size_t peak = live;   /* Darknet's Adam state is freed before the groups */
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        if (staged)
            for (int k = 0; k < 2; ++k)
                track(&live, &peak, (long long)flat_arrays(fl[k], 1, world) - (long long)flat_slices(fl[k], world));
        for (int k = 0; k < 2; ++k) {
            const fsdp_flat *f = fl[k];
            size_t state = (f->m ? f->own_count : 0) + (f->v ? f->own_count : 0);
            track(&live, &peak, (long long)(f->state_bytes - state * sizeof(float)));
            track(&live, &peak, -(long long)flat_arrays(f, staged, world));
            track(&live, &peak, (long long)(state * sizeof(float)));
        }
    }
    *setup = peak;
}

/* ---- one step's buffers ------------------------------------------------------ */

/* The engine's phases (fsdp_engine.c) replayed over the flats' sizes, with
 * the host pool's own bookkeeping (fsdp_mem.h): its footprint after two
 * steps is what the pool holds at run time. */
typedef struct sim_buf {
    size_t cap;   /* 0: not held */
} sim_buf;

typedef struct sim_flat {
    size_t gather;      /* bytes an unshard takes (0: replicated, or a world of one) */
    size_t grad;        /* bytes grad_point takes (0: none, or into the momentum) */
    size_t gown;        /* bytes the reduce takes for this rank's part (0: the full buffer is kept) */
    int slot_fits;      /* its gradient may take the node's gradient slot */
    int in_slot;
    int gathered;
    sim_buf full, gradbuf, gownbuf, rs;
} sim_flat;

typedef struct sim {
    const fsdp_engine *e;
    sim_flat *f;        /* 2 per group: train, frozen */
    fsdp_mem_pool pool;
    uintptr_t next_id;  /* stand-ins for buffers: the pool only stores them */
    int async_rs;       /* the backend starts reduce-scatters */
    int async_ag;       /* ... and all-gathers (prefetch) */
    sim_flat *rs_inflight;
    int slot_busy;      /* node memory's gradient slot (fsdp_flat.h) */
} sim;

static void take(sim *s, sim_buf *b, size_t bytes)
{
    if (!bytes) return;
    int slot = fsdp_pool_fit(&s->pool, bytes);
    if (slot >= 0) {
        fsdp_pool_take_slot(&s->pool, slot, &b->cap);
        return;
    }
    float *old;
    while (fsdp_pool_drop_smaller(&s->pool, bytes, &old)) continue;
    b->cap = bytes;
    fsdp_pool_count_new(&s->pool, bytes);
}

static void give(sim *s, sim_buf *b)
{
    if (!b->cap) return;
    s->next_id += 64;
    fsdp_pool_keep(&s->pool, (float *)s->next_id, b->cap);
    b->cap = 0;
}

static void sim_unshard(sim *s, sim_flat *f)
{
    if (f->gathered) return;
    take(s, &f->full, f->gather);
    f->gathered = 1;
}

static void sim_reshard(sim *s, sim_flat *f)
{
    if (!f->gather || !f->gathered) return;   /* replicated flats stay */
    give(s, &f->full);
    f->gathered = 0;
}

static void sim_prefetch(sim *s, int k, int backward)
{
    if (k < 0 || !s->async_ag) return;
    sim_unshard(s, &s->f[2 * k]);
    if (!backward || s->e->groups[k].frozen_bwd) sim_unshard(s, &s->f[2 * k + 1]);
}

/* The reduce in flight completes and the optimizer steps its group: the
 * full gradient and the reduced part go back. */
static void sim_finish_reduce(sim *s)
{
    if (!s->rs_inflight) return;
    give(s, &s->rs_inflight->rs);
    give(s, &s->rs_inflight->gownbuf);
    s->rs_inflight = NULL;
}

/* The full gradient becomes this rank's part (or stays, as the reduced
 * one), and once reduced the optimizer steps the group and gives it back. */
static void sim_reduce(sim *s, sim_flat *f)
{
    if (f->in_slot) {
        f->in_slot = s->slot_busy = 0;   /* the optimizer sums from the slots: no buffer */
        return;
    }
    if (!f->gradbuf.cap) return;
    if (!f->gown) {
        give(s, &f->gradbuf);   /* reduced in place (none, a world of one), stepped at once */
        return;
    }
    take(s, &f->gownbuf, f->gown);
    if (s->async_rs) {
        f->rs = f->gradbuf;
        s->rs_inflight = f;
    } else {
        give(s, &f->gradbuf);
        give(s, &f->gownbuf);
    }
    f->gradbuf.cap = 0;
}

static void sim_step(sim *s, const network *net)
{
    const fsdp_engine *e = s->e;
    /* Micro-batches after the first take what the first took (gradients
     * keep accumulating): the first, one more and the last tell the peak,
     * however many the cfg asks for (a cfg's subdivisions=99999999 once
     * took seconds here). */
    int n = net->n, nsub = net->subdivisions > 3 ? 3 : net->subdivisions > 0 ? net->subdivisions : 1;
    for (int micro = 0; micro < nsub; ++micro) {
        for (int i = 0; i < n; ++i) {
            for (int k = 0; k < e->ngroups; ++k)
                if (e->groups[k].info->span_first == i) {
                    sim_unshard(s, &s->f[2 * k]);
                    sim_unshard(s, &s->f[2 * k + 1]);
                }
            if (e->prefetch) sim_prefetch(s, e->next_forward[i], 0);
            for (int k = 0; k < e->ngroups; ++k) {
                const fsdp_group *g = &e->groups[k];
                if (g->info->span_last != i) continue;
                if (!fsdp_group_keeps_frozen(g, 1)) sim_reshard(s, &s->f[2 * k + 1]);
                if (!fsdp_group_keeps_train(g, 1)) sim_reshard(s, &s->f[2 * k]);
            }
        }
        for (int i = n - 1; i >= 0; --i) {
            if (!e->plan.need_bwd[i]) continue;
            int k = e->plan.layer_group[i];
            const fsdp_group *g = &e->groups[k];
            sim_flat *t = &s->f[2 * k], *fr = &s->f[2 * k + 1];
            if (i == g->bwd_hi) {
                sim_unshard(s, t);
                if (g->frozen_bwd) sim_unshard(s, fr);
                if (t->gradbuf.cap || t->gownbuf.cap || t->in_slot) {
                    /* accumulating since an earlier micro-batch */
                } else if (t->slot_fits && t->grad && !s->slot_busy) {
                    t->in_slot = s->slot_busy = 1;
                } else {
                    take(s, &t->gradbuf, t->grad);
                }
                if (e->prefetch && e->cfg.reshard_after_forward) sim_prefetch(s, e->next_backward[i], 1);
            }
            if (i == g->bwd_lo) {
                if (micro == nsub - 1) {
                    sim_finish_reduce(s);
                    sim_reduce(s, t);
                }
                if (k != 0) {
                    sim_reshard(s, t);
                    sim_reshard(s, fr);
                }
            }
        }
    }
    sim_finish_reduce(s);
    for (int k = 0; k < 2 * e->ngroups; ++k) {
        sim_flat *f = &s->f[k];
        give(s, &f->gownbuf);
        give(s, &f->gradbuf);   /* kept as the reduced gradient (none, or a world of one) */
        sim_reshard(s, f);
    }
}

static size_t step_buffers(const fsdp_engine *e, const network *net)
{
    sim s = { .e = e, .f = calloc((size_t)e->ngroups * 2, sizeof(sim_flat)) };
    if (!s.f) return 0;
    int world = e->be->world;
    s.async_rs = world > 1 && fsdp_coll_starts_reduce_scatter(e->dbe);
    s.async_ag = world > 1 && fsdp_coll_starts_all_gather(e->dbe);
    for (int k = 0; k < e->ngroups; ++k) {
        const fsdp_flat *fl[2] = { &e->groups[k].train, &e->groups[k].frozen };
        for (int j = 0; j < 2; ++j) {
            const fsdp_flat *f = fl[j];
            sim_flat *sf = &s.f[2 * k + j];
            if (!f->nt) continue;
            sf->gather = f->kind.sharded && world > 1 && !f->in_node ? f->nfull * sizeof(float) : 0;
            sf->slot_fits = fsdp_flat_fits_slot(&e->flat, f);
            sf->gathered = !sf->gather;
            if (!f->kind.state || f->grad_in_m) continue;
            sf->grad = f->nfull * sizeof(float);
            sf->gown = world > 1 && !f->kind.whole ? f->shard * sizeof(float) : 0;
        }
    }
    /* The second step finds the pool as the first left it. */
    sim_step(&s, net);
    sim_step(&s, net);
    free(s.f);
    return s.pool.footprint;
}

/* Of every other rank's gradient slot, rank r sums the parts [r * shard,
 * (r + 1) * shard) of each trainable flat: their union's floats, as pieces
 * [lo, hi) from the lowest point not yet counted to the end of an interval
 * holding it. */
static size_t slot_parts_read(const fsdp_engine *e, int r)
{
    size_t parts = 0, upto = 0;
    for (;;) {
        size_t lo = SIZE_MAX, hi = 0;
        for (int g = 0; g < e->ngroups; ++g) {
            const fsdp_flat *f = &e->groups[g].train;
            if (!fsdp_flat_fits_slot(&e->flat, f)) continue;
            size_t a = (size_t)r * f->shard, b = a + f->shard, from = a > upto ? a : upto;
            if (b > upto && from < lo) {
                lo = from;
                hi = b;
            }
        }
        if (lo == SIZE_MAX) return parts;
        parts += hi - lo;
        upto = hi;
    }
}

/* Node memory a rank maps and touches beyond its own parts (which the
 * model state counts), for the rank that touches most: every parameter
 * (forward reads them all), its own gradient slot, and the parts of the
 * other ranks' slots it sums. */
static size_t node_resident(const fsdp_engine *e)
{
    if (!e->node.on) return 0;
    size_t params = 0, own = 0, parts = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) {
            if (!fl[k]->in_node) continue;
            params += fl[k]->nfull;
            own += fl[k]->shard;
        }
    }
    for (int r = 0; r < e->be->world; ++r) {
        size_t p = slot_parts_read(e, r);
        if (p > parts) parts = p;
    }
    return (params - own + e->node.slot_floats + (size_t)(e->be->world - 1) * parts) * sizeof(float);
}

void fsdp_memplan_predict(const fsdp_engine *e, const network *net, size_t fixed, fsdp_mem_prediction *out)
{
    out->fixed = fixed;
    out->activations = activations(net) + fsdp_acts_bytes(&e->acts);
    build_and_setup(e, net, &out->build, &out->setup);
    out->model_state = e->model_state_bytes;
    out->step_buffers = step_buffers(e, net);
    out->node_shared = node_resident(e);
    size_t step = out->model_state + out->node_shared + out->step_buffers, most = out->build;
    if (out->setup > most) most = out->setup;
    if (step > most) most = step;
    out->peak = fixed + out->activations + most;
}
