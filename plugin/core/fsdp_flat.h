/* fsdp_flat.h: one flat parameter buffer of a group (its trainable or its
 * frozen parameters): layout, re-pointing Darknet's arrays, and the phases
 * that move its parameters between states.  Its gradient, where it has one,
 * is fsdp_grad.h's; its optimizer state fsdp_optim.h's; saving's scratch
 * lives from save_begin to save_end (fsdp_flat_save.c).
 *
 * Parameters are in one of three states:
 *   SHARDED    only `own` (this rank's equal, zero-padded part) is held;
 *              the layers' parameter pointers are NULL.
 *   GATHERING  an all-gather into `pending` was started (prefetch) and not
 *              yet waited for; the layers' pointers are still NULL.
 *   GATHERED   `full` holds every rank's part and the layers point into it.
 *              A replicated flat (not `sharded`) is GATHERED for life.
 * A node-shared flat (`in_node`, shard_node_shared=1) keeps the whole
 * buffer once per machine, in memory every rank maps (`node`); `own` is
 * this rank's part of it.  Gathering moves nothing: it points the layers
 * at `node`, after a node_sync when any rank wrote its part since the last
 * one (the ranks' updates and checkpoint loads mark node->stale).  A rank
 * writes its part only after a collective every rank reaches once done
 * reading the group: the group's reduce-scatter, or the update's sync.
 * On several machines (node->at.machines > 1: hybrid sharding) each machine
 * holds the whole buffer, and after its step a rank sends its updated part
 * to its peers (the ranks in its place on the other machines), which write
 * it into their machines' node memory.
 *
 * Transitions (a flat with no tensors stays as set up: every call is a
 * no-op on it).  FSDP_ASSERT checks each `from`; a call in any other state
 * is a bug in the step plan.  Each ends with fsdp_flat_check of the whole
 * flat where checks are built in.
 *
 *   call              from                 to
 *   setup             -                    SHARDED (sharded) or GATHERED
 *   move_to_node      SHARDED              SHARDED, in node memory
 *   unshard_start     SHARDED              GATHERING (a backend that starts
 *                                          collectives, world > 1, not in
 *                                          node memory), else SHARDED
 *   unshard           SHARDED, GATHERING   GATHERED
 *                     GATHERED             GATHERED: kept, nothing moves (the
 *                                          plan relies on it: the root and a
 *                                          group kept from forward to backward
 *                                          are unsharded again in backward;
 *                                          replicated flats are always)
 *   reshard           GATHERED             SHARDED (replicated: GATHERED, kept)
 *   save_begin        any but GATHERING    GATHERED (from SHARDED: for the save)
 *   save_end          GATHERED             as before save_begin
 *   free              any                  - (a started gather is waited for)
 *
 * Invariants: a world of one gathers nothing (`full` is `own`); `pending`
 * is only written by the backend while GATHERING, so nothing frees it
 * before the wait. */
#ifndef FSDP_FLAT_H
#define FSDP_FLAT_H

#include <stdint.h>
#include "fsdp.h"
#include "fsdp_backend.h"
#include "fsdp_layers.h"
#include "fsdp_mem.h"
#include "fsdp_optim.h"
#include "fsdp_timeline.h"

/* Node memory the ranks of one machine share (shard_node_shared=1): the
 * flats' parameters, and the gradient slots fsdp_grad.h uses. */
typedef struct fsdp_node {
    int on;
    fsdp_node_layout at;  /* the machines' shape: ranks per machine, this rank's place, its peers */
    int stale;            /* a rank wrote node-shared parameters since the last node_sync */
    int publishing;       /* several machines: updated parts on their way to the peers (started) */
    int publish_ticket;   /* the latest publication's ticket, whose wait completes them all */
    struct fsdp_flat *publishing_flat;   /* the flat whose updated parts are on their way */
    unsigned long syncs;  /* node_syncs so far: a flat written after the last one is stale */
    uint64_t publish_out, publish_in;   /* the latest publication's bytes to and from other machines */
    float *grad_slots;    /* one slot per rank of the machine, place p's at p * slot_floats */
    float *reduce_slots;  /* several machines: as many again, for a gradient that reduces while
                           * another accumulates in the slot (a group nested in another) */
    size_t slot_floats;   /* the largest trainable flat's full buffer */
    int slot_busy;        /* a flat accumulates its gradient in this rank's slot */
    int reduce_slot_used; /* a gradient has reduced from this rank's reduce slot (the
                           * prediction counts those pages then) */
    const float **terms;  /* max(ranks per machine, machines) pointers: a sum's terms (scratch) */
} fsdp_node;

/* What a flat needs from the engine: where buffers live and who moves them. */
typedef struct fsdp_flat_ctx {
    const fsdp_mem_ctx *mem;
    fsdp_ctl *ctl;        /* host control (setup's broadcast); rank and world */
    fsdp_coll *coll;      /* collectives on the flat's buffers (host or device memory) */
    int values_agreed;   /* Darknet's arrays hold the same values on every rank (fsdp_stage.h): no broadcast */
    fsdp_node *node;     /* always set; node->on only under shard_node_shared=1 */
    fsdp_timeline *tl;   /* rank 0's events for -fsdp-log-events (off elsewhere) */
} fsdp_flat_ctx;

/* How a flat is kept. */
typedef struct fsdp_flat_kind {
    int sharded;   /* parameters live only as shards between uses (`full`) */
    int trainable; /* gets gradients and optimizer state */
    int whole;     /* `none`: every rank updates the whole replica (all-reduce) */
    int adam;      /* optimizer state holds Adam's second moment too */
} fsdp_flat_kind;

typedef enum { FSDP_FLAT_SHARDED = 0, FSDP_FLAT_GATHERING, FSDP_FLAT_GATHERED } fsdp_flat_state;

/* A stretch of the rank's own part of a flat buffer that one optimizer call
 * covers: one tensor's intersection with the shard. */
typedef struct fsdp_run {
    size_t off;          /* in the own buffer */
    size_t len;
    int is_weight;
    layer *owner;        /* for its learning_rate scale */
} fsdp_run;

/* Where the flat's tensors lie: fixed by fsdp_flat_setup and read-only
 * after, shared by every placement of the flat (the memory prediction's
 * copies over the count placement point at the same arrays). */
typedef struct fsdp_flat_layout {
    fsdp_tensor *t;      /* tensors in layout order */
    size_t *off;         /* their offsets in the full buffer */
    int nt;
    size_t count;        /* floats laid out: the tensors and, on the device, the gaps aligning them */
    size_t params;       /* the tensors' floats alone */
    size_t shard;        /* floats per rank (padded); full buffer = world * shard */
    size_t nfull;        /* floats in a full (parameter or gradient) buffer */
    size_t own_count;    /* floats this rank updates: shard, or count under `none` */
    fsdp_run *runs;      /* the optimizer's stretches of the rank's own part */
    int nruns;
    size_t state_bytes;  /* this rank's bytes of parameters and optimizer state */
    size_t bcast_bytes;  /* broadcast at setup */
} fsdp_flat_layout;

/* Where the parameters are now: the state and the buffers it implies
 * (fsdp_flat_check says which exist in which state). */
typedef struct fsdp_flat_residency {
    fsdp_flat_state state;
    float ***data_at;    /* per tensor: the layer's array the run computes with (host or device) */
    float ***grad_at;    /* per tensor: its gradient array */
    float *own;          /* this rank's parameters (shard, or the replica) */
    int own_in_full;     /* own points into the replicated full buffer (grad_op, none) */
    float *full;         /* gathered parameters (GATHERED) */
    int in_node;         /* the full buffer lives in node memory: `node` */
    float *node;
    unsigned long written_at;   /* in node memory: the node_sync its last write needs (node->syncs + 1 then) */
    float *pending;      /* the all-gather's destination (GATHERING) */
    int gather_ticket;   /* GATHERING: the all-gather's ticket, the one wait that ends it */
} fsdp_flat_residency;

/* Saving's scratch, between fsdp_flat_save_begin and save_end. */
typedef struct fsdp_flat_save {
    int gathered;        /* save_begin gathered a SHARDED flat: save_end reshards it */
    float *grad;         /* GPU runs: scratch gradients Darknet's pull reads while saving */
} fsdp_flat_save;

typedef struct fsdp_flat {
    fsdp_flat_kind kind;
    fsdp_flat_layout lay;
    fsdp_flat_residency res;
    fsdp_optim_state opt;    /* for `own` (trainable flats only) */
    fsdp_flat_save save;
} fsdp_flat;

/* Every invariant of the whole flat for its state (the table above):
 * which buffers exist, where they and the layers' pointers point, which
 * ticket is live.  Aborts naming the first that fails (FSDP_ASSERT), else
 * returns 1.  Each transition ends with it where checks are built in. */
int fsdp_flat_check(const fsdp_flat_ctx *c, const fsdp_flat *f);

/* Lays out tensors t[0..nt) (copied) for the context's world; packs
 * Darknet's current values, makes every rank take rank 0's (unless the
 * context says they agree already), keeps this rank's part and frees
 * Darknet's arrays.  A sharded flat starts SHARDED, a replicated one
 * GATHERED. */
fsdp_status fsdp_flat_setup(const fsdp_flat_ctx *c, fsdp_flat *f, const fsdp_tensor *t, int nt,
                            fsdp_flat_kind kind);
void fsdp_flat_free(const fsdp_flat_ctx *c, fsdp_flat *f);

/* A sharded flat moves its parameters into node memory (`node`: nfull
 * floats every rank maps; this rank copies in its own part).  Collective
 * only in that every rank moves the same flats; the caller syncs after. */
fsdp_status fsdp_flat_move_to_node(const fsdp_flat_ctx *c, fsdp_flat *f, float *node);
/* Whether the flat's gradient may accumulate in this rank's node slot
 * (when the slot is free): a node-shared flat no larger than the slot. */
int fsdp_flat_fits_slot(const fsdp_flat_ctx *c, const fsdp_flat *f);
/* This rank wrote its own part (an optimizer step, a checkpoint load):
 * the node and the flat are stale, and on several machines the part starts on its way
 * to this rank's peers, into their machines' node memory (collective over
 * the peers; the same flats on every rank).  It arrives by the next
 * gather, which waits for it (fsdp_flat_node_settle), and runs meanwhile
 * with the exchanges that follow.  *bytes: the flat's full buffer where
 * parts cross machines, else 0. */
fsdp_status fsdp_flat_own_written(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes);
/* Waits for the parts on their way to the peers, if any; the node stays
 * stale until the next node_sync.  A gather waits and syncs only for a
 * flat written since the last sync, or whose parts are on their way: the
 * other machines' parts of one group travel while another computes. */
fsdp_status fsdp_flat_node_settle(const fsdp_flat_ctx *c);
/* node_sync: every rank's writes to node memory before it are visible to
 * every rank after it, so the node is no longer stale (unless parts are
 * still on their way from the peers). */
fsdp_status fsdp_flat_node_sync(const fsdp_flat_ctx *c);

/* SHARDED -> GATHERING: starts the all-gather without making Darknet's
 * stream wait (prefetch).  No-op where the backend cannot start
 * collectives, in a world of one, or in any other state. */
fsdp_status fsdp_flat_unshard_start(const fsdp_flat_ctx *c, fsdp_flat *f);
/* SHARDED or GATHERING -> GATHERED, waiting for a started all-gather;
 * *bytes gets the full buffer's bytes, 0 when it was GATHERED already (a
 * world of one moves nothing but counts the bytes). */
fsdp_status fsdp_flat_unshard(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes);
/* GATHERED -> SHARDED for sharded flats; replicated ones stay. */
void fsdp_flat_reshard(const fsdp_flat_ctx *c, fsdp_flat *f);

/* Points the flat's tensors' gradient arrays into base at their offsets
 * (NULL: at nothing). */
void fsdp_flat_point_grad(const fsdp_flat *f, float *base);

/* This rank's part of the flat, for checkpoints: [lo, lo + n) of the whole
 * layout (`count` floats), and its buffers there, the parameters then the
 * optimizer's moments it keeps (nbuf of them).  n = 0 where the rank keeps
 * no part (replicated frozen parameters). */
typedef struct fsdp_flat_part {
    size_t lo, n;
    float *buf[3];
    int nbuf;
} fsdp_flat_part;
fsdp_flat_part fsdp_flat_own_part(const fsdp_flat_ctx *c, const fsdp_flat *f);

/* Around saving a group's layers: unshard if sharded (*bytes as above) and,
 * on GPU runs, lend Darknet's pull_*_layer host parameter and gradient
 * arrays to copy into (GPU runs keep none between saves). */
fsdp_status fsdp_flat_save_begin(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes);
void fsdp_flat_save_end(const fsdp_flat_ctx *c, fsdp_flat *f);

/* A copy of f as fsdp_flat_setup left it, for running its operations over
 * sizes alone (fsdp_memplan.c): its buffers stand-ins of c's placement (the
 * count placement), its tensors' arrays all pointing at *sink; the layout
 * (tensors, offsets, runs) is f's, shared.  f's node memory becomes node
 * memory of c's.  fsdp_flat_count_free frees what the copy owns beyond
 * the placement's stand-ins. */
fsdp_status fsdp_flat_count_copy(const fsdp_flat_ctx *c, const fsdp_flat *f, fsdp_flat *copy, float **sink);
void fsdp_flat_count_free(fsdp_flat *copy);

#endif
