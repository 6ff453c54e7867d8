/* fsdp_backend.c: what every backend shares (fsdp_backend.h): argument
 * checks applied the same way, so a caller that works on one backend works
 * on all; the dispatch that stands in for optional operations; a lone
 * rank's host control; the ticket ring. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"

fsdp_status fsdp_backend_check_layout(const fsdp_coll *c, const float *shard,
                                      const float *full, size_t shard_count, int *in_place)
{
    /* NCCL's in-place convention (shard = full + rank * shard_count); MPI's
     * MPI_IN_PLACE differs for reduce-scatter, so backends translate. */
    *in_place = shard_count > 0 && shard == full + (size_t)c->rank * shard_count;
    if (*in_place || shard_count == 0)
        return FSDP_OK;
    uintptr_t s = (uintptr_t)shard, f = (uintptr_t)full;
    uintptr_t s_end = s + shard_count * sizeof(float);
    uintptr_t f_end = f + shard_count * (size_t)c->world * sizeof(float);
    if (s_end <= f || f_end <= s)
        return FSDP_OK;
    return fsdp_fail(FSDP_ERR_UNSUPPORTED,
                     "%s backend: shard overlaps the full buffer but is not rank %d's part of it",
                     c->name, c->rank);
}

fsdp_status fsdp_backend_check_root(const fsdp_ctl *c, int root)
{
    if (root >= 0 && root < c->world)
        return FSDP_OK;
    return fsdp_fail(FSDP_ERR_COMM, "%s backend: broadcast root %d outside world of %d",
                     c->name, root, c->world);
}

void fsdp_ctl_free(fsdp_ctl *c)
{
    if (c) c->iface.free(c);
}

void fsdp_coll_free(fsdp_coll *c)
{
    if (c) c->iface.free(c);
}

fsdp_status fsdp_ctl_all_ok(fsdp_ctl *c, fsdp_status local, fsdp_status others, const char *what)
{
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_min_max_u64(c, local != FSDP_OK, &lo, &hi));
    if (!hi) return local;
    fsdp_agreed_stop();
    if (local != FSDP_OK) return local;
    return fsdp_fail(others, "rank %d: another rank %s (see above)", c->rank, what);
}

/* ---- the optional operations, stood in for where a backend lacks them ---- */

int fsdp_coll_starts_all_gather(const fsdp_coll *c)
{
    return c->iface.all_gather_start && c->iface.wait && !c->starts_block;
}

int fsdp_coll_starts_reduce_scatter(const fsdp_coll *c)
{
    return c->iface.reduce_scatter_start && c->iface.wait && !c->starts_block;
}

fsdp_status fsdp_coll_all_gather_start(fsdp_coll *c, const float *shard, float *full, size_t n, int *ticket)
{
    if (c->iface.all_gather_start) return c->iface.all_gather_start(c, shard, full, n, ticket);
    *ticket = FSDP_TICKET_DONE;
    return c->iface.all_gather(c, shard, full, n);
}

fsdp_status fsdp_coll_reduce_scatter_start(fsdp_coll *c, const float *full, float *shard, size_t n, int *ticket)
{
    if (c->iface.reduce_scatter_start) return c->iface.reduce_scatter_start(c, full, shard, n, ticket);
    *ticket = FSDP_TICKET_DONE;
    return c->iface.reduce_scatter(c, full, shard, n);
}

fsdp_status fsdp_coll_wait(fsdp_coll *c, int ticket)
{
    if (ticket == FSDP_TICKET_DONE) return FSDP_OK;
    if (c->iface.wait) return c->iface.wait(c, ticket);
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: wait for ticket %d, which was never issued "
                     "(it starts no collectives)", c->name, ticket);
}

int fsdp_coll_maps_node(const fsdp_coll *c)
{
    return c->iface.node_alloc && c->iface.node_sync;
}

static fsdp_status no_node(const fsdp_coll *c)
{
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: its ranks map no node memory (several machines, "
                     "device memory, or FSDP_SHM=0)", c->name);
}

fsdp_status fsdp_coll_node_alloc(fsdp_coll *c, size_t count, float **out)
{
    *out = NULL;
    return fsdp_coll_maps_node(c) ? c->iface.node_alloc(c, count, out) : no_node(c);
}

fsdp_status fsdp_coll_node_sync(fsdp_coll *c)
{
    return fsdp_coll_maps_node(c) ? c->iface.node_sync(c) : no_node(c);
}

fsdp_node_layout fsdp_coll_node_layout(const fsdp_coll *c)
{
    if (c->node.machines > 1) return c->node;
    return (fsdp_node_layout){ .machines = 1, .ranks = c->world, .rank = c->rank, .peers = NULL };
}

static fsdp_status no_peers(const fsdp_coll *c)
{
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: no exchange between machines' node memory", c->name);
}

fsdp_status fsdp_coll_peer_all_to_all(fsdp_coll *c, const float *send, float *recv, size_t count)
{
    size_t n = (size_t)(c->node.machines > 1 ? c->node.machines : 1) * count;
    if (count && send < recv + n && recv < send + n)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: peer_all_to_all's send and recv overlap", c->name);
    if (c->node.machines > 1)
        return c->iface.peer_all_to_all ? c->iface.peer_all_to_all(c, send, recv, count) : no_peers(c);
    memcpy(recv, send, count * sizeof(float));
    return FSDP_OK;
}

fsdp_status fsdp_coll_peer_all_gather(fsdp_coll *c, float *full, size_t shard)
{
    if (c->node.machines > 1)
        return c->iface.peer_all_gather ? c->iface.peer_all_gather(c, full, shard) : no_peers(c);
    return FSDP_OK;
}

fsdp_status fsdp_coll_peer_all_gather_start(fsdp_coll *c, float *full, size_t shard, int *ticket)
{
    if (c->node.machines > 1 && c->iface.peer_all_gather_start)
        return c->iface.peer_all_gather_start(c, full, shard, ticket);
    *ticket = FSDP_TICKET_DONE;
    return fsdp_coll_peer_all_gather(c, full, shard);
}

/* ---- host control of a lone rank: self and null ---------------------------- */

static fsdp_status lone_broadcast(fsdp_ctl *c, void *buf, size_t bytes, int root)
{
    return fsdp_backend_check_root(c, root);
}

static fsdp_status lone_min_max_u64(fsdp_ctl *c, uint64_t v, uint64_t *min, uint64_t *max)
{
    *min = *max = v;
    return FSDP_OK;
}

static fsdp_status lone_max_u64(fsdp_ctl *c, uint64_t *v, size_t count) { return FSDP_OK; }
static fsdp_status lone_sum_f64(fsdp_ctl *c, double *v, size_t count) { return FSDP_OK; }
static fsdp_status lone_barrier(fsdp_ctl *c) { return FSDP_OK; }

static fsdp_status lone_host_leaders(fsdp_ctl *c, int *leader)
{
    for (int r = 0; r < c->world; ++r) leader[r] = 0;
    return FSDP_OK;
}

static void lone_free(fsdp_ctl *c)
{
    free(c);
}

fsdp_status fsdp_ctl_lone_create(const char *name, int world, fsdp_ctl **out)
{
    *out = NULL;
    if (world < 1) return fsdp_fail(FSDP_ERR_CONFIG, "a world of %d ranks", world);
    fsdp_ctl *c = malloc(sizeof *c);
    if (!c) return fsdp_fail(FSDP_ERR_NOMEM, "%s backend: no memory", name);
    *c = (fsdp_ctl){
        .iface = { .broadcast = lone_broadcast, .min_max_u64 = lone_min_max_u64, .max_u64 = lone_max_u64,
                   .sum_f64 = lone_sum_f64, .barrier = lone_barrier, .host_leaders = lone_host_leaders,
                   .free = lone_free },
        .name = name,
        .rank = 0,
        .world = world,
    };
    *out = c;
    return FSDP_OK;
}

/* ---- tickets ----------------------------------------------------------------- */

fsdp_status fsdp_tickets_check(const fsdp_tickets *t, const char *backend)
{
    if (t->issued - t->waited < FSDP_TICKETS) return FSDP_OK;
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: %d collectives started and not yet waited for; "
                     "wait for the oldest before starting another", backend, FSDP_TICKETS);
}

int fsdp_tickets_issue(fsdp_tickets *t, int *ticket)
{
    *ticket = (int)(t->issued & INT_MAX);
    return (int)(t->issued++ % FSDP_TICKETS);
}

fsdp_status fsdp_tickets_wait_until(const fsdp_tickets *t, const char *backend, int ticket, uint64_t *upto)
{
    *upto = t->waited;
    if (ticket >= 0) {
        /* Counts since the oldest outstanding ticket, modulo 2^31. */
        uint64_t ahead = ((uint64_t)ticket - t->waited) & INT_MAX;
        uint64_t behind = (t->waited - (uint64_t)ticket) & INT_MAX;
        if (ahead < t->issued - t->waited) {
            *upto = t->waited + ahead + 1;
            return FSDP_OK;
        }
        if (behind > 0 && behind <= t->waited) return FSDP_OK;   /* waited for already, with a later ticket */
    }
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s backend: wait for ticket %d, which was never issued "
                     "(%llu started, %llu waited for)", backend, ticket, (unsigned long long)t->issued,
                     (unsigned long long)t->waited);
}
