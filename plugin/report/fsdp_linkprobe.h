/* fsdp_linkprobe.h: `-fsdp-link probe`: the machines and the link between
 * them, measured between the ranks the command runs on, for the step-time
 * plan (fsdp_linkplan.h).
 *
 * The link is measured with the exchange hybrid sharding makes between
 * machines: every rank at once sends a block to each of its peers (the
 * ranks holding its place on the other machines) and receives theirs
 * (fsdp_coll_peer_all_to_all), so every machine's link carries its ranks'
 * bytes each way at the same time, through the same MPI transport and on
 * the same cores as training.  The rate is what that gives, the link's
 * headers counted as the plan counts them, and the latency is what one
 * small exchange takes (the best of 20, each started together), the
 * transport's software included: each is what
 * the plan needs, not what the wire could do alone.  The block grows until
 * an exchange takes a quarter of a second (or 8 MB per peer); the probe
 * takes a few seconds on a slow link. */
#ifndef FSDP_LINKPROBE_H
#define FSDP_LINKPROBE_H

#include "fsdp.h"
#include "fsdp_backend.h"

typedef struct fsdp_link_probed {
    int machines, ranks;   /* machines, ranks on each */
    double bytes_per_s;    /* what one machine's ranks send the others, each way at once: MPI's bytes */
    double latency_s;      /* one small exchange */
    double block_bytes;    /* the block each rank sent each peer in the measure */
} fsdp_link_probed;

/* Collective over ctl and coll (host memory, node memory on several
 * machines).  Refused on every rank alike, saying why, where the ranks are
 * on one machine or coll has no exchanges between machines. */
fsdp_status fsdp_link_probe(fsdp_ctl *ctl, fsdp_coll *coll, fsdp_link_probed *out);

#endif
