/* Device work the host does not wait for, in issue order (fsdp_inflight.h). */
#include "fsdp_inflight.h"

int fsdp_inflight_issue(fsdp_inflight *f, const char *what, double now)
{
    if (f->nissued - f->ndone == FSDP_INFLIGHT) f->ndone++;   /* forget the oldest */
    int slot = (int)(f->nissued % FSDP_INFLIGHT);
    f->issued[slot] = now;
    f->what[slot] = what;
    f->nissued++;
    return slot;
}

int fsdp_inflight_oldest(fsdp_inflight *f, int (*done)(void *ctx, int slot), void *ctx)
{
    while (f->ndone < f->nissued && done(ctx, (int)(f->ndone % FSDP_INFLIGHT))) f->ndone++;
    return f->ndone < f->nissued ? (int)(f->ndone % FSDP_INFLIGHT) : -1;
}

int fsdp_inflight_stalled(fsdp_inflight *f, int (*done)(void *ctx, int slot), void *ctx, double now,
                          double timeout_s, const char **what, double *pending_s)
{
    int slot = fsdp_inflight_oldest(f, done, ctx);
    if (slot < 0 || timeout_s <= 0 || now - f->issued[slot] < timeout_s) return 0;
    *what = f->what[slot];
    *pending_s = now - f->issued[slot];
    return 1;
}
