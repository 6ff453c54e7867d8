/* fsdp_backend.c: argument checks every engine applies the same way, so a
 * caller that works on one backend works on all. */
#include <stdint.h>
#include "fsdp_backend.h"

fsdp_status fsdp_backend_check_layout(const fsdp_backend *b, const float *shard,
                                      const float *full, size_t shard_count, int *in_place)
{
    /* NCCL's in-place convention (shard = full + rank * shard_count); MPI's
     * MPI_IN_PLACE differs for reduce-scatter, so engines translate. */
    *in_place = shard_count > 0 && shard == full + (size_t)b->rank * shard_count;
    if (*in_place || shard_count == 0)
        return FSDP_OK;
    uintptr_t s = (uintptr_t)shard, f = (uintptr_t)full;
    uintptr_t s_end = s + shard_count * sizeof(float);
    uintptr_t f_end = f + shard_count * (size_t)b->world * sizeof(float);
    if (s_end <= f || f_end <= s)
        return FSDP_OK;
    return fsdp_fail(FSDP_ERR_UNSUPPORTED,
                     "%s backend: shard overlaps the full buffer but is not rank %d's part of it",
                     b->name, b->rank);
}

fsdp_status fsdp_backend_check_root(const fsdp_backend *b, int root)
{
    if (root >= 0 && root < b->world)
        return FSDP_OK;
    return fsdp_fail(FSDP_ERR_COMM, "%s backend: broadcast root %d outside world of %d",
                     b->name, root, b->world);
}

fsdp_status fsdp_backend_all_ok(fsdp_backend *b, fsdp_status local, fsdp_status others, const char *what)
{
    uint64_t lo, hi;
    FSDP_TRY(b->min_max_u64(b, local != FSDP_OK, &lo, &hi));
    if (!hi || local != FSDP_OK) return local;
    return fsdp_fail(others, "rank %d: another rank %s (see above)", b->rank, what);
}
