/* fsdp_mem.h: the engine's parameter, gradient and optimizer buffers live in
 * host memory (CPU runs) or device memory (GPU runs); these calls hide which.
 * Device calls are ordered on Darknet's compute stream (the legacy default
 * stream), so a buffer freed after a kernel or collective that Darknet's
 * stream waits for is never freed early. */
#ifndef FSDP_MEM_H
#define FSDP_MEM_H

#include <stddef.h>
#include "fsdp.h"

typedef struct fsdp_mem_ctx { int device; } fsdp_mem_ctx;

/* n floats; zeroed if zero.  NULL (with a message) when out of memory. */
float *fsdp_mem_alloc(const fsdp_mem_ctx *m, size_t n, int zero);
void fsdp_mem_free(const fsdp_mem_ctx *m, float *p);
/* n floats from host memory into a buffer of this kind. */
fsdp_status fsdp_mem_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

/* n floats from a buffer of this kind into host memory. */
fsdp_status fsdp_mem_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n);

#endif
