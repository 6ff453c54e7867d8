#include <stdlib.h>
#include <string.h>
#include "fsdp_worlds.h"

/* A world at *p, advancing it; 0 where there is none in range. */
static long world_at(const char **p)
{
    char *end;
    if (**p < '0' || **p > '9') return 0;
    long v = strtol(*p, &end, 10);
    *p = end;
    return v >= 1 && v <= FSDP_WORLDS_MAX ? v : 0;
}

/* Marks in `on` the worlds of text; 0 where it is malformed. */
static int mark(const char *text, unsigned char *on)
{
    const char *p = text;
    long lone = world_at(&p);
    if (lone && !*p) {   /* N alone: 1..N, as -fsdp-plan has always read it */
        memset(on + 1, 1, (size_t)lone);
        return 1;
    }
    for (p = text;; ++p) {
        long a = world_at(&p), b = a;
        if (a && *p == '-') {
            ++p;
            b = world_at(&p);
        }
        if (!a || !b || b < a) return 0;
        memset(on + a, 1, (size_t)(b - a + 1));
        if (!*p) return 1;
        if (*p != ',') return 0;
    }
}

fsdp_status fsdp_worlds_parse(const char *text, fsdp_worlds *out)
{
    *out = (fsdp_worlds){ 0 };
    unsigned char *on = calloc(FSDP_WORLDS_MAX + 1, 1);
    if (!on) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (!text || !mark(text, on)) {
        free(on);
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan %s: expected a number of ranks from 1 to %d (N: every world "
                         "1..N), or a list of them and ranges A-B, e.g. 8,64,512 or 1-1024", text ? text : "",
                         FSDP_WORLDS_MAX);
    }
    int n = 0;
    for (int w = 1; w <= FSDP_WORLDS_MAX; ++w) n += on[w];
    out->world = malloc((size_t)n * sizeof *out->world);
    if (!out->world) {
        free(on);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    for (int w = 1; w <= FSDP_WORLDS_MAX; ++w)
        if (on[w]) out->world[out->n++] = w;
    free(on);
    return FSDP_OK;
}

void fsdp_worlds_free(fsdp_worlds *w)
{
    free(w->world);
    *w = (fsdp_worlds){ 0 };
}
