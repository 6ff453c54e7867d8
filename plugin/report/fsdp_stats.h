/* fsdp_stats.h: the -fsdp-stats JSON file (docs/DESIGN.md, "Stats file"),
 * rank 0's own counts beside the step plan's theory of them. */
#ifndef FSDP_STATS_H
#define FSDP_STATS_H

#include "fsdp_bn.h"
#include "fsdp_engine.h"
#include "fsdp_hosts.h"
#include "fsdp_memplan.h"
#include "fsdp_straggle.h"
#include "fsdp_pcache.h"

/* What the file reports, each part from its owner. */
typedef struct fsdp_stats_sources {
    const fsdp_engine *e;
    const fsdp_bn *bn;
    const fsdp_hosts *hosts;
    const fsdp_mem_prediction *predicted;   /* peak 0: not predicted (GPU runs) */
    size_t peak_pss;                        /* rank 0's largest PSS at the end of a step */
    double setup_cpu_s[2];                  /* CPU seconds before the first step: least and most of any rank */
    const fsdp_straggle *straggle;          /* each rank's compute seconds; NULL: none */
    const fsdp_pcache *pcache;              /* the probe cache (fsdp_pcache.h); NULL: none */
    size_t mean_pss;                        /* the largest mean over the ranks of their PSS at the end of a step */
    const uint64_t *predicted_each;         /* each rank's predicted peak, world of them; NULL: none ran a step */
} fsdp_stats_sources;

/* Writes the file (rank 0), whole or not at all. */
fsdp_status fsdp_write_stats(const fsdp_stats_sources *src, const char *path);

#endif
