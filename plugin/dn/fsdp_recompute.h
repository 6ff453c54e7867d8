/* fsdp_recompute.h: activation checkpointing per group (`recompute=1`;
 * docs/DESIGN.md, "Activations").
 *
 * A recomputed group keeps, between its forward and its backward, only
 * what later layers read: the output and delta of its last layer and of
 * its layers that a route or shortcut past the group names, directly or
 * through a dropout sharing the output ("kept" layers; a delta the delta
 * pool holds lives there instead, fsdp_delta_pool.h).  Everything else its
 * layers hold (the other layers' output, x, x_norm and delta unless
 * pooled: "inner" layers; the kept ones' x and x_norm) lives
 * in one arena the plugin owns, which every recomputed group shares: it
 * holds one group's at a time, during that group's forward and again
 * during its backward.  Before its backward the group's forward runs again
 * from its kept input (the layer below it), every layer of it, with the
 * parameters gathered for backward (a last layer that a dropout after it
 * scales in place keeps everything instead, and is not run again: its
 * backward reads the scaled output); batch norm's rolling
 * statistics are put back as they were, and synchronized batch norm's
 * global mean and variance are replayed from its forward, not reduced
 * again, so the weights are bit for bit those of a run without it.
 *
 * Which groups: a group named by `recompute=1` in one of its layers, or
 * every group that can under `recompute=1` in [net].  One that can: not the
 * root (it holds the loss), no nested groups (its layers are one
 * contiguous span), every layer trainable and needing backward, each of a
 * type whose forward recomputes exactly (convolutional, connected,
 * maxpool, avgpool, shortcut, route, upsample, reorg, batchnorm,
 * activation, and dropout, replayed from the draws its forward kept): no
 * loss, no recurrent state; not starting with a dropout (it would scale
 * the layer below the group), nor ending with one that a dropout after the
 * group scales again.  A group the cfg names that cannot
 * is refused, as "file:line: ...", naming the layer and why; [net]'s
 * recompute=1 passes such groups by.
 *
 * Host or device: on a GPU run the arena, the saved rolling statistics and
 * the replayed ones are device memory (each array in the arena starting
 * 256 bytes apart, as cuDNN expects), the pointers are the *_gpu twins
 * (the host arrays stay Darknet's: the GPU computes with none of them), and
 * the forward runs again through the layers' device functions, a dropout
 * replaying its kept device draws (fsdp_recompute_ops).
 *
 * The states of the pointers the arena holds (an inner layer's output, x,
 * x_norm and delta unless pooled; a kept layer's x and x_norm; a dropout's,
 * which follow its input's): from the group's first layer's forward to its
 * last layer's forward they point into the arena, but for an inner delta,
 * NULL then (forward writes no delta); from before the group's backward
 * (the recomputation) to after it, all of them, inner deltas zeroed first.
 * Outside those they are NULL: no layer points into the arena between
 * passes (but in training the group whose backward comes first, when only
 * the root's layers run after it, keeps pointing into it from its forward
 * to its backward, and is not run again: nothing else writes the arena in
 * between; fsdp_stepplan.h), and resize_network's realloc of NULL makes fresh arrays, which
 * fsdp_recompute_resized gives back.  The
 * arena is made once (grown only by a resize): nothing is allocated per
 * step. */
#ifndef FSDP_RECOMPUTE_H
#define FSDP_RECOMPUTE_H

#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_cfg.h"
#include "fsdp_delta_pool.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"

/* Batch norm's statistics of the recomputed groups' layers, in the
 * layers' kind of memory. */
typedef struct fsdp_recompute_bn {
    float *rolling;          /* the rolling mean and variance, saved around a recomputation */
    float *replay;           /* synchronized batch norm's global mean and variance from forward */
    size_t *off;             /* per layer of a recomputed group with batch norm: its 2 * out_c in both */
    size_t floats;
} fsdp_recompute_bn;

typedef struct fsdp_recompute {
    int enabled;             /* a training command (fsdp_commands.h) */
    int n;                   /* layers */
    unsigned char *group_on; /* per group: recomputed */
    int ngroups_on;
    int ngroups;
    int *span;               /* per group: its first and last layer when recomputed, else -1 */
    unsigned char *role;     /* per layer: outside a recomputed group, inner, kept, whole or a dropout's alias */
    unsigned char *pooled;   /* per layer: its delta is the delta pool's (fsdp_delta_pool.h), not the arena's */
    size_t *off;             /* per layer of a recomputed group: its arrays' place in the arena (floats) */
    fsdp_mem_ctx mem;        /* where the layers compute: the arena's and the statistics' kind */
    const struct fsdp_recompute_ops *ops;   /* how their forward runs again there */
    float *arena;
    size_t arena_floats;     /* made */
    size_t arena_need;       /* what the layers' sizes need now */
    fsdp_recompute_bn bn;    /* batch norm's statistics kept around a recomputation */
    int running;             /* a recomputation runs: batch norm replays */
    int set_up;
} fsdp_recompute;

/* How a layer's forward runs again, on the host or on the device: the
 * host's is fsdp_recompute.c's own; the device's (fsdp_recompute_gpu.c,
 * GPU builds only) reads a layer struct's device fields, and the entry
 * point hands it over in GPU builds, before any network is built. */
typedef struct fsdp_recompute_ops {
    /* Layer k's forward, reading layer k-1's output (the network's input for
     * layer 0), as forward_network chains them. */
    void (*forward)(network *net, int k);
    /* Dropout layer k's forward replayed: its input scaled in place with the
     * draws its forward kept, not drawn anew (FSDP_ERR_CUDA: a launch failed). */
    fsdp_status (*dropout)(network *net, int k);
} fsdp_recompute_ops;
extern const fsdp_recompute_ops fsdp_recompute_gpu;
void fsdp_recompute_use_device(const fsdp_recompute_ops *ops);

/* Which groups recompute (cfg and plan), refusing a group the cfg names
 * that cannot; `device`: a GPU run (refused only without a device half). */
fsdp_status fsdp_recompute_plan(fsdp_recompute *r, const fsdp_layout_plan *p, const fsdp_cfg *cfg,
                                const network *net, int device);
/* Once the network is built and the plan made, and the delta pool set up:
 * the inner layers give their activations back (but the deltas the pool
 * holds), the arena is made. */
fsdp_status fsdp_recompute_setup(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net,
                                 const fsdp_delta_pool *deltas);

/* The step plan's activation operations on recomputed group g. */
void fsdp_recompute_enter_forward(const fsdp_recompute *r, network *net, int g);
void fsdp_recompute_leave(const fsdp_recompute *r, network *net, int g);
/* Before the group's backward: its layers point into the arena again, inner
 * deltas (those not pooled) zeroed. */
fsdp_status fsdp_recompute_enter_backward(const fsdp_recompute *r, network *net, int g);
/* The same, its parameters gathered, and its forward run again, first..last. */
fsdp_status fsdp_recompute_run(fsdp_recompute *r, network *net, int g);

/* The bn_sync hook's part: while a recomputation runs, the mean and
 * variance of layer `layer` are the ones its forward reduced (copied into
 * x, in the layers' kind of memory; *replayed = 1: nothing to reduce);
 * otherwise *replayed = 0.  After a reduction in forward, record keeps
 * them. */
fsdp_status fsdp_recompute_bn_replay(const fsdp_recompute *r, int layer, dn_bn_what what, float *x, int channels,
                                     int *replayed);
fsdp_status fsdp_recompute_bn_record(const fsdp_recompute *r, int layer, dn_bn_what what, const float *x,
                                     int channels);

/* After resize_network: gives back what it made again and grows the arena. */
fsdp_status fsdp_recompute_resized(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net);
/* Bytes the arena and the saved statistics hold. */
size_t fsdp_recompute_bytes(const fsdp_recompute *r);
/* Before free_network: no layer points into the arena; frees it and the
 * tables (enabled stays). */
void fsdp_recompute_release(fsdp_recompute *r, const fsdp_mem_ctx *m, network *net);

#endif
