/* fsdp_backend_null.c: rank 0 of a world of N in which nothing moves, for
 * predicting a run of N ranks in one process (-fsdp-plan, fsdp_planner.h).
 * Every operation is there and checks its arguments as the real backends
 * do, but leaves the buffers as they are: the prediction counts sizes, not
 * values.  Host control is a lone rank's (fsdp_ctl_lone_create): agreement
 * has this one participant, and every rank shares its machine.  Started
 * collectives complete when called (starts_block), as on one machine's
 * shared memory, and node memory is this process's own, so a cfg with
 * shard_node_shared=1 is predicted as on one machine. */
#include <stdlib.h>
#include "fsdp_backend.h"
#include "fsdp_shm.h"

typedef struct null_ctx {
    fsdp_tickets tickets;
    size_t rs_started, rs_any;   /* the largest reduce-scatter part started, and of any (floats) */
    size_t peer_any;             /* the largest part exchanged with the peers (floats) */
    float *region[FSDP_SHM_REGIONS];
    int nregions;
    int owns_layout;             /* fsdp_backend_null_machines: node.peers and node.ranks_at are this one's */
} null_ctx;

static fsdp_status null_layout(fsdp_coll *b, const float *shard, const float *full, size_t n)
{
    int in_place;
    return fsdp_backend_check_layout(b, shard, full, n, &in_place);
}

static fsdp_status null_all_gather(fsdp_coll *b, const float *shard, float *full, size_t n)
{
    return null_layout(b, shard, full, n);
}

static void note_rs(fsdp_coll *b, size_t n, int started)
{
    null_ctx *c = b->ctx;
    if (n > c->rs_any) c->rs_any = n;
    if (started && n > c->rs_started) c->rs_started = n;
}

static fsdp_status null_reduce_scatter(fsdp_coll *b, const float *full, float *shard, size_t n)
{
    note_rs(b, n, 0);
    return null_layout(b, shard, full, n);
}

static fsdp_status null_all_reduce(fsdp_coll *b, float *buf, size_t count) { return FSDP_OK; }

/* A start: the next ticket, refused as the real backends refuse one. */
static fsdp_status null_issue(fsdp_coll *b, int *ticket)
{
    null_ctx *c = b->ctx;
    FSDP_TRY(fsdp_tickets_check(&c->tickets, b->name));
    fsdp_tickets_issue(&c->tickets, ticket);
    return FSDP_OK;
}

static fsdp_status null_start(fsdp_coll *b, const float *shard, const float *full, size_t n, int *ticket)
{
    FSDP_TRY(null_layout(b, shard, full, n));
    return null_issue(b, ticket);
}

static fsdp_status null_all_gather_start(fsdp_coll *b, const float *shard, float *full, size_t n, int *ticket)
{
    return null_start(b, shard, full, n, ticket);
}

static fsdp_status null_reduce_scatter_start(fsdp_coll *b, const float *full, float *shard, size_t n,
                                             int *ticket)
{
    note_rs(b, n, 1);
    return null_start(b, shard, full, n, ticket);
}

/* Between machines (a backend made like one that spans them): nothing moves. */
static void note_peer(fsdp_coll *b, size_t n)
{
    null_ctx *c = b->ctx;
    if (n > c->peer_any) c->peer_any = n;
}

static fsdp_status null_peer_all_to_all(fsdp_coll *b, const float *send, float *recv, size_t count)
{
    note_peer(b, count);
    return FSDP_OK;
}

static fsdp_status null_peer_all_gather(fsdp_coll *b, float *full, size_t shard)
{
    note_peer(b, shard);
    return FSDP_OK;
}

static fsdp_status null_peer_all_gather_start(fsdp_coll *b, float *full, size_t shard, int *ticket)
{
    note_peer(b, shard);
    return null_issue(b, ticket);
}

static fsdp_status null_wait(fsdp_coll *b, int ticket)
{
    null_ctx *c = b->ctx;
    uint64_t upto;
    FSDP_TRY(fsdp_tickets_wait_until(&c->tickets, b->name, ticket, &upto));
    c->tickets.waited = upto;
    return FSDP_OK;
}

/* Real memory: the engine copies this rank's parts into it. */
static fsdp_status null_node_alloc(fsdp_coll *b, size_t count, float **out)
{
    null_ctx *c = b->ctx;
    *out = c->nregions < FSDP_SHM_REGIONS ? calloc(count ? count : 1, sizeof(float)) : NULL;
    if (!*out) return fsdp_fail(FSDP_ERR_NOMEM, "no memory for %zu floats of node memory", count);
    c->region[c->nregions++] = *out;
    return FSDP_OK;
}

static fsdp_status null_node_sync(fsdp_coll *b) { return FSDP_OK; }

static void null_free(fsdp_coll *b)
{
    null_ctx *c = b->ctx;
    for (int k = 0; k < c->nregions; ++k) free(c->region[k]);
    if (c->owns_layout) {
        free((void *)b->node.peers);
        free((void *)b->node.ranks_at);
    }
    free(c);
    free(b);
}

static const fsdp_coll null_coll = {
    .iface = {
        .all_gather = null_all_gather,
        .reduce_scatter = null_reduce_scatter,
        .all_reduce = null_all_reduce,
        .free = null_free,
        .all_gather_start = null_all_gather_start,
        .reduce_scatter_start = null_reduce_scatter_start,
        .wait = null_wait,
        .node_alloc = null_node_alloc,
        .node_sync = null_node_sync,
        .peer_all_to_all = null_peer_all_to_all,
        .peer_all_gather = null_peer_all_gather,
        .peer_all_gather_start = null_peer_all_gather_start,
    },
    .name = "null",
    .rank = 0,
    .mem = FSDP_MEM_HOST,
    .starts_block = 1,
};

fsdp_status fsdp_backend_null_create(int world, fsdp_ctl **ctl, fsdp_coll **coll)
{
    if (ctl) *ctl = NULL;
    if (coll) *coll = NULL;
    if (world < 1) return fsdp_fail(FSDP_ERR_CONFIG, "a world of %d ranks", world);
    fsdp_coll *b = NULL;
    if (coll) {
        b = malloc(sizeof *b);
        null_ctx *c = calloc(1, sizeof *c);
        if (!b || !c) {
            free(b);
            free(c);
            return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
        }
        *b = null_coll;
        b->world = world;
        b->ctx = c;
    }
    if (ctl) {
        fsdp_status s = fsdp_ctl_lone_create("null", world, ctl);
        if (s != FSDP_OK) {
            if (b) null_free(b);
            return s;
        }
    }
    if (coll) *coll = b;
    return FSDP_OK;
}

fsdp_status fsdp_backend_null_like(const fsdp_coll *real, fsdp_coll **out)
{
    fsdp_coll *b;
    FSDP_TRY(fsdp_backend_null_create(real->world, NULL, &b));
    b->rank = real->rank;
    b->starts_block = real->starts_block;
    b->scratch_terms = real->scratch_terms;
    b->sums_terms = real->sums_terms;
    b->hierarchical = real->hierarchical;
    b->node = real->node;
    /* What the real one leaves out, so does this one: the same answers to
     * fsdp_coll_starts_* and fsdp_coll_maps_node. */
    if (!real->iface.all_gather_start) {
        b->iface.all_gather_start = NULL;
        b->iface.reduce_scatter_start = NULL;
        b->iface.wait = NULL;
    }
    if (!real->iface.node_alloc) {
        b->iface.node_alloc = NULL;
        b->iface.node_sync = NULL;
    }
    if (!real->iface.peer_all_gather_start) b->iface.peer_all_gather_start = NULL;
    *out = b;
    return FSDP_OK;
}

fsdp_status fsdp_backend_null_machines(fsdp_coll *b, int machines)
{
    null_ctx *c = b->ctx;
    if (machines < 2 || b->world % machines)
        return fsdp_fail(FSDP_ERR_CONFIG, "%d ranks on %d machines: each machine needs the same number of ranks",
                         b->world, machines);
    int ranks = b->world / machines;
    int *peers = malloc((size_t)machines * sizeof *peers), *at = malloc((size_t)b->world * sizeof *at);
    if (!peers || !at) {
        free(peers);
        free(at);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    /* Machine k runs ranks k*L .. k*L+L-1 (a launcher's ppr:L:node); this
     * rank, 0, is place 0 of machine 0, its peers place 0 of the others. */
    for (int r = 0; r < b->world; ++r) at[r] = r;
    for (int k = 0; k < machines; ++k) peers[k] = k * ranks;
    if (c->owns_layout) {
        free((void *)b->node.peers);
        free((void *)b->node.ranks_at);
    }
    c->owns_layout = 1;
    b->node = (fsdp_node_layout){ .machines = machines, .ranks = ranks, .rank = 0, .peers = peers, .ranks_at = at };
    /* As the MPI backend across machines of node memory (hierarchical). */
    b->hierarchical = 1;
    b->scratch_terms = 0;
    b->sums_terms = 2 * machines;
    return FSDP_OK;
}

void fsdp_backend_null_largest(const fsdp_coll *c, size_t *rs_started, size_t *rs_any)
{
    const null_ctx *n = c->ctx;
    *rs_started = n->rs_started;
    *rs_any = n->rs_any;
}

size_t fsdp_backend_null_largest_peer(const fsdp_coll *c)
{
    return ((const null_ctx *)c->ctx)->peer_any;
}
