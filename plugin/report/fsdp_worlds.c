#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_worlds.h"

/* A number at *p from 1 to FSDP_WORLDS_MAX, advancing it; 0 where there is none. */
static long world_at(const char **p)
{
    char *end;
    if (**p < '0' || **p > '9') return 0;
    long v = strtol(*p, &end, 10);
    *p = end;
    return v >= 1 && v <= FSDP_WORLDS_MAX ? v : 0;
}

/* The worlds of a text as read so far. */
typedef struct marks {
    unsigned char *one;    /* one[w]: world w on one machine */
    int *m, *l, n;         /* several machines: m[k] of l[k] ranks (fewer items than characters) */
} marks;

/* One item at *p: a world, a range A-B or machines MxL. */
static int item(const char **p, marks *k)
{
    long a = world_at(p), b = a;
    if (a && **p == 'x') {
        ++*p;
        b = world_at(p);
        if (!b || a * b > FSDP_WORLDS_MAX) return 0;
        if (a == 1) k->one[b] = 1;
        else {
            k->m[k->n] = (int)a;
            k->l[k->n++] = (int)b;
        }
        return 1;
    }
    if (a && **p == '-') {
        ++*p;
        b = world_at(p);
    }
    if (!a || !b || b < a) return 0;
    memset(k->one + a, 1, (size_t)(b - a + 1));
    return 1;
}

/* Marks the worlds of text in k; 0 where it is malformed. */
static int mark(const char *text, marks *k)
{
    const char *p = text;
    long lone = world_at(&p);
    if (lone && !*p) {   /* N alone: 1..N, as -fsdp-plan has always read it */
        memset(k->one + 1, 1, (size_t)lone);
        return 1;
    }
    for (p = text;; ++p) {
        if (!item(&p, k)) return 0;
        if (!*p) return 1;
        if (*p != ',') return 0;
    }
}

static int by_world(const void *a, const void *b)
{
    const int *x = a, *y = b;   /* pairs: world, machines */
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The entries, sorted, each once. */
static fsdp_status collect(const marks *k, fsdp_worlds *out)
{
    int cap = k->n + FSDP_WORLDS_MAX, n = 0;
    int *pair = malloc((size_t)cap * 2 * sizeof *pair);
    if (!pair) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int w = 1; w <= FSDP_WORLDS_MAX; ++w)
        if (k->one[w]) pair[2 * n] = w, pair[2 * n++ + 1] = 1;
    for (int i = 0; i < k->n; ++i) pair[2 * n] = k->m[i] * k->l[i], pair[2 * n++ + 1] = k->m[i];
    qsort(pair, (size_t)n, 2 * sizeof *pair, by_world);
    out->world = malloc((size_t)n * sizeof *out->world);
    out->machines = malloc((size_t)n * sizeof *out->machines);
    fsdp_status s = out->world && out->machines ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && s == FSDP_OK; ++i) {
        if (out->n && out->world[out->n - 1] == pair[2 * i] && out->machines[out->n - 1] == pair[2 * i + 1]) continue;
        out->world[out->n] = pair[2 * i];
        out->machines[out->n++] = pair[2 * i + 1];
    }
    free(pair);
    return s;
}

fsdp_status fsdp_worlds_parse(const char *text, fsdp_worlds *out)
{
    *out = (fsdp_worlds){ 0 };
    size_t len = text ? strlen(text) : 0;
    marks k = { calloc(FSDP_WORLDS_MAX + 1, 1), malloc((len + 1) * sizeof(int)), malloc((len + 1) * sizeof(int)), 0 };
    fsdp_status s = k.one && k.m && k.l ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK && (!text || !mark(text, &k)))
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan %s: expected a number of ranks from 1 to %d (N: every world "
                      "1..N), or a list of them, ranges A-B and machines MxL (M machines of L ranks), e.g. 8,64,512, "
                      "1-1024 or 4,8x4", text ? text : "", FSDP_WORLDS_MAX);
    if (s == FSDP_OK) s = collect(&k, out);
    free(k.one);
    free(k.m);
    free(k.l);
    if (s != FSDP_OK) fsdp_worlds_free(out);
    return s;
}

void fsdp_worlds_label(const fsdp_worlds *w, int i, char *buf, size_t cap)
{
    if (w->machines[i] > 1) snprintf(buf, cap, "%dx%d", w->machines[i], w->world[i] / w->machines[i]);
    else snprintf(buf, cap, "%d", w->world[i]);
}

void fsdp_worlds_free(fsdp_worlds *w)
{
    free(w->world);
    free(w->machines);
    *w = (fsdp_worlds){ 0 };
}
