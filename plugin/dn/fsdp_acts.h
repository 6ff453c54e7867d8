/* fsdp_acts.h: layers that need no backward keep no activations for it
 * (docs/DESIGN.md, "Activations").
 *
 * Below every trainable layer (a frozen trunk under a trained head) a
 * layer's output is read only by forward: by the next layer and by the
 * routes and shortcuts that name it.  Such a layer keeps no delta, no
 * batch-norm x or x_norm, and its output lives only from its own forward
 * until the last layer reading it has run forward, in one of a few buffers
 * the plugin owns and shares between outputs whose lifetimes do not
 * overlap.  So the trunk's activation memory does not grow with its depth.
 *
 * When: as Darknet builds each layer (layer_built), a layer that needs no
 * backward as far as the layers built so far tell (a superset of the
 * plan's layers needing backward) gives its buffers back at once, so the
 * build never holds the trunk's activations either.  Once the network is
 * built the plan decides, and a buffer given back early that the plan
 * needs after all (an output a layer needing backward reads, a delta a
 * route needing backward writes into) is made again, Darknet's own.
 *
 * Which array: on host runs the host arrays; on GPU runs the device arrays
 * (a GPU run's host outputs stay: Darknet's loss layers pull into them).
 *
 * The states of a layer's pointers (the computing side's):
 *   output of a transient layer (and of the dropout layers that share it):
 *       NULL outside [its forward, the forward of its last reader];
 *       inside, a shared buffer.  Outside a forward pass, then, no layer
 *       points into a plugin buffer: resize_network's realloc of NULL
 *       makes fresh arrays, which fsdp_acts_resized gives back again.
 *   x of a frozen layer with batch norm: NULL outside its own forward, its
 *       output during it.  Frozen layers run batch norm in inference mode
 *       (fsdp_frozen.h), which copies output to x and reads x nowhere,
 *       forward or backward; x_norm is never written: NULL throughout.
 *   delta of a layer needing no backward: NULL unless fsdp_deltas keeps it.
 * Nothing is allocated per step: the shared buffers are made once (and
 * grown only by a resize). */
#ifndef FSDP_ACTS_H
#define FSDP_ACTS_H

#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_bufs.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"

typedef struct fsdp_acts {
    int enabled;             /* a training command (fsdp_commands.h), FSDP_ACTS not 0 */
    int device;              /* the device arrays are the ones computed with */
    int n;                   /* layers; 0 until the first is built */
    unsigned char *need;     /* per layer: needs backward, as known while building */
    unsigned char *freed;    /* per layer: gave its buffers back as it was built */
    int *prod;               /* per layer: the layer writing the output it uses (dropout: its input's) */
    int *buf;                /* per producer: its shared buffer while transient, or -1 */
    int *last;               /* per producer: the last layer reading its output */
    unsigned char *bn;       /* per layer: x is its output while it runs forward */
    int *close_at;           /* n + 1 offsets into close_list: producers whose last reader is layer i */
    int *close_list;
    fsdp_bufs bufs;          /* the shared buffers (fsdp_mem: host or device) */
    int transient;           /* layers whose output is transient */
    int set_up;              /* fsdp_acts_setup ran: the pointers are in the states above */
} fsdp_acts;

/* FSDP_ACTS=0 in the environment keeps every activation as Darknet does. */
int fsdp_acts_wanted(void);

/* Darknet just built layer i (fsdp_stage.h's hook): if nothing built so
 * far makes it need backward, it gives back its output, delta, x and
 * x_norm. */
fsdp_status fsdp_acts_layer_built(fsdp_acts *a, const fsdp_cfg *cfg, network *net, int i);

/* Once the network is built, with the plan: the states above. */
fsdp_status fsdp_acts_setup(fsdp_acts *a, const fsdp_layout_plan *p, const fsdp_mem_ctx *m, network *net);

/* Around layer i's forward (fsdp_on_forward): points the outputs that
 * start living at i at their buffers, and those whose last reader was i
 * at NULL. */
void fsdp_acts_forward(const fsdp_acts *a, network *net, int i, dn_when when);

/* After resize_network: gives back what it made again, and grows the
 * shared buffers to the new sizes. */
fsdp_status fsdp_acts_resized(fsdp_acts *a, const fsdp_mem_ctx *m, network *net);

/* Bytes the shared buffers hold. */
size_t fsdp_acts_bytes(const fsdp_acts *a);

/* Before free_network: no layer points into a shared buffer; frees them
 * and the tables (enabled stays). */
void fsdp_acts_release(fsdp_acts *a, const fsdp_mem_ctx *m, network *net);

#endif
