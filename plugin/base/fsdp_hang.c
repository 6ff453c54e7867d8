/* Who holds a hung job up (fsdp_hang.h). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_hang.h"
#include "fsdp_ring.h"

/* A rank whose watchdog thread has not stamped its ring for this long is
 * stopped or dead: the thread stamps it every 0.2 s. */
#define STALE_S 5.0

typedef struct rank_state {
    int read;                /* its ring could be read */
    fsdp_ring_header h;
    fsdp_ring_entry last;    /* seq 0: none recorded */
    int stale, culprit;
} rank_state;

static void read_rank(const char *stem, int r, double now, fsdp_ring_entry *buf, rank_state *st)
{
    char path[4096];
    int n = 0;
    snprintf(path, sizeof path, "%s.ring.%d", stem, r);
    memset(st, 0, sizeof *st);
    st->read = fsdp_ring_read(path, &st->h, buf, &n) == FSDP_OK;
    if (st->read && n > 0) st->last = buf[n - 1];
    st->stale = !st->read || now - st->h.beat > STALE_S;
}

/* Appends to OUT (N bytes) at *LEN, cut where it would not fit. */
__attribute__((format(printf, 4, 5))) static void add(char *out, size_t n, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + *len, n - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k;
    if (*len >= n) *len = n - 1;
}

/* "rank 3", "ranks 0-2 and 4-7": the ranks where PICK[r] is set. */
static void rank_list(const int *pick, int world, char *out, size_t n)
{
    size_t len = 0;
    int count = 0;
    for (int r = 0; r < world; ++r) count += pick[r] != 0;
    snprintf(out, n, "%s", count == 1 ? "rank " : "ranks ");
    len = strlen(out);
    for (int r = 0, runs = 0; r < world && len < n; ++r) {
        if (!pick[r] || (r > 0 && pick[r - 1])) continue;
        int e = r;
        while (e + 1 < world && pick[e + 1]) ++e;
        int k = e > r ? snprintf(out + len, n - len, "%s%d-%d", runs++ ? " and " : "", r, e)
                      : snprintf(out + len, n - len, "%s%d", runs++ ? " and " : "", r);
        if (k > 0) len += (size_t)k;
    }
}

/* Where a rank is, from its last collective. */
static void where_text(const rank_state *s, double now, char *out, size_t n)
{
    const fsdp_ring_entry *e = &s->last;
    if (!s->read) snprintf(out, n, "left no ring here");
    else if (!e->seq) snprintf(out, n, "recorded no collective");
    else if (e->t1 < 0) snprintf(out, n, "in %s %s since %.0f s", e->what, e->where, now - e->t0);
    else snprintf(out, n, "outside the collectives since %.0f s, after %s %s", now - e->t1, e->what, e->where);
}

/* Which ranks hold the others up: those without a sign of life, else
 * those that entered the fewest collectives (none where all are equal). */
static void find_culprits(rank_state *st, int world)
{
    int any = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < world; ++r) {
        any |= st[r].stale;
        if (st[r].last.seq < lo) lo = st[r].last.seq;
        if (st[r].last.seq > hi) hi = st[r].last.seq;
    }
    for (int r = 0; r < world; ++r) st[r].culprit = any ? st[r].stale : lo < hi && st[r].last.seq == lo;
}

static int same_place(const rank_state *a, const rank_state *b)
{
    return a->read == b->read && (a->last.t1 < 0) == (b->last.t1 < 0) && !strcmp(a->last.what, b->last.what) &&
           !strcmp(a->last.where, b->last.where);
}

/* The ranks not to blame, by where they are: "ranks 0-2 wait in ...".
 * TOLD and GROUP: WORLD ints each, zero. */
static void add_others(const rank_state *st, int world, double now, int *told, int *group, char *out, size_t n,
                       size_t *len)
{
    for (int r = 0; r < world; ++r) {
        if (st[r].culprit || told[r]) continue;
        double since = 0;
        for (int q = 0; q < world; ++q) {
            group[q] = q >= r && !st[q].culprit && !told[q] && same_place(&st[r], &st[q]);
            const fsdp_ring_entry *e = &st[q].last;
            double t = e->t1 < 0 ? now - e->t0 : now - e->t1;
            if (group[q] && t > since) since = t;
            told[q] |= group[q];
        }
        char who[256], where[256];
        rank_list(group, world, who, sizeof who);
        const fsdp_ring_entry *e = &st[r].last;
        if (!st[r].read || !e->seq) where_text(&st[r], now, where, sizeof where);
        int one = !strncmp(who, "rank ", 5);
        if (e->t1 < 0) snprintf(where, sizeof where, "%s in %s %s", one ? "waits" : "wait", e->what, e->where);
        else snprintf(where, sizeof where, "%s outside the collectives, after %s %s", one ? "is" : "are", e->what,
                      e->where);
        add(out, n, len, "; %s %s", who, where);
        if (st[r].read && e->seq) add(out, n, len, " since %.0f s", since);
    }
}

fsdp_status fsdp_hang_summary(const char *stem, int world, double now, char *out, size_t n)
{
    rank_state *st = calloc((size_t)world, sizeof *st);
    fsdp_ring_entry *buf = malloc(FSDP_RING_ENTRIES * sizeof *buf);
    int *pick = calloc(2 * (size_t)world, sizeof *pick);   /* told, group */
    if (!st || !buf || !pick) {
        free(st); free(buf); free(pick);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < world; ++r) read_rank(stem, r, now, buf, &st[r]);
    find_culprits(st, world);
    size_t len = 0;
    out[0] = 0;
    for (int r = 0; r < world; ++r) {
        if (!st[r].culprit) continue;
        char where[256], who[100];
        where_text(&st[r], now, where, sizeof where);
        snprintf(who, sizeof who, "rank %d (host %s)", r, st[r].read ? st[r].h.host : "?");
        /* A ring not read: the rank never wrote one, or it is on another machine's disk. */
        if (!st[r].read) add(out, n, &len, "%srank %d left no ring here", len ? "; " : "", r);
        else add(out, n, &len, "%s%s is %s", len ? "; " : "", who, where);
        if (st[r].read && st[r].stale) add(out, n, &len, ", with no sign of life for %.0f s", now - st[r].h.beat);
    }
    if (!len) add(out, n, &len, "no rank is behind the others");
    add_others(st, world, now, pick, pick + world, out, n, &len);
    free(st);
    free(buf);
    free(pick);
    return FSDP_OK;
}

int fsdp_hang_report(const char *stem, int world)
{
    char path[4096], line[2048];
    snprintf(path, sizeof path, "%s.hang", stem);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return 0;
    if (fsdp_hang_summary(stem, world, fsdp_ring_now(), line, sizeof line - 64) != FSDP_OK)
        snprintf(line, sizeof line, "could not read the rings");
    char msg[2200];
    int k = snprintf(msg, sizeof msg, "fsdp: hang: %s (the rings: %s.ring.{0..%d})\n", line, stem, world - 1);
    if (k > (int)sizeof msg - 1) k = (int)sizeof msg - 1;
    if (k > 0) {
        (void)!write(fd, msg, (size_t)k);
        (void)!write(2, msg, (size_t)k);
    }
    close(fd);
    return 1;
}
