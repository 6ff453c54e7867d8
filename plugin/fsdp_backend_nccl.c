/* fsdp_backend_nccl.c: the collective interface (fsdp_backend.h) on NCCL,
 * for float buffers in device memory.
 *
 * Streams.  Darknet (this 2018 version has no get_cuda_stream()) launches
 * every kernel, cuBLAS and cuDNN call on the legacy default stream.  The
 * collectives run on a stream of their own, created non-blocking so that it
 * does not synchronise implicitly with that default stream; the order is
 * kept with two events instead:
 *   compute --record--> compute_done --wait--> comm stream: the collective
 *   reads what Darknet wrote before the call;
 *   comm stream --record--> comm_done --wait--> compute: what Darknet
 *   enqueues after the call reads the collective's result.
 * Both waits are device-side, so callers never synchronise the host.
 *
 * all_gather_start / reduce_scatter_start skip the second wait: the
 * collective's completion is recorded in an event of a small ring, one per
 * ticket, and wait(ticket) makes the compute stream wait for it.  The comm
 * stream runs its collectives in the order issued, so waiting for a ticket
 * also covers every earlier one; at most FSDP_NCCL_TICKETS may be
 * outstanding (started, not yet waited for) at once.
 *
 * Host-memory helpers (broadcast, min/max, sums, barrier) go through MPI,
 * which the caller has initialised; NCCL's unique id travels over it too.
 * Failures come back as a status (FSDP_ERR_CUDA, FSDP_ERR_COMM), never exit().
 */
#ifdef GPU

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include "fsdp_backend.h"
#include "fsdp_cuda.h"
#include "fsdp_mpi.h"

#define ncclCheck(call) do { \
    ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) \
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                         ncclGetErrorString(r_), ncclGetLastError(NULL)); \
} while (0)


/* Outstanding tickets of all_gather_start / reduce_scatter_start at most. */
#define FSDP_NCCL_TICKETS 16

typedef struct {
    int device;
    ncclComm_t comm;
    cudaStream_t stream;        /* collectives run here */
    cudaEvent_t compute_done;   /* recorded on Darknet's stream before a collective */
    cudaEvent_t comm_done;      /* recorded on the comm stream after it */
    /* Ticket k (k counts the starts, from 0) is handed out as k mod 2^31 and
     * completes when done[k % FSDP_NCCL_TICKETS] fires; tickets below
     * `waited` have been waited for, those from `waited` to `issued` not yet. */
    cudaEvent_t done[FSDP_NCCL_TICKETS];
    uint64_t issued, waited;
} nccl_ctx;

/* The comm stream waits for everything Darknet has enqueued so far. */
static fsdp_status before(nccl_ctx *c)
{
    int cur = -1;
    cudaCheck(cudaGetDevice(&cur));
    /* Events and streams belong to one device; a wrong current device would
     * only show up as "invalid resource handle". */
    if (cur != c->device)
        return fsdp_fail(FSDP_ERR_CUDA, "%s:%d: NCCL backend made for GPU %d, called on GPU %d",
                         __FILE__, __LINE__, c->device, cur);
    cudaCheck(cudaEventRecord(c->compute_done, DN_COMPUTE_STREAM));
    cudaCheck(cudaStreamWaitEvent(c->stream, c->compute_done, 0));
    return FSDP_OK;
}

/* Darknet's later work waits for the collective just enqueued. */
static fsdp_status after(nccl_ctx *c)
{
    cudaCheck(cudaEventRecord(c->comm_done, c->stream));
    cudaCheck(cudaStreamWaitEvent(DN_COMPUTE_STREAM, c->comm_done, 0));
    return FSDP_OK;
}

/* Enqueue the all-gather on the comm stream, after Darknet's work so far.
 * A zero count is skipped on every rank alike (counts are equal on all
 * ranks), so the order of collectives stays the same everywhere.  NCCL's
 * in-place convention is the interface's (shard = full + rank * count). */
static fsdp_status issue_all_gather(fsdp_backend *b, const float *shard, float *full,
                                    size_t shard_count)
{
    nccl_ctx *c = b->ctx;
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, shard_count, &in_place));
    if (shard_count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclAllGather(shard, full, shard_count, ncclFloat, c->comm, c->stream));
    return FSDP_OK;
}

static fsdp_status issue_reduce_scatter(fsdp_backend *b, const float *full, float *shard,
                                        size_t shard_count)
{
    nccl_ctx *c = b->ctx;
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, shard_count, &in_place));
    if (shard_count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclReduceScatter(full, shard, shard_count, ncclFloat, ncclSum, c->comm,
                                c->stream));
    return FSDP_OK;
}

static fsdp_status nccl_all_gather(fsdp_backend *b, const float *shard, float *full,
                                   size_t shard_count)
{
    FSDP_TRY(issue_all_gather(b, shard, full, shard_count));
    return shard_count ? after(b->ctx) : FSDP_OK;
}

static fsdp_status nccl_reduce_scatter(fsdp_backend *b, const float *full, float *shard,
                                       size_t shard_count)
{
    FSDP_TRY(issue_reduce_scatter(b, full, shard, shard_count));
    return shard_count ? after(b->ctx) : FSDP_OK;
}

/* --- asynchronous variants: a ticket per collective ----------------------- */

/* Refused before anything is enqueued, on every rank alike (ranks start and
 * wait in the same order), so no rank is left inside a collective. */
static fsdp_status ticket_free(fsdp_backend *b)
{
    nccl_ctx *c = b->ctx;
    if (c->issued - c->waited < FSDP_NCCL_TICKETS) return FSDP_OK;
    return fsdp_fail(FSDP_ERR_UNSUPPORTED,
                     "nccl backend: %d collectives started and not yet waited for; wait for "
                     "the oldest before starting another (at most %d outstanding)",
                     FSDP_NCCL_TICKETS, FSDP_NCCL_TICKETS);
}

/* The collective just enqueued (or none, for a zero count) completes with
 * the new ticket's event. */
static fsdp_status ticket_issue(nccl_ctx *c, int *ticket)
{
    cudaCheck(cudaEventRecord(c->done[c->issued % FSDP_NCCL_TICKETS], c->stream));
    *ticket = (int)(c->issued & INT_MAX);
    c->issued++;
    return FSDP_OK;
}

static fsdp_status nccl_all_gather_start(fsdp_backend *b, const float *shard, float *full,
                                         size_t shard_count, int *ticket)
{
    *ticket = -1;
    FSDP_TRY(ticket_free(b));
    FSDP_TRY(issue_all_gather(b, shard, full, shard_count));
    return ticket_issue(b->ctx, ticket);
}

static fsdp_status nccl_reduce_scatter_start(fsdp_backend *b, const float *full, float *shard,
                                             size_t shard_count, int *ticket)
{
    *ticket = -1;
    FSDP_TRY(ticket_free(b));
    FSDP_TRY(issue_reduce_scatter(b, full, shard, shard_count));
    return ticket_issue(b->ctx, ticket);
}

/* Darknet's stream waits for the ticket's collective (and so for every one
 * started before it).  A ticket already covered by an earlier wait is done. */
static fsdp_status nccl_wait(fsdp_backend *b, int ticket)
{
    nccl_ctx *c = b->ctx;
    if (ticket >= 0) {
        /* Counts since the oldest outstanding ticket, modulo 2^31. */
        uint64_t ahead = ((uint64_t)ticket - c->waited) & INT_MAX;
        uint64_t behind = (c->waited - (uint64_t)ticket) & INT_MAX;
        if (ahead < c->issued - c->waited) {
            uint64_t k = c->waited + ahead;
            cudaCheck(cudaStreamWaitEvent(DN_COMPUTE_STREAM, c->done[k % FSDP_NCCL_TICKETS], 0));
            c->waited = k + 1;
            return FSDP_OK;
        }
        if (behind > 0 && behind <= c->waited)
            return FSDP_OK;
    }
    return fsdp_fail(FSDP_ERR_UNSUPPORTED, "nccl backend: wait for ticket %d, which was never "
                     "issued (%llu started, %llu waited for)", ticket,
                     (unsigned long long)c->issued, (unsigned long long)c->waited);
}

static fsdp_status nccl_all_reduce(fsdp_backend *b, float *buf, size_t count)
{
    nccl_ctx *c = b->ctx;
    if (count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c->comm, c->stream));
    return after(c);
}

/* --- host memory, over MPI (MPI counts are int: chunk larger buffers) ----- */

static fsdp_status host_broadcast(fsdp_backend *b, void *buf, size_t bytes, int root)
{
    FSDP_TRY(fsdp_backend_check_root(b, root));
    char *p = buf;
    while (bytes > 0) {
        int n = bytes > (size_t)INT_MAX ? INT_MAX : (int)bytes;
        mpiCheck(MPI_Bcast(p, n, MPI_BYTE, root, MPI_COMM_WORLD));
        p += n;
        bytes -= (size_t)n;
    }
    return FSDP_OK;
}

static fsdp_status host_min_max_u64(fsdp_backend *b, uint64_t v, uint64_t *min, uint64_t *max)
{
    uint64_t lo = v, hi = v;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
    if (min) *min = lo;
    if (max) *max = hi;
    return FSDP_OK;
}

static fsdp_status host_sum_f64(fsdp_backend *b, double *v, size_t count)
{
    while (count > 0) {
        int n = count > (size_t)INT_MAX ? INT_MAX : (int)count;
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        v += n;
        count -= (size_t)n;
    }
    return FSDP_OK;
}

/* After a barrier, this rank's collectives have also finished on the GPU
 * (e.g. before a checkpoint is written from device buffers). */
static fsdp_status host_barrier(fsdp_backend *b)
{
    nccl_ctx *c = b->ctx;
    cudaCheck(cudaStreamSynchronize(c->stream));
    mpiCheck(MPI_Barrier(MPI_COMM_WORLD));
    return FSDP_OK;
}

/* Also frees a half-made backend (handles still zero are skipped). */
static void nccl_destroy(fsdp_backend *b)
{
    if (!b) return;
    nccl_ctx *c = b->ctx;
    if (c) {
        cudaSetDevice(c->device);
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->comm) ncclCommDestroy(c->comm);
        if (c->compute_done) cudaEventDestroy(c->compute_done);
        if (c->comm_done) cudaEventDestroy(c->comm_done);
        for (int i = 0; i < FSDP_NCCL_TICKETS; i++)
            if (c->done[i]) cudaEventDestroy(c->done[i]);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(b);
}

static fsdp_status nccl_init(fsdp_backend *b, nccl_ctx *c)
{
    /* Rank 0 makes the id; its status travels with it, so that a failure
     * there stops every rank instead of leaving the others in NCCL's init. */
    struct { int ok; ncclUniqueId id; } msg = { 0 };
    if (b->rank == 0) msg.ok = ncclGetUniqueId(&msg.id) == ncclSuccess;
    mpiCheck(MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (!msg.ok)
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: ncclGetUniqueId failed on rank 0",
                         __FILE__, __LINE__);

    cudaCheck(cudaSetDevice(c->device));
    ncclCheck(ncclCommInitRank(&c->comm, b->world, msg.id, b->rank));
    cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    /* Ordering only: no timing, so recording them stays cheap. */
    cudaCheck(cudaEventCreateWithFlags(&c->compute_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&c->comm_done, cudaEventDisableTiming));
    for (int i = 0; i < FSDP_NCCL_TICKETS; i++)
        cudaCheck(cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming));
    return FSDP_OK;
}

fsdp_status fsdp_backend_nccl_create(fsdp_backend **out, int device)
{
    *out = NULL;
    fsdp_backend *b = calloc(1, sizeof *b);
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return fsdp_fail(FSDP_ERR_NOMEM, "NCCL backend: out of memory");
    }
    c->device = device;
    b->name = "nccl";
    b->mem = FSDP_MEM_DEVICE;
    b->ctx = c;
    b->all_gather = nccl_all_gather;
    b->reduce_scatter = nccl_reduce_scatter;
    b->all_reduce = nccl_all_reduce;
    b->broadcast = host_broadcast;
    b->min_max_u64 = host_min_max_u64;
    b->sum_f64 = host_sum_f64;
    b->barrier = host_barrier;
    b->destroy = nccl_destroy;
    b->all_gather_start = nccl_all_gather_start;
    b->reduce_scatter_start = nccl_reduce_scatter_start;
    b->wait = nccl_wait;

    /* Calling MPI before MPI_Init aborts the process: ask first. */
    fsdp_status s;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        s = fsdp_fail(FSDP_ERR_COMM, "NCCL backend: MPI is not initialised");
    else if (MPI_Comm_rank(MPI_COMM_WORLD, &b->rank) != MPI_SUCCESS
             || MPI_Comm_size(MPI_COMM_WORLD, &b->world) != MPI_SUCCESS)
        s = fsdp_fail(FSDP_ERR_COMM, "NCCL backend: no rank or size from MPI_COMM_WORLD");
    else
        s = nccl_init(b, c);
    if (s != FSDP_OK) {
        nccl_destroy(b);
        return s;
    }
    *out = b;
    return FSDP_OK;
}

#endif /* GPU */
