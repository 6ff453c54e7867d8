/* The plugin's flags: parsed from, and documented by, one table. */
#include <stddef.h>
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_clock.h"
#include "fsdp_watch.h"
#include "fsdp_flags.h"

#define VALUE(field) offsetof(fsdp_flags, field)

const fsdp_flag fsdp_flag_table[] = {
    { "-fsdp-stats", "FILE", "rank 0 writes a JSON summary at exit: groups, bytes moved, memory", NULL, VALUE(stats), NULL, 0 },
    { "-fsdp-log", "FILE", "rank 0 writes one JSON line per training step (loss, lr, images/s, bytes, RSS)", NULL,
      VALUE(log), NULL, 0 },
    { "-fsdp-log-events", NULL, "with -fsdp-log: each line also lists when the step's gathers, reduces, optimizer steps "
      "and exchanges between machines ran, and each window's last line every rank's compute seconds", NULL,
      VALUE(log_events), NULL, 0 },
    { "-fsdp-trace", "FILE", "rank 0 writes a window of steps (-fsdp-trace-steps) as a trace that Perfetto and "
      "chrome://tracing open: every rank's compute, step plan and collectives, with bytes and memory", NULL,
      VALUE(trace), NULL, 0 },
    { "-fsdp-trace-steps", "FIRST-LAST", "with -fsdp-trace: the steps it holds (N: 1-N); rank 0 writes the file when "
      "the last has run, or at exit", FSDP_STR(FSDP_TRACE_FIRST_STEP) "-" FSDP_STR(FSDP_TRACE_LAST_STEP),
      VALUE(trace_steps), NULL, 0 },
    { "-fsdp-straggler-window", "STEPS", "the ranks share each one's compute seconds every STEPS steps; rank 0 names a "
      "rank at 1.25x the median or more (0: off)", FSDP_STR(FSDP_STRAGGLE_WINDOW), VALUE(straggler_window), NULL, 0 },
    { "-fsdp-backend", "mpi|mpi-staged|nccl", "the collectives: mpi on the host; on a GPU nccl (one GPU per rank) or "
      "mpi-staged (MPI through host memory)", "mpi on the host, nccl on a GPU", VALUE(backend), NULL, 0 },
    { "-fsdp-timeout", "SECONDS", "a collective that waits this long for another rank stops every rank (0: never)",
      FSDP_STR(FSDP_WATCH_DEFAULT_S), VALUE(timeout), NULL, 0 },
    { "-fsdp-checkpoint", NULL, "each rank also saves its shards and optimizer state beside every weights file", NULL,
      VALUE(checkpoint), NULL, 0 },
    { "-fsdp-checkpoint-every", "MINUTES", "also write a checkpoint at the first step after each MINUTES (in the "
      "background) into BACKUP/NAME.fsdp", NULL, VALUE(every), NULL, 0 },
    { "-fsdp-checkpoint-keep", "K", "with -fsdp-checkpoint-every: keep the newest K complete ones",
      FSDP_STR(FSDP_CLOCK_DEFAULT_KEEP), VALUE(keep), NULL, 0 },
    { "-fsdp-resume", NULL, "load the shard checkpoints beside the weights file given; auto: the newest complete one of "
      "-fsdp-checkpoint-every, or start afresh", NULL, VALUE(resume), "auto", VALUE(resume_auto) },
    { "-fsdp-keep-batch", NULL, "resuming on another number of ranks: keep the checkpoint's global batch (more "
      "subdivisions per rank)", NULL, VALUE(keep_batch), NULL, 0 },
    { "-fsdp-plan", "WORLDS", "with a cfg after it: print the memory each rank needs for each shard strategy at each "
      "world of WORLDS (N: 1..N; or a list of worlds, ranges and machines MxL, e.g. 8,64,512, 1-1024 or 4,8x4), and "
      "exit", NULL, VALUE(plan), NULL, 0 },
    { "-fsdp-budget", "MB", "with -fsdp-plan: also print, for each number of ranks, without and with recompute=1, "
      "the fewest subdivisions whose predicted peak per rank fits MB", NULL, VALUE(budget), NULL, 0 },
    { "-fsdp-link", "MxL,MBIT[,MS]|probe", "with -fsdp-plan: also print a step's time on M machines of L ranks over a "
      "link of MBIT Mbit/s (MS ms latency) for each strategy and shard_wire; probe, under mpirun: the ranks' own "
      "machines and link, measured", NULL, VALUE(link), NULL, 0 },
    { "-fsdp-probe-cache", "off|DIR", "classifier train with frozen first layers and fixed input: their outputs are "
      "computed once per image into DIR and reused; off: every step runs them", "on where it applies, into "
      "BACKUP/NAME.probe", VALUE(probe_cache), NULL, 0 },
    { "-fsdp-help", NULL, "print this help and exit; md: the reference in markdown (tools/reference writes the docs "
      "from it)", NULL, VALUE(help), "md", VALUE(help_md) },
};
const int fsdp_nflags = (int)(sizeof fsdp_flag_table / sizeof fsdp_flag_table[0]);

static const fsdp_flag *find(const char *name)
{
    for (int i = 0; i < fsdp_nflags; ++i)
        if (!strcmp(fsdp_flag_table[i].name, name)) return &fsdp_flag_table[i];
    return NULL;
}

/* Edit distance, to name the flag a typo meant. */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(b);
    int row[64];
    if (n >= 64) return 99;
    for (size_t j = 0; j <= n; ++j) row[j] = (int)j;
    for (size_t i = 1; *a; ++a, ++i) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= n; ++j) {
            int up = row[j], best = diag + (*a != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[n];
}

static fsdp_status unknown(const char *name)
{
    const fsdp_flag *near = NULL;
    int best = 3;   /* at most two edits away */
    for (int i = 0; i < fsdp_nflags; ++i) {
        int d = distance(name, fsdp_flag_table[i].name);
        if (d < best) { best = d; near = &fsdp_flag_table[i]; }
    }
    char known[512] = "";
    for (int i = 0; i < fsdp_nflags; ++i) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, fsdp_flag_table[i].name, sizeof known - strlen(known) - 1);
    }
    if (near)
        return fsdp_fail(FSDP_ERR_CONFIG, "unknown flag %s: did you mean %s? (-fsdp-help lists the flags)", name,
                         near->name);
    return fsdp_fail(FSDP_ERR_CONFIG, "unknown flag %s (the plugin's flags: %s)", name, known);
}

fsdp_status fsdp_flags_take(int *argc, char **argv, fsdp_flags *out)
{
    memset(out, 0, sizeof *out);
    char seen[sizeof fsdp_flag_table / sizeof fsdp_flag_table[0]] = { 0 };
    int i = 1;
    while (i < *argc) {
        if (strncmp(argv[i], "-fsdp", 5)) { ++i; continue; }
        const fsdp_flag *f = find(argv[i]);
        if (!f) return unknown(argv[i]);
        if (seen[f - fsdp_flag_table]++) return fsdp_fail(FSDP_ERR_CONFIG, "%s is given twice", f->name);
        int n = 1;
        char *field = (char *)out + f->offset;
        if (f->arg) {
            if (i + 1 >= *argc || !strncmp(argv[i + 1], "-fsdp", 5))
                return fsdp_fail(FSDP_ERR_CONFIG, "%s needs a value (%s)", f->name, f->arg);
            *(const char **)field = argv[i + 1];
            n = 2;
        } else {
            *(int *)field = 1;
            if (f->word && i + 1 < *argc && !strcmp(argv[i + 1], f->word)) {
                *(int *)((char *)out + f->word_offset) = 1;
                n = 2;
            }
        }
        for (int j = i; j + n <= *argc; ++j) argv[j] = argv[j + n];
        *argc -= n;
        argv[*argc] = NULL;
    }
    return FSDP_OK;
}
