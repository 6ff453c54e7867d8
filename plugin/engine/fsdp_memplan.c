#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_engine.h"
#include "fsdp_engine_impl.h"
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

fsdp_status fsdp_memplan_warm_up(fsdp_coll *coll)
{
    /* 512: past one of OpenBLAS's packing blocks in each dimension, a few
     * milliseconds of work. */
    enum { N = 512 };
    int w = coll ? coll->world : 1;
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
    if (coll && world > 1) {
        s = fsdp_coll_all_gather(coll, a + floats, a, n);
        if (s == FSDP_OK) s = fsdp_coll_reduce_scatter(coll, a, a + floats, n);
        if (s == FSDP_OK) s = fsdp_coll_all_reduce(coll, a, n);
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
    for (int k = 0; k < f->lay.nt; ++k)
        n += staged ? (size_t)world * fsdp_stage_slice(f->lay.t[k].count, world) : f->lay.t[k].count;
    return n * sizeof(float);
}

static size_t flat_slices(const fsdp_flat *f, int world)
{
    size_t n = 0;
    for (int k = 0; k < f->lay.nt; ++k) n += fsdp_stage_slice(f->lay.t[k].count, world);
    return n * sizeof(float);
}

/* A staged build (fsdp_stage.h), layer by layer: the layer whole (Adam's
 * moments too), then its slices; loading lends each layer whole arrays
 * again, one at a time. */
static size_t staged_build(const fsdp_engine *e, const network *net, int loads_weights)
{
    int world = e->ctl->world;
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
    int staged = e->dn.stage.enabled, world = e->ctl->world;
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
            size_t state = (f->opt.m ? f->lay.own_count : 0) + (f->opt.v ? f->lay.own_count : 0);
            track(&live, &peak, (long long)(f->lay.state_bytes - state * sizeof(float)));
            track(&live, &peak, -(long long)flat_arrays(f, staged, world));
            track(&live, &peak, (long long)(state * sizeof(float)));
        }
    }
    *setup = peak;
}

/* ---- one step, over the count placement ----------------------------------- */

/* A copy of the engine whose flats live in the count placement (fsdp_mem.h),
 * whose collectives are a null backend shaped like the run's and whose
 * tally starts at zero.  The engine's own operations run on it
 * (fsdp_engine_impl.h): the prediction and the run share one model of which
 * buffer each operation takes and gives back, and of the bytes it moves. */
typedef struct counting {
    fsdp_engine e;
    fsdp_mem_count count;
    float *sink;        /* what the copies' tensors point at, never read */
    fsdp_coll *coll;
} counting;

static void counting_free(counting *c)
{
    fsdp_engine *e = &c->e;
    for (int g = 0; e->groups && g < e->ngroups; ++g) {
        fsdp_flat_count_free(&e->groups[g].train);
        fsdp_flat_count_free(&e->groups[g].frozen);
    }
    free(e->groups);
    free(e->tally.group);
    free(e->node.terms);
    fsdp_mem_count_free(&e->mem);
    fsdp_coll_free(c->coll);
}

/* Node memory as set-up left it, in stand-ins. */
static fsdp_status count_node(fsdp_engine *e, const fsdp_node *real)
{
    fsdp_node *n = &e->node;
    size_t slots = n->slot_floats * (size_t)n->at.ranks;
    int nterms = n->at.ranks > n->at.machines ? n->at.ranks : n->at.machines;
    n->stale = 1;
    n->publishing = n->slot_busy = n->reduce_slot_used = 0;
    n->grad_slots = slots ? fsdp_mem_alloc(&e->mem, slots, 0) : NULL;
    n->reduce_slots = real->reduce_slots ? fsdp_mem_alloc(&e->mem, slots, 0) : NULL;
    n->terms = malloc((size_t)nterms * sizeof *n->terms);
    return n->terms ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
}

static fsdp_status counting_init(counting *c, const fsdp_engine *real)
{
    memset(c, 0, sizeof *c);
    fsdp_engine *e = &c->e;
    *e = *real;
    e->counting = 1;
    e->groups = NULL;
    e->tally = (fsdp_tally){ 0 };
    e->step.rs_inflight = NULL;
    e->step.args_set = 0;
    e->node.terms = NULL;
    e->tl = (fsdp_timeline){ 0 };   /* counting records no events */
    fsdp_engine_watch_init(e);      /* nor tells the run's other observers anything */
    fsdp_mem_count_init(&e->mem, &c->count, &e->pool, real->mem.align);
    fsdp_status s = fsdp_backend_null_like(real->coll, &c->coll);
    e->coll = c->coll;
    e->flat = (fsdp_flat_ctx){ &e->mem, real->ctl, c->coll, 1, &e->node, NULL };
    if (s == FSDP_OK && real->node.on) s = count_node(e, &real->node);
    if (s != FSDP_OK) return s;
    e->groups = calloc((size_t)e->ngroups, sizeof *e->groups);
    e->tally.group = calloc((size_t)e->ngroups, sizeof *e->tally.group);
    if (!e->groups || !e->tally.group) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int g = 0; g < e->ngroups; ++g) {
        e->groups[g].info = real->groups[g].info;
        FSDP_TRY(fsdp_flat_count_copy(&e->flat, &real->groups[g].train, &e->groups[g].train, &c->sink));
        FSDP_TRY(fsdp_flat_count_copy(&e->flat, &real->groups[g].frozen, &e->groups[g].frozen, &c->sink));
    }
    return FSDP_OK;
}

/* Micro-batches after the first take what the first took (gradients keep
 * accumulating): one standing for every middle one counts its bytes that
 * many times. */
static void weigh(fsdp_engine *e, const fsdp_group_tally *before, uint64_t times)
{
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_group_tally *t = &e->tally.group[g];
        t->ag_bytes += (t->ag_bytes - before[g].ag_bytes) * (times - 1);
        t->rs_bytes += (t->rs_bytes - before[g].rs_bytes) * (times - 1);
        t->ar_bytes += (t->ar_bytes - before[g].ar_bytes) * (times - 1);
        t->backward_gathers += (t->backward_gathers - before[g].backward_gathers) * (times - 1);
    }
}

/* One training step as the hooks run it: per micro-batch each layer's
 * forward points, then backward from the top for the layers that need it;
 * then the update.  The first micro-batch, one standing for every middle
 * one, and the last tell the peak and the bytes, however many the cfg asks
 * for (a cfg's subdivisions=99999999 once took seconds here). */
static fsdp_status count_step(fsdp_engine *e, int subdivisions)
{
    network *net = e->net;
    int n = e->step_plan.nlayers, nsub = subdivisions > 0 ? subdivisions : 1, runs = nsub > 3 ? 3 : nsub;
    fsdp_group_tally *before = malloc(((size_t)e->ngroups + 1) * sizeof *before);
    if (!before) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = FSDP_OK;
    for (int micro = 0; micro < runs && s == FSDP_OK; ++micro) {
        int last = micro == runs - 1;
        uint64_t times = runs == 3 && micro == 1 ? (uint64_t)nsub - 2 : 1;
        memcpy(before, e->tally.group, (size_t)e->ngroups * sizeof *before);
        for (int i = 0; i < n && s == FSDP_OK; ++i)
            for (int a = FSDP_AT_FORWARD_BEFORE; a <= FSDP_AT_FORWARD_AFTER && s == FSDP_OK; ++a)
                s = fsdp_engine_run_point(e, net, i, (fsdp_at)a, 1, 0);
        for (int i = n - 1; i >= 0 && s == FSDP_OK; --i) {
            if (!e->plan.need_bwd[i]) continue;
            for (int a = FSDP_AT_BACKWARD_BEFORE; a <= FSDP_AT_BACKWARD_AFTER && s == FSDP_OK; ++a)
                s = fsdp_engine_run_point(e, net, i, (fsdp_at)a, 1, last);
        }
        weigh(e, before, times);
    }
    free(before);
    return s == FSDP_OK ? fsdp_engine_run_update(e, &e->step.args) : s;
}

/* The buffer the backend keeps for the other ranks' terms of its started
 * reduce-scatters (fsdp_backend.h, scratch_terms): that many parts of the
 * largest; and between machines the one for the machines' sums of its
 * blocking ones (sums_terms).  Its other blocking sums go round by round
 * through a buffer of fixed size, made by the start-up warm-up: in the
 * fixed cost. */
static size_t collective_scratch(const fsdp_coll *real, const fsdp_coll *counted)
{
    size_t started, any;
    fsdp_backend_null_largest(counted, &started, &any);
    size_t bytes = ((size_t)real->scratch_terms * started + (size_t)real->sums_terms * any) * sizeof(float);
    /* Encoded parts between machines (shard_wire): a blocking all-to-all's
     * 2 M, and those of the started exchanges in flight at once: a
     * prefetch's two flats (M each), a reduce-scatter (2 M) and hybrid
     * sharding's updated parts (M); each the largest part's encoding. */
    size_t part = fsdp_backend_null_largest_peer(counted);
    if (any > part) part = any;
    if (real->wire && real->wire->format != FSDP_WIRE_FP32)
        bytes += 7 * (size_t)real->node.machines * fsdp_wire_bytes(real->wire->format, part);
    return bytes;
}

/* The host pool's footprint over two steps (the second finds the pool as
 * the first left it); *reduce_slot: whether a gradient reduced from the
 * reduce slot; *scratch: the backend's buffers for the terms of its sums. */
static size_t step_buffers(const fsdp_engine *real, const network *net, int *reduce_slot, size_t *scratch)
{
    counting c;
    *reduce_slot = 0;
    *scratch = 0;
    fsdp_status s = counting_init(&c, real);
    if (s == FSDP_OK) s = count_step(&c.e, net->subdivisions);
    if (s == FSDP_OK) s = count_step(&c.e, net->subdivisions);
    size_t footprint = s == FSDP_OK ? c.e.pool.footprint : 0;
    if (s == FSDP_OK) *reduce_slot = c.e.node.reduce_slot_used;
    if (s == FSDP_OK) *scratch = collective_scratch(real->coll, c.coll);
    counting_free(&c);
    return footprint;
}

size_t fsdp_memplan_device_pool(const fsdp_engine *e, const network *net)
{
    int reduce_slot;
    size_t scratch;
    return fsdp_mem_pool_keep_bytes(step_buffers(e, net, &reduce_slot, &scratch));
}

fsdp_status fsdp_memplan_step_bytes(const fsdp_engine *e, int subdivisions, fsdp_group_tally *out)
{
    counting c;
    fsdp_status s = counting_init(&c, e);
    if (s == FSDP_OK) s = count_step(&c.e, subdivisions);
    if (s == FSDP_OK) memcpy(out, c.e.tally.group, (size_t)e->ngroups * sizeof *out);
    counting_free(&c);
    return s;
}

/* The kernel maps the pages of a shared file around a read fault, 64 KB
 * aligned (fault-around), wherever they are already in memory: reading a
 * few floats of another rank's slot maps 64 KB of it. */
#define FAULT_AROUND_FLOATS ((size_t)16384)

/* A part [at, at + n) of a slot, by where it starts. */
typedef struct {
    size_t at, n;
} part;

static int part_cmp(const void *a, const void *b)
{
    const part *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Adds [lo, hi) to a union swept in order of lo: *total its floats so far,
 * *upto where it ends. */
static void sweep(size_t lo, size_t hi, size_t *upto, size_t *total)
{
    if (lo < *upto) lo = *upto;
    if (hi > lo) *total += hi - lo;
    if (hi > *upto) *upto = hi;
}

/* The floats a rank in `place` maps of its machine's gradient slots
 * (`ranks` of slot_floats each, one region): its own slot, and of every
 * other slot the parts [q * shard, (q + 1) * shard) of each trainable flat
 * that fits the slot, for each q of owners (itself, and on several
 * machines its peers), each widened to the fault-around windows that hold
 * it; the union.  Every part lies inside its slot and widening keeps the
 * order, so the slots in turn, each's parts in the order sorted once, are
 * swept in order: no sort of ranks x parts.  0 where memory runs out (the
 * prediction then says less). */
static size_t slot_floats_read(const fsdp_engine *e, const int *owners, int nowners, int place, int ranks)
{
    size_t slot = e->node.slot_floats, end = slot * (size_t)ranks, n = 0, total = 0, upto = 0;
    part *v = malloc(((size_t)nowners * (size_t)e->ngroups + 1) * sizeof *v);
    if (!v) return 0;
    for (int g = 0; g < e->ngroups; ++g) {
        const fsdp_flat *f = &e->groups[g].train;
        if (!f->lay.shard || !fsdp_flat_fits_slot(&e->flat, f)) continue;
        for (int j = 0; j < nowners; ++j) v[n++] = (part){ (size_t)owners[j] * f->lay.shard, f->lay.shard };
    }
    qsort(v, n, sizeof *v, part_cmp);
    for (int q = 0; q < ranks; ++q) {
        if (q == place) {
            sweep((size_t)q * slot, (size_t)(q + 1) * slot, &upto, &total);
            continue;
        }
        for (size_t k = 0; k < n; ++k) {
            size_t a = (size_t)q * slot + v[k].at, b = a + v[k].n;
            a -= a % FAULT_AROUND_FLOATS;
            b = (b + FAULT_AROUND_FLOATS - 1) / FAULT_AROUND_FLOATS * FAULT_AROUND_FLOATS;
            sweep(a, b < end ? b : end, &upto, &total);
        }
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
            if (!fl[k]->res.in_node) continue;
            params += fl[k]->lay.nfull;
            own += fl[k]->lay.shard;
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
    out->activations = activations(net) + fsdp_acts_bytes(&e->dn.acts) + fsdp_delta_pool_bytes(&e->dn.deltas) +
                       fsdp_recompute_bytes(&e->dn.recompute);
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
    size_t step_pss = step - out->node_shared - own + (e->node.on ? e->tally.node_bytes / (size_t)e->node.at.ranks : 0),
           most_pss = most > step_pss ? most : step_pss;
    if (step > most) most = step;
    out->peak = fixed.rss + out->activations + most;
    out->pss = fixed.pss + out->activations + most_pss;
}
