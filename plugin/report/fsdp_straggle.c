/* The slow rank named (fsdp_straggle.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_straggle.h"
#include "fsdp_timeline.h"
#include "fsdp_watch.h"

#define NAME_WORDS 8   /* a host name in the sharing: 64 bytes as uint64_t */

/* Each rank's host name, in one max over ranks: a rank fills its own
 * words, the others are zero. */
static fsdp_status share_hosts(fsdp_straggle *s, fsdp_ctl *ctl)
{
    uint64_t *w = calloc((size_t)s->world * NAME_WORDS, sizeof *w);
    if (!w) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    char mine[64] = "";
    gethostname(mine, sizeof mine - 1);
    memcpy(w + (size_t)s->rank * NAME_WORDS, mine, sizeof mine);
    fsdp_status st = fsdp_ctl_max_u64(ctl, w, (size_t)s->world * NAME_WORDS);
    for (int r = 0; st == FSDP_OK && r < s->world; ++r) {
        memcpy(s->host[r], w + (size_t)r * NAME_WORDS, sizeof s->host[r]);
        s->host[r][63] = 0;
    }
    free(w);
    return st;
}

fsdp_status fsdp_straggle_open(fsdp_straggle *s, fsdp_ctl *ctl, int window)
{
    memset(s, 0, sizeof *s);
    s->rank = ctl->rank;
    s->world = ctl->world;
    s->window = window;
    size_t w = (size_t)s->world;
    s->rows = calloc(w * (size_t)window, sizeof *s->rows);
    s->median = calloc(w, sizeof *s->median);
    s->total = calloc(w, sizeof *s->total);
    s->since = calloc(w, sizeof *s->since);
    s->host = calloc(w, sizeof *s->host);
    if (!s->rows || !s->median || !s->total || !s->since || !s->host) {
        fsdp_straggle_free(s);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    s->on = 1;
    return share_hosts(s, ctl);
}

void fsdp_straggle_start(fsdp_straggle *s, double t)
{
    s->t_last = t;
    s->inside_last = fsdp_watch_seconds();
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Rank 0, after a window was shared: each rank's median, and the lines. */
static void judge(fsdp_straggle *s, size_t last)
{
    double *m = malloc((size_t)s->world * sizeof *m), *row = malloc((size_t)s->window * sizeof *row);
    if (!m || !row) { free(m); free(row); return; }
    for (int r = 0; r < s->world; ++r) {
        memcpy(row, s->rows + (size_t)r * s->window, (size_t)s->window * sizeof *row);
        for (int k = 0; k < s->window; ++k) s->total[r] += row[k];
        s->median[r] = m[r] = median_of(row, s->window);
    }
    double all = median_of(m, s->world);
    for (int r = 0; r < s->world; ++r) {
        int slow = all > 0 && s->median[r] >= FSDP_STRAGGLE_RATIO * all;
        if (!slow) { s->since[r] = 0; continue; }
        if (!s->since[r]) s->since[r] = s->first;
        if (s->rank == 0)
            fprintf(stderr, "fsdp: straggler: rank %d (host %s) computes %.2fx the median of the ranks (%.3f s a "
                    "step, median %.3f s) over steps %zu-%zu, slow since step %zu\n", r, s->host[r],
                    s->median[r] / all, s->median[r], all, s->first, last, s->since[r]);
        s->named++;
    }
    free(m);
    free(row);
}

fsdp_status fsdp_straggle_step(fsdp_straggle *s, fsdp_ctl *ctl, size_t step, double t)
{
    s->fresh = 0;
    if (!s->on) return FSDP_OK;
    double inside = fsdp_watch_seconds(), compute = (t - s->t_last) - (inside - s->inside_last);
    if (s->n == 0) s->first = step;
    s->rows[(size_t)s->rank * s->window + s->n++] = compute > 0 ? compute : 0;
    if (s->n == s->window) {
        /* Every other rank's row zero: the sum is every rank's row. */
        size_t mine = (size_t)s->rank * s->window, all = (size_t)s->world * s->window;
        memset(s->rows, 0, mine * sizeof *s->rows);
        memset(s->rows + mine + s->window, 0, (all - mine - s->window) * sizeof *s->rows);
        FSDP_TRY(fsdp_ctl_sum_f64(ctl, s->rows, all));
        judge(s, step);
        s->windows++;
        s->fresh = 1;
        s->n = 0;
    }
    return FSDP_OK;
}

void fsdp_straggle_write_stats(FILE *f, const fsdp_straggle *s)
{
    if (!s->on) return;
    fputs(" \"compute_s\": [", f);
    for (int r = 0; r < s->world; ++r) fprintf(f, "%s%.6f", r ? ", " : "", s->total[r]);
    fprintf(f, "], \"compute_steps\": %d, \"straggler_window\": %d, \"stragglers_named\": %d,\n",
            s->windows * s->window, s->window, s->named);
}

void fsdp_straggle_free(fsdp_straggle *s)
{
    free(s->rows);
    free(s->median);
    free(s->total);
    free(s->since);
    free(s->host);
    memset(s, 0, sizeof *s);
}
