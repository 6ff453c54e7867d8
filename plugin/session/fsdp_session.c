/* The session's creation, its end and its teardown (fsdp_session.h). */
#include <malloc.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
#include "fsdp_acts.h"
#include "fsdp_commands.h"
#include "fsdp_env.h"
#include "fsdp_launch.h"
#include "fsdp_quiet.h"
#include "fsdp_ring.h"
#include "fsdp_session_impl.h"
#include "fsdp_stop.h"
#include "fsdp_watch.h"

/* Before MPI_Abort: the launcher forwards each rank's output on its own
 * time and drops what it has not forwarded when it tears the job down, so
 * the message that says why would be lost now and then. */
static void abort_pause(void)
{
    usleep(200 * 1000);
}

/* The watchdog's words for a collective in flight (fsdp_watch.h). */
static void describe_wait(void *ctx, const void *buf, char *out, size_t n)
{
    const fsdp_session *ses = ctx;
    /* The engine is gone during the teardown's collectives (fsdp_session_free). */
    if (ses->engine) fsdp_engine_describe_wait(ses->engine, buf, out, n);
    else snprintf(out, n, "(at shutdown)");
}

/* Each rank checks its own flags; then all agree over the host backend,
 * before any other collective, so that one rank's refusal stops every
 * rank.  A refusing rank makes the backend too: the agreement needs it.
 * A rank that cannot make it stays out and aborts the job (refuse). */
static fsdp_status join(fsdp_session *ses, const fsdp_flags *f, fsdp_status s, int argc, char **argv, fsdp_ctl **ctl)
{
    if (s == FSDP_OK) s = fsdp_session_check_flags(ses, f, argc, argv);
    fsdp_status made = fsdp_session_host_backend(ses, ctl);
    if (made == FSDP_OK) s = fsdp_session_agree_flags(ses, s, *ctl, f, argc, argv);
    else if (s == FSDP_OK) s = made;
    if (s == FSDP_OK && (*ctl)->world > 1 && ses->timeout_s > 0) s = fsdp_watch_wrap(ctl, &ses->host_coll);
    if (s == FSDP_OK) s = fsdp_check_command(argc, argv, (*ctl)->world);
    return s;
}

/* The engine, which ranks share a machine, and what is resident before
 * Darknet builds anything. */
static fsdp_status make_engine(fsdp_session *ses, fsdp_ctl *ctl, int argc, char **argv)
{
    fsdp_status s = fsdp_engine_create(ctl, ses->host_coll, &ses->engine);
    if (s == FSDP_OK) s = fsdp_hosts_find(ctl, &ses->hosts);
    if (s == FSDP_OK) s = fsdp_memplan_warm_up(ses->host_coll);
    ses->fixed_bytes = fsdp_memplan_fixed();
    /* A staged build only where network_built follows the build
     * (fsdp_stage.h); the activations' buffers for training commands only:
     * some others read a layer's output after the forward pass
     * (fsdp_acts.h). */
    int trains = fsdp_command_trains_exactly(argc, argv);
    if (s == FSDP_OK)
        fsdp_engine_set_options(ses->engine, &(fsdp_engine_options){ .staged = ctl->world > 1 && trains,
                                                                   .acts = trains && fsdp_acts_wanted(),
                                                                   .recompute = trains });
    return s;
}

/* What the run writes and watches: checkpoints, stats, the flight
 * recorder, the log, the trace and the stragglers, the stop signals, the
 * watchdog. */
static fsdp_status open_outputs(fsdp_session *ses, const fsdp_flags *f, fsdp_ctl *ctl, int argc, char **argv)
{
    FSDP_TRY(fsdp_longrun_begin(&ses->longrun, f, argc, argv));
    FSDP_TRY(fsdp_meter_open(&ses->meter, f->stats));
    if (ctl->world > 1) FSDP_TRY(fsdp_ring_open(f->stats, ctl->rank, ctl->world));
    if (ctl->rank == 0) FSDP_TRY(fsdp_log_open(&ses->log, f->log, ctl->world));
    if (ctl->rank == 0 && f->log_events) FSDP_TRY(fsdp_engine_log_events(ses->engine, 4096));
    FSDP_TRY(fsdp_observe_open(&ses->observe, f, ses->engine, &ses->log));
    if (ctl->rank == 0 && ses->mpi_started) fsdp_stop_install();
    if (ctl->world > 1) FSDP_TRY(fsdp_watch_start(ses->timeout_s, ctl->rank, describe_wait, ses));
    return FSDP_OK;
}

/* A refusal the ranks agreed on ends MPI in order; any later one (a rank
 * alone) must not leave the others waiting. */
static fsdp_status refuse(fsdp_session *ses, fsdp_ctl *ctl, fsdp_status s)
{
    fsdp_ring_close(0);   /* nothing ran: no ring to keep */
    if (ses->mpi_started && !fsdp_stopped_together()) {
        abort_pause();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every rank is here (the agreement's refusal): freeing the backend's
     * communicator and windows is collective. */
    fsdp_coll_free(ses->host_coll);
    fsdp_ctl_free(ctl);
    if (ses->mpi_started) MPI_Finalize();
    fsdp_longrun_free(&ses->longrun);
    fsdp_meter_free(&ses->meter);
    fsdp_observe_free(&ses->observe);
    fsdp_pcache_free(&ses->pcache);
    free(ses);
    return s;
}

fsdp_status fsdp_session_create(const fsdp_flags *flags, fsdp_status parsed, int *argc, char **argv, dn_hooks *hooks,
                                fsdp_session **out)
{
    *out = NULL;
    fsdp_session *ses = calloc(1, sizeof *ses);
    if (!ses) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    ses->first_error = FSDP_OK;
    ses->timeout_s = FSDP_WATCH_DEFAULT_S;
    ses->hooks = hooks;
    if (fsdp_launched()) {
        fsdp_status started = fsdp_launch_mpi(argc, argv);
        if (started != FSDP_OK) return free(ses), started;
        ses->mpi_started = 1;
    }
    ses->main_thread = pthread_self();
    fsdp_ctl *ctl = NULL;
    fsdp_status s = join(ses, flags, parsed, *argc, argv, &ctl);
    if (s == FSDP_OK) s = make_engine(ses, ctl, *argc, argv);
    if (s == FSDP_OK) s = open_outputs(ses, flags, ctl, *argc, argv);
    if (s != FSDP_OK) return refuse(ses, ctl, s);
    ses->backend_flag = flags->backend;
    /* Only rank 0 prints Darknet's progress; errors still go to stderr. */
    if (ctl->rank != 0 && !fsdp_env_switch("FSDP_ALL_RANKS_PRINT") && !freopen("/dev/null", "w", stdout)) return FSDP_ERR_IO;
    fsdp_quiet_begin(ctl->rank);
    *out = ses;
    return FSDP_OK;
}

fsdp_engine *fsdp_session_engine(const fsdp_session *ses)
{
    return ses->engine;
}

int fsdp_session_device(const fsdp_session *ses)
{
    return fsdp_session_pick_device(ses);
}

fsdp_status fsdp_session_failed(fsdp_session *ses, fsdp_status s)
{
    if (s != FSDP_OK && ses->first_error == FSDP_OK) ses->first_error = s;
    return s;
}

/* After an error the other ranks did not see (Darknet's own, a failed
 * save, a runtime error) they may wait in a collective forever, and so may
 * this rank's own teardown (a stream synchronize, NCCL's destroy): stop
 * every rank now.  Only errors every rank agreed on leave in order. */
static void stop_all_unless_agreed(const fsdp_session *ses, int status)
{
    int runtime = fsdp_status_runtime(ses->first_error);
    if (!ses->mpi_started || status == 0 || (!runtime && fsdp_stopped_together())) return;
    fflush(stdout);
    fflush(stderr);
    fsdp_quiet_failed();
    /* MPI belongs to the main thread; from a loader thread a non-zero exit
     * makes the launcher stop the others. */
    abort_pause();
    if (!pthread_equal(pthread_self(), ses->main_thread)) _exit(1);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

fsdp_status fsdp_session_finish(fsdp_session *ses, int status)
{
    if (status == 0) fsdp_quiet_ok();
    fsdp_log_close(&ses->log);
    /* rnn train never frees its network: its checkpoint in flight ends
     * here (every rank is here after a run that ended well). */
    fsdp_status s = status == 0 ? fsdp_longrun_finish(&ses->longrun) : FSDP_OK;
    if (s == FSDP_OK && status == 0)
        s = fsdp_meter_write(&ses->meter, ses->engine, &ses->hosts, &ses->predicted, &ses->observe.straggle,
                             &ses->pcache);
    if (s == FSDP_OK && status == 0) s = fsdp_observe_finish(&ses->observe);
    if (status == 0) fsdp_pcache_report(&ses->pcache, fsdp_engine_ctl(ses->engine)->rank);
    ses->keep_ring = status != 0 || s != FSDP_OK;   /* a run that ended well leaves no ring */
    stop_all_unless_agreed(ses, status);
    return s;
}

void fsdp_session_free(fsdp_session *ses)
{
    fsdp_engine *e = ses->engine;
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    fsdp_coll *coll = fsdp_engine_coll(e);
    fsdp_longrun_free(&ses->longrun);
    ses->engine = NULL;   /* the watchdog may describe the teardown's collectives */
    fsdp_observe_free(&ses->observe);
    fsdp_engine_free(e);
    fsdp_hosts_free(&ses->hosts);
    fsdp_meter_free(&ses->meter);
    fsdp_agree_free(&ses->agreement);
    fsdp_pcache_free(&ses->pcache);
    fsdp_watch_enter("MPI_Finalize", NULL);   /* every rank must reach it */
    if (coll != ses->host_coll) fsdp_coll_free(coll);
    fsdp_coll_free(ses->host_coll);
    fsdp_ctl_free(ctl);
    if (ses->mpi_started) MPI_Finalize();
    fsdp_watch_leave();
    fsdp_watch_stop();
    fsdp_ring_close(ses->keep_ring);
    free(ses);
}
