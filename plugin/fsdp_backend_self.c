/* fsdp_backend_self.c: a world of one, on host memory.  Every collective is
 * a copy or nothing, so a single process runs the same code path as N ranks
 * without MPI or NCCL.  In place (shard == full) copies nothing. */
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"

/* With one rank, all-gather and reduce-scatter are the same copy, one each
 * way between shard and full. */
static fsdp_status self_copy(fsdp_backend *b, const float *shard, const float *full, size_t n,
                             float *to, const float *from)
{
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    if (n > 0 && !in_place)
        memcpy(to, from, n * sizeof(float));
    return FSDP_OK;
}

static fsdp_status self_all_gather(fsdp_backend *b, const float *shard, float *full, size_t n)
{
    return self_copy(b, shard, full, n, full, shard);
}

static fsdp_status self_reduce_scatter(fsdp_backend *b, const float *full, float *shard, size_t n)
{
    return self_copy(b, shard, full, n, shard, full);
}

static fsdp_status self_all_reduce(fsdp_backend *b, float *buf, size_t count)
{
    return FSDP_OK;
}

static fsdp_status self_broadcast(fsdp_backend *b, void *buf, size_t bytes, int root)
{
    return fsdp_backend_check_root(b, root);
}

static fsdp_status self_min_max_u64(fsdp_backend *b, uint64_t v, uint64_t *min, uint64_t *max)
{
    *min = *max = v;
    return FSDP_OK;
}

static fsdp_status self_max_u64(fsdp_backend *b, uint64_t *v, size_t count)
{
    return FSDP_OK;
}

static fsdp_status self_sum_f64(fsdp_backend *b, double *v, size_t count)
{
    return FSDP_OK;
}

static fsdp_status self_barrier(fsdp_backend *b)
{
    return FSDP_OK;
}

static void self_destroy(fsdp_backend *b)
{
    free(b);
}

static const fsdp_backend self_ops = {
    .name = "self",
    .rank = 0,
    .world = 1,
    .mem = FSDP_MEM_HOST,
    .all_gather = self_all_gather,
    .reduce_scatter = self_reduce_scatter,
    .all_reduce = self_all_reduce,
    .broadcast = self_broadcast,
    .min_max_u64 = self_min_max_u64,
    .max_u64 = self_max_u64,
    .sum_f64 = self_sum_f64,
    .barrier = self_barrier,
    .destroy = self_destroy,
};

fsdp_status fsdp_backend_self_create(fsdp_backend **out)
{
    *out = malloc(sizeof **out);
    if (!*out)
        return fsdp_fail(FSDP_ERR_NOMEM, "self backend: no memory");
    **out = self_ops;
    return FSDP_OK;
}
