/* fsdp_bn.h: synchronized batch norm.  In training, a batch-norm layer
 * normalises with the mean and variance of the global batch (every rank's
 * samples), so N ranks with batch b compute what one process with batch N*b
 * computes, rolling statistics included.  Darknet calls the bn_sync hook
 * after each per-channel quantity it computes over its own batch; here each
 * becomes its global value:
 *
 *   mean            average over ranks (every rank has the same count)
 *   variance        (sum over ranks of var_r) * (count - 1) / (N * count - 1):
 *                   each rank's var_r is already about the global mean and
 *                   Darknet divides a variance by its count - 1
 *   mean_delta,     average over ranks: each is a sum over the batch, and
 *   variance_delta  Darknet's normalize_delta divides it by the rank's own
 *                   batch * spatial, N times smaller than the global one
 *
 * Each is one all-reduce of `channels` floats, except that on the host
 * mean_delta waits for variance_delta and the two travel in one (Darknet
 * reads mean_delta only in normalize_delta, after both): three all-reduces
 * per layer and micro-batch, 4 * channels floats in all.  A world of one,
 * sync_bn=0, and layers run with net.train = 0 (frozen layers, inference)
 * move nothing. */
#ifndef FSDP_BN_H
#define FSDP_BN_H

#include <stdint.h>
#include "darknet_plugin.h"
#include "fsdp_backend.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"

typedef struct fsdp_bn {
    const network *net;         /* the sharded network; NULL until attached */
    fsdp_ctl *ctl;              /* checks across ranks */
    fsdp_coll *coll;            /* the all-reduces: the host's on host runs, the device's on GPU runs */
    const fsdp_mem_ctx *mem;    /* where the network computes */
    const fsdp_layout_plan *plan;   /* which group each layer's bytes count in */
    uint64_t bytes;             /* all-reduced, in all */
    uint64_t *group_bytes;      /* per group */
    int rolling_checks, rolling_differ;   /* fsdp_bn_check_rolling */
    float *pending;             /* host runs: a mean_delta reduced with the next variance_delta */
    int pending_channels;
} fsdp_bn;

/* Once the engine has built the network: what synchronizing needs. */
fsdp_status fsdp_bn_attach(fsdp_bn *bn, const network *net, fsdp_ctl *ctl, fsdp_coll *coll,
                           const fsdp_mem_ctx *mem, const fsdp_layout_plan *plan);
void fsdp_bn_free(fsdp_bn *bn);

/* Whether a hook call comes from the run's network (net is Darknet's
 * by-value copy of it).  Recurrent layers' device passes, and LSTM's host
 * ones, run their sub-layers in a network of their own (`network s = {0}`:
 * no layers): such calls are not the run's, and nothing of the run's (its
 * layer 0 above all) may be combined, recorded or replayed for them. */
int fsdp_bn_of_run(const fsdp_bn *bn, const network *net);

/* What decides whether a run's recurrent layers can combine statistics. */
typedef struct fsdp_bn_run {
    const char *file;     /* the cfg, for the message */
    int device;           /* computes on the GPU */
    int world;
    int sync_bn;          /* [net] sync_bn */
    const unsigned char *frozen;   /* per layer: frozen (runs in inference, combines nothing) */
} fsdp_bn_run;
/* A run that combines batch statistics (sync_bn, several ranks) refuses,
 * by name, trained layers with batch_normalize whose sub-layers' calls are
 * not the run's (above), so nothing would be combined (and on the GPU
 * Darknet's device batch norm, patch 0020, would still treat the variance
 * as the world's): lstm everywhere, rnn and gru on the GPU. */
fsdp_status fsdp_bn_check_recurrent(const fsdp_bn_run *run, const network *net);

/* The bn_sync hook's body.  x is in device memory on GPU runs; calls that
 * are not the run's network's change nothing. */
fsdp_status fsdp_bn_sync(fsdp_bn *bn, network *net, int layer, dn_bn_what what, float *x, int channels, int count);

/* At each save (every rank): whether every batch-norm layer's rolling mean
 * and variance are bit for bit the same on every rank, counted in
 * rolling_checks and rolling_differ (the stats file's "bn_rolling"), never
 * an error: under sync_bn=0 they differ by design. */
fsdp_status fsdp_bn_check_rolling(fsdp_bn *bn, network *net);

#endif
