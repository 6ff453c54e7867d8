/* A step's time across machines, planned (fsdp_linkplan.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_cfg.h"
#include "fsdp_linkplan.h"
#include "fsdp_linkprobe.h"
#include "fsdp_planner.h"
#include "fsdp_quiet.h"
#include "fsdp_timeline.h"
#include "fsdp_wire.h"

/* What the link carries beyond the bytes handed to MPI: TCP/IP and
 * Ethernet headers (1448 bytes of payload in a 1514-byte frame) and MPI's
 * own; measured 2-4% on the tests' simulated machines. */
#define LINK_OVERHEAD 1.04

fsdp_status fsdp_link_parse(const char *text, fsdp_link_spec *out)
{
    int used = 0;
    *out = (fsdp_link_spec){ 0 };
    int n = sscanf(text, "%dx%d,%lf%n", &out->machines, &out->ranks, &out->mbit, &used);
    if (n == 3 && text[used] == ',') {
        int more = 0;
        if (sscanf(text + used + 1, "%lf%n", &out->latency_ms, &more) != 1) n = 0;
        used += 1 + more;
    }
    if (n != 3 || text[used] || out->machines < 1 || out->ranks < 1 || out->machines * out->ranks > 4096 ||
        !(out->mbit > 0) || out->latency_ms < 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link %s: expected MACHINESxRANKS,MBIT[,MS]: machines, ranks on "
                         "each, the link's Mbit/s each way and its latency in ms (e.g. 2x8,1000,0.1)", text);
    return FSDP_OK;
}

static int claim_plugin_key(void *c, const char *cfg, int line, int layer, const char *sec, const char *key,
                            const char *val)
{
    (void)c, (void)cfg, (void)line, (void)layer, (void)sec, (void)val;
    return fsdp_cfg_key_find(key) != NULL;
}

/* Stock Darknet's training step of cfg at its batch per rank, in seconds:
 * the best of three after one to warm up. */
static fsdp_status measure_compute(const char *cfg, dn_hooks *hooks, double *seconds)
{
    hooks->ctx = NULL;
    hooks->cfg_option = claim_plugin_key;
    fsdp_quiet_capture(0);
    network *net = parse_network_cfg((char *)cfg);
    fsdp_quiet_drop();
    hooks->cfg_option = NULL;
    if (!net) return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link: cannot build %s", cfg);
    srand(1);
    for (size_t i = 0; i < (size_t)net->inputs * (size_t)net->batch; ++i) net->input[i] = (float)rand() / RAND_MAX;
    *seconds = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
        double t0 = fsdp_tl_clock();
        for (int k = 0; k < net->subdivisions; ++k) train_network_datum(net);
        double t = fsdp_tl_clock() - t0;
        if (rep && t < *seconds) *seconds = t;
    }
    free_network(net);
    return FSDP_OK;
}

typedef struct setting {
    const char *name, *keys;
    int hybrid;
    fsdp_wire_format wire;
    double mb_each_way, link_s, plain_s, overlapped_s, peak_mb;
} setting;

/* Bytes one machine sends the others per step (as many come back). */
static double machine_bytes(const fsdp_link_spec *l, const fsdp_plan_step *st, int hybrid, fsdp_wire_format f)
{
    double world = (double)l->machines * l->ranks, parts = 0, coded = 0;
    for (int k = 0; k < st->nparts; ++k) {
        parts += 4.0 * (double)st->part_floats[k];
        coded += (double)fsdp_wire_bytes(f, st->part_floats[k]);
    }
    double share = parts > 0 ? coded / parts : 1;
    /* Per rank: hybrid sends its sums and its updated part to each peer;
     * full each part of its gathers and reduce-scatters once to each other
     * machine (hierarchical); all-reduces (batch norm) go point to point,
     * 2 count / N to each rank elsewhere, in fp32. */
    double per_rank = hybrid ? 2.0 * (l->machines - 1) * coded
                             : (double)(st->ag + st->rs) / world * (l->machines - 1) * share;
    per_rank += (double)st->ar * 2.0 * (world - l->ranks) / world;
    return per_rank * l->ranks;
}

/* The table for the machines l, a step's compute taking `compute` seconds
 * on each rank (as `how` says it was found). */
static fsdp_status plan_print(const char *cfg, const fsdp_link_spec *l, double compute, const char *how,
                              const char *budget, dn_hooks *hooks, FILE *out)
{
    double budget_mb = budget ? atof(budget) : 0;
    int world = l->machines * l->ranks;
    fsdp_mem_prediction mem[2];
    fsdp_plan_step step[2];
    FSDP_TRY(fsdp_planner_build(cfg, "shard=full\nshard_node_shared=0\n", l->machines, l->ranks, hooks, &mem[0],
                                &step[0]));
    FSDP_TRY(fsdp_planner_build(cfg, "shard=full\nshard_node_shared=1\n", l->machines, l->ranks, hooks, &mem[1],
                                &step[1]));
    setting s[6];
    const char *names[2] = { "shard=full", "shard=full, shard_node_shared=1 (hybrid)" };
    for (int k = 0; k < 6; ++k) {
        setting *x = &s[k];
        x->hybrid = k / 3;
        x->wire = (fsdp_wire_format)(k % 3);
        x->name = names[x->hybrid];
        const fsdp_plan_step *st = &step[x->hybrid];
        double bytes = l->machines > 1 ? machine_bytes(l, st, x->hybrid, x->wire) : 0;
        /* Each exchange between machines waits at least a round trip. */
        int exchanges = l->machines > 1 ? (x->hybrid ? 2 * st->nparts : st->exchanges + st->nparts) : 0;
        x->mb_each_way = bytes / 1e6;
        x->link_s = bytes * 8 * LINK_OVERHEAD / (l->mbit * 1e6) + exchanges * 2 * l->latency_ms / 1e3;
        x->plain_s = compute + x->link_s;
        /* Overlapped: the longer of the two, plus what the first group's
         * compute leaves uncovered. */
        double lo = compute < x->link_s ? compute : x->link_s, hi = compute < x->link_s ? x->link_s : compute;
        x->overlapped_s = hi + lo / (st->groups > 0 ? st->groups : 1);
        x->peak_mb = mem[x->hybrid].peak / 1e6;
    }
    fprintf(out, "\nA step on %d machines of %d ranks, %.6g Mbit/s each way, %.4f ms latency: %s "
            "(stock Darknet's step at %zu images per rank: %.4f s), the bytes of the plan:\n\n"
            "| setting | shard_wire | each way per machine and step (MB) | link (s) | step, exchanges then compute (s) "
            "| step, overlapped (s) | samples/s | peak per rank (MB) |\n|---|---|---|---|---|---|---|---|\n",
            l->machines, l->ranks, l->mbit, l->latency_ms, how, step[0].images, compute);
    int best = -1;
    for (int k = 0; k < 6; ++k) {
        setting *x = &s[k];
        int fits = !budget || x->peak_mb <= budget_mb;
        if (fits && (best < 0 || x->overlapped_s < s[best].overlapped_s)) best = k;
        fprintf(out, "| %s | %s | %.2f | %.3f | %.3f | %.3f | %.1f | %.1f%s |\n", x->name, fsdp_wire_name(x->wire),
                x->mb_each_way, x->link_s, x->plain_s, x->overlapped_s,
                (double)world * (double)step[0].images / x->overlapped_s, x->peak_mb, fits ? "" : " (over the budget)");
    }
    if (best < 0)
        fprintf(out, "\nNo setting fits %s MB per rank at %d ranks.\n", budget, world);
    else
        fprintf(out, "\nFastest%s%s%s: %s with shard_wire=%s, %.3f s a step (%s).\n", budget ? " within " : "",
                budget ? budget : "", budget ? " MB per rank" : "", s[best].name, fsdp_wire_name(s[best].wire),
                s[best].overlapped_s,
                s[best].wire == FSDP_WIRE_FP32 ? "exact" : "not exact: the weights move off stock Darknet's by the "
                "wire's rounding");
    return FSDP_OK;
}

fsdp_status fsdp_linkplan_run(const char *cfg, const char *spec, const char *budget, dn_hooks *hooks, FILE *out)
{
    fsdp_link_spec l;
    FSDP_TRY(fsdp_link_parse(spec, &l));
    double compute = 0;
    FSDP_TRY(measure_compute(cfg, hooks, &compute));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int shared = cores > 0 && l.ranks > cores;
    if (shared) compute *= (double)l.ranks / (double)cores;
    return plan_print(cfg, &l, compute, shared ? "the compute measured here, times the ranks per core (each machine "
                      "taken to be like this one)" : "the compute measured here (each machine taken to be like this "
                      "one)", budget, hooks, out);
}

fsdp_status fsdp_linkplan_probe_run(const char *cfg, const char *budget, dn_hooks *hooks, fsdp_ctl *ctl,
                                    fsdp_coll *coll, FILE *out)
{
    /* Every rank computes at once, as in training: the cores, memory and
     * caches they share are in the figure. */
    double compute = 0;
    fsdp_status s = fsdp_ctl_barrier(ctl);
    if (s == FSDP_OK) s = fsdp_ctl_all_ok(ctl, measure_compute(cfg, hooks, &compute), FSDP_ERR_CONFIG,
                                          "could not build the cfg");
    uint64_t ns = (uint64_t)(compute * 1e9);
    if (s == FSDP_OK) s = fsdp_ctl_max_u64(ctl, &ns, 1);
    fsdp_link_probed p;
    if (s == FSDP_OK) s = fsdp_link_probe(ctl, coll, &p);
    if (s != FSDP_OK) return s;
    fsdp_link_spec l = { .machines = p.machines, .ranks = p.ranks,
                         .mbit = p.bytes_per_s * 8 * LINK_OVERHEAD / 1e6, .latency_ms = p.latency_s * 1e3 };
    char how[200];
    snprintf(how, sizeof how, "the link as measured between these ranks (blocks of %.2g MB to each peer), the compute "
             "on every rank at once, the slowest rank's", p.block_bytes / 1e6);
    if (ctl->rank == 0) s = plan_print(cfg, &l, (double)ns / 1e9, how, budget, hooks, out);
    return fsdp_ctl_all_ok(ctl, s, FSDP_ERR_CONFIG, "could not plan the step");
}
