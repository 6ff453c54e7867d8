/* fsdp_linkplan.h: `-fsdp-plan WORLDS CFG -fsdp-link MxL,MBIT[,MS]`: how long a
 * training step of CFG takes on M machines of L ranks each, joined by a
 * link of MBIT Mbit/s each way and MS milliseconds of latency, for each
 * way of crossing machines (shard=full's hierarchical exchanges, hybrid
 * sharding) and each wire precision (shard_wire), with and without the
 * exchanges overlapping the compute; and the fastest that fits -fsdp-budget
 * (docs/machines.md, "Planning a step across machines").
 *
 * Or `-fsdp-link probe` under a launcher: the machines are the ranks' own,
 * and the link is measured between them (fsdp_linkprobe.h).
 *
 * The compute is measured: stock Darknet's step at the cfg's batch per
 * rank; described, in this process, times L / (this machine's cores) where
 * the ranks outnumber them (each machine taken to be like this one);
 * probed, on every rank at once, the slowest rank's.  The bytes are the
 * plan's (fsdp_memplan_step_bytes, the theory the stats
 * check), each part in its wire format, and the memory the prediction at
 * M x L ranks (fsdp_planner_build). */
#ifndef FSDP_LINKPLAN_H
#define FSDP_LINKPLAN_H

#include <stdio.h>
#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_backend.h"

typedef struct fsdp_link_spec {
    int machines, ranks;     /* M machines of L ranks */
    double mbit;             /* each way */
    double latency_ms;
} fsdp_link_spec;

/* "MxL,MBIT[,MS]"; a clear error naming the flag otherwise. */
fsdp_status fsdp_link_parse(const char *text, fsdp_link_spec *out);
fsdp_status fsdp_linkplan_run(const char *cfg, const char *spec, const char *budget, dn_hooks *hooks, FILE *out);
/* -fsdp-link probe: collective over ctl and coll (MPI's, host memory);
 * rank 0 prints.  A refusal or failure on any rank is every rank's. */
fsdp_status fsdp_linkplan_probe_run(const char *cfg, const char *budget, dn_hooks *hooks, fsdp_ctl *ctl,
                                    fsdp_coll *coll, FILE *out);

#endif
