/* test_watch: -fsdp-timeout's parsing and the watched backends, which
 * offer what the inner ones offer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_inflight.h"
#include "fsdp_watch.h"

Test(watch, timeout_values, .init = cr_redirect_stderr)
{
    double s = -1;
    cr_assert_eq(fsdp_watch_parse("600", &s), FSDP_OK);
    cr_assert_eq(s, 600.0);
    cr_assert_eq(fsdp_watch_parse("0", &s), FSDP_OK);
    cr_assert_eq(s, 0.0);
    cr_assert_eq(fsdp_watch_parse("2.5", &s), FSDP_OK);
    cr_assert_eq(s, 2.5);
    const char *bad[] = { "-1", "abc", "", "nan", "inf", "5s" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        cr_assert_eq(fsdp_watch_parse(bad[i], &s), FSDP_ERR_CONFIG, "%s", bad[i]);
}

/* The watched host control forwards the host operations, agreement's
 * maxima included; a world of one changes nothing. */
Test(watch, wraps_the_host_operations)
{
    fsdp_ctl *self = NULL, *be = NULL;
    cr_assert_eq(fsdp_backend_self_create(&self, NULL), FSDP_OK);
    be = self;
    cr_assert_eq(fsdp_watch_wrap(&be, NULL), FSDP_OK);
    cr_assert(be != self && be->world == 1);
    uint64_t v[3] = { 1, UINT64_MAX, 7 }, lo = 0, hi = 0;
    cr_assert_eq(fsdp_ctl_max_u64(be, v, 3), FSDP_OK);
    cr_assert(v[0] == 1 && v[1] == UINT64_MAX && v[2] == 7);
    cr_assert_eq(fsdp_ctl_min_max_u64(be, 5, &lo, &hi), FSDP_OK);
    cr_assert(lo == 5 && hi == 5);
    double d = 2.5;
    cr_assert_eq(fsdp_ctl_sum_f64(be, &d, 1), FSDP_OK);
    cr_assert_eq(d, 2.5);
    cr_assert_eq(fsdp_ctl_barrier(be), FSDP_OK);
    int leader = -1;
    cr_assert_eq(fsdp_ctl_host_leaders(be, &leader), FSDP_OK);
    cr_assert_eq(leader, 0);
    fsdp_ctl_free(be);
}

/* The watched buffer collectives offer what the inner ones offer, no more:
 * the engine's questions get the inner backend's answers. */
Test(watch, wraps_the_buffer_collectives)
{
    fsdp_coll *b = NULL;
    cr_assert_eq(fsdp_backend_null_create(2, NULL, &b), FSDP_OK);
    cr_assert_eq(fsdp_watch_wrap(NULL, &b), FSDP_OK);
    cr_assert(b->world == 2 && b->starts_block && fsdp_coll_maps_node(b) && b->iface.all_gather_start);
    fsdp_coll_free(b);
    cr_assert_eq(fsdp_backend_self_create(NULL, &b), FSDP_OK);
    cr_assert_eq(fsdp_watch_wrap(NULL, &b), FSDP_OK);
    cr_assert(!fsdp_coll_maps_node(b) && !b->iface.all_gather_start && !b->iface.wait);
    fsdp_coll_free(b);
}

/* ---- device work the host does not wait for (fsdp_inflight.h) ------------- */

/* Pieces done up to `upto` (exclusive), counted in issue order as a stream runs them. */
typedef struct { fsdp_inflight *f; uint64_t upto; } stream_at;
static int done_upto(void *ctx, int slot)
{
    stream_at *s = ctx;
    /* the slot's piece is the oldest pending one, ndone */
    (void)slot;
    return s->f->ndone < s->upto;
}

Test(inflight, oldest_pending_stalls_after_the_timeout)
{
    fsdp_inflight f = { 0 };
    stream_at s = { &f, 0 };
    const char *what = NULL;
    double pending = 0;
    fsdp_inflight_issue(&f, "all-gather", 10.0);
    fsdp_inflight_issue(&f, "reduce-scatter", 11.0);
    cr_assert_eq(fsdp_inflight_oldest(&f, done_upto, &s), 0);
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 15.0, 10.0, &what, &pending), 0, "5 s < 10 s");
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 20.5, 10.0, &what, &pending), 1);
    cr_assert(!strcmp(what, "all-gather") && pending == 10.5, "%s %g", what, pending);
    s.upto = 1;   /* the all-gather finished: the reduce-scatter is the oldest */
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 20.5, 10.0, &what, &pending), 0, "9.5 s < 10 s");
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 21.0, 10.0, &what, &pending), 1);
    cr_assert(!strcmp(what, "reduce-scatter"));
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 1e9, 0, &what, &pending), 0, "timeout 0: never");
    s.upto = 2;
    cr_assert_eq(fsdp_inflight_oldest(&f, done_upto, &s), -1, "nothing pending");
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 1e9, 10.0, &what, &pending), 0);
}

/* More pieces than it tracks: the oldest are forgotten, the newest kept. */
Test(inflight, full_ring_forgets_the_oldest)
{
    fsdp_inflight f = { 0 };
    stream_at s = { &f, 0 };
    for (int i = 0; i < FSDP_INFLIGHT + 3; ++i) fsdp_inflight_issue(&f, "all-reduce", (double)i);
    cr_assert_eq(f.nissued - f.ndone, FSDP_INFLIGHT);
    const char *what;
    double pending;
    cr_assert_eq(fsdp_inflight_stalled(&f, done_upto, &s, 100.0, 1.0, &what, &pending), 1);
    cr_assert_eq(pending, 97.0, "the oldest tracked was issued at 3: %g", pending);
}

/* The watcher asks the probe at each tick, and not after it is removed. */
static int probe_calls;
static int quiet_probe(void *ctx, double timeout_s, char *why, size_t n)
{
    (void)ctx; (void)timeout_s; (void)why; (void)n;
    probe_calls++;
    return 0;
}

Test(watch, probe_checked_at_each_tick)
{
    cr_assert_eq(fsdp_watch_start(30, 0, NULL, NULL), FSDP_OK);
    cr_assert_eq(fsdp_watch_timeout(), 30);
    fsdp_watch_probe(quiet_probe, NULL);
    usleep(700 * 1000);
    fsdp_watch_probe(NULL, NULL);
    int seen = probe_calls;
    cr_assert_geq(seen, 2, "%d calls in 0.7 s", seen);
    usleep(500 * 1000);
    cr_assert_eq(probe_calls, seen, "none once removed");
    fsdp_watch_stop();
}

/* A probe that reports a stall stops the rank, exit status 1. */
static int stalled_probe(void *ctx, double timeout_s, char *why, size_t n)
{
    (void)ctx;
    snprintf(why, n, "NCCL all-gather made no progress for %.0f s", timeout_s);
    return 1;
}

Test(watch, stalled_probe_stops_the_rank, .exit_code = 1, .init = cr_redirect_stderr)
{
    cr_assert_eq(fsdp_watch_start(1, 3, NULL, NULL), FSDP_OK);
    fsdp_watch_probe(stalled_probe, NULL);
    sleep(5);
    cr_assert_fail("the watcher did not stop the rank");
}
