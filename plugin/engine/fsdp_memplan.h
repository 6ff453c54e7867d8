/* fsdp_memplan.h: the memory a rank will need, predicted before the first
 * step from the engine's groups (docs/DESIGN.md, "Memory").
 *
 * A rank's peak is the larger of three moments, on top of a fixed cost (the
 * process, its libraries and MPI, measured at start-up) and the
 * activations (outputs, deltas, batch-norm buffers, workspace, the loader's
 * batches):
 *   build   Darknet's parameter arrays as the network is built (Adam's
 *           moments too: Darknet allocates them); on N host ranks of a
 *           training command only this rank's slices of the layers built
 *           so far plus the layer being built or loaded (fsdp_stage.h);
 *   setup   as the engine moves them into shards, group by group (a staged
 *           build first takes each group back whole from the slices);
 *   step    the model state (shards, optimizer state, replicas) plus the
 *           buffers a step holds at once: gathered groups, prefetches,
 *           gradients.  These are counted by running two steps of the
 *           engine's own operations (fsdp_engine_impl.h) on a copy of the
 *           engine whose flats live in the count placement (fsdp_mem.h)
 *           and whose collectives are a null backend shaped like the run's:
 *           the same code that takes and gives back buffers at run time,
 *           with the host pool's bookkeeping, over sizes.  The host pool
 *           measures the same quantity at run time (`step_buffers` in
 *           -fsdp-stats), and the tests hold the two equal. */
#ifndef FSDP_MEMPLAN_H
#define FSDP_MEMPLAN_H

#include <stddef.h>
#include "darknet.h"
#include "fsdp_backend.h"
#include "fsdp_tally.h"

struct fsdp_engine;

typedef struct fsdp_mem_prediction {
    size_t fixed;          /* the process, libraries and MPI before the network */
    size_t activations;
    size_t build;          /* peak of Darknet's own arrays while building */
    size_t setup;          /* peak while sharding them */
    size_t model_state;
    size_t step_buffers;   /* the most one step holds at once beyond the model state */
    size_t node_shared;    /* shard_node_shared=1: node memory it maps beyond its own parts */
    size_t collective_scratch;   /* the backend's buffer for the other ranks' terms (fsdp_pairs.h) */
    size_t snapshot;       /* -fsdp-checkpoint-every: the background writer's copy (fsdp_clock.h), added by its caller */
    size_t peak;           /* fixed + activations + max(build, setup,
                            * model_state + node_shared + step_buffers + collective_scratch) */
    size_t pss;            /* the peak with node memory divided among the machine's ranks (PSS):
                            * the node memory it maps and its own parts there replaced by
                            * node_shared_bytes / ranks on its machine, and the fixed cost as PSS */
} fsdp_mem_prediction;

/* The process's resident bytes now (0 where /proc is missing). */
size_t fsdp_memplan_resident(void);
/* Its proportional share now (PSS: each page divided by the processes
 * that map it; 0 where the kernel gives no smaps_rollup). */
size_t fsdp_memplan_pss(void);

/* Before measuring the fixed cost: touches what every step will touch
 * whatever the network, so that it counts there: the BLAS's packing
 * buffers (one gemm through Darknet's own entry point) and, with several
 * ranks (coll not NULL), the transport's (an all-gather, a reduce-scatter
 * and an all-reduce that fill the shared-memory window and map what each
 * reads of the others' segments, fsdp_shm.h, or make the point-to-point
 * path's scratch for blocking sums, fsdp_pairs.h).  Its cost does not grow
 * with the ranks. */
fsdp_status fsdp_memplan_warm_up(fsdp_coll *coll);

/* The fixed cost as RSS and as PSS (the libraries' and MPI's shared pages
 * divided among the processes that map them), measured now. */
typedef struct fsdp_mem_fixed {
    size_t rss, pss;
} fsdp_mem_fixed;
fsdp_mem_fixed fsdp_memplan_fixed(void);

/* After fsdp_on_network_built, before the first step: the prediction for
 * this run (loads_weights: a weights file is loaded after the build). */
void fsdp_memplan_predict(const struct fsdp_engine *e, const network *net, fsdp_mem_fixed fixed, int loads_weights,
                          fsdp_mem_prediction *out);

/* GPU runs: the bytes the device pool keeps for the steps (fsdp_mem_device_keep):
 * the prediction's step_buffers through fsdp_mem_pool_keep_bytes. */
size_t fsdp_memplan_device_pool(const struct fsdp_engine *e, const network *net);

/* The prediction for a run of `world` ranks on `machines` machines of
 * equal ranks from an engine set up at another world of two or more, on
 * one machine where machines is 1, else on several (fsdp_backend_null_machines)
 * (fsdp_memplan_world.c): past one rank a world changes only the shard
 * sizes, the model state and node memory's sizes, which it lays out again
 * over stand-ins (the planner's rows for many worlds from one build per
 * strategy and kind of machines). */
fsdp_status fsdp_memplan_predict_world(const struct fsdp_engine *e, const network *net, fsdp_mem_fixed fixed,
                                       int world, int machines, fsdp_mem_prediction *out);

/* The bytes of the activation arrays (output, delta, x, x_norm) the given
 * layers hold as the network stands (each array once; NULL ones, given back
 * to a shared buffer, not at all); layers NULL: layers 0 .. nlayers-1. */
size_t fsdp_memplan_held(const network *net, const int *layers, int nlayers);
/* The largest workspace of a layer (Darknet's one im2col buffer). */
size_t fsdp_memplan_workspace(const network *net);

/* The byte theory: the bytes one training step of `subdivisions`
 * micro-batches moves, per group (out[0 .. ngroups)): the tally of one step
 * run as above; what the engine's tally counts each step. */
fsdp_status fsdp_memplan_step_bytes(const struct fsdp_engine *e, int subdivisions, fsdp_group_tally *out);

#endif
