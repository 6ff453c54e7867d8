/* A run's checkpoints and resumes, from the flags to the files (fsdp_longrun.h). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_ckpt.h"
#include "fsdp_longrun.h"

/* -fsdp-checkpoint-every and -fsdp-checkpoint-keep: their values. */
static fsdp_status parse_values(fsdp_longrun *lr, const fsdp_flags *f)
{
    char *end = NULL;
    lr->keep = FSDP_CLOCK_DEFAULT_KEEP;
    if (f->every) {
        double m = strtod(f->every, &end);
        if (end == f->every || *end || !(m > 0) || m > 1e6)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-every %s: expected minutes, a number above 0 "
                             "(0.5: every 30 s)", f->every);
        lr->every_s = 60 * m;
    }
    if (f->keep) {
        long k = strtol(f->keep, &end, 10);
        if (end == f->keep || *end || k < 1 || k > 1000000)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-keep %s: expected a whole number of checkpoints, "
                             "1 or more", f->keep);
        if (!f->every)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-keep %s: it says how many checkpoints of "
                             "-fsdp-checkpoint-every to keep; give that too", f->keep);
        lr->keep = (int)k;
    }
    return FSDP_OK;
}

fsdp_status fsdp_longrun_flags(fsdp_longrun *lr, const fsdp_flags *f, int argc, char **argv)
{
    FSDP_TRY(parse_values(lr, f));
    if (f->log_events && !f->log)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-log-events: it adds the step's events to the lines of -fsdp-log; "
                         "give -fsdp-log FILE too");
    if (f->keep_batch && !f->resume)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: it keeps a resumed checkpoint's global batch; give "
                         "-fsdp-resume (or -fsdp-resume auto) with it");
    /* rnn train splits its batch into streams of time steps, not micro-batches. */
    for (int i = 1; f->keep_batch && i + 1 < argc; ++i)
        if (!strcmp(argv[i], "rnn") && !strcmp(argv[i + 1], "train"))
            return fsdp_fail(FSDP_ERR_UNSUPPORTED, "-fsdp-keep-batch: rnn train's batch is its streams, which "
                             "subdivisions do not split; resume on another world with the cfg's batch scaled");
    return FSDP_OK;
}

fsdp_status fsdp_longrun_begin(fsdp_longrun *lr, const fsdp_flags *f, int argc, char **argv)
{
    lr->checkpoint = f->checkpoint;
    lr->resume = f->resume;
    lr->resume_auto = f->resume_auto;
    lr->keep_batch = f->keep_batch;
    if ((f->every || f->resume_auto) && !(lr->backup = fsdp_resume_backup(argc, argv)))
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    return FSDP_OK;
}

fsdp_status fsdp_longrun_note_weights(fsdp_longrun *lr, const char *file)
{
    free(lr->weights_file);
    lr->weights_file = strdup(file);
    return FSDP_OK;
}

fsdp_status fsdp_longrun_before_shard(fsdp_longrun *lr, fsdp_ctl *ctl, network *net, const char *cfg)
{
    if (lr->backup) {
        lr->folder = fsdp_resume_folder(lr->backup, cfg, &lr->name);
        if (!lr->folder) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    if (lr->resume_auto) FSDP_TRY(fsdp_resume_pick(ctl, lr->folder, lr->name, &lr->point));
    if (!lr->keep_batch) return FSDP_OK;
    int from = lr->point.world;
    /* A manifest says the global batch its updates saw (a run that kept
     * it before may have run other subdivisions than the cfg's). */
    if (lr->point.base && lr->point.step > 0 && lr->point.seen % (uint64_t)lr->point.step == 0)
        return fsdp_resume_keep_batch(net, (long)(lr->point.seen / (uint64_t)lr->point.step), from, ctl->world,
                                      ctl->rank == 0);
    if (!lr->resume_auto) {
        fsdp_status s = lr->weights_file ? fsdp_ckpt_world(lr->weights_file, ctl->world, &from)
                                         : fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume needs the weights file the "
                                                     "checkpoint was saved with on the command line");
        FSDP_TRY(fsdp_ctl_all_ok(ctl, s, FSDP_ERR_CONFIG, "found no checkpoint to resume"));
    }
    if (!from) return FSDP_OK;   /* auto, and nothing to resume */
    return fsdp_resume_keep_batch(net, (long)net->batch * net->subdivisions * from, from, ctl->world, ctl->rank == 0);
}

fsdp_status fsdp_longrun_start_clock(fsdp_longrun *lr, fsdp_engine *e, const network *net, int local_ranks)
{
    if (lr->every_s <= 0) return FSDP_OK;
    return fsdp_clock_create(e, net, &(fsdp_clock_opts){ lr->every_s, lr->keep, lr->folder, lr->name, local_ranks },
                             &lr->clock);
}

fsdp_status fsdp_longrun_resume(fsdp_longrun *lr, fsdp_engine *e, network *net, uint64_t weights_size,
                                uint64_t weights_hash)
{
    if (lr->point.base) return fsdp_ckpt_read(e, net, lr->point.base, 0, 0, lr->point.world);
    if (lr->resume && !lr->resume_auto) return fsdp_ckpt_read(e, net, lr->weights_file, weights_size, weights_hash, 0);
    return FSDP_OK;
}

fsdp_status fsdp_longrun_saved(fsdp_longrun *lr, fsdp_engine *e, network *net, const char *file)
{
    return lr->checkpoint ? fsdp_ckpt_write(e, net, file) : FSDP_OK;
}

fsdp_status fsdp_longrun_step(fsdp_longrun *lr, network *net)
{
    return lr->clock ? fsdp_clock_step(lr->clock, net) : FSDP_OK;
}

fsdp_status fsdp_longrun_finish(fsdp_longrun *lr)
{
    return fsdp_clock_finish(lr->clock);
}

void fsdp_longrun_free(fsdp_longrun *lr)
{
    fsdp_clock_free(lr->clock);   /* after an error: its writer is waited for, no manifest written */
    lr->clock = NULL;
    free(lr->weights_file);
    free(lr->backup);
    free(lr->folder);
    free(lr->name);
    free(lr->point.base);
    memset(lr, 0, sizeof *lr);
}
