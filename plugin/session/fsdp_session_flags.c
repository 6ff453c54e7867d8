/* The session's flags: this rank's checks, then every rank's agreement on them
 * (fsdp_session_impl.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_hash.h"
#include "fsdp_session_impl.h"
#include "fsdp_watch.h"

/* Darknet's -seed (darknet/src/dn_plugin.c), taken from argv before the plugin starts. */
extern int dn_seeded(void) __attribute__((weak));
extern unsigned long dn_seed(void) __attribute__((weak));

static fsdp_status backend_known(const char *want)
{
    if (want && strcmp(want, "mpi") && strcmp(want, "mpi-staged") && strcmp(want, "nccl"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: expected mpi, mpi-staged or nccl", want);
#ifndef GPU
    if (want && strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: this plugin was built without GPU support", want);
#endif
    return FSDP_OK;
}

/* Fail now, not after hours of training, if FILE cannot be written. */
static fsdp_status writable(const char *flag, const char *file)
{
    char *dir = strdup(file), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    fsdp_status s = access(d, W_OK) == 0 ? FSDP_OK : fsdp_fail(FSDP_ERR_CONFIG, "%s %s: cannot write in %s", flag, file, d);
    free(dir);
    return s;
}

fsdp_status fsdp_session_check_flags(fsdp_session *ses, const fsdp_flags *f, int argc, char **argv)
{
    FSDP_TRY(backend_known(f->backend));
    if (f->timeout) FSDP_TRY(fsdp_watch_parse(f->timeout, &ses->timeout_s));
    if (f->stats) FSDP_TRY(writable("-fsdp-stats", f->stats));
    if (f->log) FSDP_TRY(writable("-fsdp-log", f->log));
    if (f->trace) FSDP_TRY(writable("-fsdp-trace", f->trace));
    FSDP_TRY(fsdp_pcache_init(&ses->pcache, f->probe_cache, argc, argv));
    return fsdp_longrun_flags(&ses->longrun, f, argc, argv);
}

/* A double's bits, compared exactly across ranks. */
static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

fsdp_status fsdp_session_agree_flags(fsdp_session *ses, fsdp_status local, fsdp_ctl *ctl, const fsdp_flags *f,
                                     int argc, char **argv)
{
    int clear = 0;
    for (int i = 1; i < argc; ++i) clear |= !strcmp(argv[i], "-clear");
    int seeded = dn_seeded && dn_seeded();
    unsigned long seed = seeded && dn_seed ? dn_seed() : 0;
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%lu", seed);
    const char *backend = f->backend ? f->backend : "(default)";
    char data[512];
    uint64_t data_hash = 0;
    if (local == FSDP_OK) local = fsdp_agree_data(argc, argv, &data_hash, data, sizeof data);
    else snprintf(data, sizeof data, "none");
    const fsdp_agree_flag list[] = {
        { "-seed", seeded ? (uint64_t)seed + 1 : 0, seeded ? seed_text : "not given" },
        { "-clear", (uint64_t)clear, clear ? "given" : "not given" },
        { "-fsdp-checkpoint", (uint64_t)f->checkpoint, f->checkpoint ? "given" : "not given" },
        { "-fsdp-resume", (uint64_t)(f->resume + f->resume_auto), f->resume_auto ? "auto" : f->resume ? "given" : "not given" },
        { "-fsdp-checkpoint-every", bits_of(ses->longrun.every_s), f->every ? f->every : "not given" },
        { "-fsdp-checkpoint-keep", (uint64_t)ses->longrun.keep, f->keep ? f->keep : "(default)" },
        { "-fsdp-keep-batch", (uint64_t)f->keep_batch, f->keep_batch ? "given" : "not given" },
        { "-fsdp-backend", fsdp_hash(backend, strlen(backend)), backend },
        { "-fsdp-timeout", bits_of(ses->timeout_s), f->timeout ? f->timeout : "(default)" },
        { "-fsdp-stats", (uint64_t)!!f->stats, f->stats ? "given" : "not given" },
        { "-fsdp-log", (uint64_t)!!f->log, f->log ? "given" : "not given" },
        /* Collective when given: every rank must have them alike. */
        { "-fsdp-trace", (uint64_t)!!f->trace, f->trace ? "given" : "not given" },
        { "-fsdp-trace-steps", f->trace_steps ? fsdp_hash(f->trace_steps, strlen(f->trace_steps)) : 0,
          f->trace_steps ? f->trace_steps : "(default)" },
        { "-fsdp-straggler-window",
          f->straggler_window ? fsdp_hash(f->straggler_window, strlen(f->straggler_window)) : 0,
          f->straggler_window ? f->straggler_window : "(default)" },
        { "-fsdp-probe-cache", f->probe_cache ? fsdp_hash(f->probe_cache, strlen(f->probe_cache)) + 1 : 0,
          f->probe_cache ? f->probe_cache : "not given" },
        { "the data file, its train list or the -file text", data_hash, data },
    };
    return fsdp_agree_start(ctl, local, list, (int)(sizeof list / sizeof list[0]));
}
