/* fsdp_prefix.h: a frozen prefix's forward, apart from the step (the probe
 * cache, fsdp_pcache.h).
 *
 * The prefix is the layers before the first one needing backward: frozen
 * or without parameters, fed by nothing trainable.  Its flats are the
 * frozen flats of the groups whose frozen layers all lie in it, and the
 * activations' ops of the groups whose layers all do.  Two ways through
 * it, each keeping the plan's states:
 *   - fsdp_prefix_forward runs its layers on net->input, as the step's
 *     forward would (its flats gathered and given back by their own ops,
 *     the activations' buffers pointed), and leaves the outputs the rest of
 *     the network reads pointed, for the caller to copy.
 *   - fsdp_prefix_skip runs none of its layers and none of its flats' ops,
 *     but every other op of its hook points and the activations' pointing,
 *     so the outputs the rest reads point where the step expects them and
 *     the caller fills them. */
#ifndef FSDP_PREFIX_H
#define FSDP_PREFIX_H

#include "fsdp_engine.h"

/* The prefix's length: the first layer needing backward (0: none, or the
 * first layer itself). */
int fsdp_prefix_length(const fsdp_engine *e);

/* Layers [0, k) on net->input (batch rows), in training mode. */
fsdp_status fsdp_prefix_forward(fsdp_engine *e, network *net, int k);
/* Once the caller has copied what it needs after fsdp_prefix_forward:
 * the outputs it left pointed are given back. */
void fsdp_prefix_forward_done(fsdp_engine *e, network *net, int k);

/* Layers [0, k) skipped in a training forward. */
fsdp_status fsdp_prefix_skip(fsdp_engine *e, network *net, int k);

#endif
