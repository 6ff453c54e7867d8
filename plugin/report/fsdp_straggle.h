/* fsdp_straggle.h: the slow rank named (docs/DESIGN.md, "Stragglers").
 *
 * Each rank times its own compute every step: the step's wall time less
 * the time its main thread spent in collectives (fsdp_watch_seconds), so
 * forward, backward, the update and waiting for the data loader, not
 * waiting for other ranks.  Every WINDOW steps the ranks share these, one
 * sum of WORLD x WINDOW doubles; rank 0 then names, once per window, each
 * rank whose median over the window is at least FSDP_STRAGGLE_RATIO times
 * the median of the ranks' medians: which rank, which host, how much
 * slower, since which step (the first of its run of slow windows). */
#ifndef FSDP_STRAGGLE_H
#define FSDP_STRAGGLE_H

#include <stddef.h>
#include <stdio.h>
#include "fsdp.h"
#include "fsdp_backend.h"

#define FSDP_STRAGGLE_RATIO 1.25

typedef struct fsdp_straggle {
    int on, rank, world, window;
    int n;                 /* steps timed in the window so far */
    size_t first;          /* the window's first step */
    double t_last, inside_last;
    double *rows;          /* world x window compute seconds: this rank's row, then every rank's */
    double *median;        /* world: the last window's medians (valid where windows > 0) */
    double *total;         /* world: compute seconds over the windows shared */
    size_t *since;         /* world: first step of the rank's run of slow windows, 0: not slow */
    int windows;           /* windows shared */
    int fresh;             /* a window was shared at the last step */
    int named;             /* rank 0: lines printed */
    char (*host)[64];      /* world host names */
} fsdp_straggle;

/* Collective over CTL (every rank): host names shared.  WINDOW steps >= 1. */
fsdp_status fsdp_straggle_open(fsdp_straggle *s, fsdp_ctl *ctl, int window);
/* The next step's compute starts at T (fsdp_tl_clock's clock): once the
 * network is built, and after each step's own reporting. */
void fsdp_straggle_start(fsdp_straggle *s, double t);
/* Every rank after step STEP, ending at T; at a window's end, collective
 * over CTL, and rank 0 names the slow ranks on stderr. */
fsdp_status fsdp_straggle_step(fsdp_straggle *s, fsdp_ctl *ctl, size_t step, double t);
/* The stats file's part (rank 0): "compute_s", each rank's compute
 * seconds over the windows shared, their steps, and the lines printed. */
void fsdp_straggle_write_stats(FILE *f, const fsdp_straggle *s);
void fsdp_straggle_free(fsdp_straggle *s);

#endif
