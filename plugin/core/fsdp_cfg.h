/* fsdp_cfg.h: the plugin's cfg keys (see docs/DESIGN.md, "cfg keys"), read from
 * Darknet's cfg_option hook with their file and line. */
#ifndef FSDP_CFG_H
#define FSDP_CFG_H

#include "fsdp.h"

/* The defaults fsdp_cfg_init applies and -fsdp-help prints. */
#define FSDP_CFG_DEFAULT_RESHARD 1
#define FSDP_CFG_DEFAULT_SYNC_BN 1

typedef enum { FSDP_SHARD_FULL = 0, FSDP_SHARD_GRAD_OP, FSDP_SHARD_NONE } fsdp_strategy;

const char *fsdp_strategy_str(fsdp_strategy s);

typedef struct fsdp_layer_cfg {
    int frozen;
    int frozen_line;  /* where frozen was given, for errors */
    char *group;      /* NULL: the root group */
    int group_line;   /* where shard_group was given, for errors */
    int recompute;    /* recompute=1: its group recomputes its activations in backward */
    int recompute_line;
} fsdp_layer_cfg;

typedef struct fsdp_cfg {
    char *file;
    fsdp_strategy strategy;
    int reshard_after_forward;
    int prefetch;
    int prefetch_set;          /* the cfg names shard_prefetch (either value) */
    int node_shared;           /* shard_node_shared=1 */
    int node_shared_set;       /* the cfg names shard_node_shared (either value) */
    int wire;                  /* shard_wire: an fsdp_wire_format */
    long auto_group;           /* 0: off */
    int auto_group_set;        /* the cfg names shard_auto_group (0 included) */
    int sync_bn;               /* batch norm on the global batch statistics (default 1) */
    int recompute;             /* [net] recompute=1: every group that can recomputes */
    int recompute_line;
    fsdp_layer_cfg *layers;    /* grown as layers are seen */
    int nlayers;
    int cap;
    fsdp_status error;         /* the first error seen; parsing goes on */
} fsdp_cfg;

void fsdp_cfg_init(fsdp_cfg *c);
void fsdp_cfg_free(fsdp_cfg *c);
/* One cfg option.  Returns 1 if the key is the plugin's (claimed), 0 if not.
 * A bad key or value is reported as "file:line: what" and remembered in
 * c->error; the caller stops the run once parsing is over. */
int fsdp_cfg_option(fsdp_cfg *c, const char *file, int line, int layer,
                    const char *key, const char *val);
/* The plugin's keys, with one line of help each (fsdp_cfg_keys.c). */
/* Where a key may stand: a layer's section, [net], or both (a mask). */
typedef enum { FSDP_KEY_LAYER = 1, FSDP_KEY_NET = 2, FSDP_KEY_BOTH = 3 } fsdp_key_where;
typedef struct fsdp_cfg_key {
    const char *name;
    fsdp_key_where where;
    const char *values;   /* for help: "0|1", "N", ... */
    const char *dflt;     /* what holds where the cfg leaves the key out */
    const char *help;     /* where the key stands in both: what it means in a layer, then in [net] */
} fsdp_cfg_key;
extern const fsdp_cfg_key fsdp_cfg_keys[];
extern const int fsdp_ncfg_keys;
/* The key named NAME, or NULL. */
const fsdp_cfg_key *fsdp_cfg_key_find(const char *name);
/* "a, b, c": the keys of [net] or of layers, for error messages. */
const char *fsdp_cfg_keys_known(fsdp_key_where where);

/* Deepest nesting of a shard_group name (levels). */
#define FSDP_MAX_GROUP_DEPTH 64
/* Whether NAME is a valid dotted group name. */
int fsdp_group_name_valid(const char *name);

#endif
