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

#define cudaCheck(call) do { \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) \
        return fsdp_fail(FSDP_ERR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(e_)); \
} while (0)

#define ncclCheck(call) do { \
    ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) \
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                         ncclGetErrorString(r_), ncclGetLastError(NULL)); \
} while (0)

#define mpiCheck(call) do { \
    int m_ = (call); \
    if (m_ != MPI_SUCCESS) { \
        char s_[MPI_MAX_ERROR_STRING]; int n_ = 0; \
        MPI_Error_string(m_, s_, &n_); \
        return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: %s", __FILE__, __LINE__, #call, s_); \
    } \
} while (0)

/* Darknet's compute stream.  Named explicitly so that the plugin means the
 * legacy default stream even if it were built with per-thread default
 * streams. */
#define DN_COMPUTE_STREAM cudaStreamLegacy

typedef struct {
    int device;
    ncclComm_t comm;
    cudaStream_t stream;        /* collectives run here */
    cudaEvent_t compute_done;   /* recorded on Darknet's stream before a collective */
    cudaEvent_t comm_done;      /* recorded on the comm stream after it */
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

/* A zero count is skipped on every rank alike (counts are equal on all
 * ranks), so the order of collectives stays the same everywhere. */
static fsdp_status nccl_all_gather(fsdp_backend *b, const float *shard, float *full,
                                   size_t shard_count)
{
    nccl_ctx *c = b->ctx;
    if (shard_count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclAllGather(shard, full, shard_count, ncclFloat, c->comm, c->stream));
    return after(c);
}

static fsdp_status nccl_reduce_scatter(fsdp_backend *b, const float *full, float *shard,
                                       size_t shard_count)
{
    nccl_ctx *c = b->ctx;
    if (shard_count == 0) return FSDP_OK;
    FSDP_TRY(before(c));
    ncclCheck(ncclReduceScatter(full, shard, shard_count, ncclFloat, ncclSum, c->comm,
                                c->stream));
    return after(c);
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
