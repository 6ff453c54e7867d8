#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_engine.h"
#include "fsdp_memplan.h"
#include "fsdp_pairs.h"
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

size_t fsdp_memplan_pss(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return 0;
    char line[256];
    unsigned long kb = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "Pss: %lu kB", &kb) == 1;
    fclose(f);
    return found ? (size_t)kb * 1024 : 0;
}

/* Darknet's gemm (gemm.c, OpenBLAS under patch 0001); not in darknet.h. */
void gemm(int TA, int TB, int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb,
          float BETA, float *C, int ldc);

fsdp_status fsdp_memplan_warm_up(fsdp_coll *be)
{
    /* 512: past one of OpenBLAS's packing blocks in each dimension, a few
     * milliseconds of work. */
    enum { N = 512 };
    int w = be ? be->world : 1;
    /* Two parts per rank fill both halves of the window, and each of the
     * three collectives maps the pages of the others' segments that it
     * reads in every later call (fsdp_shm.c); a round of terms makes the
     * blocking sums' scratch.  Both shrink as the ranks grow, so
     * the gathered buffer (world * n) stays about 1 MB: the warm-up costs
     * the same memory and time at any world. */
    size_t world = (size_t)w, n = 2 * fsdp_shm_part_floats(w);
    if (n < fsdp_pairs_round(w)) n = fsdp_pairs_round(w);
    size_t floats = 3 * (size_t)N * N > world * n ? 3 * (size_t)N * N : world * n;
    float *a = calloc(floats + n, sizeof *a);
    if (!a) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory at start-up");
    gemm(0, 0, N, N, N, 1, a, N, a + N * N, N, 1, a + 2 * N * N, N);
    fsdp_status s = FSDP_OK;
    if (be && world > 1) {
        s = fsdp_coll_all_gather(be, a + floats, a, n);
        if (s == FSDP_OK) s = fsdp_coll_reduce_scatter(be, a, a + floats, n);
        if (s == FSDP_OK) s = fsdp_coll_all_reduce(be, a, n);
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

size_t fsdp_memplan_held(const network *net, const int *layers, int nlayers)
{
    const float **seen = malloc(((size_t)nlayers * 4 + 1) * sizeof *seen);
    if (!seen) return 0;
    int nseen = 0;
    size_t bytes = 0;
    for (int k = 0; k < nlayers; ++k) {
        const layer *l = &net->layers[layers ? layers[k] : k];
        size_t n = fsdp_layer_act_floats(l);
        add_once(seen, &nseen, &bytes, l->output, n);
        add_once(seen, &nseen, &bytes, l->delta, n);   /* NULL once the engine dropped it */
        add_once(seen, &nseen, &bytes, l->x, n);
        add_once(seen, &nseen, &bytes, l->x_norm, n);
    }
    free(seen);
    return bytes;
}

size_t fsdp_memplan_workspace(const network *net)
{
    size_t workspace = 0;
    for (int i = 0; i < net->n; ++i)
        if (net->layers[i].workspace_size > workspace) workspace = net->layers[i].workspace_size;
    return workspace;
}

static size_t activations(const network *net)
{
    size_t bytes = fsdp_memplan_held(net, NULL, net->n), workspace = fsdp_memplan_workspace(net);
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
static size_t staged_build(const fsdp_engine *e, const network *net, int loads_weights)
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
    if (loads_weights && slices + most_whole > peak) peak = slices + most_whole;
    return peak;
}

/* Darknet's parameter arrays (and Adam's moments), or a staged build's
 * slices; then the engine's setup order: per group its layers whole again
 * (staged), then per flat its own part, Darknet's arrays of it freed, its
 * optimizer state. */
static void build_and_setup(const fsdp_engine *e, const network *net, int loads_weights, size_t *build,
                            size_t *setup)
{
    int staged = e->stage.enabled, world = e->be->world;
    size_t live = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) live += staged ? flat_slices(fl[k], world) : flat_arrays(fl[k], 0, world);
    }
    *build = staged ? staged_build(e, net, loads_weights) : live * (net->adam ? 3 : 1);
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

/* ---- one step, run over the flats' sizes --------------------------------------- */

/* The engine's step plan (fsdp_stepplan.h) run as fsdp_engine.c runs it,
 * each op doing to a stand-in of each flat what it does to the flat
 * (fsdp_flat.h): the same states, the buffers it takes and gives back,
 * through the host pool's own bookkeeping (fsdp_mem.h), so that the
 * pool's footprint after two steps is what it holds at run time; and the
 * bytes each op moves. */
typedef struct sim_flat {
    int nt;
    int sharded;        /* parameters live only as shards between uses */
    size_t gather;      /* bytes an unshard takes (0: a world of one, or node memory) */
    uint64_t moves;     /* bytes an unshard counts (0: node memory) */
    size_t grad;        /* bytes of a full gradient buffer (0: no optimizer state) */
    size_t gown;        /* bytes the reduce takes for this rank's part (0: the full buffer is kept) */
    uint64_t rs, ar;    /* bytes the reduce counts */
    uint64_t step_ag;   /* grad_op, hybrid: bytes the update's gather counts */
    size_t sums;        /* hybrid: bytes of the machines' sums of this rank's part (0: one machine) */
    int hybrid;         /* node memory on several machines: the gradient reduces from the slot */
    const fsdp_flat *f; /* for the flat's own answers (fsdp_flat_grad_place) */
    fsdp_flat_state state;
    fsdp_grad_state grad_state;
    int in_slot;        /* the gradient accumulates in this rank's node slot */
    int in_reduce_slot; /* ... in its reduce slot (several machines) */
    size_t full, gradbuf, gownbuf, rsbuf;   /* buffers held, bytes (0: none) */
} sim_flat;

typedef struct sim {
    const fsdp_engine *e;
    sim_flat *f;        /* 2 per group: train, frozen */
    int *updated;
    fsdp_mem_pool pool;
    uintptr_t next_id;  /* stand-ins for buffers: the pool only stores them */
    int async_rs;       /* the backend starts reduce-scatters */
    int async_ag;       /* ... and all-gathers (prefetch) */
    int inflight;       /* the group whose reduce-scatter is in flight, or -1 */
    int slot_busy;      /* node memory's gradient slot (fsdp_flat.h) */
    int reduce_slot_used;   /* a gradient reduced from the reduce slot */
    size_t rs_started;  /* the largest started reduce-scatter's part, bytes */
    size_t rs_largest;  /* the largest reduce-scatter's part, started or not, bytes */
    fsdp_group_tally *bytes;   /* per group, when counting; else NULL */
    uint64_t weight;    /* micro-batches the one being run stands for */
} sim;

/* What the host pool records for a new buffer of `bytes` (fsdp_mem_take):
 * the allocator's usable size, a little more than asked.  Asked of the
 * allocator itself (a buffer made and freed untouched, which costs no
 * page): whether a held buffer fits a request at most twice its size can
 * turn on that little, as a reduced part of exactly half a group does. */
static size_t usable(size_t bytes)
{
    void *p = malloc(bytes);
    size_t u = p ? malloc_usable_size(p) : bytes;
    free(p);
    return u;
}

static void take(sim *s, size_t *b, size_t bytes)
{
    if (!bytes) return;
    int slot = fsdp_pool_fit(&s->pool, bytes);
    if (slot >= 0) {
        fsdp_pool_take_slot(&s->pool, slot, b);
        return;
    }
    float *old;
    while (fsdp_pool_drop_smaller(&s->pool, bytes, &old)) continue;
    *b = usable(bytes);
    fsdp_pool_count_new(&s->pool, *b);
}

static void give(sim *s, size_t *b)
{
    if (!*b) return;
    s->next_id += 64;
    fsdp_pool_keep(&s->pool, (float *)s->next_id, *b);
    *b = 0;
}

static sim_flat *sim_flat_of(sim *s, int group, int flat)
{
    return &s->f[2 * group + flat];
}

/* What an op moved, when counting: bytes of each collective and backward
 * gathers, for the micro-batches the one being run stands for. */
static void count(sim *s, int group, uint64_t ag, uint64_t rs, uint64_t ar, uint64_t gathers)
{
    if (!s->bytes) return;
    fsdp_group_tally *t = &s->bytes[group];
    t->ag_bytes += ag * s->weight;
    t->rs_bytes += rs * s->weight;
    t->ar_bytes += ar * s->weight;
    t->backward_gathers += gathers * s->weight;
}

static void sim_unshard(sim *s, const fsdp_op *op)
{
    sim_flat *f = sim_flat_of(s, op->group, op->flat);
    if (!f->nt || f->state == FSDP_FLAT_GATHERED) return;
    if (f->state == FSDP_FLAT_SHARDED) take(s, &f->full, f->gather);
    f->state = FSDP_FLAT_GATHERED;
    count(s, op->group, f->moves, 0, 0, op->backward && f->moves);
}

static void sim_prefetch(sim *s, const fsdp_op *op)
{
    sim_flat *f = sim_flat_of(s, op->group, op->flat);
    if (!f->nt || f->state != FSDP_FLAT_SHARDED || !s->async_ag || !f->gather) return;
    take(s, &f->full, f->gather);
    f->state = FSDP_FLAT_GATHERING;
}

static void sim_reshard(sim *s, const fsdp_op *op)
{
    sim_flat *f = sim_flat_of(s, op->group, op->flat);
    if (!f->sharded || f->state != FSDP_FLAT_GATHERED) return;   /* replicated flats stay */
    give(s, &f->full);
    f->state = FSDP_FLAT_SHARDED;
}

static void sim_grad_point(sim *s, const fsdp_op *op)
{
    sim_flat *f = sim_flat_of(s, op->group, op->flat);
    if (!f->nt || f->grad_state != FSDP_GRAD_NONE) return;
    fsdp_grad_place at = fsdp_flat_grad_place(&s->e->flat, f->f, s->slot_busy);
    if (at == FSDP_GRAD_AT_SLOT) f->in_slot = s->slot_busy = 1;
    else if (at == FSDP_GRAD_AT_BUFFER) take(s, &f->gradbuf, f->grad);
    f->grad_state = FSDP_GRAD_ACCUMULATING;
}

/* The group's optimizer step: its reduced gradient goes back (the slot is
 * free again); grad_op gathers the updated parameters. */
static void sim_update_group(sim *s, int k)
{
    sim_flat *f = sim_flat_of(s, k, FSDP_FLAT_TRAIN);
    s->updated[k] = 1;
    if (!f->nt) return;
    if (f->in_slot && !f->in_reduce_slot) s->slot_busy = 0;
    f->in_slot = f->in_reduce_slot = 0;
    give(s, &f->gownbuf);
    give(s, &f->gradbuf);
    f->grad_state = FSDP_GRAD_NONE;
    count(s, k, f->step_ag, 0, 0, 0);
}

static void sim_settle(sim *s)
{
    int k = s->inflight;
    if (k < 0) return;
    sim_flat *f = sim_flat_of(s, k, FSDP_FLAT_TRAIN);
    s->inflight = -1;
    give(s, &f->rsbuf);
    f->grad_state = FSDP_GRAD_REDUCED;
    sim_update_group(s, k);
}

static void sim_reduce(sim *s, int k)
{
    sim_settle(s);
    sim_flat *f = sim_flat_of(s, k, FSDP_FLAT_TRAIN);
    if (f->grad_state != FSDP_GRAD_ACCUMULATING) return;
    count(s, k, 0, f->rs, f->ar, 0);
    if (f->hybrid && !f->in_slot && f->gradbuf) {
        /* Into the slot (else the reduce slot), to be summed on the machine first. */
        give(s, &f->gradbuf);
        f->in_reduce_slot = s->slot_busy;
        s->reduce_slot_used |= s->slot_busy;
        f->in_slot = s->slot_busy = 1;
    }
    if (f->in_slot) {
        /* The optimizer sums from the node slots (on several machines,
         * from the machines' sums, exchanged through a buffer as large). */
        size_t send = 0;
        take(s, &send, f->sums);
        take(s, &f->gownbuf, f->sums);
        give(s, &send);
        f->grad_state = FSDP_GRAD_IN_SLOTS;
    } else if (f->gown) {
        /* The full gradient becomes this rank's part. */
        take(s, &f->gownbuf, f->gown);
        if (s->async_rs && f->gown > s->rs_started) s->rs_started = f->gown;
        if (f->gown > s->rs_largest) s->rs_largest = f->gown;
        if (s->async_rs) {
            f->rsbuf = f->gradbuf;
            f->gradbuf = 0;
            f->grad_state = FSDP_GRAD_REDUCING;
            s->inflight = k;
            return;
        }
        give(s, &f->gradbuf);
        f->grad_state = FSDP_GRAD_REDUCED;
    } else {
        f->grad_state = FSDP_GRAD_REDUCED;   /* reduced in place (none, a world of one) */
    }
    sim_update_group(s, k);
}

static void sim_op(sim *s, const fsdp_op *op)
{
    switch (op->kind) {
    case FSDP_OP_UNSHARD: sim_unshard(s, op); break;
    case FSDP_OP_PREFETCH: sim_prefetch(s, op); break;
    case FSDP_OP_RESHARD: sim_reshard(s, op); break;
    case FSDP_OP_GRAD_POINT: sim_grad_point(s, op); break;
    case FSDP_OP_REDUCE: sim_reduce(s, op->group); break;
    case FSDP_OP_SETTLE: sim_settle(s); break;
    case FSDP_OP_STEP:
        if (!s->updated[op->group]) sim_update_group(s, op->group);
        s->updated[op->group] = 0;
        break;
    case FSDP_OP_GRAD_UNPOINT:
    case FSDP_OP_ACTS_IN:
    case FSDP_OP_ACTS_BACK:
    case FSDP_OP_ACTS_OUT:
    case FSDP_OP_RECOMPUTE:   /* the arena is counted with the activations */
    case FSDP_OP_KINDS: break;
    }
}

static void sim_at(sim *s, const fsdp_op *ops, int n, int last_micro)
{
    for (int k = 0; k < n; ++k)
        if (fsdp_op_applies(&ops[k], 1, last_micro)) sim_op(s, &ops[k]);
}

/* One training step as the hooks see it: per micro-batch each layer's
 * forward points, then backward from the top for the layers that need it;
 * then the update.  Micro-batches after the first take what the first took
 * (gradients keep accumulating): the first, one more standing for every
 * middle one and the last tell the peak and the bytes, however many the
 * cfg asks for (a cfg's subdivisions=99999999 once took seconds here). */
static void sim_step(sim *s, int subdivisions)
{
    const fsdp_engine *e = s->e;
    const fsdp_step_plan *p = &e->step_plan;
    int n = p->nlayers, nsub = subdivisions > 0 ? subdivisions : 1, runs = nsub > 3 ? 3 : nsub, count;
    for (int micro = 0; micro < runs; ++micro) {
        int last = micro == runs - 1;
        s->weight = runs == 3 && micro == 1 ? (uint64_t)nsub - 2 : 1;
        for (int i = 0; i < n; ++i)
            for (int a = FSDP_AT_FORWARD_BEFORE; a <= FSDP_AT_FORWARD_AFTER; ++a) {
                const fsdp_op *ops = fsdp_step_plan_at(p, i, (fsdp_at)a, &count);
                sim_at(s, ops, count, last);
            }
        for (int i = n - 1; i >= 0; --i) {
            if (!e->plan.need_bwd[i]) continue;
            for (int a = FSDP_AT_BACKWARD_BEFORE; a <= FSDP_AT_BACKWARD_AFTER; ++a) {
                const fsdp_op *ops = fsdp_step_plan_at(p, i, (fsdp_at)a, &count);
                sim_at(s, ops, count, last);
            }
        }
    }
    s->weight = 1;
    const fsdp_op *ops = fsdp_step_plan_update(p, &count);
    sim_at(s, ops, count, 1);
}

static int sim_init(sim *s, const fsdp_engine *e)
{
    *s = (sim){ .e = e, .inflight = -1, .weight = 1 };
    s->f = calloc((size_t)e->ngroups * 2, sizeof *s->f);
    s->updated = calloc((size_t)e->ngroups, sizeof *s->updated);
    if (!s->f || !s->updated) {
        free(s->f);
        free(s->updated);
        return 0;
    }
    int world = e->be->world;
    s->async_rs = world > 1 && fsdp_coll_starts_reduce_scatter(e->dbe);
    s->async_ag = world > 1 && fsdp_coll_starts_all_gather(e->dbe);
    for (int k = 0; k < e->ngroups; ++k) {
        const fsdp_flat *fl[2] = { &e->groups[k].train, &e->groups[k].frozen };
        for (int j = 0; j < 2; ++j) {
            const fsdp_flat *f = fl[j];
            sim_flat *sf = sim_flat_of(s, k, j);
            size_t full = f->nfull * sizeof(float);
            sf->f = f;
            sf->nt = f->nt;
            sf->sharded = f->kind.sharded;
            sf->state = f->kind.sharded ? FSDP_FLAT_SHARDED : FSDP_FLAT_GATHERED;
            sf->moves = f->kind.sharded && !f->in_node ? full : 0;
            sf->gather = world > 1 ? sf->moves : 0;
            if (!f->kind.state) continue;
            sf->grad = f->grad_in_m ? 0 : full;
            sf->gown = world > 1 && !f->kind.whole ? f->shard * sizeof(float) : 0;
            sf->rs = f->kind.whole ? 0 : full;
            sf->ar = f->kind.whole ? f->count * sizeof(float) : 0;
            sf->hybrid = f->in_node && e->node.at.machines > 1;
            sf->step_ag = e->cfg.strategy == FSDP_SHARD_GRAD_OP || sf->hybrid ? full : 0;
            sf->sums = sf->hybrid ? (size_t)e->node.at.machines * f->shard * sizeof(float) : 0;
        }
    }
    return 1;
}

static void sim_free(sim *s)
{
    free(s->f);
    free(s->updated);
}

/* The buffer the backend keeps for the other ranks' terms of its started
 * reduce-scatters (fsdp_backend.h, scratch_terms): that many parts of the
 * largest; and between machines the one for the machines' sums of its
 * blocking ones (sums_terms).  Its other blocking sums go round by round
 * through a buffer of fixed size, made by the start-up warm-up: in the
 * fixed cost. */
static size_t collective_scratch(const sim *s, const fsdp_engine *e)
{
    return (size_t)e->dbe->scratch_terms * s->rs_started + (size_t)e->dbe->sums_terms * s->rs_largest;
}

/* *reduce_slot: whether a gradient reduced from the reduce slot;
 * *scratch: the backend's buffers for the terms of its sums. */
static size_t step_buffers(const fsdp_engine *e, const network *net, int *reduce_slot, size_t *scratch)
{
    sim s;
    *reduce_slot = 0;
    *scratch = 0;
    if (!sim_init(&s, e)) return 0;
    /* The second step finds the pool as the first left it. */
    sim_step(&s, net->subdivisions);
    sim_step(&s, net->subdivisions);
    sim_free(&s);
    *reduce_slot = s.reduce_slot_used;
    *scratch = collective_scratch(&s, e);
    return s.pool.footprint;
}

fsdp_status fsdp_memplan_step_bytes(const fsdp_engine *e, int subdivisions, fsdp_group_tally *out)
{
    sim s;
    if (!sim_init(&s, e)) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    memset(out, 0, (size_t)e->ngroups * sizeof *out);
    s.bytes = out;
    sim_step(&s, subdivisions);
    sim_free(&s);
    return FSDP_OK;
}

/* The kernel maps the pages of a shared file around a read fault, 64 KB
 * aligned (fault-around), wherever they are already in memory: reading a
 * few floats of another rank's slot maps 64 KB of it. */
#define FAULT_AROUND_FLOATS ((size_t)16384)

typedef struct {
    size_t lo, hi;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The floats a rank in `place` maps of its machine's gradient slots
 * (`ranks` of slot_floats each, one region): its own slot, and of every
 * other slot the parts [q * shard, (q + 1) * shard) of each trainable flat
 * that fits the slot, for each q of owners (itself, and on several
 * machines its peers), each widened to the fault-around windows that hold
 * it; the union.  0 where memory runs out (the prediction then says less). */
static size_t slot_floats_read(const fsdp_engine *e, const int *owners, int nowners, int place, int ranks)
{
    size_t slot = e->node.slot_floats, end = slot * (size_t)ranks, n = 0, total = 0;
    span *v = malloc(((size_t)ranks * (size_t)nowners * (size_t)e->ngroups + 1) * sizeof *v);
    if (!v) return 0;
    v[n++] = (span){ (size_t)place * slot, (size_t)(place + 1) * slot };
    for (int q = 0; q < ranks; ++q) {
        if (q == place) continue;
        for (int g = 0; g < e->ngroups; ++g) {
            const fsdp_flat *f = &e->groups[g].train;
            if (!f->shard || !fsdp_flat_fits_slot(&e->flat, f)) continue;
            for (int j = 0; j < nowners; ++j) {
                size_t a = (size_t)q * slot + (size_t)owners[j] * f->shard, b = a + f->shard;
                a -= a % FAULT_AROUND_FLOATS;
                b = (b + FAULT_AROUND_FLOATS - 1) / FAULT_AROUND_FLOATS * FAULT_AROUND_FLOATS;
                v[n++] = (span){ a, b < end ? b : end };
            }
        }
    }
    qsort(v, n, sizeof *v, span_cmp);
    size_t upto = 0;
    for (size_t k = 0; k < n; ++k) {
        size_t lo = v[k].lo > upto ? v[k].lo : upto;
        if (v[k].hi > lo) total += v[k].hi - lo;
        if (v[k].hi > upto) upto = v[k].hi;
    }
    free(v);
    return total;
}

/* Node memory a rank maps and touches beyond its own parts (which the
 * model state counts), for the rank that touches most: every parameter
 * (forward reads them all), its own gradient slot, and the parts of the
 * other slots of its machine it sums (on several machines, its own and
 * its peers', the ranks in its place on each machine); the same again of
 * the reduce slots where a gradient reduces from them. */
static size_t node_resident(const fsdp_engine *e, int reduce_slot, size_t *own_bytes)
{
    *own_bytes = 0;
    if (!e->node.on) return 0;
    const fsdp_node_layout *at = &e->node.at;
    size_t params = 0, own = 0, slots = 0;
    int *owners = malloc((size_t)at->machines * sizeof *owners);
    if (!owners) return 0;
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) {
            if (!fl[k]->in_node) continue;
            params += fl[k]->nfull;
            own += fl[k]->shard;
        }
    }
    for (int place = 0; place < at->ranks; ++place) {
        for (int k = 0; k < at->machines; ++k)
            owners[k] = at->machines > 1 ? at->ranks_at[(size_t)k * at->ranks + place] : place;
        size_t p = slot_floats_read(e, owners, at->machines, place, at->ranks);
        if (p > slots) slots = p;
    }
    free(owners);
    *own_bytes = own * sizeof(float);
    return (params - own + slots * (size_t)(1 + reduce_slot)) * sizeof(float);
}

fsdp_mem_fixed fsdp_memplan_fixed(void)
{
    fsdp_mem_fixed f = { fsdp_memplan_resident(), fsdp_memplan_pss() };
    if (!f.pss) f.pss = f.rss;
    return f;
}

void fsdp_memplan_predict(const fsdp_engine *e, const network *net, fsdp_mem_fixed fixed, int loads_weights,
                          fsdp_mem_prediction *out)
{
    out->fixed = fixed.rss;
    out->activations = activations(net) + fsdp_acts_bytes(&e->acts) + fsdp_delta_pool_bytes(&e->deltas) +
                       fsdp_recompute_bytes(&e->rc);
    build_and_setup(e, net, loads_weights, &out->build, &out->setup);
    out->model_state = e->tally.model_state_bytes;
    int reduce_slot;
    out->step_buffers = step_buffers(e, net, &reduce_slot, &out->collective_scratch);
    size_t own;
    out->node_shared = node_resident(e, reduce_slot, &own);
    size_t step = out->model_state + out->node_shared + out->step_buffers + out->collective_scratch,
           most = out->build;
    if (out->setup > most) most = out->setup;
    /* A machine holds each page of node memory once: a rank's share of it
     * in place of all it maps. */
    size_t step_pss = step - out->node_shared - own + (e->node.on ? e->node_bytes / (size_t)e->node.at.ranks : 0),
           most_pss = most > step_pss ? most : step_pss;
    if (step > most) most = step;
    out->peak = fixed.rss + out->activations + most;
    out->pss = fixed.pss + out->activations + most_pss;
}
