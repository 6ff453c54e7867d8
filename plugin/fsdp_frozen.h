/* fsdp_frozen.h: frozen layers run as in inference (batch norm on its
 * rolling statistics, no dropout) and pass deltas back without gradients of
 * their own; layers that need no backward keep no delta buffer. */
#ifndef FSDP_FROZEN_H
#define FSDP_FROZEN_H

#include "fsdp_engine.h"

/* Wraps frozen layers' forward (and, where they must pass deltas back,
 * backward) functions, CPU and GPU; keeps Darknet's own in e->orig_*. */
fsdp_status fsdp_frozen_install(fsdp_engine *e, network *net);
/* Frees the delta buffers of layers that need no backward. */
void fsdp_frozen_drop_deltas(fsdp_engine *e, network *net);

#endif
