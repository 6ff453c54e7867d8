/* fsdp_inflight.h: work queued on a device stream that the host does not
 * wait for (NCCL's collectives return once queued), as the watchdog's
 * thread sees it: each piece's issue time, in issue order, and how far the
 * stream has got.  The stream runs its work in order, so the oldest piece
 * not yet done is the one that makes no progress; the collective watchdog
 * stops the rank when it has been pending longer than the timeout
 * (fsdp_watch_probe).  No CUDA here: whether a piece is done is the
 * caller's question (cudaEventQuery on the event recorded after it). */
#ifndef FSDP_INFLIGHT_H
#define FSDP_INFLIGHT_H

#include <stdint.h>

/* Pieces tracked at once.  More outstanding than this: the oldest are
 * forgotten, which only delays noticing a stall by the time between the
 * oldest and the oldest still tracked. */
#define FSDP_INFLIGHT 64

typedef struct fsdp_inflight {
    double issued[FSDP_INFLIGHT];   /* seconds, the caller's clock */
    const char *what[FSDP_INFLIGHT];
    uint64_t nissued, ndone;        /* pieces ndone .. nissued - 1 are pending */
} fsdp_inflight;

/* A piece queued at `now`: its slot, where the caller records its event. */
int fsdp_inflight_issue(fsdp_inflight *f, const char *what, double now);
/* Moves past the pieces `done` says are done, oldest first, and returns the
 * slot of the oldest still pending (-1: none). */
int fsdp_inflight_oldest(fsdp_inflight *f, int (*done)(void *ctx, int slot), void *ctx);
/* 1 when the oldest pending piece was issued at least timeout_s before
 * now, with *what and *pending_s naming it; 0 otherwise (timeout_s <= 0:
 * never). */
int fsdp_inflight_stalled(fsdp_inflight *f, int (*done)(void *ctx, int slot), void *ctx, double now,
                          double timeout_s, const char **what, double *pending_s);

#endif
