/* fsdp_plan_mode.h: -fsdp-plan WORLDS CFG's mode, in place of training: the
 * memory tables (fsdp_planner.h) and, with -fsdp-link, a step's time on
 * those machines (fsdp_linkplan.h), described or probed between the ranks. */
#ifndef FSDP_PLAN_MODE_H
#define FSDP_PLAN_MODE_H

#include "fsdp_flags.h"

/* -fsdp-link and -fsdp-budget need -fsdp-plan beside them. */
fsdp_status fsdp_plan_flags_check(const fsdp_flags *f);
/* Prints the plan on stdout (rank 0 when probed); host memory only: no GPU. */
fsdp_status fsdp_plan_mode(int *argc, char **argv, const fsdp_flags *f, dn_hooks *h);

#endif
