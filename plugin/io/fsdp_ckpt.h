/* fsdp_ckpt.h: sharded checkpoints.  With -fsdp-checkpoint every rank writes,
 * beside each weights file Darknet saves, FILE.fsdp-R-of-N: its parameter
 * shards and optimizer state (momentum, Adam's moments and step).  With
 * -fsdp-resume the ranks load them beside the weights file given on the
 * command line, so training continues exactly as if it had not stopped.
 *
 * Format 3 (docs/DESIGN.md, "Checkpoints"): a header (world, rank, plan,
 * strategy, optimizer, layout, step counters, the run's identity, the size
 * and checksum of the weights file saved with it), every flat's own floats
 * then momentum then Adam's second moment, group by group (trainable, then
 * frozen), and a trailing checksum of everything before it. */
#ifndef FSDP_CKPT_H
#define FSDP_CKPT_H

#include "fsdp_engine.h"

/* After Darknet saved `weights` (collective: rank 0 tells the others the
 * weights file's size and checksum, which every shard file records). */
fsdp_status fsdp_ckpt_write(fsdp_engine *e, network *net, const char *weights);
/* After the network is sharded: replace this rank's shards and optimizer
 * state by the checkpoint's, beside `weights` (the file loaded; NULL: none
 * was, which is refused).  A missing, short, corrupt (checksum) or foreign
 * file (other world size, cfg, run or step than the other ranks' files, or
 * saved with another weights file than the one loaded: weights_size and
 * weights_hash) stops every rank with a message naming it.  written_on:
 * the world that wrote it where a manifest says (0: the files beside it
 * say, fsdp_ckpt_world). */
fsdp_status fsdp_ckpt_read(fsdp_engine *e, network *net, const char *weights, uint64_t weights_size,
                           uint64_t weights_hash, int written_on);
/* The world a checkpoint beside `weights` was written by: `mine` when its
 * rank-0 file is there, else the one world whose rank-0 file is (an
 * error naming the file when there is none, or several). */
fsdp_status fsdp_ckpt_world(const char *weights, int mine, int *world);
/* Before a save of `weights`: removes the *.tmp files an interrupted save
 * left beside it (rank 0: weights files and every rank's shards of another
 * world size; each rank: its own shards). */
void fsdp_ckpt_clean_tmp(const char *weights, int rank, int world);

/* ---- checkpoints on the clock (fsdp_clock.h) ------------------------------
 * Self-contained files: besides the parts, each rank's rolling statistics
 * and, in rank 0's, the replicated frozen flats, with the run's seen; no
 * weights file beside them.  fsdp_ckpt_read(e, net, BASE, 0, 0, N) resumes
 * one (same strategy, any world). */

/* BASE.fsdp-R-of-N (malloc'd). */
char *fsdp_ckpt_shard_path(const char *base, int rank, int world);
/* Collective: the run's identity (rank 0 draws it at the first save). */
fsdp_status fsdp_ckpt_run_id(fsdp_engine *e, uint64_t *id);
/* Bytes of this rank's self-contained file (0: out of memory). */
size_t fsdp_ckpt_self_bytes(fsdp_engine *e, const network *net);
/* This rank's file, all but the checksum, into img (fsdp_ckpt_self_bytes):
 * the snapshot a writer thread stores.  Not collective. */
fsdp_status fsdp_ckpt_self_image(fsdp_engine *e, const network *net, uint64_t run_id, void *img);
/* The same file written straight to path (through path.tmp, synced). */
fsdp_status fsdp_ckpt_self_write(fsdp_engine *e, const network *net, uint64_t run_id, const char *path,
                                 uint64_t *bytes, uint64_t *sum);
/* Stores an image at path: its checksum into the last 8 bytes (*sum),
 * path.tmp written and synced, renamed, the folder synced.  No MPI, no
 * printing (any thread); -1 with why filled on failure. */
int fsdp_ckpt_image_store(const char *path, void *img, size_t bytes, uint64_t *sum, char *why, size_t whylen);

#endif
