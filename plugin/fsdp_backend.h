/* fsdp_backend.h: one collective interface, two engines (MPI on host
 * memory, NCCL on device memory), in the style of ggml's backends: a struct
 * of function pointers plus an opaque context.
 *
 * Counts are in floats.  Every rank calls every collective in the same order
 * with the same counts (SPMD); a backend never decides on its own to skip one.
 * `shard` counts are per rank: a full buffer holds world * shard floats,
 * rank r's part starting at r * shard (callers pad to make sizes divisible).
 * all_gather and reduce_scatter also run in place: `shard` may be this rank's
 * own part of `full` (full + rank * shard); any other overlap is an error.
 * Collectives with a count of zero are no-ops on every rank.
 */
#ifndef FSDP_BACKEND_H
#define FSDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "fsdp.h"

typedef enum { FSDP_MEM_HOST = 0, FSDP_MEM_DEVICE = 1 } fsdp_mem;

typedef struct fsdp_backend fsdp_backend;
struct fsdp_backend {
    const char *name;   /* "mpi", "nccl", "self" */
    int rank;
    int world;
    fsdp_mem mem;       /* where buffers passed to it live */
    void *ctx;
    /* full[r*shard .. (r+1)*shard) = shard of rank r, on every rank. */
    fsdp_status (*all_gather)(fsdp_backend *b, const float *shard, float *full, size_t shard_count);
    /* shard = sum over ranks of full[rank*shard .. (rank+1)*shard). */
    fsdp_status (*reduce_scatter)(fsdp_backend *b, const float *full, float *shard, size_t shard_count);
    /* buf = sum over ranks of buf, in place. */
    fsdp_status (*all_reduce)(fsdp_backend *b, float *buf, size_t count);
    /* bytes of host memory from root to every rank (setup, checks). */
    fsdp_status (*broadcast)(fsdp_backend *b, void *buf, size_t bytes, int root);
    /* Host-side helpers for setup checks: min and max of a value over ranks. */
    fsdp_status (*min_max_u64)(fsdp_backend *b, uint64_t v, uint64_t *min, uint64_t *max);
    /* v[i] = max over ranks of v[i], in place, host memory: start-up's
     * agreement on many values at once (minima through complements). */
    fsdp_status (*max_u64)(fsdp_backend *b, uint64_t *v, size_t count);
    /* Sum of doubles over ranks, in place, host memory (losses, stats). */
    fsdp_status (*sum_f64)(fsdp_backend *b, double *v, size_t count);
    fsdp_status (*barrier)(fsdp_backend *b);
    void (*destroy)(fsdp_backend *b);
    /* Optional (NULL where collectives complete before they return, as MPI's
     * do): start an all-gather or reduce-scatter without making Darknet's
     * compute stream wait for it, and get a ticket; wait(ticket) makes the
     * compute stream wait.  Lets the engine gather the next group while the
     * current one computes, and reduce one group's gradients while earlier
     * groups run backward.  Tickets come in issue order; waiting for one
     * also waits for every one issued before it; a start beyond 16
     * outstanding, or a wait for a ticket never issued, is refused. */
    fsdp_status (*all_gather_start)(fsdp_backend *b, const float *shard, float *full, size_t shard_count,
                                    int *ticket);
    fsdp_status (*reduce_scatter_start)(fsdp_backend *b, const float *full, float *shard,
                                        size_t shard_count, int *ticket);
    fsdp_status (*wait)(fsdp_backend *b, int ticket);
    /* The *_start calls complete before they return (shared memory, whose
     * copies run on the calling thread): starting early overlaps nothing
     * and only holds buffers longer, so the engine calls the blocking ones. */
    int starts_block;
    /* Optional (NULL unless every rank maps the same node memory, as on one
     * machine: fsdp_shm.h).  node_alloc is collective: `count` floats that
     * every rank maps, each at its own address, living as long as the
     * backend.  node_sync: every rank's stores to node memory before it are
     * visible to every rank after it (a barrier). */
    fsdp_status (*node_alloc)(fsdp_backend *b, size_t count, float **out);
    fsdp_status (*node_sync)(fsdp_backend *b);
};

/* MPI_COMM_WORLD on host memory; MPI must be initialised.  Counts beyond
 * INT_MAX are split into chunks. */
fsdp_status fsdp_backend_mpi_create(fsdp_backend **out);
/* Largest count one MPI call carries (floats; bytes for broadcast, doubles
 * for sum_f64), clamped to [1, INT_MAX].  Default INT_MAX; tests lower it to
 * exercise chunking on small buffers.  No effect on other backends. */
void fsdp_backend_mpi_set_chunk_limit(fsdp_backend *b, size_t floats);
/* Whether its reduce-scatter and all-reduce take the shared-memory path
 * (fsdp_shm.h: every rank on this node, FSDP_SHM not 0); 0 for other backends. */
int fsdp_backend_mpi_shared_memory(const fsdp_backend *b);
/* A world of one: collectives are copies; no MPI needed. */
fsdp_status fsdp_backend_self_create(fsdp_backend **out);
/* Rank 0 of a world of `world` in which nothing moves (fsdp_backend_null.c):
 * what -fsdp-plan predicts a run of that world on. */
fsdp_status fsdp_backend_null_create(int world, fsdp_backend **out);
#ifdef GPU
/* NCCL on device memory of GPU `device`, on its own stream.  Its host
 * helpers (broadcast, min/max, sums, barrier) and NCCL's unique id go
 * through `host` (an MPI backend), whose ownership it takes (destroyed with
 * it, or at once if creating fails). */
fsdp_status fsdp_backend_nccl_create(fsdp_backend *host, int device, fsdp_backend **out);
/* Device buffers through a host backend (MPI): each collective copies to
 * host memory, runs there and copies back, so several ranks can share one
 * GPU (NCCL refuses that).  Takes ownership of `host` (destroyed with it, or
 * at once if creating fails). */
fsdp_status fsdp_backend_staged_create(fsdp_backend *host, fsdp_backend **out);
/* Size of the staged backend's host staging buffer (floats, all ranks'
 * slices together; default 2^24): longer collectives go through it in
 * chunks.  Clamped to at least one float per rank.  Tests lower it to
 * exercise chunking on small buffers.  No effect on other backends. */
void fsdp_backend_staged_set_stage_limit(fsdp_backend *b, size_t floats);
#endif

/* Checks shared by the engines, so that they all refuse the same calls.
 * check_layout: *in_place = 1 when shard is this rank's own part of full
 * (NCCL's in-place convention); FSDP_ERR_UNSUPPORTED for any other overlap. */
fsdp_status fsdp_backend_check_layout(const fsdp_backend *b, const float *shard,
                                      const float *full, size_t shard_count, int *in_place);
/* FSDP_ERR_COMM unless 0 <= root < world. */
fsdp_status fsdp_backend_check_root(const fsdp_backend *b, int root);

/* Every rank stops together: collective over b's host helpers.  Returns
 * `local` on a rank that failed; on the others `others`, with "rank R:
 * another rank <what>" printed, when any rank failed; FSDP_OK when none did. */
fsdp_status fsdp_backend_all_ok(fsdp_backend *b, fsdp_status local, fsdp_status others, const char *what);

/* The one question the engine asks of the optional started collectives:
 * whether to start this backend's all-gathers (reduce-scatters) and wait
 * for them later.  Yes where it offers the start and the wait and a start
 * does not complete when called (starts_block); else the blocking call. */
int fsdp_backend_starts_all_gather(const fsdp_backend *b);
int fsdp_backend_starts_reduce_scatter(const fsdp_backend *b);

/* The bookkeeping behind the started-collective contract (all_gather_start,
 * reduce_scatter_start, wait), shared by the backends that start
 * collectives: the k-th start gets ticket k mod 2^31 and ring slot
 * k % FSDP_TICKETS; starts below `waited` have been waited for. */
#define FSDP_TICKETS 16
typedef struct fsdp_tickets {
    uint64_t issued, waited;
} fsdp_tickets;
/* Before a start: refused, on every rank alike (ranks start and wait in the
 * same order), when FSDP_TICKETS are outstanding, so that no rank is left
 * inside a collective. */
fsdp_status fsdp_tickets_check(const fsdp_tickets *t, const char *backend);
/* The start just made: its ticket; returns its ring slot. */
int fsdp_tickets_issue(fsdp_tickets *t, int *ticket);
/* wait(ticket): *upto = the start count below which every collective must
 * complete (t->waited when an earlier wait covered it already); refused for
 * a ticket never issued.  The caller completes the slots of starts
 * t->waited .. *upto - 1 (or, where later ones imply earlier ones, the last)
 * and then sets t->waited = *upto. */
fsdp_status fsdp_tickets_wait_until(const fsdp_tickets *t, const char *backend, int ticket, uint64_t *upto);

/* Per-rank shard size for n floats: ceil(n / world), so that world * shard >= n.
 * The padding (world * shard - n floats) is zero and never leaves the plugin. */
static inline size_t fsdp_shard_count(size_t n, int world)
{
    /* Not (n + world - 1) / world: that wraps for n near SIZE_MAX. */
    return n / (size_t)world + (n % (size_t)world != 0);
}

#endif
