/* fsdp_engine.h: the sharding engine behind the hooks.
 *
 * Each group owns two flat buffers, one for its trainable and one for its
 * frozen parameters.  Under `full` every rank keeps an equal, zero-padded
 * shard of each and gathers the whole buffer only while the group computes;
 * Darknet's layer pointers are re-pointed into the gathered buffer and set
 * to NULL when it is freed.  Gradients go to a fresh full-size buffer that is
 * reduce-scattered into the shard after the group's last backward layer;
 * momentum and Adam moments live beside the shard.  `grad_op` keeps
 * parameters replicated and gathers once after the update; `none` all-reduces
 * gradients and updates every replica. */
#ifndef FSDP_ENGINE_H
#define FSDP_ENGINE_H

#include <stdint.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_backend.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"

/* A stretch of the rank's own part of a flat buffer that one optimizer call
 * covers: one tensor's intersection with the shard. */
typedef struct fsdp_run {
    size_t off;          /* in the own buffer */
    size_t len;
    int is_weight;
    layer *owner;        /* for its learning_rate scale */
} fsdp_run;

typedef struct fsdp_flat {
    fsdp_tensor *t;      /* tensors in layout order */
    size_t *off;         /* their offsets in the full buffer */
    int nt;
    size_t count;        /* floats laid out: the tensors and, on the device, the gaps aligning them */
    size_t params;       /* the tensors' floats alone */
    size_t shard;        /* floats per rank (padded); full buffer = world * shard */
    size_t nfull;        /* floats in a full (parameter or gradient) buffer */
    size_t own_count;    /* floats this rank updates: shard, or count under `none` */
    int sharded;         /* parameters live only as shards (`full`) */
    int whole;           /* `none`: every rank updates the whole replica (all-reduce) */
    int own_in_full;     /* own points into the replicated full buffer (grad_op, none) */
    float *own;          /* this rank's parameters (shard, or the replica) */
    float *full;         /* gathered parameters; NULL when resharded */
    float *grad;         /* full-size gradient while accumulating */
    float *gown;         /* reduced gradient for own, valid when has_grad */
    float *m, *v;        /* optimizer state for own (trainable only) */
    int has_grad;
    int gathered_for_save;
    float *save_grad;    /* GPU runs: scratch gradients Darknet's pull reads while saving */
    float *pending;      /* a prefetch: full buffer being gathered, ticket gather_ticket */
    int gather_ticket;
    float *rs_source;    /* a reduce-scatter in flight reads this, ticket rs_ticket */
    int rs_ticket;
    fsdp_run *runs;
    int nruns;
} fsdp_flat;

typedef struct fsdp_group {
    fsdp_group_info *info;   /* from the plan */
    fsdp_flat train, frozen;
    int bwd_hi, bwd_lo;      /* highest and lowest direct layer needing backward; -1: none */
    int frozen_bwd;          /* a frozen direct layer needs backward (gather frozen then) */
    uint64_t ag_bytes, rs_bytes, ar_bytes, backward_gathers;
    uint64_t bn_bytes;       /* synchronized batch norm of its layers (fsdp_bn.h) */
} fsdp_group;

typedef struct fsdp_engine {
    fsdp_backend *be;        /* host collectives: setup, checks, losses */
    fsdp_backend *dbe;       /* collectives on parameter buffers: be, or NCCL / staged on GPU runs */
    fsdp_mem_ctx mem;        /* where parameter buffers live */
    fsdp_mem_pool pool;      /* host buffers kept for reuse (mem.pool points here) */
    fsdp_cfg cfg;            /* keys of the cfg being parsed */
    network *net;            /* the sharded network (one per process) */
    fsdp_layout_plan plan;
    fsdp_group *groups;
    int ngroups;
    fsdp_strategy strategy;
    int reshard;
    /* Per layer: Darknet's own forward/backward, for the frozen wrappers. */
    void (**orig_forward)(struct layer, struct network);
    void (**orig_backward)(struct layer, struct network);
#ifdef GPU
    void (**orig_forward_gpu)(struct layer, struct network);
    void (**orig_backward_gpu)(struct layer, struct network);
#endif
    int steps;
    int prefetch;            /* shard_prefetch=1 and the backend can start collectives */
    fsdp_flat *rs_inflight;  /* the one reduce-scatter not yet waited for */
    uint64_t bytes_ag, bytes_rs, bytes_ar, bytes_bcast, bytes_ckpt;
    size_t model_state_bytes;
    uint64_t plan_hash;      /* what every rank agreed on; checkpoints carry it */
    int checkpoint;          /* -fsdp-checkpoint: each rank saves its shards beside each weights file */
    int resume;              /* -fsdp-resume: each rank loads them beside the weights file given */
    char *weights_file;      /* the weights file Darknet loaded, if any */
    char *stats_path;
    int stats_written;       /* at network_free, while the groups still exist */
    uint64_t bytes_bn;       /* synchronized batch norm: all-reduces (fsdp_bn.h) */
    int bn_rolling_checks, bn_rolling_differ;   /* fsdp_bn_check_rolling */
} fsdp_engine;

fsdp_status fsdp_engine_init(fsdp_engine *e, fsdp_backend *be);
void fsdp_engine_free(fsdp_engine *e);

/* Collective: local on a rank that failed; on the others, `others` with
 * "another rank <what>" when any rank failed; FSDP_OK when none did. */
fsdp_status fsdp_engine_all_ok(fsdp_engine *e, fsdp_status local, fsdp_status others, const char *what);

/* Hook bodies (plugin_main.c adapts them to dn_hooks). */
int fsdp_on_cfg_option(fsdp_engine *e, const char *file, int line, int layer, const char *key, const char *val);
fsdp_status fsdp_on_network_built(fsdp_engine *e, network *net);
fsdp_status fsdp_on_forward(fsdp_engine *e, network *net, int i, dn_when when);
/* Returns DN_SKIP (as a positive int) for layers that need no backward. */
int fsdp_on_backward(fsdp_engine *e, network *net, int i, dn_when when);
fsdp_status fsdp_on_update(fsdp_engine *e, network *net, const update_args *a);
fsdp_status fsdp_on_train_step(fsdp_engine *e, network *net, float *loss);
fsdp_status fsdp_on_save_layer(fsdp_engine *e, network *net, int i, dn_when when);
fsdp_status fsdp_on_save_end(fsdp_engine *e, network *net, const char *file);
/* Gives Darknet a network without plugin-owned pointers (before free_network). */
fsdp_status fsdp_on_network_free(fsdp_engine *e, network *net);
/* Writes the stats JSON (rank 0). */
fsdp_status fsdp_write_stats(fsdp_engine *e, const char *path);

#endif
