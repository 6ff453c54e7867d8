/* fsdp_backend.c: argument checks every engine applies the same way, so a
 * caller that works on one backend works on all. */
#include <limits.h>
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
    if (!hi) return local;
    fsdp_agreed_stop();
    if (local != FSDP_OK) return local;
    return fsdp_fail(others, "rank %d: another rank %s (see above)", b->rank, what);
}

int fsdp_backend_starts_all_gather(const fsdp_backend *b)
{
    return b->all_gather_start && b->wait && !b->starts_block;
}

int fsdp_backend_starts_reduce_scatter(const fsdp_backend *b)
{
    return b->reduce_scatter_start && b->wait && !b->starts_block;
}

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
