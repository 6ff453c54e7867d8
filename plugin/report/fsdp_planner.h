/* fsdp_planner.h: `darknet -plugin ... -fsdp-plan WORLDS CFG`: the memory
 * each rank needs for CFG at each world (fsdp_worlds.h: N for 1..N, or a
 * list and ranges) under each strategy, without training (docs/DESIGN.md,
 * "Memory"). */
#ifndef FSDP_PLANNER_H
#define FSDP_PLANNER_H

#include <stdint.h>
#include <stdio.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_cfg.h"
#include "fsdp_memplan.h"

/* Builds CFG through the engine's own set-up on a stand-in backend (this
 * rank is rank 0): once at one rank under `full` in this process (a cfg
 * the plugin refuses says why before any table), then from one more parse
 * under each strategy at one rank and at two, each in a child process
 * (fsdp_planfan.h), whose engine at two gives every larger world's row
 * (fsdp_memplan_predict_world); prints the predictions as a markdown table
 * on out, each row as it is computed.  hooks is Darknet's table: its
 * cfg_option is pointed at the stand-in engines while CFG is read.  With budget (-fsdp-budget MB, else NULL), a second
 * table: for each world under `full`, without and with recompute=1 in
 * [net], the fewest subdivisions (the cfg's times a power of two that
 * divides its batch) whose predicted peak per rank fits, each from a copy
 * of CFG with those settings (built at one rank and at two). */
/* What a training step of a cfg moves per rank, from the byte theory. */
#define FSDP_PLAN_PARTS 64
typedef struct fsdp_plan_step {
    uint64_t ag, rs, ar;       /* bytes of all-gathers, reduce-scatters, all-reduces, as the stats count them */
    int groups, exchanges;     /* groups; those whose buffers are gathered or reduced */
    size_t images;             /* per rank and step: batch x subdivisions */
    int nparts;
    size_t part_floats[FSDP_PLAN_PARTS];   /* each trainable group's part per rank (the last takes the rest) */
} fsdp_plan_step;

/* Builds of cfg with `keys` ("k=v\n...") in its [net], as rank 0 of
 * `machines` machines of `ranks` ranks, shard=full: the memory prediction
 * there (as -fsdp-plan MxL's rows) and its step's bytes. */
fsdp_status fsdp_planner_build(const char *cfg, const char *keys, int machines, int ranks, dn_hooks *hooks,
                               fsdp_mem_prediction *mem, fsdp_plan_step *step);

/* Rank 0's prediction at `world` ranks on `machines` machines of equal
 * ranks (fixed cost 0) from a build of cfg with `keys` in its [net] at
 * `built_at` ranks on `built_on` under `strategy`: the build's own where
 * the two are the same, else laid out again (both of 2 ranks or more, both
 * on one machine or both on several), as the table's rows are. */
fsdp_status fsdp_planner_predict(const char *cfg, const char *keys, fsdp_strategy strategy, int built_at,
                                 int built_on, int world, int machines, dn_hooks *hooks, fsdp_mem_prediction *out);

fsdp_status fsdp_planner_run(const char *cfg, const char *worlds, const char *budget, dn_hooks *hooks,
                             FILE *out);

#endif
