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

/* A layer's own functions, kept while the wrappers stand in for them. */
typedef struct fsdp_layer_fns {
    void (*forward)(struct layer, struct network);
    void (*backward)(struct layer, struct network);
#ifdef GPU
    void (*forward_gpu)(struct layer, struct network);
    void (*backward_gpu)(struct layer, struct network);
#endif
} fsdp_layer_fns;

/* Refuses, as "file:line: ...", frozen layers that would have to pass deltas
 * back and cannot: deconvolutional, local, and recurrent layers with batch
 * norm, with trainable layers below them. */
fsdp_status fsdp_frozen_check_plan(const fsdp_layout_plan *p, const fsdp_cfg *cfg, const network *net);

/* Wraps frozen layers' forward (and, where they must pass deltas back,
 * backward) functions, CPU and GPU; *orig gets every layer's own. */
fsdp_status fsdp_frozen_install(const fsdp_layout_plan *p, network *net, fsdp_layer_fns **orig);
/* Gives every layer its own functions back and frees orig. */
void fsdp_frozen_uninstall(network *net, fsdp_layer_fns *orig);

#endif
