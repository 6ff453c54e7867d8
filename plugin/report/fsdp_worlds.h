/* fsdp_worlds.h: the worlds -fsdp-plan plans for (docs/DESIGN.md,
 * "Memory"): N alone is every world 1..N; otherwise a comma-separated list
 * of worlds and ranges A-B, e.g. `8,64,512` or `1-1024`. */
#ifndef FSDP_WORLDS_H
#define FSDP_WORLDS_H

#include "fsdp.h"

#define FSDP_WORLDS_MAX 4096

typedef struct fsdp_worlds {
    int n;
    int *world;   /* ascending, each once */
} fsdp_worlds;

/* Refused, naming the text, for anything but the forms above with worlds
 * from 1 to FSDP_WORLDS_MAX and ranges that do not run backwards. */
fsdp_status fsdp_worlds_parse(const char *text, fsdp_worlds *out);
void fsdp_worlds_free(fsdp_worlds *w);

#endif
