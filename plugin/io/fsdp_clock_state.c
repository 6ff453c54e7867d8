#include "fsdp.h"
#include "fsdp_clock_state.h"

void fsdp_clock_fsm_init(fsdp_clock_fsm *m, double every_s, double now)
{
    m->state = FSDP_CLOCK_IDLE;
    m->every_s = every_s;
    m->next_due = now + every_s;
}

int fsdp_clock_fsm_due(const fsdp_clock_fsm *m, double now)
{
    return now >= m->next_due;
}

fsdp_clock_plan fsdp_clock_fsm_plan(const fsdp_clock_fsm *m, int due, int busy)
{
    fsdp_clock_plan p;
    p.complete = m->state == FSDP_CLOCK_WRITING && !busy;
    /* After this boundary's completion the clock is IDLE again. */
    p.start = due && (m->state == FSDP_CLOCK_IDLE || p.complete);
    return p;
}

void fsdp_clock_fsm_rearm(fsdp_clock_fsm *m, double now)
{
    m->next_due = now + m->every_s;
}

void fsdp_clock_fsm_start(fsdp_clock_fsm *m)
{
    FSDP_ASSERT(m->state == FSDP_CLOCK_IDLE, "clock start: IDLE");
    m->state = FSDP_CLOCK_WRITING;
}

void fsdp_clock_fsm_done(fsdp_clock_fsm *m)
{
    FSDP_ASSERT(m->state == FSDP_CLOCK_WRITING, "clock complete: WRITING");
    m->state = FSDP_CLOCK_IDLE;
}
