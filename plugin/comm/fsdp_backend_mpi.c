/* fsdp_backend_mpi.c: both interfaces (fsdp_backend.h) over MPI, on host
 * memory: host control and buffer collectives, one context between them.
 *
 * The backend talks on its own duplicate of MPI_COMM_WORLD: its error
 * handler (MPI_ERRORS_RETURN, so failures come back as a status) and its
 * messages then never touch what the rest of the process does with MPI.
 * Creating it is collective over MPI_COMM_WORLD; free it before
 * MPI_Finalize.
 *
 * MPI counts are ints.  Longer buffers go in chunks of at most `limit`
 * elements.
 *
 * When every rank shares the node, all-gather, reduce-scatter and float
 * all-reduce go through shared memory (fsdp_shm.h), and complete before
 * they return, started or not.  On several machines of equal ranks it
 * offers node memory on each, and the exchanges between a rank and its
 * peers (the ranks holding its place on the other machines) on a
 * communicator of their own; its all-gathers and reduce-scatters then go
 * in two stages, so that each part crosses to each other machine once
 * (hierarchical): between peers, and through each machine's shared memory.
 * Elsewhere (machines of unequal ranks, FSDP_SHM=0) they are messages
 * between every two ranks (fsdp_pairs.h), which add the same floats in the
 * same order as one machine.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_hosts.h"
#include "fsdp_mpi.h"
#include "fsdp_pairs.h"
#include "fsdp_shm.h"
#include "fsdp_sum.h"

/* Node memory on several machines: the exchanges between each rank and
 * its peers (the ranks at its place on the other machines). */
typedef struct mpib_hier {
    fsdp_node_layout node;   /* the machines' shape; zero on one machine */
    MPI_Comm peers;          /* this rank and its peers, ranked by machine */
    int *peer_ranks;         /* the peers' world ranks (node.peers) */
    int *ranks_at;           /* every machine's ranks by place (node.ranks_at) */
    int peers_open;          /* peers and peer are open */
    fsdp_pairs peer;         /* the exchanges with the peers */
    fsdp_wire wire;          /* the exchanges' format on the wire, and their bytes */
    float *sums;             /* a reduce-scatter's machine sums, sent and received (2 M parts) */
    size_t sums_floats;
    int sums_slot;           /* the started reduce-scatter holding the sums until its wait (its slot), else -1 */
    const float **rows;      /* the machine sums received, in machine order (M) */
    struct {                 /* per ticket slot, what its wait finishes after the peers' messages */
        int kind;            /* HIER_NONE, HIER_GATHER (the machine's shared-memory part), HIER_REDUCE (the sum) */
        float *out;          /* the gather's full buffer, or the reduce's shard */
        size_t n;
    } started[FSDP_TICKETS];
} mpib_hier;

typedef struct {
    MPI_Comm comm;
    size_t limit;            /* most elements one MPI call carries */
    fsdp_tickets tickets;
    fsdp_shm *shm;           /* NULL: FSDP_SHM=0, unequal machines, or no buffer collectives */
    int pairs_open;          /* pairs is open */
    fsdp_pairs pairs;        /* buffer collectives between ranks that share no memory: every rank with every other */
    mpib_hier hier;          /* node memory on several machines */
    int users;               /* holds on it: its control and its collectives, each until freed */
} mpib_ctx;

static size_t mpib_limit(const fsdp_coll *b)
{
    return ((const mpib_ctx *)b->ctx)->limit;
}


/* Several machines with node memory: the two-stage exchanges apply. */
static int hierarchical(const mpib_ctx *c) { return c->hier.node.machines > 1 && c->hier.peers_open; }

/* Machine m's ranks by place: where their parts lie in a buffer of parts. */
static const int *ranks_on(const mpib_ctx *c, int m) { return c->hier.ranks_at + (size_t)m * (size_t)c->hier.node.ranks; }

/* Each rank's part to its peers (each part crosses to each other machine
 * once), then on each machine, for each machine m, the parts its ranks now
 * hold of machine m's ranks, through shared memory.  Moves bytes only. */
static fsdp_status hier_all_gather(mpib_ctx *c, const float *shard, float *full, size_t n)
{
    FSDP_TRY(fsdp_pairs_all_gather(&c->hier.peer, shard, full, n, c->hier.peer_ranks));
    for (int m = 0; m < c->hier.node.machines; ++m)
        FSDP_TRY(fsdp_shm_all_gather(c->shm, full + (size_t)c->hier.peer_ranks[m] * n, full, n, ranks_on(c, m)));
    return FSDP_OK;
}

/* On each machine, for each machine m, its ranks' terms of the part of
 * this rank's peer on m summed through shared memory (in place order);
 * those sums to the peers; this rank's part the sum of the machines' sums,
 * in machine order (docs/DESIGN.md, "Backends": exact to float tolerance
 * against one machine, the same bytes run after run). */
enum { HIER_NONE, HIER_GATHER, HIER_REDUCE };

/* A started exchange between machines done: its messages waited for, then
 * the gather's shared-memory part, or the reduce's sum in machine order. */
static fsdp_status hier_finish(mpib_ctx *c, int slot)
{
    FSDP_TRY(fsdp_pairs_complete(&c->hier.peer, slot));
    int kind = c->hier.started[slot].kind;
    float *out = c->hier.started[slot].out;
    size_t n = c->hier.started[slot].n, machines = (size_t)c->hier.node.machines;
    c->hier.started[slot].kind = HIER_NONE;
    if (kind == HIER_GATHER)
        for (int m = 0; m < c->hier.node.machines; ++m)
            FSDP_TRY(fsdp_shm_all_gather(c->shm, out + (size_t)c->hier.peer_ranks[m] * n, out, n, ranks_on(c, m)));
    if (kind == HIER_REDUCE) {
        c->hier.sums_slot = -1;
        for (size_t m = 0; m < machines; ++m) c->hier.rows[m] = c->hier.sums + (machines + m) * n;
        fsdp_sum_rows(out, c->hier.rows, (int)machines, 0, n);
    }
    return FSDP_OK;
}

/* The machines' sums of this rank's peers' parts into `sums`, summed on
 * this machine through shared memory; a started reduce still holding them
 * is finished first. */
static fsdp_status machine_sums(mpib_ctx *c, const float *full, size_t n)
{
    if (c->hier.sums_slot >= 0) FSDP_TRY(hier_finish(c, c->hier.sums_slot));
    size_t machines = (size_t)c->hier.node.machines, need = 2 * machines * n;
    if (need > c->hier.sums_floats) {
        free(c->hier.sums);
        c->hier.sums = malloc(need * sizeof(float));
        c->hier.sums_floats = c->hier.sums ? need : 0;
        if (!c->hier.sums)
            return fsdp_fail(FSDP_ERR_NOMEM, "no memory for %.1f MB of the machines' sums", need * 4 / 1e6);
    }
    for (size_t m = 0; m < machines; ++m)
        FSDP_TRY(fsdp_shm_reduce_scatter(c->shm, full, c->hier.sums + m * n, n, ranks_on(c, (int)m)));
    return FSDP_OK;
}

static fsdp_status hier_reduce_scatter(mpib_ctx *c, const float *full, float *shard, size_t n)
{
    size_t machines = (size_t)c->hier.node.machines;
    FSDP_TRY(machine_sums(c, full, n));
    float *mine = c->hier.sums, *theirs = c->hier.sums + machines * n;
    FSDP_TRY(fsdp_pairs_all_to_all(&c->hier.peer, mine, theirs, n));
    for (size_t m = 0; m < machines; ++m) c->hier.rows[m] = theirs + m * n;
    fsdp_sum_rows(shard, c->hier.rows, (int)machines, 0, n);
    return FSDP_OK;
}

static fsdp_status mpib_all_gather(fsdp_coll *b, const float *shard, float *full, size_t n)
{
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    if (n == 0)
        return FSDP_OK;
    mpib_ctx *c = b->ctx;
    if (fsdp_shm_spans_all(c->shm))
        return fsdp_shm_all_gather(c->shm, shard, full, n, NULL);
    if (hierarchical(c))
        return hier_all_gather(c, shard, full, n);
    return fsdp_pairs_all_gather(&c->pairs, shard, full, n, NULL);
}

static fsdp_status mpib_reduce_scatter(fsdp_coll *b, const float *full, float *shard, size_t n)
{
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    if (n == 0)
        return FSDP_OK;
    mpib_ctx *c = b->ctx;
    if (fsdp_shm_spans_all(c->shm))
        return fsdp_shm_reduce_scatter(c->shm, full, shard, n, NULL);
    if (hierarchical(c))
        return hier_reduce_scatter(c, full, shard, n);
    return fsdp_pairs_reduce_scatter(&c->pairs, full, shard, n);
}

/* `op` in place over ranks of `count` elements of `type` (`size` bytes each). */
static fsdp_status reduce_in_place(const mpib_ctx *c, void *buf, size_t count,
                                   MPI_Datatype type, size_t size, MPI_Op op)
{
    for (size_t off = 0; off < count; off += c->limit) {
        size_t k = fsdp_min_size(c->limit, count - off);
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * size, (int)k, type, op, c->comm));
    }
    return FSDP_OK;
}

static fsdp_status mpib_all_reduce(fsdp_coll *b, float *buf, size_t count)
{
    mpib_ctx *c = b->ctx;
    if (fsdp_shm_spans_all(c->shm))
        return fsdp_shm_all_reduce(c->shm, buf, count);
    return fsdp_pairs_all_reduce(&c->pairs, buf, count);
}

/* ---- host control ---------------------------------------------------------- */

static MPI_Comm ctl_comm(const fsdp_ctl *h)
{
    return ((const mpib_ctx *)h->ctx)->comm;
}

static fsdp_status mpib_sum_f64(fsdp_ctl *h, double *v, size_t count)
{
    return reduce_in_place(h->ctx, v, count, MPI_DOUBLE, sizeof(double), MPI_SUM);
}

static fsdp_status mpib_max_u64(fsdp_ctl *h, uint64_t *v, size_t count)
{
    return reduce_in_place(h->ctx, v, count, MPI_UINT64_T, sizeof(uint64_t), MPI_MAX);
}

static fsdp_status mpib_broadcast(fsdp_ctl *h, void *buf, size_t bytes, int root)
{
    const mpib_ctx *c = h->ctx;
    FSDP_TRY(fsdp_backend_check_root(h, root));
    for (size_t off = 0; off < bytes; off += c->limit) {
        size_t k = fsdp_min_size(c->limit, bytes - off);
        mpiCheck(MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, c->comm));
    }
    return FSDP_OK;
}

static fsdp_status mpib_min_max_u64(fsdp_ctl *h, uint64_t v, uint64_t *min, uint64_t *max)
{
    /* min over ranks of ~v is ~(max of v): one reduction answers both. */
    uint64_t both[2] = { v, ~v };
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_UINT64_T, MPI_MIN, ctl_comm(h)));
    *min = both[0];
    *max = ~both[1];
    return FSDP_OK;
}

static fsdp_status mpib_barrier(fsdp_ctl *h)
{
    mpiCheck(MPI_Barrier(ctl_comm(h)));
    return FSDP_OK;
}

/* Machines as MPI sees them: the ranks that can share memory
 * (MPI_COMM_TYPE_SHARED), each named by its lowest rank. */
static fsdp_status leaders_of(MPI_Comm comm, int rank, int *leaders)
{
    MPI_Comm node;
    int leader = rank;
    mpiCheck(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int err = MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    if (err != MPI_SUCCESS) return fsdp_mpi_fail(err, __FILE__, __LINE__, "MPI_Allreduce");
    mpiCheck(MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, comm));
    return FSDP_OK;
}

static fsdp_status mpib_host_leaders(fsdp_ctl *h, int *leaders)
{
    return leaders_of(ctl_comm(h), h->rank, leaders);
}

/* ---- started collectives: exchanges posted now, completed at the wait ---- */

/* The ticket slot of the collective about to start. */
static fsdp_status mpib_ticket(fsdp_coll *b, int *slot, int *ticket)
{
    mpib_ctx *c = b->ctx;
    FSDP_TRY(fsdp_tickets_check(&c->tickets, b->name));
    *slot = fsdp_tickets_issue(&c->tickets, ticket);
    return FSDP_OK;
}

/* Chunked and empty calls, and those through shared memory, complete before
 * returning; the others are posted under their ticket's slot. */
static fsdp_status mpib_all_gather_start(fsdp_coll *b, const float *shard, float *full, size_t n,
                                         int *ticket)
{
    int in_place, slot;
    *ticket = -1;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    FSDP_TRY(mpib_ticket(b, &slot, ticket));
    if (n == 0 || n > mpib_limit(b) || b->starts_block)
        return mpib_all_gather(b, shard, full, n);
    mpib_ctx *c = b->ctx;
    if (hierarchical(c)) {
        /* The peers' parts travel now; the machine's share at the wait. */
        FSDP_TRY(fsdp_pairs_all_gather_start(&c->hier.peer, shard, full, n, c->hier.peer_ranks, slot));
        c->hier.started[slot].kind = HIER_GATHER;
        c->hier.started[slot].out = full;
        c->hier.started[slot].n = n;
        return FSDP_OK;
    }
    return fsdp_pairs_all_gather_start(&c->pairs, shard, full, n, NULL, slot);
}

static fsdp_status mpib_reduce_scatter_start(fsdp_coll *b, const float *full, float *shard, size_t n,
                                             int *ticket)
{
    int in_place, slot;
    *ticket = -1;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    FSDP_TRY(mpib_ticket(b, &slot, ticket));
    if (n == 0 || n > mpib_limit(b) || b->starts_block)
        return mpib_reduce_scatter(b, full, shard, n);
    mpib_ctx *c = b->ctx;
    if (hierarchical(c)) {
        /* The machine's sums now; the machines' exchange of them travels
         * until the wait, which adds them. */
        size_t machines = (size_t)c->hier.node.machines;
        FSDP_TRY(machine_sums(c, full, n));
        FSDP_TRY(fsdp_pairs_all_to_all_start(&c->hier.peer, c->hier.sums, c->hier.sums + machines * n, n, slot));
        c->hier.sums_slot = slot;
        c->hier.started[slot].kind = HIER_REDUCE;
        c->hier.started[slot].out = shard;
        c->hier.started[slot].n = n;
        return FSDP_OK;
    }
    return fsdp_pairs_reduce_scatter_start(&c->pairs, full, shard, n, slot);
}

static fsdp_status mpib_wait(fsdp_coll *b, int ticket)
{
    mpib_ctx *c = b->ctx;
    uint64_t upto;
    FSDP_TRY(fsdp_tickets_wait_until(&c->tickets, b->name, ticket, &upto));
    for (; c->tickets.waited < upto; ++c->tickets.waited) {
        int slot = (int)(c->tickets.waited % FSDP_TICKETS);
        if (c->pairs_open) FSDP_TRY(fsdp_pairs_complete(&c->pairs, slot));
        if (c->hier.peers_open) FSDP_TRY(hier_finish(c, slot));
    }
    return FSDP_OK;
}

static fsdp_status mpib_node_alloc(fsdp_coll *b, size_t count, float **out)
{
    return fsdp_shm_region(((mpib_ctx *)b->ctx)->shm, count, out);
}

static fsdp_status mpib_node_sync(fsdp_coll *b)
{
    return fsdp_shm_sync(((mpib_ctx *)b->ctx)->shm);
}

/* ---- between machines: a rank and its peers ------------------------------ */

static fsdp_status mpib_peer_all_to_all(fsdp_coll *b, const float *send, float *recv, size_t count)
{
    return fsdp_pairs_all_to_all(&((mpib_ctx *)b->ctx)->hier.peer, send, recv, count);
}

/* In place: each peer's part lands at its world rank's place. */
static fsdp_status mpib_peer_all_gather(fsdp_coll *b, float *full, size_t shard)
{
    mpib_ctx *c = b->ctx;
    return fsdp_pairs_all_gather(&c->hier.peer, full + (size_t)b->rank * shard, full, shard, c->hier.peer_ranks);
}

/* Started under the ticket's slot; longer buffers complete now. */
static fsdp_status mpib_peer_all_gather_start(fsdp_coll *b, float *full, size_t shard, int *ticket)
{
    mpib_ctx *c = b->ctx;
    int slot;
    *ticket = -1;
    FSDP_TRY(mpib_ticket(b, &slot, ticket));
    if (shard == 0 || shard > c->limit) return mpib_peer_all_gather(b, full, shard);
    return fsdp_pairs_all_gather_start(&c->hier.peer, full + (size_t)b->rank * shard, full, shard, c->hier.peer_ranks, slot);
}

/* Several machines of equal ranks with node memory: the layout, and this
 * rank's communicator with its peers. */
static fsdp_status open_peers(mpib_ctx *c, int rank, int world)
{
    int place, ranks;
    fsdp_shm_place(c->shm, &place, &ranks);
    int machines = world / ranks;
    int *leaders = malloc((size_t)world * sizeof *leaders), *host_of = malloc((size_t)world * sizeof *host_of);
    int *seen = calloc((size_t)machines, sizeof *seen);
    c->hier.peer_ranks = malloc((size_t)machines * sizeof *c->hier.peer_ranks);
    c->hier.ranks_at = malloc((size_t)world * sizeof *c->hier.ranks_at);
    c->hier.rows = malloc((size_t)machines * sizeof *c->hier.rows);
    /* Every rank takes part in what follows, whatever its mallocs did. */
    int ok = leaders && host_of && seen && c->hier.peer_ranks && c->hier.ranks_at && c->hier.rows;
    fsdp_status s = FSDP_OK;
    int err = MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c->comm);
    if (err != MPI_SUCCESS) s = fsdp_mpi_fail(err, __FILE__, __LINE__, "MPI_Allreduce");
    else if (!ok) s = fsdp_fail(FSDP_ERR_NOMEM, "mpi backend: no memory for the machines' layout");
    if (s == FSDP_OK) s = leaders_of(c->comm, rank, leaders);
    if (s == FSDP_OK && fsdp_hosts_number(world, leaders, host_of) != machines)
        s = fsdp_fail(FSDP_ERR_COMM, "mpi backend: machines counted two ways disagree");
    for (int q = 0; q < world && s == FSDP_OK; ++q) {
        int k = host_of[q], p = seen[k]++;
        c->hier.ranks_at[(size_t)k * ranks + p] = q;
        if (p == place) c->hier.peer_ranks[k] = q;
    }
    if (s == FSDP_OK && (err = MPI_Comm_split(c->comm, place, host_of[rank], &c->hier.peers)) != MPI_SUCCESS)
        s = fsdp_mpi_fail(err, __FILE__, __LINE__, "MPI_Comm_split");
    if (s == FSDP_OK)
        c->hier.node = (fsdp_node_layout){ .machines = machines, .ranks = ranks, .rank = place, .peers = c->hier.peer_ranks,
                                      .ranks_at = c->hier.ranks_at };
    free(leaders);
    free(host_of);
    free(seen);
    return s;
}

/* Drops one hold; the last frees the communicator and the windows
 * (collective: every rank frees in the same order). */
static void mpib_release(mpib_ctx *c)
{
    if (!c || --c->users > 0)
        return;
    int finalized = 1;
    MPI_Finalized(&finalized);
    fsdp_shm_close(c->shm);
    if (c->hier.peers != MPI_COMM_NULL && !finalized)
        MPI_Comm_free(&c->hier.peers);
    if (c->comm != MPI_COMM_NULL && !finalized)
        MPI_Comm_free(&c->comm);
    free(c->hier.peer_ranks);
    free(c->hier.ranks_at);
    if (c->pairs_open) fsdp_pairs_close(&c->pairs);
    if (c->hier.peers_open) fsdp_pairs_close(&c->hier.peer);
    free(c->hier.sums);
    free(c->hier.rows);
    free(c);
}

static void mpib_ctl_free(fsdp_ctl *h)
{
    mpib_release(h->ctx);
    free(h);
}

static void mpib_coll_free(fsdp_coll *b)
{
    mpib_release(b->ctx);
    free(b);
}

static const fsdp_ctl_i mpib_ctl = {
    .broadcast = mpib_broadcast,
    .min_max_u64 = mpib_min_max_u64,
    .max_u64 = mpib_max_u64,
    .sum_f64 = mpib_sum_f64,
    .barrier = mpib_barrier,
    .host_leaders = mpib_host_leaders,
    .free = mpib_ctl_free,
};

static const fsdp_coll_i mpib_coll = {
    .all_gather = mpib_all_gather,
    .reduce_scatter = mpib_reduce_scatter,
    .all_reduce = mpib_all_reduce,
    .free = mpib_coll_free,
    .all_gather_start = mpib_all_gather_start,
    .reduce_scatter_start = mpib_reduce_scatter_start,
    .wait = mpib_wait,
};

/* The shared-memory path only serves buffer collectives (`shm`). */
static fsdp_status mpib_open(mpib_ctx *c, int shm, int *rank, int *world)
{
    mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &c->comm));
    mpiCheck(MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN));
    mpiCheck(MPI_Comm_rank(c->comm, rank));
    mpiCheck(MPI_Comm_size(c->comm, world));
    if (shm)
        FSDP_TRY(fsdp_shm_open(c->comm, &c->shm));
    if (c->shm && !fsdp_shm_spans_all(c->shm))
        FSDP_TRY(open_peers(c, *rank, *world));
    if (!shm || fsdp_shm_spans_all(c->shm))
        return FSDP_OK;
    /* Every rank takes part in the check, whatever its own opening did. */
    int ok = fsdp_pairs_open(&c->pairs, c->comm, c->limit) == FSDP_OK;
    c->pairs_open = 1;
    if (ok && c->hier.node.machines > 1) {
        ok = fsdp_pairs_open(&c->hier.peer, c->hier.peers, c->limit) == FSDP_OK;
        c->hier.peer.wire = &c->hier.wire;
        c->hier.peers_open = 1;
    }
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c->comm));
    return ok ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "mpi backend: no memory for the exchanges between ranks");
}

fsdp_status fsdp_backend_mpi_create(fsdp_ctl **ctl, fsdp_coll **coll)
{
    int initialized = 0, finalized = 0;
    if (ctl)
        *ctl = NULL;
    if (coll)
        *coll = NULL;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return fsdp_fail(FSDP_ERR_COMM, "mpi backend: MPI is not initialised (or already finalised)");
    mpib_ctx *c = malloc(sizeof *c);
    fsdp_ctl *h = ctl ? malloc(sizeof *h) : NULL;
    fsdp_coll *b = coll ? malloc(sizeof *b) : NULL;
    if (!c || (ctl && !h) || (coll && !b)) {
        free(c);
        free(h);
        free(b);
        return fsdp_fail(FSDP_ERR_NOMEM, "mpi backend: no memory");
    }
    /* The creator's hold, dropped at the end: the context goes with it
     * where nothing was made. */
    *c = (mpib_ctx){ .comm = MPI_COMM_NULL, .hier = { .peers = MPI_COMM_NULL, .sums_slot = -1 }, .limit = INT_MAX,
                     .users = 1 };
    int rank = 0, world = 0;
    fsdp_status s = mpib_open(c, b != NULL, &rank, &world);
    if (s == FSDP_OK && h) {
        *h = (fsdp_ctl){ .iface = mpib_ctl, .name = "mpi", .rank = rank, .world = world, .ctx = c };
        c->users++;
        *ctl = h;
    } else {
        free(h);
    }
    if (s == FSDP_OK && b) {
        *b = (fsdp_coll){ .iface = mpib_coll, .name = "mpi", .rank = rank, .world = world,
                          .mem = FSDP_MEM_HOST, .starts_block = fsdp_shm_spans_all(c->shm),
                          .scratch_terms = hierarchical(c) ? 0 : c->pairs_open ? world - 1 : 0,
                          .sums_terms = hierarchical(c) ? 2 * c->hier.node.machines : 0,
                          .hierarchical = hierarchical(c), .node = c->hier.node,
                          .wire = hierarchical(c) ? &c->hier.wire : NULL, .ctx = c };
        if (c->shm) {
            b->iface.node_alloc = mpib_node_alloc;
            b->iface.node_sync = mpib_node_sync;
        }
        if (c->hier.node.machines > 1) {
            b->iface.peer_all_to_all = mpib_peer_all_to_all;
            b->iface.peer_all_gather = mpib_peer_all_gather;
            b->iface.peer_all_gather_start = mpib_peer_all_gather_start;
        }
        c->users++;
        *coll = b;
    } else {
        free(b);
    }
    mpib_release(c);
    return s;
}

void fsdp_backend_mpi_set_chunk_limit(fsdp_coll *b, size_t floats)
{
    if (!b || b->iface.free != mpib_coll_free)
        return;
    mpib_ctx *c = b->ctx;
    c->limit = floats < 1 ? 1 : floats > INT_MAX ? (size_t)INT_MAX : floats;
    c->pairs.limit = c->hier.peer.limit = c->limit;
}

int fsdp_backend_mpi_shared_memory(const fsdp_coll *b)
{
    return b && b->iface.free == mpib_coll_free && fsdp_shm_spans_all(((const mpib_ctx *)b->ctx)->shm);
}
