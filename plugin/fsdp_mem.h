/* fsdp_mem.h: the engine's parameter, gradient and optimizer buffers live in
 * host memory (CPU runs) or device memory (GPU runs); these calls hide which.
 * Device calls are ordered on Darknet's compute stream (the legacy default
 * stream), so a buffer freed after a kernel or collective that Darknet's
 * stream waits for is never freed early. */
#ifndef FSDP_MEM_H
#define FSDP_MEM_H

#include <stddef.h>
#include "fsdp.h"

/* Host buffers freed recently, kept for reuse: a gathered group's buffer is
 * allocated and freed every step, and fresh pages cost a fault and a zeroing
 * each.  Bounded by limit_bytes (0: no pool). */
#define FSDP_POOL_SLOTS 4
typedef struct fsdp_mem_pool {
    float *p[FSDP_POOL_SLOTS];
    size_t cap[FSDP_POOL_SLOTS];
    size_t bytes, limit_bytes;
} fsdp_mem_pool;

typedef struct fsdp_mem_ctx {
    int device;
    fsdp_mem_pool *pool;
    size_t align;   /* tensors start at multiples of this many floats in a flat (1 on the host) */
    int no_pool;    /* device without stream-ordered allocation: cudaMalloc/cudaFree */
} fsdp_mem_ctx;

/* On the device each tensor in a flat buffer starts 256 bytes apart, as a
 * cudaMalloc'd array would: cuDNN's kernels may need more than the 4-byte
 * alignment a packed layout gives, and the legacy API picks them without
 * seeing the pointers. */
#define FSDP_DEVICE_ALIGN_FLOATS 64

/* Device runs: keep memory freed to the device's default pool for reuse
 * instead of handing it back to the driver at every synchronization (the
 * pool's default): a gathered group's buffer is freed and allocated again
 * every step.  A device (or virtual machine) without memory pools gets
 * cudaMalloc and cudaFree, which synchronize.  Nothing on the host. */
fsdp_status fsdp_mem_device_setup(fsdp_mem_ctx *m, int device);

/* Frees what the pool holds. */
void fsdp_mem_pool_drain(const fsdp_mem_ctx *m);

/* n floats; zeroed if zero.  NULL (with a message) when out of memory. */
float *fsdp_mem_alloc(const fsdp_mem_ctx *m, size_t n, int zero);
void fsdp_mem_free(const fsdp_mem_ctx *m, float *p);
/* Frees an array Darknet allocated in this kind of memory (a layer's own
 * weights or gradients, taken over by the engine) and sets it to NULL. */
void fsdp_mem_free_darknet(const fsdp_mem_ctx *m, float **array);

/* n floats from host memory into a buffer of this kind. */
fsdp_status fsdp_mem_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

/* n floats from a buffer of this kind into host memory. */
fsdp_status fsdp_mem_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

#endif
