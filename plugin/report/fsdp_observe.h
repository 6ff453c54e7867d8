/* fsdp_observe.h: what a run shows of itself beyond the log (docs/observe.md):
 * the trace (-fsdp-trace, fsdp_trace.h) and the slow rank named
 * (fsdp_straggle.h), fed from the time line, the watched collectives and
 * the layers' hooks.  The session calls it at a few points; every rank
 * calls each. */
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
    int own_timeline;    /* the engine's time line was opened for the trace (closed after it) */
    double *layer_t0;    /* when each layer's compute began */
    int nlayers;
} fsdp_observe;

/* Start-up, every rank (collective over E's host control): the flags'
 * values checked, the clocks aligned, the host names shared; LOG (rank 0's)
 * gets each window's compute seconds. */
fsdp_status fsdp_observe_open(fsdp_observe *o, const fsdp_flags *f, fsdp_engine *e, fsdp_log *log);
/* A layer's compute (NAME: "forward", "backward") is what runs between
 * the engine's work before it (gathers) and after it (reduces): W
 * DN_BEFORE is called after the engine's work before the layer, DN_AFTER
 * before its work after it. */
void fsdp_observe_layer(fsdp_observe *o, const char *name, const network *net, int i, dn_when w);
/* The plugin's own work after a training step (the log's line, the stats,
 * checkpoints) is done: the next step's compute starts. */
void fsdp_observe_next_step(fsdp_observe *o, const network *net);
/* The network is built; its first step starts at T (fsdp_tl_clock). */
fsdp_status fsdp_observe_start(fsdp_observe *o, const network *net, double t);
/* After each training step, before the log's line. */
fsdp_status fsdp_observe_step(fsdp_observe *o, const network *net);
/* A run that ended well: the trace, if its window had not ended. */
fsdp_status fsdp_observe_finish(fsdp_observe *o);
void fsdp_observe_free(fsdp_observe *o);

#endif
