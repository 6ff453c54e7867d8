/* test_watch: -fsdp-timeout's parsing and the watched backends, which
 * offer what the inner ones offer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
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
