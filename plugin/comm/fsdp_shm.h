/* fsdp_shm.h: memory the ranks of one machine share (MPI-3 shared windows):
 * all-gather, reduce-scatter and all-reduce between ranks on one node, and
 * node memory for shard_node_shared=1 on each machine of several.
 *
 * The collectives: each rank copies its input into its own segment and
 * then sums its part straight from every rank's segment.  Open MPI's own reduce-scatter and large all-reduce fall to a
 * fraction of what the node's memory moves (temporary buffers allocated
 * per call, algorithms tuned for other sizes); this path makes one copy in,
 * one summing read and one write, in chunks that stay in cache.
 *
 * Used by the MPI backend only when every rank of its communicator shares
 * the node; ranks on several nodes exchange point to point (fsdp_pairs.h),
 * adding the same terms in the same order.  FSDP_SHM=0 in
 * the environment turns it off (e.g. to test the path between nodes on one
 * machine). */
#ifndef FSDP_SHM_H
#define FSDP_SHM_H

#include <mpi.h>
#include <stddef.h>
#include "fsdp.h"

typedef struct fsdp_shm fsdp_shm;

/* A round moves one part of each rank's input.  A rank's segment holds a
 * slot per rank, each of two halves (written in turn) of one part, so a
 * reduce-scatter of 2 parts per rank touches all of it.  Parts shrink as
 * the ranks grow, from FSDP_SHM_PART_FLOATS at up to 4 ranks to a slot of
 * 64 KB (the kernel maps a shared file's pages 64 KB at a time on a read
 * fault) at 32 and more: a segment of FSDP_SHM_HALF_FLOATS floats a half
 * up to 32 ranks, then 64 KB more per rank, and of each other rank's
 * segment a rank maps two slots. */
#define FSDP_SHM_PART_FLOATS ((size_t)1 << 16)
#define FSDP_SHM_HALF_FLOATS ((size_t)1 << 18)
static inline size_t fsdp_shm_part_floats(int world)
{
    size_t p = FSDP_SHM_HALF_FLOATS / (size_t)(world > 0 ? world : 1), least = (size_t)1 << 13;
    return p > FSDP_SHM_PART_FLOATS ? FSDP_SHM_PART_FLOATS : p < least ? least : p;
}

/* Collective over comm.  *out = NULL (and FSDP_OK) where nothing applies: a
 * world of one, FSDP_SHM=0, machines running different numbers of comm's
 * ranks, or no shared window to be had.  Where every rank shares the node
 * it serves the collectives below (fsdp_shm_spans_all); on several
 * machines of equal ranks, node memory alone. */
fsdp_status fsdp_shm_open(MPI_Comm comm, fsdp_shm **out);
/* Whether every rank of comm is on this node: the collectives apply. */
int fsdp_shm_spans_all(const fsdp_shm *s);
/* This rank's place among its machine's ranks (in comm's order) and their
 * number. */
void fsdp_shm_place(const fsdp_shm *s, int *node_rank, int *node_ranks);
void fsdp_shm_close(fsdp_shm *s);

/* Over this machine's ranks (the whole communicator where it spans one
 * machine).  Node rank q's part of `full` is n floats at place[q] * n
 * (place NULL: at q * n).
 *
 * full's part of node rank q = node rank q's shard, on every rank of the
 * node; shard may be this rank's part of full (in place).  No temporary
 * buffer (Open MPI's own all-gather allocates one of the full size on some
 * worlds, e.g. 3 ranks). */
fsdp_status fsdp_shm_all_gather(fsdp_shm *s, const float *shard, float *full, size_t n, const int *place);
/* shard = sum over the node's ranks of their part of full for this rank;
 * shard may be this rank's part of full (in place).  Every rank sums in
 * node rank order. */
fsdp_status fsdp_shm_reduce_scatter(fsdp_shm *s, const float *full, float *shard, size_t n, const int *place);
/* buf = sum over the node's ranks of buf, in place, the same floats on
 * every rank. */
fsdp_status fsdp_shm_all_reduce(fsdp_shm *s, float *buf, size_t count);

/* Node-shared memory (shard_node_shared=1): `count` floats that every rank
 * of the node maps, at its own address; collective over the node's ranks.  It lives until
 * fsdp_shm_close.  Refused (FSDP_ERR_NOMEM, on every rank) where /dev/shm
 * has no room for it. */
#define FSDP_SHM_REGIONS 4
fsdp_status fsdp_shm_region(fsdp_shm *s, size_t count, float **out);
/* Every rank's stores to its segment and the regions before it are
 * visible to every rank of the node after it (a barrier of the node's
 * ranks). */
fsdp_status fsdp_shm_sync(fsdp_shm *s);

#endif
