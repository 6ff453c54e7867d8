/* fsdp_backend_nccl.c: the buffer collectives (fsdp_coll, fsdp_backend.h)
 * on NCCL, for float buffers in device memory.
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
 * also covers every earlier one; at most FSDP_TICKETS may be
 * outstanding (started, not yet waited for) at once (fsdp_tickets).
 *
 * Host control is not its business: NCCL's unique id goes through the host
 * control it is created with (MPI), which it does not keep.
 * Failures come back as a status (FSDP_ERR_CUDA, FSDP_ERR_COMM), never exit().
 */
#ifdef GPU

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include "fsdp_cuda_backends.h"
#include "fsdp_cuda.h"

#define ncclCheck(call) do { \
    ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) \
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                         ncclGetErrorString(r_), ncclGetLastError(NULL)); \
} while (0)

typedef struct {
    int device;
    ncclComm_t comm;
    cudaStream_t stream;        /* collectives run here */
    cudaEvent_t compute_done;   /* recorded on Darknet's stream before a collective */
    cudaEvent_t comm_done;      /* recorded on the comm stream after it */
    /* A started collective completes when its ticket slot's event fires. */
    cudaEvent_t done[FSDP_TICKETS];
    fsdp_tickets tickets;
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
static fsdp_status issue_all_gather(fsdp_coll *b, const float *shard, float *full,
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

static fsdp_status issue_reduce_scatter(fsdp_coll *b, const float *full, float *shard,
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

static fsdp_status nccl_all_gather(fsdp_coll *b, const float *shard, float *full,
                                   size_t shard_count)
{
    FSDP_TRY(issue_all_gather(b, shard, full, shard_count));
    return shard_count ? after(b->ctx) : FSDP_OK;
}

static fsdp_status nccl_reduce_scatter(fsdp_coll *b, const float *full, float *shard,
                                       size_t shard_count)
{
    FSDP_TRY(issue_reduce_scatter(b, full, shard, shard_count));
    return shard_count ? after(b->ctx) : FSDP_OK;
}

/* --- asynchronous variants: a ticket per collective ----------------------- */

/* The collective just enqueued (or none, for a zero count) completes with
 * the new ticket's event. */
static fsdp_status ticket_issue(nccl_ctx *c, int *ticket)
{
    cudaCheck(cudaEventRecord(c->done[fsdp_tickets_issue(&c->tickets, ticket)], c->stream));
    return FSDP_OK;
}

static fsdp_status nccl_all_gather_start(fsdp_coll *b, const float *shard, float *full,
                                         size_t shard_count, int *ticket)
{
    nccl_ctx *c = b->ctx;
    *ticket = -1;
    FSDP_TRY(fsdp_tickets_check(&c->tickets, b->name));
    FSDP_TRY(issue_all_gather(b, shard, full, shard_count));
    return ticket_issue(c, ticket);
}

static fsdp_status nccl_reduce_scatter_start(fsdp_coll *b, const float *full, float *shard,
                                             size_t shard_count, int *ticket)
{
    nccl_ctx *c = b->ctx;
    *ticket = -1;
    FSDP_TRY(fsdp_tickets_check(&c->tickets, b->name));
    FSDP_TRY(issue_reduce_scatter(b, full, shard, shard_count));
    return ticket_issue(c, ticket);
}

/* Darknet's stream waits for the ticket's collective, and so for every one
 * started before it (the comm stream runs them in order). */
static fsdp_status nccl_wait(fsdp_coll *b, int ticket)
{
    nccl_ctx *c = b->ctx;
    uint64_t upto;
    FSDP_TRY(fsdp_tickets_wait_until(&c->tickets, b->name, ticket, &upto));
    if (upto == c->tickets.waited) return FSDP_OK;
    cudaCheck(cudaStreamWaitEvent(DN_COMPUTE_STREAM, c->done[(upto - 1) % FSDP_TICKETS], 0));
    c->tickets.waited = upto;
    return FSDP_OK;
}

static fsdp_status nccl_all_reduce(fsdp_coll *b, float *buf, size_t count)
{
    nccl_ctx *c = b->ctx;
    if (count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c->comm, c->stream));
    return after(c);
}

/* Also frees a half-made backend (handles still zero are skipped). */
static void nccl_free(fsdp_coll *b)
{
    if (!b) return;
    nccl_ctx *c = b->ctx;
    if (c) {
        cudaSetDevice(c->device);
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->comm) ncclCommDestroy(c->comm);
        if (c->compute_done) cudaEventDestroy(c->compute_done);
        if (c->comm_done) cudaEventDestroy(c->comm_done);
        for (int i = 0; i < FSDP_TICKETS; i++)
            if (c->done[i]) cudaEventDestroy(c->done[i]);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(b);
}

static fsdp_status nccl_init(fsdp_coll *b, nccl_ctx *c, fsdp_ctl *ctl)
{
    /* Rank 0 makes the id; its status travels with it, so that a failure
     * there stops every rank instead of leaving the others in NCCL's init. */
    struct { int ok; ncclUniqueId id; } msg = { 0 };
    if (b->rank == 0) msg.ok = ncclGetUniqueId(&msg.id) == ncclSuccess;
    FSDP_TRY(fsdp_ctl_broadcast(ctl, &msg, sizeof msg, 0));
    if (!msg.ok)
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: ncclGetUniqueId failed on rank 0",
                         __FILE__, __LINE__);

    cudaCheck(cudaSetDevice(c->device));
    ncclCheck(ncclCommInitRank(&c->comm, b->world, msg.id, b->rank));
    cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    /* Ordering only: no timing, so recording them stays cheap. */
    cudaCheck(cudaEventCreateWithFlags(&c->compute_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&c->comm_done, cudaEventDisableTiming));
    for (int i = 0; i < FSDP_TICKETS; i++)
        cudaCheck(cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming));
    return FSDP_OK;
}

static const fsdp_coll_i nccl_coll = {
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .all_reduce = nccl_all_reduce,
    .free = nccl_free,
    .all_gather_start = nccl_all_gather_start,
    .reduce_scatter_start = nccl_reduce_scatter_start,
    .wait = nccl_wait,
};

fsdp_status fsdp_backend_nccl_create(fsdp_ctl *ctl, int device, fsdp_coll **out)
{
    *out = NULL;
    fsdp_coll *b = malloc(sizeof *b);
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return fsdp_fail(FSDP_ERR_NOMEM, "NCCL backend: out of memory");
    }
    *b = (fsdp_coll){ .iface = nccl_coll, .name = "nccl", .rank = ctl->rank, .world = ctl->world,
                      .mem = FSDP_MEM_DEVICE, .ctx = c };
    c->device = device;
    fsdp_status s = nccl_init(b, c, ctl);
    if (s != FSDP_OK) {
        nccl_free(b);
        return s;
    }
    *out = b;
    return FSDP_OK;
}

#endif /* GPU */
