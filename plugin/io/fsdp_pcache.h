/* fsdp_pcache.h: the probe cache (docs/DESIGN.md, "The probe cache").
 *
 * When a classifier run's first layers are frozen and its input is one of
 * two variants of each image (itself, mirrored), the outputs of the frozen
 * prefix that the rest of the network reads are computed once per image
 * and variant, the ranks dividing the work, kept in a folder keyed by what
 * determines them (fsdp_pcache_key.h, fsdp_pcache_file.h), and reused by
 * later runs.  Training then starts each forward after the prefix: the
 * loader makes its usual random draws but decodes nothing, and hands each
 * row's image and flip to the cache (sample_input), which forward_start
 * turns into the prefix's outputs.  Where it does not apply, the run goes
 * on without it, rank 0 saying why in one line.
 *
 * States: off (the flag, or no frozen prefix) -> deciding (train_inputs,
 * collective) -> serving or unused.  Only serving answers the loader and
 * forward. */
#ifndef FSDP_PCACHE_H
#define FSDP_PCACHE_H

#include "darknet.h"
#include "fsdp_engine.h"
#include "fsdp_pcache_file.h"

typedef enum { FSDP_PCACHE_OFF = 0, FSDP_PCACHE_UNUSED, FSDP_PCACHE_SERVING } fsdp_pcache_state;

typedef struct fsdp_pcache_index {
    const char *path;    /* the train list's pointer, as the loader passes it */
    int image;
} fsdp_pcache_index;

typedef struct fsdp_pcache {
    fsdp_pcache_state state;
    int off;                 /* -fsdp-probe-cache off */
    int given;               /* -fsdp-probe-cache DIR */
    char command[32];        /* "detector train", ...: the command run */
    char *dir;               /* -fsdp-probe-cache DIR, or BACKUP/NAME.probe */
    char *cfg, *weights;     /* the cfg and weights file the network was built from */
    int machines;            /* the ranks' machines */
    int rank0;
    int k;                   /* the prefix's length */
    int nneed, *need;        /* the prefix's outputs served, in order */
    fsdp_pcache_index *index;
    int nimages;
    fsdp_pcache_manifest *m;
    fsdp_pcache_parts parts;
    float *row;              /* one variant's floats, read */
    int built;               /* built in this run (else reused) */
    double extract_s;
    double steps_from;       /* when serving began: the steps' seconds count from here */
} fsdp_pcache;

/* -fsdp-probe-cache's value (NULL: the default), and the command line. */
fsdp_status fsdp_pcache_init(fsdp_pcache *pc, const char *flag, int argc, char **argv);
/* At network_built, once the engine has it: the files the network came
 * from.  A command other than classifier train with a frozen prefix gets
 * rank 0's line that it runs without the cache. */
fsdp_status fsdp_pcache_note_built(fsdp_pcache *pc, fsdp_engine *e, const char *cfg, const char *weights);
/* train_inputs (collective): decides, builds or reuses; *serve set when
 * the loader's inputs are the cache's. */
fsdp_status fsdp_pcache_train_inputs(fsdp_pcache *pc, fsdp_engine *e, network *net, load_args *a, int *serve);
/* sample_input (loader threads). */
fsdp_status fsdp_pcache_sample_input(const fsdp_pcache *pc, const char *path, int flip, float *row, int cols);
/* forward_start: *start is the first layer to run. */
fsdp_status fsdp_pcache_forward_start(fsdp_pcache *pc, fsdp_engine *e, network *net, int *start);
/* What one image and variant holds in a cache for this network: the
 * floats of the frozen prefix's outputs served; 0 without a prefix
 * (-fsdp-plan's line). */
uint64_t fsdp_pcache_variant_floats(const fsdp_engine *e, const network *net);
/* Serving: the prediction's peak and PSS grow by the rank's buffer of one
 * variant (the files are read through the page cache, one copy for the
 * `ranks` of the machine, in no rank's resident set), which rank 0 says
 * with the files' size. */
void fsdp_pcache_predict(const fsdp_pcache *pc, size_t *peak, size_t *pss, int ranks);
/* "off", "unused", "built" or "reused"; the files' bytes (0 unless
 * serving); the steps' seconds so far. */
const char *fsdp_pcache_state_str(const fsdp_pcache *pc);
uint64_t fsdp_pcache_bytes(const fsdp_pcache *pc);
double fsdp_pcache_steps_s(const fsdp_pcache *pc);
/* Rank 0's closing line: the steps' seconds after the extraction. */
void fsdp_pcache_report(const fsdp_pcache *pc, int rank);
void fsdp_pcache_free(fsdp_pcache *pc);

#endif
