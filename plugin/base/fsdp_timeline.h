/* fsdp_timeline.h: when a step's exchanges and optimizer steps ran, for
 * -fsdp-log-events (docs/DESIGN.md, "Log file"): what a user needs to see
 * whether a slow link or the compute is the step.  Rank 0 records the
 * events of each step and the log writes them with the step's line; the
 * time between them is Darknet's compute.
 *
 * An event is one of the step plan's operations (a gather, a reduce, an
 * optimizer step), or an exchange started in one and waited for in a later
 * one (hybrid sharding's updated parts): `wire_out` and `wire_in` are its
 * bytes to and from other machines.  The engine's operations reach it
 * through the engine's observer of it (engine/fsdp_observe_timeline.c);
 * off (no log events) that costs a call and a test per operation. */
#ifndef FSDP_TIMELINE_H
#define FSDP_TIMELINE_H

#include <stdint.h>
#include "fsdp.h"

typedef struct fsdp_tl_event {
    const char *what;     /* "gather", "reduce", "step", "parts", ... (static text) */
    int group;            /* the group's index in the layout */
    double t0, t1;        /* seconds since the step's start; t1 -1 while open */
    uint64_t wire_out, wire_in;
    int open;             /* not ended (an event timed elsewhere may end before the step's start) */
} fsdp_tl_event;

typedef struct fsdp_timeline {
    int on;
    int n, cap, dropped;  /* events this step; room; events past the room */
    fsdp_tl_event *ev;
    double t_step;        /* the step's start (monotonic seconds) */
} fsdp_timeline;

double fsdp_tl_clock(void);
/* Room for CAP events a step; the step starts now. */
fsdp_status fsdp_tl_open(fsdp_timeline *tl, int cap);
void fsdp_tl_close(fsdp_timeline *tl);
/* A new step from T (fsdp_tl_clock's time); an event still open carries
 * over, its start before the step's (negative). */
void fsdp_tl_next_step(fsdp_timeline *tl, double t);
/* Starts an event; its index, or -1 (off, or no room). */
int fsdp_tl_begin(fsdp_timeline *tl, const char *what, int group);
/* Ends an event, adding its bytes. */
void fsdp_tl_end(fsdp_timeline *tl, int ev, uint64_t wire_out, uint64_t wire_in);
/* An event that ran from T0 to T1 (fsdp_tl_clock's times; T0 may be
 * before the step's start): a checkpoint's writer thread, timed there. */
void fsdp_tl_add(fsdp_timeline *tl, const char *what, int group, double t0, double t1, uint64_t wire_out,
                 uint64_t wire_in);
/* Bytes of an event (a started exchange's, known at its start). */
void fsdp_tl_add_bytes(fsdp_timeline *tl, int ev, uint64_t wire_out, uint64_t wire_in);
/* The latest event named WHAT (of GROUP, or any where GROUP < -1) not yet
 * ended, or -1. */
int fsdp_tl_find_open(const fsdp_timeline *tl, const char *what, int group);

#endif
