/* fsdp_flags.h: the plugin's command-line flags (docs/DESIGN.md, "Command
 * line").  One table drives both parsing and -fsdp-help, so a flag cannot
 * exist without its line of help. */
#ifndef FSDP_FLAGS_H
#define FSDP_FLAGS_H

#include <stdio.h>
#include "fsdp.h"

/* -fsdp-trace-steps' and -fsdp-straggler-window's defaults, which the
 * table states and report/ (fsdp_observe.c) applies. */
#define FSDP_TRACE_FIRST_STEP 1
#define FSDP_TRACE_LAST_STEP 20
#define FSDP_STRAGGLE_WINDOW 10

/* What the command line asked of the plugin; NULL / 0 when not given. */
typedef struct fsdp_flags {
    const char *stats;     /* -fsdp-stats FILE */
    const char *log;       /* -fsdp-log FILE */
    int log_events;        /* -fsdp-log-events */
    const char *backend;   /* -fsdp-backend mpi|mpi-staged|nccl */
    const char *timeout;   /* -fsdp-timeout SECONDS (fsdp_watch.h) */
    const char *plan;      /* -fsdp-plan WORLDS (fsdp_worlds.h) */
    const char *budget;    /* -fsdp-budget MB, with -fsdp-plan */
    const char *link;      /* -fsdp-link MxL,MBIT[,MS], with -fsdp-plan (fsdp_linkplan.h) */
    int checkpoint;        /* -fsdp-checkpoint */
    const char *every;     /* -fsdp-checkpoint-every MINUTES (fsdp_clock.h) */
    const char *keep;      /* -fsdp-checkpoint-keep K */
    int resume;            /* -fsdp-resume */
    int resume_auto;       /* -fsdp-resume auto */
    int keep_batch;        /* -fsdp-keep-batch */
    const char *trace;     /* -fsdp-trace FILE (fsdp_trace.h) */
    const char *trace_steps;   /* -fsdp-trace-steps FIRST-LAST */
    const char *straggler_window;   /* -fsdp-straggler-window STEPS (fsdp_straggle.h) */
    const char *probe_cache; /* -fsdp-probe-cache off|DIR (fsdp_pcache.h) */
    int help;              /* -fsdp-help */
    int help_md;           /* -fsdp-help md */
} fsdp_flags;

typedef struct fsdp_flag {
    const char *name;      /* "-fsdp-stats" */
    const char *arg;       /* the value's name in help ("FILE"); NULL for a switch */
    const char *help;      /* one line */
    const char *dflt;      /* what holds where the flag is not given; NULL: nothing happens */
    size_t offset;         /* in fsdp_flags: a const char * with arg, an int without */
    const char *word;      /* a switch's one optional value ("auto"), which sets the int at word_offset */
    size_t word_offset;
} fsdp_flag;

extern const fsdp_flag fsdp_flag_table[];
extern const int fsdp_nflags;

/* Takes every -fsdp-* flag out of argv into *out.  An unknown -fsdp-* flag,
 * a missing value or a flag given twice is an error naming it. */
fsdp_status fsdp_flags_take(int *argc, char **argv, fsdp_flags *out);

/* The flags, the cfg keys and the plugin's environment, one line each
 * (-fsdp-help, `darknet help`; fsdp_help.c). */
void fsdp_help_print(FILE *f);

/* The same tables, and the whole environment table, as the markdown of the
 * reference pages (-fsdp-help md): sections that start with a line
 * "<!-- reference: NAME -->" (flags, keys-layer, keys-net, env). */
void fsdp_help_markdown(FILE *f);

#endif
