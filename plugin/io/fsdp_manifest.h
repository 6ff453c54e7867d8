/* fsdp_manifest.h: the folder of checkpoints on the clock, and what makes
 * one complete.
 *
 * FOLDER (BACKUP/NAME.fsdp) holds one folder per checkpoint, step-IIIIIIII
 * (Darknet's iteration, eight digits so names sort by step), with each
 * rank's file NAME.fsdp-R-of-N and, once every file is written, synced and
 * its checksum known, a MANIFEST naming them: written by rank 0 as
 * MANIFEST.tmp, synced, renamed into place, the folder synced.  A
 * checkpoint without a MANIFEST whose own checksum holds is half-written:
 * resuming skips it and the next complete one removes it.  The manifest is
 * text (docs/DESIGN.md, "Checkpoints on the clock"). */
#ifndef FSDP_MANIFEST_H
#define FSDP_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include "fsdp.h"

typedef struct fsdp_manifest {
    uint64_t run_id, seen;
    long step;
    int world;
    uint64_t *size, *sum;    /* per rank */
} fsdp_manifest;

/* FOLDER/step-IIIIIIII (malloc'd). */
char *fsdp_manifest_step_dir(const char *folder, long step);
/* Writes dir/MANIFEST for files NAME.fsdp-R-of-N (rank 0). */
fsdp_status fsdp_manifest_write(const char *dir, const char *name, const fsdp_manifest *m);
/* Reads dir/MANIFEST and checks it against its checksum, its folder's
 * name (step) and the files it names (there, regular files of its sizes,
 * ending in its checksums, their headers saying its seen).  0 if
 * complete; else -1 with why filled.  A symbolic link, a FIFO or a device
 * in place of dir, the MANIFEST or a file is refused, without blocking; a
 * MANIFEST over 16 MiB is refused unread. */
int fsdp_manifest_read(const char *dir, const char *name, fsdp_manifest *m, char *why, size_t whylen);
void fsdp_manifest_free(fsdp_manifest *m);
/* The newest complete checkpoint in folder: its step folder in *dir
 * (malloc'd; NULL when there is none) and its manifest in *m.  Each newer
 * one skipped is reported on stderr with why. */
fsdp_status fsdp_manifest_newest(const char *folder, const char *name, char **dir, fsdp_manifest *m);
/* Before a checkpoint at `step` is written: removes what an earlier
 * attempt left in its folder (its MANIFEST first).  Clean-up removes only
 * regular files of the names a run writes for NAME (MANIFEST,
 * NAME.fsdp-R-of-N, and their .tmp), in a real folder step-IIIIIIII of
 * folder: a symbolic link there is never followed, and left as it is. */
void fsdp_manifest_clear(const char *folder, const char *name, long step);
/* After the checkpoint at `step` is complete: removes every other step
 * folder but the keep - 1 newest complete ones before it (half-written
 * ones, and any newer one an earlier attempt of the run left).  Step
 * folders are named step- and exactly 8 digits; other names are not the
 * run's, never counted nor removed. */
void fsdp_manifest_prune(const char *folder, const char *name, long step, int keep);

#endif
