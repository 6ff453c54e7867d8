/* test_hosts: which ranks share a machine, what crosses between machines,
 * and when a lost machine goes unnoticed (rank 0's keepalive note). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_hosts.h"

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
