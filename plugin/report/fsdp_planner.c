#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_acts.h"
#include "fsdp_engine.h"
#include "fsdp_env.h"
#include "fsdp_pcache.h"
#include "fsdp_memplan.h"
#include "fsdp_planfan.h"
#include "fsdp_planner.h"
#include "fsdp_quiet.h"
#include "fsdp_worlds.h"

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

/* What a step moves per rank (the byte theory); defined below. */
static fsdp_status step_of(const fsdp_engine *e, const network *net, int world, fsdp_plan_step *step);

/* One build of cfg in this process as rank 0 of `world` under `strategy`:
 * the check before the table, -fsdp-link's builds and the unit suite's. */
typedef struct plan_build {
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    fsdp_engine *e;
    network *net;
    int world, machines;
} plan_build;

static fsdp_status build_close(plan_build *b, dn_hooks *hooks)
{
    fsdp_status f = b->e && b->net ? fsdp_on_network_free(b->e, b->net) : FSDP_OK;
    if (b->net) free_network(b->net);
    if (b->e) fsdp_engine_free(b->e);
    hooks->cfg_option = NULL;
    hooks->ctx = NULL;
    if (b->coll) fsdp_coll_free(b->coll);   /* with its node memory */
    if (b->ctl) fsdp_ctl_free(b->ctl);
    *b = (plan_build){ 0 };
    return f;
}

static fsdp_status build_open(const char *cfg, int world, int machines, fsdp_strategy strategy, dn_hooks *hooks,
                              plan_build *b, cfg_seen *seen)
{
    /* Rank 0 of `world`, nothing moving (fsdp_backend_null.c): the
     * prediction is that of a run on one machine, or on `machines`. */
    *b = (plan_build){ .world = world, .machines = machines };
    FSDP_TRY(fsdp_backend_null_create(world, &b->ctl, &b->coll));
    fsdp_status st = machines > 1 ? fsdp_backend_null_machines(b->coll, machines) : FSDP_OK;
    if (st == FSDP_OK) st = fsdp_engine_create(b->ctl, b->coll, &b->e);
    if (st != FSDP_OK) {
        build_close(b, hooks);
        return st;
    }
    /* Predicts a training run, which on several ranks builds staged
     * (fsdp_stage.h); this build itself keeps Darknet's arrays whole. */
    fsdp_engine_set_options(b->e, &(fsdp_engine_options){ .staged = world > 1, .acts = fsdp_acts_wanted(),
                                                            .recompute = 1 });
    hooks->ctx = b->e;
    hooks->cfg_option = plan_cfg;
    quiet_begin();
    b->net = parse_network_cfg((char *)cfg);
    fsdp_engine_set_strategy(b->e, strategy);
    fsdp_status s = fsdp_on_network_built(b->e, b->net);
    quiet_end(s);
    hooks->cfg_option = NULL;
    hooks->ctx = NULL;
    if (seen) {
        seen->subdivisions = b->net->subdivisions;
        seen->batch = b->net->batch / (b->net->time_steps > 0 ? b->net->time_steps : 1) * b->net->subdivisions;
        seen->recompute = fsdp_engine_cfg(b->e)->recompute;
    }
    if (s != FSDP_OK) build_close(b, hooks);
    return s;
}

/* Rank 0's prediction at `world` ranks on `machines` from an engine set
 * up at `built` ranks on `built_on`: its own, or laid out again. */
static fsdp_status engine_predict(const fsdp_engine *e, const network *net, int built, int built_on, size_t fixed,
                                  int world, int machines, fsdp_mem_prediction *out)
{
    fsdp_mem_fixed fx = { fixed, fixed };
    *out = (fsdp_mem_prediction){ 0 };
    if (world == built && machines == built_on) {
        fsdp_memplan_predict(e, net, fx, 0, out);
        return FSDP_OK;
    }
    return fsdp_memplan_predict_world(e, net, fx, world, machines, out);
}

static fsdp_status build_predict(const plan_build *b, size_t fixed, int world, int machines,
                                 fsdp_mem_prediction *out)
{
    return engine_predict(b->e, b->net, b->world, b->machines, fixed, world, machines, out);
}

/* One build of cfg as `world` ranks under `strategy`: *out gets rank 0's
 * prediction; with groups, the groups table there too; with step, the
 * step's bytes. */
static fsdp_status predict_bytes(const char *cfg, int world, int machines, fsdp_strategy strategy, size_t fixed,
                                 dn_hooks *hooks,
                                 fsdp_mem_prediction *out, cfg_seen *seen, FILE *groups, fsdp_plan_step *step)
{
    plan_build b;
    *out = (fsdp_mem_prediction){ 0 };
    FSDP_TRY(build_open(cfg, world, machines, strategy, hooks, &b, seen));
    fsdp_status s = build_predict(&b, fixed, world, machines, out);
    if (s == FSDP_OK && groups) groups_table(b.e, b.net, world, groups);
    if (s == FSDP_OK && groups) cache_line(b.e, b.net, groups);
    if (s == FSDP_OK && step) s = step_of(b.e, b.net, world, step);
    fsdp_status f = build_close(&b, hooks);
    return s != FSDP_OK ? s : f;
}

static fsdp_status predict(const char *cfg, int world, fsdp_strategy strategy, size_t fixed, dn_hooks *hooks,
                           fsdp_mem_prediction *out, cfg_seen *seen, FILE *groups)
{
    return predict_bytes(cfg, world, 1, strategy, fixed, hooks, out, seen, groups, NULL);
}

/* What one step moves per rank at `world` under `strategy` (the byte
 * theory, fsdp_memplan_step_bytes), and each group's trainable part. */
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

/* The kinds of build the worlds need: one rank, two on one machine, and
 * two machines of two (whose rows are those on several machines). */
enum { AT_ONE, AT_MACHINE, AT_MACHINES, AT_KINDS };
static const int kind_world[AT_KINDS] = { 1, 2, 4 }, kind_machines[AT_KINDS] = { 1, 1, 2 };

static int kind_of(const fsdp_worlds *ws, int i)
{
    return ws->machines[i] > 1 ? AT_MACHINES : ws->world[i] > 1 ? AT_MACHINE : AT_ONE;
}

/* The fan's builds (fsdp_planfan.h) answer, for each world of ws in turn
 * that their kind serves, rank 0's prediction; the one numbered `groups`
 * then its groups table at the most ranks, as a length and its text. */
typedef struct serving {
    const fsdp_worlds *ws;
    const int *kind;    /* each build's */
    size_t fixed;
    int groups;
} serving;

static fsdp_status serve(int k, const fsdp_engine *e, const network *net, int fd, void *arg)
{
    const serving *v = arg;
    int kind = v->kind[k];
    for (int i = 0; i < v->ws->n; ++i) {
        if (kind_of(v->ws, i) != kind) continue;
        fsdp_mem_prediction p;
        FSDP_TRY(engine_predict(e, net, kind_world[kind], kind_machines[kind], v->fixed, v->ws->world[i],
                                v->ws->machines[i], &p));
        FSDP_TRY(fsdp_fan_write(fd, &p, sizeof p));
    }
    if (k != v->groups) return FSDP_OK;
    char *text = NULL;
    size_t len = 0;
    FILE *g = open_memstream(&text, &len);
    if (!g) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    groups_table(e, net, v->ws->world[v->ws->n - 1], g);
    cache_line(e, net, g);
    fclose(g);
    fsdp_status s = fsdp_fan_write(fd, &len, sizeof len);
    if (s == FSDP_OK) s = fsdp_fan_write(fd, text, len);
    free(text);
    return s;
}

/* Starts the builds the worlds of ws need under each of the strategies
 * [0, nstrat): of each kind some world of ws is (but the one at one rank
 * under `skip1`, answered already); at[kind][strategy] says which. */
static fsdp_status fan_for(const char *cfg, const fsdp_worlds *ws, int nstrat, int skip1, serving *v, int *kind,
                           int at[AT_KINDS][3], dn_hooks *hooks, fsdp_fan *fan)
{
    fsdp_strategy strategy[FSDP_FAN_MAX];
    int world[FSDP_FAN_MAX], machines[FSDP_FAN_MAX], need[AT_KINDS] = { 0 }, n = 0;
    for (int i = 0; i < ws->n; ++i) need[kind_of(ws, i)] = 1;
    for (int k = 0; k < AT_KINDS; ++k)
        for (int s = 0; s < nstrat; ++s) {
            at[k][s] = -1;
            if (!need[k] || (k == AT_ONE && s == skip1)) continue;
            at[k][s] = n;
            kind[n] = k;
            world[n] = kind_world[k];
            machines[n] = kind_machines[k];
            strategy[n++] = (fsdp_strategy)s;
        }
    v->kind = kind;
    if (v->groups >= 0) v->groups = at[kind_of(ws, ws->n - 1)][FSDP_SHARD_FULL];
    *fan = (fsdp_fan){ 0 };
    return n ? fsdp_fan_open(cfg, n, world, machines, strategy, hooks, serve, v, fan) : FSDP_OK;
}

/* Rank 0's peak under `full` at each world of ws, MB. */
static fsdp_status peaks_at(const char *cfg, const fsdp_worlds *ws, size_t fixed, dn_hooks *hooks, double *mb)
{
    serving v = { ws, NULL, fixed, -1 };
    int kind[FSDP_FAN_MAX], at[AT_KINDS][3];
    fsdp_fan fan;
    fsdp_status s = fan_for(cfg, ws, 1, -1, &v, kind, at, hooks, &fan);
    for (int i = 0; i < ws->n && s == FSDP_OK; ++i) {
        fsdp_mem_prediction p;
        s = fsdp_fan_read(&fan, at[kind_of(ws, i)][FSDP_SHARD_FULL], &p, sizeof p);
        mb[i] = p.peak / 1e6;
    }
    fsdp_status f = fsdp_fan_close(&fan);
    return s != FSDP_OK ? s : f;
}

/* The subdivisions the budget table tries: the cfg's times each power of
 * two that divides its batch. */
static int candidates(int batch, int sub0, int *sub, int cap)
{
    int n = 0;
    for (int s = sub0; s >= 1 && s <= batch && n < cap; s *= 2) {
        if (batch % s == 0) sub[n++] = s;
        if (s > batch / 2) break;   /* s *= 2 would overflow past batch */
    }
    return n;
}

/* Each candidate's peaks at every world, without and with recompute=1:
 * mb[(rc * nsub + k) * nworlds + i]. */
static fsdp_status budget_peaks(const char *cfg, const int *sub, int nsub, const fsdp_worlds *ws, size_t fixed,
                                dn_hooks *hooks, double *mb)
{
    for (int rc = 0; rc <= 1; ++rc)
        for (int k = 0; k < nsub; ++k) {
            char path[4096];
            FSDP_TRY(with_settings(cfg, sub[k], rc, path, sizeof path));
            fsdp_status st = peaks_at(path, ws, fixed, hooks, mb + ((size_t)rc * nsub + k) * ws->n);
            remove(path);
            FSDP_TRY(st);
        }
    return FSDP_OK;
}

/* The budget table (fsdp_planner.h). */
static fsdp_status fit_budget(const char *cfg, int batch, int sub0, const fsdp_worlds *ws, const char *budget,
                              size_t fixed, dn_hooks *hooks, FILE *out)
{
    char *end = NULL;
    double mb = strtod(budget, &end);
    if (!*budget || *end || !(mb > 0))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-budget %s: expected megabytes per rank, more than 0", budget);
    int sub[32], nsub = candidates(batch, sub0, sub, 32);
    double *peaks = calloc((size_t)(2 * nsub + 1) * (size_t)ws->n, sizeof *peaks);
    if (!peaks) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = budget_peaks(cfg, sub, nsub, ws, fixed, hooks, peaks);
    if (s == FSDP_OK)
        fprintf(out, "\nSettings that fit %s MB per rank under shard=full: for each number of ranks, without and "
                "with recompute=1 in [net], the fewest subdivisions (the cfg's batch=%d per rank kept: more "
                "subdivisions, fewer images per forward):\n\n"
                "| ranks | recompute | subdivisions | images per forward | predicted peak per rank (MB) |\n"
                "|---|---|---|---|---|\n", budget, batch);
    for (int i = 0; i < ws->n && s == FSDP_OK; ++i)
        for (int rc = 0; rc <= 1; ++rc) {
            const double *p = peaks + (size_t)rc * nsub * ws->n + i;
            char ranks[32];
            fsdp_worlds_label(ws, i, ranks, sizeof ranks);
            int k = 0;
            while (k < nsub && p[(size_t)k * ws->n] > mb) ++k;
            if (k < nsub)
                fprintf(out, "| %s | %d | %d | %d | %.1f |\n", ranks, rc, sub[k], batch / sub[k],
                        p[(size_t)k * ws->n]);
            else
                fprintf(out, "| %s | %d | none fits | at %d subdivisions, %d | %.1f |\n", ranks, rc,
                        nsub ? sub[nsub - 1] : sub0, batch / (nsub ? sub[nsub - 1] : sub0),
                        nsub ? p[(size_t)(nsub - 1) * ws->n] : 0.0);
        }
    free(peaks);
    return s;
}

/* One cell of the table: the peak, and in brackets its model state and step buffers. */
static void print_cell(FILE *out, const fsdp_mem_prediction *p)
{
    char node[48] = "", pss[32] = "";
    if (p->node_shared) snprintf(node, sizeof node, "%.1f node-shared + ", p->node_shared / 1e6);
    if (p->node_shared) snprintf(pss, sizeof pss, "; PSS %.1f", p->pss / 1e6);
    fprintf(out, " %.1f (%.1f + %s%.1f%s) |", p->peak / 1e6, p->model_state / 1e6, node, p->step_buffers / 1e6, pss);
}

/* One row of the table: rank 0's prediction at world w under each
 * strategy, from the build at one rank (first, under full) or from the
 * fan's builds. */
static fsdp_status table_row(const fsdp_worlds *ws, int i, const fsdp_mem_prediction *first, const fsdp_fan *fan,
                             int at[AT_KINDS][3], FILE *out, double *full)
{
    char ranks[32];
    fsdp_worlds_label(ws, i, ranks, sizeof ranks);
    fprintf(out, "| %s |", ranks);
    int kind = kind_of(ws, i);
    for (int s = FSDP_SHARD_FULL; s <= FSDP_SHARD_NONE; ++s) {
        fsdp_mem_prediction p = *first;
        if (kind != AT_ONE || s != FSDP_SHARD_FULL) FSDP_TRY(fsdp_fan_read(fan, at[kind][s], &p, sizeof p));
        if (s == FSDP_SHARD_FULL) *full = p.peak / 1e6;
        print_cell(out, &p);
    }
    fprintf(out, "\n");
    fflush(out);   /* each row as it is computed */
    return FSDP_OK;
}

/* The groups table the fan's build at two ranks under full wrote last. */
static fsdp_status groups_from(const fsdp_fan *fan, int k, FILE *out)
{
    size_t len;
    FSDP_TRY(fsdp_fan_read(fan, k, &len, sizeof len));
    char *text = malloc(len + 1);
    if (!text) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = fsdp_fan_read(fan, k, text, len);
    if (s == FSDP_OK) fwrite(text, 1, len, out);
    free(text);
    return s;
}

/* The table's rows, then the groups table at the most ranks under full
 * (the same groups at every world past one). */
static fsdp_status table(const char *cfg, const fsdp_worlds *ws, const fsdp_mem_prediction *first, size_t fixed,
                         dn_hooks *hooks, FILE *out, double *full)
{
    serving v = { ws, NULL, fixed, 0 };
    int kind[FSDP_FAN_MAX], at[AT_KINDS][3];
    fsdp_fan fan;
    fsdp_status s = fan_for(cfg, ws, FSDP_SHARD_NONE + 1, FSDP_SHARD_FULL, &v, kind, at, hooks, &fan);
    for (int i = 0; i < ws->n && s == FSDP_OK; ++i) s = table_row(ws, i, first, &fan, at, out, full);
    cfg_seen seen;
    fsdp_mem_prediction p;
    if (s == FSDP_OK && v.groups >= 0) s = groups_from(&fan, v.groups, out);
    else if (s == FSDP_OK) s = predict(cfg, 1, FSDP_SHARD_FULL, fixed, hooks, &p, &seen, out);
    fsdp_status f = fsdp_fan_close(&fan);
    return s != FSDP_OK ? s : f;
}

fsdp_status fsdp_planner_run(const char *cfg, const char *worlds, const char *budget, dn_hooks *hooks, FILE *out)
{
    fsdp_worlds ws;
    FSDP_TRY(fsdp_worlds_parse(worlds, &ws));
    fsdp_status s = FSDP_OK;
    if (!cfg || access(cfg, R_OK) != 0)
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan %s: give the cfg to plan: darknet -plugin PLUGIN "
                      "-fsdp-plan WORLDS CFG", worlds);
    if (s == FSDP_OK) s = fsdp_memplan_warm_up(NULL);
    size_t fixed = fsdp_memplan_resident();
    /* A cfg the plugin refuses says why before any table starts. */
    cfg_seen seen = { 1, 1, 0 };
    fsdp_mem_prediction first;
    double flipped = 0, as_is = 0;
    if (s == FSDP_OK) s = predict(cfg, 1, FSDP_SHARD_FULL, fixed, hooks, &first, &seen, NULL);
    if (s == FSDP_OK)
        fprintf(out, "Predicted peak memory per rank for %s, MB (model state + step buffers in brackets; "
                "fixed cost measured here, without MPI):\n\n| ranks | full | grad_op | none |\n|---|---|---|---|\n",
                cfg);
    if (s == FSDP_OK) s = table(cfg, &ws, &first, fixed, hooks, out, &as_is);
    /* What recompute=1 in [net] changes at the most ranks. */
    int most = ws.n ? ws.world[ws.n - 1] : 1, on = ws.n ? ws.machines[ws.n - 1] : 1;
    fsdp_worlds one = { 1, &most, &on };
    char most_label[32] = "1";
    if (ws.n) fsdp_worlds_label(&ws, ws.n - 1, most_label, sizeof most_label);
    char path[4096];
    if (s == FSDP_OK) s = with_settings(cfg, seen.subdivisions, !seen.recompute, path, sizeof path);
    if (s == FSDP_OK) {
        s = peaks_at(path, &one, fixed, hooks, &flipped);
        remove(path);
    }
    if (s == FSDP_OK)
        fprintf(out, "\n%s recompute=1 in [net], %s ranks under shard=full need %.1f MB each (%.1f as the cfg is).\n",
                seen.recompute ? "Without" : "With", most_label, flipped, as_is);
    if (s == FSDP_OK && budget) s = fit_budget(cfg, seen.batch, seen.subdivisions, &ws, budget, fixed, hooks, out);
    fsdp_worlds_free(&ws);
    return s;
}

fsdp_status fsdp_planner_build(const char *cfg, const char *keys, int machines, int ranks, dn_hooks *hooks,
                               fsdp_mem_prediction *mem, fsdp_plan_step *step)
{
    char path[4096];
    FSDP_TRY(fsdp_memplan_warm_up(NULL));
    FSDP_TRY(with_keys(cfg, keys, path, sizeof path));
    cfg_seen seen;
    size_t fixed = fsdp_memplan_resident();
    int world = machines * ranks;
    /* The byte theory counts what a rank sends whatever machine it is on;
     * the memory is the machines' own (node memory per machine). */
    fsdp_status s = predict_bytes(path, world, 1, FSDP_SHARD_FULL, fixed, hooks, mem, &seen, NULL, step);
    if (s == FSDP_OK && machines > 1)
        s = predict_bytes(path, world, machines, FSDP_SHARD_FULL, fixed, hooks, mem, &seen, NULL, NULL);
    remove(path);
    return s;
}

fsdp_status fsdp_planner_predict(const char *cfg, const char *keys, fsdp_strategy strategy, int built_at,
                                 int built_on, int world, int machines, dn_hooks *hooks, fsdp_mem_prediction *out)
{
    char path[4096];
    FSDP_TRY(with_keys(cfg, keys, path, sizeof path));
    plan_build b;
    fsdp_status s = build_open(path, built_at, built_on, strategy, hooks, &b, NULL);
    remove(path);
    FSDP_TRY(s);
    s = build_predict(&b, 0, world, machines, out);
    fsdp_status f = build_close(&b, hooks);
    return s != FSDP_OK ? s : f;
}
