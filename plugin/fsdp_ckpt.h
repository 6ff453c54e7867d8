/* fsdp_ckpt.h: sharded checkpoints.  With -fsdp-checkpoint every rank writes,
 * beside each weights file Darknet saves, FILE.fsdp-R-of-N: its parameter
 * shards and optimizer state (momentum, Adam's moments and step).  With
 * -fsdp-resume the ranks load them beside the weights file given on the
 * command line, so training continues exactly as if it had not stopped. */
#ifndef FSDP_CKPT_H
#define FSDP_CKPT_H

#include "fsdp_engine.h"

fsdp_status fsdp_ckpt_write(fsdp_engine *e, network *net, const char *weights);
/* After the network is sharded: replace this rank's shards and optimizer
 * state by the checkpoint's.  A missing, short or foreign file (other world
 * size, other cfg) stops every rank with a message naming it. */
fsdp_status fsdp_ckpt_read(fsdp_engine *e, network *net);

#endif
