/* fsdp_engine_impl.h: the engine's state, for engine/ alone: the layers
 * above see fsdp_engine.h's opaque engine and its functions.  Also the step
 * plan's runner, for the engine's hooks and for the memory prediction,
 * which runs the same operations on a copy of the engine over the count
 * placement (fsdp_memplan.c). */
#ifndef FSDP_ENGINE_IMPL_H
#define FSDP_ENGINE_IMPL_H

#include "fsdp_engine.h"
#include "fsdp_acts.h"
#include "fsdp_bn.h"
#include "fsdp_delta_pool.h"
#include "fsdp_flat.h"
#include "fsdp_frozen.h"
#include "fsdp_grad.h"
#include "fsdp_observer.h"
#include "fsdp_recompute.h"
#include "fsdp_stage.h"

/* A group: the layers naming it directly, with one flat for their
 * trainable and one for their frozen parameters.  The step plan
 * (fsdp_stepplan.h) says what happens to them when; the engine runs its
 * operations over the flats' own states (fsdp_flat.h). */
typedef struct fsdp_group {
    fsdp_group_info *info;   /* from the layout */
    fsdp_flat train, frozen;
    fsdp_grad grad;          /* the trainable flat's gradient (fsdp_grad.h) */
    int updated;             /* this update's optimizer step ran, in backward (reset by the update) */
} fsdp_group;

/* What the engine does to Darknet's layers beside their parameters
 * (dn/): staged building, activations and deltas, recomputation, batch
 * norm's sums, the frozen layers' wrappers. */
typedef struct fsdp_engine_dn {
    fsdp_stage stage;        /* this rank's slices of the layers as Darknet builds them */
    fsdp_acts acts;          /* activations of the layers that need no backward */
    fsdp_delta_pool deltas;  /* deltas that live only through backward */
    fsdp_recompute recompute;    /* activations of the groups that recompute them (recompute=1) */
    fsdp_bn bn;              /* synchronized batch norm: its state and counts */
    fsdp_layer_fns *orig;    /* per layer: Darknet's own functions, under the frozen wrappers */
} fsdp_engine_dn;

/* The engine's state across a step (fsdp_engine.h's table). */
typedef struct fsdp_engine_step {
    int taken;               /* training steps so far */
    fsdp_group *rs_inflight; /* the group whose reduce-scatter is not yet waited for */
    int args_set;            /* `args` holds this update's arguments */
    update_args args;        /* as update_network will pass them, computed in backward */
    int saving;              /* a weights file is being written (its groups lent one at a time) */
} fsdp_engine_step;

/* An unshard whose gather started ahead of it (fsdp_observe_timeline.c):
 * its event, and the wire's bytes from its start. */
typedef struct fsdp_tl_ahead {
    const fsdp_op *op;
    int ev;
    fsdp_wire w0;
    uint64_t out, in;
} fsdp_tl_ahead;

/* The timeline observer's state: the operation running, and the unshards
 * started ahead (at most a run_ahead's). */
typedef struct fsdp_tl_watch {
    const char *what;        /* the running operation's event, NULL: none */
    int ev;
    fsdp_wire w0;            /* the wire's counters at its start */
    fsdp_tl_ahead ahead[8];
    int nahead;
} fsdp_tl_watch;

/* Who observes the engine (fsdp_observer.h): the tally and the timeline
 * first, then any added. */
typedef struct fsdp_engine_watch {
    fsdp_observer list[FSDP_OBSERVERS_MAX];
    int n;
    fsdp_tl_watch tl;
} fsdp_engine_watch;

/* The engine keeps the plan, the groups, the step and what it does to the
 * layers (`dn`); what it counts is in `tally`.  The entry point sets its
 * options (fsdp_engine_set_options); the prediction is fsdp_memplan.h's. */
struct fsdp_engine {
    fsdp_ctl *ctl;            /* host control: setup, checks, losses */
    fsdp_coll *coll;          /* buffer collectives: the host's (MPI, self) on host runs, NCCL / staged on GPU runs */
    fsdp_mem_ctx mem;        /* where parameter buffers live */
    fsdp_flat_ctx flat;      /* what the flats see of the engine: mem, ctl, coll */
    fsdp_mem_pool pool;      /* host buffers kept for reuse (mem.pool points here) */
    fsdp_cfg cfg;            /* keys of the cfg being parsed: every setting, once */
    fsdp_engine_dn dn;
    network *net;            /* the sharded network (one per process) */
    fsdp_layout_plan plan;
    fsdp_step_plan step_plan;    /* one step's operations, per layer and hook point */
    uint64_t plan_hash;      /* what every rank agreed on; checkpoints carry it */
    fsdp_group *groups;
    int ngroups;
    fsdp_node node;          /* shard_node_shared=1 in effect when node.on (fsdp_flat.h) */
    fsdp_engine_step step;
    fsdp_tally tally;
    int counting;            /* a copy over the count placement (fsdp_memplan.c): flats' operations only */
    fsdp_timeline tl;        /* rank 0 with -fsdp-log-events: the step's operations (fsdp_timeline.h) */
    fsdp_engine_watch watch;
};

/* The engine's own observers alone: the tally, then the timeline. */
void fsdp_engine_watch_init(fsdp_engine *e);
/* To every observer, what the engine did (s.engine is set here). */
void fsdp_engine_see(fsdp_engine *e, fsdp_seen s);
/* FSDP_SEEN_MOVED: `bytes` of `what` for group `group`, by `op` (or NULL). */
void fsdp_engine_moved(fsdp_engine *e, const fsdp_op *op, int group, fsdp_moved what, uint64_t bytes);
/* The engine's own observers (self unused: they keep their state in the
 * engine they see, so the memory prediction's copy counts its own). */
void fsdp_observe_tally(void *self, const fsdp_seen *s);
void fsdp_observe_timeline(void *self, const fsdp_seen *s);

/* Every invariant of the engine's state across a step (fsdp_engine.h's
 * table), and of every group's flats and gradient: aborts naming the first
 * that fails (FSDP_ASSERT), else returns 1.  Each hook point and the
 * update end with it where checks are built in. */
int fsdp_engine_check(const fsdp_engine *e);

/* The ops at layer i's hook point `at` that apply to a step that trains
 * (or not) and, in backward, is (or not) the update's last micro-batch. */
fsdp_status fsdp_engine_run_point(fsdp_engine *e, network *net, int i, fsdp_at at, int training, int last);
/* The update's ops: the reduce in flight settled, the groups that did not
 * step in backward stepped. */
fsdp_status fsdp_engine_run_update(fsdp_engine *e, const update_args *a);
/* One op of the plan, outside the plan's order (fsdp_prefix.c): a forward
 * op, which steps nothing. */
fsdp_status fsdp_engine_run_op(fsdp_engine *e, const fsdp_op *op);

#endif
