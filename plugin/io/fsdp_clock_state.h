/* fsdp_clock_state.h: the checkpoint clock's decisions (fsdp_clock.h),
 * apart from the network, the files and the collectives: when a checkpoint
 * is due, and what one step boundary does with a checkpoint in flight.
 *
 * States (checked):
 *   IDLE    --start-->  WRITING   a due step took a checkpoint
 *   WRITING --done--->  IDLE      every rank's writer finished (complete,
 *                                 or its failure told to every rank)
 * At a step boundary, from the votes every rank sums (rank 0's clock due,
 * writers still busy): the checkpoint in flight completes once no writer is
 * busy, and a due checkpoint starts only from IDLE, after that completion
 * (one in flight at most; one due while another is written waits for the
 * next boundary). */
#ifndef FSDP_CLOCK_STATE_H
#define FSDP_CLOCK_STATE_H

typedef enum { FSDP_CLOCK_IDLE, FSDP_CLOCK_WRITING } fsdp_clock_state;

typedef struct fsdp_clock_fsm {
    fsdp_clock_state state;
    double every_s;    /* the interval, > 0 */
    double next_due;   /* monotonic seconds; rank 0's is the one that counts */
} fsdp_clock_fsm;

/* What one step boundary does, in this order. */
typedef struct fsdp_clock_plan {
    int complete;   /* finish the checkpoint in flight */
    int start;      /* take a new one */
} fsdp_clock_plan;

/* IDLE, the first checkpoint due every_s after now. */
void fsdp_clock_fsm_init(fsdp_clock_fsm *m, double every_s, double now);
/* Whether the clock says a checkpoint is due at now. */
int fsdp_clock_fsm_due(const fsdp_clock_fsm *m, double now);
/* The boundary's plan from the summed votes: due (any rank's clock said
 * so), busy (writers still running). */
fsdp_clock_plan fsdp_clock_fsm_plan(const fsdp_clock_fsm *m, int due, int busy);
/* A checkpoint is taken at now: the next one is due every_s later. */
void fsdp_clock_fsm_rearm(fsdp_clock_fsm *m, double now);
/* IDLE -> WRITING. */
void fsdp_clock_fsm_start(fsdp_clock_fsm *m);
/* WRITING -> IDLE. */
void fsdp_clock_fsm_done(fsdp_clock_fsm *m);

#endif
