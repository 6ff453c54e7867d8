/* libdarknet_fsdp.so's entry point: flags, MPI, the backend, and the hook
 * table that hands Darknet's events to the engine. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "darknet_plugin.h"
#include "fsdp_backend.h"
#include "fsdp_bn.h"
#include "fsdp_ckpt.h"
#include "fsdp_commands.h"
#include "fsdp_deltas.h"
#include "fsdp_engine.h"
#include "fsdp_flags.h"
#include "fsdp_log.h"
#include "fsdp_quiet.h"
#include "fsdp_weights.h"
#ifdef GPU
#include <cuda_runtime.h>
#endif

static fsdp_engine engine;
static fsdp_status first_error = FSDP_OK;
static int mpi_started;
static const char *backend_flag;   /* -fsdp-backend, NULL: the default */
static fsdp_log train_log;         /* rank 0: -fsdp-log and the progress lines */
static dn_hooks *hook_table;       /* Darknet's, to drop bn_sync under sync_bn=0 */

/* Darknet only needs to know whether to stop; the engine has printed why. */
static int to_dn(fsdp_status s)
{
    if (s == FSDP_OK) return DN_OK;
    if (first_error == FSDP_OK) first_error = s;
    return s == FSDP_ERR_COMM || s == FSDP_ERR_NOMEM || s == FSDP_ERR_IO || s == FSDP_ERR_CUDA
               ? DN_ERR_RUNTIME : DN_ERR_CONFIG;
}

static int h_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    return fsdp_on_cfg_option(c, cfg, line, layer, key, val);
}
/* GPU runs move parameters in device memory: NCCL, or MPI through host
 * staging buffers when asked (several ranks may then share one GPU). */
static fsdp_status device_backend(fsdp_engine *e, network *net)
{
#ifdef GPU
    if (net->gpu_index < 0 || e->be->world == 1 || e->dbe != e->be) return FSDP_OK;
    /* Each device backend runs its host side on its own MPI communicator. */
    fsdp_backend *host = NULL;
    FSDP_TRY(fsdp_backend_mpi_create(&host));
    if (backend_flag && !strcmp(backend_flag, "mpi")) return fsdp_backend_staged_create(host, &e->dbe);
    return fsdp_backend_nccl_create(host, net->gpu_index, &e->dbe);
#else
    return FSDP_OK;
#endif
}

static int h_built(void *c, network *net, const char *cfg)
{
    fsdp_engine *e = c;
    int first = !e->net;
    fsdp_status s = first ? device_backend(e, net) : FSDP_OK;
    /* Without the hook GPU builds keep cuDNN's batch norm (darknet_plugin.h). */
    if (first && !e->cfg.sync_bn) hook_table->bn_sync = NULL;
    if (s == FSDP_OK) s = fsdp_on_network_built(e, net);
    if (s == FSDP_OK && first && e->resume) s = fsdp_ckpt_read(e, net);
    return to_dn(s);
}
static int h_bn_sync(void *c, network *net, int layer, dn_bn_what what, float *x, int channels, int count)
{
    return to_dn(fsdp_bn_sync(c, net, layer, what, x, channels, count));
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
    if (w == DN_AFTER || net != e->net) return DN_OK;
    int r = to_dn(fsdp_on_update(e, net, a));
    return r < 0 ? r : DN_SKIP;   /* the engine updated every sharded layer */
}
static int h_step(void *c, network *net, float *loss) { return to_dn(fsdp_on_train_step(c, net, loss)); }
static int h_save_begin(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    return e->be->rank == 0 ? DN_OK : DN_SKIP;
}
static int h_save_layer(void *c, network *net, int i, dn_when w) { return to_dn(fsdp_on_save_layer(c, net, i, w)); }
static int h_save_end(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    fsdp_status s = fsdp_bn_check_rolling(e, net);
    if (s == FSDP_OK && net == e->net && e->checkpoint) s = fsdp_ckpt_write(e, net, f);
    fsdp_status done = fsdp_on_save_end(e, net, f);
    return to_dn(s != FSDP_OK ? s : done);
}
static int h_loaded(void *c, network *net, const char *f)
{
    fsdp_engine *e = c;
    if (e->net && net == e->net)
        return to_dn(fsdp_fail(FSDP_ERR_UNSUPPORTED, "%s: loading weights into a network that is "
                               "already sharded is not supported", f));
    fsdp_status s = fsdp_weights_check(net, f);
    if (s != FSDP_OK) return to_dn(s);
    free(e->weights_file);
    e->weights_file = strdup(f);
    return DN_OK;
}

static int h_broadcast_int(void *c, int *value)
{
    fsdp_engine *e = c;
    return to_dn(e->be->broadcast(e->be, value, sizeof *value, 0));
}
/* resize_network() reallocated every output and delta, the ones the engine
 * had dropped included (realloc of NULL): drop them again.  Weights and the
 * engine's gathered buffers are untouched by a resize. */
static int h_resized(void *c, network *net)
{
    fsdp_engine *e = c;
    if (e->net == net && e->plan.need_bwd) fsdp_deltas_drop_unneeded(&e->plan, net);
    return DN_OK;
}
static int h_free(void *c, network *net) { return to_dn(fsdp_on_network_free(c, net)); }

static void h_finish(void *c, int status)
{
    fsdp_engine *e = c;
    fsdp_status s = FSDP_OK;
    if (status == 0 && e->stats_path && e->be && e->be->rank == 0 && e->net && !e->stats_written)
        s = fsdp_write_stats(e, e->stats_path);
    int runtime = first_error == FSDP_ERR_COMM || first_error == FSDP_ERR_NOMEM ||
                  first_error == FSDP_ERR_IO || first_error == FSDP_ERR_CUDA;
    /* After a runtime error other ranks may wait in a collective forever,
     * and so may this rank's own teardown (a stream synchronize, NCCL's
     * destroy): abort before it. */
    if (mpi_started && runtime && status != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    fsdp_backend *be = e->be, *dbe = e->dbe;
    fsdp_engine_free(e);
    if (dbe && dbe != be) dbe->destroy(dbe);
    if (be) be->destroy(be);
    if (mpi_started) MPI_Finalize();
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

/* One GPU per rank on a node, by the rank's place on its node.  Ranks that
 * share a GPU (more ranks than GPUs) need -fsdp-backend mpi. */
static int pick_device(const fsdp_backend *be)
{
#ifdef GPU
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 0;
    int local = 0;
    if (mpi_started) {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, be->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &local);
            MPI_Comm_free(&node);
        }
    }
    return local % ndev;
#else
    (void)be;
    return 0;
#endif
}

/* ---- what the user sees: start-up output, the log, help ----------------- */

/* Every byte of collectives counted so far (docs/DESIGN.md, "Log file"). */
static uint64_t bytes_moved(const fsdp_engine *e)
{
    return e->bytes_ag + e->bytes_rs + e->bytes_ar + e->bytes_bn;
}

/* Start-up is over once the network is built: every rank prints again. */
static int h_built_shown(void *c, network *net, const char *cfg)
{
    fsdp_engine *e = c;
    fsdp_quiet_end();
    int first = !e->net;
    int r = h_built(c, net, cfg);
    if (r == DN_OK && first && e->resume && e->be->rank == 0) fsdp_report_resume(net, e->weights_file, e->be->world);
    if (r == DN_OK && e->be->rank == 0) r = to_dn(fsdp_log_start(&train_log, bytes_moved(e)));
    return r;
}

static int h_step_logged(void *c, network *net, float *loss)
{
    fsdp_engine *e = c;
    int r = h_step(c, net, loss);
    if (r == DN_OK && net == e->net && e->be->rank == 0)
        r = to_dn(fsdp_log_step(&train_log, net, *loss, bytes_moved(e)));
    return r;
}

static void h_finish_shown(void *c, int status)
{
    if (status == 0) fsdp_quiet_ok();
    fsdp_log_close(&train_log);
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

static fsdp_status make_backend(const char *want, fsdp_backend **be)
{
    if (want && strcmp(want, "mpi") && strcmp(want, "nccl"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: expected mpi or nccl", want);
#ifndef GPU
    if (want && !strcmp(want, "nccl"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend nccl: this plugin was built without GPU support");
#endif
    if (!mpi_started) return fsdp_backend_self_create(be);
    return fsdp_backend_mpi_create(be);
}

int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *h)
{
    dn_abi mine = DN_ABI_CURRENT;
    if (!dn_abi_equal(abi, &mine)) {
        fsdp_fail(FSDP_ERR_ABI, "libdarknet_fsdp.so was built for a different Darknet (plugin API %d/%d, "
                  "sizeof(layer) %zu/%zu, sizeof(network) %zu/%zu, GPU %d/%d: plugin/darknet); "
                  "rebuild both with tools/setup", mine.api_version, abi->api_version, mine.layer_size,
                  abi->layer_size, mine.network_size, abi->network_size, mine.gpu, abi->gpu);
        return DN_ERR_ABI;
    }
    fsdp_flags flags;
    if (fsdp_flags_take(argc, argv, &flags) != FSDP_OK) return DN_ERR_CONFIG;
    if (flags.help) {
        /* Under a launcher, once: from the first rank, before MPI starts. */
        const char *rank = getenv("OMPI_COMM_WORLD_RANK");
        if (!rank) rank = getenv("PMIX_RANK");
        if (!rank) rank = getenv("PMI_RANK");
        if (!rank || atoi(rank) == 0) fsdp_help_print(stdout);
        return DN_DONE;
    }
    const char *backend = flags.backend;

    if (under_launcher()) {
        int provided;
        if (MPI_Init_thread(argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fsdp_fail(FSDP_ERR_COMM, "MPI_Init failed");
            return DN_ERR_RUNTIME;
        }
        mpi_started = 1;
    }
    fsdp_backend *be = NULL;
    fsdp_status s = make_backend(backend, &be);
    if (s == FSDP_OK) s = fsdp_check_command(*argc, argv, be->world);
    if (s == FSDP_OK) s = fsdp_engine_init(&engine, be);
    engine.checkpoint = flags.checkpoint;
    engine.resume = flags.resume;
    if (s == FSDP_OK && flags.stats) {
        engine.stats_path = strdup(flags.stats);
        s = writable("-fsdp-stats", flags.stats);
    }
    if (s == FSDP_OK && flags.log) s = writable("-fsdp-log", flags.log);
    if (s == FSDP_OK && be->rank == 0) s = fsdp_log_open(&train_log, flags.log, be->world);
    if (s != FSDP_OK) {
        if (mpi_started) MPI_Finalize();
        return s == FSDP_ERR_CONFIG ? DN_ERR_CONFIG : DN_ERR_RUNTIME;
    }
    backend_flag = backend;
    h->device = pick_device(be);
    if (be->rank != 0 && !getenv("FSDP_ALL_RANKS_PRINT")) {
        /* Only rank 0 prints Darknet's progress; errors still go to stderr. */
        if (!freopen("/dev/null", "w", stdout)) return DN_ERR_RUNTIME;
    }
    fsdp_quiet_begin(be->rank);
    h->ctx = &engine;
    h->rank = be->rank;
    h->world = be->world;
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
    h->help = h_help;
    h->broadcast_int = h_broadcast_int;
    h->network_resized = h_resized;
    h->bn_sync = be->world > 1 ? h_bn_sync : NULL;   /* a world of one has nothing to combine */
    hook_table = h;
    return DN_OK;
}
