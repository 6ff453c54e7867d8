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
 *                 (step_args: what
 *                 update_network will pass)
 *
 * Where the plan names an operation that the flat's state makes
 * unnecessary, the engine skips it, and these are the only such places:
 * a prefetch of a flat not SHARDED (still gathered from its forward, or
 * under reshard_after_forward=0), a reshard of a flat not GATHERED (the
 * update gives back whatever is still gathered: the root, a group kept for
 * a backward that never came; frozen parameters backward did not gather),
 * and an unshard of a GATHERED flat (fsdp_flat.h: the root stays gathered
 * through the step). */
#ifndef FSDP_ENGINE_H
#define FSDP_ENGINE_H

#include <stdint.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_acts.h"
#include "fsdp_delta_pool.h"
#include "fsdp_backend.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"
#include "fsdp_flat.h"
#include "fsdp_grad.h"
#include "fsdp_frozen.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"
#include "fsdp_recompute.h"
#include "fsdp_stepplan.h"
#include "fsdp_stage.h"
#include "fsdp_tally.h"

/* A group: the layers naming it directly, with one flat for their
 * trainable and one for their frozen parameters.  The step plan
 * (fsdp_stepplan.h) says what happens to them when; the engine runs its
 * operations over the flats' own states (fsdp_flat.h). */
typedef struct fsdp_group {
    fsdp_group_info *info;   /* from the layout */
    fsdp_flat train, frozen;
    fsdp_grad grad;          /* the trainable flat's gradient (fsdp_grad.h) */
    int updated;             /* this update's optimizer step ran, in backward (reset by the update) */
} fsdp_group;

/* The engine keeps the plan, the groups and the step; what it counts is
 * in `tally`.  Run options belong to the entry point, batch norm's state
 * to fsdp_bn.h, the prediction to fsdp_memplan.h. */
typedef struct fsdp_engine {
    fsdp_ctl *be;            /* host control: setup, checks, losses */
    fsdp_coll *dbe;          /* buffer collectives: the host's (MPI, self) on host runs, NCCL / staged on GPU runs */
    fsdp_mem_ctx mem;        /* where parameter buffers live */
    fsdp_flat_ctx flat;      /* what the flats see of the engine: mem, be, dbe */
    fsdp_mem_pool pool;      /* host buffers kept for reuse (mem.pool points here) */
    fsdp_cfg cfg;            /* keys of the cfg being parsed: every setting, once */
    fsdp_stage stage;        /* this rank's slices of the layers as Darknet builds them */
    fsdp_acts acts;          /* activations of the layers that need no backward */
    fsdp_delta_pool deltas;  /* deltas that live only through backward */
    fsdp_recompute rc;       /* activations of the groups that recompute them (recompute=1) */
    network *net;            /* the sharded network (one per process) */
    fsdp_layout_plan plan;
    fsdp_step_plan step_plan;    /* one step's operations, per layer and hook point */
    uint64_t plan_hash;      /* what every rank agreed on; checkpoints carry it */
    fsdp_group *groups;
    int ngroups;
    fsdp_layer_fns *orig;    /* per layer: Darknet's own functions, under the frozen wrappers */
    fsdp_node node;          /* shard_node_shared=1 in effect when node.on (fsdp_flat.h) */
    size_t node_bytes;       /* node memory every rank maps: parameters and gradient slots */
    int steps;
    fsdp_group *rs_inflight; /* the group whose reduce-scatter is not yet waited for */
    int args_set;            /* step_args holds this update's arguments */
    update_args step_args;   /* as update_network will pass them, computed in backward */
    fsdp_tally tally;
    int counts;              /* a copy over the count placement (fsdp_memplan.c): flats' operations only */
} fsdp_engine;

fsdp_status fsdp_engine_init(fsdp_engine *e, fsdp_ctl *be, fsdp_coll *dbe);
void fsdp_engine_free(fsdp_engine *e);

/* Hook bodies (plugin_main.c adapts them to dn_hooks). */
int fsdp_on_cfg_option(fsdp_engine *e, const char *file, int line, int layer, const char *key, const char *val);
fsdp_status fsdp_on_network_built(fsdp_engine *e, network *net);
fsdp_status fsdp_on_forward(fsdp_engine *e, network *net, int i, dn_when when);
/* *skip = 1 for layers that need no backward (Darknet then skips them). */
fsdp_status fsdp_on_backward(fsdp_engine *e, network *net, int i, dn_when when, int *skip);
fsdp_status fsdp_on_update(fsdp_engine *e, network *net, const update_args *a);
fsdp_status fsdp_on_train_step(fsdp_engine *e, network *net, float *loss);
fsdp_status fsdp_on_save_layer(fsdp_engine *e, network *net, int i, dn_when when);
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
