/* fsdp_engine.h: the sharding engine behind the hooks.
 *
 * Each group owns two flat buffers, one for its trainable and one for its
 * frozen parameters.  Under `full` every rank keeps an equal, zero-padded
 * shard of each and gathers the whole buffer only while the group computes;
 * Darknet's layer pointers are re-pointed into the gathered buffer and set
 * to NULL when it is freed.  Gradients go to a fresh full-size buffer that is
 * reduce-scattered into the shard after the group's last backward layer,
 * and the optimizer steps the shard as soon as that reduce completes, so a
 * rank holds one group's reduced gradient at a time, not the whole model's;
 * momentum and Adam moments live beside the shard.  `grad_op` keeps
 * parameters replicated and gathers once after the update; `none` all-reduces
 * gradients and updates every replica.
 *
 * The engine runs the step plan's operations (fsdp_stepplan.h) on the
 * groups' flats (fsdp_flat.h) and gradients (fsdp_grad.h), whose own tables
 * say what each call does.  Its own state across a step:
 *
 *   state         set by                         cleared by
 *   rs_inflight   reduce, where the backend      the next reduce, or the
 *                 started the reduce-scatter     update's settle (which step
 *                 (at most one group at a time)  the group)
 *   g->updated    the group's optimizer step,    the update's step op
 *                 in backward or at the update   (at most one step per
 *                                                group per update)
 *   args_set      the update's first reduce      the update
 *                 (step.args: what
 *                 update_network will pass)
 *
 * Where the plan names an operation that the flat's state makes
 * unnecessary, the engine skips it, and these are the only such places:
 * a prefetch of a flat not SHARDED (still gathered from its forward, or
 * under reshard_after_forward=0), a reshard of a flat not GATHERED (the
 * update gives back whatever is still gathered: the root, a group kept for
 * a backward that never came; frozen parameters backward did not gather).
 * The flat itself keeps a GATHERED flat on unshard, moving nothing
 * (fsdp_flat.h: the root stays gathered through the step).
 *
 * What the engine counts and records (the tally, the timeline) its
 * observers do: it reports each operation's beginning and end, the bytes
 * moved for each group, and the waits of exchanges started earlier
 * (fsdp_observer.h). */
#ifndef FSDP_ENGINE_H
#define FSDP_ENGINE_H

#include <stdint.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_timeline.h"
#include "fsdp_backend.h"
#include "fsdp_bn.h"
#include "fsdp_cfg.h"
#include "fsdp_flat.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"
#include "fsdp_stepplan.h"
#include "fsdp_tally.h"

/* The engine, opaque outside engine/ (fsdp_engine_impl.h).  Its
 * lifetime: created at plugin start with host control and host memory's
 * collectives; given its options and, on GPU runs, its device collectives
 * before the network is built; sharding from network_built to
 * network_free; freed at finish. */
typedef struct fsdp_engine fsdp_engine;

fsdp_status fsdp_engine_create(fsdp_ctl *ctl, fsdp_coll *coll, fsdp_engine **out);
/* NULL is fine. */
void fsdp_engine_free(fsdp_engine *e);

/* What the run asks of the engine, before the network is built. */
typedef struct fsdp_engine_options {
    int staged;      /* this rank builds only its slices of the layers (fsdp_stage.h) */
    int acts;        /* activations of layers without backward, and the delta pool (fsdp_acts.h) */
    int recompute;   /* recompute=1 may apply (training commands) */
} fsdp_engine_options;
void fsdp_engine_set_options(fsdp_engine *e, const fsdp_engine_options *o);
/* -fsdp-plan's: predict a strategy the cfg may not name (after parsing it). */
void fsdp_engine_set_strategy(fsdp_engine *e, fsdp_strategy strategy);
/* The buffer collectives, replaced before the network is built (a device
 * backend, the watchdog's wrapper). */
void fsdp_engine_set_coll(fsdp_engine *e, fsdp_coll *coll);

fsdp_ctl *fsdp_engine_ctl(const fsdp_engine *e);
fsdp_coll *fsdp_engine_coll(const fsdp_engine *e);
/* The sharded network (NULL before network_built). */
network *fsdp_engine_net(const fsdp_engine *e);
const fsdp_cfg *fsdp_engine_cfg(const fsdp_engine *e);
const fsdp_mem_ctx *fsdp_engine_mem(const fsdp_engine *e);
const fsdp_tally *fsdp_engine_tally(const fsdp_engine *e);
const fsdp_bn *fsdp_engine_bn(const fsdp_engine *e);
const fsdp_layout_plan *fsdp_engine_layout(const fsdp_engine *e);
const fsdp_step_plan *fsdp_engine_step_plan(const fsdp_engine *e);
int fsdp_engine_steps(const fsdp_engine *e);
/* Rank 0 with -fsdp-log-events: record each step's operations, at most CAP
 * a step (fsdp_timeline.h); the log writes and clears them. */
fsdp_status fsdp_engine_log_events(fsdp_engine *e, int cap);
fsdp_timeline *fsdp_engine_timeline(fsdp_engine *e);
int fsdp_engine_node_on(const fsdp_engine *e);
uint64_t fsdp_engine_plan_hash(const fsdp_engine *e);
/* Group g's trainable and frozen parameters. */
void fsdp_engine_group_params(const fsdp_engine *e, int g, size_t *train, size_t *frozen);
/* Whether group g recomputes its activations (recompute=1). */
int fsdp_engine_group_recomputes(const fsdp_engine *e, int g);
/* Every collective byte counted so far (docs/DESIGN.md, "Log file"). */
uint64_t fsdp_engine_bytes_moved(const fsdp_engine *e);

/* The flats, for checkpoints: 2 per group (trainable, frozen), in group
 * order; what the flats see of the engine. */
int fsdp_engine_nflats(const fsdp_engine *e);
fsdp_flat *fsdp_engine_flat(fsdp_engine *e, int i);
const fsdp_flat_ctx *fsdp_engine_flat_ctx(const fsdp_engine *e);

/* Memory beside the model state, for the stats file. */
typedef struct fsdp_engine_memory {
    size_t pool_footprint;     /* the host pool's most held at once (step buffers) */
    size_t node_bytes;         /* node memory every rank maps */
    uint64_t stage_gather_bytes;
    int acts_transient, deltas_pooled, recompute_groups;   /* layers, layers, groups */
    size_t acts_bytes, delta_pool_bytes, recompute_bytes;
} fsdp_engine_memory;
fsdp_engine_memory fsdp_engine_memory_of(const fsdp_engine *e);

/* Hook bodies (plugin_main.c adapts them to dn_hooks). */
int fsdp_on_cfg_option(fsdp_engine *e, const char *file, int line, int layer, const char *key, const char *val);
fsdp_status fsdp_on_layer_built(fsdp_engine *e, network *net, int i);
fsdp_status fsdp_on_load_layer(fsdp_engine *e, network *net, int i, dn_when when);
fsdp_status fsdp_on_network_built(fsdp_engine *e, network *net);
/* resize_network() reallocated every output and delta: the engine's own
 * again. */
fsdp_status fsdp_on_network_resized(fsdp_engine *e, network *net);
fsdp_status fsdp_on_forward(fsdp_engine *e, network *net, int i, dn_when when);
/* *skip = 1 for layers that need no backward (Darknet then skips them). */
fsdp_status fsdp_on_backward(fsdp_engine *e, network *net, int i, dn_when when, int *skip);
/* Batch norm's statistics across ranks (sync_bn=1), or a recomputed
 * group's replayed (fsdp_recompute.h). */
fsdp_status fsdp_on_bn_sync(fsdp_engine *e, network *net, int layer, dn_bn_what what, float *x, int channels,
                            int count);
fsdp_status fsdp_on_update(fsdp_engine *e, network *net, const update_args *a);
fsdp_status fsdp_on_train_step(fsdp_engine *e, network *net, float *loss);
fsdp_status fsdp_on_save_layer(fsdp_engine *e, network *net, int i, dn_when when);
/* At a save's end, before anything of it is kept (the checkpoint): batch
 * norm's rolling statistics agree across ranks (fsdp_bn.h). */
fsdp_status fsdp_on_save_check(fsdp_engine *e, network *net);
fsdp_status fsdp_on_save_end(fsdp_engine *e, network *net, const char *file);
/* Gives Darknet a network without plugin-owned pointers (before free_network). */
fsdp_status fsdp_on_network_free(fsdp_engine *e, network *net);

/* The watchdog's words for a collective in flight on buf: the group whose
 * buffer it moves, and the step. */
void fsdp_engine_describe_wait(const fsdp_engine *e, const void *buf, char *out, size_t n);

/* Why shard_node_shared=1 cannot apply to this run, or NULL where it can:
 * `full` on host memory where the backend maps node memory (every rank on
 * one machine). */
const char *fsdp_engine_node_shared_unfit(const fsdp_engine *e);

#endif
