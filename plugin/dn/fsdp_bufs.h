/* fsdp_bufs.h: a few buffers shared by arrays whose lifetimes do not
 * overlap (fsdp_acts.h's transient outputs, fsdp_delta_pool.h's deltas).
 *
 * At set-up, arrays are taken in the order they start living, each into a
 * buffer whose last occupant has stopped (the smallest that holds it, or
 * else the largest, grown), or a new one.  Times are whatever the caller
 * counts in that rises as arrays start: forward's layer index, or the
 * negated index in backward. */
#ifndef FSDP_BUFS_H
#define FSDP_BUFS_H

#include <stddef.h>
#include "fsdp.h"
#include "fsdp_mem.h"

typedef struct fsdp_bufs {
    float **ptr;      /* made by fsdp_bufs_alloc */
    size_t *cap;      /* floats */
    int *until;       /* while assigning: the time each buffer's occupant stops */
    int n;
    int max;          /* room in cap and until */
    int zero;         /* made zeroed */
} fsdp_bufs;

/* Room for up to `max` buffers (one per array at most); `zero`: made zeroed. */
fsdp_status fsdp_bufs_init(fsdp_bufs *s, int max, int zero);

/* The buffer for an array of `need` floats living from `start` until
 * `stop` (inclusive; start <= stop): one whose occupant stopped before
 * start, grown to need, or a new one. */
int fsdp_bufs_take(fsdp_bufs *s, size_t need, int start, int stop);

/* Makes the buffers (once the arrays are assigned). */
fsdp_status fsdp_bufs_alloc(fsdp_bufs *s, const fsdp_mem_ctx *m);

/* Buffer b holds at least `need` floats afterwards (a resize), made again
 * if smaller; its contents are lost. */
fsdp_status fsdp_bufs_grow(fsdp_bufs *s, const fsdp_mem_ctx *m, int b, size_t need);

/* The arrays by the layer where they start or stop: for each of n layers
 * j with buf[j] >= 0, j is listed under layer key[j]: (*list)[(*at)[i] ..
 * (*at)[i + 1]) are those under layer i, ascending.  The caller frees
 * both. */
fsdp_status fsdp_bufs_index(int n, const int *buf, const int *key, int **at, int **list);

size_t fsdp_bufs_bytes(const fsdp_bufs *s);
void fsdp_bufs_free(fsdp_bufs *s, const fsdp_mem_ctx *m);

#endif
