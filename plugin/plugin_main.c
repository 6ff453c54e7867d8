/* libdarknet_fsdp.so's entry point: the ABI check, the flags, the mode
 * (help, plan or train) and Darknet's hook table, whose adapters hand each
 * event to the session (fsdp_session.h) or its engine (fsdp_engine.h). */
#include <malloc.h>
#include <stdlib.h>
#include "darknet_plugin.h"
#include "fsdp_env.h"
#include "fsdp_frozen.h"
#include "fsdp_plan_mode.h"
#include "fsdp_recompute.h"
#include "fsdp_session.h"

#define FSDP_MMAP_THRESHOLD (4 << 20)

/* The one mapping of a status to Darknet's: the user's to fix (a cfg, a
 * flag, a file, what the plugin does not support), a build mismatch, or a
 * failure of the run itself. */
static dn_status dn_status_of(fsdp_status s)
{
    if (s == FSDP_OK) return DN_OK;
    if (s == FSDP_ERR_ABI) return DN_ERR_ABI;
    return fsdp_status_runtime(s) ? DN_ERR_RUNTIME : DN_ERR_CONFIG;
}

/* Darknet only needs to know whether to stop (what failed has said why);
 * the session keeps the first error, whose kind decides how the run ends. */
static int to_dn(void *ses, fsdp_status s)
{
    return dn_status_of(fsdp_session_failed(ses, s));
}

static fsdp_engine *eng(void *ses) { return fsdp_session_engine(ses); }

/* The adapters: Darknet's hooks, each onto one call of the session or its engine. */
static int h_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    return fsdp_session_cfg_option(c, cfg, line, layer, sec, key, val);   /* 1: the key is the plugin's */
}
static int h_built(void *c, network *net, const char *cfg) { return to_dn(c, fsdp_session_start(c, net, cfg)); }
static int h_layer_built(void *c, network *net, int i) { return to_dn(c, fsdp_on_layer_built(eng(c), net, i)); }
static int h_loaded(void *c, network *net, const char *f) { return to_dn(c, fsdp_session_weights_loaded(c, net, f)); }
static int h_load_layer(void *c, network *net, int i, dn_when w)
{
    return to_dn(c, fsdp_on_load_layer(eng(c), net, i, w));
}
static int h_fwd(void *c, network *net, int i, dn_when w) { return to_dn(c, fsdp_session_forward(c, net, i, w)); }
static int h_bwd(void *c, network *net, int i, dn_when w)
{
    int skip;
    fsdp_status s = fsdp_session_backward(c, net, i, w, &skip);
    return s != FSDP_OK ? to_dn(c, s) : skip ? DN_SKIP : DN_OK;
}
static int h_bn_sync(void *c, network *net, int layer, dn_bn_what what, float *x, int channels, int count)
{
    return to_dn(c, fsdp_on_bn_sync(eng(c), net, layer, what, x, channels, count));
}
static int h_update(void *c, network *net, dn_when w, update_args *a)
{
    if (w == DN_AFTER || net != fsdp_engine_net(eng(c))) return DN_OK;
    int r = to_dn(c, fsdp_on_update(eng(c), net, a));
    return r < 0 ? r : DN_SKIP;   /* the engine updated every sharded layer */
}
static int h_step(void *c, network *net, float *loss) { return to_dn(c, fsdp_session_step(c, net, loss)); }
static int h_save_begin(void *c, network *net, const char *f)
{
    int writes = 0;
    int r = to_dn(c, fsdp_session_save_begin(c, net, f, &writes));
    return r < 0 || writes ? r : DN_SKIP;
}
static int h_save_layer(void *c, network *net, int i, dn_when w)
{
    return to_dn(c, fsdp_on_save_layer(eng(c), net, i, w));
}
static int h_save_end(void *c, network *net, const char *f) { return to_dn(c, fsdp_session_save_end(c, net, f)); }
static int h_broadcast_int(void *c, int *value)
{
    return to_dn(c, fsdp_ctl_broadcast(fsdp_engine_ctl(eng(c)), value, sizeof *value, 0));
}
static int h_resized(void *c, network *net) { return to_dn(c, fsdp_on_network_resized(eng(c), net)); }
static int h_free(void *c, network *net) { return to_dn(c, fsdp_session_network_free(c, net)); }
static void h_finish(void *c, int status)
{
    fsdp_status s = fsdp_session_finish(c, status);
    fsdp_session_free(c);
    if (s != FSDP_OK) exit(1);
}
static void h_help(void *c) { fsdp_help_print(stdout); }
static int h_train_inputs(void *c, network *net, load_args *a)
{
    int serve = 0;
    fsdp_status s = fsdp_session_train_inputs(c, net, a, &serve);
    return s != FSDP_OK ? to_dn(c, s) : serve ? DN_SKIP : DN_OK;
}
static int h_sample_input(void *c, const char *path, int flip, float *row, int cols)
{
    return to_dn(c, fsdp_session_sample_input(c, path, flip, row, cols));
}
static int h_forward_start(void *c, network *net)
{
    int start = 0;
    fsdp_status s = fsdp_session_forward_start(c, net, &start);
    return s != FSDP_OK ? to_dn(c, s) : start;
}

static const dn_hooks adapters = {
    .cfg_option = h_cfg,
    .network_built = h_built,
    .layer_built = h_layer_built,
    .weights_loaded = h_loaded,
    .load_layer = h_load_layer,
    .forward_layer = h_fwd,
    .backward_layer = h_bwd,
    .bn_sync = h_bn_sync,
    .update = h_update,
    .train_step = h_step,
    .save_begin = h_save_begin,
    .save_layer = h_save_layer,
    .save_end = h_save_end,
    .broadcast_int = h_broadcast_int,
    .network_resized = h_resized,
    .network_free = h_free,
    .finish = h_finish,
    .help = h_help,
    .train_inputs = h_train_inputs,
    .sample_input = h_sample_input,
    .forward_start = h_forward_start,
    .owns_gradients = 1,   /* flats hold every gradient (fsdp_flat.h) */
};

/* Another API version's dn_abi may end before hooks_size. */
static fsdp_status check_abi(const dn_abi *abi)
{
    dn_abi mine = DN_ABI_CURRENT;
    if (dn_abi_equal(abi, &mine)) return FSDP_OK;
    if (abi->api_version != mine.api_version)
        return fsdp_fail(FSDP_ERR_ABI, "libdarknet_fsdp.so was built for a different Darknet (plugin API %d/%d: "
                         "plugin/darknet); rebuild both with tools/setup", mine.api_version, abi->api_version);
    return fsdp_fail(FSDP_ERR_ABI, "libdarknet_fsdp.so was built for a different Darknet (plugin API %d/%d, "
                     "sizeof(layer) %zu/%zu, sizeof(network) %zu/%zu, sizeof(load_args) %zu/%zu, "
                     "sizeof(dn_hooks) %zu/%zu, GPU %d/%d: plugin/darknet); rebuild both with tools/setup",
                     mine.api_version, abi->api_version, mine.layer_size, abi->layer_size,
                     mine.network_size, abi->network_size, mine.load_args_size, abi->load_args_size,
                     mine.hooks_size, abi->hooks_size, mine.gpu, abi->gpu);
}

/* What holds for the whole process, whatever the mode. */
static void process_setup(void)
{
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
}

/* -fsdp-help: under a launcher, once, from the first rank, before MPI starts. */
static int help_mode(const fsdp_flags *flags)
{
    const char *rank = fsdp_env("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = fsdp_env("PMIX_RANK");
    if (!rank) rank = fsdp_env("PMI_RANK");
    if (!rank || atoi(rank) == 0) (flags->help_md ? fsdp_help_markdown : fsdp_help_print)(stdout);
    return DN_DONE;
}

/* Training: the session, and the hooks onto it. */
static int train_mode(const fsdp_flags *flags, fsdp_status parsed, int *argc, char **argv, dn_hooks *h)
{
    fsdp_session *ses = NULL;
    fsdp_status s = fsdp_session_create(flags, parsed, argc, argv, h, &ses);
    if (s != FSDP_OK) return dn_status_of(s);
    const fsdp_ctl *ctl = fsdp_engine_ctl(fsdp_session_engine(ses));
    *h = adapters;
    h->ctx = ses;
    h->rank = ctl->rank;
    h->world = ctl->world;
    h->device = fsdp_session_device(ses);
    if (ctl->world == 1) h->bn_sync = NULL;   /* a world of one has nothing to combine */
    return DN_OK;
}

int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *h)
{
    if (check_abi(abi) != FSDP_OK) return DN_ERR_ABI;
    process_setup();
    fsdp_flags flags;
    fsdp_status s = fsdp_flags_take(argc, argv, &flags);
    if (s == FSDP_OK && flags.help) return help_mode(&flags);
    if (s == FSDP_OK && flags.plan) return fsdp_plan_mode(argc, argv, &flags, h) == FSDP_OK ? DN_DONE : DN_ERR_CONFIG;
    if (s == FSDP_OK && fsdp_plan_flags_check(&flags) != FSDP_OK) return DN_ERR_CONFIG;
    return train_mode(&flags, s, argc, argv, h);
}
