/* fsdp_planner.h: `darknet -plugin ... -fsdp-plan N CFG`: the memory each
 * rank needs for CFG at worlds 1..N under each strategy, without training
 * (docs/DESIGN.md, "Memory"). */
#ifndef FSDP_PLANNER_H
#define FSDP_PLANNER_H

#include <stdio.h>
#include "darknet_plugin.h"
#include "fsdp.h"

/* Builds CFG once per world and strategy in this process, through the
 * engine's own set-up on a stand-in backend of that world (this rank is
 * rank 0), and prints the predictions as a markdown table on out.  hooks
 * is Darknet's table: its cfg_option is pointed at the stand-in engine
 * while CFG is read.  With budget (-fsdp-budget MB, else NULL), a second
 * table: for each world under `full`, without and with recompute=1 in
 * [net], the fewest subdivisions (the cfg's times a power of two that
 * divides its batch) whose predicted peak per rank fits, each from a copy
 * of CFG with those settings. */
fsdp_status fsdp_planner_run(const char *cfg, const char *max_world, const char *budget, dn_hooks *hooks,
                             FILE *out);

#endif
