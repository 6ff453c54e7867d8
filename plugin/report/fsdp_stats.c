/* The -fsdp-stats JSON file (docs/DESIGN.md, "Stats file"): rank 0's own counts. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "fsdp_stats.h"

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void write_group(FILE *f, const fsdp_stats_sources *src, int gi, const fsdp_group_tally *plan)
{
    const fsdp_engine *e = src->e;
    const fsdp_layout_plan *lp = fsdp_engine_layout(e);
    const fsdp_group_info *info = &lp->groups[gi];
    const fsdp_step_group *sg = &fsdp_engine_step_plan(e)->groups[gi];
    const fsdp_group_tally *t = &fsdp_engine_tally(e)->group[gi];
    size_t train, frozen;
    fsdp_engine_group_params(e, gi, &train, &frozen);
    fputs("{\"name\": ", f);
    json_string(f, info->name);
    fputs(", \"layers\": [", f);
    for (int k = 0; k < info->nlayers; ++k) fprintf(f, "%s%d", k ? ", " : "", info->layers[k]);
    fputs("], \"backward_layers\": [", f);
    for (int k = 0, n = 0; k < info->nlayers; ++k)
        if (lp->need_bwd[info->layers[k]]) fprintf(f, "%s%d", n++ ? ", " : "", info->layers[k]);
    /* Gathered from its forward to its backward (the root; the group whose
     * backward comes first; every group under reshard_after_forward=0). */
    fprintf(f, "], \"stays_gathered\": %s", sg->stays_gathered ? "true" : "false");
    size_t params = train + frozen;
    fprintf(f, ", \"params\": %zu, \"trainable_params\": %zu, \"frozen_params\": %zu, \"frozen\": %s, "
            "\"needs_backward\": %s, \"all_gather_bytes\": %llu, \"reduce_scatter_bytes\": %llu, "
            "\"all_reduce_bytes\": %llu, \"backward_gathers\": %llu, \"bn_all_reduce_bytes\": %llu,\n   "
            "\"plan_per_step\": {\"all_gather_bytes\": %llu, \"reduce_scatter_bytes\": %llu, "
            "\"all_reduce_bytes\": %llu, \"backward_gathers\": %llu}}",
            params, train, frozen, params && !train ? "true" : "false",
            sg->bwd_hi >= 0 ? "true" : "false", (unsigned long long)t->ag_bytes,
            (unsigned long long)t->rs_bytes, (unsigned long long)t->ar_bytes,
            (unsigned long long)t->backward_gathers,
            (unsigned long long)(src->bn->group_bytes ? src->bn->group_bytes[gi] : 0),
            (unsigned long long)plan->ag_bytes, (unsigned long long)plan->rs_bytes,
            (unsigned long long)plan->ar_bytes, (unsigned long long)plan->backward_gathers);
}

/* Per rank, from rank 0's counts (every rank runs the same collectives):
 * the machines, and what each rank's collectives carry to the others (a
 * hierarchical backend's all-gathers and reduce-scatters, like the peer
 * exchanges, a part to one peer on each other machine). */
static void write_hosts(FILE *f, const fsdp_stats_sources *src)
{
    const fsdp_hosts *h = src->hosts;
    const fsdp_tally *t = fsdp_engine_tally(src->e);
    int world = h->host_of ? h->world : 1;
    fprintf(f, " \"hosts\": %d, \"host_of_rank\": [", h->host_of ? h->nhosts : 1);
    for (int r = 0; r < world; ++r) fprintf(f, "%s%d", r ? ", " : "", h->host_of ? h->host_of[r] : 0);
    fputs("], \"bytes_to_other_hosts\": [", f);
    const fsdp_coll *coll = fsdp_engine_coll(src->e);
    int hier = coll && coll->hierarchical;
    uint64_t spread = t->ag + t->rs - t->peer, peers = t->peer;
    if (hier) {
        peers += spread;
        spread = 0;
    }
    for (int r = 0; r < world; ++r)
        fprintf(f, "%s%llu", r ? ", " : "", h->host_of ? (unsigned long long)fsdp_hosts_bytes_out(
                    h, r, spread, peers, t->ar + src->bn->bytes) : 0ull);
    fputs("],\n", f);
}

static void write_pcache(FILE *f, const fsdp_pcache *pc)
{
    fprintf(f, " \"probe_cache\": {\"state\": \"%s\", \"bytes\": %llu, \"extraction_seconds\": %.3f, "
            "\"steps_seconds\": %.3f, \"folder\": ", fsdp_pcache_state_str(pc),
            (unsigned long long)fsdp_pcache_bytes(pc), pc->extract_s, fsdp_pcache_steps_s(pc));
    json_string(f, pc->dir ? pc->dir : "");
    fputs("},\n", f);
}

/* Each rank's predicted peak, with its own fixed cost. */
static void write_predicted_each(FILE *f, const fsdp_stats_sources *src, int world)
{
    fprintf(f, " \"predicted_peak_per_rank\": [");
    for (int r = 0; src->predicted_each && r < world; ++r)
        fprintf(f, "%s%llu", r ? ", " : "", (unsigned long long)src->predicted_each[r]);
    fprintf(f, "],\n");
}

/* The totals after the groups: bytes, batch norm's checks, the machines,
 * set-up time and memory, measured and predicted. */
static void write_totals(FILE *f, const fsdp_stats_sources *src)
{
    const fsdp_engine *e = src->e;
    const fsdp_tally *t = fsdp_engine_tally(e);
    const fsdp_mem_prediction *p = src->predicted;
    fsdp_engine_memory mem = fsdp_engine_memory_of(e);
    int steps = fsdp_engine_steps(e);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "],\n \"bytes\": {\"all_gather\": %llu, \"reduce_scatter\": %llu, \"all_reduce\": %llu, "
            "\"broadcast\": %llu, \"setup_all_gather\": %llu, \"checkpoint_all_gather\": %llu, \"bn_all_reduce\": %llu},\n"
            " \"bn_rolling\": {\"checks\": %d, \"differ\": %d},\n",
            (unsigned long long)t->ag, (unsigned long long)t->rs, (unsigned long long)t->ar,
            (unsigned long long)t->bcast, (unsigned long long)mem.stage_gather_bytes, (unsigned long long)t->ckpt,
            (unsigned long long)src->bn->bytes, src->bn->rolling_checks, src->bn->rolling_differ);
    write_hosts(f, src);
    if (src->straggle) fsdp_straggle_write_stats(f, src->straggle);
    if (src->pcache) write_pcache(f, src->pcache);
    write_predicted_each(f, src, fsdp_engine_ctl(e)->world);
    fprintf(f, " \"setup_cpu_seconds\": {\"min\": %.3f, \"max\": %.3f}, \"peak_pss_bytes\": %zu, \"mean_pss_bytes\": %zu, "
            "\"predicted_pss_bytes\": %zu,\n", src->setup_cpu_s[0], src->setup_cpu_s[1], src->peak_pss, src->mean_pss, p->pss);
    fprintf(f, " \"model_state_bytes\": %zu, \"node_shared_bytes\": %zu, \"peak_rss_bytes\": %llu, \"page_faults_per_step\": %.1f,\n"
            " \"step_buffers_bytes\": %zu, \"predicted_peak_bytes\": %zu,\n"
            " \"transient_outputs\": %d, \"activation_buffers_bytes\": %zu, \"pooled_deltas\": %d, \"delta_buffers_bytes\": %zu,\n"
            " \"recomputed_groups\": %d, \"recompute_buffers_bytes\": %zu,\n"
            " \"predicted\": {\"fixed\": %zu, \"activations\": %zu, \"build\": %zu, \"setup\": %zu, "
            "\"model_state\": %zu, \"node_shared\": %zu, \"step_buffers\": %zu, \"collective_scratch\": %zu}}\n",
            t->model_state_bytes, mem.node_bytes,
            (unsigned long long)ru.ru_maxrss * 1024ull,
            steps > 1 ? (double)(t->faults_last_step - t->faults_first_step) / (steps - 1) : 0.0,
            mem.pool_footprint, p->peak, mem.acts_transient, mem.acts_bytes, mem.deltas_pooled,
            mem.delta_pool_bytes, mem.recompute_groups, mem.recompute_bytes, p->fixed, p->activations,
            p->build, p->setup, p->model_state, p->node_shared, p->step_buffers, p->collective_scratch);
}

/* The file's text into f: the run, each group beside its plan, the totals. */
static void write_text(FILE *f, const fsdp_stats_sources *src, const fsdp_group_tally *plan)
{
    const fsdp_engine *e = src->e;
    const fsdp_ctl *ctl = fsdp_engine_ctl(e);
    const fsdp_coll *coll = fsdp_engine_coll(e);
    int ngroups = fsdp_engine_nflats(e) / 2;
    fprintf(f, "{\"world\": %d, \"strategy\": \"%s\", \"backend\": \"%s\", \"steps\": %d,\n \"groups\": [",
            ctl->world, fsdp_strategy_str(fsdp_engine_cfg(e)->strategy), coll ? coll->name : ctl->name,
            fsdp_engine_steps(e));
    for (int g = 0; g < ngroups; ++g) {
        fputs(g ? ",\n  " : "\n  ", f);
        write_group(f, src, g, &plan[g]);
    }
    write_totals(f, src);
}

/* PATH.tmp written, then renamed over PATH: whole or not at all. */
static fsdp_status write_file(const fsdp_stats_sources *src, const fsdp_group_tally *plan, const char *path)
{
    char *tmp = malloc(strlen(path) + 5);
    if (!tmp) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(tmp);
        return fsdp_fail(FSDP_ERR_IO, "cannot write the stats file %s", path);
    }
    write_text(f, src, plan);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        free(tmp);
        return fsdp_fail(FSDP_ERR_IO, "cannot write the stats file %s", path);
    }
    free(tmp);
    return FSDP_OK;
}

fsdp_status fsdp_write_stats(const fsdp_stats_sources *src, const char *path)
{
    const fsdp_engine *e = src->e;
    int ngroups = fsdp_engine_nflats(e) / 2;
    fsdp_group_tally *plan = calloc((size_t)ngroups + 1, sizeof *plan);
    if (!plan) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = fsdp_memplan_step_bytes(e, fsdp_engine_net(e)->subdivisions, plan);
    if (s == FSDP_OK) s = write_file(src, plan, path);
    free(plan);
    return s;
}
