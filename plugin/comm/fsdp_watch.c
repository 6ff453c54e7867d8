#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_quiet.h"
#include "fsdp_watch.h"

/* What the main thread is waiting in; written by it, read by the watcher. */
static struct {
    _Atomic(const char *) what;   /* NULL: not in a collective */
    _Atomic(const void *) buf;
    _Atomic double since;
} now;

static double timeout_s;
static int my_rank;
static fsdp_watch_describe_fn describe;
static void *describe_ctx;
static pthread_t thread;
static int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int stopping;

static double clock_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

fsdp_status fsdp_watch_parse(const char *text, double *seconds)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-timeout %s: expected seconds, 0 or more (0: no watchdog)", text);
    *seconds = v;
    return FSDP_OK;
}

void fsdp_watch_enter(const char *what, const void *buf)
{
    atomic_store(&now.buf, buf);
    atomic_store(&now.since, clock_s());
    atomic_store(&now.what, what);
}

void fsdp_watch_leave(void)
{
    atomic_store(&now.what, NULL);
}

/* msg: n characters as snprintf counted them into cap bytes. */
static void say_and_exit(const char *msg, int n, size_t cap)
{
    fsdp_quiet_failed();   /* stderr is the rank's own again */
    if (n > 0) (void)!write(2, msg, (size_t)n < cap ? (size_t)n : cap - 1);
    /* MPI may only be called from the main thread, which is stuck: leave
     * without it; the launcher sees a rank end non-zero and stops the rest. */
    _exit(1);
}

static void expire(const char *what, double waited)
{
    char where[256] = "";
    if (describe) describe(describe_ctx, atomic_load(&now.buf), where, sizeof where);
    /* One write, so ranks' lines do not interleave. */
    char msg[512];
    int n = snprintf(msg, sizeof msg, "fsdp: rank %d: %s%s%s made no progress for %.0f s (-fsdp-timeout "
                     "%g): another rank stopped, hung or died; stopping every rank\n", my_rank, what,
                     where[0] ? " " : "", where, waited, timeout_s);
    say_and_exit(msg, n, sizeof msg);
}

static fsdp_watch_probe_fn probe;
static void *probe_ctx;

double fsdp_watch_timeout(void) { return timeout_s; }

void fsdp_watch_probe(fsdp_watch_probe_fn check, void *ctx)
{
    pthread_mutex_lock(&lock);
    probe = check;
    probe_ctx = ctx;
    pthread_mutex_unlock(&lock);
}

/* Under the lock, in the watching thread. */
static void check_probe(void)
{
    char why[320], msg[512];
    if (!probe || !probe(probe_ctx, timeout_s, why, sizeof why)) return;
    int n = snprintf(msg, sizeof msg, "fsdp: rank %d: %s (-fsdp-timeout %g): another rank stopped, hung or "
                     "died, or the link failed; stopping every rank\n", my_rank, why, timeout_s);
    say_and_exit(msg, n, sizeof msg);
}

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 200 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000) { t.tv_sec += 1; t.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&wake, &lock, &t);
        if (!stopping) check_probe();
        const char *what = atomic_load(&now.what);
        if (!what || stopping) continue;
        double waited = clock_s() - atomic_load(&now.since);
        /* Still the same wait (not a new one that began since)? */
        if (waited >= timeout_s && atomic_load(&now.what) == what) expire(what, waited);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

fsdp_status fsdp_watch_start(double seconds, int rank, fsdp_watch_describe_fn fn, void *ctx)
{
    timeout_s = seconds;
    my_rank = rank;
    describe = fn;
    describe_ctx = ctx;
    if (seconds <= 0 || running) return FSDP_OK;
    stopping = 0;
    if (pthread_create(&thread, NULL, watch, NULL) != 0)
        return fsdp_fail(FSDP_ERR_NOMEM, "cannot start the collective watchdog thread");
    running = 1;
    return FSDP_OK;
}

void fsdp_watch_stop(void)
{
    if (!running) return;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    running = 0;
}

/* ---- the watched backends -------------------------------------------------- */

#define WATCHED(name, buf, call)                  \
    do {                                          \
        fsdp_watch_enter(name, buf);              \
        fsdp_status s_ = (call);                  \
        fsdp_watch_leave();                       \
        return s_;                                \
    } while (0)

#define CTL(h) ((fsdp_ctl *)(h)->ctx)

static fsdp_status w_broadcast(fsdp_ctl *h, void *buf, size_t bytes, int root)
{
    WATCHED("broadcast", buf, fsdp_ctl_broadcast(CTL(h), buf, bytes, root));
}
static fsdp_status w_min_max(fsdp_ctl *h, uint64_t v, uint64_t *lo, uint64_t *hi)
{
    WATCHED("agreement check (min/max over ranks)", NULL, fsdp_ctl_min_max_u64(CTL(h), v, lo, hi));
}
static fsdp_status w_max_u64(fsdp_ctl *h, uint64_t *v, size_t n)
{
    WATCHED("agreement check (max over ranks)", NULL, fsdp_ctl_max_u64(CTL(h), v, n));
}
static fsdp_status w_sum_f64(fsdp_ctl *h, double *v, size_t n)
{
    WATCHED("sum over ranks (loss or statistics)", NULL, fsdp_ctl_sum_f64(CTL(h), v, n));
}
static fsdp_status w_barrier(fsdp_ctl *h)
{
    WATCHED("barrier", NULL, fsdp_ctl_barrier(CTL(h)));
}
static fsdp_status w_host_leaders(fsdp_ctl *h, int *leader)
{
    WATCHED("which ranks share a machine", NULL, fsdp_ctl_host_leaders(CTL(h), leader));
}
static void w_ctl_free(fsdp_ctl *h)
{
    fsdp_ctl_free(CTL(h));
    free(h);
}

#define COLL(b) ((fsdp_coll *)(b)->ctx)

static fsdp_status w_all_gather(fsdp_coll *b, const float *shard, float *full, size_t n)
{
    WATCHED("all-gather", full, fsdp_coll_all_gather(COLL(b), shard, full, n));
}
static fsdp_status w_reduce_scatter(fsdp_coll *b, const float *full, float *shard, size_t n)
{
    WATCHED("reduce-scatter", full, fsdp_coll_reduce_scatter(COLL(b), full, shard, n));
}
static fsdp_status w_all_reduce(fsdp_coll *b, float *buf, size_t n)
{
    WATCHED("all-reduce", buf, fsdp_coll_all_reduce(COLL(b), buf, n));
}
static fsdp_status w_node_alloc(fsdp_coll *b, size_t n, float **out)
{
    WATCHED("allocation of node-shared memory", NULL, fsdp_coll_node_alloc(COLL(b), n, out));
}
static fsdp_status w_node_sync(fsdp_coll *b)
{
    WATCHED("sync of node-shared parameters", NULL, fsdp_coll_node_sync(COLL(b)));
}
static fsdp_status w_peer_all_to_all(fsdp_coll *b, const float *send, float *recv, size_t n)
{
    WATCHED("exchange of gradient sums between machines", recv, fsdp_coll_peer_all_to_all(COLL(b), send, recv, n));
}
static fsdp_status w_peer_all_gather(fsdp_coll *b, float *full, size_t shard)
{
    WATCHED("exchange of updated parameters between machines", full, fsdp_coll_peer_all_gather(COLL(b), full, shard));
}
/* Started collectives by ticket slot, so that a wait names what it waits for. */
static struct { const char *what; const void *buf; } started[FSDP_TICKETS];

static fsdp_status note_start(fsdp_status s, const char *what, const void *buf, const int *ticket)
{
    if (s == FSDP_OK && *ticket >= 0) {
        started[*ticket % FSDP_TICKETS].what = what;
        started[*ticket % FSDP_TICKETS].buf = buf;
    }
    return s;
}
static fsdp_status w_all_gather_start(fsdp_coll *b, const float *shard, float *full, size_t n, int *ticket)
{
    WATCHED("all-gather", full,
            note_start(fsdp_coll_all_gather_start(COLL(b), shard, full, n, ticket), "all-gather", full, ticket));
}
static fsdp_status w_reduce_scatter_start(fsdp_coll *b, const float *full, float *shard, size_t n, int *ticket)
{
    WATCHED("reduce-scatter", full,
            note_start(fsdp_coll_reduce_scatter_start(COLL(b), full, shard, n, ticket), "reduce-scatter",
                       full, ticket));
}
static fsdp_status w_peer_all_gather_start(fsdp_coll *b, float *full, size_t shard, int *ticket)
{
    const char *what = "exchange of updated parameters between machines";
    WATCHED(what, full, note_start(fsdp_coll_peer_all_gather_start(COLL(b), full, shard, ticket), what, full, ticket));
}
static fsdp_status w_wait(fsdp_coll *b, int ticket)
{
    const char *what = ticket >= 0 && started[ticket % FSDP_TICKETS].what ? started[ticket % FSDP_TICKETS].what
                                                                           : "wait for a started collective";
    WATCHED(what, ticket >= 0 ? started[ticket % FSDP_TICKETS].buf : NULL, fsdp_coll_wait(COLL(b), ticket));
}
static void w_coll_free(fsdp_coll *b)
{
    fsdp_coll_free(COLL(b));
    free(b);
}

fsdp_status fsdp_watch_wrap(fsdp_ctl **ctl, fsdp_coll **coll)
{
    fsdp_ctl *h = ctl ? malloc(sizeof *h) : NULL;
    fsdp_coll *b = coll ? malloc(sizeof *b) : NULL;
    if ((ctl && !h) || (coll && !b)) {
        free(h);
        free(b);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    if (h) {
        fsdp_ctl *inner = *ctl;
        *h = (fsdp_ctl){
            .iface = { .broadcast = w_broadcast, .min_max_u64 = w_min_max, .max_u64 = w_max_u64,
                       .sum_f64 = w_sum_f64, .barrier = w_barrier, .host_leaders = w_host_leaders,
                       .free = w_ctl_free },
            .name = inner->name, .rank = inner->rank, .world = inner->world, .ctx = inner,
        };
        *ctl = h;
    }
    if (b) {
        fsdp_coll *inner = *coll;
        /* The optional operations only where the inner one has them, so
         * that the questions asked of it (fsdp_backend.h) get its answers. */
        int starts = inner->iface.all_gather_start != NULL, node = fsdp_coll_maps_node(inner),
            peers = inner->iface.peer_all_to_all != NULL;
        *b = (fsdp_coll){
            .iface = { .all_gather = w_all_gather, .reduce_scatter = w_reduce_scatter,
                       .all_reduce = w_all_reduce, .free = w_coll_free,
                       .all_gather_start = starts ? w_all_gather_start : NULL,
                       .reduce_scatter_start = starts ? w_reduce_scatter_start : NULL,
                       .wait = starts ? w_wait : NULL,
                       .node_alloc = node ? w_node_alloc : NULL, .node_sync = node ? w_node_sync : NULL,
                       .peer_all_to_all = peers ? w_peer_all_to_all : NULL,
                       .peer_all_gather = peers ? w_peer_all_gather : NULL,
                       .peer_all_gather_start = peers && starts && inner->iface.peer_all_gather_start
                                                    ? w_peer_all_gather_start : NULL },
            .name = inner->name, .rank = inner->rank, .world = inner->world, .mem = inner->mem,
            .starts_block = inner->starts_block, .scratch_terms = inner->scratch_terms,
            .sums_terms = inner->sums_terms, .hierarchical = inner->hierarchical, .node = inner->node,
            .wire = inner->wire,
            .ctx = inner,
        };
        *coll = b;
    }
    return FSDP_OK;
}
