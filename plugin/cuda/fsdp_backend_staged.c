/* fsdp_backend_staged.c: buffer collectives (fsdp_coll) on device memory
 * through host-memory ones (MPI): each collective copies its device buffers
 * to a host staging buffer, runs the host collective there and copies the
 * result back.  Slower than NCCL, but several ranks may share one
 * GPU (NCCL refuses that), so multi-rank GPU runs work on a one-GPU machine.
 *
 * Ordering.  The copies are cudaMemcpy calls on the legacy default stream,
 * Darknet's compute stream: the copy to the host waits for everything
 * Darknet enqueued before the collective and returns once the data is on the
 * host; later work on that stream runs after the copy back.  A collective
 * has finished when it returns, so there are no start/wait variants.
 *
 * Staging.  The buffer is pinned host memory (plain memory if pinning
 * fails), allocated at the first collective and grown up to a limit (2^24
 * floats, all ranks' slices together); longer collectives go through it in
 * chunks: chunk [off, off + k) of every rank's shard at a time.
 *
 * Rank and world are the host collectives'.
 */
#ifdef GPU

#include <stdlib.h>
#include <cuda_runtime.h>
#include "fsdp_cuda_backends.h"
#include "fsdp_cuda.h"

#define STAGE_FLOATS_DEFAULT ((size_t)1 << 24)

typedef struct {
    fsdp_coll *host;  /* owned */
    size_t limit;    /* floats of staging one chunk may use, all ranks together */
    float *stage;
    size_t cap;      /* floats allocated at stage */
    int pinned;      /* stage came from cudaMallocHost */
} staged_ctx;


static void stage_release(staged_ctx *c)
{
    if (c->stage) {
        if (c->pinned)
            cudaFreeHost(c->stage);
        else
            free(c->stage);
    }
    c->stage = NULL;
    c->cap = 0;
}

/* At least `floats` floats at c->stage. */
static fsdp_status stage_reserve(staged_ctx *c, size_t floats)
{
    if (floats <= c->cap)
        return FSDP_OK;
    stage_release(c);
    size_t bytes = floats * sizeof(float);
    if (cudaMallocHost((void **)&c->stage, bytes) == cudaSuccess) {
        c->pinned = 1;
    } else {
        cudaGetLastError(); /* not sticky: forget it, and use plain memory */
        c->stage = malloc(bytes);
        c->pinned = 0;
        if (!c->stage)
            return fsdp_fail(FSDP_ERR_NOMEM, "mpi-staged backend: no memory for a %zu-float "
                             "staging buffer", floats);
    }
    c->cap = floats;
    return FSDP_OK;
}

/* Floats of every rank's shard that one chunk of an all-gather or
 * reduce-scatter carries. */
static size_t slice(const fsdp_coll *b, size_t n)
{
    const staged_ctx *c = b->ctx;
    size_t k = c->limit / (size_t)b->world;
    return fsdp_min_size(k ? k : 1, n);
}

static fsdp_status staged_all_gather(fsdp_coll *b, const float *shard, float *full, size_t n)
{
    staged_ctx *c = b->ctx;
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    if (n == 0)
        return FSDP_OK;
    size_t k = slice(b, n);
    FSDP_TRY(stage_reserve(c, k * (size_t)b->world));
    for (size_t off = 0; off < n; off += k) {
        size_t kk = fsdp_min_size(k, n - off), bytes = kk * sizeof(float);
        float *mine = c->stage + (size_t)b->rank * kk;
        cudaCheck(cudaMemcpy(mine, shard + off, bytes, cudaMemcpyDeviceToHost));
        FSDP_TRY(fsdp_coll_all_gather(c->host, mine, c->stage, kk));
        for (int r = 0; r < b->world; r++)
            if (!(in_place && r == b->rank)) /* in place, this part holds it already */
                cudaCheck(cudaMemcpy(full + (size_t)r * n + off, c->stage + (size_t)r * kk,
                                     bytes, cudaMemcpyHostToDevice));
    }
    return FSDP_OK;
}

/* In place (shard inside full) is safe chunk by chunk: a chunk's input is
 * all on the host before its result goes back, and chunks do not overlap. */
static fsdp_status staged_reduce_scatter(fsdp_coll *b, const float *full, float *shard,
                                         size_t n)
{
    staged_ctx *c = b->ctx;
    int in_place;
    FSDP_TRY(fsdp_backend_check_layout(b, shard, full, n, &in_place));
    if (n == 0)
        return FSDP_OK;
    size_t k = slice(b, n), w = (size_t)b->world;
    /* world slices in, and a separate output: the host backend then needs no
     * in-place copy of its own. */
    FSDP_TRY(stage_reserve(c, k * (w + 1)));
    for (size_t off = 0; off < n; off += k) {
        size_t kk = fsdp_min_size(k, n - off), bytes = kk * sizeof(float);
        float *out = c->stage + w * kk;
        for (size_t r = 0; r < w; r++)
            cudaCheck(cudaMemcpy(c->stage + r * kk, full + r * n + off, bytes,
                                 cudaMemcpyDeviceToHost));
        FSDP_TRY(fsdp_coll_reduce_scatter(c->host, c->stage, out, kk));
        cudaCheck(cudaMemcpy(shard + off, out, bytes, cudaMemcpyHostToDevice));
    }
    return FSDP_OK;
}

static fsdp_status staged_all_reduce(fsdp_coll *b, float *buf, size_t count)
{
    staged_ctx *c = b->ctx;
    if (count == 0)
        return FSDP_OK;
    size_t k = fsdp_min_size(c->limit, count);
    FSDP_TRY(stage_reserve(c, k));
    for (size_t off = 0; off < count; off += k) {
        size_t kk = fsdp_min_size(k, count - off), bytes = kk * sizeof(float);
        cudaCheck(cudaMemcpy(c->stage, buf + off, bytes, cudaMemcpyDeviceToHost));
        FSDP_TRY(fsdp_coll_all_reduce(c->host, c->stage, kk));
        cudaCheck(cudaMemcpy(buf + off, c->stage, bytes, cudaMemcpyHostToDevice));
    }
    return FSDP_OK;
}

static void staged_free(fsdp_coll *b)
{
    if (!b)
        return;
    staged_ctx *c = b->ctx;
    if (c) {
        stage_release(c);
        fsdp_coll_free(c->host);
        free(c);
    }
    free(b);
}

fsdp_status fsdp_backend_staged_create(fsdp_coll *host, fsdp_coll **out)
{
    *out = NULL;
    if (!host)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "mpi-staged backend: no host backend given");
    if (host->mem != FSDP_MEM_HOST) {
        fsdp_status s = fsdp_fail(FSDP_ERR_UNSUPPORTED, "mpi-staged backend: %s backend "
                                  "takes device memory; staging needs a host-memory backend",
                                  host->name);
        fsdp_coll_free(host);
        return s;
    }
    fsdp_coll *b = calloc(1, sizeof *b);
    staged_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        fsdp_coll_free(host);
        return fsdp_fail(FSDP_ERR_NOMEM, "mpi-staged backend: out of memory");
    }
    c->host = host;
    c->limit = STAGE_FLOATS_DEFAULT;
    *b = (fsdp_coll){
        .iface = {
            .all_gather = staged_all_gather,
            .reduce_scatter = staged_reduce_scatter,
            .all_reduce = staged_all_reduce,
            .free = staged_free,
        },
        .name = "mpi-staged",
        .rank = host->rank,
        .world = host->world,
        .mem = FSDP_MEM_DEVICE,
        .ctx = c,
    };
    *out = b;
    return FSDP_OK;
}

void fsdp_backend_staged_set_stage_limit(fsdp_coll *b, size_t floats)
{
    if (!b || b->iface.free != staged_free)
        return;
    staged_ctx *c = b->ctx;
    c->limit = floats < (size_t)b->world ? (size_t)b->world : floats;
}

#endif /* GPU */
