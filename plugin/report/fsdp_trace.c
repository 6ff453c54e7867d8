/* -fsdp-trace (fsdp_trace.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_timeline.h"
#include "fsdp_trace.h"

#define MOST_EVENTS (1u << 22)   /* per rank: 4 M events, 320 MB, bounds a window too wide */
#define ALIGN_ROUNDS 5
#define LANES 16                 /* threads per track at most */

fsdp_status fsdp_trace_parse_steps(const char *text, int *first, int *last)
{
    char *end = NULL;
    long a = strtol(text, &end, 10), b = a;
    if (end != text && *end == '-') b = strtol(end + 1, &end, 10);
    else a = 1;
    if (end == text || *end || a < 1 || b < a || b > 100000000)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-trace-steps %s: expected FIRST-LAST (steps, from 1: 21-40) or "
                         "N (steps 1-N)", text);
    *first = (int)a;
    *last = (int)b;
    return FSDP_OK;
}

/* This rank's clock against rank 0's: in each round rank 0 sends its time
 * A, each rank reads its own B on receiving it, and rank 0 reads C after a
 * barrier that every rank entered after B; so B fell between A and C on
 * rank 0's clock, and (A + C) / 2 - B is the offset within (C - A) / 2.
 * The round with the least C - A is kept, the same on every rank. */
static fsdp_status align(fsdp_trace *t, fsdp_ctl *ctl)
{
    double best = INFINITY;
    for (int k = 0; k < ALIGN_ROUNDS; ++k) {
        FSDP_TRY(fsdp_ctl_barrier(ctl));
        double a = fsdp_tl_clock();
        FSDP_TRY(fsdp_ctl_broadcast(ctl, &a, sizeof a, 0));
        double b = fsdp_tl_clock();
        FSDP_TRY(fsdp_ctl_barrier(ctl));
        double c = fsdp_tl_clock();
        FSDP_TRY(fsdp_ctl_broadcast(ctl, &c, sizeof c, 0));
        if (c - a < best) {
            best = c - a;
            t->offset = t->rank == 0 ? 0 : 0.5 * (a + c) - b;
            t->t_start = c;
        }
    }
    t->error_s = 0.5 * best;   /* every rank's, the same round */
    return FSDP_OK;
}

fsdp_status fsdp_trace_open(fsdp_trace *t, const char *path, int first, int last, fsdp_ctl *ctl)
{
    memset(t, 0, sizeof *t);
    t->rank = ctl->rank;
    t->world = ctl->world;
    t->first = first;
    t->last = last;
    t->step = 0;   /* recording from the first step (fsdp_observe_start) */
    if (path && !(t->path = strdup(path))) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    t->on = 1;
    return ctl->world > 1 ? align(t, ctl) : FSDP_OK;
}

int fsdp_trace_recording(const fsdp_trace *t)
{
    return t->on && !t->written && t->step >= t->first && t->step <= t->last;
}

static fsdp_trace_ev *room(fsdp_trace *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4096;
        fsdp_trace_ev *ev = cap <= MOST_EVENTS ? realloc(t->ev, cap * sizeof *ev) : NULL;
        if (!ev) return NULL;   /* the file says how many it holds */
        t->ev = ev;
        t->cap = cap;
    }
    return &t->ev[t->n++];
}

void fsdp_trace_add(fsdp_trace *t, const char *name, fsdp_track track, int arg, double t0, double t1,
                    uint64_t bytes, uint64_t bytes_in)
{
    if (!fsdp_trace_recording(t)) return;
    fsdp_trace_ev *e = room(t);
    if (!e) return;
    *e = (fsdp_trace_ev){ .track = track, .arg = arg, .step = t->step, .rank = t->rank, .t0 = t0 + t->offset,
                          .t1 = t1 + t->offset, .bytes = bytes, .bytes_in = bytes_in };
    snprintf(e->name, sizeof e->name, "%s", name);
}

/* Rank R's events to rank 0, for each R > 0 in turn. */
static fsdp_status gather_events(fsdp_trace *t, fsdp_ctl *ctl)
{
    for (int r = 1; r < t->world; ++r) {
        uint64_t n = t->rank == r ? t->n : 0;
        FSDP_TRY(fsdp_ctl_broadcast(ctl, &n, sizeof n, r));
        fsdp_trace_ev *buf = NULL;
        if (t->rank == r) buf = t->ev;
        else if (t->rank == 0 && t->n + n <= t->cap) buf = t->ev + t->n;
        else if (t->rank == 0 && (buf = realloc(t->ev, (t->n + n + 1) * sizeof *buf))) {
            t->ev = buf;
            t->cap = t->n + n + 1;
            buf = t->ev + t->n;
        } else if (t->rank != 0) buf = malloc((n + 1) * sizeof *buf);
        FSDP_TRY(fsdp_ctl_all_ok(ctl, buf ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "no memory for the trace's events"),
                                 FSDP_ERR_NOMEM, "had no memory for the trace's events"));
        fsdp_status s = n ? fsdp_ctl_broadcast(ctl, buf, n * sizeof *buf, r) : FSDP_OK;
        if (t->rank == 0) t->n += n;
        else if (t->rank != r) free(buf);
        FSDP_TRY(s);
    }
    return FSDP_OK;
}

static int by_track_time(const void *pa, const void *pb)
{
    const fsdp_trace_ev *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank - b->rank;
    if (a->track != b->track) return a->track - b->track;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    return (a->t1 < b->t1) - (a->t1 > b->t1);   /* the longer first: the shorter nests in it */
}

static long long ns(double seconds) { return llround(seconds * 1e9); }

/* A track's threads, each a stack of the ends of the events open on it. */
#define DEPTH 8
typedef struct lanes {
    long long end[LANES][DEPTH];
    int depth[LANES];
    int used;
} lanes;

/* A thread for each event (sorted by start, the longer first): the first
 * lane where it follows the events open there or nests in the innermost;
 * -1 where none is (dropped). */
static int lane_of(lanes *L, long long a, long long b)
{
    for (int k = 0; k < LANES; ++k) {
        int *d = &L->depth[k];
        while (*d > 0 && L->end[k][*d - 1] <= a) --*d;
        if (*d == DEPTH || (*d > 0 && b > L->end[k][*d - 1])) continue;
        L->end[k][(*d)++] = b;
        if (k >= L->used) L->used = k + 1;
        return k;
    }
    return -1;
}

static const char *const track_name[] = { "compute", "step plan", "collectives", "memory", "checkpoint writer" };

/* TEXT as a JSON string's contents. */
static void put_text(FILE *f, const char *text)
{
    for (const char *c = text; *c; ++c) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        if ((unsigned char)*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
}

/* Microseconds, to the nanosecond: a start plus its duration is the end
 * exactly, so that events that follow one another never seem to overlap. */
static void put_us(FILE *f, const char *key, long long t)
{
    fprintf(f, ", \"%s\": %lld.%03lld", key, t / 1000, t % 1000);
}

static void put_event(FILE *f, const fsdp_trace_ev *e, int tid, double t_start, fsdp_trace_group_fn group_name,
                      const void *ctx)
{
    long long a = ns(e->t0 - t_start), b = ns(e->t1 - t_start);
    const char *group = e->track == FSDP_TRACK_PLAN && e->arg >= 0 ? group_name(ctx, e->arg) : NULL;
    fputs(",\n{\"name\": \"", f);
    put_text(f, e->name);
    if (group) fputc(' ', f), put_text(f, group);
    else if (e->track == FSDP_TRACK_COMPUTE && e->arg >= 0) fprintf(f, " %d", e->arg);
    fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"%s\", \"pid\": %d, \"tid\": %d", track_name[e->track],
            e->track == FSDP_TRACK_MEMORY ? "C" : "X", e->rank, tid);
    put_us(f, "ts", a);
    if (e->track != FSDP_TRACK_MEMORY) put_us(f, "dur", b - a);
    fprintf(f, ", \"args\": {\"rank\": %d, \"step\": %d", e->rank, e->step);
    if (e->track == FSDP_TRACK_MEMORY) fprintf(f, ", \"bytes\": %llu", (unsigned long long)e->bytes);
    if (e->track == FSDP_TRACK_COLL || e->track == FSDP_TRACK_CKPT)
        fprintf(f, ", \"bytes\": %llu", (unsigned long long)e->bytes);
    if (e->track == FSDP_TRACK_COMPUTE && e->arg >= 0) fprintf(f, ", \"layer\": %d", e->arg);
    if (group) fputs(", \"group\": \"", f), put_text(f, group), fputc('"', f);
    if (e->track == FSDP_TRACK_PLAN)
        fprintf(f, ", \"bytes_to_other_machines\": %llu, \"bytes_from_other_machines\": %llu",
                (unsigned long long)e->bytes, (unsigned long long)e->bytes_in);
    fputs("}}", f);
}

static void put_threads(FILE *f, int rank, int track, int used)
{
    for (int k = 0; k < used; ++k) {
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s",
                rank, track * 100 + k, track_name[track]);
        if (k) fprintf(f, " %d", k + 1);
        fprintf(f, "\"}},\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": "
                "{\"sort_index\": %d}}", rank, track * 100 + k, track * 100 + k);
    }
}

/* The events, sorted; returns how many no thread could take. */
static size_t put_events(FILE *f, fsdp_trace *t, fsdp_trace_group_fn group_name, const void *ctx)
{
    lanes *L = calloc(1, sizeof *L);
    size_t dropped = 0;
    if (!L) return t->n;
    qsort(t->ev, t->n, sizeof *t->ev, by_track_time);
    for (size_t i = 0; i < t->n; ++i) {
        const fsdp_trace_ev *e = &t->ev[i];
        int lane = e->track == FSDP_TRACK_MEMORY ? 0 : lane_of(L, ns(e->t0 - t->t_start), ns(e->t1 - t->t_start));
        if (lane < 0) ++dropped;
        else put_event(f, e, e->track * 100 + lane, t->t_start, group_name, ctx);
        if (e->track == FSDP_TRACK_MEMORY && !L->used) L->used = 1;
        int last = i + 1 == t->n || e[1].rank != e->rank || e[1].track != e->track;
        if (!last) continue;
        put_threads(f, e->rank, e->track, L->used);
        memset(L, 0, sizeof *L);
    }
    free(L);
    return dropped;
}

static void put_processes(FILE *f, int world, char (*host)[64])
{
    for (int r = 0; r < world; ++r) {
        fprintf(f, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": "
                "\"rank %d (", r ? ",\n" : "", r, r);
        put_text(f, host[r]);
        fprintf(f, ")\"}},\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": "
                "{\"sort_index\": %d}}", r, r);
    }
}

static fsdp_status put_file(fsdp_trace *t, fsdp_trace_group_fn group_name, const void *ctx, char (*host)[64])
{
    size_t k = strlen(t->path) + 8;
    char *tmp = malloc(k);
    if (!tmp) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    snprintf(tmp, k, "%s.tmp", t->path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(tmp);
        return fsdp_fail(FSDP_ERR_IO, "-fsdp-trace %s: cannot write it", t->path);
    }
    fputs("{\"traceEvents\": [\n", f);
    put_processes(f, t->world, host);
    size_t dropped = put_events(f, t, group_name, ctx);
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"producer\": \"darknet-fsdp -fsdp-trace\", "
            "\"world\": %d, \"first_step\": %d, \"last_step\": %d, \"clock_error_s\": %.9f, \"clock\": \"rank 0's, "
            "the other ranks' aligned to it at the start within clock_error_s\", \"events\": %zu, "
            "\"events_dropped\": %zu}}\n", t->world, t->first, t->step - 1 < t->last ? t->step - 1 : t->last,
            t->error_s, t->n - dropped, dropped);
    int bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (!bad) bad = rename(tmp, t->path) != 0;
    if (bad) remove(tmp);
    free(tmp);
    return bad ? fsdp_fail(FSDP_ERR_IO, "-fsdp-trace %s: cannot write it", t->path) : FSDP_OK;
}

fsdp_status fsdp_trace_write(fsdp_trace *t, fsdp_ctl *ctl, fsdp_trace_group_fn group_name, const void *ctx,
                             char (*host)[64])
{
    if (!t->on || t->written) return FSDP_OK;
    t->written = 1;
    FSDP_TRY(gather_events(t, ctl));
    fsdp_status s = t->rank == 0 ? put_file(t, group_name, ctx, host) : FSDP_OK;
    if (t->rank == 0 && s == FSDP_OK)
        fprintf(stderr, "fsdp: trace of steps %d-%d on %d ranks written to %s (clocks aligned within %.0f us)\n",
                t->first, t->step - 1 < t->last ? t->step - 1 : t->last, t->world, t->path, t->error_s * 1e6);
    free(t->ev);
    t->ev = NULL;
    t->n = t->cap = 0;
    return s;
}

void fsdp_trace_free(fsdp_trace *t)
{
    free(t->ev);
    free(t->path);
    memset(t, 0, sizeof *t);
}
