/* The session's part of Darknet's events: the first network's start, each
 * step's end, weights loaded and saved, the network freed (fsdp_session.h). */
#include <stdlib.h>
#include "fsdp_ckpt.h"
#include "fsdp_notes.h"
#include "fsdp_quiet.h"
#include "fsdp_session_impl.h"
#include "fsdp_stop.h"
#include "fsdp_weights.h"

int fsdp_session_cfg_option(fsdp_session *ses, const char *cfg, int line, int layer, const char *section,
                            const char *key, const char *val)
{
    fsdp_agree_note_option(&ses->agreement, cfg, line, layer, section, key, val);
    return fsdp_on_cfg_option(ses->engine, cfg, line, layer, key, val);
}

fsdp_status fsdp_session_weights_loaded(fsdp_session *ses, network *net, const char *file)
{
    network *mine = fsdp_engine_net(ses->engine);
    if (mine && net == mine)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s: loading weights into a network that is already sharded is "
                         "not supported", file);
    fsdp_status s = fsdp_weights_check(net, file);
    if (s == FSDP_OK) s = fsdp_agree_note_weights(&ses->agreement, file);
    if (s != FSDP_OK) {
        /* Told to every rank at network_built, which all of them reach. */
        ses->agreement.load_error = s;
        return FSDP_OK;
    }
    return fsdp_longrun_note_weights(&ses->longrun, file);
}

/* Before the first network is sharded, on every rank alike: its device
 * backend, then every rank's agreement on what it was given
 * (fsdp_agree.h), where a one-rank refusal stops them all. */
static fsdp_status before_shard(fsdp_session *ses, network *net, const char *cfg)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(ses->engine);
    FSDP_TRY(fsdp_session_device_backend(ses, net));
    FSDP_TRY(fsdp_ctl_all_ok(ctl, fsdp_engine_cfg(ses->engine)->error, FSDP_ERR_CONFIG, "found an error in its cfg"));
    FSDP_TRY(fsdp_agree_loaded(ctl, &ses->agreement));
    FSDP_TRY(fsdp_agree_network(ctl, &ses->agreement, net));
    return fsdp_longrun_before_shard(&ses->longrun, ctl, net, cfg);
}

/* Once it is sharded: the clock, the memory prediction (host runs), the
 * files the probe cache is keyed by, rank 0's notes, then the checkpoint
 * resumed. */
static fsdp_status after_shard(fsdp_session *ses, network *net, const char *cfg)
{
    fsdp_engine *e = ses->engine;
    const fsdp_ctl *ctl = fsdp_engine_ctl(e);
    FSDP_TRY(fsdp_longrun_start_clock(&ses->longrun, e, net,
                                      ctl->world - fsdp_hosts_others(&ses->hosts, ctl->rank)));
    if (!fsdp_engine_mem(e)->device) {
        fsdp_mem_prediction *p = &ses->predicted;
        fsdp_memplan_predict(e, net, ses->fixed_bytes, ses->longrun.weights_file != NULL, p);
        p->snapshot = fsdp_clock_snapshot_bytes(ses->longrun.clock);
        p->peak += p->snapshot;
        p->pss += p->snapshot;
    }
    FSDP_TRY(fsdp_pcache_note_built(&ses->pcache, e, cfg, ses->longrun.weights_file));
    if (ctl->rank == 0) fsdp_notes_startup(e, &ses->predicted, &ses->hosts, ses->timeout_s);
    return fsdp_longrun_resume(&ses->longrun, e, net, ses->agreement.size, ses->agreement.hash);
}

fsdp_status fsdp_session_start(fsdp_session *ses, network *net, const char *cfg)
{
    fsdp_engine *e = ses->engine;
    const fsdp_ctl *ctl = fsdp_engine_ctl(e);
    /* Start-up is over once the network is built: every rank prints again. */
    fsdp_quiet_end();
    int first = !fsdp_engine_net(e);
    fsdp_status s = first ? before_shard(ses, net, cfg) : FSDP_OK;
    if (s == FSDP_OK) s = fsdp_on_network_built(e, net);
    if (s == FSDP_ERR_MISMATCH) fsdp_agreed_stop();   /* the engine's plan check: every rank saw it */
    if (s == FSDP_OK && first) s = after_shard(ses, net, cfg);
    if (first) fsdp_meter_built(&ses->meter);
    if (s == FSDP_OK && first && ctl->rank == 0) fsdp_notes_resumed(&ses->longrun, net, ctl->world);
    /* The first step is timed from here, by the log and the time line
     * alike: from one instant, taken before the log's file is opened. */
    double t0 = fsdp_tl_clock();
    if (s == FSDP_OK && ctl->rank == 0) s = fsdp_log_start(&ses->log, fsdp_engine_bytes_moved(e), t0);
    fsdp_tl_next_step(fsdp_engine_timeline(e), t0);
    if (s == FSDP_OK && first) s = fsdp_observe_start(&ses->observe, net, t0);
    return s;
}

static fsdp_status step(fsdp_session *ses, network *net, float *loss)
{
    fsdp_engine *e = ses->engine;
    FSDP_TRY(fsdp_on_train_step(e, net, loss));
    if (net != fsdp_engine_net(e)) return FSDP_OK;
    FSDP_TRY(fsdp_meter_step(&ses->meter, e, ses->predicted.peak));
    FSDP_TRY(fsdp_longrun_step(&ses->longrun, net));
    FSDP_TRY(fsdp_observe_step(&ses->observe, net));
    if (fsdp_engine_ctl(e)->rank != 0) return FSDP_OK;
    fsdp_stop_note_step(get_current_batch(net), (size_t)net->max_batches);
    return fsdp_log_step(&ses->log, net, *loss, fsdp_engine_bytes_moved(e), fsdp_engine_timeline(e));
}

fsdp_status fsdp_session_step(fsdp_session *ses, network *net, float *loss)
{
    fsdp_status s = step(ses, net, loss);
    fsdp_observe_next_step(&ses->observe, net);   /* after all of the plugin's work on the step */
    return s;
}

fsdp_status fsdp_session_forward(fsdp_session *ses, network *net, int i, dn_when w)
{
    if (w == DN_AFTER) fsdp_observe_layer(&ses->observe, "forward", net, i, w);
    fsdp_status s = fsdp_on_forward(ses->engine, net, i, w);
    if (w == DN_BEFORE) fsdp_observe_layer(&ses->observe, "forward", net, i, w);
    return s;
}

fsdp_status fsdp_session_backward(fsdp_session *ses, network *net, int i, dn_when w, int *skip)
{
    if (w == DN_AFTER) fsdp_observe_layer(&ses->observe, "backward", net, i, w);
    fsdp_status s = fsdp_on_backward(ses->engine, net, i, w, skip);
    if (w == DN_BEFORE) fsdp_observe_layer(&ses->observe, "backward", net, i, w);
    return s;
}

fsdp_status fsdp_session_save_begin(fsdp_session *ses, network *net, const char *file, int *writes)
{
    const fsdp_ctl *ctl = fsdp_engine_ctl(ses->engine);
    if (net == fsdp_engine_net(ses->engine)) fsdp_ckpt_clean_tmp(file, ctl->rank, ctl->world);
    *writes = ctl->rank == 0;
    return FSDP_OK;
}

fsdp_status fsdp_session_save_end(fsdp_session *ses, network *net, const char *file)
{
    fsdp_engine *e = ses->engine;
    fsdp_status s = fsdp_on_save_check(e, net);
    if (s == FSDP_OK && net == fsdp_engine_net(e)) s = fsdp_longrun_saved(&ses->longrun, e, net, file);
    fsdp_status done = fsdp_on_save_end(e, net, file);
    if (s == FSDP_OK && done == FSDP_OK && fsdp_engine_ctl(e)->rank == 0) fsdp_stop_note_saved(file);
    return s != FSDP_OK ? s : done;
}

fsdp_status fsdp_session_network_free(fsdp_session *ses, network *net)
{
    fsdp_engine *e = ses->engine;
    int mine = net == fsdp_engine_net(e);
    fsdp_status s = mine ? fsdp_longrun_finish(&ses->longrun) : FSDP_OK;
    if (s == FSDP_OK && mine) s = fsdp_meter_write(&ses->meter, e, &ses->hosts, &ses->predicted, &ses->observe.straggle,
                                                &ses->pcache);
    fsdp_status freed = fsdp_on_network_free(e, net);
    return s != FSDP_OK ? s : freed;
}

fsdp_status fsdp_session_train_inputs(fsdp_session *ses, network *net, load_args *a, int *serve)
{
    fsdp_status s = fsdp_pcache_train_inputs(&ses->pcache, ses->engine, net, a, serve);
    fsdp_pcache_predict(&ses->pcache, &ses->predicted.peak, &ses->predicted.pss,
                        fsdp_coll_node_layout(fsdp_engine_coll(ses->engine)).ranks);
    return s;
}

fsdp_status fsdp_session_sample_input(fsdp_session *ses, const char *path, int flip, float *row, int cols)
{
    return fsdp_pcache_sample_input(&ses->pcache, path, flip, row, cols);
}

fsdp_status fsdp_session_forward_start(fsdp_session *ses, network *net, int *start)
{
    return fsdp_pcache_forward_start(&ses->pcache, ses->engine, net, start);
}
