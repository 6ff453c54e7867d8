/* test_reliability: the checksum checkpoints and weights files are compared
 * by, -fsdp-timeout's parsing, the bound on group nesting, and what crosses
 * between machines and when a lost machine goes unnoticed (fsdp_hosts.h). */
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

/* Without MPI there is nobody to disagree with: the rank's own verdict. */
Test(agree, start_without_mpi_is_local)
{
    fsdp_agree_flag f = { "-seed", 1, "1" };
    cr_assert_eq(fsdp_agree_start(0, FSDP_OK, &f, 1), FSDP_OK);
    cr_assert_eq(fsdp_agree_start(0, FSDP_ERR_CONFIG, &f, 1), FSDP_ERR_CONFIG);
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
        cr_assert_eq(fsdp_hosts_bytes_out(&two, r, 1600, 10), 1600 / 4 * 2 + 10 * 2);
        cr_assert_eq(fsdp_hosts_bytes_out(&one, r, 1600, 10), 0);
    }
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
