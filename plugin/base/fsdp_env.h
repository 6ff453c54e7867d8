/* fsdp_env.h: every environment variable the project reads, in one table:
 * the plugin's, the launcher's it looks at, Darknet's, the tools' and the
 * CMake options.  -fsdp-help and docs/environment.md (tools/reference)
 * print from it, and tests/test_reference.sh fails on a variable read in
 * plugin/, darknet/src/, patches/ or tools/ that it lacks. */
#ifndef FSDP_ENV_H
#define FSDP_ENV_H

/* Who reads a variable, which says who sets it and how it reaches a rank. */
typedef enum {
    FSDP_ENV_PLUGIN = 0,  /* the plugin, on every rank */
    FSDP_ENV_LAUNCHER,    /* set by mpirun, srun or the system; the plugin only looks */
    FSDP_ENV_DARKNET,     /* the project's Darknet (darknet/src, patches/) */
    FSDP_ENV_TOOLS,       /* a program in tools/ */
    FSDP_ENV_CMAKE,       /* a CMake option: -DNAME=VALUE, or FSDP_CMAKE_ARGS for tools/setup */
    FSDP_ENV_NSCOPES
} fsdp_env_scope;

typedef struct fsdp_env_var {
    const char *name;
    fsdp_env_scope scope;
    const char *values;   /* "0|1", "N", "DIR", ... */
    const char *dflt;     /* what holds where it is unset */
    const char *pass;     /* how it reaches the ranks: "-x on several machines", "no", ... */
    int tests_only;       /* for the tests, not for users */
    const char *help;     /* one line */
} fsdp_env_var;

extern const fsdp_env_var fsdp_env_table[];
extern const int fsdp_nenv;

/* The table's entry for NAME, or NULL. */
const fsdp_env_var *fsdp_env_find(const char *name);

/* getenv(NAME) for a name of the table; a name it lacks is a bug, said on
 * stderr once per call and read as unset. */
const char *fsdp_env(const char *name);

/* A 0|1 variable: unset or empty gives the table's default, "0" gives 0,
 * any other value 1. */
int fsdp_env_switch(const char *name);

/* A whole number: unset, empty or not a number gives the table's default. */
long fsdp_env_long(const char *name);

#endif
