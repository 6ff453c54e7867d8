/* fsdp_session.h: the session, one training run of this process, from the plugin's start to
 * Darknet's finish: the host backend and MPI, the engine, the flags the
 * ranks agreed on, the long run's checkpoints (fsdp_longrun.h), the stats
 * (fsdp_meter.h), the log and the start-up notes (fsdp_notes.h), the
 * trace and the stragglers (fsdp_observe.h), the flight recorder
 * (fsdp_ring.h).
 *
 * Lifetime, in Darknet's order of events:
 *   fsdp_session_create   the flags checked and agreed by every rank, MPI, the host
 *                     backend, the engine, the log and the watchdog
 *   fsdp_session_start    each network built; the first: the device backend, the
 *                     agreement on what was loaded, sharding, the clock, the
 *                     prediction, the resume, the notes
 *   fsdp_session_step     each training step's end
 *   fsdp_session_finish   Darknet's finish: the last checkpoint, the stats file;
 *                     every rank stopped after an error they did not agree on
 *   fsdp_session_free     the teardown: the engine, the backends, MPI
 * Darknet's other events go to the engine (fsdp_engine.h) through
 * fsdp_session_engine, the probe cache's three to fsdp_pcache.h.  Where a
 * new piece goes: a flag's check and its agreement in
 * fsdp_session_flags.c; an action before training in
 * fsdp_session_events.c's before_shard or after_shard; one at each step in
 * fsdp_session_step; the session's state in fsdp_session_impl.h. */
#ifndef FSDP_SESSION_H
#define FSDP_SESSION_H

#include "darknet_plugin.h"
#include "fsdp_engine.h"
#include "fsdp_flags.h"

typedef struct fsdp_session fsdp_session;

/* parsed: fsdp_flags_take's status; a rank whose flags were refused still
 * makes the host backend, so that every rank learns of the refusal.  hooks:
 * Darknet's, whose bn_sync a cfg with sync_bn=0 drops at fsdp_session_start.
 * After an error every rank refused together, MPI is finalized and *out
 * is NULL; after any other, every rank is stopped (MPI_Abort). */
fsdp_status fsdp_session_create(const fsdp_flags *flags, fsdp_status parsed, int *argc, char **argv, dn_hooks *hooks,
                                fsdp_session **out);
fsdp_engine *fsdp_session_engine(const fsdp_session *ses);
/* The GPU this rank computes on (0 in CPU builds). */
int fsdp_session_device(const fsdp_session *ses);
/* Returns s, remembering the first error (its kind decides how the run ends). */
fsdp_status fsdp_session_failed(fsdp_session *ses, fsdp_status s);

/* Darknet's events the session handles beyond the engine's. */
/* Returns 1 where the plugin claims the key (dn_hooks.cfg_option). */
int fsdp_session_cfg_option(fsdp_session *ses, const char *cfg, int line, int layer, const char *section,
                            const char *key, const char *val);
fsdp_status fsdp_session_weights_loaded(fsdp_session *ses, network *net, const char *file);
fsdp_status fsdp_session_start(fsdp_session *ses, network *net, const char *cfg);
fsdp_status fsdp_session_step(fsdp_session *ses, network *net, float *loss);
/* A layer's forward and backward: the engine's work around it, and the
 * compute between timed for -fsdp-trace.  *skip: Darknet skips the
 * layer's backward. */
fsdp_status fsdp_session_forward(fsdp_session *ses, network *net, int i, dn_when w);
fsdp_status fsdp_session_backward(fsdp_session *ses, network *net, int i, dn_when w, int *skip);
/* *writes: whether this rank writes the file (rank 0 alone). */
fsdp_status fsdp_session_save_begin(fsdp_session *ses, network *net, const char *file, int *writes);
fsdp_status fsdp_session_save_end(fsdp_session *ses, network *net, const char *file);
fsdp_status fsdp_session_network_free(fsdp_session *ses, network *net);
/* The probe cache's (fsdp_pcache.h): train_inputs decides whether it
 * serves the loader's inputs (*serve), and adds its buffer to the memory
 * prediction; sample_input runs in the loader's threads; forward_start
 * sets *start, the first layer Darknet runs. */
fsdp_status fsdp_session_train_inputs(fsdp_session *ses, network *net, load_args *a, int *serve);
fsdp_status fsdp_session_sample_input(fsdp_session *ses, const char *path, int flip, float *row, int cols);
fsdp_status fsdp_session_forward_start(fsdp_session *ses, network *net, int *start);
/* status: Darknet's (0: the command ended well).  Does not return when it
 * must stop every rank (MPI_Abort). */
fsdp_status fsdp_session_finish(fsdp_session *ses, int status);
void fsdp_session_free(fsdp_session *ses);

#endif
