/* The count placement (fsdp_mem.h): sizes only.  Its buffers are stand-in
 * addresses, far from any mapping so that a stray dereference faults at
 * once, each with room for its capacity (so the backends' checks of
 * overlapping arguments see what they would see), and it keeps the host
 * pool's bookkeeping on them as the host placement does on real buffers:
 * the pool's footprint after a step run over it is what the host pool
 * holds at run time. */
#include <malloc.h>
#include <stdlib.h>
#include "fsdp_mem.h"

#define STAND_IN_BASE ((uintptr_t)1 << 44)
#define STAND_IN_GAP ((uintptr_t)4096)

/* The allocator's usable size for `bytes`, which the host pool records for a
 * new buffer: a little more than asked.  Asked of the allocator itself (a
 * buffer made and freed untouched, which costs no page): whether a held
 * buffer fits a request at most twice its size can turn on that little,
 * as a reduced part of exactly half a group does.  A heap chunk that the
 * allocator hands over whole rather than leave a remainder too small to
 * be a chunk is 16 bytes larger, depending on what was freed before: the
 * size of a chunk cut to fit is counted, so that the count is a function
 * of the sizes alone. */
static size_t usable(size_t bytes)
{
    void *p = malloc(bytes);
    size_t u = p ? malloc_usable_size(p) : bytes;
    free(p);
    size_t fit = ((bytes + 8 + 15) & ~(size_t)15) - 8;   /* glibc, 64-bit: the chunk's size less its header */
    if (fit < 24) fit = 24;
    return u == fit + 16 ? fit : u;
}

/* Notes a live stand-in and its capacity. */
static int record(fsdp_mem_count *c, uintptr_t at, size_t cap)
{
    if (c->nlive == c->caplive) {
        size_t want = c->caplive ? 2 * c->caplive : 64;
        fsdp_mem_stand_in *v = realloc(c->live, want * sizeof *v);
        if (!v) {
            fsdp_fail(FSDP_ERR_NOMEM, "out of memory counting buffers");
            return 0;
        }
        c->live = v;
        c->caplive = want;
    }
    c->live[c->nlive++] = (fsdp_mem_stand_in){ at, cap };
    return 1;
}

static float *stand_in(const fsdp_mem_ctx *m, size_t cap)
{
    fsdp_mem_count *c = m->count;
    uintptr_t at = c->next;
    c->next += (cap + STAND_IN_GAP - 1) / STAND_IN_GAP * STAND_IN_GAP + STAND_IN_GAP;
    return record(c, at, cap) ? (float *)at : NULL;
}

/* The capacity of a live stand-in, which stops being live. */
static size_t retire(const fsdp_mem_ctx *m, const float *p)
{
    fsdp_mem_count *c = m->count;
    for (size_t i = 0; i < c->nlive; ++i) {
        if (c->live[i].at != (uintptr_t)p) continue;
        size_t cap = c->live[i].cap;
        c->live[i] = c->live[--c->nlive];
        return cap;
    }
    return 0;
}

static float *count_alloc(const fsdp_mem_ctx *m, size_t n, int zero)
{
    return stand_in(m, (n ? n : 1) * sizeof(float));
}

static void count_free(const fsdp_mem_ctx *m, float *p) { retire(m, p); }
static void drop(void *ctx, float *p) {}

static float *count_take(const fsdp_mem_ctx *m, size_t n, int zero)
{
    size_t bytes = (n ? n : 1) * sizeof(float), cap;
    if (!m->pool) return count_alloc(m, n, zero);
    float *p = fsdp_pool_take(m->pool, bytes, &cap, drop, NULL);
    if (p) return record(m->count, (uintptr_t)p, cap) ? p : NULL;
    cap = usable(bytes);
    p = stand_in(m, cap);
    if (p) fsdp_pool_count_new(m->pool, cap);
    return p;
}

static void count_give(const fsdp_mem_ctx *m, float *p)
{
    size_t cap = retire(m, p);
    if (m->pool) fsdp_pool_keep(m->pool, p, cap);
}

static fsdp_status count_zero(const fsdp_mem_ctx *m, float *x, size_t n) { return FSDP_OK; }
static fsdp_status count_scale(const fsdp_mem_ctx *m, float *x, int n, float a) { return FSDP_OK; }

static fsdp_status count_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    return FSDP_OK;
}

static float *count_alloc_darknet(const fsdp_mem_ctx *m, size_t n) { return count_alloc(m, n, 1); }

static void count_free_darknet(const fsdp_mem_ctx *m, float **array)
{
    if (*array) retire(m, *array);
    *array = NULL;
}

const fsdp_place_i fsdp_place_count = {
    .name = "count",
    .computes = 0,
    .alloc = count_alloc,
    .free = count_free,
    .take = count_take,
    .give = count_give,
    .zero = count_zero,
    .scale = count_scale,
    .from_host = count_copy,
    .to_host = count_copy,
    .copy = count_copy,
    .alloc_darknet = count_alloc_darknet,
    .free_darknet = count_free_darknet,
};

void fsdp_mem_count_init(fsdp_mem_ctx *m, fsdp_mem_count *count, fsdp_mem_pool *pool, size_t align)
{
    *count = (fsdp_mem_count){ .next = STAND_IN_BASE };
    *pool = (fsdp_mem_pool){ 0 };
    *m = (fsdp_mem_ctx){ .pool = pool, .align = align, .place = &fsdp_place_count, .count = count };
}

void fsdp_mem_count_free(fsdp_mem_ctx *m)
{
    free(m->count->live);
    *m->count = (fsdp_mem_count){ 0 };
}
