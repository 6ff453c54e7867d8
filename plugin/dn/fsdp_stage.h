/* fsdp_stage.h: each rank's slice of every layer's parameters, from the
 * moment Darknet builds the layer until the engine lays out its groups.
 *
 * Darknet allocates and initialises a layer's parameters as it parses the
 * layer, long before the groups (which need every layer's size) exist.  On
 * N ranks of a training command every rank runs the same constructors
 * (with -seed, the same floats as one process) and, as each layer is built,
 * keeps only its slice of each tensor, [r*q, (r+1)*q) with q = ceil(c/N)
 * (zero-padded), freeing Darknet's array at once (on GPU runs its device
 * twin too): no rank ever holds more than its slices plus the one layer
 * being built.
 *
 * Loading a weights file gives each layer full arrays for its read, one
 * layer at a time: this rank's slice is copied in first and is all it
 * keeps afterwards, so what the file does not overwrite (dontloadscales, a
 * short file) stays as it was without any other rank's values.
 *
 * The engine then takes back one group at a time: an all-gather of every
 * rank's slices makes each tensor whole again, on every rank alike (so no
 * broadcast from rank 0 is needed), and the flats shard it as before.
 *
 * A layer is in one of three states; the engine and the hooks move it. */
#ifndef FSDP_STAGE_H
#define FSDP_STAGE_H

#include <stddef.h>
#include "darknet.h"
#include "fsdp.h"
#include "fsdp_backend.h"
#include "fsdp_layers.h"

typedef enum {
    FSDP_STAGE_DARKNET = 0,   /* Darknet's own arrays: never staged */
    FSDP_STAGE_SLICED,        /* only this rank's slices; the layer's pointers are NULL */
    FSDP_STAGE_LOADING,       /* whole arrays lent to load_weights for one layer */
    FSDP_STAGE_GATHERED,      /* whole arrays again, the same on every rank */
} fsdp_stage_state;

typedef struct fsdp_stage_layer {
    fsdp_stage_state state;
    int nt;
    float *slice[FSDP_MAX_TENSORS];   /* q floats each (SLICED, LOADING) */
} fsdp_stage_layer;

typedef struct fsdp_stage {
    int enabled;              /* this run stages (set before the network is built) */
    int rank, world;
    fsdp_coll *coll;          /* host memory: take_back's gathers */
    int nlayers;
    fsdp_stage_layer *layers; /* per layer of the network being built */
    uint64_t gather_bytes;    /* all-gathered taking the slices back */
} fsdp_stage;

/* Floats of a tensor of `count` floats each rank keeps. */
static inline size_t fsdp_stage_slice(size_t count, int world)
{
    return fsdp_shard_count(count, world);
}

/* layer_built: keep layer i's slices, free Darknet's parameter arrays (and
 * Adam's moments, which the engine keeps sharded; on GPU runs the device
 * twins too).  No-op unless enabled. */
fsdp_status fsdp_stage_layer_built(fsdp_stage *s, network *net, int i);
/* load_layer DN_BEFORE / DN_AFTER: SLICED -> LOADING -> SLICED. */
fsdp_status fsdp_stage_load_begin(fsdp_stage *s, network *net, int i);
fsdp_status fsdp_stage_load_end(fsdp_stage *s, network *net, int i);
/* SLICED -> GATHERED: layer i's arrays whole again, all-gathered from every
 * rank's slices (a collective: every rank calls it for the same layers in
 * the same order).  No-op in any other state. */
fsdp_status fsdp_stage_take_back(fsdp_stage *s, network *net, int i);
void fsdp_stage_free(fsdp_stage *s);

#endif
