/* test_reliability: the checksum checkpoints and weights files are compared
 * by, the plan hash's FNV-1a, -fsdp-timeout's parsing, the watched
 * backend, the planner's null backend, start-up's agreement alone, the
 * bound on group nesting, and what crosses between machines and when a
 * lost machine goes unnoticed (fsdp_hosts.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_agree.h"
#include "fsdp_cfg.h"
#include "fsdp_hash.h"
#include "fsdp_hosts.h"
#include "fsdp_watch.h"

static unsigned char bytes[1003];

static void fill(void)
{
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = (unsigned char)(i * 131 + 7);
}

/* Checkpoints are hashed buffer by buffer when written and in 1 MB reads
 * when checked: the result must not depend on the pieces. */
Test(hash, same_for_any_pieces)
{
    fill();
    uint64_t whole = fsdp_hash(bytes, sizeof bytes);
    srand(3);
    for (int trial = 0; trial < 200; ++trial) {
        fsdp_hasher h;
        fsdp_hasher_init(&h);
        size_t at = 0;
        while (at < sizeof bytes) {
            size_t k = (size_t)rand() % 17;
            if (k > sizeof bytes - at) k = sizeof bytes - at;
            fsdp_hasher_add(&h, bytes + at, k);
            at += k;
        }
        cr_assert_eq(fsdp_hasher_end(&h), whole, "trial %d", trial);
    }
}

/* A flipped bit anywhere (the low bit of a float included) is caught. */
Test(hash, every_single_bit_flip_changes_it)
{
    fill();
    uint64_t whole = fsdp_hash(bytes, sizeof bytes);
    for (size_t i = 0; i < sizeof bytes; ++i)
        for (int b = 0; b < 8; ++b) {
            bytes[i] ^= (unsigned char)(1 << b);
            cr_assert_neq(fsdp_hash(bytes, sizeof bytes), whole, "byte %zu bit %d", i, b);
            bytes[i] ^= (unsigned char)(1 << b);
        }
}

Test(hash, length_counts)
{
    unsigned char z[16] = { 0 };
    cr_assert_neq(fsdp_hash(z, 15), fsdp_hash(z, 16));
    cr_assert_neq(fsdp_hash(z, 0), fsdp_hash(z, 8));
}

/* The plan hash lives in checkpoint files, so its values must never
 * change.  The steps are FNV-1a's (its reference vectors, from its offset
 * basis); from the plugin's start the values are pinned, computed apart. */
Test(hash, fnv1a_steps_and_the_plan_hash_start)
{
    const uint64_t basis = 14695981039346656037ull;
    cr_assert_eq(fsdp_fnv1a(basis, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(fsdp_fnv1a(basis, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(fsdp_fnv1a(basis, "foobar", 6), 0x85944171f73967e8ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "", 0), 0x14650fb0739d0383ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "a", 1), 0x44bd8ad473cd9906ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "foobar", 6), 0x88fad7c0a8ff07f2ull);
    cr_assert_eq(fsdp_fnv1a(fsdp_fnv1a(FSDP_FNV1A_START, "foo", 3), "bar", 3), 0x88fad7c0a8ff07f2ull);
}

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

/* Without MPI (the self backend) there is nobody to disagree with: the
 * rank's own verdict. */
Test(agree, start_without_mpi_is_local)
{
    fsdp_ctl *be = NULL;
    cr_assert_eq(fsdp_backend_self_create(&be, NULL), FSDP_OK);
    fsdp_agree_flag f = { "-seed", 1, "1" };
    cr_assert_eq(fsdp_agree_start(be, FSDP_OK, &f, 1), FSDP_OK);
    cr_assert_eq(fsdp_agree_start(be, FSDP_ERR_CONFIG, &f, 1), FSDP_ERR_CONFIG);
    fsdp_ctl_free(be);
}

/* -fsdp-plan's stand-in (fsdp_backend_null.c): every operation offered and
 * checked, nothing moved, started collectives bounded as the real ones,
 * node memory real. */
Test(null_backend, offers_everything_moves_nothing, .init = cr_redirect_stderr)
{
    fsdp_ctl *h = NULL;
    fsdp_coll *be = NULL;
    cr_assert_eq(fsdp_backend_null_create(4, &h, &be), FSDP_OK);
    cr_assert(be->rank == 0 && be->world == 4 && be->starts_block);
    cr_assert(h->rank == 0 && h->world == 4);
    cr_assert(be->iface.all_gather && be->iface.reduce_scatter && be->iface.all_reduce && h->iface.broadcast &&
              h->iface.min_max_u64 && h->iface.max_u64 && h->iface.sum_f64 && h->iface.barrier &&
              h->iface.host_leaders && be->iface.all_gather_start && be->iface.reduce_scatter_start &&
              be->iface.wait && be->iface.node_alloc && be->iface.node_sync && be->iface.free && h->iface.free);
    cr_assert(!fsdp_coll_starts_all_gather(be) && !fsdp_coll_starts_reduce_scatter(be));
    float full[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, shard[2] = { 9, 9 };
    cr_assert_eq(fsdp_coll_all_gather(be, shard, full, 2), FSDP_OK);
    cr_assert_eq(fsdp_coll_reduce_scatter(be, full, shard, 2), FSDP_OK);
    cr_assert(full[0] == 1 && full[7] == 8 && shard[0] == 9 && shard[1] == 9);
    cr_assert_neq(fsdp_coll_all_gather(be, full + 1, full, 2), FSDP_OK);   /* overlapping, not in place */
    cr_assert_neq(fsdp_ctl_broadcast(h, full, 4, 4), FSDP_OK);          /* no rank 4 */
    int ticket = -1, last = -1;
    for (int k = 0; k < FSDP_TICKETS; ++k) cr_assert_eq(fsdp_coll_all_gather_start(be, shard, full, 2, &last), FSDP_OK);
    cr_assert_neq(fsdp_coll_reduce_scatter_start(be, full, shard, 2, &ticket), FSDP_OK);   /* the ring is full */
    cr_assert_eq(fsdp_coll_wait(be, last), FSDP_OK);
    cr_assert_eq(fsdp_coll_reduce_scatter_start(be, full, shard, 2, &ticket), FSDP_OK);
    cr_assert_eq(fsdp_coll_wait(be, ticket), FSDP_OK);
    float *node = NULL;
    cr_assert_eq(fsdp_coll_node_alloc(be, 1000, &node), FSDP_OK);
    cr_assert(node != NULL && node[0] == 0 && node[999] == 0);
    node[999] = 1;
    int leader[4] = { -1, -1, -1, -1 };
    cr_assert_eq(fsdp_ctl_host_leaders(h, leader), FSDP_OK);   /* one machine */
    cr_assert(leader[0] == 0 && leader[1] == 0 && leader[2] == 0 && leader[3] == 0);
    fsdp_coll_free(be);
    fsdp_ctl_free(h);
}

/* Where a backend cannot start collectives or map node memory, the
 * dispatch stands in: a start is the blocking call with a ticket that is
 * done, node memory a clear refusal. */
Test(dispatch, stands_in_for_optional_operations, .init = cr_redirect_stderr)
{
    fsdp_coll *b = NULL;
    cr_assert_eq(fsdp_backend_self_create(NULL, &b), FSDP_OK);
    cr_assert(!fsdp_coll_starts_all_gather(b) && !fsdp_coll_starts_reduce_scatter(b) && !fsdp_coll_maps_node(b));
    float full[3] = { 1, 2, 3 }, shard[3] = { 0, 0, 0 };
    int ticket = -1;
    cr_assert_eq(fsdp_coll_all_gather_start(b, shard, full, 3, &ticket), FSDP_OK);
    cr_assert(ticket == FSDP_TICKET_DONE && full[0] == 0 && full[2] == 0);   /* gathered already */
    cr_assert_eq(fsdp_coll_wait(b, ticket), FSDP_OK);
    full[1] = 7;
    cr_assert_eq(fsdp_coll_reduce_scatter_start(b, full, shard, 3, &ticket), FSDP_OK);
    cr_assert(ticket == FSDP_TICKET_DONE && shard[1] == 7);
    cr_assert_eq(fsdp_coll_wait(b, ticket), FSDP_OK);
    cr_assert_eq(fsdp_coll_wait(b, 0), FSDP_ERR_UNSUPPORTED);   /* never issued */
    float *node = full;
    cr_assert_eq(fsdp_coll_node_alloc(b, 10, &node), FSDP_ERR_UNSUPPORTED);
    cr_assert_null(node);
    cr_assert_eq(fsdp_coll_node_sync(b), FSDP_ERR_UNSUPPORTED);
    fsdp_coll_free(b);
}

static char *nested(int levels)
{
    char *s = malloc((size_t)levels * 8 + 1);
    s[0] = 0;
    for (int i = 0; i < levels; ++i) sprintf(s + strlen(s), "%sg%d", i ? "." : "", i);
    return s;
}

/* A 20,000-level name once took 1.7 GB in the plan: refused by its line. */
Test(cfg, group_nesting_is_bounded, .init = cr_redirect_stderr)
{
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    char *ok = nested(FSDP_MAX_GROUP_DEPTH), *deep = nested(FSDP_MAX_GROUP_DEPTH + 1);
    fsdp_cfg_option(&c, "net.cfg", 3, 0, "shard_group", ok);
    cr_assert_eq(c.error, FSDP_OK);
    fsdp_cfg_option(&c, "net.cfg", 9, 1, "shard_group", deep);
    cr_assert_eq(c.error, FSDP_ERR_CONFIG);
    fflush(stderr);
    cr_assert_stderr_eq_str("fsdp: net.cfg:9: shard_group=g0.g1.g2.g3.g4.g5.g6.g7.g8.g9.g10.g11.g1...: 65 levels; "
                            "groups nest at most 64 deep\n");
    free(ok);
    free(deep);
    fsdp_cfg_free(&c);
}

static int round_robin[4] = { 0, 1, 0, 1 };
static int one_host[4] = { 0, 0, 0, 0 };

/* A buffer's parts reach the ranks of the other machine; all-reduces go whole. */
Test(hosts, bytes_to_other_hosts)
{
    fsdp_hosts two = { 4, 2, round_robin }, one = { 4, 1, one_host };
    for (int r = 0; r < 4; ++r) {
        cr_assert_eq(fsdp_hosts_others(&two, r), 2);
        cr_assert_eq(fsdp_hosts_bytes_out(&two, r, 1600, 0, 10), 1600 / 4 * 2 + 10 * 2);
        /* Node memory on both machines: parts go to the one peer there. */
        cr_assert_eq(fsdp_hosts_bytes_out(&two, r, 1600, 800, 10), 1600 / 4 * 2 + 800 / 4 * 1 + 10 * 2);
        cr_assert_eq(fsdp_hosts_bytes_out(&one, r, 1600, 800, 10), 0);
    }
}

/* A rank's place on its machine picks its GPU; machines as host control
 * tells them (a lone rank's: one machine). */
Test(hosts, local_rank_and_find)
{
    fsdp_hosts two = { 4, 2, round_robin };
    cr_assert(fsdp_hosts_local_rank(&two, 0) == 0 && fsdp_hosts_local_rank(&two, 1) == 0 &&
              fsdp_hosts_local_rank(&two, 2) == 1 && fsdp_hosts_local_rank(&two, 3) == 1);
    fsdp_ctl *lone = NULL;
    fsdp_hosts h;
    cr_assert_eq(fsdp_backend_null_create(3, &lone, NULL), FSDP_OK);
    cr_assert_eq(fsdp_hosts_find(lone, &h), FSDP_OK);
    cr_assert(h.world == 3 && h.nhosts == 1 && fsdp_hosts_local_rank(&h, 2) == 2);
    fsdp_hosts_free(&h);
    fsdp_ctl_free(lone);
}

/* note TIMEOUT [TIME INTVL PROBES]: rank 0's keepalive note for ranks on
 * two machines under mpirun, with those keepalive settings (NULL: unset). */
static void note(double timeout_s, const char *t, const char *i, const char *p)
{
    fsdp_hosts two = { 4, 2, round_robin };
    setenv("OMPI_MCA_orte_hnp_uri", "1.0;tcp://10.231.0.1:1", 1);
    if (t) setenv("OMPI_MCA_oob_tcp_keepalive_time", t, 1);
    if (i) setenv("OMPI_MCA_oob_tcp_keepalive_intvl", i, 1);
    if (p) setenv("OMPI_MCA_oob_tcp_keepalive_probes", p, 1);
    fsdp_hosts_note_keepalive(&two, timeout_s);
    fflush(stderr);
}

#define NOTE_TAIL ", not before -fsdp-timeout %s: the ranks would stop first and leave mpirun and the other " \
    "machines' daemons waiting; keep the keepalive below the timeout, e.g. mpirun --mca oob_tcp_keepalive_time 5 " \
    "--mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 (11 s) with -fsdp-timeout 15 or more " \
    "(docs/machines.md)\n"

/* expect_note WHEN TIMEOUT: the note printed, saying WHEN mpirun notices. */
static void expect_note(const char *when, const char *timeout)
{
    char want[512];
    snprintf(want, sizeof want, "fsdp: the ranks span 2 machines, and mpirun notices a lost machine %s" NOTE_TAIL,
             when, timeout);
    cr_assert_stderr_eq_str(want);
}

/* Open MPI's defaults (480 s) against a 60 s timeout. */
Test(hosts, note_on_defaults, .init = cr_redirect_stderr)
{
    note(60, NULL, NULL, NULL);
    expect_note("only after 480 s (oob_tcp_keepalive_time 300 + 9 x 20 s)", "60");
}

/* Equal is not enough: the ranks stop at the same moment. */
Test(hosts, note_when_equal, .init = cr_redirect_stderr)
{
    note(11, "5", "2", "3");
    expect_note("only after 11 s (oob_tcp_keepalive_time 5 + 3 x 2 s)", "11");
}

Test(hosts, note_when_keepalive_off, .init = cr_redirect_stderr)
{
    note(600, "0", NULL, NULL);
    expect_note("never (oob_tcp_keepalive_time 0: keepalive off)", "600");
}

/* Silent: a keepalive below the timeout, Open MPI's defaults under the
 * default timeout, the timeout off, one machine, another launcher. */
Test(hosts, no_note, .init = cr_redirect_stderr)
{
    note(15, "5", "2", "3");
    unsetenv("OMPI_MCA_oob_tcp_keepalive_time");
    unsetenv("OMPI_MCA_oob_tcp_keepalive_intvl");
    unsetenv("OMPI_MCA_oob_tcp_keepalive_probes");
    note(600, NULL, NULL, NULL);
    note(0, NULL, NULL, NULL);
    fsdp_hosts one = { 4, 1, one_host }, two = { 4, 2, round_robin };
    fsdp_hosts_note_keepalive(&one, 5);
    unsetenv("OMPI_MCA_orte_hnp_uri");
    fsdp_hosts_note_keepalive(&two, 5);
    fflush(stderr);
    cr_assert_stderr_eq_str("");
}
