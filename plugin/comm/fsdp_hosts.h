/* fsdp_hosts.h: which ranks share a machine, for what crosses between
 * machines (the stats file's bytes_to_other_hosts) and for what the launcher
 * can see of a lost machine (rank 0's start-up note on keepalive). */
#ifndef FSDP_HOSTS_H
#define FSDP_HOSTS_H

#include <stdint.h>
#include "fsdp.h"
#include "fsdp_backend.h"

typedef struct fsdp_hosts {
    int world;
    int nhosts;
    int *host_of;   /* per rank: its machine, numbered in order of each machine's lowest rank */
} fsdp_hosts;

/* host_of[r] for leader[r], the lowest rank on rank r's machine, for
 * every rank r of `world`: machines numbered in order of their leaders.
 * Returns how many machines. */
int fsdp_hosts_number(int world, const int *leader, int *host_of);
/* Collective over ctl: machines as its transport tells them (under MPI,
 * ranks that can share memory: MPI_COMM_TYPE_SHARED). */
fsdp_status fsdp_hosts_find(fsdp_ctl *ctl, fsdp_hosts *h);
void fsdp_hosts_free(fsdp_hosts *h);
/* How many ranks are on other machines than rank r. */
int fsdp_hosts_others(const fsdp_hosts *h, int r);
/* Rank r's place among the ranks of its machine, in rank order (which GPU
 * of the machine it takes). */
int fsdp_hosts_local_rank(const fsdp_hosts *h, int r);
/* Bytes rank r's collectives carry to ranks on other machines, as if each
 * rank sent its part straight to every rank that needs it: an all-gather
 * or reduce-scatter of a full buffer of B bytes sends B / world to each
 * other rank (`spread`: the bytes of all such full buffers), or, between
 * node memories on several machines, to one rank of each other machine,
 * its peer there (`peers`); an all-reduce of B bytes sends all B to each
 * other rank (`reduced`). */
uint64_t fsdp_hosts_bytes_out(const fsdp_hosts *h, int r, uint64_t spread, uint64_t peers, uint64_t reduced);
/* Rank 0's note at start-up where the ranks span machines under Open MPI's
 * mpirun and its keepalive settings (the ranks' OMPI_MCA_oob_tcp_keepalive_*,
 * or Open MPI's defaults) notice a lost machine no sooner than
 * -fsdp-timeout: the ranks would stop first, and mpirun and the other
 * machine's daemon, with a message to that machine unanswered, would stay. */
void fsdp_hosts_note_keepalive(const fsdp_hosts *h, double timeout_s);

#endif
