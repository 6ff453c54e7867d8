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
 * The watchdog.  A collective returns once queued, so a stalled peer shows
 * on the host only where something waits for the device (Darknet's
 * cudaMemcpy), which no timeout covers.  The communicator is non-blocking
 * (config.blocking = 0): every call returns at once, ncclInProgress while
 * NCCL still works in the background, and `settle` polls its state with
 * ncclCommGetAsyncError for at most -fsdp-timeout, then ncclCommAbort; so
 * NCCL's start (ncclCommInitRankConfig) is timed too.  Each collective
 * queued records an event after it (fsdp_inflight.h), and the watchdog's
 * thread (fsdp_watch_probe) polls the oldest pending one with
 * cudaEventQuery and the communicator with ncclCommGetAsyncError: a
 * collective pending for -fsdp-timeout, or an error NCCL reports, aborts
 * the communicator and stops the rank with the collective named.
 *
 * Host control is not its business: NCCL's unique id goes through the host
 * control it is created with (MPI), which it does not keep.
 * Failures come back as a status (FSDP_ERR_CUDA, FSDP_ERR_COMM), never exit().
 */
#ifdef GPU

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include "fsdp_cuda_backends.h"
#include "fsdp_cuda.h"
#include "fsdp_inflight.h"
#include "fsdp_watch.h"

/* A call on the non-blocking communicator, settled (below). */
#define ncclCheck(c, call) FSDP_TRY(settle((c), (call), #call, __FILE__, __LINE__))

typedef struct {
    int device;
    ncclComm_t comm;
    cudaStream_t stream;        /* collectives run here */
    cudaEvent_t compute_done;   /* recorded on Darknet's stream before a collective */
    cudaEvent_t comm_done;      /* recorded on the comm stream after it */
    /* A started collective completes when its ticket slot's event fires. */
    cudaEvent_t done[FSDP_TICKETS];
    fsdp_tickets tickets;
    /* What the watchdog's thread polls (under lock): an event recorded
     * after each collective, by its slot in `inflight`. */
    pthread_mutex_t lock;
    fsdp_inflight inflight;
    cudaEvent_t track[FSDP_INFLIGHT];
    int aborted;   /* ncclCommAbort ran: the communicator is gone */
} nccl_ctx;

static double clock_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Once, from either thread: the caller holds c->lock. */
static void abort_locked(nccl_ctx *c)
{
    if (c->comm && !c->aborted) ncclCommAbort(c->comm);
    c->aborted = 1;
}

static void abort_comm(nccl_ctx *c)
{
    pthread_mutex_lock(&c->lock);
    abort_locked(c);
    pthread_mutex_unlock(&c->lock);
}

/* A call on the non-blocking communicator returns ncclInProgress while NCCL
 * still works on it in the background (its start, connecting to peers on a
 * first collective); nothing else may be called on the communicator until
 * its state, polled with ncclCommGetAsyncError, leaves ncclInProgress.
 * Polled for at most -fsdp-timeout (none: for ever); a timeout or an error
 * aborts the communicator. */
static fsdp_status settle(nccl_ctx *c, ncclResult_t r, const char *what, const char *file, int line)
{
    double t0 = clock_s(), limit = fsdp_watch_timeout();
    while (r == ncclInProgress) {
        if (limit > 0 && clock_s() - t0 >= limit) {
            abort_comm(c);
            return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s made no progress for %.0f s (-fsdp-timeout %g): another "
                             "rank stopped, hung or died, or cannot reach this one; NCCL's communicator aborted",
                             file, line, what, clock_s() - t0, limit);
        }
        usleep(100);
        if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess) return FSDP_OK;
    fsdp_status s = fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: %s (%s)", file, line, what, ncclGetErrorString(r),
                              ncclGetLastError(c->comm));
    abort_comm(c);
    return s;
}

/* The watchdog thread's probe (fsdp_watch_probe). */
static int track_done(void *ctx, int slot)
{
    return cudaEventQuery(((nccl_ctx *)ctx)->track[slot]) == cudaSuccess;
}

static int probe(void *ctx, double timeout_s, char *why, size_t n)
{
    nccl_ctx *c = ctx;
    const char *what = NULL;
    double pending = 0;
    ncclResult_t r = ncclSuccess;
    pthread_mutex_lock(&c->lock);
    /* The current device is per thread: this one's is set here. */
    int stalled = cudaSetDevice(c->device) == cudaSuccess &&
                  fsdp_inflight_stalled(&c->inflight, track_done, c, clock_s(), timeout_s, &what, &pending);
    if (!stalled && !c->aborted && ncclCommGetAsyncError(c->comm, &r) == ncclSuccess && r != ncclInProgress &&
        r != ncclSuccess)
        snprintf(why, n, "NCCL reports %s (%s)", ncclGetErrorString(r), ncclGetLastError(c->comm));
    else if (stalled)
        snprintf(why, n, "NCCL %s made no progress for %.0f s", what, pending);
    int bad = stalled || (r != ncclSuccess && r != ncclInProgress);
    if (bad) abort_locked(c);
    pthread_mutex_unlock(&c->lock);
    return bad;
}

/* The collective just queued on the comm stream, for the watchdog.  The
 * slot is taken under the lock and its event recorded outside it: a record
 * may block while the device's queue is full behind a stalled collective,
 * and the watchdog must still get the lock then.  Until it is recorded the
 * slot's event reads as done (never recorded, or done long ago), so only
 * that one collective goes unwatched; the earlier ones still pending are. */
static fsdp_status track(nccl_ctx *c, const char *what)
{
    pthread_mutex_lock(&c->lock);
    int slot = fsdp_inflight_issue(&c->inflight, what, clock_s());
    pthread_mutex_unlock(&c->lock);
    cudaCheck(cudaEventRecord(c->track[slot], c->stream));
    return FSDP_OK;
}

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
    ncclCheck(c, ncclAllGather(shard, full, shard_count, ncclFloat, c->comm, c->stream));
    return track(c, "all-gather");
}

static fsdp_status issue_reduce_scatter(fsdp_coll *b, const float *full, float *shard,
                                        size_t shard_count)
{
    nccl_ctx *c = b->ctx;
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, shard_count, &in_place));
    if (shard_count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(c, ncclReduceScatter(full, shard, shard_count, ncclFloat, ncclSum, c->comm, c->stream));
    return track(c, "reduce-scatter");
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
    ncclCheck(c, ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c->comm, c->stream));
    FSDP_TRY(track(c, "all-reduce"));
    return after(c);
}

/* Also frees a half-made backend (handles still zero are skipped). */
static void nccl_free(fsdp_coll *b)
{
    if (!b) return;
    nccl_ctx *c = b->ctx;
    if (c) {
        cudaSetDevice(c->device);
        /* Still watched (a peer gone now would hang the sync), unless
         * aborted: that communicator's stream may never finish.  Finalize
         * completes NCCL's own work; on a non-blocking communicator it is
         * polled, and aborted where it fails or stalls. */
        if (c->stream && !c->aborted) cudaStreamSynchronize(c->stream);
        if (c->comm && !c->aborted)
            (void)settle(c, ncclCommFinalize(c->comm), "ncclCommFinalize", __FILE__, __LINE__);
        fsdp_watch_probe(NULL, NULL);
        if (c->comm && !c->aborted) ncclCommDestroy(c->comm);
        for (int i = 0; i < FSDP_INFLIGHT; i++)
            if (c->track[i]) cudaEventDestroy(c->track[i]);
        pthread_mutex_destroy(&c->lock);
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
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;   /* its start too is timed (settle) */
    ncclCheck(c, ncclCommInitRankConfig(&c->comm, b->world, msg.id, b->rank, &config));
    cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    /* Ordering only: no timing, so recording them stays cheap. */
    cudaCheck(cudaEventCreateWithFlags(&c->compute_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&c->comm_done, cudaEventDisableTiming));
    for (int i = 0; i < FSDP_TICKETS; i++)
        cudaCheck(cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming));
    for (int i = 0; i < FSDP_INFLIGHT; i++)
        cudaCheck(cudaEventCreateWithFlags(&c->track[i], cudaEventDisableTiming));
    fsdp_watch_probe(probe, c);
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
    pthread_mutex_init(&c->lock, NULL);
    fsdp_status s = nccl_init(b, c, ctl);
    if (s != FSDP_OK) {
        nccl_free(b);
        return s;
    }
    *out = b;
    return FSDP_OK;
}

#endif /* GPU */
