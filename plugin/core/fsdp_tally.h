/* fsdp_tally.h: what the engine counts as it runs (bytes each collective
 * moved, per group and in all; page faults), for the stats file, the log
 * and the byte theory's checks.  The engine writes it; reports read it. */
#ifndef FSDP_TALLY_H
#define FSDP_TALLY_H

#include <stddef.h>
#include <stdint.h>

typedef struct fsdp_group_tally {
    uint64_t ag_bytes, rs_bytes, ar_bytes;
    uint64_t backward_gathers;   /* unshards in backward that moved bytes */
} fsdp_group_tally;

typedef struct fsdp_tally {
    fsdp_group_tally *group;     /* one per group */
    uint64_t ag, rs, ar;         /* every group's, and grad_op's gathers after the update */
    uint64_t peer;               /* of ag and rs: the buffers whose parts went to peers alone (hybrid) */
    uint64_t bcast;              /* set-up's broadcasts */
    uint64_t ckpt;               /* gathers for saving */
    size_t model_state_bytes;    /* this rank's parameters and optimizer state */
    size_t node_bytes;           /* node memory every rank maps: parameters and gradient slots */
    uint64_t faults_first_step, faults_last_step;   /* minor page faults at the end of step 1 and of the last */
} fsdp_tally;

#endif
