/* The host pool's bookkeeping (shared by the host and count placements)
 * and the dispatch of fsdp_mem_* to a context's placement. */
#include "fsdp_mem.h"

static const fsdp_place_i *place_of(const fsdp_mem_ctx *m)
{
    if (m->place) return m->place;
#ifdef GPU
    if (m->device) return &fsdp_place_device;
#endif
    return &fsdp_place_host;
}

/* ---- the pool ---------------------------------------------------------------- */

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

float *fsdp_pool_take(fsdp_mem_pool *pool, size_t bytes, size_t *cap, void (*drop)(void *ctx, float *p), void *ctx)
{
    int slot = fsdp_pool_fit(pool, bytes);
    if (slot >= 0) return fsdp_pool_take_slot(pool, slot, cap);
    float *old;
    while (fsdp_pool_drop_smaller(pool, bytes, &old)) drop(ctx, old);
    *cap = 0;
    return NULL;
}

void fsdp_mem_pool_drain(const fsdp_mem_ctx *m)
{
    fsdp_mem_pool *pool = m->pool;
    for (int i = 0; pool && i < FSDP_POOL_SLOTS; ++i) {
        fsdp_mem_free(m, pool->p[i]);
        pool->p[i] = NULL;
    }
    if (pool) pool->bytes = 0;
}

/* ---- dispatch ------------------------------------------------------------------- */

int fsdp_mem_computes(const fsdp_mem_ctx *m) { return place_of(m)->computes; }
float *fsdp_mem_alloc(const fsdp_mem_ctx *m, size_t n, int zero) { return place_of(m)->alloc(m, n, zero); }

void fsdp_mem_free(const fsdp_mem_ctx *m, float *p)
{
    if (p) place_of(m)->free(m, p);
}

float *fsdp_mem_take(const fsdp_mem_ctx *m, size_t n, int zero) { return place_of(m)->take(m, n, zero); }

void fsdp_mem_give(const fsdp_mem_ctx *m, float *p)
{
    if (p) place_of(m)->give(m, p);
}

float *fsdp_mem_alloc_darknet(const fsdp_mem_ctx *m, size_t n) { return place_of(m)->alloc_darknet(m, n); }
void fsdp_mem_free_darknet(const fsdp_mem_ctx *m, float **array) { place_of(m)->free_darknet(m, array); }
fsdp_status fsdp_mem_zero(const fsdp_mem_ctx *m, float *x, size_t n) { return place_of(m)->zero(m, x, n); }

fsdp_status fsdp_mem_scale(const fsdp_mem_ctx *m, float *x, int n, float a)
{
    return place_of(m)->scale(m, x, n, a);
}

fsdp_status fsdp_mem_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return place_of(m)->from_host(m, dst, src, n);
}

fsdp_status fsdp_mem_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return place_of(m)->to_host(m, dst, src, n);
}

fsdp_status fsdp_mem_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return place_of(m)->copy(m, dst, src, n);
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

size_t fsdp_mem_pool_keep_bytes(size_t step_buffers)
{
    if (!step_buffers) return 0;
    size_t want = step_buffers + step_buffers / 8, g = FSDP_DEVICE_POOL_GRANULE;
    return (want + g - 1) / g * g;
}

#ifndef GPU
/* The device placement's set-up (fsdp_mem_gpu.c): nothing on the host. */
fsdp_status fsdp_mem_device_setup(fsdp_mem_ctx *m, int device) { return FSDP_OK; }
fsdp_status fsdp_mem_device_keep(fsdp_mem_ctx *m, size_t bytes) { return FSDP_OK; }
#endif
