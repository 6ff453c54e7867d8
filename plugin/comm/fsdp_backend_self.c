/* fsdp_backend_self.c: a world of one, on host memory.  Every collective is
 * a copy or nothing, so a single process runs the same code path as N ranks
 * without MPI or NCCL.  In place (shard == full) copies nothing.  Its host
 * control is a lone rank's (fsdp_ctl_lone_create). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"

/* With one rank, all-gather and reduce-scatter are the same copy, one each
 * way between shard and full. */
static fsdp_status self_copy(fsdp_coll *c, const float *shard, const float *full, size_t n,
                             float *to, const float *from)
{
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(c, shard, full, n, &in_place));
    if (n > 0 && !in_place)
        memcpy(to, from, n * sizeof(float));
    return FSDP_OK;
}

static fsdp_status self_all_gather(fsdp_coll *c, const float *shard, float *full, size_t n)
{
    return self_copy(c, shard, full, n, full, shard);
}

static fsdp_status self_reduce_scatter(fsdp_coll *c, const float *full, float *shard, size_t n)
{
    return self_copy(c, shard, full, n, shard, full);
}

static fsdp_status self_all_reduce(fsdp_coll *c, float *buf, size_t count)
{
    return FSDP_OK;
}

static void self_free(fsdp_coll *c)
{
    free(c);
}

static const fsdp_coll self_coll = {
    .iface = {
        .all_gather = self_all_gather,
        .reduce_scatter = self_reduce_scatter,
        .all_reduce = self_all_reduce,
        .free = self_free,
    },
    .name = "self",
    .rank = 0,
    .world = 1,
    .mem = FSDP_MEM_HOST,
};

fsdp_status fsdp_backend_self_create(fsdp_ctl **ctl, fsdp_coll **coll)
{
    fsdp_coll *c = NULL;
    if (coll) {
        *coll = NULL;
        c = malloc(sizeof *c);
        if (!c) return fsdp_fail(FSDP_ERR_NOMEM, "self backend: no memory");
        *c = self_coll;
    }
    if (ctl) {
        fsdp_status s = fsdp_ctl_lone_create("self", 1, ctl);
        if (s != FSDP_OK) {
            free(c);
            return s;
        }
    }
    if (coll) *coll = c;
    return FSDP_OK;
}
