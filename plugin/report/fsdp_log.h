/* fsdp_log.h: rank 0's record of training (docs/DESIGN.md, "Log file"):
 * one JSON line per step with -fsdp-log FILE, and a progress line with the
 * time left every tenth of max_batches. */
#ifndef FSDP_LOG_H
#define FSDP_LOG_H

#include <stdint.h>
#include <stdio.h>
#include "darknet.h"
#include "fsdp.h"
#include "fsdp_straggle.h"
#include "fsdp_timeline.h"

typedef struct fsdp_log {
    FILE *f;                 /* NULL: no -fsdp-log */
    char *path;
    int world;
    double t_last;           /* when the last step ended (or the network was built) */
    double t_mark;           /* when the last progress line was printed */
    size_t step_mark;
    uint64_t bytes_last;     /* collective bytes counted up to the last step */
    double avg_loss;
    int steps;
    const fsdp_straggle *straggle;   /* each window's compute seconds, on its last step's line; NULL: none */
} fsdp_log;

/* Rank 0: will log to PATH (NULL: progress lines only). */
fsdp_status fsdp_log_open(fsdp_log *l, const char *path, int world);
/* The network is built: opens (truncates) the file; the first step is
 * timed from T (fsdp_tl_clock's clock, as every step is). */
fsdp_status fsdp_log_start(fsdp_log *l, uint64_t bytes, double t);
/* After a training step: LOSS is the mean over ranks, BYTES every byte of
 * collectives this rank has counted so far; TL (on, with -fsdp-log-events)
 * the step's events, written into the line and cleared. */
fsdp_status fsdp_log_step(fsdp_log *l, const network *net, float loss, uint64_t bytes, fsdp_timeline *tl);
void fsdp_log_close(fsdp_log *l);
/* This process's resident memory now (bytes; 0 where unknown). */
unsigned long long fsdp_rss_bytes(void);

/* Rank 0, after -fsdp-resume loaded WEIGHTS' shard checkpoints on WORLD
 * ranks: what was loaded (step, files, the world they were written on). */
void fsdp_report_resume(const network *net, const char *weights, int world);

#endif
