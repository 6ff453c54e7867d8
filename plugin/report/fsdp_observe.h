/* fsdp_observe.h: what a run shows of itself beyond the log (docs/observe.md):
 * the trace (-fsdp-trace, fsdp_trace.h) and the slow rank named
 * (fsdp_straggle.h), fed from the time line, the watched collectives and
 * the layers' hooks.  The entry point calls it at a few points; every
 * rank calls each. */
#ifndef FSDP_OBSERVE_H
#define FSDP_OBSERVE_H

#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_engine.h"
#include "fsdp_flags.h"
#include "fsdp_log.h"
#include "fsdp_straggle.h"
#include "fsdp_trace.h"

typedef struct fsdp_observe {
    int on;
    fsdp_engine *e;
    fsdp_straggle straggle;
    fsdp_trace trace;
    int (*forward_layer)(void *ctx, network *net, int i, dn_when when);   /* the hooks it wraps */
    int (*backward_layer)(void *ctx, network *net, int i, dn_when when);
    int (*train_step)(void *ctx, network *net, float *loss);
    int own_timeline;    /* the engine's time line was opened for the trace (closed after it) */
    double *layer_t0;    /* when each layer's compute began */
    int nlayers;
} fsdp_observe;

/* Start-up, every rank (collective over E's host control): the flags'
 * values checked, the clocks aligned, the host names shared; LOG (rank 0's)
 * gets each window's compute seconds. */
fsdp_status fsdp_observe_open(fsdp_observe *o, const fsdp_flags *f, fsdp_engine *e, fsdp_log *log);
/* Wraps H's hooks (set already): the layers' to time each one's compute,
 * the step's to start the next step's compute after the plugin's work. */
void fsdp_observe_hooks(fsdp_observe *o, dn_hooks *h);
/* The network is built; its first step starts at T (fsdp_tl_clock). */
fsdp_status fsdp_observe_start(fsdp_observe *o, const network *net, double t);
/* After each training step, before the log's line. */
fsdp_status fsdp_observe_step(fsdp_observe *o, const network *net);
/* A run that ended well: the trace, if its window had not ended. */
fsdp_status fsdp_observe_finish(fsdp_observe *o);
void fsdp_observe_free(fsdp_observe *o);

#endif
