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
 * gradients and updates every replica. */
#ifndef FSDP_ENGINE_H
#define FSDP_ENGINE_H

#include <stdint.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_acts.h"
#include "fsdp_backend.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"
#include "fsdp_hosts.h"
#include "fsdp_flat.h"
#include "fsdp_frozen.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"
#include "fsdp_memplan.h"
#include "fsdp_stage.h"

/* A group: the layers naming it directly, with one flat for their
 * trainable and one for their frozen parameters.  The engine drives it
 * through phases named after the step (unshard for forward, reshard after
 * it, pre- and post-backward, the update), each a group-level operation in
 * fsdp_engine.c over the flats' own states (fsdp_flat.h). */
typedef struct fsdp_group {
    fsdp_group_info *info;   /* from the plan */
    fsdp_flat train, frozen;
    int bwd_hi, bwd_lo;      /* highest and lowest direct layer needing backward; -1: none */
    int frozen_bwd;          /* a frozen direct layer needs backward (gather frozen then) */
    int keep_after_forward;  /* stays gathered from forward to backward: the root, or reshard_after_forward=0 */
    int updated;             /* this update's optimizer step ran, in backward (reset by the update) */
    uint64_t ag_bytes, rs_bytes, ar_bytes, backward_gathers;
    uint64_t bn_bytes;       /* synchronized batch norm of its layers (fsdp_bn.h) */
} fsdp_group;

/* After a group's forward span, whether its trainable and its frozen
 * parameters stay gathered for its backward (training: net->train). */
static inline int fsdp_group_keeps_train(const fsdp_group *g, int training)
{
    return training && g->bwd_hi >= 0 && g->keep_after_forward;
}
static inline int fsdp_group_keeps_frozen(const fsdp_group *g, int training)
{
    return fsdp_group_keeps_train(g, training) && g->frozen_bwd;
}

typedef struct fsdp_engine {
    fsdp_ctl *be;            /* host control: setup, checks, losses */
    fsdp_coll *dbe;          /* buffer collectives: the host's (MPI, self) on host runs, NCCL / staged on GPU runs */
    fsdp_mem_ctx mem;        /* where parameter buffers live */
    fsdp_flat_ctx flat;      /* what the flats see of the engine: mem, be, dbe */
    fsdp_mem_pool pool;      /* host buffers kept for reuse (mem.pool points here) */
    fsdp_cfg cfg;            /* keys of the cfg being parsed */
    fsdp_stage stage;        /* this rank's slices of the layers as Darknet builds them */
    fsdp_acts acts;          /* activations of the layers that need no backward */
    network *net;            /* the sharded network (one per process) */
    fsdp_layout_plan plan;
    fsdp_group *groups;
    int ngroups;
    int *next_forward;       /* per layer: the group whose span starts next after it (prefetch), or -1 */
    int *next_backward;      /* per layer: the group whose backward comes next below it, or -1 */
    fsdp_layer_fns *orig;    /* per layer: Darknet's own functions, under the frozen wrappers */
    int steps;
    uint64_t faults_first_step, faults_last_step;   /* minor page faults at the end of step 1 and of the last */
    int prefetch;            /* shard_prefetch=1 and the backend can start collectives */
    fsdp_node node;          /* shard_node_shared=1 in effect when node.on (fsdp_flat.h) */
    size_t node_bytes;       /* node memory every rank maps: parameters and gradient slots */
    fsdp_group *rs_inflight; /* the group whose reduce-scatter is not yet waited for */
    int args_set;            /* step_args holds this update's arguments */
    update_args step_args;   /* as update_network will pass them, computed in backward */
    uint64_t bytes_ag, bytes_rs, bytes_ar, bytes_bcast, bytes_ckpt;
    size_t model_state_bytes;
    size_t fixed_bytes;      /* resident before the network was built (the process, libraries, MPI) */
    fsdp_mem_prediction predicted;   /* host runs, from fsdp_on_network_built on; peak 0 otherwise */
    uint64_t plan_hash;      /* what every rank agreed on; checkpoints carry it */
    int checkpoint;          /* -fsdp-checkpoint: each rank saves its shards beside each weights file */
    int resume;              /* -fsdp-resume: each rank loads them beside the weights file given */
    char *weights_file;      /* the weights file Darknet loaded, if any */
    char *stats_path;
    int stats_written;       /* at network_free, while the groups still exist */
    uint64_t bytes_bn;       /* synchronized batch norm: all-reduces (fsdp_bn.h) */
    int bn_rolling_checks, bn_rolling_differ;   /* fsdp_bn_check_rolling */
    float *bn_pending;       /* host runs: a mean_delta reduced with the next variance_delta */
    int bn_pending_channels;
    fsdp_hosts hosts;        /* which ranks share a machine */
    double timeout_s;        /* -fsdp-timeout (0: off), for the start-up note on keepalive */
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
/* Writes the stats JSON (rank 0). */
fsdp_status fsdp_write_stats(fsdp_engine *e, const char *path);

#endif
