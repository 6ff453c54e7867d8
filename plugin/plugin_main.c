/* libdarknet_fsdp.so's entry point: flags, MPI, the backend, and the hook
 * table that hands Darknet's events to the engine. */
#include <malloc.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "darknet_plugin.h"
#include "fsdp_agree.h"
#include "fsdp_backend.h"
#include "fsdp_cuda_backends.h"
#include "fsdp_bn.h"
#include "fsdp_ckpt.h"
#include "fsdp_clock.h"
#include "fsdp_resume.h"
#include "fsdp_commands.h"
#include "fsdp_deltas.h"
#include "fsdp_devices.h"
#include "fsdp_acts.h"
#include "fsdp_engine.h"
#include "fsdp_flags.h"
#include "fsdp_frozen.h"
#include "fsdp_recompute.h"
#include "fsdp_hash.h"
#include "fsdp_hosts.h"
#include "fsdp_log.h"
#include "fsdp_memplan.h"
#include "fsdp_linkplan.h"
#include "fsdp_planner.h"
#include "fsdp_quiet.h"
#include "fsdp_stats.h"
#include "fsdp_stop.h"
#include "fsdp_watch.h"
#include "fsdp_weights.h"
#ifdef GPU
#include <cuda_runtime.h>
#endif

#define FSDP_MMAP_THRESHOLD (4 << 20)

/* The plugin's state for this process's run, one context: made by
 * darknet_plugin_init (flags, MPI, host control, the engine), filled as
 * Darknet's events arrive (the weights file, the prediction, the step's
 * counts), torn down by h_finish.  Darknet hands the hooks the engine
 * (dn_hooks.ctx); what the entry point keeps beside it is here. */
static struct plugin {
    fsdp_engine *engine;
    fsdp_coll *host_coll;          /* host memory's collectives; the engine's on host runs */
    fsdp_status first_error;
    int mpi_started;
    const char *backend_flag;      /* -fsdp-backend, NULL: the default */
    fsdp_log log;                  /* rank 0: -fsdp-log and the progress lines */
    dn_hooks *hooks;               /* Darknet's, to drop bn_sync under sync_bn=0 */
    fsdp_agree agreement;          /* cfg options and weights file, compared across ranks */
    double timeout_s;              /* -fsdp-timeout */
    pthread_t main_thread;         /* the one thread that may call MPI */
    fsdp_hosts hosts;              /* which ranks share a machine */
    fsdp_mem_fixed fixed_bytes;    /* resident before the network was built (the process, libraries, MPI) */
    fsdp_mem_prediction predicted; /* host runs, from network_built on; peak 0 otherwise */
    uint64_t setup_cpu_us;         /* this rank's CPU time when the network was built and sharded */
    double setup_cpu_s[2];         /* its least and most over the ranks, agreed at the first step */
    size_t peak_pss;               /* rank 0 with -fsdp-stats: its largest PSS at a step's end */
    size_t mean_pss;               /* with -fsdp-stats: the largest mean of every rank's PSS at a step's end */
    uint64_t *predicted_each;      /* with -fsdp-stats: every rank's predicted peak (its own fixed cost), from the first step */
    fsdp_clock *clock;             /* -fsdp-checkpoint-every, from network_built on */
    struct {
        int checkpoint;      /* -fsdp-checkpoint: each rank saves its shards beside each weights file */
        int resume;          /* -fsdp-resume: each rank loads them beside the weights file given */
        int resume_auto;     /* -fsdp-resume auto: the newest complete checkpoint on the clock, if any */
        int keep_batch;      /* -fsdp-keep-batch */
        double every_s;      /* -fsdp-checkpoint-every, in seconds; 0: off */
        int keep;            /* -fsdp-checkpoint-keep */
        char *backup;        /* the command's backup folder (with either of those) */
        char *folder, *name; /* BACKUP/NAME.fsdp, NAME */
        fsdp_resume_point point;   /* auto: the checkpoint picked (base NULL: none) */
        char *weights_file;  /* the weights file Darknet loaded, if any */
        char *stats_path;    /* -fsdp-stats */
        int stats_written;   /* once, while the groups still exist */
    } run;
} P = { .first_error = FSDP_OK, .timeout_s = FSDP_WATCH_DEFAULT_S };

static void print_startup_notes(const fsdp_engine *e);

/* Before MPI_Abort: the launcher forwards each rank's output on its own
 * time and drops what it has not forwarded when it tears the job down, so
 * the message that says why would be lost now and then. */
static void abort_pause(void)
{
    usleep(200 * 1000);
}

/* The one mapping of a status to Darknet's: the user's to fix (a cfg, a
 * flag, a file, what the plugin does not support), a build mismatch, or a
 * failure of the run itself.  Start-up's status, the hooks' results and
 * whether the teardown must stop every rank all follow it. */
static dn_status dn_status_of(fsdp_status s)
{
    switch (s) {
    case FSDP_OK: return DN_OK;
    case FSDP_ERR_ABI: return DN_ERR_ABI;
    case FSDP_ERR_COMM:
    case FSDP_ERR_CUDA:
    case FSDP_ERR_NOMEM:
    case FSDP_ERR_IO: return DN_ERR_RUNTIME;
    case FSDP_ERR_CONFIG:
    case FSDP_ERR_MISMATCH:
    case FSDP_ERR_UNSUPPORTED: return DN_ERR_CONFIG;
    }
    return DN_ERR_CONFIG;
}

/* Darknet only needs to know whether to stop; the engine has printed why. */
static int to_dn(fsdp_status s)
{
    if (s != FSDP_OK && P.first_error == FSDP_OK) P.first_error = s;
    return dn_status_of(s);
}

static int h_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    fsdp_agree_note_option(&P.agreement, cfg, line, layer, sec, key, val);
    return fsdp_on_cfg_option(c, cfg, line, layer, key, val);
}
/* GPU runs move parameters in device memory: NCCL, or MPI through host
 * staging buffers when asked (several ranks may then share one GPU); host
 * runs move them with MPI.  Each -fsdp-backend value names one of these. */
static fsdp_status device_backend(fsdp_engine *e, network *net)
{
#ifdef GPU
    int gpu = net->gpu_index >= 0;
#else
    int gpu = 0;
#endif
    const char *want = P.backend_flag ? P.backend_flag : gpu ? "nccl" : "mpi";
    if (!gpu && strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: this run computes on the host (-nogpu or a "
                         "CPU build), where the collectives are MPI's: -fsdp-backend mpi", want);
    if (gpu && !strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend mpi: this run computes on the GPU: -fsdp-backend "
                         "mpi-staged moves its buffers through host memory with MPI (ranks may share a GPU), "
                         "nccl (the default) between GPUs");
#ifdef GPU
    if (!gpu || fsdp_engine_ctl(e)->world == 1 || fsdp_engine_coll(e) != P.host_coll) return FSDP_OK;
    fsdp_coll *dev = NULL;
    if (!strcmp(want, "mpi-staged")) {
        /* Its host collectives on an MPI communicator of their own. */
        fsdp_coll *host = NULL;
        FSDP_TRY(fsdp_backend_mpi_create(NULL, &host));
        FSDP_TRY(fsdp_backend_staged_create(host, &dev));
    } else {
        /* NCCL refuses ranks sharing a GPU with a bare "invalid usage": named here first. */
        FSDP_TRY(fsdp_devices_agree(fsdp_engine_ctl(e), &P.hosts, net->gpu_index));
        FSDP_TRY(fsdp_backend_nccl_create(fsdp_engine_ctl(e), net->gpu_index, &dev));
    }
    fsdp_engine_set_coll(e, dev);
    return FSDP_OK;
#else
    (void)e;
    return FSDP_OK;
#endif
}

/* The process's CPU time so far, every thread's, user and system. */
static uint64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* The watchdog's wrapper around the device collectives (host control and
 * host memory's are wrapped at start-up). */
static fsdp_status watch_device(fsdp_engine *e)
{
    fsdp_coll *coll = fsdp_engine_coll(e);
    if (coll == P.host_coll || P.timeout_s <= 0) return FSDP_OK;
    FSDP_TRY(fsdp_watch_wrap(NULL, &coll));
    fsdp_engine_set_coll(e, coll);
    return FSDP_OK;
}

/* Before sharding, on every rank alike: where checkpoints on the clock
 * go, which one -fsdp-resume auto continues from, and under
 * -fsdp-keep-batch the subdivisions that keep its global batch. */
static fsdp_status long_run_start(fsdp_ctl *ctl, network *net, const char *cfg)
{
    if (P.run.backup) {
        P.run.folder = fsdp_resume_folder(P.run.backup, cfg, &P.run.name);
        if (!P.run.folder) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    if (P.run.resume_auto)
        FSDP_TRY(fsdp_resume_pick(ctl, P.run.folder, P.run.name, &P.run.point));
    if (!P.run.keep_batch) return FSDP_OK;
    int from = P.run.point.world;
    /* A manifest says the global batch its updates saw (a run that kept
     * it before may have run other subdivisions than the cfg's). */
    if (P.run.point.base && P.run.point.step > 0 && P.run.point.seen % (uint64_t)P.run.point.step == 0)
        return fsdp_resume_keep_batch(net, (long)(P.run.point.seen / (uint64_t)P.run.point.step), from, ctl->world,
                                      ctl->rank == 0);
    if (!P.run.resume_auto) {
        fsdp_status s = P.run.weights_file ? fsdp_ckpt_world(P.run.weights_file, ctl->world, &from)
                                           : fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume needs the weights file the "
                                                       "checkpoint was saved with on the command line");
        FSDP_TRY(fsdp_ctl_all_ok(ctl, s, FSDP_ERR_CONFIG, "found no checkpoint to resume"));
    }
    if (!from) return FSDP_OK;   /* auto, and nothing to resume */
    return fsdp_resume_keep_batch(net, (long)net->batch * net->subdivisions * from, from, ctl->world, ctl->rank == 0);
}

static int h_built(void *c, network *net, const char *cfg)
{
    fsdp_engine *e = c;
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    int first = !fsdp_engine_net(e);
    fsdp_status s = first ? device_backend(e, net) : FSDP_OK;
    /* Without the hook GPU builds keep cuDNN's batch norm (darknet_plugin.h). */
    if (first && !fsdp_engine_cfg(e)->sync_bn) P.hooks->bn_sync = NULL;
    if (s == FSDP_OK && first) s = watch_device(e);
    /* Before anything is sharded, every rank agrees on what it was given
     * (fsdp_agree.h); a one-rank refusal stops them all. */
    if (s == FSDP_OK && first)
        s = fsdp_ctl_all_ok(ctl, fsdp_engine_cfg(e)->error, FSDP_ERR_CONFIG, "found an error in its cfg");
    if (s == FSDP_OK && first) s = fsdp_agree_loaded(ctl, &P.agreement);
    if (s == FSDP_OK && first) s = fsdp_agree_network(ctl, &P.agreement, net);
    if (s == FSDP_OK && first) s = long_run_start(ctl, net, cfg);
    if (s == FSDP_OK) s = fsdp_on_network_built(e, net);
    if (s == FSDP_ERR_MISMATCH) fsdp_agreed_stop();   /* the engine's plan check: every rank saw it */
    if (s == FSDP_OK && first && P.run.every_s > 0)
        s = fsdp_clock_create(e, net, &(fsdp_clock_opts){ P.run.every_s, P.run.keep, P.run.folder, P.run.name,
                                                          ctl->world - fsdp_hosts_others(&P.hosts, ctl->rank) }, &P.clock);
    if (s == FSDP_OK && first && !fsdp_engine_mem(e)->device) {
        fsdp_memplan_predict(e, net, P.fixed_bytes, P.run.weights_file != NULL, &P.predicted);
        P.predicted.snapshot = fsdp_clock_snapshot_bytes(P.clock);
        P.predicted.peak += P.predicted.snapshot;
        P.predicted.pss += P.predicted.snapshot;
    }
    if (s == FSDP_OK && first && ctl->rank == 0) print_startup_notes(e);
    if (s == FSDP_OK && first && P.run.point.base)
        s = fsdp_ckpt_read(e, net, P.run.point.base, 0, 0, P.run.point.world);
    else if (s == FSDP_OK && first && P.run.resume && !P.run.resume_auto)
        s = fsdp_ckpt_read(e, net, P.run.weights_file, P.agreement.size, P.agreement.hash, 0);
    if (first) P.setup_cpu_us = cpu_us();
    return to_dn(s);
}
static int h_bn_sync(void *c, network *net, int layer, dn_bn_what what, float *x, int channels, int count)
{
    return to_dn(fsdp_on_bn_sync(c, net, layer, what, x, channels, count));
}
static int h_fwd(void *c, network *net, int i, dn_when w) { return to_dn(fsdp_on_forward(c, net, i, w)); }
static int h_bwd(void *c, network *net, int i, dn_when w)
{
    int skip;
    fsdp_status s = fsdp_on_backward(c, net, i, w, &skip);
    return s != FSDP_OK ? to_dn(s) : skip ? DN_SKIP : DN_OK;
}
static int h_update(void *c, network *net, dn_when w, update_args *a)
{
    fsdp_engine *e = c;
    if (w == DN_AFTER || net != fsdp_engine_net(e)) return DN_OK;
    int r = to_dn(fsdp_on_update(e, net, a));
    return r < 0 ? r : DN_SKIP;   /* the engine updated every sharded layer */
}
static int h_step(void *c, network *net, float *loss) { return to_dn(fsdp_on_train_step(c, net, loss)); }
static int h_save_begin(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    const fsdp_ctl *ctl = fsdp_engine_ctl(e);
    if (net == fsdp_engine_net(e)) fsdp_ckpt_clean_tmp(f, ctl->rank, ctl->world);
    return ctl->rank == 0 ? DN_OK : DN_SKIP;
}
static int h_save_layer(void *c, network *net, int i, dn_when w) { return to_dn(fsdp_on_save_layer(c, net, i, w)); }
static int h_save_end(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    fsdp_status s = fsdp_on_save_check(e, net);
    if (s == FSDP_OK && net == fsdp_engine_net(e) && P.run.checkpoint) s = fsdp_ckpt_write(e, net, f);
    fsdp_status done = fsdp_on_save_end(e, net, f);
    if (s == FSDP_OK && done == FSDP_OK && fsdp_engine_ctl(e)->rank == 0) fsdp_stop_note_saved(f);
    return to_dn(s != FSDP_OK ? s : done);
}
static int h_loaded(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    if (fsdp_engine_net(e) && net == fsdp_engine_net(e))
        return to_dn(fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s: loading weights into a network that is "
                               "already sharded is not supported", f));
    fsdp_status s = fsdp_weights_check(net, f);
    if (s == FSDP_OK) s = fsdp_agree_note_weights(&P.agreement, f);
    if (s != FSDP_OK) {
        /* Told to every rank at network_built, which all of them reach. */
        P.agreement.load_error = s;
        return DN_OK;
    }
    free(P.run.weights_file);
    P.run.weights_file = strdup(f);
    return DN_OK;
}

static int h_broadcast_int(void *c, int *value)
{
    return to_dn(fsdp_ctl_broadcast(fsdp_engine_ctl(c), value, sizeof *value, 0));
}
static int h_resized(void *c, network *net) { return to_dn(fsdp_on_network_resized(c, net)); }
/* Rank 0's stats file, once, while the groups still exist. */
static fsdp_status write_stats(const fsdp_engine *e)
{
    if (!P.run.stats_path || fsdp_engine_ctl(e)->rank != 0 || !fsdp_engine_net(e) || P.run.stats_written) return FSDP_OK;
    P.run.stats_written = 1;
    fsdp_stats_sources src = { e, fsdp_engine_bn(e), &P.hosts, &P.predicted, P.peak_pss,
                               { P.setup_cpu_s[0], P.setup_cpu_s[1] }, P.mean_pss, P.predicted_each };
    return fsdp_write_stats(&src, P.run.stats_path);
}
static int h_free(void *c, network *net)
{
    fsdp_engine *e = c;
    fsdp_status s = net == fsdp_engine_net(e) ? fsdp_clock_finish(P.clock) : FSDP_OK;
    if (s == FSDP_OK && net == fsdp_engine_net(e)) s = write_stats(e);
    fsdp_status f = fsdp_on_network_free(e, net);
    return to_dn(s != FSDP_OK ? s : f);
}
static int h_layer_built(void *c, network *net, int i) { return to_dn(fsdp_on_layer_built(c, net, i)); }
static int h_load_layer(void *c, network *net, int i, dn_when w) { return to_dn(fsdp_on_load_layer(c, net, i, w)); }

static void h_finish(void *c, int status)
{
    fsdp_engine *e = c;
    /* rnn train never frees its network: its checkpoint in flight ends
     * here (every rank is here after a run that ended well). */
    fsdp_status s = status == 0 ? fsdp_clock_finish(P.clock) : FSDP_OK;
    if (s == FSDP_OK && status == 0) s = write_stats(e);
    int runtime = dn_status_of(P.first_error) == DN_ERR_RUNTIME;
    /* After an error the other ranks did not see (Darknet's own, a failed
     * save, a runtime error) they may wait in a collective forever, and so
     * may this rank's own teardown (a stream synchronize, NCCL's destroy):
     * stop every rank now.  Only errors every rank agreed on leave in order. */
    if (P.mpi_started && status != 0 && (runtime || !fsdp_stopped_together())) {
        fflush(stdout);
        fflush(stderr);
        fsdp_quiet_failed();
        /* MPI belongs to the main thread; from a loader thread a non-zero
         * exit makes the launcher stop the others. */
        abort_pause();
        if (!pthread_equal(pthread_self(), P.main_thread)) _exit(1);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    fsdp_coll *coll = fsdp_engine_coll(e);
    fsdp_clock_free(P.clock);   /* after an error: its writer is waited for, no manifest written */
    P.clock = NULL;
    P.engine = NULL;   /* the watchdog may describe the teardown's collectives */
    fsdp_engine_free(e);
    fsdp_hosts_free(&P.hosts);
    free(P.run.weights_file);
    free(P.run.stats_path);
    free(P.predicted_each);
    free(P.run.backup);
    free(P.run.folder);
    free(P.run.name);
    free(P.run.point.base);
    fsdp_agree_free(&P.agreement);
    fsdp_watch_enter("MPI_Finalize", NULL);   /* every rank must reach it */
    if (coll != P.host_coll) fsdp_coll_free(coll);
    fsdp_coll_free(P.host_coll);
    fsdp_ctl_free(ctl);
    if (P.mpi_started) MPI_Finalize();
    fsdp_watch_leave();
    fsdp_watch_stop();
    if (s != FSDP_OK) exit(1);
}

/* Launched by mpirun, srun or another PMI launcher? Otherwise the world is
 * one process and MPI is not needed. */
static int under_launcher(void)
{
    const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                           "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* MPI for this rank, and its crash report naming the rank. */
static fsdp_status start_mpi(int *argc, char **argv)
{
    int provided, world_rank = 0;
    if (MPI_Init_thread(argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return fsdp_fail(FSDP_ERR_COMM, "MPI_Init failed");
    P.mpi_started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    fsdp_stop_install_crash(world_rank);
    return FSDP_OK;
}

/* -fsdp-plan N CFG -fsdp-link probe: the plan's machines and link are the
 * ranks' own, measured over MPI (fsdp_linkplan.h); rank 0 prints the
 * memory tables and the step's plan.  Host memory only. */
static int plan_probed(int *argc, char **argv, const fsdp_flags *flags, dn_hooks *h)
{
    if (!under_launcher()) {
        fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link probe: it measures the link between the ranks it runs on; launch it "
                  "with ranks on each machine (e.g. mpirun -np 4 --map-by node darknet ... -fsdp-plan %s CFG "
                  "-fsdp-link probe), or describe the link: -fsdp-link MACHINESxRANKS,MBIT[,MS]", flags->plan);
        return DN_ERR_CONFIG;
    }
    fsdp_status s = start_mpi(argc, argv);
    if (s != FSDP_OK) return dn_status_of(s);
    fsdp_ctl *ctl = NULL;
    fsdp_coll *coll = NULL;
    const char *cfg = *argc > 1 ? argv[1] : NULL;
    s = fsdp_backend_mpi_create(&ctl, &coll);
    if (s == FSDP_OK) {
        fsdp_status mine = ctl->rank == 0 ? fsdp_planner_run(cfg, flags->plan, flags->budget, h, stdout) : FSDP_OK;
        s = fsdp_ctl_all_ok(ctl, mine, FSDP_ERR_CONFIG, "could not plan the memory");
    }
    if (s == FSDP_OK) s = fsdp_linkplan_probe_run(cfg, flags->budget, h, ctl, coll, stdout);
    fflush(stdout);
    fsdp_coll_free(coll);
    fsdp_ctl_free(ctl);
    MPI_Finalize();
    P.mpi_started = 0;
    return s == FSDP_OK ? DN_DONE : DN_ERR_CONFIG;
}

/* One GPU per rank on a node, by the rank's place on its node.  Ranks that
 * share a GPU (more ranks than GPUs) need -fsdp-backend mpi-staged. */
static int pick_device(const fsdp_hosts *h, int rank)
{
#ifdef GPU
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 0;
    return fsdp_hosts_local_rank(h, rank) % ndev;
#else
    return 0;
#endif
}

/* ---- what the user sees: start-up output, the log, help ----------------- */

/* Rank 0's start-up notes after the engine's own lines: the prediction,
 * the faster mode one key away, the launcher's keepalive. */
static void print_startup_notes(const fsdp_engine *e)
{
    const fsdp_mem_prediction *m = &P.predicted;
    char node_note[64] = "", scratch_note[128] = "";
    if (m->node_shared) snprintf(node_note, sizeof node_note, "node-shared %.1f + ", m->node_shared / 1e6);
    if (m->collective_scratch)
        snprintf(scratch_note, sizeof scratch_note, " + the other ranks' terms %.1f", m->collective_scratch / 1e6);
    if (m->snapshot)
        snprintf(scratch_note + strlen(scratch_note), sizeof scratch_note - strlen(scratch_note),
                 " + checkpoint snapshot %.1f", m->snapshot / 1e6);
    if (m->peak)
        fprintf(stderr, "fsdp: predicted peak memory per rank %.1f MB: fixed %.1f + activations %.1f + the "
                "largest of building %.1f, sharding %.1f, and model state %.1f + %sstep buffers %.1f%s\n",
                m->peak / 1e6, m->fixed / 1e6, m->activations / 1e6, m->build / 1e6, m->setup / 1e6,
                m->model_state / 1e6, node_note, m->step_buffers / 1e6, scratch_note);
    /* RSS counts node memory in every rank that maps it; the machine holds it once. */
    fsdp_node_layout at = fsdp_coll_node_layout(fsdp_engine_coll(e));
    const fsdp_cfg *cfg = fsdp_engine_cfg(e);
    if (m->peak && fsdp_engine_node_on(e))
        fprintf(stderr, "fsdp: the parameters live once per machine in shared memory (shard_node_shared=1%s): "
                "its %d ranks need %.1f MB in all, %.1f MB each (PSS); RSS counts the %.1f MB of it each "
                "rank maps\n", cfg->node_shared_set ? "" : ", the default on one machine", at.ranks,
                m->pss * (double)at.ranks / 1e6, m->pss / 1e6, m->node_shared / 1e6);
    /* Hybrid sharding, where the cfg never chose: fewer bytes between
     * machines, one key away (its sums go machine by machine). */
    if (!cfg->node_shared_set && !fsdp_engine_node_shared_unfit(e) && at.machines > 1)
        fprintf(stderr, "fsdp: the %d ranks run on %d machines of %d: shard_node_shared=1 would keep the "
                "parameters once per machine and send between machines only the sums and updates of each "
                "rank's part (fewer bytes; docs/machines.md); shard_node_shared=0 leaves this note out\n",
                fsdp_engine_ctl(e)->world, at.machines, at.ranks);
    fsdp_hosts_note_keepalive(&P.hosts, P.timeout_s);
}

/* Start-up is over once the network is built: every rank prints again. */
static int h_built_shown(void *c, network *net, const char *cfg)
{
    fsdp_engine *e = c;
    const fsdp_ctl *ctl = fsdp_engine_ctl(e);
    fsdp_quiet_end();
    int first = !fsdp_engine_net(e);
    int r = h_built(c, net, cfg);
    if (r == DN_OK && first && P.run.resume && !P.run.resume_auto && ctl->rank == 0)
        fsdp_report_resume(net, P.run.weights_file, ctl->world);
    if (r == DN_OK && first && P.run.point.base && ctl->rank == 0)
        fprintf(stderr, "fsdp: resumed at step %zu (%zu images seen) from %s.fsdp-{0..%d}-of-%d, written on %d "
                "ranks, resumed on %d\n", get_current_batch(net), *net->seen, P.run.point.base,
                P.run.point.world - 1, P.run.point.world, P.run.point.world, ctl->world);
    /* The first step is timed from here, by the log and the time line
     * alike: from one instant, taken before the log's file is opened. */
    double t0 = fsdp_tl_clock();
    if (r == DN_OK && ctl->rank == 0) r = to_dn(fsdp_log_start(&P.log, fsdp_engine_bytes_moved(e), t0));
    fsdp_tl_next_step(fsdp_engine_timeline(e), t0);
    return r;
}

/* Every rank's predicted peak, each with its own fixed cost (which differs
 * by the transport window it maps), for the stats: a max over the world of
 * arrays that hold each rank's own at its place. */
static fsdp_status note_predictions(fsdp_ctl *ctl)
{
    P.predicted_each = calloc((size_t)ctl->world, sizeof *P.predicted_each);
    if (!P.predicted_each) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    P.predicted_each[ctl->rank] = P.predicted.peak;
    return fsdp_ctl_max_u64(ctl, P.predicted_each, (size_t)ctl->world);
}

/* What the stats report of set-up and memory, at a step's end: every
 * rank's set-up CPU time once (every rank is here), rank 0's PSS. */
static fsdp_status note_step(fsdp_engine *e)
{
    if (fsdp_engine_steps(e) == 1) {
        uint64_t lo, hi;
        FSDP_TRY(fsdp_ctl_min_max_u64(fsdp_engine_ctl(e), P.setup_cpu_us, &lo, &hi));
        P.setup_cpu_s[0] = lo / 1e6;
        P.setup_cpu_s[1] = hi / 1e6;
    }
    if (!P.run.stats_path) return FSDP_OK;
    if (!P.predicted_each) FSDP_TRY(note_predictions(fsdp_engine_ctl(e)));
    /* A page of node memory counts toward each rank that maps it, unevenly:
     * what the prediction's PSS stands for is the machine's, per rank. */
    size_t pss = fsdp_memplan_pss();
    double sum = (double)pss;
    FSDP_TRY(fsdp_ctl_sum_f64(fsdp_engine_ctl(e), &sum, 1));
    size_t mean = (size_t)(sum / fsdp_engine_ctl(e)->world);
    if (mean > P.mean_pss) P.mean_pss = mean;
    if (fsdp_engine_ctl(e)->rank == 0 && pss > P.peak_pss) P.peak_pss = pss;
    return FSDP_OK;
}

static int h_step_logged(void *c, network *net, float *loss)
{
    fsdp_engine *e = c;
    int r = h_step(c, net, loss);
    if (r == DN_OK && net == fsdp_engine_net(e)) r = to_dn(note_step(e));
    if (r == DN_OK && net == fsdp_engine_net(e) && P.clock) r = to_dn(fsdp_clock_step(P.clock, net));
    if (r == DN_OK && net == fsdp_engine_net(e) && fsdp_engine_ctl(e)->rank == 0) {
        fsdp_stop_note_step(get_current_batch(net), (size_t)net->max_batches);
        r = to_dn(fsdp_log_step(&P.log, net, *loss, fsdp_engine_bytes_moved(e), fsdp_engine_timeline(e)));
    }
    return r;
}

static void h_finish_shown(void *c, int status)
{
    if (status == 0) fsdp_quiet_ok();
    fsdp_log_close(&P.log);
    h_finish(c, status);
}

static void h_help(void *c) { fsdp_help_print(stdout); }

/* Fail now, not after hours of training, if FILE cannot be written. */
static fsdp_status writable(const char *flag, const char *file)
{
    char *dir = strdup(file), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    fsdp_status s = access(d, W_OK) == 0 ? FSDP_OK : fsdp_fail(FSDP_ERR_CONFIG, "%s %s: cannot write in %s", flag, file, d);
    free(dir);
    return s;
}

/* -fsdp-checkpoint-every, -fsdp-checkpoint-keep, -fsdp-keep-batch: their
 * values, and the flags they need beside them. */
static fsdp_status long_run_flags(const fsdp_flags *f, int argc, char **argv)
{
    char *end = NULL;
    P.run.keep = 2;
    if (f->every) {
        double m = strtod(f->every, &end);
        if (end == f->every || *end || !(m > 0) || m > 1e6)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-every %s: expected minutes, a number above 0 "
                             "(0.5: every 30 s)", f->every);
        P.run.every_s = 60 * m;
    }
    if (f->keep) {
        long k = strtol(f->keep, &end, 10);
        if (end == f->keep || *end || k < 1 || k > 1000000)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-keep %s: expected a whole number of checkpoints, "
                             "1 or more", f->keep);
        if (!f->every)
            return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-checkpoint-keep %s: it says how many checkpoints of "
                             "-fsdp-checkpoint-every to keep; give that too", f->keep);
        P.run.keep = (int)k;
    }
    if (f->log_events && !f->log)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-log-events: it adds the step's events to the lines of -fsdp-log; "
                         "give -fsdp-log FILE too");
    if (f->keep_batch && !f->resume)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: it keeps a resumed checkpoint's global batch; give "
                         "-fsdp-resume (or -fsdp-resume auto) with it");
    /* rnn train splits its batch into streams of time steps, not micro-batches. */
    for (int i = 1; f->keep_batch && i + 1 < argc; ++i)
        if (!strcmp(argv[i], "rnn") && !strcmp(argv[i + 1], "train"))
            return fsdp_fail(FSDP_ERR_UNSUPPORTED, "-fsdp-keep-batch: rnn train's batch is its streams, which "
                             "subdivisions do not split; resume on another world with the cfg's batch scaled");
    return FSDP_OK;
}

/* Darknet's -seed (darknet/src/dn_plugin.c), taken from argv before the plugin starts. */
extern int dn_seeded(void) __attribute__((weak));
extern unsigned long dn_seed(void) __attribute__((weak));

/* The flags that shape training, compared across ranks over ctl (fsdp_agree.h). */
static fsdp_status agree_flags(fsdp_status local, fsdp_ctl *ctl, const fsdp_flags *f, int argc, char **argv)
{
    int clear = 0;
    for (int i = 1; i < argc; ++i) clear |= !strcmp(argv[i], "-clear");
    int seeded = dn_seeded && dn_seeded();
    unsigned long seed = seeded && dn_seed ? dn_seed() : 0;
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%lu", seed);
    uint64_t timeout_bits;
    memcpy(&timeout_bits, &P.timeout_s, sizeof timeout_bits);
    uint64_t every_bits;
    memcpy(&every_bits, &P.run.every_s, sizeof every_bits);
    const char *backend = f->backend ? f->backend : "(default)";
    char data[512];
    uint64_t data_hash = 0;
    if (local == FSDP_OK) local = fsdp_agree_data(argc, argv, &data_hash, data, sizeof data);
    else snprintf(data, sizeof data, "none");
    const fsdp_agree_flag list[] = {
        { "-seed", seeded ? (uint64_t)seed + 1 : 0, seeded ? seed_text : "not given" },
        { "-clear", (uint64_t)clear, clear ? "given" : "not given" },
        { "-fsdp-checkpoint", (uint64_t)f->checkpoint, f->checkpoint ? "given" : "not given" },
        { "-fsdp-resume", (uint64_t)(f->resume + f->resume_auto), f->resume_auto ? "auto" : f->resume ? "given" : "not given" },
        { "-fsdp-checkpoint-every", every_bits, f->every ? f->every : "not given" },
        { "-fsdp-checkpoint-keep", (uint64_t)P.run.keep, f->keep ? f->keep : "(default)" },
        { "-fsdp-keep-batch", (uint64_t)f->keep_batch, f->keep_batch ? "given" : "not given" },
        { "-fsdp-backend", fsdp_hash(backend, strlen(backend)), backend },
        { "-fsdp-timeout", timeout_bits, f->timeout ? f->timeout : "(default)" },
        { "-fsdp-stats", (uint64_t)!!f->stats, f->stats ? "given" : "not given" },
        { "-fsdp-log", (uint64_t)!!f->log, f->log ? "given" : "not given" },
        { "the data file, its train list or the -file text", data_hash, data },
    };
    return fsdp_agree_start(ctl, local, list, (int)(sizeof list / sizeof list[0]));
}

/* The watchdog's words for a collective in flight (fsdp_watch.h). */
static void describe_wait(void *c, const void *buf, char *out, size_t n)
{
    /* The engine is gone during the teardown's collectives (h_finish). */
    if (P.engine) fsdp_engine_describe_wait(P.engine, buf, out, n);
    else snprintf(out, n, "(at shutdown)");
}

static fsdp_status backend_known(const char *want)
{
    if (want && strcmp(want, "mpi") && strcmp(want, "mpi-staged") && strcmp(want, "nccl"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: expected mpi, mpi-staged or nccl", want);
#ifndef GPU
    if (want && strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: this plugin was built without GPU support", want);
#endif
    return FSDP_OK;
}

/* Host control and host memory's collectives, whatever -fsdp-backend asks
 * for (device collectives come later, once the network is built:
 * device_backend). */
static fsdp_status make_backend(fsdp_ctl **ctl, fsdp_coll **coll)
{
    if (!P.mpi_started) return fsdp_backend_self_create(ctl, coll);
    return fsdp_backend_mpi_create(ctl, coll);
}

int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *h)
{
    dn_abi mine = DN_ABI_CURRENT;
    if (!dn_abi_equal(abi, &mine)) {
        /* Another API version's dn_abi may end before hooks_size. */
        if (abi->api_version != mine.api_version)
            fsdp_fail(FSDP_ERR_ABI, "libdarknet_fsdp.so was built for a different Darknet (plugin API %d/%d: "
                      "plugin/darknet); rebuild both with tools/setup", mine.api_version, abi->api_version);
        else
            fsdp_fail(FSDP_ERR_ABI, "libdarknet_fsdp.so was built for a different Darknet (plugin API %d/%d, "
                      "sizeof(layer) %zu/%zu, sizeof(network) %zu/%zu, sizeof(load_args) %zu/%zu, "
                      "sizeof(dn_hooks) %zu/%zu, GPU %d/%d: plugin/darknet); rebuild both with tools/setup",
                      mine.api_version, abi->api_version, mine.layer_size, abi->layer_size,
                      mine.network_size, abi->network_size, mine.load_args_size, abi->load_args_size,
                      mine.hooks_size, abi->hooks_size, mine.gpu, abi->gpu);
        return dn_status_of(FSDP_ERR_ABI);
    }
    /* Buffers of 4 MB and more mapped and unmapped on their own: glibc
     * would otherwise raise its threshold after the first such free and
     * keep later ones in the heap, resident after they are freed, so a
     * rank's peak would depend on the order of frees, not on what it holds
     * (the prediction, fsdp_memplan.h).  Smaller ones (a loader's images)
     * stay in the heap. */
    mallopt(M_MMAP_THRESHOLD, FSDP_MMAP_THRESHOLD);
#ifdef GPU
    /* Frozen layers wrap Darknet's device functions too (fsdp_frozen.h), and
     * recomputed groups run their device forward again (fsdp_recompute.h). */
    fsdp_frozen_use_device(&fsdp_frozen_gpu);
    fsdp_recompute_use_device(&fsdp_recompute_gpu);
#endif
    fsdp_flags flags;
    fsdp_status s = fsdp_flags_take(argc, argv, &flags);
    if (s == FSDP_OK && flags.help) {
        /* Under a launcher, once: from the first rank, before MPI starts. */
        const char *rank = getenv("OMPI_COMM_WORLD_RANK");
        if (!rank) rank = getenv("PMIX_RANK");
        if (!rank) rank = getenv("PMI_RANK");
        if (!rank || atoi(rank) == 0) fsdp_help_print(stdout);
        return DN_DONE;
    }
    if (s == FSDP_OK && flags.plan && flags.link && !strcmp(flags.link, "probe")) {
        gpu_index = -1;
        return plan_probed(argc, argv, &flags, h);
    }
    if (s == FSDP_OK && flags.plan) {
        /* A prediction of host memory, in this one process: no MPI, no GPU. */
        gpu_index = -1;
        s = fsdp_planner_run(*argc > 1 ? argv[1] : NULL, flags.plan, flags.budget, h, stdout);
        if (s == FSDP_OK && flags.link) s = fsdp_linkplan_run(argv[1], flags.link, flags.budget, h, stdout);
        return s == FSDP_OK ? DN_DONE : DN_ERR_CONFIG;
    }
    if (s == FSDP_OK && flags.link) {
        fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link %s: it describes the machines -fsdp-plan plans a step for; give "
                  "-fsdp-plan N CFG with it", flags.link);
        return DN_ERR_CONFIG;
    }
    if (s == FSDP_OK && flags.budget) {
        fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-budget %s: it bounds the settings -fsdp-plan prints; give -fsdp-plan N CFG "
                  "with it", flags.budget);
        return DN_ERR_CONFIG;
    }
    const char *backend = flags.backend;

    if (under_launcher()) {
        fsdp_status started = start_mpi(argc, argv);
        if (started != FSDP_OK) return dn_status_of(started);
    }
    P.main_thread = pthread_self();
    /* Each rank checks its own flags; then all agree over the host backend,
     * before any other collective, so that one rank's refusal stops every
     * rank.  A refusing rank makes the backend too: the agreement needs it.
     * A rank that cannot make it stays out and aborts the job below. */
    if (s == FSDP_OK) s = backend_known(backend);
    if (s == FSDP_OK && flags.timeout) s = fsdp_watch_parse(flags.timeout, &P.timeout_s);
    if (s == FSDP_OK && flags.stats) s = writable("-fsdp-stats", flags.stats);
    if (s == FSDP_OK && flags.log) s = writable("-fsdp-log", flags.log);
    if (s == FSDP_OK) s = long_run_flags(&flags, *argc, argv);
    fsdp_ctl *ctl = NULL;
    fsdp_status made = make_backend(&ctl, &P.host_coll);
    if (made == FSDP_OK) s = agree_flags(s, ctl, &flags, *argc, argv);
    else if (s == FSDP_OK) s = made;
    if (s == FSDP_OK && ctl->world > 1 && P.timeout_s > 0) s = fsdp_watch_wrap(&ctl, &P.host_coll);
    if (s == FSDP_OK) s = fsdp_check_command(*argc, argv, ctl->world);
    if (s == FSDP_OK) s = fsdp_engine_create(ctl, P.host_coll, &P.engine);
    if (s == FSDP_OK) s = fsdp_hosts_find(ctl, &P.hosts);
    if (s == FSDP_OK) s = fsdp_memplan_warm_up(P.host_coll);
    P.fixed_bytes = fsdp_memplan_fixed();   /* before Darknet builds anything */
    /* A staged build only where network_built follows the build
     * (fsdp_stage.h); the activations' buffers for training commands only:
     * some others read a layer's output after the forward pass
     * (fsdp_acts.h). */
    int trains = fsdp_command_trains_exactly(*argc, argv);
    if (s == FSDP_OK)
        fsdp_engine_set_options(P.engine, &(fsdp_engine_options){ .staged = ctl->world > 1 && trains,
                                                                  .acts = trains && fsdp_acts_wanted(),
                                                                  .recompute = trains });
    P.run.checkpoint = flags.checkpoint;
    P.run.resume = flags.resume;
    P.run.resume_auto = flags.resume_auto;
    P.run.keep_batch = flags.keep_batch;
    if (s == FSDP_OK && (flags.every || flags.resume_auto) && !(P.run.backup = fsdp_resume_backup(*argc, argv)))
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK && flags.stats) P.run.stats_path = strdup(flags.stats);
    if (s == FSDP_OK && ctl->rank == 0) s = fsdp_log_open(&P.log, flags.log, ctl->world);
    if (s == FSDP_OK && ctl->rank == 0 && flags.log_events) s = fsdp_engine_log_events(P.engine, 4096);
    if (s == FSDP_OK && ctl->rank == 0 && P.mpi_started) fsdp_stop_install();
    if (s == FSDP_OK && ctl->world > 1) s = fsdp_watch_start(P.timeout_s, ctl->rank, describe_wait, NULL);
    if (s != FSDP_OK) {
        /* A refusal the ranks agreed on ends MPI in order; any later one
         * (a rank alone) must not leave the others waiting. */
        if (P.mpi_started && !fsdp_stopped_together()) {
            abort_pause();
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Every rank is here (the agreement's refusal): freeing the
         * backend's communicator and windows is collective. */
        fsdp_coll_free(P.host_coll);
        fsdp_ctl_free(ctl);
        if (P.mpi_started) MPI_Finalize();
        return dn_status_of(s);
    }
    P.backend_flag = backend;
    h->device = pick_device(&P.hosts, ctl->rank);
    if (ctl->rank != 0 && !getenv("FSDP_ALL_RANKS_PRINT")) {
        /* Only rank 0 prints Darknet's progress; errors still go to stderr. */
        if (!freopen("/dev/null", "w", stdout)) return DN_ERR_RUNTIME;
    }
    fsdp_quiet_begin(ctl->rank);
    h->ctx = P.engine;
    h->rank = ctl->rank;
    h->world = ctl->world;
    h->cfg_option = h_cfg;
    h->network_built = h_built_shown;
    h->forward_layer = h_fwd;
    h->backward_layer = h_bwd;
    h->update = h_update;
    h->train_step = h_step_logged;
    h->weights_loaded = h_loaded;
    h->save_begin = h_save_begin;
    h->save_layer = h_save_layer;
    h->save_end = h_save_end;
    h->network_free = h_free;
    h->finish = h_finish_shown;
    h->owns_gradients = 1;   /* flats hold every gradient (fsdp_flat.h) */
    h->help = h_help;
    h->broadcast_int = h_broadcast_int;
    h->network_resized = h_resized;
    h->layer_built = h_layer_built;
    h->load_layer = h_load_layer;
    h->bn_sync = ctl->world > 1 ? h_bn_sync : NULL;   /* a world of one has nothing to combine */
    P.hooks = h;
    return DN_OK;
}
