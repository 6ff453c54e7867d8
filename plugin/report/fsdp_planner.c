#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_acts.h"
#include "fsdp_engine.h"
#include "fsdp_pcache.h"
#include "fsdp_memplan.h"
#include "fsdp_planner.h"
#include "fsdp_quiet.h"
#include "fsdp_env.h"

static int plan_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    return fsdp_on_cfg_option(c, cfg, line, layer, key, val);
}

/* Darknet prints its layer table for every build: not here.  A build the
 * plugin refuses passes on the plugin's words; one Darknet stops inside
 * (its refusals exit) shows its last lines (fsdp_quiet.h). */
static void quiet_begin(void) { fsdp_quiet_capture(0); }

static void quiet_end(fsdp_status s)
{
    if (s == FSDP_OK) fsdp_quiet_drop();
    else fsdp_quiet_end();
}

/* What a build tells beyond the prediction: the cfg's [net] batch and
 * subdivisions as Darknet read them, and its [net] recompute. */
typedef struct cfg_seen {
    int batch, subdivisions, recompute;
} cfg_seen;

/* Each group's activations as the build holds them through the step, and
 * what the groups share (fsdp_memplan_held). */
static void groups_table(const fsdp_engine *e, const network *net, int world, FILE *out)
{
    fsdp_engine_memory mem = fsdp_engine_memory_of(e);
    fprintf(out, "\nGroups at %d ranks under shard=full: the activations each group's layers hold through the step, "
            "for %d images per forward, and what the groups share:\n\n"
            "| group | layers | parameters | held through the step (MB) | recomputed |\n|---|---|---|---|---|\n",
            world, net->batch);
    const fsdp_layout_plan *lp = fsdp_engine_layout(e);
    for (int g = 0; g < lp->ngroups; ++g) {
        const fsdp_group_info *gi = &lp->groups[g];
        size_t params = 0;
        for (int k = 0; k < gi->nlayers; ++k) params += lp->layer_params[gi->layers[k]];
        char span[48];
        if (!gi->nlayers) snprintf(span, sizeof span, "none");
        else if (gi->nlayers == 1) snprintf(span, sizeof span, "%d", gi->layers[0]);
        else if (gi->layers[gi->nlayers - 1] - gi->layers[0] + 1 == gi->nlayers)
            snprintf(span, sizeof span, "%d-%d", gi->layers[0], gi->layers[gi->nlayers - 1]);
        else snprintf(span, sizeof span, "%d layers", gi->nlayers);
        const char *rc = !fsdp_engine_group_recomputes(e, g) ? "no"
                         : fsdp_engine_step_plan(e)->groups[g].acts_stay ? "yes, kept for its backward" : "yes";
        fprintf(out, "| %s | %s | %zu | %.1f | %s |\n", gi->name, span, params,
                fsdp_memplan_held(net, gi->layers, gi->nlayers) / 1e6, rc);
    }
    fprintf(out, "\nShared by the groups: transient outputs %.1f MB, the delta pool %.1f MB, the recomputed groups' "
            "arena %.1f MB; the largest workspace %.1f MB.\n", mem.acts_bytes / 1e6,
            mem.delta_pool_bytes / 1e6, mem.recompute_bytes / 1e6,
            fsdp_memplan_workspace(net) / 1e6);
}

/* One build of cfg as `world` ranks under `strategy`: *out gets rank 0's
 * prediction; with groups, the groups table there too. */
static fsdp_status predict_bytes(const char *cfg, int world, fsdp_strategy strategy, size_t fixed, dn_hooks *hooks,
                                 fsdp_mem_prediction *out, cfg_seen *seen, FILE *groups, fsdp_plan_step *step);

static fsdp_status predict(const char *cfg, int world, fsdp_strategy strategy, size_t fixed, dn_hooks *hooks,
                           fsdp_mem_prediction *out, cfg_seen *seen, FILE *groups)
{
    return predict_bytes(cfg, world, strategy, fixed, hooks, out, seen, groups, NULL);
}

/* What one step moves per rank at `world` under `strategy` (the byte
 * theory, fsdp_memplan_step_bytes), and each group's trainable part. */
/* The probe cache a classifier run of this cfg would keep (fsdp_pcache.h):
 * its size per training image, on disk and in memory. */
static void cache_line(const fsdp_engine *e, const network *net, FILE *out)
{
    uint64_t floats = fsdp_pcache_variant_floats(e, net);
    if (!floats) return;
    fprintf(out, "\nProbe cache (classifier train with fixed input): %llu floats per image and variant, %.1f KB per "
            "training image on disk (the image and its mirror image), read through the page cache: one copy per "
            "machine, in no rank's RSS or PSS.\n", (unsigned long long)floats, 2.0 * floats * sizeof(float) / 1e3);
}

static fsdp_status step_of(const fsdp_engine *e, const network *net, int world, fsdp_plan_step *step)
{
    int ng = fsdp_engine_layout(e)->ngroups;
    fsdp_group_tally *t = calloc((size_t)ng, sizeof *t);
    if (!t) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = fsdp_memplan_step_bytes(e, net->subdivisions, t);
    *step = (fsdp_plan_step){ .groups = ng, .images = (size_t)net->batch * (size_t)net->subdivisions };
    for (int g = 0; g < ng && s == FSDP_OK; ++g) {
        size_t train, frozen;
        fsdp_engine_group_params(e, g, &train, &frozen);
        step->ag += t[g].ag_bytes;
        step->rs += t[g].rs_bytes;
        step->ar += t[g].ar_bytes;
        if (train) step->part_floats[step->nparts < FSDP_PLAN_PARTS ? step->nparts++ : FSDP_PLAN_PARTS - 1] +=
            (train + (size_t)world - 1) / (size_t)world;
        if (t[g].ag_bytes || t[g].rs_bytes) ++step->exchanges;
    }
    free(t);
    return s;
}

static fsdp_status predict_bytes(const char *cfg, int world, fsdp_strategy strategy, size_t fixed, dn_hooks *hooks,
                                 fsdp_mem_prediction *out, cfg_seen *seen, FILE *groups, fsdp_plan_step *step)
{
    /* Rank 0 of `world`, nothing moving (fsdp_backend_null.c): the
     * prediction is that of a one-machine run. */
    fsdp_ctl *be;
    fsdp_coll *coll;
    FSDP_TRY(fsdp_backend_null_create(world, &be, &coll));
    fsdp_engine *e;
    fsdp_status st = fsdp_engine_create(be, coll, &e);
    if (st != FSDP_OK) {
        fsdp_coll_free(coll);
        fsdp_ctl_free(be);
        return st;
    }
    /* Predicts a training run, which on several ranks builds staged
     * (fsdp_stage.h); this build itself keeps Darknet's arrays whole. */
    fsdp_engine_set_options(e, &(fsdp_engine_options){ .staged = world > 1, .acts = fsdp_acts_wanted(),
                                                         .recompute = 1 });
    hooks->ctx = e;
    hooks->cfg_option = plan_cfg;
    quiet_begin();
    network *net = parse_network_cfg((char *)cfg);
    fsdp_engine_set_strategy(e, strategy);
    fsdp_status s = fsdp_on_network_built(e, net);
    quiet_end(s);
    *out = (fsdp_mem_prediction){ 0 };
    if (s == FSDP_OK) fsdp_memplan_predict(e, net, (fsdp_mem_fixed){ fixed, fixed }, 0, out);
    if (s == FSDP_OK && groups) groups_table(e, net, world, groups);
    if (s == FSDP_OK && groups) cache_line(e, net, groups);
    if (s == FSDP_OK && step) s = step_of(e, net, world, step);
    seen->subdivisions = net->subdivisions;
    seen->batch = net->batch / (net->time_steps > 0 ? net->time_steps : 1) * net->subdivisions;
    seen->recompute = fsdp_engine_cfg(e)->recompute;
    fsdp_status f = fsdp_on_network_free(e, net);
    free_network(net);
    fsdp_engine_free(e);
    hooks->cfg_option = NULL;
    hooks->ctx = NULL;
    fsdp_coll_free(coll);   /* with its node memory */
    fsdp_ctl_free(be);
    return s != FSDP_OK ? s : f;
}

/* A copy of cfg in a temporary file with [net]'s subdivisions set to sub
 * and its recompute to rc: the lines inserted after the section's header
 * come first, so Darknet's first-match lookup takes them; [net]'s own
 * recompute lines are left out, since the plugin takes the last. */
static fsdp_status with_keys(const char *cfg, const char *keys, char *path, size_t cap);

static fsdp_status with_settings(const char *cfg, int sub, int rc, char *path, size_t cap)
{
    char keys[64];
    snprintf(keys, sizeof keys, "subdivisions=%d\nrecompute=%d\n", sub, rc);
    return with_keys(cfg, keys, path, cap);
}

/* Whether line (in [net]) sets one of the keys of `keys` ("k=v\n..."). */
static int sets_key(const char *line, const char *keys)
{
    for (const char *k = keys; *k; k = strchr(k, '\n') + 1) {
        size_t n = strcspn(k, "=");
        if (!strncmp(line, k, n) && strchr(" \t=", line[n])) return 1;
        if (!strchr(k, '\n')) break;
    }
    return 0;
}

/* A copy of cfg in a temporary file with `keys` in [net] in place of its own. */
static fsdp_status with_keys(const char *cfg, const char *keys, char *path, size_t cap)
{
    const char *tmp = fsdp_env("TMPDIR");
    snprintf(path, cap, "%s/fsdp-plan-XXXXXX", tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    FILE *in = fopen(cfg, "r"), *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!in || !out) {
        if (in) fclose(in);
        if (out) fclose(out);
        else if (fd >= 0) close(fd);
        if (fd >= 0) remove(path);
        return fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: cannot copy %s into %s", cfg, path);
    }
    char line[4096];
    int done = 0, in_net = 0;
    while (fgets(line, sizeof line, in)) {
        const char *t = line + strspn(line, " \t");
        if (*t == '[') in_net = 0;
        if (in_net && sets_key(t, keys)) continue;
        fputs(line, out);
        if (!done && (!strncmp(line, "[net]", 5) || !strncmp(line, "[network]", 9))) {
            fputs(keys, out);
            done = in_net = 1;
        }
    }
    fclose(in);
    if (fclose(out) != 0 || !done) {
        remove(path);
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan: %s has no [net] section", cfg);
    }
    return FSDP_OK;
}

/* The budget table (fsdp_planner.h). */
static fsdp_status fit_budget(const char *cfg, int batch, int sub0, long max_world, const char *budget, size_t fixed,
                              dn_hooks *hooks, FILE *out)
{
    char *end = NULL;
    double mb = strtod(budget, &end);
    if (!*budget || *end || !(mb > 0))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-budget %s: expected megabytes per rank, more than 0", budget);
    fprintf(out, "\nSettings that fit %s MB per rank under shard=full: for each number of ranks, without and "
            "with recompute=1 in [net], the fewest subdivisions (the cfg's batch=%d per rank kept: more subdivisions, "
            "fewer images per forward):\n\n"
            "| ranks | recompute | subdivisions | images per forward | predicted peak per rank (MB) |\n"
            "|---|---|---|---|---|\n", budget, batch);
    for (long w = 1; w <= max_world; ++w)
        for (int rc = 0; rc <= 1; ++rc) {
            double least = 0;
            int fit = 0, last = sub0;
            for (int s = sub0; s <= batch && !fit; s *= 2) {
                if (batch % s) continue;
                char path[4096];
                fsdp_mem_prediction p;
                FSDP_TRY(with_settings(cfg, s, rc, path, sizeof path));
                cfg_seen seen;
                fsdp_status st = predict(path, (int)w, FSDP_SHARD_FULL, fixed, hooks, &p, &seen, NULL);
                remove(path);
                FSDP_TRY(st);
                least = p.peak / 1e6;
                last = s;
                if (least <= mb) {
                    fprintf(out, "| %ld | %d | %d | %d | %.1f |\n", w, rc, s, batch / s, least);
                    fit = 1;
                }
                if (s > batch / 2) break;   /* s *= 2 would overflow past batch */
            }
            if (!fit)
                fprintf(out, "| %ld | %d | none fits | at %d subdivisions, %d | %.1f |\n", w, rc, last, batch / last,
                        least);
        }
    return FSDP_OK;
}

/* One cell of the table: the peak, and in brackets its model state and step buffers. */
static void print_cell(FILE *out, const fsdp_mem_prediction *p)
{
    char node[48] = "", pss[32] = "";
    if (p->node_shared) snprintf(node, sizeof node, "%.1f node-shared + ", p->node_shared / 1e6);
    if (p->node_shared) snprintf(pss, sizeof pss, "; PSS %.1f", p->pss / 1e6);
    fprintf(out, " %.1f (%.1f + %s%.1f%s) |", p->peak / 1e6, p->model_state / 1e6, node, p->step_buffers / 1e6, pss);
}

fsdp_status fsdp_planner_run(const char *cfg, const char *max_world, const char *budget, dn_hooks *hooks, FILE *out)
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
    /* A cfg the plugin refuses says why before any table starts. */
    cfg_seen seen = { 1, 1, 0 };
    fsdp_mem_prediction first;
    FSDP_TRY(predict(cfg, 1, FSDP_SHARD_FULL, fixed, hooks, &first, &seen, NULL));
    fprintf(out, "Predicted peak memory per rank for %s, MB (model state + step buffers in brackets; "
            "fixed cost measured here, without MPI):\n\n| ranks | full | grad_op | none |\n|---|---|---|---|\n", cfg);
    double full = 0;
    /* The groups table comes from the build at N ranks under full, printed
     * after the table. */
    char *groups = NULL;
    size_t groups_len = 0;
    FILE *g = open_memstream(&groups, &groups_len);
    if (!g) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (long w = 1; w <= n; ++w) {
        fprintf(out, "| %ld |", w);
        for (int s = FSDP_SHARD_FULL; s <= FSDP_SHARD_NONE; ++s) {
            fsdp_mem_prediction p = first;
            int last = w == n && s == FSDP_SHARD_FULL;
            /* One rank under full was the check's build (unless its groups table is wanted). */
            fsdp_status st = w == 1 && s == FSDP_SHARD_FULL && !last
                             ? FSDP_OK : predict(cfg, (int)w, (fsdp_strategy)s, fixed, hooks, &p, &seen, last ? g : NULL);
            if (st != FSDP_OK) {
                fclose(g);
                free(groups);
                return st;
            }
            if (s == FSDP_SHARD_FULL) full = p.peak / 1e6;
            print_cell(out, &p);
        }
        fprintf(out, "\n");
    }
    fclose(g);
    fputs(groups, out);
    free(groups);
    /* What recompute=1 in [net] changes at the most ranks. */
    fsdp_mem_prediction p;
    char path[4096];
    FSDP_TRY(with_settings(cfg, seen.subdivisions, !seen.recompute, path, sizeof path));
    cfg_seen other;
    fsdp_status st = predict(path, (int)n, FSDP_SHARD_FULL, fixed, hooks, &p, &other, NULL);
    remove(path);
    FSDP_TRY(st);
    fprintf(out, "\n%s recompute=1 in [net], %ld ranks under shard=full need %.1f MB each (%.1f as the cfg is).\n",
            seen.recompute ? "Without" : "With", n, p.peak / 1e6, full);
    return budget ? fit_budget(cfg, seen.batch, seen.subdivisions, n, budget, fixed, hooks, out) : FSDP_OK;
}

fsdp_status fsdp_planner_build(const char *cfg, const char *keys, int world, dn_hooks *hooks, fsdp_mem_prediction *mem,
                               fsdp_plan_step *step)
{
    char path[4096];
    FSDP_TRY(fsdp_memplan_warm_up(NULL));
    FSDP_TRY(with_keys(cfg, keys, path, sizeof path));
    cfg_seen seen;
    fsdp_status s = predict_bytes(path, world, FSDP_SHARD_FULL, fsdp_memplan_resident(), hooks, mem, &seen, NULL, step);
    remove(path);
    return s;
}
