/* fsdp_groups.h: the tree of shard groups built from `shard_group=a.b.c`
 * keys, its validation, and which layers need a backward pass. */
#ifndef FSDP_GROUPS_H
#define FSDP_GROUPS_H

#include "fsdp.h"
#include "fsdp_cfg.h"
#include "darknet.h"

#define FSDP_ROOT_NAME "(root)"

typedef struct fsdp_group_info {
    char *name;            /* full dotted name; FSDP_ROOT_NAME for the root */
    int parent;            /* -1 for the root (group 0) */
    int *layers;           /* direct layers, ascending */
    int nlayers;
    int span_first, span_last;   /* over the group and its descendants; -1 if empty */
    int line;              /* cfg line of its first shard_group key, for errors */
} fsdp_group_info;

typedef struct fsdp_layout_plan {
    fsdp_group_info *groups;   /* the root is 0; a parent always comes before its children */
    int ngroups;
    int *layer_group;        /* direct group of each layer */
    unsigned char *trainable; /* has parameters and is not frozen */
    unsigned char *frozen;
    unsigned char *need_bwd;  /* trains, or a trainable layer upstream feeds it */
    size_t *layer_params;     /* parameter floats per layer */
    int nlayers;
    long auto_group;          /* groups auto0, auto1, ... of at least this many parameters; 0: none */
    int auto_default;         /* chosen by the plugin: the cfg names no group (fsdp_plan_default_groups) */
    size_t auto_acts;         /* automatic groups also end at this many activation bytes; 0: not */
} fsdp_layout_plan;

/* A cfg that names no shard_group and no shard_auto_group gets groups of
 * consecutive layers of at least a FSDP_DEFAULT_GROUPS-th of the model's
 * parameters, and at least FSDP_DEFAULT_GROUP_MIN: a rank then gathers one
 * group at a time, not the model (one root group stays gathered through the
 * step).  A model of fewer than two such groups stays in the root group,
 * unless [net] says recompute=1: groups then end by activations too. */
#define FSDP_DEFAULT_GROUPS 16
#define FSDP_DEFAULT_GROUP_MIN 1000000

/* Under [net] recompute=1, automatic groups also end once their layers'
 * activations (output, delta, batch norm's x and x_norm) reach a
 * FSDP_RECOMPUTE_SEGMENTS-th of the network's: a recomputed group's
 * activations are what a rank holds at once while it runs again, so groups
 * made by parameters alone put a network's high-resolution layers, most of
 * its activations and few of its parameters, into one group. */
#define FSDP_RECOMPUTE_SEGMENTS 8

/* Builds the plan for net from the cfg keys: groups (including automatic
 * ones for shard_auto_group), spans, and the backward analysis.  Reports
 * crossing spans as "file:line: ..." and returns FSDP_ERR_CONFIG. */
fsdp_status fsdp_plan_build(fsdp_layout_plan *p, const fsdp_cfg *cfg, network *net);
void fsdp_plan_free(fsdp_layout_plan *p);
/* Whether layer i needs a backward pass as far as the layers below it tell:
 * it trains, or one of its inputs needs one (need[] for the layers below
 * i).  The plan adds Darknet's stopbackward; fsdp_acts.h asks while
 * building. */
int fsdp_layer_needs_backward(const network *net, int i, int trainable, const unsigned char *need);
/* Whether group a is b or one of b's ancestors. */
int fsdp_group_is_ancestor(const fsdp_layout_plan *p, int a, int b);

#endif
