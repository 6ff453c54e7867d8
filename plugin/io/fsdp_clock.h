/* fsdp_clock.h: checkpoints on a clock (-fsdp-checkpoint-every MINUTES),
 * written in the background.
 *
 * At the first step boundary after each interval (rank 0's clock, told to
 * every rank), each rank copies what its file holds (fsdp_ckpt.h's
 * self-contained file: its parts, optimizer state, rolling statistics, the
 * run's seen, which with -seed is the loader's position and the random
 * draws' key) into a snapshot buffer and trains on; a thread of its own
 * writes and syncs the file.  At a later step boundary, once every rank's
 * thread is done, rank 0 writes the manifest that makes the checkpoint
 * complete (fsdp_manifest.h) and removes all but the newest `keep`.
 *
 * States (checked; fsdp_clock_state.h decides the transitions):
 *   IDLE --due--> WRITING --every rank's writer done--> IDLE (complete)
 * One checkpoint is in flight at most; one due while another is written
 * waits for the next boundary.  Where the snapshot would not fit in
 * memory (or FSDP_CHECKPOINT_FOREGROUND=1), the step writes the file
 * itself (WRITING still ends at the next boundary), said once. */
#ifndef FSDP_CLOCK_H
#define FSDP_CLOCK_H

#include "fsdp_engine.h"

/* -fsdp-checkpoint-keep's default. */
#define FSDP_CLOCK_DEFAULT_KEEP 2

typedef struct fsdp_clock fsdp_clock;

typedef struct fsdp_clock_opts {
    double every_s;       /* > 0 */
    int keep;             /* >= 1 */
    const char *folder;   /* BACKUP/NAME.fsdp */
    const char *name;     /* NAME: the cfg's, as Darknet names its weights files */
    int local_ranks;      /* ranks on this machine, whose snapshots share its memory */
} fsdp_clock_opts;

/* After the network is sharded (the clock starts now).  Not collective. */
fsdp_status fsdp_clock_create(fsdp_engine *e, const network *net, const fsdp_clock_opts *o, fsdp_clock **out);
/* The snapshot's bytes on this rank (counted in the memory prediction);
 * 0 when the file is written in the foreground. */
size_t fsdp_clock_snapshot_bytes(const fsdp_clock *c);
/* Collective, at every training step's end. */
fsdp_status fsdp_clock_step(fsdp_clock *c, network *net);
/* Whether a checkpoint is in flight (WRITING). */
int fsdp_clock_writing(const fsdp_clock *c);
/* Collective, when training ends: the checkpoint in flight, if any, is
 * finished and made complete. */
fsdp_status fsdp_clock_finish(fsdp_clock *c);
/* Waits for a writer still running (after an error: no manifest). */
void fsdp_clock_free(fsdp_clock *c);

#endif
