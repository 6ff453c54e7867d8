/* test_backend: the planner's null backend, and the dispatch that stands in
 * for what a backend leaves out. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_backend.h"

/* -fsdp-plan's stand-in (fsdp_backend_null.c): every operation offered and
 * checked, nothing moved, started collectives bounded as the real ones,
 * node memory real. */
Test(null_backend, offers_everything_moves_nothing, .init = cr_redirect_stderr)
{
    fsdp_ctl *h = NULL;
    fsdp_coll *be = NULL;
    cr_assert_eq(fsdp_backend_null_create(4, &h, &be), FSDP_OK);
    cr_assert(be->rank == 0 && be->world == 4 && be->starts_block);
    cr_assert(h->rank == 0 && h->world == 4);
    cr_assert(be->iface.all_gather && be->iface.reduce_scatter && be->iface.all_reduce && h->iface.broadcast &&
              h->iface.min_max_u64 && h->iface.max_u64 && h->iface.sum_f64 && h->iface.barrier &&
              h->iface.host_leaders && be->iface.all_gather_start && be->iface.reduce_scatter_start &&
              be->iface.wait && be->iface.node_alloc && be->iface.node_sync && be->iface.free && h->iface.free);
    cr_assert(!fsdp_coll_starts_all_gather(be) && !fsdp_coll_starts_reduce_scatter(be));
    float full[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, shard[2] = { 9, 9 };
    cr_assert_eq(fsdp_coll_all_gather(be, shard, full, 2), FSDP_OK);
    cr_assert_eq(fsdp_coll_reduce_scatter(be, full, shard, 2), FSDP_OK);
    cr_assert(full[0] == 1 && full[7] == 8 && shard[0] == 9 && shard[1] == 9);
    cr_assert_neq(fsdp_coll_all_gather(be, full + 1, full, 2), FSDP_OK);   /* overlapping, not in place */
    cr_assert_neq(fsdp_ctl_broadcast(h, full, 4, 4), FSDP_OK);          /* no rank 4 */
    int ticket = -1, last = -1;
    for (int k = 0; k < FSDP_TICKETS; ++k) cr_assert_eq(fsdp_coll_all_gather_start(be, shard, full, 2, &last), FSDP_OK);
    cr_assert_neq(fsdp_coll_reduce_scatter_start(be, full, shard, 2, &ticket), FSDP_OK);   /* the ring is full */
    cr_assert_eq(fsdp_coll_wait(be, last), FSDP_OK);
    cr_assert_eq(fsdp_coll_reduce_scatter_start(be, full, shard, 2, &ticket), FSDP_OK);
    cr_assert_eq(fsdp_coll_wait(be, ticket), FSDP_OK);
    float *node = NULL;
    cr_assert_eq(fsdp_coll_node_alloc(be, 1000, &node), FSDP_OK);
    cr_assert(node != NULL && node[0] == 0 && node[999] == 0);
    node[999] = 1;
    int leader[4] = { -1, -1, -1, -1 };
    cr_assert_eq(fsdp_ctl_host_leaders(h, leader), FSDP_OK);   /* one machine */
    cr_assert(leader[0] == 0 && leader[1] == 0 && leader[2] == 0 && leader[3] == 0);
    fsdp_coll_free(be);
    fsdp_ctl_free(h);
}

/* Where a backend cannot start collectives or map node memory, the
 * dispatch stands in: a start is the blocking call with a ticket that is
 * done, node memory a clear refusal. */
Test(dispatch, stands_in_for_optional_operations, .init = cr_redirect_stderr)
{
    fsdp_coll *b = NULL;
    cr_assert_eq(fsdp_backend_self_create(NULL, &b), FSDP_OK);
    cr_assert(!fsdp_coll_starts_all_gather(b) && !fsdp_coll_starts_reduce_scatter(b) && !fsdp_coll_maps_node(b));
    float full[3] = { 1, 2, 3 }, shard[3] = { 0, 0, 0 };
    int ticket = -1;
    cr_assert_eq(fsdp_coll_all_gather_start(b, shard, full, 3, &ticket), FSDP_OK);
    cr_assert(ticket == FSDP_TICKET_DONE && full[0] == 0 && full[2] == 0);   /* gathered already */
    cr_assert_eq(fsdp_coll_wait(b, ticket), FSDP_OK);
    full[1] = 7;
    cr_assert_eq(fsdp_coll_reduce_scatter_start(b, full, shard, 3, &ticket), FSDP_OK);
    cr_assert(ticket == FSDP_TICKET_DONE && shard[1] == 7);
    cr_assert_eq(fsdp_coll_wait(b, ticket), FSDP_OK);
    cr_assert_eq(fsdp_coll_wait(b, 0), FSDP_ERR_UNSUPPORTED);   /* never issued */
    float *node = full;
    cr_assert_eq(fsdp_coll_node_alloc(b, 10, &node), FSDP_ERR_UNSUPPORTED);
    cr_assert_null(node);
    cr_assert_eq(fsdp_coll_node_sync(b), FSDP_ERR_UNSUPPORTED);
    fsdp_coll_free(b);
}
