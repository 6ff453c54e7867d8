/* fsdp_deltas.h: layers that need no backward pass (frozen or not) keep no
 * delta buffer, and the first layer that trains then computes no delta into
 * them. */
#ifndef FSDP_DELTAS_H
#define FSDP_DELTAS_H

#include "darknet.h"
#include "fsdp_groups.h"

/* Per layer, 1 where the delta buffer is kept: the layers that need
 * backward, deltas a loss layer writes in forward, and deltas a route or
 * shortcut that needs backward writes into.  NULL when out of memory;
 * the caller frees it. */
unsigned char *fsdp_deltas_keepers(const fsdp_layout_plan *p, const network *net);

/* Frees the delta buffers (host and, on GPU runs, device) of the layers
 * that need no backward, except those another layer still writes into. */
void fsdp_deltas_drop_unneeded(const fsdp_layout_plan *p, network *net);

#endif
