/* fsdp_resume.h: where a run's checkpoints on the clock live, which one
 * -fsdp-resume auto continues from, and the global batch kept on another
 * world (-fsdp-keep-batch). */
#ifndef FSDP_RESUME_H
#define FSDP_RESUME_H

#include "fsdp_backend.h"
#include "darknet.h"

/* The folder the command saves its weights in, as Darknet finds it: the
 * .data file's backup= ("/backup/" without one), rnn train's -backup
 * ("/home/pjreddie/backup/" without one).  malloc'd; NULL out of memory. */
char *fsdp_resume_backup(int argc, char **argv);
/* BACKUP/NAME.fsdp, NAME the cfg's name as Darknet names its weights files
 * (*name, malloc'd). */
char *fsdp_resume_folder(const char *backup, const char *cfg, char **name);
/* Collective: rank 0 picks the newest complete checkpoint in folder
 * (fsdp_manifest.h) and says which, or that there is none; every rank
 * gets where it is and what it was. */
typedef struct fsdp_resume_point {
    char *base;      /* STEPDIR/NAME (malloc'd); NULL: none */
    int world;       /* the world that wrote it */
    long step;       /* Darknet's iteration */
    uint64_t seen;   /* images seen: seen / step is its global batch */
} fsdp_resume_point;
fsdp_status fsdp_resume_pick(fsdp_ctl *ctl, const char *folder, const char *name, fsdp_resume_point *out);
/* A checkpoint whose updates each saw `global` images, resumed on `to`
 * ranks: subdivisions = global / (to x the cfg's micro-batch), so each
 * update still sees them (refused, naming the numbers, when that is not
 * whole, or more than FSDP_KEEP_BATCH_MAX_SUBDIVISIONS: a checkpoint's
 * numbers never make Darknet's loop divide by 0 or run a million
 * micro-batches an update); say: print what it did. */
#define FSDP_KEEP_BATCH_MAX_SUBDIVISIONS 1024
fsdp_status fsdp_resume_keep_batch(network *net, long global, int from, int to, int say);

#endif
