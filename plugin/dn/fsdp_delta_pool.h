/* fsdp_delta_pool.h: a layer's delta lives only through backward, from the
 * first layer writing into it to its own backward (docs/DESIGN.md,
 * "Activations").
 *
 * Darknet keeps every layer's delta for the whole step, yet forward only
 * zeroes it: backward alone writes and reads it.  Layer j's delta is
 * written first by the backward of its last reader (the next layer, or the
 * last route or shortcut naming j), and read last by j's own backward.
 * Between those two it lives in one of a few buffers the plugin owns,
 * shared by lifetime, so a chain needs about two deltas at once whatever
 * its depth, and a shortcut's source one more.
 *
 * Which layers ("pooled"): on training runs (FSDP_ACTS not 0), a layer
 * needing backward whose arrays are plain (fsdp_layer_plain_arrays), that a
 * later layer reads, and whose delta no dropout after it shares.  Loss
 * layers (they write their delta in forward), recurrent layers and the rest
 * keep Darknet's own.
 *
 * States of a pooled layer's delta: NULL outside [before the backward of
 * its last reader, after its own backward] (so forward_network's zeroing
 * skips it); inside, a pool buffer, zeroed when it opens, as forward would
 * have.  On GPU runs the same holds for the device delta (delta_gpu; the
 * host twin stays Darknet's).  Outside backward no layer points into the pool: resize_network's
 * realloc of NULL makes fresh arrays, which fsdp_delta_pool_resized gives
 * back, growing the buffers.  Nothing is allocated per step. */
#ifndef FSDP_DELTA_POOL_H
#define FSDP_DELTA_POOL_H

#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_bufs.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"

typedef struct fsdp_delta_pool {
    int enabled;             /* a training command, FSDP_ACTS not 0 (set before setup) */
    int device;              /* a GPU run: the device deltas are pooled */
    int n;                   /* layers */
    int *buf;                /* per layer: its buffer when pooled, else -1 */
    int *open_at;            /* n + 1 offsets into open_list: pooled layers whose delta opens before layer i's backward */
    int *open_list;
    fsdp_bufs bufs;
    int pooled;              /* layers */
    int set_up;
} fsdp_delta_pool;

/* Once the network is built and the plan made, after the deltas the plan
 * does not need are dropped (fsdp_deltas.h): pooled layers give theirs
 * back, the buffers are made (fsdp_mem: host or device). */
fsdp_status fsdp_delta_pool_setup(fsdp_delta_pool *d, const fsdp_layout_plan *p, const fsdp_mem_ctx *m,
                                  network *net);

/* Whether layer i's delta is pooled (so not Darknet's own). */
int fsdp_delta_pool_has(const fsdp_delta_pool *d, int i);

/* Before layer i's backward: the deltas whose last reader is i open,
 * zeroed.  After it: layer i's own closes. */
fsdp_status fsdp_delta_pool_backward(const fsdp_delta_pool *d, network *net, int i, dn_when when);

/* After resize_network: gives back what it made again and grows the
 * buffers to the new sizes. */
fsdp_status fsdp_delta_pool_resized(fsdp_delta_pool *d, const fsdp_mem_ctx *m, network *net);

/* Bytes the buffers hold. */
size_t fsdp_delta_pool_bytes(const fsdp_delta_pool *d);

/* Before free_network: no layer points into the pool; frees it (enabled
 * stays). */
void fsdp_delta_pool_release(fsdp_delta_pool *d, const fsdp_mem_ctx *m, network *net);

#endif
