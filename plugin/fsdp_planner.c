#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_engine.h"
#include "fsdp_planner.h"
#include "fsdp_shm.h"

/* A backend of `world` ranks that moves nothing: set-up's broadcast and
 * agreement have one participant.  It blocks in its started collectives,
 * as the MPI backend does on one machine (shared memory): the prediction
 * is that of a one-machine run. */
static fsdp_status no_bcast(fsdp_backend *b, void *buf, size_t n, int root) { return FSDP_OK; }
static fsdp_status one_min_max(fsdp_backend *b, uint64_t v, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = v;
    return FSDP_OK;
}
static fsdp_status no_start(fsdp_backend *b, const float *in, float *out, size_t n, int *ticket) { return FSDP_OK; }
static fsdp_status no_start_rs(fsdp_backend *b, const float *in, float *out, size_t n, int *ticket) { return FSDP_OK; }
static fsdp_status no_wait(fsdp_backend *b, int ticket) { return FSDP_OK; }

/* Node memory (shard_node_shared=1) as one process's: the engine copies
 * this rank's parts into it, so it is real, and freed after each build. */
typedef struct plan_node {
    float *region[FSDP_SHM_REGIONS];
    int n;
} plan_node;
static fsdp_status plan_node_alloc(fsdp_backend *b, size_t count, float **out)
{
    plan_node *pn = b->ctx;
    *out = pn->n < FSDP_SHM_REGIONS ? calloc(count ? count : 1, sizeof(float)) : NULL;
    if (!*out) return fsdp_fail(FSDP_ERR_NOMEM, "-fsdp-plan: no memory for %zu floats of node memory", count);
    pn->region[pn->n++] = *out;
    return FSDP_OK;
}
static fsdp_status no_sync(fsdp_backend *b) { return FSDP_OK; }

static int plan_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    return fsdp_on_cfg_option(c, cfg, line, layer, key, val);
}

/* Darknet prints its layer table for every build: not here. */
static int quiet_begin(void)
{
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
    return saved;
}

static void quiet_end(int saved)
{
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
}

/* One build of cfg as `world` ranks under `strategy`: *out gets rank 0's prediction. */
static fsdp_status predict(const char *cfg, int world, fsdp_strategy strategy, size_t fixed, dn_hooks *hooks,
                           fsdp_mem_prediction *out)
{
    plan_node node = { .n = 0 };
    fsdp_backend be = { .name = "plan", .rank = 0, .world = world, .mem = FSDP_MEM_HOST, .ctx = &node,
                        .broadcast = no_bcast, .min_max_u64 = one_min_max, .all_gather_start = no_start,
                        .reduce_scatter_start = no_start_rs, .wait = no_wait,
                        .starts_block = 1, .node_alloc = plan_node_alloc, .node_sync = no_sync };
    fsdp_engine e;
    FSDP_TRY(fsdp_engine_init(&e, &be));
    hooks->ctx = &e;
    hooks->cfg_option = plan_cfg;
    int saved = quiet_begin();
    network *net = parse_network_cfg((char *)cfg);
    e.cfg.strategy = strategy;
    e.fixed_bytes = fixed;
    /* Predicts a training run, which on several ranks builds staged
     * (fsdp_stage.h); this build itself keeps Darknet's arrays whole. */
    e.stage.enabled = world > 1;
    e.acts.enabled = fsdp_acts_wanted();
    fsdp_status s = fsdp_on_network_built(&e, net);
    quiet_end(saved);
    *out = e.predicted;
    fsdp_status f = fsdp_on_network_free(&e, net);
    free_network(net);
    fsdp_engine_free(&e);
    hooks->cfg_option = NULL;
    hooks->ctx = NULL;
    for (int k = 0; k < node.n; ++k) free(node.region[k]);
    return s != FSDP_OK ? s : f;
}

fsdp_status fsdp_planner_run(const char *cfg, const char *max_world, dn_hooks *hooks, FILE *out)
{
    char *end = NULL;
    long n = max_world ? strtol(max_world, &end, 10) : 0;
    if (!max_world || !*max_world || *end || n < 1 || n > 4096)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan %s: expected a number of ranks from 1 to 4096",
                         max_world ? max_world : "");
    if (!cfg || access(cfg, R_OK) != 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan %s: give the cfg to plan: darknet -plugin PLUGIN "
                         "-fsdp-plan N CFG", max_world);
    FSDP_TRY(fsdp_memplan_warm_up(NULL));
    size_t fixed = fsdp_memplan_resident();
    fprintf(out, "Predicted peak memory per rank for %s, MB (model state + step buffers in brackets; "
            "fixed cost measured here, without MPI):\n\n| ranks | full | grad_op | none |\n|---|---|---|---|\n", cfg);
    for (long w = 1; w <= n; ++w) {
        fprintf(out, "| %ld |", w);
        for (int s = FSDP_SHARD_FULL; s <= FSDP_SHARD_NONE; ++s) {
            fsdp_mem_prediction p;
            FSDP_TRY(predict(cfg, (int)w, (fsdp_strategy)s, fixed, hooks, &p));
            char node[48] = "";
            if (p.node_shared) snprintf(node, sizeof node, "%.1f node-shared + ", p.node_shared / 1e6);
            fprintf(out, " %.1f (%.1f + %s%.1f) |", p.peak / 1e6, p.model_state / 1e6, node, p.step_buffers / 1e6);
        }
        fprintf(out, "\n");
    }
    return FSDP_OK;
}
