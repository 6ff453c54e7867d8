/* fsdp_deltas.h: layers that need no backward pass (frozen or not) keep no
 * delta buffer, and the first layer that trains then computes no delta into
 * them. */
#ifndef FSDP_DELTAS_H
#define FSDP_DELTAS_H

#include "darknet.h"
#include "fsdp_groups.h"

/* Frees the delta buffers (host and, on GPU runs, device) of the layers
 * that need no backward, except those another layer still writes into. */
void fsdp_deltas_drop_unneeded(const fsdp_layout_plan *p, network *net);

#endif
