/* Which ranks share a machine (fsdp_hosts.h). */
#include <stdio.h>
#include <stdlib.h>
#include "fsdp_hosts.h"
#include "fsdp_env.h"

int fsdp_hosts_number(int world, const int *leader, int *host_of)
{
    int n = 0;
    for (int r = 0; r < world; ++r) host_of[r] = leader[r] == r ? n++ : host_of[leader[r]];
    return n;
}

fsdp_status fsdp_hosts_find(fsdp_ctl *ctl, fsdp_hosts *h)
{
    *h = (fsdp_hosts){ .world = ctl->world };
    int *leaders = malloc((size_t)h->world * sizeof *leaders);
    h->host_of = malloc((size_t)h->world * sizeof *h->host_of);
    /* Every rank takes part whatever its malloc did, then all fail alike. */
    fsdp_status s = leaders && h->host_of ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    s = fsdp_ctl_all_ok(ctl, s, FSDP_ERR_NOMEM, "ran out of memory");
    if (s == FSDP_OK) s = fsdp_ctl_host_leaders(ctl, leaders);
    if (s == FSDP_OK) h->nhosts = fsdp_hosts_number(h->world, leaders, h->host_of);
    free(leaders);
    if (s != FSDP_OK) fsdp_hosts_free(h);
    return s;
}

void fsdp_hosts_free(fsdp_hosts *h)
{
    free(h->host_of);
    *h = (fsdp_hosts){ 0 };
}

int fsdp_hosts_others(const fsdp_hosts *h, int r)
{
    int n = 0;
    for (int q = 0; q < h->world; ++q) n += h->host_of[q] != h->host_of[r];
    return n;
}

int fsdp_hosts_local_rank(const fsdp_hosts *h, int r)
{
    int n = 0;
    for (int q = 0; q < r; ++q) n += h->host_of[q] == h->host_of[r];
    return n;
}

uint64_t fsdp_hosts_bytes_out(const fsdp_hosts *h, int r, uint64_t spread, uint64_t peers, uint64_t reduced)
{
    uint64_t others = (uint64_t)fsdp_hosts_others(h, r), w = (uint64_t)h->world;
    return spread / w * others + peers / w * (uint64_t)(h->nhosts - 1) + reduced * others;
}

void fsdp_hosts_note_keepalive(const fsdp_hosts *h, double timeout_s)
{
    /* Only mpirun's ranks see its URI; srun and others notice nodes their own way. */
    if (h->nhosts < 2 || timeout_s <= 0 || !fsdp_env("OMPI_MCA_orte_hnp_uri")) return;
    long t = fsdp_env_long("OMPI_MCA_oob_tcp_keepalive_time");
    long i = fsdp_env_long("OMPI_MCA_oob_tcp_keepalive_intvl");
    long p = fsdp_env_long("OMPI_MCA_oob_tcp_keepalive_probes");
    long notice = t + i * p;
    if (t > 0 && notice < timeout_s) return;
    char when[96];
    if (t > 0) snprintf(when, sizeof when, "only after %ld s (oob_tcp_keepalive_time %ld + %ld x %ld s)", notice, t, p, i);
    else snprintf(when, sizeof when, "never (oob_tcp_keepalive_time %ld: keepalive off)", t);
    fprintf(stderr, "fsdp: the ranks span %d machines, and mpirun notices a lost machine %s, not before "
            "-fsdp-timeout %g: the ranks would stop first and leave mpirun and the other machines' daemons "
            "waiting; keep the keepalive below the timeout, e.g. mpirun --mca oob_tcp_keepalive_time 5 --mca "
            "oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 (11 s) with -fsdp-timeout 15 or more "
            "(docs/machines.md)\n",
            h->nhosts, when, timeout_s);
}
