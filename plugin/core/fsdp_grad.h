/* fsdp_grad.h: a trainable flat's gradient: where it lives and how it
 * travels from the layers' backward to the optimizer.
 *
 * Where it accumulates (`home`), which also says who gives the buffer back:
 *   MOMENTUM      a world of one under SGD (the flat's grad_in_m): the
 *                 layers' gradient arrays point into the flat's momentum,
 *                 as Darknet's weight_updates holds both; no buffer.
 *   SLOT          this rank's slot of node memory (node-shared flats, when
 *                 the slot is free; one gradient at a time holds it:
 *                 node->slot_busy).
 *   REDUCE_SLOT   several machines: this rank's reduce slot, where a
 *                 gradient that accumulated in a buffer of its own moves
 *                 while another accumulates in the slot (a group nested in
 *                 another, or between two layers of the root); it holds one
 *                 from a group's reduce to its step, which come at once.
 *   POOL          a full-size buffer of its own, from the pool.
 * On several machines a gradient in a buffer of its own moves into the
 * slot (or the reduce slot) at its reduce, to be summed on the machine
 * before anything crosses between machines.
 *
 * States:
 *   NONE          no gradient this update.
 *   ACCUMULATING  `buf` is a full-size sum over this update's micro-batches;
 *                 the layers' gradient pointers point into it while the
 *                 group runs backward (point / unpoint).
 *   REDUCING      a reduce-scatter from `rs_source` into `part` was started
 *                 and not yet waited for; `rs_source` lives until then.
 *   REDUCED       `part` holds this rank's part of the summed gradient (the
 *                 whole sum under `none`; in a world of one the buffer).
 *   IN_SLOTS      (node-shared) every rank's gradient is complete in its
 *                 slot of node memory; the optimizer sums this rank's part
 *                 from the slots as it steps (fsdp_grad_slot_terms), and the
 *                 slot is free once every rank has (spent).  On several
 *                 machines the terms are the machines' sums, in `part`.
 *
 * Transitions (a flat with no tensors has no gradient: every call is a
 * no-op on it).  FSDP_ASSERT checks each `from`.
 *
 *   call          from            to
 *   point         NONE            ACCUMULATING, in the home fsdp_grad_place
 *                                 gives (the slot taken if it is SLOT)
 *                 ACCUMULATING    ACCUMULATING (a later micro-batch)
 *   unpoint       ACCUMULATING    ACCUMULATING, the layers pointing nowhere
 *   reduce        ACCUMULATING    REDUCING (a backend that starts
 *                                 reduce-scatters), REDUCED, or IN_SLOTS
 *                                 (SLOT or REDUCE_SLOT, after a node_sync)
 *   reduce_wait   REDUCING        REDUCED
 *   spent         REDUCED         NONE, `part` given back
 *                 IN_SLOTS        NONE after a node_sync (every rank has
 *                                 read the slots); the slot freed
 *                 NONE            NONE: a group that steps without a
 *                                 gradient (decay and momentum alone, the
 *                                 update's STEP of a group below
 *                                 stopbackward)
 *   release       any             NONE: waits for a reduce-scatter in
 *                                 flight, gives every buffer back
 *
 * The optimizer sees NONE, REDUCED or IN_SLOTS only. */
#ifndef FSDP_GRAD_H
#define FSDP_GRAD_H

#include <stdint.h>
#include "fsdp_flat.h"

typedef enum {
    FSDP_GRAD_NONE = 0, FSDP_GRAD_ACCUMULATING, FSDP_GRAD_REDUCING, FSDP_GRAD_REDUCED, FSDP_GRAD_IN_SLOTS
} fsdp_grad_state;

typedef enum {
    FSDP_GRAD_HOME_NONE = 0, FSDP_GRAD_HOME_MOMENTUM, FSDP_GRAD_HOME_SLOT, FSDP_GRAD_HOME_REDUCE_SLOT,
    FSDP_GRAD_HOME_POOL
} fsdp_grad_home;

typedef struct fsdp_grad {
    fsdp_grad_state state;
    fsdp_grad_home home;
    float *buf;          /* the full-size gradient (ACCUMULATING; IN_SLOTS: the slot); NULL at MOMENTUM */
    float *rs_source;    /* REDUCING: what the reduce-scatter reads (the pool's), ticket rs_ticket */
    int rs_ticket;
    float *part;         /* REDUCING, REDUCED: this rank's part (the pool's); IN_SLOTS on several
                          * machines: the machines' sums of it (the pool's) */
} fsdp_grad;

/* Every invariant of the whole gradient for its state and home (the
 * tables above): which buffers exist, which slot it holds, which ticket is
 * live; with f (NULL where the caller has none), what the flat says of
 * it too.  Aborts naming the first that fails (FSDP_ASSERT), else returns
 * 1.  Each transition ends with it where checks are built in. */
int fsdp_grad_check(const fsdp_flat_ctx *c, const fsdp_grad *g, const fsdp_flat *f);

/* Where a gradient that starts accumulating goes: the momentum (the flat's
 * grad_in_m), this rank's node slot (free, and the flat fits it), or a
 * full-size buffer of its own.  point follows it, with the slot's state of
 * the moment. */
typedef enum { FSDP_GRAD_AT_MOMENTUM = 0, FSDP_GRAD_AT_SLOT, FSDP_GRAD_AT_BUFFER } fsdp_grad_place;
fsdp_grad_place fsdp_grad_place_of(const fsdp_flat_ctx *c, const fsdp_flat *f, int slot_busy);

/* Pre-backward: -> ACCUMULATING (a zeroed full-size buffer on first use)
 * and the layers' gradient pointers into it. */
fsdp_status fsdp_grad_point(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f);
/* Between micro-batches: the layers stop pointing at the gradient. */
void fsdp_grad_unpoint(const fsdp_grad *g, const fsdp_flat *f);
/* Post-backward of the last micro-batch (table above); *rs / *ar get the
 * bytes reduce-scattered / all-reduced. */
fsdp_status fsdp_grad_reduce(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f, uint64_t *rs, uint64_t *ar);
/* REDUCING -> REDUCED. */
fsdp_status fsdp_grad_reduce_wait(const fsdp_flat_ctx *c, fsdp_grad *g);
/* IN_SLOTS: the *nterms terms of this rank's gradient at offset `off` of
 * its own part: on one machine one per rank's slot, in rank order (their
 * sum in that order is what a reduce-scatter gives); on several, one per
 * machine, in machine order (fsdp_optim_step_sum).  Valid until the next
 * call. */
const float *const *fsdp_grad_slot_terms(const fsdp_flat_ctx *c, const fsdp_grad *g, const fsdp_flat *f, size_t off,
                                         int *nterms);
/* After the update (table above). */
fsdp_status fsdp_grad_spent(const fsdp_flat_ctx *c, fsdp_grad *g);
/* Any state -> NONE, for freeing the flat: a reduce-scatter in flight is
 * waited for, and every buffer given back to its owner. */
void fsdp_grad_release(const fsdp_flat_ctx *c, fsdp_grad *g, const fsdp_flat *f);

/* The reduced part the optimizer steps with (REDUCED), else NULL. */
static inline const float *fsdp_grad_reduced(const fsdp_grad *g)
{
    return g->state == FSDP_GRAD_REDUCED ? g->part : NULL;
}

#endif
