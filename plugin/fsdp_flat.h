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
void fsdp_flat_free(fsdp_flat *f);

/* All-gather a sharded flat (no-op if gathered or replicated); *bytes gets
 * the bytes moved, 0 if nothing was gathered. */
fsdp_status fsdp_flat_gather(fsdp_engine *e, fsdp_flat *f, uint64_t *bytes);
void fsdp_flat_release(fsdp_flat *f);

/* Gradients: a zeroed full-size buffer on first use; the layers' gradient
 * pointers point into it. */
fsdp_status fsdp_flat_grad_begin(fsdp_engine *e, fsdp_flat *f);
void fsdp_flat_grad_unpoint(fsdp_flat *f);
/* Reduce-scatter (sharded) or all-reduce (replicated) the gradient into
 * gown, free the full-size buffer; *rs / *ar get the bytes moved. */
fsdp_status fsdp_flat_reduce(fsdp_engine *e, fsdp_flat *f, uint64_t *rs, uint64_t *ar);

#endif
