/* A step's events (fsdp_timeline.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fsdp_timeline.h"

double fsdp_tl_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

fsdp_status fsdp_tl_open(fsdp_timeline *tl, int cap)
{
    *tl = (fsdp_timeline){ .cap = cap, .t_step = fsdp_tl_clock() };
    tl->ev = calloc((size_t)cap, sizeof *tl->ev);
    if (!tl->ev) return fsdp_fail(FSDP_ERR_NOMEM, "no memory for a step's %d log events", cap);
    tl->on = 1;
    return FSDP_OK;
}

void fsdp_tl_close(fsdp_timeline *tl)
{
    free(tl->ev);
    *tl = (fsdp_timeline){ 0 };
}

void fsdp_tl_next_step(fsdp_timeline *tl, double t)
{
    if (!tl || !tl->on) return;
    double shift = t - tl->t_step;
    int kept = 0;
    /* An exchange still on its way belongs to the step that waits for it. */
    for (int k = 0; k < tl->n; ++k) {
        if (!tl->ev[k].open) continue;
        tl->ev[kept] = tl->ev[k];
        tl->ev[kept].t0 -= shift;
        ++kept;
    }
    tl->n = kept;
    tl->dropped = 0;
    tl->t_step = t;
}

int fsdp_tl_begin(fsdp_timeline *tl, const char *what, int group)
{
    if (!tl || !tl->on) return -1;
    if (tl->n == tl->cap) {
        ++tl->dropped;
        return -1;
    }
    tl->ev[tl->n] = (fsdp_tl_event){ what, group, fsdp_tl_clock() - tl->t_step, -1, 0, 0, 1 };
    return tl->n++;
}

void fsdp_tl_end(fsdp_timeline *tl, int ev, uint64_t wire_out, uint64_t wire_in)
{
    if (!tl || !tl->on || ev < 0 || ev >= tl->n) return;
    tl->ev[ev].t1 = fsdp_tl_clock() - tl->t_step;
    tl->ev[ev].open = 0;
    fsdp_tl_add_bytes(tl, ev, wire_out, wire_in);
}

void fsdp_tl_add(fsdp_timeline *tl, const char *what, int group, double t0, double t1, uint64_t wire_out,
                 uint64_t wire_in)
{
    int ev = fsdp_tl_begin(tl, what, group);
    if (ev < 0) return;
    tl->ev[ev].t0 = t0 - tl->t_step;
    tl->ev[ev].t1 = t1 - tl->t_step;
    tl->ev[ev].open = 0;
    fsdp_tl_add_bytes(tl, ev, wire_out, wire_in);
}

void fsdp_tl_add_bytes(fsdp_timeline *tl, int ev, uint64_t wire_out, uint64_t wire_in)
{
    if (!tl || !tl->on || ev < 0 || ev >= tl->n) return;
    tl->ev[ev].wire_out += wire_out;
    tl->ev[ev].wire_in += wire_in;
}

int fsdp_tl_find_open(const fsdp_timeline *tl, const char *what, int group)
{
    if (!tl || !tl->on) return -1;
    for (int k = tl->n - 1; k >= 0; --k)
        if (tl->ev[k].open && !strcmp(tl->ev[k].what, what) && (group < -1 || tl->ev[k].group == group)) return k;
    return -1;
}
