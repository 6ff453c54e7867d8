/* fsdp_cuda_backends.h: the buffer collectives on device memory (GPU
 * builds only), behind comm's fsdp_coll interface (fsdp_backend.h). */
#ifndef FSDP_CUDA_BACKENDS_H
#define FSDP_CUDA_BACKENDS_H

#ifdef GPU
#include "fsdp_backend.h"

/* NCCL on device memory of GPU `device`, on its own stream, for ctl's
 * ranks; NCCL's unique id goes through ctl (used only while creating). */
fsdp_status fsdp_backend_nccl_create(fsdp_ctl *ctl, int device, fsdp_coll **out);
/* Device buffers through a host-memory one (MPI): each collective copies to
 * host memory, runs there and copies back, so several ranks can share one
 * GPU (NCCL refuses that).  Takes ownership of `host` (freed with it, or at
 * once if creating fails). */
fsdp_status fsdp_backend_staged_create(fsdp_coll *host, fsdp_coll **out);
/* Size of the staged backend's host staging buffer (floats, all ranks'
 * slices together; default 2^24): longer collectives go through it in
 * chunks.  Clamped to at least one float per rank.  Tests lower it to
 * exercise chunking on small buffers.  No effect on other backends. */
void fsdp_backend_staged_set_stage_limit(fsdp_coll *c, size_t floats);
#endif
#endif
