/* fsdp_backend.h: how ranks talk, as two interfaces in the style of ggml's
 * backends (a table of functions over an opaque context, ggml-backend-impl.h):
 *
 *   fsdp_ctl   host control: rank and world, and small collectives on host
 *              values for start-up, agreement, checks and losses (broadcast,
 *              min/max, max, sums of doubles, barrier, which ranks share a
 *              machine).  Implemented by MPI, and by a lone rank (self, null).
 *   fsdp_coll  buffer collectives on float buffers in one kind of memory
 *              (host or device): all-gather, reduce-scatter, all-reduce;
 *              optionally started now and waited for later, and optionally
 *              memory every rank of a node maps (with, across machines, the
 *              exchanges between each rank and its peers there).  Implemented by MPI (host),
 *              NCCL and MPI staged through host memory (device), self, null.
 *
 * Host control always runs on the host over MPI whatever moves the
 * buffers, so a device backend implements buffers only, and code that
 * agrees or checks never sees one.  Synchronized batch norm's host-run
 * all-reduce is a buffer collective (on the host fsdp_coll), not host
 * control: it runs every step on float data, like the gradients, and takes
 * the same transport (shared memory on one node) and watchdog label.
 *
 * Call sites use the fsdp_ctl_* and fsdp_coll_* functions below, never the
 * tables: they stand in for what a backend leaves out (a started collective
 * becomes the blocking call, node memory a clear refusal), so a call site
 * asks at most one question (fsdp_coll_starts_*, fsdp_coll_maps_node).
 *
 * Contract of both.  Counts are in floats (bytes for broadcast, elements
 * for the host reductions).  Every rank calls every collective in the same
 * order with the same counts (SPMD); a backend never decides on its own to
 * skip one.  `shard` counts are per rank: a full buffer holds world * shard
 * floats, rank r's part starting at r * shard (callers pad to make sizes
 * divisible).  all_gather and reduce_scatter also run in place: `shard` may
 * be this rank's own part of `full` (full + rank * shard); any other overlap
 * is an error.  Collectives with a count of zero are no-ops on every rank.
 */
#ifndef FSDP_BACKEND_H
#define FSDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "fsdp.h"
#include "fsdp_wire.h"

typedef enum { FSDP_MEM_HOST = 0, FSDP_MEM_DEVICE = 1 } fsdp_mem;

typedef struct fsdp_ctl fsdp_ctl;
typedef struct fsdp_coll fsdp_coll;

/* Where a backend offers node memory: the machines' shape.  Every machine
 * runs `ranks` ranks; a rank's `peers` are the ranks holding its place on
 * each machine (its own among them), in machine order (machines numbered
 * by their lowest rank).  One machine: machines 1, ranks = world, rank =
 * the rank, and no peers array (there is nothing to exchange). */
typedef struct fsdp_node_layout {
    int machines;
    int ranks;          /* per machine */
    int rank;           /* this rank's place on its machine, in rank order */
    const int *peers;   /* machines > 1: `machines` world ranks, owned by the backend */
    const int *ranks_at;   /* machines > 1: machine k's place p is world rank ranks_at[k * ranks + p] */
} fsdp_node_layout;

/* ---- host control --------------------------------------------------------- */

/* Every member is required.  Host memory throughout. */
typedef struct fsdp_ctl_i {
    /* bytes of buf from root to every rank. */
    fsdp_status (*broadcast)(fsdp_ctl *c, void *buf, size_t bytes, int root);
    /* min and max of one value over ranks (agreement checks). */
    fsdp_status (*min_max_u64)(fsdp_ctl *c, uint64_t v, uint64_t *min, uint64_t *max);
    /* v[i] = max over ranks of v[i], in place: start-up's agreement on many
     * values at once (minima through complements). */
    fsdp_status (*max_u64)(fsdp_ctl *c, uint64_t *v, size_t count);
    /* v[i] = sum over ranks of v[i], in place (losses, stats). */
    fsdp_status (*sum_f64)(fsdp_ctl *c, double *v, size_t count);
    fsdp_status (*barrier)(fsdp_ctl *c);
    /* leader[r] = the lowest rank on rank r's machine, for every rank r
     * (world ints): machines as the transport sees them, ranks that can
     * share memory (fsdp_hosts.h). */
    fsdp_status (*host_leaders)(fsdp_ctl *c, int *leader);
    void (*free)(fsdp_ctl *c);
} fsdp_ctl_i;

struct fsdp_ctl {
    fsdp_ctl_i iface;
    const char *name;   /* "mpi", "self", "null" */
    int rank;
    int world;
    void *ctx;
};

static inline fsdp_status fsdp_ctl_broadcast(fsdp_ctl *c, void *buf, size_t bytes, int root)
{
    return c->iface.broadcast(c, buf, bytes, root);
}
static inline fsdp_status fsdp_ctl_min_max_u64(fsdp_ctl *c, uint64_t v, uint64_t *min, uint64_t *max)
{
    return c->iface.min_max_u64(c, v, min, max);
}
static inline fsdp_status fsdp_ctl_max_u64(fsdp_ctl *c, uint64_t *v, size_t count)
{
    return c->iface.max_u64(c, v, count);
}
static inline fsdp_status fsdp_ctl_sum_f64(fsdp_ctl *c, double *v, size_t count)
{
    return c->iface.sum_f64(c, v, count);
}
static inline fsdp_status fsdp_ctl_barrier(fsdp_ctl *c) { return c->iface.barrier(c); }
static inline fsdp_status fsdp_ctl_host_leaders(fsdp_ctl *c, int *leader) { return c->iface.host_leaders(c, leader); }
/* NULL is fine. */
void fsdp_ctl_free(fsdp_ctl *c);

/* Every rank stops together: collective over c.  Returns `local` on a rank
 * that failed; on the others `others`, with "rank R: another rank <what>"
 * printed, when any rank failed; FSDP_OK when none did. */
fsdp_status fsdp_ctl_all_ok(fsdp_ctl *c, fsdp_status local, fsdp_status others, const char *what);

/* ---- buffer collectives --------------------------------------------------- */

typedef struct fsdp_coll_i {
    /* Required. */
    /* full[r*shard .. (r+1)*shard) = shard of rank r, on every rank. */
    fsdp_status (*all_gather)(fsdp_coll *c, const float *shard, float *full, size_t shard_count);
    /* shard = sum over ranks of full[rank*shard .. (rank+1)*shard). */
    fsdp_status (*reduce_scatter)(fsdp_coll *c, const float *full, float *shard, size_t shard_count);
    /* buf = sum over ranks of buf, in place. */
    fsdp_status (*all_reduce)(fsdp_coll *c, float *buf, size_t count);
    void (*free)(fsdp_coll *c);
    /* Optional, all three or none: start an all-gather or reduce-scatter
     * without making the compute stream (Darknet's) wait for it, and get a
     * ticket; wait(ticket) makes it wait.  Lets the engine gather the next
     * group while the current one computes, and reduce one group's
     * gradients while earlier groups run backward.  Tickets come in issue
     * order; waiting for one also waits for every one issued before it; a
     * start beyond FSDP_TICKETS outstanding, or a wait for a ticket never
     * issued, is refused (fsdp_tickets below). */
    fsdp_status (*all_gather_start)(fsdp_coll *c, const float *shard, float *full, size_t shard_count,
                                    int *ticket);
    fsdp_status (*reduce_scatter_start)(fsdp_coll *c, const float *full, float *shard,
                                        size_t shard_count, int *ticket);
    fsdp_status (*wait)(fsdp_coll *c, int ticket);
    /* Optional, both or neither (offered where every rank maps the same
     * node memory, as on one machine: fsdp_shm.h).  node_alloc is
     * collective: `count` floats that every rank maps, each at its own
     * address, living as long as the backend.  node_sync: every rank's
     * stores to node memory before it are visible to every rank after it
     * (a barrier). */
    fsdp_status (*node_alloc)(fsdp_coll *c, size_t count, float **out);
    fsdp_status (*node_sync)(fsdp_coll *c);
    /* Optional, both or neither, with node memory on several machines
     * (`node.machines` > 1), collective over this rank's peers:
     * peer_all_to_all: block k of send (count floats at k * count) goes to
     * peer k, and recv's block k comes from peer k (its own block copied;
     * send and recv apart);
     * peer_all_gather, in place: every peer q's part, full[q * shard ..
     * (q + 1) * shard) with q its world rank, lands there on every peer. */
    fsdp_status (*peer_all_to_all)(fsdp_coll *c, const float *send, float *recv, size_t count);
    fsdp_status (*peer_all_gather)(fsdp_coll *c, float *full, size_t shard);
    /* Optional, with the two above and wait: peer_all_gather started, under
     * the started collectives' tickets; until the wait, this rank's part
     * is read and its peers' written. */
    fsdp_status (*peer_all_gather_start)(fsdp_coll *c, float *full, size_t shard, int *ticket);
} fsdp_coll_i;

struct fsdp_coll {
    fsdp_coll_i iface;
    const char *name;   /* "mpi", "nccl", "mpi-staged", "self", "null" */
    int rank;
    int world;
    fsdp_mem mem;       /* where buffers passed to it live */
    /* Its *_start calls complete before they return (shared memory, whose
     * copies run on the calling thread): starting early overlaps nothing
     * and only holds buffers longer, so the engine calls the blocking ones. */
    int starts_block;
    /* Its started reduce-scatters receive the other ranks' terms into a
     * buffer of its own, kept for the run (fsdp_pairs.h): this many parts
     * of the largest; 0: none (shared memory, NCCL).  (Its blocking sums
     * take a buffer of fixed size, made at the first.) */
    int scratch_terms;
    /* Its blocking reduce-scatters between machines sum through a buffer of
     * its own, kept for the run: this many parts of the largest (the
     * machines' sums sent and received); 0: none. */
    int sums_terms;
    /* Between machines its all-gathers and reduce-scatters send each part
     * to one peer on each other machine (hierarchical), not to every rank
     * there. */
    int hierarchical;
    fsdp_node_layout node;   /* where it maps node memory; zero elsewhere */
    /* Where its exchanges between machines go between peers (hierarchical):
     * their format on the wire, which the engine sets, and the bytes they
     * posted each way (fsdp_wire.h); NULL elsewhere. */
    fsdp_wire *wire;
    void *ctx;
};

static inline fsdp_status fsdp_coll_all_gather(fsdp_coll *c, const float *shard, float *full, size_t n)
{
    return c->iface.all_gather(c, shard, full, n);
}
static inline fsdp_status fsdp_coll_reduce_scatter(fsdp_coll *c, const float *full, float *shard, size_t n)
{
    return c->iface.reduce_scatter(c, full, shard, n);
}
static inline fsdp_status fsdp_coll_all_reduce(fsdp_coll *c, float *buf, size_t count)
{
    return c->iface.all_reduce(c, buf, count);
}
/* NULL is fine. */
void fsdp_coll_free(fsdp_coll *c);

/* The one question per operation, for the engine and the memory planner:
 * whether to start this backend's all-gathers (reduce-scatters) and wait
 * for them later, holding the buffers meanwhile.  Yes where it offers
 * start and wait and a start does not complete when called (starts_block). */
int fsdp_coll_starts_all_gather(const fsdp_coll *c);
int fsdp_coll_starts_reduce_scatter(const fsdp_coll *c);

/* The ticket a start stands in for where the backend cannot start
 * collectives: the blocking call ran already, and fsdp_coll_wait treats it
 * as done. */
#define FSDP_TICKET_DONE (-2)
/* The backend's start, or its blocking call with *ticket = FSDP_TICKET_DONE. */
fsdp_status fsdp_coll_all_gather_start(fsdp_coll *c, const float *shard, float *full, size_t n, int *ticket);
fsdp_status fsdp_coll_reduce_scatter_start(fsdp_coll *c, const float *full, float *shard, size_t n, int *ticket);
/* FSDP_OK at once for FSDP_TICKET_DONE; else the backend's wait (refused,
 * as a ticket never issued, where it has none). */
fsdp_status fsdp_coll_wait(fsdp_coll *c, int ticket);

/* Whether it offers node memory. */
int fsdp_coll_maps_node(const fsdp_coll *c);
/* Where it does: the machines' shape (one machine unless it says more). */
fsdp_node_layout fsdp_coll_node_layout(const fsdp_coll *c);
/* The backend's peer exchanges; one machine: the all-to-all copies its
 * block and the all-gather moves nothing; refused, said so, where the
 * ranks span machines and it offers none, and where the all-to-all's send
 * and recv overlap. */
fsdp_status fsdp_coll_peer_all_to_all(fsdp_coll *c, const float *send, float *recv, size_t count);
fsdp_status fsdp_coll_peer_all_gather(fsdp_coll *c, float *full, size_t shard);
/* The backend's start, or its blocking call with *ticket = FSDP_TICKET_DONE. */
fsdp_status fsdp_coll_peer_all_gather_start(fsdp_coll *c, float *full, size_t shard, int *ticket);
/* The backend's node_alloc and node_sync; FSDP_ERR_UNSUPPORTED, said so,
 * where it offers none. */
fsdp_status fsdp_coll_node_alloc(fsdp_coll *c, size_t count, float **out);
fsdp_status fsdp_coll_node_sync(fsdp_coll *c);

/* ---- the backends --------------------------------------------------------- */

/* MPI_COMM_WORLD on host memory; MPI must be initialised.  Either of ctl
 * and coll may be NULL (not wanted); the two made share one duplicate of
 * MPI_COMM_WORLD, freed with the last of them (before MPI_Finalize).
 * Counts beyond INT_MAX are split into chunks. */
fsdp_status fsdp_backend_mpi_create(fsdp_ctl **ctl, fsdp_coll **coll);
/* Largest count one MPI call carries (floats; bytes for broadcast, doubles
 * for sum_f64: the pair's control shares it), clamped to [1, INT_MAX].
 * Default INT_MAX; tests lower it to exercise chunking on small buffers.
 * No effect on other backends. */
void fsdp_backend_mpi_set_chunk_limit(fsdp_coll *c, size_t floats);
/* Whether its reduce-scatter and all-reduce take the shared-memory path
 * (fsdp_shm.h: every rank on this node, FSDP_SHM not 0); 0 for other backends. */
int fsdp_backend_mpi_shared_memory(const fsdp_coll *c);
/* A world of one: collectives are copies; no MPI needed.  Either may be NULL. */
fsdp_status fsdp_backend_self_create(fsdp_ctl **ctl, fsdp_coll **coll);
/* Rank 0 of a world of `world` in which nothing moves (fsdp_backend_null.c):
 * what -fsdp-plan predicts a run of that world on.  Either may be NULL. */
fsdp_status fsdp_backend_null_create(int world, fsdp_ctl **ctl, fsdp_coll **coll);
/* A null backend shaped like `real` (its rank and world, whether it starts
 * collectives and whether they block, its scratch, its machines), for
 * running a rank's operations over sizes alone (fsdp_memplan.c): nothing
 * moves, and it notes the largest reduce-scatter part it was given, started
 * and in all (floats, fsdp_backend_null_largest).  `real` outlives it. */
fsdp_status fsdp_backend_null_like(const fsdp_coll *real, fsdp_coll **out);
/* Spreads a null backend's world over `machines` machines of equal ranks
 * (world / machines each, in rank order): node memory per machine and
 * hierarchical exchanges, as the MPI backend on such machines with
 * FSDP_SHM on (-fsdp-plan MxL).  Refused where they cannot be equal. */
fsdp_status fsdp_backend_null_machines(fsdp_coll *b, int machines);
void fsdp_backend_null_largest(const fsdp_coll *c, size_t *rs_started, size_t *rs_any);
/* ... and of the parts exchanged with the peers (hybrid sharding's sums and updated parts). */
size_t fsdp_backend_null_largest_peer(const fsdp_coll *c);
/* Host control of a lone rank (self, null): rank 0 of `world`, the only one
 * taking part, so that every operation returns what it was given (after
 * the argument checks the others make) and every rank shares its machine. */
fsdp_status fsdp_ctl_lone_create(const char *name, int world, fsdp_ctl **out);

/* ---- for the backends ----------------------------------------------------- */

/* Checks shared by the backends, so that they all refuse the same calls.
 * check_layout: *in_place = 1 when shard is this rank's own part of full
 * (NCCL's in-place convention); FSDP_ERR_UNSUPPORTED for any other overlap. */
fsdp_status fsdp_backend_check_layout(const fsdp_coll *c, const float *shard,
                                      const float *full, size_t shard_count, int *in_place);
/* FSDP_ERR_COMM unless 0 <= root < world. */
fsdp_status fsdp_backend_check_root(const fsdp_ctl *c, int root);

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
