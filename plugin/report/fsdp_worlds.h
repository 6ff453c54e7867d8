/* fsdp_worlds.h: the worlds -fsdp-plan plans for (docs/DESIGN.md,
 * "Memory"): N alone is every world 1..N; otherwise a comma-separated list
 * of worlds, ranges A-B and machines MxL (M machines of L ranks each, as
 * -fsdp-link reads them), e.g. `8,64,512`, `1-1024` or `4,8x4`. */
#ifndef FSDP_WORLDS_H
#define FSDP_WORLDS_H

#include "fsdp.h"

#define FSDP_WORLDS_MAX 4096

typedef struct fsdp_worlds {
    int n;
    int *world;      /* ranks in all, ascending, each once per number of machines */
    int *machines;   /* world[i] / machines[i] ranks on each; 1 (one machine) before several of that world */
} fsdp_worlds;

/* Refused, naming the text, for anything but the forms above with worlds
 * (M x L too) from 1 to FSDP_WORLDS_MAX and ranges that do not run
 * backwards.  1xL is the world L. */
fsdp_status fsdp_worlds_parse(const char *text, fsdp_worlds *out);
/* Entry i as the table names it: "N", or "MxL" on several machines. */
void fsdp_worlds_label(const fsdp_worlds *w, int i, char *buf, size_t cap);
void fsdp_worlds_free(fsdp_worlds *w);

#endif
