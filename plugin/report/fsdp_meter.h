/* fsdp_meter.h: what -fsdp-stats measures while the run goes (set-up CPU
 * time, rank 0's PSS and the ranks' mean, every rank's prediction) and when it writes the file (fsdp_stats.h): once,
 * on rank 0, while the groups still exist. */
#ifndef FSDP_METER_H
#define FSDP_METER_H

#include "fsdp_stats.h"

typedef struct fsdp_meter {
    char *path;              /* -fsdp-stats FILE; NULL: no stats file */
    int written;             /* the file is written once */
    uint64_t setup_cpu_us;   /* this rank's CPU time when the network was built and sharded */
    double setup_cpu_s[2];   /* its least and most over the ranks, agreed at the first step */
    size_t peak_pss;         /* rank 0 with a stats file: its largest PSS at a step's end */
    size_t mean_pss;         /* with a stats file: the largest mean of every rank's PSS at a step's end */
    uint64_t *predicted_each; /* with a stats file: every rank's predicted peak (its own fixed cost), from the first step */
} fsdp_meter;

/* path: -fsdp-stats's value, or NULL. */
fsdp_status fsdp_meter_open(fsdp_meter *m, const char *path);
/* The network is built and sharded: set-up ends now. */
void fsdp_meter_built(fsdp_meter *m);
/* Collective at the end of each of the engine's training steps: every
 * rank's set-up time after the first; with a stats file, every rank's
 * predicted peak (predicted_peak: this rank's) after the first, and the
 * ranks' PSS (rank 0's and the mean) after each. */
fsdp_status fsdp_meter_step(fsdp_meter *m, const fsdp_engine *e, size_t predicted_peak);
/* Rank 0 writes the file, if asked for and not yet written; straggle:
 * each rank's compute seconds (fsdp_straggle.h), or NULL; pcache: the
 * probe cache (fsdp_pcache.h). */
fsdp_status fsdp_meter_write(fsdp_meter *m, const fsdp_engine *e, const fsdp_hosts *hosts,
                             const fsdp_mem_prediction *predicted, const fsdp_straggle *straggle,
                             const fsdp_pcache *pcache);
void fsdp_meter_free(fsdp_meter *m);

#endif
