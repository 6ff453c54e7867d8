/* The host placement: CPU runs' buffers, in malloc'd memory, a step's from
 * the pool (fsdp_mem.h). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_mem.h"

static float *host_alloc(const fsdp_mem_ctx *m, size_t n, int zero)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    float *p = zero ? calloc(1, bytes) : malloc(bytes);
    if (!p) fsdp_fail(FSDP_ERR_NOMEM, "out of memory for %zu floats", n);
    return p;
}

static void host_free(const fsdp_mem_ctx *m, float *p) { free(p); }
static void drop(void *ctx, float *p) { free(p); }

static float *host_take(const fsdp_mem_ctx *m, size_t n, int zero)
{
    if (!m->pool) return host_alloc(m, n, zero);
    size_t bytes = (n ? n : 1) * sizeof(float), cap;
    float *p = fsdp_pool_take(m->pool, bytes, &cap, drop, NULL);
    if (p) {
        if (zero) memset(p, 0, bytes);
        return p;
    }
    p = host_alloc(m, n, zero);
    if (p) fsdp_pool_count_new(m->pool, malloc_usable_size(p));
    return p;
}

static void host_give(const fsdp_mem_ctx *m, float *p)
{
    if (!m->pool || !fsdp_pool_keep(m->pool, p, malloc_usable_size(p))) free(p);
}

static fsdp_status host_zero(const fsdp_mem_ctx *m, float *x, size_t n)
{
    memset(x, 0, n * sizeof(float));
    return FSDP_OK;
}

static fsdp_status host_scale(const fsdp_mem_ctx *m, float *x, int n, float a)
{
    for (int i = 0; i < n; ++i) x[i] *= a;
    return FSDP_OK;
}

static fsdp_status host_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof(float));
    return FSDP_OK;
}

static float *host_alloc_darknet(const fsdp_mem_ctx *m, size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void host_free_darknet(const fsdp_mem_ctx *m, float **array)
{
    free(*array);
    *array = NULL;
}

const fsdp_place_i fsdp_place_host = {
    .name = "host",
    .computes = 1,
    .alloc = host_alloc,
    .free = host_free,
    .take = host_take,
    .give = host_give,
    .zero = host_zero,
    .scale = host_scale,
    .from_host = host_copy,
    .to_host = host_copy,
    .copy = host_copy,
    .alloc_darknet = host_alloc_darknet,
    .free_darknet = host_free_darknet,
};
