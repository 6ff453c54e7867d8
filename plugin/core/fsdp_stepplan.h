/* fsdp_stepplan.h: one step's schedule as data, built once at set-up.
 *
 * Per layer and hook point (before and after its forward, before and after
 * its backward) and at the update, the plan lists the group operations to
 * run there, in order.  The engine (fsdp_engine.c) executes them on the
 * flats; the memory prediction and the byte theory (fsdp_memplan.c) run
 * the same list over the flats' sizes, moving nothing.  Every rule of the
 * schedule is decided here, once: which group gathers where, what stays
 * gathered from forward to backward (the root; the group whose backward
 * comes first; every group under reshard_after_forward=0), which
 * recomputed group need not run again (the one whose backward comes first,
 * for the same reason), what prefetch
 * starts next, where gradients are reduced, who steps at the update.  What
 * an operation does to one flat (its states, its buffers) is the flat's
 * (fsdp_flat.h).
 *
 * Some operations apply only in some steps: an op carries `when`, and
 * fsdp_op_applies decides it from whether the network trains and whether
 * this is the update's last micro-batch. */
#ifndef FSDP_STEPPLAN_H
#define FSDP_STEPPLAN_H

#include "fsdp.h"
#include "fsdp_cfg.h"
#include "fsdp_groups.h"

typedef enum fsdp_op_kind {
    FSDP_OP_UNSHARD = 0,   /* gather a flat for compute (forward, or backward: `backward` set) */
    FSDP_OP_PREFETCH,      /* start gathering a flat that computes next (backends that start collectives) */
    FSDP_OP_RESHARD,       /* give back a gathered flat (replicated flats stay) */
    FSDP_OP_GRAD_POINT,    /* the trainable flat's gradient buffer, and its layers' gradient pointers into it */
    FSDP_OP_GRAD_UNPOINT,  /* between micro-batches: the layers stop pointing at the gradient */
    FSDP_OP_REDUCE,        /* settle the reduce in flight, reduce this gradient, step it once reduced */
    FSDP_OP_SETTLE,        /* the update: wait for the reduce in flight and step its group */
    FSDP_OP_STEP,          /* the update: a group that did not step in backward steps now */
    FSDP_OP_ACTS_IN,       /* a recomputed group's inner activations into the arena, for its forward */
    FSDP_OP_ACTS_OUT,      /* a recomputed group's inner activations out of the arena, after its forward and backward */
    FSDP_OP_RECOMPUTE,     /* before its backward, parameters gathered: its forward again, in the arena */
    FSDP_OP_ACTS_BACK,     /* before its backward, a recomputed group whose forward's activations stayed: back into them */
    FSDP_OP_KINDS
} fsdp_op_kind;

typedef enum fsdp_op_when {
    FSDP_WHEN_ALWAYS = 0,
    FSDP_WHEN_TRAINING,        /* net->train */
    FSDP_WHEN_INFERENCE,       /* !net->train */
    FSDP_WHEN_LAST_MICRO,      /* the update's last micro-batch */
    FSDP_WHEN_NOT_LAST_MICRO
} fsdp_op_when;

/* Whether an op moves a recomputed group's activations, not its flats. */
static inline int fsdp_op_on_activations(fsdp_op_kind k)
{
    return k == FSDP_OP_ACTS_IN || k == FSDP_OP_ACTS_OUT || k == FSDP_OP_RECOMPUTE || k == FSDP_OP_ACTS_BACK;
}

/* The flats of a group an op names. */
enum { FSDP_FLAT_TRAIN = 0, FSDP_FLAT_FROZEN = 1 };

typedef struct fsdp_op {
    fsdp_op_kind kind;
    fsdp_op_when when;
    int group;
    int flat;        /* FSDP_FLAT_TRAIN or FSDP_FLAT_FROZEN */
    int backward;    /* an unshard for backward (stats count backward_gathers) */
} fsdp_op;

/* Hook points: per layer four, then the update. */
typedef enum fsdp_at {
    FSDP_AT_FORWARD_BEFORE = 0,
    FSDP_AT_FORWARD_AFTER,
    FSDP_AT_BACKWARD_BEFORE,
    FSDP_AT_BACKWARD_AFTER,
    FSDP_AT_LAYER_POINTS
} fsdp_at;

/* What the schedule knows of a group. */
typedef struct fsdp_step_group {
    int bwd_hi, bwd_lo;      /* highest and lowest direct layer needing backward; -1: none */
    int frozen_bwd;          /* a frozen direct layer with parameters needs backward: frozen gathered then */
    int stays_gathered;      /* training: gathered from its forward to its backward */
    int acts_stay;           /* training, a recomputed group: its activations stay in the arena from its forward to its backward */
    int has[2];              /* it has trainable (FSDP_FLAT_TRAIN) and frozen parameters */
} fsdp_step_group;

typedef struct fsdp_step_plan {
    fsdp_step_group *groups;
    int ngroups;
    int nlayers;
    fsdp_op *ops;
    int nops;
    int *first;              /* ops of layer i at point a: ops[first[i*4+a] .. first[i*4+a+1]) */
    int update_first;        /* the update's: ops[update_first .. nops) */
} fsdp_step_plan;

/* What the plan is built from beyond the layout: the settings in effect
 * (each kept once, in the cfg or the backend) and which flats have tensors. */
typedef struct fsdp_step_inputs {
    const fsdp_layout_plan *layout;
    const network *net;
    fsdp_strategy strategy;
    int reshard_after_forward;
    int prefetch;            /* shard_prefetch=1 and the collectives can start: prefetch ops are planned */
    const unsigned char *recompute;   /* per group: recomputes its activations (fsdp_recompute.h); NULL: none */
} fsdp_step_inputs;

fsdp_status fsdp_step_plan_build(fsdp_step_plan *p, const fsdp_step_inputs *in);
void fsdp_step_plan_free(fsdp_step_plan *p);

/* The ops at layer i's point a; *n gets their count. */
const fsdp_op *fsdp_step_plan_at(const fsdp_step_plan *p, int i, fsdp_at a, int *n);
/* The ops of the update, after the last micro-batch's backward. */
const fsdp_op *fsdp_step_plan_update(const fsdp_step_plan *p, int *n);

/* Whether op runs in this step: training (net->train) and, in backward,
 * whether this is the update's last micro-batch. */
static inline int fsdp_op_applies(const fsdp_op *op, int training, int last_micro)
{
    switch (op->when) {
    case FSDP_WHEN_ALWAYS: return 1;
    case FSDP_WHEN_TRAINING: return training;
    case FSDP_WHEN_INFERENCE: return !training;
    case FSDP_WHEN_LAST_MICRO: return last_micro;
    case FSDP_WHEN_NOT_LAST_MICRO: return !last_micro;
    }
    return 0;
}

#endif
