/* fsdp_mem.h: where the engine's parameter, gradient and optimizer buffers
 * live, as an interface (a placement: a table of functions, in the style of
 * ggml's buffer types) with three implementations:
 *   host    (fsdp_mem_host.c) CPU runs;
 *   device  (fsdp_mem_gpu.c, GPU builds) GPU runs.  Its calls are ordered on
 *           Darknet's compute stream (the legacy default stream), so a
 *           buffer freed after a kernel or collective that Darknet's stream
 *           waits for is never freed early;
 *   count   (fsdp_mem_count.c) sizes only: it hands out addresses that are
 *           never dereferenced and keeps the host pool's bookkeeping on
 *           them, and moves and computes nothing.  The memory prediction
 *           runs the flats' and the engine's own operations over it
 *           (fsdp_memplan.h), so the prediction and the run share one
 *           model of which buffer is taken and given back when.
 * Callers use the fsdp_mem_* functions, which dispatch on the context. */
#ifndef FSDP_MEM_H
#define FSDP_MEM_H

#include <stddef.h>
#include <stdint.h>
#include "fsdp.h"

/* Host buffers a step takes and gives back (gathered parameters, gradients,
 * prefetches), kept for reuse: fresh pages cost a fault and a zeroing each,
 * every step.  A request takes the smallest held buffer that fits and is at
 * most twice its size (and the allocator's rounding); a buffer given back
 * is kept.  A request nothing fits first frees the held buffers smaller
 * than itself: the new buffer can serve their requests later, so the pool
 * holds about what a step uses at once, not a set of buffers for each size
 * (groups of unequal sizes).
 * Steps repeat the same requests, so after the first steps every one is
 * served from the pool (fsdp_memplan.c predicts the footprint by running
 * two steps over the count placement, which keeps this same bookkeeping). */
#define FSDP_POOL_SLOTS 64
typedef struct fsdp_mem_pool {
    float *p[FSDP_POOL_SLOTS];
    size_t cap[FSDP_POOL_SLOTS];
    size_t bytes;       /* held for reuse */
    size_t live;        /* taken and not yet given back */
    size_t footprint;   /* the most live + held at once so far */
} fsdp_mem_pool;

/* The pool's bookkeeping, on sizes alone (p only stored and returned). */
int fsdp_pool_fit(const fsdp_mem_pool *pool, size_t bytes);       /* a slot, or -1 */
float *fsdp_pool_take_slot(fsdp_mem_pool *pool, int slot, size_t *cap);
void fsdp_pool_count_new(fsdp_mem_pool *pool, size_t cap);        /* a buffer made afresh */
int fsdp_pool_keep(fsdp_mem_pool *pool, float *p, size_t cap);    /* 0: no free slot (free it) */
/* Before making a buffer of `bytes`: takes one held buffer smaller than
 * that out of the pool into *p (to be freed); 0 when none is left. */
int fsdp_pool_drop_smaller(fsdp_mem_pool *pool, size_t bytes, float **p);

/* Take the pool's answer to a request of `bytes`: a held buffer that fits
 * (its capacity in *cap), or NULL after handing each held buffer smaller
 * than the request to drop (to be freed); the caller then makes one and
 * counts it (fsdp_pool_count_new). */
float *fsdp_pool_take(fsdp_mem_pool *pool, size_t bytes, size_t *cap, void (*drop)(void *ctx, float *p), void *ctx);

typedef struct fsdp_mem_ctx fsdp_mem_ctx;
typedef struct fsdp_mem_count fsdp_mem_count;

/* A placement.  Every member is required; the fsdp_mem_* functions below
 * document each. */
typedef struct fsdp_place_i {
    const char *name;   /* "host", "device", "count" */
    int computes;       /* buffers hold values (0: count) */
    float *(*alloc)(const fsdp_mem_ctx *m, size_t n, int zero);
    void (*free)(const fsdp_mem_ctx *m, float *p);
    float *(*take)(const fsdp_mem_ctx *m, size_t n, int zero);
    void (*give)(const fsdp_mem_ctx *m, float *p);
    fsdp_status (*zero)(const fsdp_mem_ctx *m, float *x, size_t n);
    fsdp_status (*scale)(const fsdp_mem_ctx *m, float *x, int n, float a);
    fsdp_status (*from_host)(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);
    fsdp_status (*to_host)(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);
    fsdp_status (*copy)(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);
    float *(*alloc_darknet)(const fsdp_mem_ctx *m, size_t n);
    void (*free_darknet)(const fsdp_mem_ctx *m, float **array);
} fsdp_place_i;

extern const fsdp_place_i fsdp_place_host;
extern const fsdp_place_i fsdp_place_count;
#ifdef GPU
extern const fsdp_place_i fsdp_place_device;
#endif

struct fsdp_mem_ctx {
    int device;
    fsdp_mem_pool *pool;   /* NULL: take and give are alloc and free */
    size_t align;   /* tensors start at multiples of this many floats in a flat (1 on the host) */
    int no_pool;    /* device without stream-ordered allocation: cudaMalloc/cudaFree */
    int pool_device;   /* the GPU whose default pool device buffers come from */
    const fsdp_place_i *place;   /* NULL: device or host, as `device` says */
    fsdp_mem_count *count;       /* the count placement's stand-ins */
};

/* The count placement's state: the next stand-in address and the capacity
 * of each stand-in handed out and not yet freed or given back. */
typedef struct fsdp_mem_stand_in {
    uintptr_t at;
    size_t cap;
} fsdp_mem_stand_in;
struct fsdp_mem_count {
    uintptr_t next;
    fsdp_mem_stand_in *live;
    size_t nlive, caplive;
};

/* *m counts sizes, on `pool` (which it uses from the start), with tensors
 * aligned to `align` floats as the run it predicts. */
void fsdp_mem_count_init(fsdp_mem_ctx *m, fsdp_mem_count *count, fsdp_mem_pool *pool, size_t align);
void fsdp_mem_count_free(fsdp_mem_ctx *m);

/* Whether the placement's buffers hold values: arithmetic on them (the
 * optimizer, sums of gradients) runs only where they do. */
int fsdp_mem_computes(const fsdp_mem_ctx *m);

/* On the device each tensor in a flat buffer starts 256 bytes apart, as a
 * cudaMalloc'd array would: cuDNN's kernels may need more than the 4-byte
 * alignment a packed layout gives, and the legacy API picks them without
 * seeing the pointers. */
#define FSDP_DEVICE_ALIGN_FLOATS 64

/* n floats rounded up to where the next array may start in this kind of
 * memory (align). */
static inline size_t fsdp_mem_aligned(const fsdp_mem_ctx *m, size_t n)
{
    size_t a = m->align ? m->align : 1;
    return (n + a - 1) / a * a;
}

/* Where a network's buffers live: device memory when Darknet computes on
 * a GPU (gpu_index >= 0, in a GPU build), since Darknet's GPU path reads
 * the *_gpu arrays; else host memory.  Sets device, and align to match. */
void fsdp_mem_place(fsdp_mem_ctx *m, int gpu_index);

/* Device runs, before set-up: the plugin's device buffers come from the
 * device's default stream-ordered pool, which until fsdp_mem_device_keep
 * hands what is freed back to the driver at each synchronization (set-up's
 * buffers do not stay).  A device (or virtual machine) without memory
 * pools, or FSDP_DEVICE_POOL=0 in the environment (compute-sanitizer's
 * memcheck sees a use after free only in memory the driver has back), gets
 * cudaMalloc and cudaFree, which synchronize.  Nothing on the host. */
fsdp_status fsdp_mem_device_setup(fsdp_mem_ctx *m, int device);

/* Device runs, after set-up: what set-up left in the pool goes back to the
 * driver now, and from then on the pool keeps at most `bytes` of freed
 * memory between synchronizations (its release threshold) for the next
 * step, handing the rest back: Darknet's own allocations (cuda_make_array,
 * resize_network, cuDNN's workspace) use plain cudaMalloc and cannot take
 * memory the pool holds.  Nothing on the host or without a pool. */
fsdp_status fsdp_mem_device_keep(fsdp_mem_ctx *m, size_t bytes);

/* The bytes the device pool keeps for a step whose buffers, counted as the
 * memory prediction counts them (step_buffers), peak at `step_buffers`: that
 * peak in the pool's 2 MiB granules with an eighth more for its rounding
 * and fragmentation. */
#define FSDP_DEVICE_POOL_GRANULE ((size_t)2 << 20)
size_t fsdp_mem_pool_keep_bytes(size_t step_buffers);

/* Frees what the pool holds. */
void fsdp_mem_pool_drain(const fsdp_mem_ctx *m);

/* n floats for the whole run (shards, optimizer state, replicas); zeroed if
 * zero.  NULL (with a message) when out of memory. */
float *fsdp_mem_alloc(const fsdp_mem_ctx *m, size_t n, int zero);
void fsdp_mem_free(const fsdp_mem_ctx *m, float *p);
/* n floats for part of a step, from the host pool where there is one (the
 * smallest held buffer that fits, at most twice as large); zeroed if zero.
 * Give back with fsdp_mem_give, never fsdp_mem_free. */
float *fsdp_mem_take(const fsdp_mem_ctx *m, size_t n, int zero);
void fsdp_mem_give(const fsdp_mem_ctx *m, float *p);
/* n floats, zeroed, as Darknet's constructors make an array in this kind of
 * memory: Darknet's own, for fsdp_mem_free_darknet.  NULL when the host is
 * out of memory (Darknet's device allocator exits instead). */
float *fsdp_mem_alloc_darknet(const fsdp_mem_ctx *m, size_t n);
/* Frees an array Darknet allocated in this kind of memory (a layer's own
 * weights or gradients, taken over by the engine) and sets it to NULL. */
void fsdp_mem_free_darknet(const fsdp_mem_ctx *m, float **array);

/* x[0 .. n) = 0 in a buffer of this kind (on the device in order on
 * Darknet's stream). */
fsdp_status fsdp_mem_zero(const fsdp_mem_ctx *m, float *x, size_t n);

/* x[0 .. n) *= a in a buffer of this kind (on the device a kernel on
 * Darknet's stream: FSDP_ERR_CUDA, printed, if its launch failed). */
fsdp_status fsdp_mem_scale(const fsdp_mem_ctx *m, float *x, int n, float a);

/* n floats from host memory into a buffer of this kind. */
fsdp_status fsdp_mem_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

/* n floats from a buffer of this kind into host memory. */
fsdp_status fsdp_mem_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

/* n floats from one buffer of this kind into another (on the device in
 * order on Darknet's stream, so a kernel launched later reads dst). */
fsdp_status fsdp_mem_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

#endif
