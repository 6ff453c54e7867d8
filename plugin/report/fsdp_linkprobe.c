/* The link between the ranks' machines, measured (fsdp_linkprobe.h). */
#include <stdlib.h>
#include "fsdp_linkprobe.h"
#include "fsdp_timeline.h"

#define FIRST_BLOCK (16u << 10)    /* floats per peer: 64 KB */
#define LAST_BLOCK (2u << 20)      /* 8 MB */
#define LONG_ENOUGH 0.25           /* seconds an exchange takes before its rate is taken */
#define SMALL_REPS 20

/* The slowest rank's seconds for `reps` exchanges of `count` floats per
 * peer, started together. */
static fsdp_status timed(fsdp_ctl *ctl, fsdp_coll *coll, const float *send, float *recv, size_t count, int reps,
                         double *seconds)
{
    FSDP_TRY(fsdp_ctl_barrier(ctl));
    double t0 = fsdp_tl_clock();
    for (int k = 0; k < reps; ++k) FSDP_TRY(fsdp_coll_peer_all_to_all(coll, send, recv, count));
    uint64_t ns = (uint64_t)((fsdp_tl_clock() - t0) * 1e9);
    FSDP_TRY(fsdp_ctl_max_u64(ctl, &ns, 1));
    *seconds = (double)ns / 1e9;
    return FSDP_OK;
}

static fsdp_status measure(fsdp_ctl *ctl, fsdp_coll *coll, const fsdp_node_layout *node, float *send, float *recv,
                           fsdp_link_probed *out)
{
    double t;
    /* A round first: the transport's connections open on first use. */
    FSDP_TRY(timed(ctl, coll, send, recv, 1, 1, &t));
    /* The best of single exchanges, each started together: where ranks
     * outnumber cores, one of a run of exchanges back to back often waits
     * for a rank to be scheduled (a few ms), which the step's started,
     * overlapping exchanges do not each pay. */
    double best = 1e30;
    for (int rep = 0; rep < SMALL_REPS; ++rep) {
        FSDP_TRY(timed(ctl, coll, send, recv, 1, 1, &t));
        if (t < best) best = t;
    }
    out->latency_s = best;
    size_t count = FIRST_BLOCK;
    for (;;) {
        FSDP_TRY(timed(ctl, coll, send, recv, count, 1, &t));
        if (t >= LONG_ENOUGH || count >= LAST_BLOCK) break;
        count = 4 * count < LAST_BLOCK ? 4 * count : LAST_BLOCK;
    }
    /* The best of two more at that size. */
    for (int rep = 0; rep < 2; ++rep) {
        double again;
        FSDP_TRY(timed(ctl, coll, send, recv, count, 1, &again));
        if (again < t) t = again;
    }
    double bytes = 4.0 * (double)count * (double)(node->machines - 1) * (double)node->ranks;
    double moving = t - out->latency_s > t / 2 ? t - out->latency_s : t / 2;
    out->bytes_per_s = bytes / moving;
    out->block_bytes = 4.0 * (double)count;
    return FSDP_OK;
}

fsdp_status fsdp_link_probe(fsdp_ctl *ctl, fsdp_coll *coll, fsdp_link_probed *out)
{
    *out = (fsdp_link_probed){ 0 };
    fsdp_node_layout node = fsdp_coll_maps_node(coll) ? fsdp_coll_node_layout(coll) : (fsdp_node_layout){ 0 };
    /* Every rank refuses alike: the layout is the same on all, but
     * whether node memory was made is asked of each. */
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_min_max_u64(ctl, (uint64_t)node.machines, &lo, &hi));
    if (lo != hi || lo == 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link probe: the %d ranks have no node memory to exchange between "
                         "machines from (FSDP_SHM=0, or machines running different numbers of ranks); describe "
                         "the link instead: -fsdp-link MACHINESxRANKS,MBIT[,MS]", ctl->world);
    if (lo == 1)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link probe: the %d ranks are all on one machine, so there is no "
                         "link to measure; run it with ranks on each machine (e.g. mpirun --map-by node), or "
                         "describe the link: -fsdp-link MACHINESxRANKS,MBIT[,MS]", ctl->world);
    size_t floats = (size_t)node.machines * LAST_BLOCK;
    float *send = calloc(floats, sizeof *send), *recv = calloc(floats, sizeof *recv);
    uint64_t short_of = !send || !recv;
    fsdp_status s = fsdp_ctl_max_u64(ctl, &short_of, 1);
    if (s == FSDP_OK && short_of)
        s = fsdp_fail(FSDP_ERR_NOMEM, "-fsdp-link probe: no memory for %.0f MB of blocks", 8.0 * floats / 1e6);
    if (s == FSDP_OK) s = measure(ctl, coll, &node, send, recv, out);
    free(send);
    free(recv);
    out->machines = node.machines;
    out->ranks = node.ranks;
    return s;
}
