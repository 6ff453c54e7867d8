/* fsdp_flat.h: one flat parameter buffer of a group (see fsdp_engine.h):
 * layout, re-pointing Darknet's arrays, gather, release, gradient reduction. */
#ifndef FSDP_FLAT_H
#define FSDP_FLAT_H

#include "fsdp_engine.h"

/* Lays out tensors t[0..nt) (copied) for the engine's strategy and world;
 * sharded = the flat is sharded (else replicated); state = it gets
 * optimizer state.  Packs Darknet's current values, makes every rank take
 * rank 0's, keeps this rank's part and frees Darknet's arrays. */
fsdp_status fsdp_flat_setup(fsdp_engine *e, fsdp_flat *f, const fsdp_tensor *t, int nt, int sharded,
                            int state);
void fsdp_flat_free(fsdp_engine *e, fsdp_flat *f);

/* All-gather a sharded flat (no-op if gathered or replicated); *bytes gets
 * the bytes of the full buffer, 0 if nothing was gathered.  A world of one
 * gathers nothing: the shard is the buffer (the bytes still count). */
fsdp_status fsdp_flat_gather(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes);
void fsdp_flat_release(fsdp_engine *e, fsdp_flat *f);
/* Starts gathering a sharded flat without making Darknet's stream wait
 * (prefetch); fsdp_flat_gather then waits for it.  No-op where the backend
 * cannot start collectives, in a world of one, or if gathered already. */
fsdp_status fsdp_flat_gather_start(fsdp_engine *e, fsdp_flat *f);

/* Gradients: a zeroed full-size buffer on first use; the layers' gradient
 * pointers point into it. */
fsdp_status fsdp_flat_grad_begin(fsdp_engine *e, fsdp_flat *f);
void fsdp_flat_grad_unpoint(fsdp_engine *e, fsdp_flat *f);
/* Reduce-scatter (sharded state) or all-reduce (`none`) the gradient into
 * gown and free the full-size buffer; *rs / *ar get the bytes. */
fsdp_status fsdp_flat_reduce(fsdp_engine *e, fsdp_flat *f, uint64_t *rs, uint64_t *ar);
/* Waits for a reduce-scatter the backend started asynchronously and frees
 * the gradient buffer it read (no-op when none is in flight). */
fsdp_status fsdp_flat_reduce_finish(fsdp_engine *e, fsdp_flat *f);
/* After the update: the reduced gradient is spent. */
void fsdp_flat_drop_grad(fsdp_engine *e, fsdp_flat *f);

/* Around saving a group's layers: gather if sharded (*bytes as above) and,
 * on GPU runs, give Darknet's pull_*_layer gradient arrays to copy. */
fsdp_status fsdp_flat_save_begin(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes);
void fsdp_flat_save_end(fsdp_engine *e, fsdp_flat *f);

#endif
