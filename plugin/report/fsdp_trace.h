/* fsdp_trace.h: -fsdp-trace FILE, a window of steps in Chrome's Trace Event
 * Format, which Perfetto and chrome://tracing open as it is (docs/DESIGN.md,
 * "Trace file"; docs/observe.md reads one).
 *
 * Each rank records, while a step of the window runs: the step plan's
 * operations from the time line (fsdp_timeline.h: gathers, reduces,
 * updates, exchanges between machines, with their bytes between machines),
 * every collective it calls (fsdp_watch_observe: kind and bytes), each
 * layer's forward and backward compute, its checkpoint's snapshot and
 * write on the clock (the time line's `snapshot` and `write`, with the
 * file's bytes), and its resident memory at each step's end.  The ranks' clocks are aligned at the start to rank 0's,
 * within a bound measured then and stated in the file.  When the window
 * ends (or the run, before it does), rank 0 gathers every rank's events
 * and writes the file: one process per rank, named with its host; one
 * thread per track (compute, step plan, collectives, checkpoint writer), more where a track's
 * events would overlap (a started gather beside the next one), so that
 * the events of one thread nest or follow one another. */
#ifndef FSDP_TRACE_H
#define FSDP_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "fsdp.h"
#include "fsdp_backend.h"

typedef enum {
    FSDP_TRACK_COMPUTE = 0, FSDP_TRACK_PLAN = 1, FSDP_TRACK_COLL = 2, FSDP_TRACK_MEMORY = 3, FSDP_TRACK_CKPT = 4
} fsdp_track;

/* One event, as the ranks send them to rank 0. */
typedef struct fsdp_trace_ev {
    char name[40];
    int32_t track;        /* fsdp_track */
    int32_t arg;          /* the layer (compute) or group (step plan); -1: none */
    int32_t step;
    int32_t rank;
    double t0, t1;        /* rank 0's clock (fsdp_tl_clock's seconds); a counter: t1 = t0 */
    uint64_t bytes;       /* a collective's, a checkpoint file's; step plan: to other machines; a counter: its value */
    uint64_t bytes_in;    /* step plan: from other machines */
} fsdp_trace_ev;

typedef struct fsdp_trace {
    int on, rank, world;
    int first, last;      /* the window's steps */
    int step;             /* the step running now, from 1 */
    int written;
    char *path;
    fsdp_trace_ev *ev;
    size_t n, cap;
    double offset;        /* this rank's clock + offset: rank 0's */
    double t_start;       /* rank 0's clock at the alignment: the file's zero */
    double error_s;       /* the alignment's bound */
} fsdp_trace;

/* -fsdp-trace-steps A-B (1 <= A <= B) or N (steps 1-N). */
fsdp_status fsdp_trace_parse_steps(const char *text, int *first, int *last);
/* Collective over CTL: every rank, PATH rank 0's file; aligns the clocks. */
fsdp_status fsdp_trace_open(fsdp_trace *t, const char *path, int first, int last, fsdp_ctl *ctl);
/* Whether the step running now is in the window. */
int fsdp_trace_recording(const fsdp_trace *t);
/* An event of the step running now, T0 and T1 on this rank's clock. */
void fsdp_trace_add(fsdp_trace *t, const char *name, fsdp_track track, int arg, double t0, double t1,
                    uint64_t bytes, uint64_t bytes_in);
/* Collective over CTL: rank 0 writes the file (whole or not at all), once;
 * GROUP_NAME(ctx, g) names group g, HOST[r] rank r's machine. */
typedef const char *(*fsdp_trace_group_fn)(const void *ctx, int g);
fsdp_status fsdp_trace_write(fsdp_trace *t, fsdp_ctl *ctl, fsdp_trace_group_fn group_name, const void *ctx,
                             char (*host)[64]);
void fsdp_trace_free(fsdp_trace *t);

#endif
