#include <malloc.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_engine.h"
#include "fsdp_deltas.h"
#include "fsdp_hash.h"
#include "fsdp_optim.h"

static fsdp_status finish_reduce(fsdp_engine *e);
static fsdp_status settle_reduce(fsdp_engine *e, const update_args *a);

fsdp_status fsdp_engine_init(fsdp_engine *e, fsdp_ctl *be, fsdp_coll *dbe)
{
    memset(e, 0, sizeof *e);
    e->be = be;
    e->dbe = dbe;
    e->mem.align = 1;
    fsdp_cfg_init(&e->cfg);
    return FSDP_OK;
}

static void release_network(fsdp_engine *e)
{
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_flat_free(&e->flat, &e->groups[g].train);
        fsdp_flat_free(&e->flat, &e->groups[g].frozen);
    }
    fsdp_acts_release(&e->acts, &e->mem, e->net);
    fsdp_mem_pool_drain(&e->mem);
    e->mem.pool = NULL;
    free(e->groups);
    e->groups = NULL;
    e->ngroups = 0;
    free(e->next_forward);
    free(e->next_backward);
    free(e->node.terms);
    e->node = (fsdp_node){ 0 };
    e->next_forward = e->next_backward = NULL;
    fsdp_plan_free(&e->plan);
}

fsdp_status fsdp_on_network_free(fsdp_engine *e, network *net)
{
    if (net != e->net) return FSDP_OK;
    /* Darknet's own functions again, so nothing calls into a freed plan. */
    fsdp_frozen_uninstall(net, e->orig);
    e->orig = NULL;
    fsdp_status s = finish_reduce(e);
    if (s == FSDP_OK && e->stats_path && e->be->rank == 0 && !e->stats_written) {
        s = fsdp_write_stats(e, e->stats_path);
        e->stats_written = 1;
    }
    release_network(e);   /* points every layer array it owned at NULL */
    return s;             /* e->net stays set: one network per process */
}

void fsdp_engine_free(fsdp_engine *e)
{
    release_network(e);
    fsdp_cfg_free(&e->cfg);
    fsdp_stage_free(&e->stage);
    fsdp_hosts_free(&e->hosts);
    free(e->stats_path);
    free(e->weights_file);
}

int fsdp_on_cfg_option(fsdp_engine *e, const char *file, int line, int layer, const char *key, const char *val)
{
    return fsdp_cfg_option(&e->cfg, file, line, layer, key, val);
}

/* ---- building the sharded network --------------------------------------- */

/* A fingerprint of everything that must agree across ranks: layers, their
 * parameter counts, frozen flags, groups, strategy. */
static uint64_t plan_hash(const fsdp_engine *e, const network *net)
{
    const fsdp_layout_plan *p = &e->plan;
    uint64_t h = FSDP_FNV1A_START;
    /* The layout's alignment too: a rank on the GPU and one on the host
     * would size their shards differently. */
    int v[7] = { net->n, (int)e->cfg.strategy, e->cfg.reshard_after_forward, (int)p->auto_group,
                 (int)e->mem.align, e->cfg.sync_bn, e->cfg.node_shared };
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
    FSDP_TRY(fsdp_ctl_all_ok(e->be, local, FSDP_ERR_CONFIG, "found an error in its cfg"));
    FSDP_TRY(fsdp_ctl_min_max_u64(e->be, hash, &lo, &hi));
    if (lo != hi)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s: rank %d: the ranks were given different networks "
                         "(layers, frozen flags, groups or shard keys differ); every rank needs the same cfg",
                         e->cfg.file ? e->cfg.file : "cfg", e->be->rank);
    return FSDP_OK;
}

static fsdp_status setup_group(fsdp_engine *e, network *net, int gi)
{
    fsdp_group *g = &e->groups[gi];
    fsdp_layout_plan *p = &e->plan;
    g->info = &p->groups[gi];
    g->bwd_hi = g->bwd_lo = -1;
    fsdp_tensor *tt = NULL, *tf = NULL;
    int ntt = 0, ntf = 0, cap = 0;
    /* One group's layers whole at a time, from every rank's slices. */
    for (int k = 0; k < g->info->nlayers; ++k)
        FSDP_TRY(fsdp_stage_take_back(&e->stage, net, g->info->layers[k]));
    for (int k = 0; k < g->info->nlayers; ++k) {
        int i = g->info->layers[k];
        fsdp_tensor t[FSDP_MAX_TENSORS];
        int nt = fsdp_layer_tensors(&net->layers[i], t);
        if (p->need_bwd[i]) {
            if (g->bwd_hi < i) g->bwd_hi = i;
            if (g->bwd_lo < 0 || i < g->bwd_lo) g->bwd_lo = i;
            if (p->frozen[i] && nt) g->frozen_bwd = 1;
        }
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
    g->keep_after_forward = gi == 0 || !e->cfg.reshard_after_forward;
    fsdp_flat_kind train = { sharded, 1, e->cfg.strategy == FSDP_SHARD_NONE, net->adam },
                   frozen = { sharded, 0, 0, 0 };
    fsdp_status s = fsdp_flat_setup(&e->flat, &g->train, tt, ntt, train);
    if (s == FSDP_OK) s = fsdp_flat_setup(&e->flat, &g->frozen, tf, ntf, frozen);
    free(tt);
    free(tf);
    const fsdp_flat *fl[2] = { &g->train, &g->frozen };
    for (int k = 0; k < 2; ++k) {
        e->model_state_bytes += fl[k]->state_bytes;
        e->bytes_bcast += fl[k]->bcast_bytes;
    }
    return s;
}

/* Why shard_node_shared=1 cannot apply to this run, or NULL where it can:
 * `full` on host memory where the backend maps node memory (every rank on
 * one machine). */
static const char *node_shared_unfit(const fsdp_engine *e)
{
    return e->cfg.strategy != FSDP_SHARD_FULL ? "it applies to shard=full"
           : e->be->world == 1 ? "a world of one gathers nothing"
           : e->mem.device ? "GPU runs keep parameters in device memory"
           : !fsdp_coll_maps_node(e->dbe) ? "the ranks share no memory (several machines, or FSDP_SHM=0)"
           : NULL;
}

/* shard_node_shared=1: every sharded flat moves into one region of node
 * memory, each rank copying in its own parts; where it cannot apply, rank
 * 0 says why it is off. */
static fsdp_status share_node(fsdp_engine *e)
{
    if (!e->cfg.node_shared) return FSDP_OK;
    const char *why = node_shared_unfit(e);
    if (why) {
        if (e->be->rank == 0) fprintf(stderr, "fsdp: shard_node_shared=1 is off: %s\n", why);
        return FSDP_OK;
    }
    size_t total = 0, slot = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        total += e->groups[g].train.nfull + e->groups[g].frozen.nfull;
        if (e->groups[g].train.nfull > slot) slot = e->groups[g].train.nfull;
    }
    if (!total) return FSDP_OK;   /* no parameters to share */
    const float **terms = malloc((size_t)e->be->world * sizeof *terms);
    if (!terms) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    e->node.terms = terms;   /* owned from here on, freed with the network */
    float *base, *slots = NULL;
    FSDP_TRY(fsdp_coll_node_alloc(e->dbe, total, &base));
    /* Nothing trains (a frozen model under inference): no gradient slots. */
    if (slot) FSDP_TRY(fsdp_coll_node_alloc(e->dbe, slot * (size_t)e->be->world, &slots));
    size_t at = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_flat *fl[2] = { &e->groups[g].train, &e->groups[g].frozen };
        for (int k = 0; k < 2; ++k) {
            if (!fl[k]->nt) continue;
            FSDP_TRY(fsdp_flat_move_to_node(&e->flat, fl[k], base + at));
            at += fl[k]->nfull;
        }
    }
    /* The first gather syncs. */
    e->node = (fsdp_node){ .on = 1, .stale = 1, .grad_slots = slots, .slot_floats = slot, .terms = terms };
    e->node_bytes = (total + slot * (size_t)e->be->world) * sizeof(float);
    return FSDP_OK;
}

/* The group whose backward comes first stays gathered from its forward to
 * its backward when only the root's own layers (the head, the loss) run in
 * between: resharding it would gather the same bytes again at once.  Under
 * reshard_after_forward=0 every group stays anyway. */
static void keep_first_backward(fsdp_engine *e, const network *net)
{
    int first = -1;
    for (int k = 1; k < e->ngroups; ++k)
        if (e->groups[k].bwd_hi >= 0 && (first < 0 || e->groups[k].bwd_hi > e->groups[first].bwd_hi)) first = k;
    if (first < 0) return;
    for (int i = e->groups[first].info->span_last + 1; i < net->n; ++i)
        if (e->plan.layer_group[i] != 0) return;
    e->groups[first].keep_after_forward = 1;
}

/* Per layer, which group prefetch gathers next: in forward the group whose
 * span starts first after the layer, in backward the group with the highest
 * backward layer below it (the lowest-numbered group on a tie). */
static fsdp_status plan_prefetch(fsdp_engine *e, int n)
{
    e->next_forward = malloc((size_t)n * sizeof *e->next_forward);
    e->next_backward = malloc((size_t)n * sizeof *e->next_backward);
    if (!e->next_forward || !e->next_backward) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; ++i) {
        int f = -1, b = -1;
        for (int k = 0; k < e->ngroups; ++k) {
            const fsdp_group *g = &e->groups[k];
            if (g->info->span_first > i && (f < 0 || g->info->span_first < e->groups[f].info->span_first)) f = k;
            if (g->bwd_hi >= 0 && g->bwd_hi < i && (b < 0 || g->bwd_hi > e->groups[b].bwd_hi)) b = k;
        }
        e->next_forward[i] = f;
        e->next_backward[i] = b;
    }
    return FSDP_OK;
}


fsdp_status fsdp_on_network_built(fsdp_engine *e, network *net)
{
    if (e->net)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "darknet-fsdp shards one network per process, and this "
                         "command builds a second one (e.g. -gpus with several GPUs); use one per rank");
#ifdef GPU
    /* Darknet's GPU path reads the *_gpu arrays: shard those, in device memory. */
    e->mem.device = net->gpu_index >= 0;
    e->mem.align = e->mem.device ? FSDP_DEVICE_ALIGN_FLOATS : 1;
#endif
    if (e->mem.device && e->be->world > 1 && (!e->dbe || e->dbe->mem != FSDP_MEM_DEVICE))
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a GPU run on %d ranks needs a device backend "
                         "(NCCL, or -fsdp-backend mpi)", e->be->world);
    if (!e->mem.device && e->dbe->mem != FSDP_MEM_HOST)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "this run computes on the host (-nogpu or a CPU build); "
                         "its collectives need the MPI backend");
    fsdp_status local = e->cfg.error;
    if (local == FSDP_OK) local = fsdp_mem_device_setup(&e->mem, net->gpu_index);
    if (local == FSDP_OK) local = fsdp_plan_build(&e->plan, &e->cfg, net);
    if (local == FSDP_OK) e->plan_hash = plan_hash(e, net);
    FSDP_TRY(agree(e, local, e->plan_hash));

    e->net = net;
    e->prefetch = e->cfg.prefetch && fsdp_coll_starts_all_gather(e->dbe);
    e->ngroups = e->plan.ngroups;
    /* A staged build gathers every layer from the same slices on every rank. */
    e->flat = (fsdp_flat_ctx){ &e->mem, e->be, e->dbe, e->stage.enabled, &e->node };
    e->groups = calloc((size_t)e->ngroups, sizeof *e->groups);
    if (!e->groups) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < net->n; ++i) fsdp_layer_free_darknet_optimizer(&net->layers[i]);
    for (int g = 0; g < e->ngroups; ++g) FSDP_TRY(setup_group(e, net, g));
    fsdp_stage_free(&e->stage);
    FSDP_TRY(share_node(e));
    keep_first_backward(e, net);
    FSDP_TRY(plan_prefetch(e, net->n));
    fsdp_deltas_drop_unneeded(&e->plan, net);
    FSDP_TRY(fsdp_acts_setup(&e->acts, &e->plan, &e->mem, net));
    FSDP_TRY(fsdp_frozen_install(&e->plan, net, &e->orig));
    malloc_trim(0);
    if (!e->mem.device) {
        /* Buffers a step takes come back to the pool (fsdp_mem.h) from now on. */
        e->mem.pool = &e->pool;
        fsdp_memplan_predict(e, net, e->fixed_bytes, &e->predicted);
    }
    if (e->be->rank == 0) {
        size_t trainable = 0, frozen = 0;
        for (int g = 0; g < e->ngroups; ++g) {
            trainable += e->groups[g].train.params;
            frozen += e->groups[g].frozen.params;
        }
        fprintf(stderr, "fsdp: world %d, shard=%s, %d groups, %zu trainable + %zu frozen parameters, "
                "%.1f MB model state per rank\n", e->be->world, fsdp_strategy_str(e->cfg.strategy), e->ngroups,
                trainable, frozen, e->model_state_bytes / 1e6);
        if (e->plan.auto_default)
            fprintf(stderr, "fsdp: the cfg names no groups, so its layers form %d groups of at least %ld "
                    "parameters (a %dth of the model, at least %d): a rank gathers one group at a time instead of "
                    "keeping the whole model gathered; shard_auto_group=0 keeps them in one root group\n",
                    e->ngroups - 1, e->plan.auto_group, FSDP_DEFAULT_GROUPS, FSDP_DEFAULT_GROUP_MIN);
        const fsdp_mem_prediction *m = &e->predicted;
        char node_note[64] = "";
        if (m->node_shared) snprintf(node_note, sizeof node_note, "node-shared %.1f + ", m->node_shared / 1e6);
        if (m->peak)
            fprintf(stderr, "fsdp: predicted peak memory per rank %.1f MB: fixed %.1f + activations %.1f + the "
                    "largest of building %.1f, sharding %.1f, and model state %.1f + %sstep buffers %.1f\n",
                    m->peak / 1e6, m->fixed / 1e6, m->activations / 1e6, m->build / 1e6, m->setup / 1e6,
                    m->model_state / 1e6, node_note, m->step_buffers / 1e6);
        /* The copying path on one machine, where the cfg never chose: the
         * faster way is one key away (it stays opt-in for what RSS shows). */
        if (!e->cfg.node_shared_set && !node_shared_unfit(e))
            fprintf(stderr, "fsdp: all %d ranks share this machine: shard_node_shared=1 would keep the parameters "
                    "here once and gather nothing (faster; docs/cfg-keys.md); shard_node_shared=0 leaves this "
                    "note out\n", e->be->world);
        fsdp_hosts_note_keepalive(&e->hosts, e->timeout_s);
    }
    return FSDP_OK;
}

/* ---- phases of a group ---------------------------------------------------- */

/* Unshard: gather a flat for compute, counting the bytes (backward gathers too). */
static fsdp_status unshard(fsdp_engine *e, fsdp_group *g, fsdp_flat *f, int backward)
{
    uint64_t bytes;
    FSDP_TRY(fsdp_flat_unshard(&e->flat, f, &bytes));
    if (!bytes) return FSDP_OK;
    g->ag_bytes += bytes;
    e->bytes_ag += bytes;
    if (backward) ++g->backward_gathers;
    return FSDP_OK;
}

/* shard_prefetch: start gathering the group that computes next while this
 * one computes.  One prefetch at a time keeps memory bounded. */
static fsdp_status prefetch(fsdp_engine *e, int k, int backward)
{
    if (k < 0) return FSDP_OK;
    fsdp_group *g = &e->groups[k];
    FSDP_TRY(fsdp_flat_unshard_start(&e->flat, &g->train));
    return !backward || g->frozen_bwd ? fsdp_flat_unshard_start(&e->flat, &g->frozen) : FSDP_OK;
}

static void reshard(fsdp_engine *e, fsdp_group *g)
{
    fsdp_flat_reshard(&e->flat, &g->train);
    fsdp_flat_reshard(&e->flat, &g->frozen);
}

/* Waits for the reduce-scatter in flight, if the backend started one. */
static fsdp_status finish_reduce(fsdp_engine *e)
{
    fsdp_group *g = e->rs_inflight;
    e->rs_inflight = NULL;
    return g ? fsdp_flat_reduce_wait(&e->flat, &g->train) : FSDP_OK;
}

static fsdp_status pre_forward(fsdp_engine *e, fsdp_group *g)
{
    FSDP_TRY(unshard(e, g, &g->train, 0));
    return unshard(e, g, &g->frozen, 0);
}

/* After the group's span: what backward needs stays where the group keeps
 * its parameters through the step; frozen parameters nobody needs in
 * backward never stay. */
static void post_forward(fsdp_engine *e, fsdp_group *g, int training)
{
    if (!fsdp_group_keeps_frozen(g, training)) fsdp_flat_reshard(&e->flat, &g->frozen);
    if (!fsdp_group_keeps_train(g, training)) fsdp_flat_reshard(&e->flat, &g->train);
}

/* Before the group's highest layer needing backward. */
static fsdp_status pre_backward(fsdp_engine *e, fsdp_group *g, int i)
{
    FSDP_TRY(unshard(e, g, &g->train, 1));
    if (g->frozen_bwd) FSDP_TRY(unshard(e, g, &g->frozen, 1));
    FSDP_TRY(fsdp_flat_grad_point(&e->flat, &g->train));
    return e->prefetch && e->cfg.reshard_after_forward ? prefetch(e, e->next_backward[i], 1) : FSDP_OK;
}

/* The group's optimizer step on its reduced gradient (none: decay and
 * momentum alone), once per update. */
static fsdp_status update_group(fsdp_engine *e, fsdp_group *g, const update_args *a)
{
    fsdp_flat *f = &g->train;
    g->updated = 1;
    if (!f->nt) return FSDP_OK;
    const float *grad = f->grad_state == FSDP_GRAD_REDUCED ? f->gown : NULL;
    int slots = f->grad_state == FSDP_GRAD_IN_SLOTS;
    for (int r = 0; r < f->nruns; ++r) {
        const fsdp_run *run = &f->runs[r];
        fsdp_optim_args o = { a->learning_rate * run->owner->learning_rate_scale, a->momentum, a->decay,
                              a->batch, a->adam, a->B1, a->B2, a->eps, a->t };
        if (!slots) {
            fsdp_optim_step(e->mem.device, f->own + run->off, f->m + run->off, f->v ? f->v + run->off : NULL,
                            grad ? grad + run->off : NULL, run->len, run->is_weight, &o);
            continue;
        }
        /* Node slots: the reduce-scatter's sums straight into the step
         * (the optimizer is elementwise). */
        fsdp_optim_step_sum(f->own + run->off, f->m + run->off, f->v ? f->v + run->off : NULL,
                            fsdp_flat_slot_terms(&e->flat, f, run->off), e->be->world, run->len, run->is_weight, &o);
    }
    fsdp_flat_own_written(&e->flat, f);
    FSDP_TRY(fsdp_flat_grad_spent(&e->flat, f));
    if (e->cfg.strategy == FSDP_SHARD_GRAD_OP) {
        /* Replicated parameters: every rank takes every updated shard (a
         * world of one updated its replica in place).  Safe in backward: no
         * layer of the group computes again in this step. */
        if (e->be->world > 1) FSDP_TRY(fsdp_coll_all_gather(e->dbe, f->own, f->full, f->shard));  /* in place */
        g->ag_bytes += f->nfull * sizeof(float);
        e->bytes_ag += f->nfull * sizeof(float);
    }
    return FSDP_OK;
}

/* Waits for the reduce-scatter in flight and steps its group. */
static fsdp_status settle_reduce(fsdp_engine *e, const update_args *a)
{
    fsdp_group *g = e->rs_inflight;
    FSDP_TRY(finish_reduce(e));
    return g ? update_group(e, g, a) : FSDP_OK;
}

static int last_micro_batch(const fsdp_engine *e, const network *net)
{
    return ((*net->seen) / ((size_t)net->batch * e->be->world)) % net->subdivisions == 0;
}

/* The arguments update_network will pass at the end of this step
 * (network.c), for the steps the groups take in backward; the update hook
 * checks them against Darknet's own. */
static const update_args *backward_args(fsdp_engine *e, network *net)
{
    if (!e->args_set) {
        update_args a = { 0 };
        a.batch = net->batch * net->subdivisions * e->be->world;
        a.learning_rate = get_current_rate(net);
        a.momentum = net->momentum;
        a.decay = net->decay;
        a.adam = net->adam;
        a.B1 = net->B1;
        a.B2 = net->B2;
        a.eps = net->eps;
        a.t = *net->t + 1;   /* update_network counts the update before it runs */
        e->step_args = a;
        e->args_set = 1;
    }
    return &e->step_args;
}

/* After the group's lowest layer needing backward: reduce the gradient
 * once per update (one reduce-scatter in flight at a time) and step the
 * optimizer on it as soon as it is reduced. */
static fsdp_status post_backward(fsdp_engine *e, fsdp_group *g, network *net)
{
    fsdp_status s = FSDP_OK;
    if (last_micro_batch(e, net)) {
        uint64_t rs = 0, ar = 0;
        const update_args *a = backward_args(e, net);
        s = settle_reduce(e, a);
        if (s == FSDP_OK) s = fsdp_flat_reduce(&e->flat, &g->train, &rs, &ar);
        if (g->train.grad_state == FSDP_GRAD_REDUCING) e->rs_inflight = g;
        else if (s == FSDP_OK && (g->train.grad_state == FSDP_GRAD_REDUCED || g->train.grad_state == FSDP_GRAD_IN_SLOTS))
            s = update_group(e, g, a);
        g->rs_bytes += rs;
        g->ar_bytes += ar;
        e->bytes_rs += rs;
        e->bytes_ar += ar;
    } else {
        fsdp_flat_grad_unpoint(&g->train);
    }
    if (g != &e->groups[0]) reshard(e, g);   /* the root keeps its parameters through the step */
    return s;
}

/* ---- hooks: forward, backward ---------------------------------------------- */

fsdp_status fsdp_on_forward(fsdp_engine *e, network *net, int i, dn_when when)
{
    if (net != e->net) return FSDP_OK;
    fsdp_acts_forward(&e->acts, net, i, when);
    /* Groups are numbered parent before child: outer groups gather first. */
    for (int k = 0; k < e->ngroups; ++k) {
        fsdp_group *g = &e->groups[k];
        if (when == DN_BEFORE && g->info->span_first == i) FSDP_TRY(pre_forward(e, g));
        if (when == DN_AFTER && g->info->span_last == i) post_forward(e, g, net->train);
    }
    return when == DN_BEFORE && e->prefetch ? prefetch(e, e->next_forward[i], 0) : FSDP_OK;
}

fsdp_status fsdp_on_backward(fsdp_engine *e, network *net, int i, dn_when when, int *skip)
{
    *skip = 0;
    if (net != e->net) return FSDP_OK;
    if (!e->plan.need_bwd[i]) {
        *skip = 1;
        return FSDP_OK;
    }
    fsdp_group *g = &e->groups[e->plan.layer_group[i]];
    if (when == DN_BEFORE) return i == g->bwd_hi ? pre_backward(e, g, i) : FSDP_OK;
    return i == g->bwd_lo ? post_backward(e, g, net) : FSDP_OK;
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

fsdp_status fsdp_on_update(fsdp_engine *e, network *net, const update_args *a)
{
    if (e->args_set && !same_args(a, &e->step_args))
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "update %d: Darknet's update (learning rate %g, batch %d, t %d) "
                         "is not the one the groups took in backward (%g, %d, %d)", a->t, a->learning_rate,
                         a->batch, a->t, e->step_args.learning_rate, e->step_args.batch, e->step_args.t);
    FSDP_TRY(settle_reduce(e, a));
    /* Groups backward never reached (below stopbackward) still decay and
     * move with their momentum, as in Darknet.  Node-shared ones wait until
     * every rank is past its forward: no reduce-scatter tells them. */
    int late = 0;
    for (int k = 0; k < e->ngroups; ++k) late |= !e->groups[k].updated && e->groups[k].train.in_node;
    if (late) FSDP_TRY(fsdp_flat_node_sync(&e->flat));
    for (int k = 0; k < e->ngroups; ++k) {
        fsdp_group *g = &e->groups[k];
        if (!g->updated) FSDP_TRY(update_group(e, g, a));
        g->updated = 0;
        /* Gathered parameters are stale now (the root's, kept through the step). */
        reshard(e, g);
    }
    e->args_set = 0;
    return fsdp_optim_status(e->mem.device);   /* a kernel of the step that failed */
}

fsdp_status fsdp_on_train_step(fsdp_engine *e, network *net, float *loss)
{
    if (net != e->net) return FSDP_OK;
    ++e->steps;
    /* Page faults of the steady state: from the end of the first step on. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (e->steps == 1) e->faults_first_step = (uint64_t)ru.ru_minflt;
    e->faults_last_step = (uint64_t)ru.ru_minflt;
    if (e->be->world == 1) return FSDP_OK;
    double v = *loss;
    FSDP_TRY(fsdp_ctl_sum_f64(e->be, &v, 1));
    *loss = (float)(v / e->be->world);
    return FSDP_OK;
}

/* ---- consolidated weights files ------------------------------------------ */

fsdp_status fsdp_on_save_layer(fsdp_engine *e, network *net, int i, dn_when when)
{
    if (net != e->net) return FSDP_OK;
    fsdp_group *g = &e->groups[e->plan.layer_group[i]];
    fsdp_flat *fl[2] = { &g->train, &g->frozen };
    int last = i == g->info->layers[g->info->nlayers - 1];
    for (int k = 0; k < 2; ++k) {
        if (when == DN_BEFORE) {
            uint64_t bytes;
            FSDP_TRY(fsdp_flat_save_begin(&e->flat, fl[k], &bytes));
            e->bytes_ckpt += bytes;
        } else if (last) {
            fsdp_flat_save_end(&e->flat, fl[k]);
        }
    }
    return FSDP_OK;
}

fsdp_status fsdp_on_save_end(fsdp_engine *e, network *net, const char *file)
{
    if (net != e->net) return FSDP_OK;
    for (int k = 0; k < e->ngroups; ++k) {
        fsdp_flat_save_end(&e->flat, &e->groups[k].train);
        fsdp_flat_save_end(&e->flat, &e->groups[k].frozen);
    }
    return FSDP_OK;
}
