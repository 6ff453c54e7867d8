/* fsdp_watch.h: the collective watchdog (-fsdp-timeout SECONDS).
 *
 * A rank that stops (SIGSTOP, a debugger, heap corruption that spins, a
 * dead NFS mount) never enters the next collective, and every other rank
 * waits in it forever.  A thread of each rank watches the collectives of
 * the backends wrapped here: one that has not returned after the timeout
 * prints which collective, of which group, at which step, and ends the
 * process with a non-zero status, which makes the launcher stop every rank.
 * The stopped rank itself is killed by the launcher.
 *
 * The default, 600 s, is PyTorch's default for NCCL process groups: far
 * above any one collective or weights-file save of a healthy run, short
 * enough that a hung job gives its machines back the same hour.  0 turns
 * the watchdog off. */
#ifndef FSDP_WATCH_H
#define FSDP_WATCH_H

#include "fsdp.h"
#include "fsdp_backend.h"

#define FSDP_WATCH_DEFAULT_S 600.0

/* Describes the collective in flight for the message: `buf` gets e.g.
 * "group trunk.block1, step 12" from the buffer the collective was given
 * (NULL for host helpers). */
typedef void (*fsdp_watch_describe_fn)(void *ctx, const void *buf, char *out, size_t n);

/* Parses -fsdp-timeout's value: seconds, >= 0 (0: off). */
fsdp_status fsdp_watch_parse(const char *text, double *seconds);
/* Starts the watching thread (no thread when seconds is 0). */
fsdp_status fsdp_watch_start(double seconds, int rank, fsdp_watch_describe_fn describe, void *ctx);
void fsdp_watch_stop(void);
/* Around a call that waits for other ranks (MPI_Finalize, ...). */
void fsdp_watch_enter(const char *what, const void *buf);
void fsdp_watch_leave(void);
/* The timeout given to fsdp_watch_start (0: none, or not started). */
double fsdp_watch_timeout(void);
/* Work the main thread does not wait in, checked by the watching thread at
 * each of its ticks (every 0.2 s): device collectives, which return once
 * queued.  `check` returns 0 while that work progresses; otherwise it has
 * written what stalled or failed to `why` and stopped that work (NCCL:
 * ncclCommAbort), and the watcher stops the rank as for a wait that made no
 * progress.  One probe at a time; NULL removes it (taken under the
 * watcher's lock: after the call the old probe is never called again). */
typedef int (*fsdp_watch_probe_fn)(void *ctx, double timeout_s, char *why, size_t n);
void fsdp_watch_probe(fsdp_watch_probe_fn check, void *ctx);
/* *ctl and *coll (either may be NULL) become host control and buffer
 * collectives whose every call is watched; each owns the one it replaces
 * (freed with it) and takes its name, rank, world (and memory kind and
 * optional operations).  On failure nothing is replaced. */
fsdp_status fsdp_watch_wrap(fsdp_ctl **ctl, fsdp_coll **coll);

#endif
