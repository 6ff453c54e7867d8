/* fsdp_frozen.h: everything `frozen=1` means at run time, in one place.
 * Frozen layers run as in inference (batch norm on its rolling statistics,
 * no dropout) and, where trainable layers below need it, pass deltas back
 * without gradients of their own.  (The key is read in fsdp_cfg.c; which
 * layers need a backward pass at all is the plan's, fsdp_groups.c.) */
#ifndef FSDP_FROZEN_H
#define FSDP_FROZEN_H

#include "darknet.h"
#include "fsdp.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"

/* A layer's own functions, kept while the wrappers stand in for them (the
 * device ones as Darknet's layer holds them: NULL in CPU builds). */
typedef struct fsdp_layer_fns {
    void (*forward)(struct layer, struct network);
    void (*backward)(struct layer, struct network);
    void (*forward_gpu)(struct layer, struct network);
    void (*backward_gpu)(struct layer, struct network);
} fsdp_layer_fns;

/* Refuses, as "file:line: ...", frozen layers that would have to pass deltas
 * back and cannot: deconvolutional, local, and recurrent layers with batch
 * norm, with trainable layers below them. */
fsdp_status fsdp_frozen_check_plan(const fsdp_layout_plan *p, const fsdp_cfg *cfg, const network *net);

/* Wraps frozen layers' forward (and, where they must pass deltas back,
 * backward) functions, host and, with a device half (below), device;
 * *orig gets every layer's own. */
fsdp_status fsdp_frozen_install(const fsdp_layout_plan *p, network *net, fsdp_layer_fns **orig);
/* Gives every layer its own functions back and frees orig. */
void fsdp_frozen_uninstall(network *net, fsdp_layer_fns *orig);

/* The arithmetic a frozen layer's backward needs, on host or device arrays. */
typedef struct fsdp_frozen_math {
    void (*gradient)(float *output, int n, ACTIVATION a, float *delta);
    /* delta[b][c][s] *= scales[c] / (the rolling standard deviation Darknet's forward divided by) */
    void (*bn_delta)(float *delta, const float *scales, const float *rolling_variance, int batch,
                     int channels, int spatial);
    void (*add)(int n, float *x, float *y);   /* y += x */
} fsdp_frozen_math;

/* What a frozen layer's backward touches: host arrays, or their device twins. */
typedef struct fsdp_frozen_arrays {
    float *output, *delta, *scales, *rolling_variance;
    float *input_delta;   /* the network's delta: the layer below's, or NULL */
} fsdp_frozen_arrays;

/* The device half: what wrapping Darknet's device functions needs of a
 * layer struct that has device arrays (GPU builds only).  fsdp_frozen_gpu
 * is the one there is (fsdp_frozen_gpu.c); the entry point hands it over in
 * GPU builds, before any network is built.  Without one, only the host
 * functions are wrapped. */
typedef struct fsdp_frozen_device {
    fsdp_frozen_math math;
    void (*arrays)(const layer *l, const network *net, fsdp_frozen_arrays *a);
    /* Darknet's device backward of a connected layer first clips its delta
     * to [-1, 1] (the host's does not clip).  A frozen one with batch norm
     * clips with `clip` before the delta is scaled, as Darknet's order has
     * it, and then runs `connected_rest` in place of that backward, which
     * would clip the scaled delta again: what remains of it with no
     * gradient buffers, net.delta += delta . weights. */
    void (*clip)(int n, float *delta);
    void (*connected_rest)(struct layer l, struct network net);
} fsdp_frozen_device;
extern const fsdp_frozen_device fsdp_frozen_gpu;
void fsdp_frozen_use_device(const fsdp_frozen_device *d);

#endif
