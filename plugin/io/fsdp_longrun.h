/* fsdp_longrun.h: a run's checkpoints and resumes, from the flags to the
 * files (-fsdp-checkpoint, -fsdp-resume [auto], -fsdp-checkpoint-every,
 * -fsdp-checkpoint-keep, -fsdp-keep-batch; docs/DESIGN.md, "Long runs").
 *
 * The run calls these at its own moments, in this order:
 *   fsdp_longrun_flags      start-up, each rank alone: values and the flags they need beside them
 *   fsdp_longrun_begin      start-up, once the ranks agree on the flags: the command's backup folder
 *   fsdp_longrun_note_weights  each weights file Darknet loads
 *   fsdp_longrun_before_shard  network built, before sharding: the checkpoint to resume, the batch kept
 *   fsdp_longrun_start_clock   after sharding: checkpoints on the clock
 *   fsdp_longrun_resume        after the memory prediction: the checkpoint read
 *   fsdp_longrun_saved, fsdp_longrun_step, fsdp_longrun_finish, fsdp_longrun_free */
#ifndef FSDP_LONGRUN_H
#define FSDP_LONGRUN_H

#include "fsdp_clock.h"
#include "fsdp_engine.h"
#include "fsdp_flags.h"
#include "fsdp_resume.h"

typedef struct fsdp_longrun {
    int checkpoint;            /* -fsdp-checkpoint: each rank saves its shards beside each weights file */
    int resume;                /* -fsdp-resume: each rank loads them beside the weights file given */
    int resume_auto;           /* -fsdp-resume auto: the newest complete checkpoint on the clock, if any */
    int keep_batch;            /* -fsdp-keep-batch */
    double every_s;            /* -fsdp-checkpoint-every, in seconds; 0: off */
    int keep;                  /* -fsdp-checkpoint-keep */
    char *backup;              /* the command's backup folder (with either of those) */
    char *folder, *name;       /* BACKUP/NAME.fsdp, NAME */
    fsdp_resume_point point;   /* auto: the checkpoint picked (base NULL: none) */
    char *weights_file;        /* the weights file Darknet loaded, if any */
    fsdp_clock *clock;         /* -fsdp-checkpoint-every, from the network's sharding on */
} fsdp_longrun;

/* The values of -fsdp-checkpoint-every, -fsdp-checkpoint-keep and the
 * flags that need others beside them (-fsdp-log-events among them), on
 * this rank alone; argv: the command, whose rnn train refuses
 * -fsdp-keep-batch. */
fsdp_status fsdp_longrun_flags(fsdp_longrun *lr, const fsdp_flags *f, int argc, char **argv);
/* The switches, and the backup folder where the clock or auto needs it. */
fsdp_status fsdp_longrun_begin(fsdp_longrun *lr, const fsdp_flags *f, int argc, char **argv);
/* Remembers the weights file Darknet loaded (the last one counts). */
fsdp_status fsdp_longrun_note_weights(fsdp_longrun *lr, const char *file);
/* Before sharding, on every rank alike: where checkpoints on the clock
 * go, which one -fsdp-resume auto continues from, and under
 * -fsdp-keep-batch the subdivisions that keep its global batch. */
fsdp_status fsdp_longrun_before_shard(fsdp_longrun *lr, fsdp_ctl *ctl, network *net, const char *cfg);
/* After sharding; local_ranks: the ranks on this machine. */
fsdp_status fsdp_longrun_start_clock(fsdp_longrun *lr, fsdp_engine *e, const network *net, int local_ranks);
/* The checkpoint auto picked, or the one beside the weights file given
 * (weights_size and weights_hash: that file's, as the ranks agreed). */
fsdp_status fsdp_longrun_resume(fsdp_longrun *lr, fsdp_engine *e, network *net, uint64_t weights_size,
                                uint64_t weights_hash);
/* Darknet saved FILE from the engine's network: its checkpoint beside it. */
fsdp_status fsdp_longrun_saved(fsdp_longrun *lr, fsdp_engine *e, network *net, const char *file);
/* Collective, at the end of each of the engine's training steps. */
fsdp_status fsdp_longrun_step(fsdp_longrun *lr, network *net);
/* Collective, when training ends: the checkpoint in flight made complete. */
fsdp_status fsdp_longrun_finish(fsdp_longrun *lr);
/* Waits for a writer still running; frees what the run held. */
void fsdp_longrun_free(fsdp_longrun *lr);

#endif
