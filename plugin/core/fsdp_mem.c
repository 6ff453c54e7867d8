#include <malloc.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_mem.h"
#include "fsdp_cuda.h"
#include "fsdp_kernels.h"
#ifdef GPU
#include "darknet.h"   /* cuda_make_array, cuda_free */
#endif

float *fsdp_mem_alloc(const fsdp_mem_ctx *m, size_t n, int zero)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
#ifdef GPU
    if (m->device) {
        void *p = NULL;
        cudaError_t e = m->no_pool ? cudaMalloc(&p, bytes) : cudaMallocAsync(&p, bytes, DN_COMPUTE_STREAM);
        if (e == cudaSuccess && zero) e = cudaMemsetAsync(p, 0, bytes, DN_COMPUTE_STREAM);
        if (e != cudaSuccess) {
            fsdp_fail(FSDP_ERR_NOMEM, "out of device memory for %zu floats: %s", n, cudaGetErrorString(e));
            return NULL;
        }
        return p;
    }
#endif
    float *p = zero ? calloc(1, bytes) : malloc(bytes);
    if (!p) fsdp_fail(FSDP_ERR_NOMEM, "out of memory for %zu floats", n);
    return p;
}

int fsdp_pool_fit(const fsdp_mem_pool *pool, size_t bytes)
{
    int best = -1;
    for (int i = 0; i < FSDP_POOL_SLOTS; ++i) {
        /* At most twice the request: a big block must not serve a small one.
         * Give or take the allocator's rounding (a big buffer's usable size
         * is its request rounded up to a page): a reduced part of exactly
         * half a group, on 2 ranks, takes the group's buffer rather than a
         * new one each step. */
        if (!pool->p[i] || pool->cap[i] < bytes || pool->cap[i] > 2 * bytes + bytes / 256) continue;
        if (best < 0 || pool->cap[i] < pool->cap[best]) best = i;
    }
    return best;
}

static void footprint(fsdp_mem_pool *pool)
{
    if (pool->live + pool->bytes > pool->footprint) pool->footprint = pool->live + pool->bytes;
}

float *fsdp_pool_take_slot(fsdp_mem_pool *pool, int slot, size_t *cap)
{
    float *p = pool->p[slot];
    *cap = pool->cap[slot];
    pool->p[slot] = NULL;
    pool->bytes -= *cap;
    pool->live += *cap;
    return p;
}

void fsdp_pool_count_new(fsdp_mem_pool *pool, size_t cap)
{
    pool->live += cap;
    footprint(pool);
}

int fsdp_pool_drop_smaller(fsdp_mem_pool *pool, size_t bytes, float **p)
{
    for (int i = 0; i < FSDP_POOL_SLOTS; ++i) {
        if (!pool->p[i] || pool->cap[i] >= bytes) continue;
        *p = pool->p[i];
        pool->p[i] = NULL;
        pool->bytes -= pool->cap[i];
        return 1;
    }
    return 0;
}

int fsdp_pool_keep(fsdp_mem_pool *pool, float *p, size_t cap)
{
    pool->live -= cap < pool->live ? cap : pool->live;
    for (int i = 0; i < FSDP_POOL_SLOTS; ++i) {
        if (pool->p[i]) continue;
        pool->p[i] = p;
        pool->cap[i] = cap;
        pool->bytes += cap;
        return 1;
    }
    return 0;
}

float *fsdp_mem_take(const fsdp_mem_ctx *m, size_t n, int zero)
{
    fsdp_mem_pool *pool = m->pool;
    if (m->device || !pool) return fsdp_mem_alloc(m, n, zero);
    size_t bytes = (n ? n : 1) * sizeof(float), cap;
    int slot = fsdp_pool_fit(pool, bytes);
    if (slot >= 0) {
        float *p = fsdp_pool_take_slot(pool, slot, &cap);
        if (zero) memset(p, 0, bytes);
        return p;
    }
    float *old;
    while (fsdp_pool_drop_smaller(pool, bytes, &old)) free(old);
    float *p = fsdp_mem_alloc(m, n, zero);
    if (p) fsdp_pool_count_new(pool, malloc_usable_size(p));
    return p;
}

void fsdp_mem_place(fsdp_mem_ctx *m, int gpu_index)
{
#ifdef GPU
    m->device = gpu_index >= 0;
#else
    (void)gpu_index;
    m->device = 0;
#endif
    m->align = m->device ? FSDP_DEVICE_ALIGN_FLOATS : 1;
}

fsdp_status fsdp_mem_device_setup(fsdp_mem_ctx *m, int device)
{
#ifdef GPU
    if (m->device) {
        int pools = 0;
        cudaCheck(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
        if (!pools) {
            m->no_pool = 1;
            fprintf(stderr, "fsdp: GPU %d has no stream-ordered memory pools: cudaMalloc and "
                    "cudaFree instead (slower)\n", device);
            return FSDP_OK;
        }
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        cudaCheck(cudaDeviceGetDefaultMemPool(&pool, device));
        cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
#endif
    (void)m;
    (void)device;
    return FSDP_OK;
}

void fsdp_mem_pool_drain(const fsdp_mem_ctx *m)
{
    fsdp_mem_pool *pool = m->pool;
    for (int i = 0; pool && i < FSDP_POOL_SLOTS; ++i) {
        free(pool->p[i]);
        pool->p[i] = NULL;
    }
    if (pool) pool->bytes = 0;
}

void fsdp_mem_free(const fsdp_mem_ctx *m, float *p)
{
    if (!p) return;
#ifdef GPU
    if (m->device) {
        /* cudaFree waits for all the device's work: as safe as the ordered free. */
        if (m->no_pool) cudaFree(p);
        else cudaFreeAsync(p, DN_COMPUTE_STREAM);
        return;
    }
#endif
    (void)m;
    free(p);
}

void fsdp_mem_give(const fsdp_mem_ctx *m, float *p)
{
    if (!p) return;
    if (m->device || !m->pool || !fsdp_pool_keep(m->pool, p, malloc_usable_size(p))) fsdp_mem_free(m, p);
}

float *fsdp_mem_alloc_darknet(const fsdp_mem_ctx *m, size_t n)
{
#ifdef GPU
    if (m->device) return cuda_make_array(NULL, n);
#endif
    (void)m;
    return calloc(n ? n : 1, sizeof(float));
}

void fsdp_mem_free_darknet(const fsdp_mem_ctx *m, float **array)
{
#ifdef GPU
    /* Darknet's cuda_make_array memory: its own cuda_free. */
    if (m->device && *array) cuda_free(*array);
    else
#endif
        free(*array);
    (void)m;
    *array = NULL;
}

/* Host memory to or from a buffer of this kind. */
static fsdp_status copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n, int to_buffer)
{
#ifdef GPU
    if (m->device) {
        cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), to_buffer ? cudaMemcpyHostToDevice
                                                                    : cudaMemcpyDeviceToHost));
        return FSDP_OK;
    }
#endif
    (void)to_buffer;
    memcpy(dst, src, n * sizeof(float));
    return FSDP_OK;
}

fsdp_status fsdp_mem_zero(const fsdp_mem_ctx *m, float *x, size_t n)
{
#ifdef GPU
    if (m->device) {
        cudaCheck(cudaMemsetAsync(x, 0, n * sizeof(float), DN_COMPUTE_STREAM));
        return FSDP_OK;
    }
#endif
    (void)m;
    memset(x, 0, n * sizeof(float));
    return FSDP_OK;
}

fsdp_status fsdp_mem_scale(const fsdp_mem_ctx *m, float *x, int n, float a)
{
#ifdef GPU
    if (m->device) {
        fsdp_bn_scale_gpu(x, n, a);
        return fsdp_kernels_status();
    }
#endif
    (void)m;
    for (int i = 0; i < n; ++i) x[i] *= a;
    return FSDP_OK;
}

fsdp_status fsdp_mem_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return copy(m, dst, src, n, 1);
}

fsdp_status fsdp_mem_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return copy(m, dst, src, n, 0);
}

fsdp_status fsdp_mem_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
#ifdef GPU
    if (m->device) {
        cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, DN_COMPUTE_STREAM));
        return FSDP_OK;
    }
#endif
    (void)m;
    memcpy(dst, src, n * sizeof(float));
    return FSDP_OK;
}
