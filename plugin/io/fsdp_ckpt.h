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
 * weights_hash) stops every rank with a message naming it. */
fsdp_status fsdp_ckpt_read(fsdp_engine *e, network *net, const char *weights, uint64_t weights_size,
                           uint64_t weights_hash);
/* Before a save of `weights`: removes the *.tmp files an interrupted save
 * left beside it (rank 0: weights files and every rank's shards of another
 * world size; each rank: its own shards). */
void fsdp_ckpt_clean_tmp(const char *weights, int rank, int world);

#endif
