#include <malloc.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_engine_impl.h"
#include "fsdp_deltas.h"
#include "fsdp_hash.h"
#include "fsdp_memplan.h"
#include "fsdp_optim.h"

static fsdp_status finish_reduce(fsdp_engine *e);


fsdp_status fsdp_engine_create(fsdp_ctl *ctl, fsdp_coll *coll, fsdp_engine **out)
{
    fsdp_engine *e = calloc(1, sizeof *e);
    *out = e;
    if (!e) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    e->ctl = ctl;
    e->coll = coll;
    e->mem.align = 1;
    fsdp_cfg_init(&e->cfg);
    fsdp_engine_watch_init(e);
    return FSDP_OK;
}

void fsdp_engine_set_options(fsdp_engine *e, const fsdp_engine_options *o)
{
    /* Staged builds gather the slices over host memory's collectives, the
     * ones the engine was made with. */
    e->dn.stage = (fsdp_stage){ .enabled = o->staged, .rank = e->ctl->rank, .world = e->ctl->world, .coll = e->coll };
    e->dn.acts.enabled = e->dn.deltas.enabled = o->acts;
    e->dn.recompute.enabled = o->recompute;
}

void fsdp_engine_set_coll(fsdp_engine *e, fsdp_coll *coll) { e->coll = coll; }
fsdp_status fsdp_engine_log_events(fsdp_engine *e, int cap) { return fsdp_tl_open(&e->tl, cap); }
fsdp_timeline *fsdp_engine_timeline(fsdp_engine *e) { return &e->tl; }
void fsdp_engine_set_strategy(fsdp_engine *e, fsdp_strategy strategy) { e->cfg.strategy = strategy; }

static void release_network(fsdp_engine *e)
{
    /* Nothing may still arrive in node memory. */
    if (e->node.on) fsdp_flat_node_settle(&e->flat);
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_grad_release(&e->flat, &e->groups[g].grad, &e->groups[g].train);
        fsdp_flat_free(&e->flat, &e->groups[g].train);
        fsdp_flat_free(&e->flat, &e->groups[g].frozen);
    }
    fsdp_acts_release(&e->dn.acts, &e->mem, e->net);
    fsdp_delta_pool_release(&e->dn.deltas, &e->mem, e->net);
    fsdp_recompute_release(&e->dn.recompute, &e->mem, e->net);
    fsdp_mem_pool_drain(&e->mem);
    e->mem.pool = NULL;
    free(e->groups);
    e->groups = NULL;
    e->ngroups = 0;
    free(e->tally.group);
    e->tally.group = NULL;
    free(e->node.terms);
    e->node = (fsdp_node){ 0 };
    fsdp_step_plan_free(&e->step_plan);
    fsdp_plan_free(&e->plan);
}

fsdp_status fsdp_on_network_free(fsdp_engine *e, network *net)
{
    if (net != e->net) return FSDP_OK;
    /* Darknet's own functions again, so nothing calls into a freed plan. */
    fsdp_frozen_uninstall(net, e->dn.orig);
    e->dn.orig = NULL;
    fsdp_status s = finish_reduce(e);
    release_network(e);   /* points every layer array it owned at NULL */
    return s;             /* e->net stays set: one network per process */
}

void fsdp_engine_free(fsdp_engine *e)
{
    if (!e) return;
    release_network(e);
    fsdp_cfg_free(&e->cfg);
    fsdp_stage_free(&e->dn.stage);
    fsdp_bn_free(&e->dn.bn);
    fsdp_tl_close(&e->tl);
    free(e);
}

int fsdp_on_cfg_option(fsdp_engine *e, const char *file, int line, int layer, const char *key, const char *val)
{
    return fsdp_cfg_option(&e->cfg, file, line, layer, key, val);
}

fsdp_status fsdp_on_layer_built(fsdp_engine *e, network *net, int i)
{
    FSDP_TRY(fsdp_acts_layer_built(&e->dn.acts, &e->cfg, net, i));
    return fsdp_stage_layer_built(&e->dn.stage, net, i);
}

fsdp_status fsdp_on_load_layer(fsdp_engine *e, network *net, int i, dn_when when)
{
    return when == DN_BEFORE ? fsdp_stage_load_begin(&e->dn.stage, net, i) : fsdp_stage_load_end(&e->dn.stage, net, i);
}

/* resize_network() reallocated every output and delta, the ones the engine
 * had dropped included (realloc of NULL): drop them again.  Weights and the
 * engine's gathered buffers are untouched by a resize. */
fsdp_status fsdp_on_network_resized(fsdp_engine *e, network *net)
{
    if (e->net != net || !e->plan.need_bwd) return FSDP_OK;
    fsdp_deltas_drop_unneeded(&e->plan, net);
    FSDP_TRY(fsdp_acts_resized(&e->dn.acts, &e->mem, net));
    FSDP_TRY(fsdp_delta_pool_resized(&e->dn.deltas, &e->mem, net));
    return fsdp_recompute_resized(&e->dn.recompute, &e->mem, net);
}

/* A recomputed group's forward replays its batch norm's global statistics
 * (fsdp_recompute.h); every other forward reduces them. */
fsdp_status fsdp_on_bn_sync(fsdp_engine *e, network *net, int layer, dn_bn_what what, float *x, int channels,
                            int count)
{
    int replayed;
    /* A recurrent layer's sub-network: not one of the run's layers, whose
     * slots its layer index would name. */
    if (!fsdp_bn_of_run(&e->dn.bn, net)) return FSDP_OK;
    FSDP_TRY(fsdp_recompute_bn_replay(&e->dn.recompute, layer, what, x, channels, &replayed));
    if (replayed) return FSDP_OK;
    FSDP_TRY(fsdp_bn_sync(&e->dn.bn, net, layer, what, x, channels, count));
    return fsdp_recompute_bn_record(&e->dn.recompute, layer, what, x, channels);
}

/* ---- what the layers above read ------------------------------------------ */

fsdp_ctl *fsdp_engine_ctl(const fsdp_engine *e) { return e->ctl; }
fsdp_coll *fsdp_engine_coll(const fsdp_engine *e) { return e->coll; }
network *fsdp_engine_net(const fsdp_engine *e) { return e->net; }
const fsdp_cfg *fsdp_engine_cfg(const fsdp_engine *e) { return &e->cfg; }
const fsdp_mem_ctx *fsdp_engine_mem(const fsdp_engine *e) { return &e->mem; }
const fsdp_tally *fsdp_engine_tally(const fsdp_engine *e) { return &e->tally; }
const fsdp_bn *fsdp_engine_bn(const fsdp_engine *e) { return &e->dn.bn; }
const fsdp_layout_plan *fsdp_engine_layout(const fsdp_engine *e) { return &e->plan; }
const fsdp_step_plan *fsdp_engine_step_plan(const fsdp_engine *e) { return &e->step_plan; }
int fsdp_engine_steps(const fsdp_engine *e) { return e->step.taken; }
int fsdp_engine_node_on(const fsdp_engine *e) { return e->node.on; }
uint64_t fsdp_engine_plan_hash(const fsdp_engine *e) { return e->plan_hash; }
int fsdp_engine_nflats(const fsdp_engine *e) { return 2 * e->ngroups; }
const fsdp_flat_ctx *fsdp_engine_flat_ctx(const fsdp_engine *e) { return &e->flat; }

void fsdp_engine_group_params(const fsdp_engine *e, int g, size_t *train, size_t *frozen)
{
    *train = e->groups[g].train.lay.params;
    *frozen = e->groups[g].frozen.lay.params;
}

int fsdp_engine_group_recomputes(const fsdp_engine *e, int g)
{
    return e->dn.recompute.group_on && e->dn.recompute.group_on[g];
}

uint64_t fsdp_engine_bytes_moved(const fsdp_engine *e)
{
    return e->tally.ag + e->tally.rs + e->tally.ar + e->dn.bn.bytes;
}

fsdp_flat *fsdp_engine_flat(fsdp_engine *e, int i)
{
    return i % 2 ? &e->groups[i / 2].frozen : &e->groups[i / 2].train;
}

fsdp_engine_memory fsdp_engine_memory_of(const fsdp_engine *e)
{
    return (fsdp_engine_memory){
        .pool_footprint = e->pool.footprint,
        .node_bytes = e->tally.node_bytes,
        .stage_gather_bytes = e->dn.stage.gather_bytes,
        .acts_transient = e->dn.acts.transient,
        .acts_bytes = fsdp_acts_bytes(&e->dn.acts),
        .deltas_pooled = e->dn.deltas.pooled,
        .delta_pool_bytes = fsdp_delta_pool_bytes(&e->dn.deltas),
        .recompute_bytes = fsdp_recompute_bytes(&e->dn.recompute),
        .recompute_groups = e->dn.recompute.ngroups_on,
    };
}

/* ---- building the sharded network --------------------------------------- */

/* A fingerprint of the network's plan: layers, their parameter counts,
 * frozen flags, groups, strategy.  Checkpoints carry it; where the ranks
 * keep the parameters (shard_node_shared) is not in it, since the parts
 * are the same either way. */
static uint64_t plan_hash(const fsdp_engine *e, const network *net)
{
    const fsdp_layout_plan *p = &e->plan;
    uint64_t h = FSDP_FNV1A_START;
    /* The layout's alignment too: a rank on the GPU and one on the host
     * would size their shards differently. */
    /* The last 0 stands where shard_node_shared once was: checkpoints
     * written without it keep their hash. */
    int v[7] = { net->n, (int)e->cfg.strategy, e->cfg.reshard_after_forward, (int)p->auto_group,
                 (int)e->mem.align, e->cfg.sync_bn, 0 };
    h = fsdp_fnv1a(h, v, sizeof v);
    for (int i = 0; i < p->nlayers; ++i) {
        int t[3] = { (int)net->layers[i].type, p->frozen[i], p->layer_group[i] };
        h = fsdp_fnv1a(h, t, sizeof t);
        h = fsdp_fnv1a(h, &p->layer_params[i], sizeof p->layer_params[i]);
    }
    for (int g = 0; g < p->ngroups; ++g) h = fsdp_fnv1a(h, p->groups[g].name, strlen(p->groups[g].name) + 1);
    return h;
}

/* Every rank must stop together: one rank's cfg error stops all of them. */
static fsdp_status agree(fsdp_engine *e, fsdp_status local, uint64_t hash)
{
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_all_ok(e->ctl, local, FSDP_ERR_CONFIG, "found an error in its cfg"));
    FSDP_TRY(fsdp_ctl_min_max_u64(e->ctl, hash, &lo, &hi));
    if (lo != hi)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s: rank %d: the ranks were given different networks "
                         "(layers, frozen flags, groups or shard keys differ); every rank needs the same cfg",
                         e->cfg.file ? e->cfg.file : "cfg", e->ctl->rank);
    return FSDP_OK;
}

static fsdp_status setup_group(fsdp_engine *e, network *net, int gi)
{
    fsdp_group *g = &e->groups[gi];
    fsdp_layout_plan *p = &e->plan;
    g->info = &p->groups[gi];
    fsdp_tensor *tt = NULL, *tf = NULL;
    int ntt = 0, ntf = 0, cap = 0;
    /* One group's layers whole at a time, from every rank's slices. */
    for (int k = 0; k < g->info->nlayers; ++k)
        FSDP_TRY(fsdp_stage_take_back(&e->dn.stage, net, g->info->layers[k]));
    for (int k = 0; k < g->info->nlayers; ++k) {
        int i = g->info->layers[k];
        fsdp_tensor t[FSDP_MAX_TENSORS];
        int nt = fsdp_layer_tensors(&net->layers[i], t);
        if (!nt) continue;
        cap += nt;
        fsdp_tensor *a = realloc(tt, (size_t)cap * sizeof *a), *b = a ? realloc(tf, (size_t)cap * sizeof *b) : NULL;
        if (!a || !b) { free(a ? a : tt); free(b ? b : tf); return fsdp_fail(FSDP_ERR_NOMEM, "out of memory"); }
        tt = a;
        tf = b;
        for (int j = 0; j < nt; ++j) {
            if (p->frozen[i]) tf[ntf++] = t[j];
            else tt[ntt++] = t[j];
        }
    }
    int sharded = e->cfg.strategy == FSDP_SHARD_FULL;
    fsdp_flat_kind train = { sharded, 1, e->cfg.strategy == FSDP_SHARD_NONE, net->adam },
                   frozen = { sharded, 0, 0, 0 };
    fsdp_status s = fsdp_flat_setup(&e->flat, &g->train, tt, ntt, train);
    if (s == FSDP_OK) s = fsdp_flat_setup(&e->flat, &g->frozen, tf, ntf, frozen);
    free(tt);
    free(tf);
    const fsdp_flat *fl[2] = { &g->train, &g->frozen };
    for (int k = 0; k < 2; ++k) {
        e->tally.model_state_bytes += fl[k]->lay.state_bytes;
        e->tally.bcast += fl[k]->lay.bcast_bytes;
    }
    return s;
}

/* Why shard_node_shared=1 cannot apply to this run, or NULL where it can:
 * `full` on host memory where the backend maps node memory (one machine,
 * or several running the same number of ranks each). */
const char *fsdp_engine_node_shared_unfit(const fsdp_engine *e)
{
    return e->cfg.strategy != FSDP_SHARD_FULL ? "it applies to shard=full"
           : e->ctl->world == 1 ? "a world of one gathers nothing"
           : e->mem.device ? "GPU runs keep parameters in device memory"
           : !fsdp_coll_maps_node(e->coll) ? "the ranks share no memory (FSDP_SHM=0, or machines running "
                                            "different numbers of ranks)"
           : NULL;
}

/* Whether shard_node_shared=1 is in effect where it fits (the default
 * fsdp_cfg_keys.c prints: keep the two alike): as the cfg says,
 * or, where it leaves the key out, when every rank shares one machine (the
 * same bytes as the copying path, faster).  On several machines it is
 * hybrid sharding, whose sums go machine by machine: asked for only. */
static int node_shared_wanted(const fsdp_engine *e)
{
    if (e->cfg.node_shared_set) return e->cfg.node_shared;
    return fsdp_coll_node_layout(e->coll).machines == 1;
}

/* shard_node_shared=1: every sharded flat moves into one region of node
 * memory, each rank copying in its own parts (on several machines, and
 * sending them to its peers, so that each machine holds every part);
 * where the cfg asks for it and it cannot apply, rank 0 says why it is off. */
static fsdp_status share_node(fsdp_engine *e)
{
    const char *why = fsdp_engine_node_shared_unfit(e);
    if (why) {
        if (e->cfg.node_shared && e->ctl->rank == 0) fprintf(stderr, "fsdp: shard_node_shared=1 is off: %s\n", why);
        return FSDP_OK;
    }
    if (!node_shared_wanted(e)) return FSDP_OK;
    fsdp_node_layout at = fsdp_coll_node_layout(e->coll);
    size_t total = 0, slot = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        total += e->groups[g].train.lay.nfull + e->groups[g].frozen.lay.nfull;
        if (e->groups[g].train.lay.nfull > slot) slot = e->groups[g].train.lay.nfull;
    }
    if (!total) return FSDP_OK;   /* no parameters to share */
    int nterms = at.ranks > at.machines ? at.ranks : at.machines;
    const float **terms = malloc((size_t)nterms * sizeof *terms);
    if (!terms) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    e->node.terms = terms;   /* owned from here on, freed with the network */
    float *base = NULL, *slots = NULL, *reduce_slots = NULL;
    fsdp_status s = fsdp_coll_node_alloc(e->coll, total, &base);
    /* Nothing trains (a frozen model under inference): no gradient slots.
     * Reduce slots on several machines: their pages count only where a
     * gradient reduces while another accumulates in the slot. */
    int nslots = at.machines > 1 ? 2 : 1;
    if (s == FSDP_OK && slot) s = fsdp_coll_node_alloc(e->coll, slot * (size_t)at.ranks * (size_t)nslots, &slots);
    if (s == FSDP_OK && slot && nslots == 2) reduce_slots = slots + slot * (size_t)at.ranks;
    /* Each machine decides its own node memory: every machine stops when one cannot. */
    FSDP_TRY(fsdp_ctl_all_ok(e->ctl, s, FSDP_ERR_NOMEM, "had no room for node memory"));
    /* The first gather syncs. */
    e->node = (fsdp_node){ .on = 1, .at = at, .stale = 1, .grad_slots = slots, .reduce_slots = reduce_slots,
                           .slot_floats = slot, .terms = terms };
    e->tally.node_bytes = (total + slot * (size_t)at.ranks * (size_t)nslots) * sizeof(float);
    size_t off = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) {
            if (!fl[k]->lay.nt) continue;
            uint64_t sent;
            FSDP_TRY(fsdp_flat_move_to_node(&e->flat, fl[k], base + off));
            FSDP_TRY(fsdp_flat_own_written(&e->flat, fl[k], &sent));
            off += fl[k]->lay.nfull;
        }
    }
    return FSDP_OK;
}

/* shard_prefetch as the cfg says; unsaid, on where the exchanges cross
 * between machines (hierarchical), so that the link carries the next
 * group's parts while this one computes (the default fsdp_cfg_keys.c
 * prints: keep the two alike). */
static int prefetch_wanted(const fsdp_engine *e)
{
    return e->cfg.prefetch_set ? e->cfg.prefetch : e->coll->hierarchical;
}

/* shard_wire: the format of what crosses between machines, where the
 * backend's exchanges between machines go between peers; rank 0 says once
 * what it costs, or why it changes nothing. */
static void set_wire(fsdp_engine *e)
{
    fsdp_wire_format f = (fsdp_wire_format)e->cfg.wire;
    const char *name = fsdp_wire_name(f);
    int machines = e->coll->node.machines;
    if (e->coll->wire) e->coll->wire->format = f;
    if (f == FSDP_WIRE_FP32 || e->ctl->rank != 0) return;
    if (!e->coll->wire && machines <= 1 && !fsdp_coll_maps_node(e->coll))
        fprintf(stderr, "fsdp: shard_wire=%s is off: the %s backend does not tell which ranks share a machine "
                "(FSDP_SHM=0, or machines running different numbers of ranks); everything travels in fp32\n", name,
                e->coll->name);
    else if (!e->coll->wire)
        fprintf(stderr, "fsdp: shard_wire=%s changes nothing here: every rank runs on one machine\n", name);
    else
        fprintf(stderr, "fsdp: shard_wire=%s: parameters and gradient sums cross between machines as %s (%.2fx the "
                "bytes of fp32; each float within %.2g of %s): the weights are no longer exactly stock Darknet's "
                "with the %d-times batch, and still repeat byte for byte with -seed; the optimizer's parts and "
                "state, checkpoints and weights files stay fp32\n", name,
                f == FSDP_WIRE_INT8 ? "int8 in blocks of 256 floats with an fp32 scale each" : "bf16",
                (double)fsdp_wire_bytes(f, 1u << 20) / (4u << 20), fsdp_wire_error(f),
                f == FSDP_WIRE_INT8 ? "its block's largest magnitude" : "itself", e->ctl->world);
}

/* A weights file holds the optimizer's fp32 parts: while one is written,
 * what crosses between machines is fp32, and under hybrid sharding every
 * machine's copy is made exact first, and encoded again after. */
static fsdp_status wire_exact(fsdp_engine *e, int exact)
{
    fsdp_wire *w = e->coll->wire;
    if (!w || e->cfg.wire == FSDP_WIRE_FP32) return FSDP_OK;
    w->format = exact ? FSDP_WIRE_FP32 : (fsdp_wire_format)e->cfg.wire;
    if (!e->node.on || e->node.at.machines < 2) return FSDP_OK;
    FSDP_TRY(fsdp_flat_node_settle(&e->flat));
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k)
            if (fl[k]->lay.nt && fl[k]->res.in_node)
                FSDP_TRY(fsdp_coll_peer_all_gather(e->coll, fl[k]->res.node, fl[k]->lay.shard));
    }
    return fsdp_flat_node_sync(&e->flat);
}

/* What the plan cannot run, refused by name before anything is sharded. */
static fsdp_status refuse_unsupported(const fsdp_engine *e, const network *net)
{
    FSDP_TRY(fsdp_frozen_check_plan(&e->plan, &e->cfg, net));
    return fsdp_bn_check_recurrent(&(fsdp_bn_run){ e->cfg.file, e->mem.device, e->ctl->world, e->cfg.sync_bn,
                                                   e->plan.frozen }, net);
}

/* Once set up, buffers a step takes come back to a pool (fsdp_mem.h): the
 * engine's own on the host; on GPU runs the driver's device pool, which keeps
 * what a step takes, counted as the memory prediction counts it, and gives
 * the rest back. */
static fsdp_status settle_pools(fsdp_engine *e, const network *net)
{
    malloc_trim(0);
    if (!e->mem.device) {
        e->mem.pool = &e->pool;
        return FSDP_OK;
    }
    if (e->mem.no_pool) return FSDP_OK;
    size_t keep = fsdp_memplan_device_pool(e, net);
    FSDP_TRY(fsdp_mem_device_keep(&e->mem, keep));
    if (e->ctl->rank == 0)
        fprintf(stderr, "fsdp: the device pool keeps up to %.1f MB between steps (what a step takes, as the memory "
                "prediction counts it); the rest goes back to the driver\n", keep / 1e6);
    return FSDP_OK;
}

/* Where the network computes, and whether the collectives can reach it. */
static fsdp_status check_placement(fsdp_engine *e, network *net)
{
    if (e->net)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "darknet-fsdp shards one network per process, and this "
                         "command builds a second one (e.g. -gpus with several GPUs); use one per rank");
    fsdp_mem_place(&e->mem, net->gpu_index);
    if (e->mem.device && e->ctl->world > 1 && (!e->coll || e->coll->mem != FSDP_MEM_DEVICE))
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a GPU run on %d ranks needs a device backend "
                         "(NCCL, or -fsdp-backend mpi-staged)", e->ctl->world);
    if (!e->mem.device && e->coll->mem != FSDP_MEM_HOST)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "this run computes on the host (-nogpu or a CPU build); "
                         "its collectives need the MPI backend");
    return FSDP_OK;
}

/* The layout, the frozen layers' and recomputation's plans, and the step
 * plan, once every rank agrees on them. */
static fsdp_status plan_network(fsdp_engine *e, network *net)
{
    fsdp_status local = e->cfg.error;
    if (local == FSDP_OK) local = fsdp_mem_device_setup(&e->mem, net->gpu_index);
    if (local == FSDP_OK) local = fsdp_plan_build(&e->plan, &e->cfg, net);
    if (local == FSDP_OK) local = refuse_unsupported(e, net);
    if (local == FSDP_OK) local = fsdp_recompute_plan(&e->dn.recompute, &e->plan, &e->cfg, net, e->mem.device);
    if (local == FSDP_OK) e->plan_hash = plan_hash(e, net);
    /* Everything the ranks must agree on: the plan, and shard_node_shared. */
    int node_key = e->cfg.node_shared_set ? e->cfg.node_shared : -1;
    FSDP_TRY(agree(e, local, fsdp_fnv1a(e->plan_hash, &node_key, sizeof node_key)));
    e->net = net;
    e->ngroups = e->plan.ngroups;
    fsdp_step_inputs in = { &e->plan, net, e->cfg.strategy, e->cfg.reshard_after_forward,
                            prefetch_wanted(e) && fsdp_coll_starts_all_gather(e->coll), e->dn.recompute.group_on };
    return fsdp_step_plan_build(&e->step_plan, &in);
}

/* Every group's flats, from Darknet's arrays (which they free). */
static fsdp_status build_groups(fsdp_engine *e, network *net)
{
    /* A staged build gathers every layer from the same slices on every rank. */
    e->flat = (fsdp_flat_ctx){ &e->mem, e->ctl, e->coll, e->dn.stage.enabled, &e->node, &e->tl };
    e->groups = calloc((size_t)e->ngroups, sizeof *e->groups);
    e->tally.group = calloc((size_t)e->ngroups, sizeof *e->tally.group);
    if (!e->groups || !e->tally.group) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < net->n; ++i) fsdp_layer_free_darknet_optimizer(&net->layers[i]);
    for (int g = 0; g < e->ngroups; ++g) FSDP_TRY(setup_group(e, net, g));
    fsdp_stage_free(&e->dn.stage);
    return FSDP_OK;
}

/* What the engine does to the layers beside their parameters (dn/). */
static fsdp_status attach_layers(fsdp_engine *e, network *net)
{
    fsdp_engine_dn *d = &e->dn;
    fsdp_deltas_drop_unneeded(&e->plan, net);
    FSDP_TRY(fsdp_acts_setup(&d->acts, &e->plan, &e->mem, net));
    FSDP_TRY(fsdp_delta_pool_setup(&d->deltas, &e->plan, &e->mem, net));
    FSDP_TRY(fsdp_recompute_setup(&d->recompute, &e->mem, net, &d->deltas));
    FSDP_TRY(fsdp_frozen_install(&e->plan, net, &d->orig));
    return fsdp_bn_attach(&d->bn, net, e->ctl, e->coll, &e->mem, &e->plan);
}

/* Rank 0's start-up lines: the model's size, the groups the cfg left to
 * the plugin, the groups that recompute. */
static void say_built(const fsdp_engine *e)
{
    size_t trainable = 0, frozen = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        trainable += e->groups[g].train.lay.params;
        frozen += e->groups[g].frozen.lay.params;
    }
    fprintf(stderr, "fsdp: world %d, shard=%s, %d groups, %zu trainable + %zu frozen parameters, "
            "%.1f MB model state per rank\n", e->ctl->world, fsdp_strategy_str(e->cfg.strategy), e->ngroups,
            trainable, frozen, e->tally.model_state_bytes / 1e6);
    if (e->plan.auto_default) {
        char acts[96] = "";
        if (e->plan.auto_acts)
            snprintf(acts, sizeof acts, " or of 1/%d of its activations (recompute=1), whichever ends first",
                     FSDP_RECOMPUTE_SEGMENTS);
        fprintf(stderr, "fsdp: the cfg names no groups, so its layers form %d groups of at least %ld "
                "parameters (a %dth of the model, at least %d)%s: a rank gathers one group at a time instead "
                "of keeping the whole model gathered; shard_auto_group=0 keeps them in one root group\n",
                e->ngroups - 1, e->plan.auto_group, FSDP_DEFAULT_GROUPS, FSDP_DEFAULT_GROUP_MIN, acts);
    }
    if (e->dn.recompute.ngroups_on)
        fprintf(stderr, "fsdp: %d of %d groups recompute their activations in backward (recompute=1): "
                "%.1f MB of activations shared between them\n", e->dn.recompute.ngroups_on, e->ngroups,
                fsdp_recompute_bytes(&e->dn.recompute) / 1e6);
}

fsdp_status fsdp_on_network_built(fsdp_engine *e, network *net)
{
    FSDP_TRY(check_placement(e, net));
    FSDP_TRY(plan_network(e, net));
    FSDP_TRY(build_groups(e, net));
    set_wire(e);
    FSDP_TRY(share_node(e));
    FSDP_TRY(attach_layers(e, net));
    FSDP_TRY(settle_pools(e, net));
    if (e->ctl->rank == 0) say_built(e);
    FSDP_CHECK(fsdp_engine_check(e));
    return FSDP_OK;
}

/* ---- the step plan's operations ---------------------------------------------- */

static fsdp_flat *flat_of(fsdp_engine *e, const fsdp_op *op)
{
    fsdp_group *g = &e->groups[op->group];
    return op->flat == FSDP_FLAT_FROZEN ? &g->frozen : &g->train;
}

/* Unshard: gather a flat for compute (backward gathers too). */
static fsdp_status unshard(fsdp_engine *e, const fsdp_op *op)
{
    uint64_t bytes;
    int prefetched = flat_of(e, op)->res.state == FSDP_FLAT_GATHERING;
    FSDP_TRY(fsdp_flat_unshard(&e->flat, flat_of(e, op), &bytes));
    if (prefetched)
        fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_WAITED, .group = op->group, .waited = FSDP_OP_PREFETCH });
    if (bytes) fsdp_engine_moved(e, op, op->group, FSDP_MOVED_GATHER, bytes);
    return FSDP_OK;
}

/* Waits for the reduce-scatter in flight, if the backend started one. */
static fsdp_status finish_reduce(fsdp_engine *e)
{
    fsdp_group *g = e->step.rs_inflight;
    e->step.rs_inflight = NULL;
    if (!g) return FSDP_OK;
    fsdp_status s = fsdp_grad_reduce_wait(&e->flat, &g->grad);
    fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_WAITED, .group = (int)(g - e->groups),
                                    .waited = FSDP_OP_REDUCE });
    return s;
}

/* The group's optimizer step on its reduced gradient (none: decay and
 * momentum alone), once per update. */
static fsdp_status update_group(fsdp_engine *e, int k, const update_args *a)
{
    fsdp_group *g = &e->groups[k];
    fsdp_flat *f = &g->train;
    FSDP_ASSERT(!g->updated, "a group steps once per update");
    g->updated = 1;
    if (!f->lay.nt) return FSDP_OK;
    FSDP_ASSERT(g->grad.state == FSDP_GRAD_NONE || g->grad.state == FSDP_GRAD_REDUCED ||
                g->grad.state == FSDP_GRAD_IN_SLOTS, "optimizer step: a gradient NONE, REDUCED or IN_SLOTS");
    const float *grad = fsdp_grad_reduced(&g->grad);
    int slots = g->grad.state == FSDP_GRAD_IN_SLOTS;
    /* Over the count placement (the memory prediction) the step moves no value. */
    int nruns = fsdp_mem_computes(&e->mem) ? f->lay.nruns : 0;
    for (int r = 0; r < nruns; ++r) {
        const fsdp_run *run = &f->lay.runs[r];
        fsdp_optim_args o = { a->learning_rate * run->owner->learning_rate_scale, a->momentum, a->decay,
                              a->batch, a->adam, a->B1, a->B2, a->eps, a->t };
        float *w = f->res.own + run->off, *m = f->opt.m + run->off, *v = f->opt.v ? f->opt.v + run->off : NULL;
        if (!slots) {
            fsdp_optim_step(e->mem.device, w, m, v, grad ? grad + run->off : NULL, run->len, run->is_weight, &o);
            continue;
        }
        /* Node slots: the reduce-scatter's sums straight into the step
         * (the optimizer is elementwise). */
        int nterms;
        const float *const *terms = fsdp_grad_slot_terms(&e->flat, &g->grad, f, run->off, &nterms);
        fsdp_optim_step_sum(w, m, v, terms, nterms, run->len, run->is_weight, &o);
    }
    /* Hybrid sharding (node memory on several machines): the updated part
     * goes to this rank's peers, an all-gather between machines. */
    uint64_t sent;
    FSDP_TRY(fsdp_flat_own_written(&e->flat, f, &sent));
    fsdp_engine_moved(e, NULL, k, FSDP_MOVED_GATHER, sent);
    fsdp_engine_moved(e, NULL, k, FSDP_MOVED_PEER, sent);
    FSDP_TRY(fsdp_grad_spent(&e->flat, &g->grad));
    if (e->cfg.strategy == FSDP_SHARD_GRAD_OP) {
        /* Replicated parameters: every rank takes every updated shard (a
         * world of one updated its replica in place).  Safe in backward: no
         * layer of the group computes again in this step. */
        if (e->ctl->world > 1)
            FSDP_TRY(fsdp_coll_all_gather(e->coll, f->res.own, f->res.full, f->lay.shard));   /* in place */
        fsdp_engine_moved(e, NULL, k, FSDP_MOVED_GATHER, f->lay.nfull * sizeof(float));
    }
    return FSDP_OK;
}

/* Waits for the reduce-scatter in flight and steps its group. */
static fsdp_status settle_reduce(fsdp_engine *e, const update_args *a)
{
    fsdp_group *g = e->step.rs_inflight;
    FSDP_TRY(finish_reduce(e));
    return g ? update_group(e, (int)(g - e->groups), a) : FSDP_OK;
}

/* The arguments update_network will pass at the end of this step
 * (network.c), for the steps the groups take in backward; the update hook
 * checks them against Darknet's own. */
static const update_args *backward_args(fsdp_engine *e, network *net)
{
    if (!e->step.args_set) {
        update_args a = { 0 };
        a.batch = net->batch * net->subdivisions * e->ctl->world;
        a.learning_rate = get_current_rate(net);
        a.momentum = net->momentum;
        a.decay = net->decay;
        a.adam = net->adam;
        a.B1 = net->B1;
        a.B2 = net->B2;
        a.eps = net->eps;
        a.t = *net->t + 1;   /* update_network counts the update before it runs */
        e->step.args = a;
        e->step.args_set = 1;
    }
    return &e->step.args;
}

/* The last micro-batch's post-backward: reduce the gradient (one
 * reduce-scatter in flight at a time) and step the optimizer on it as soon
 * as it is reduced. */
static fsdp_status reduce(fsdp_engine *e, int k, const update_args *a)
{
    fsdp_group *g = &e->groups[k];
    uint64_t rs = 0, ar = 0;
    fsdp_status s = settle_reduce(e, a);
    if (s == FSDP_OK) s = fsdp_grad_reduce(&e->flat, &g->grad, &g->train, &rs, &ar);
    /* Summed on each machine, then exchanged with the peers alone. */
    if (g->grad.state == FSDP_GRAD_IN_SLOTS && e->node.at.machines > 1)
        fsdp_engine_moved(e, NULL, k, FSDP_MOVED_PEER, rs);
    if (g->grad.state == FSDP_GRAD_REDUCING) {
        FSDP_ASSERT(!e->step.rs_inflight, "one reduce-scatter in flight at a time");
        e->step.rs_inflight = g;
    } else if (s == FSDP_OK && (g->grad.state == FSDP_GRAD_REDUCED || g->grad.state == FSDP_GRAD_IN_SLOTS)) {
        s = update_group(e, k, a);
    }
    fsdp_engine_moved(e, NULL, k, FSDP_MOVED_REDUCE_SCATTER, rs);
    fsdp_engine_moved(e, NULL, k, FSDP_MOVED_ALL_REDUCE, ar);
    return s;
}

static fsdp_status run_op_now(fsdp_engine *e, const fsdp_op *op, const update_args *a);

/* One op of the step plan on the flats, its observers told.  `a` is the
 * update's arguments where an op steps the optimizer (reduce, settle,
 * step), else NULL. */
static fsdp_status run_op(fsdp_engine *e, const fsdp_op *op, const update_args *a)
{
    fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_BEGIN, .op = op, .group = op->group });
    fsdp_status s = run_op_now(e, op, a);
    fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_END, .op = op, .group = op->group });
    return s;
}

fsdp_status fsdp_engine_run_op(fsdp_engine *e, const fsdp_op *op)
{
    return run_op(e, op, NULL);
}

static fsdp_status run_op_now(fsdp_engine *e, const fsdp_op *op, const update_args *a)
{
    /* A counting copy runs the flats' operations alone: the activations'
     * arenas are counted with the activations (fsdp_memplan.c). */
    if (e->counting && fsdp_op_on_activations(op->kind)) return FSDP_OK;
    switch (op->kind) {
    case FSDP_OP_UNSHARD: return unshard(e, op);
    case FSDP_OP_PREFETCH:
        /* A group still gathered (kept from its forward for its backward, or
         * every group under reshard_after_forward=0) needs none. */
        if (flat_of(e, op)->res.state != FSDP_FLAT_SHARDED) return FSDP_OK;
        return fsdp_flat_unshard_start(&e->flat, flat_of(e, op));
    case FSDP_OP_RESHARD:
        /* The update gives back whatever is still gathered (the root, a
         * group kept for a backward that never came); others went back
         * after their forward or backward. */
        if (flat_of(e, op)->res.state == FSDP_FLAT_GATHERED) fsdp_flat_reshard(&e->flat, flat_of(e, op));
        return FSDP_OK;
    case FSDP_OP_GRAD_POINT: return fsdp_grad_point(&e->flat, &e->groups[op->group].grad, flat_of(e, op));
    case FSDP_OP_GRAD_UNPOINT: fsdp_grad_unpoint(&e->groups[op->group].grad, flat_of(e, op)); return FSDP_OK;
    case FSDP_OP_REDUCE: return reduce(e, op->group, a);
    case FSDP_OP_SETTLE: return settle_reduce(e, a);
    case FSDP_OP_STEP: {
        fsdp_group *g = &e->groups[op->group];
        fsdp_status s = g->updated ? FSDP_OK : update_group(e, op->group, a);
        g->updated = 0;
        return s;
    }
    case FSDP_OP_ACTS_IN:
        fsdp_recompute_enter_forward(&e->dn.recompute, e->net, op->group);
        return FSDP_OK;
    case FSDP_OP_ACTS_OUT:
        fsdp_recompute_leave(&e->dn.recompute, e->net, op->group);
        return FSDP_OK;
    case FSDP_OP_RECOMPUTE: return fsdp_recompute_run(&e->dn.recompute, e->net, op->group);
    case FSDP_OP_ACTS_BACK: return fsdp_recompute_enter_backward(&e->dn.recompute, e->net, op->group);
    case FSDP_OP_KINDS: break;
    }
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "step plan: unknown operation %d", (int)op->kind);
}

static int last_micro_batch(const fsdp_engine *e, const network *net)
{
    return ((*net->seen) / ((size_t)net->batch * e->ctl->world)) % net->subdivisions == 0;
}

/* Unshards followed by prefetches (a group's flats, then the next
 * group's): the unshards' gathers start first and the prefetches' right
 * behind them, then the unshards wait, so that the link between machines
 * carries them back to back instead of idling between them.  The flats
 * pass through the states the plan's order would (an unshard's SHARDED ->
 * GATHERING -> GATHERED).  Returns the index past the prefetches, or k
 * where the ops at k are not such a run. */
static int run_ahead(fsdp_engine *e, const fsdp_op *ops, int n, int k, int training, int last, fsdp_status *s)
{
    int u = k, p;
    while (u < n && ops[u].kind == FSDP_OP_UNSHARD) ++u;
    for (p = u; p < n && ops[p].kind == FSDP_OP_PREFETCH; ++p) {}
    enum { MOST = 8 };   /* a group's two flats, a few groups at one point */
    if (u == k || p == u || u - k > MOST) return k;
    *s = FSDP_OK;
    for (int j = k; j < u && *s == FSDP_OK; ++j) {
        if (!fsdp_op_applies(&ops[j], training, last) || flat_of(e, &ops[j])->res.state != FSDP_FLAT_SHARDED) continue;
        fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_AHEAD, .op = &ops[j], .group = ops[j].group });
        *s = fsdp_flat_unshard_start(&e->flat, flat_of(e, &ops[j]));
        fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_STARTED, .op = &ops[j], .group = ops[j].group });
    }
    for (int j = u; j < p && *s == FSDP_OK; ++j)
        if (fsdp_op_applies(&ops[j], training, last)) *s = run_op(e, &ops[j], NULL);
    for (int j = k; j < u && *s == FSDP_OK; ++j)
        if (fsdp_op_applies(&ops[j], training, last)) *s = run_op(e, &ops[j], NULL);
    return p;
}

fsdp_status fsdp_engine_run_point(fsdp_engine *e, network *net, int i, fsdp_at at, int training, int last)
{
    int n;
    const fsdp_op *ops = fsdp_step_plan_at(&e->step_plan, i, at, &n);
    const update_args *a = NULL;
    for (int k = 0; k < n; ++k) {
        if (!fsdp_op_applies(&ops[k], training, last)) continue;
        fsdp_status s = FSDP_OK;
        int past = run_ahead(e, ops, n, k, training, last, &s);
        FSDP_TRY(s);
        if (past != k) {
            k = past - 1;
            continue;
        }
        /* A counting copy steps nothing, so needs no learning rate. */
        if (ops[k].kind == FSDP_OP_REDUCE && !a) a = e->counting ? &e->step.args : backward_args(e, net);
        FSDP_TRY(run_op(e, &ops[k], a));
    }
    FSDP_CHECK(fsdp_engine_check(e));
    return FSDP_OK;
}

/* The ops at layer i's point `at` that apply to this step. */
static fsdp_status run_at(fsdp_engine *e, network *net, int i, fsdp_at at)
{
    int n;
    fsdp_step_plan_at(&e->step_plan, i, at, &n);
    if (!n) return FSDP_OK;   /* most layers' points: nothing to ask */
    int last = at >= FSDP_AT_BACKWARD_BEFORE && last_micro_batch(e, net);
    return fsdp_engine_run_point(e, net, i, at, net->train, last);
}

/* ---- hooks: forward, backward ---------------------------------------------- */

fsdp_status fsdp_on_forward(fsdp_engine *e, network *net, int i, dn_when when)
{
    if (net != e->net) return FSDP_OK;
    fsdp_acts_forward(&e->dn.acts, net, i, when);
    return run_at(e, net, i, when == DN_BEFORE ? FSDP_AT_FORWARD_BEFORE : FSDP_AT_FORWARD_AFTER);
}

fsdp_status fsdp_on_backward(fsdp_engine *e, network *net, int i, dn_when when, int *skip)
{
    *skip = 0;
    if (net != e->net) return FSDP_OK;
    if (!e->plan.need_bwd[i]) {
        *skip = 1;
        return FSDP_OK;
    }
    if (when == DN_BEFORE) FSDP_TRY(fsdp_delta_pool_backward(&e->dn.deltas, net, i, when));
    FSDP_TRY(run_at(e, net, i, when == DN_BEFORE ? FSDP_AT_BACKWARD_BEFORE : FSDP_AT_BACKWARD_AFTER));
    return when == DN_AFTER ? fsdp_delta_pool_backward(&e->dn.deltas, net, i, when) : FSDP_OK;
}

/* ---- update -------------------------------------------------------------- */

/* Bit for bit: a cfg's learning_rate=nan is the same NaN both times. */
static int same_float(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

static int same_args(const update_args *a, const update_args *b)
{
    return a->batch == b->batch && same_float(a->learning_rate, b->learning_rate) &&
           same_float(a->momentum, b->momentum) && same_float(a->decay, b->decay) && a->adam == b->adam &&
           same_float(a->B1, b->B1) && same_float(a->B2, b->B2) && same_float(a->eps, b->eps) && a->t == b->t;
}

/* Node-shared groups that did not step in backward (below stopbackward)
 * wait until every rank is past its forward: no reduce-scatter tells them. */
static fsdp_status sync_late_steps(fsdp_engine *e)
{
    int late = 0;
    for (int k = 0; k < e->ngroups; ++k) late |= !e->groups[k].updated && e->groups[k].train.res.in_node;
    return late ? fsdp_flat_node_sync(&e->flat) : FSDP_OK;
}

fsdp_status fsdp_on_update(fsdp_engine *e, network *net, const update_args *a)
{
    if (e->step.args_set && !same_args(a, &e->step.args))
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "update %d: Darknet's update (learning rate %g, batch %d, t %d) "
                         "is not the one the groups took in backward (%g, %d, %d)", a->t, a->learning_rate,
                         a->batch, a->t, e->step.args.learning_rate, e->step.args.batch, e->step.args.t);
    FSDP_TRY(fsdp_engine_run_update(e, a));
    return fsdp_optim_status(e->mem.device);   /* a kernel of the step that failed */
}

fsdp_status fsdp_engine_run_update(fsdp_engine *e, const update_args *a)
{
    int n, synced = 0;
    const fsdp_op *ops = fsdp_step_plan_update(&e->step_plan, &n);
    for (int k = 0; k < n; ++k) {
        if (ops[k].kind == FSDP_OP_STEP && !synced) {
            FSDP_TRY(sync_late_steps(e));
            synced = 1;
        }
        FSDP_TRY(run_op(e, &ops[k], a));
    }
    e->step.args_set = 0;
    FSDP_CHECK(fsdp_engine_check(e));
    return FSDP_OK;
}

fsdp_status fsdp_on_train_step(fsdp_engine *e, network *net, float *loss)
{
    if (net != e->net) return FSDP_OK;
    ++e->step.taken;
    /* Page faults of the steady state: from the end of the first step on. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (e->step.taken == 1) e->tally.faults_first_step = (uint64_t)ru.ru_minflt;
    e->tally.faults_last_step = (uint64_t)ru.ru_minflt;
    if (e->ctl->world == 1) return FSDP_OK;
    double v = *loss;
    /* Its message may wait behind exchanges still on their way. */
    int ev = fsdp_tl_begin(&e->tl, "loss", -1);
    fsdp_status s = fsdp_ctl_sum_f64(e->ctl, &v, 1);
    fsdp_tl_end(&e->tl, ev, 0, 0);
    FSDP_TRY(s);
    *loss = (float)(v / e->ctl->world);
    return FSDP_OK;
}

/* ---- consolidated weights files ------------------------------------------ */

fsdp_status fsdp_on_save_layer(fsdp_engine *e, network *net, int i, dn_when when)
{
    if (net != e->net) return FSDP_OK;
    fsdp_group *g = &e->groups[e->plan.layer_group[i]];
    fsdp_flat *fl[2] = { &g->train, &g->frozen };
    int last = i == g->info->layers[g->info->nlayers - 1];
    if (when == DN_BEFORE && !e->step.saving) {
        e->step.saving = 1;
        FSDP_TRY(wire_exact(e, 1));
    }
    for (int k = 0; k < 2; ++k) {
        if (when == DN_BEFORE) {
            uint64_t bytes;
            FSDP_TRY(fsdp_flat_save_begin(&e->flat, fl[k], &bytes));
            fsdp_engine_moved(e, NULL, g->info - e->plan.groups, FSDP_MOVED_SAVE, bytes);
        } else if (last) {
            fsdp_flat_save_end(&e->flat, fl[k]);
        }
    }
    return FSDP_OK;
}

fsdp_status fsdp_on_save_check(fsdp_engine *e, network *net)
{
    return fsdp_bn_check_rolling(&e->dn.bn, net);
}

fsdp_status fsdp_on_save_end(fsdp_engine *e, network *net, const char *file)
{
    if (net != e->net) return FSDP_OK;
    for (int k = 0; k < e->ngroups; ++k) {
        fsdp_flat_save_end(&e->flat, &e->groups[k].train);
        fsdp_flat_save_end(&e->flat, &e->groups[k].frozen);
    }
    if (!e->step.saving) return FSDP_OK;
    e->step.saving = 0;
    return wire_exact(e, 0);
}

void fsdp_engine_describe_wait(const fsdp_engine *e, const void *buf, char *out, size_t n)
{
    const char *group = NULL;
    for (int k = 0; buf && k < e->ngroups && !group; ++k) {
        const fsdp_group *g = &e->groups[k];
        const fsdp_flat *fl[2] = { &g->train, &g->frozen };
        for (int j = 0; j < 2; ++j)
            if (buf == fl[j]->res.full || buf == fl[j]->res.pending) group = g->info->name;
        if (buf == g->grad.buf || buf == g->grad.rs_source) group = g->info->name;
    }
    if (!e->net) snprintf(out, n, "(at start-up)");
    else if (group && !strcmp(group, FSDP_ROOT_NAME))
        snprintf(out, n, "(root group, training step %d)", e->step.taken + 1);
    else if (group) snprintf(out, n, "(group %s, training step %d)", group, e->step.taken + 1);
    else snprintf(out, n, "(training step %d)", e->step.taken + 1);
}
