/* test_report: the planner's arithmetic (plugin/report/): the worlds
 * -fsdp-plan reads, and its rows for worlds past two, laid out again from
 * one build (fsdp_memplan_predict_world), against a build at each world,
 * under each strategy; in this process, no Darknet run, no mpirun. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include "dn_plugin.h"
#include "fsdp_planner.h"
#include "fsdp_worlds.h"

static void worlds_are(const char *text, const int *want, int n)
{
    fsdp_worlds w;
    cr_assert_eq(fsdp_worlds_parse(text, &w), FSDP_OK, "%s", text);
    cr_assert_eq(w.n, n, "%s: %d worlds, expected %d", text, w.n, n);
    for (int i = 0; i < n; ++i) cr_assert_eq(w.world[i], want[i], "%s: world %d", text, i);
    fsdp_worlds_free(&w);
}

Test(worlds, a_number_alone_is_every_world_up_to_it)
{
    worlds_are("4", (int[]){ 1, 2, 3, 4 }, 4);
    worlds_are("1", (int[]){ 1 }, 1);
}

Test(worlds, lists_and_ranges_ascending_each_once)
{
    worlds_are("8,64,512", (int[]){ 8, 64, 512 }, 3);
    worlds_are("512,8,64,8", (int[]){ 8, 64, 512 }, 3);
    worlds_are("3-5,1,4-6", (int[]){ 1, 3, 4, 5, 6 }, 5);
    worlds_are("7-7", (int[]){ 7 }, 1);
    fsdp_worlds w;
    cr_assert_eq(fsdp_worlds_parse("1-4096", &w), FSDP_OK);
    cr_assert(w.n == 4096 && w.world[0] == 1 && w.world[4095] == 4096);
    fsdp_worlds_free(&w);
}

/* Machines as -fsdp-link reads them: after the one-machine world of the
 * same ranks; 1xL is the world L. */
Test(worlds, machines_of_equal_ranks)
{
    fsdp_worlds w;
    cr_assert_eq(fsdp_worlds_parse("8x4,32,2x2,4,1x4,2x2", &w), FSDP_OK);
    const int world[] = { 4, 4, 32, 32 }, machines[] = { 1, 2, 1, 8 };
    cr_assert_eq(w.n, 4);
    char label[32];
    const char *labels[] = { "4", "2x2", "32", "8x4" };
    for (int i = 0; i < 4; ++i) {
        cr_assert(w.world[i] == world[i] && w.machines[i] == machines[i], "entry %d: %d on %d", i, w.world[i],
                  w.machines[i]);
        fsdp_worlds_label(&w, i, label, sizeof label);
        cr_assert_str_eq(label, labels[i]);
    }
    fsdp_worlds_free(&w);
    cr_assert_eq(fsdp_worlds_parse("64x64", &w), FSDP_OK);
    cr_assert(w.n == 1 && w.world[0] == 4096 && w.machines[0] == 64);
    fsdp_worlds_free(&w);
}

Test(worlds, malformed_or_out_of_range_refused)
{
    const char *bad[] = { "", "x", "0", "4097", "5-3", "1,,2", "1-", ",1", "2,", "-3", "1-4097", "3 ", "0x4", "2x", "x4", "2x2-4", "65x64", "2x2x2", "+2" };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; ++k) {
        fsdp_worlds w;
        cr_assert_eq(fsdp_worlds_parse(bad[k], &w), FSDP_ERR_CONFIG, "'%s' refused", bad[k]);
        cr_assert(w.n == 0 && !w.world);
    }
}

/* ---- rows laid out again against builds ------------------------------------ */

static const char *cfg_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/cfg/%s", getenv("FSDP_SOURCE") ? getenv("FSDP_SOURCE") : ".", name);
    return path;
}

static void same(const fsdp_mem_prediction *a, const fsdp_mem_prediction *b, const char *what)
{
    const size_t *x[] = { &a->activations, &a->build, &a->setup, &a->model_state, &a->step_buffers,
                          &a->node_shared, &a->collective_scratch, &a->peak, &a->pss },
                 *y[] = { &b->activations, &b->build, &b->setup, &b->model_state, &b->step_buffers,
                          &b->node_shared, &b->collective_scratch, &b->peak, &b->pss };
    const char *name[] = { "activations", "build", "setup", "model_state", "step_buffers", "node_shared",
                           "collective_scratch", "peak", "pss" };
    for (int k = 0; k < 9; ++k)
        cr_assert_eq(*x[k], *y[k], "%s: %s %zu laid out again, %zu built", what, name[k], *x[k], *y[k]);
}

/* The host pool records the allocator's usable size of each buffer, which
 * turns on whether glibc maps it apart: a fixed threshold, as the plugin
 * sets at start (plugin_main.c), not glibc's, which moves as a process
 * frees. */
static void plugin_malloc(void) { mallopt(M_MMAP_THRESHOLD, 4 << 20); }

/* Under each strategy, at worlds that pad their shards differently (odd,
 * prime, a power of two), from the build at two ranks. */
static void laid_out_as_built(const char *cfg, const char *keys)
{
    const int worlds[] = { 3, 8, 13, 33 };
    for (int s = FSDP_SHARD_FULL; s <= FSDP_SHARD_NONE; ++s)
        for (size_t k = 0; k < sizeof worlds / sizeof *worlds; ++k) {
            fsdp_mem_prediction laid, built;
            cr_assert_eq(fsdp_planner_predict(cfg, keys, (fsdp_strategy)s, 2, 1, worlds[k], 1, &dn_plugin, &laid), FSDP_OK);
            cr_assert_eq(fsdp_planner_predict(cfg, keys, (fsdp_strategy)s, worlds[k], 1, worlds[k], 1, &dn_plugin, &built),
                         FSDP_OK);
            char what[256];
            snprintf(what, sizeof what, "%s [%s] strategy %d, %d ranks", cfg, keys, s, worlds[k]);
            same(&laid, &built, what);
        }
}

/* On several machines, from the build on two machines of two: node memory
 * and its slots per machine, hybrid sharding's exchanges between peers. */
static void machines_laid_out_as_built(const char *cfg, const char *keys)
{
    const int machines[] = { 3, 8, 4 }, ranks[] = { 4, 4, 3 };
    for (int s = FSDP_SHARD_FULL; s <= FSDP_SHARD_NONE; ++s)
        for (size_t k = 0; k < sizeof machines / sizeof *machines; ++k) {
            int world = machines[k] * ranks[k];
            fsdp_mem_prediction laid, built;
            cr_assert_eq(fsdp_planner_predict(cfg, keys, (fsdp_strategy)s, 4, 2, world, machines[k], &dn_plugin,
                                              &laid), FSDP_OK);
            cr_assert_eq(fsdp_planner_predict(cfg, keys, (fsdp_strategy)s, world, machines[k], world, machines[k],
                                              &dn_plugin, &built), FSDP_OK);
            char what[256];
            snprintf(what, sizeof what, "%s [%s] strategy %d, %dx%d", cfg, keys, s, machines[k], ranks[k]);
            same(&laid, &built, what);
        }
}

Test(rows, several_machines_hybrid_and_copying, .init = plugin_malloc)
{
    machines_laid_out_as_built(cfg_path("bench/scale.cfg"), "shard_node_shared=1\n");
    machines_laid_out_as_built(cfg_path("bench/scale.cfg"), "");
    machines_laid_out_as_built(cfg_path("tests/tiny.cfg"), "adam=1\nsubdivisions=2\nshard_node_shared=1\n");
}

/* On 4 machines of 3 under hybrid sharding against one machine of 12: the
 * same shards; a rank reads the gradient slots of its machine's 3 ranks
 * (and as many reduce slots) instead of 12, so it maps less node memory;
 * but its PSS share of its machine's node memory (every parameter once,
 * 2 x 3 slots) is a third, not a twelfth, so it is larger. */
Test(rows, node_memory_per_machine, .init = plugin_malloc)
{
    fsdp_mem_prediction one, four;
    const char *cfg = cfg_path("bench/scale.cfg");
    cr_assert_eq(fsdp_planner_predict(cfg, "shard_node_shared=1\n", FSDP_SHARD_FULL, 2, 1, 12, 1, &dn_plugin, &one),
                 FSDP_OK);
    cr_assert_eq(fsdp_planner_predict(cfg, "shard_node_shared=1\n", FSDP_SHARD_FULL, 4, 2, 12, 4, &dn_plugin, &four),
                 FSDP_OK);
    cr_assert_gt(four.node_shared, 0);
    cr_assert_lt(four.node_shared, one.node_shared, "node memory mapped on 4x3 %zu, on one machine of 12 %zu",
                 four.node_shared, one.node_shared);
    cr_assert_eq(four.model_state, one.model_state);
    cr_assert_gt(four.pss, one.pss, "PSS on 4x3 %zu, on one machine of 12 %zu", four.pss, one.pss);
}

Test(rows, four_groups_node_shared_and_copying, .init = plugin_malloc)
{
    laid_out_as_built(cfg_path("bench/scale.cfg"), "");
    laid_out_as_built(cfg_path("bench/scale.cfg"), "shard_node_shared=0\n");
}

Test(rows, nested_groups_adam_and_micro_batches, .init = plugin_malloc)
{
    laid_out_as_built(cfg_path("tests/tiny.cfg"), "adam=1\nsubdivisions=2\n");
}

Test(rows, recomputed_groups, .init = plugin_malloc)
{
    laid_out_as_built(cfg_path("tests/recompute.cfg"), "");
}

/* By hand: under `none` every rank keeps the whole model with SGD's
 * momentum, 2 x 4 bytes a parameter (scale.cfg: 5265894, at any world);
 * under `full` with node-shared parameters off, each flat's shard and its
 * momentum, 2 x 4 bytes of ceil(count / world) each. */
Test(rows, model_state_by_hand)
{
    fsdp_mem_prediction p;
    cr_assert_eq(fsdp_planner_predict(cfg_path("bench/scale.cfg"), "", FSDP_SHARD_NONE, 2, 1, 100, 1, &dn_plugin, &p),
                 FSDP_OK);
    cr_assert_eq(p.model_state, (size_t)8 * 5265894);
    cr_assert_eq(fsdp_planner_predict(cfg_path("bench/scale.cfg"), "shard_node_shared=0\n", FSDP_SHARD_FULL, 2, 1,
                                      1000, 1, &dn_plugin, &p), FSDP_OK);
    cr_assert_geq(p.model_state, (size_t)8 * 5265894 / 1000);
    cr_assert_leq(p.model_state, (size_t)8 * (5265894 / 1000 + 1 + 16 * 5));   /* 5 groups, each padded */
}
