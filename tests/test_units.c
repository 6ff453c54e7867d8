/* Criterion unit tests (single process): cfg keys, the group plan, the step
 * plan, the sharded optimizer against Darknet's own update, and the ABI stamp's comparison. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_engine.h"
#include "fsdp_flat.h"
#include "fsdp_groups.h"
#include "fsdp_mem.h"
#include "fsdp_optim.h"
#include "fsdp_stepplan.h"
#include "fsdp_sum.h"
#include "connected_layer.h"
#include "darknet_plugin.h"
#include "parser.h"

/* ---- cfg keys ---------------------------------------------------------- */

Test(cfg, claims_its_keys_and_parses_values)
{
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 2, -1, "shard", "grad_op"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 3, -1, "shard_auto_group", "1000"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 4, -1, "batch", "8"), 0, "Darknet's own key is not ours");
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 9, 2, "frozen", "1"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 10, 2, "shard_group", "trunk.block-1_a"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 11, 2, "filters", "8"), 0);
    cr_assert_eq(c.strategy, FSDP_SHARD_GRAD_OP);
    cr_assert_eq(c.auto_group, 1000);
    cr_assert_eq(c.nlayers, 3);
    cr_assert_eq(c.layers[2].frozen, 1);
    cr_assert_str_eq(c.layers[2].group, "trunk.block-1_a");
    cr_assert_eq(c.layers[2].group_line, 10);
    cr_assert_eq(c.error, FSDP_OK);
    fsdp_cfg_free(&c);
}

Test(cfg, rejects_bad_values_but_keeps_reading)
{
    const char *bad[][3] = { { "-1", "shard", "zero3" }, { "-1", "reshard_after_forward", "2" },
                             { "-1", "shard_prefetch", "yes" }, { "-1", "shard_auto_group", "1e3" },
                             { "-1", "shard_foo", "1" }, { "-1", "frozen", "1" }, { "0", "frozen", "true" },
                             { "0", "shard_group", "a..b" }, { "0", "shard_group", ".a" },
                             { "0", "shard_group", "a." }, { "0", "shard_group", "a/b" }, { "0", "shards", "1" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        fsdp_cfg c;
        fsdp_cfg_init(&c);
        cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 7, atoi(bad[i][0]), bad[i][1], bad[i][2]), 1,
                     "%s=%s is the plugin's key", bad[i][1], bad[i][2]);
        cr_assert_eq(c.error, FSDP_ERR_CONFIG, "%s=%s must be an error", bad[i][1], bad[i][2]);
        fsdp_cfg_free(&c);
    }
}

Test(cfg, group_names)
{
    cr_assert(fsdp_group_name_valid("a"));
    cr_assert(fsdp_group_name_valid("trunk.block1.conv-2_x"));
    cr_assert_not(fsdp_group_name_valid(""));
    cr_assert_not(fsdp_group_name_valid("a..b"));
    cr_assert_not(fsdp_group_name_valid("a.b."));
    cr_assert_not(fsdp_group_name_valid("(root)"));
}

/* ---- the plan: groups, spans, backward analysis ------------------------- */

static network *tiny_net(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/cfg/tests/tiny.cfg", getenv("FSDP_SOURCE") ? getenv("FSDP_SOURCE") : ".");
    return parse_network_cfg(path);
}

static void key(fsdp_cfg *c, int layer, const char *k, const char *v)
{
    fsdp_cfg_option(c, "t.cfg", layer + 10, layer, k, v);
}

Test(plan, nested_groups_spans_and_backward)
{
    network *net = tiny_net();   /* conv, maxpool, conv, connected, connected, softmax */
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "shard_group", "trunk.a");
    key(&c, 0, "frozen", "1");
    key(&c, 1, "shard_group", "trunk.a");
    key(&c, 2, "shard_group", "trunk.b");
    key(&c, 2, "frozen", "1");
    key(&c, 3, "shard_group", "head");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    cr_assert_eq(p.ngroups, 5);   /* root, trunk, trunk.a, trunk.b, head */
    cr_assert_str_eq(p.groups[0].name, FSDP_ROOT_NAME);
    int a = p.layer_group[0], b = p.layer_group[2], h = p.layer_group[3];
    cr_assert_str_eq(p.groups[a].name, "trunk.a");
    cr_assert_str_eq(p.groups[p.groups[a].parent].name, "trunk");
    for (int g = 1; g < p.ngroups; ++g)
        cr_assert_lt(p.groups[g].parent, g, "group %s comes after its parent (outer groups gather first)",
                     p.groups[g].name);
    cr_assert_eq(p.groups[p.groups[a].parent].span_first, 0);
    cr_assert_eq(p.groups[p.groups[a].parent].span_last, 2);
    cr_assert_eq(p.groups[b].span_first, 2);
    cr_assert_eq(p.layer_group[4], 0);
    cr_assert_eq(p.groups[h].nlayers, 1);
    /* Frozen prefix: no backward through layers 0-2; the head and above need it. */
    unsigned char need[] = { 0, 0, 0, 1, 1, 1 };
    for (int i = 0; i < 6; ++i) cr_assert_eq(p.need_bwd[i], need[i], "layer %d", i);
    cr_assert_eq(p.layer_params[0], 91);
    cr_assert_eq(p.layer_params[2], 384);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
}

Test(plan, a_trainable_layer_below_makes_frozen_layers_need_backward)
{
    network *net = tiny_net();
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 2, "frozen", "1");
    key(&c, 3, "frozen", "1");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    for (int i = 0; i < 6; ++i) cr_assert_eq(p.need_bwd[i], 1, "layer %d", i);
    cr_assert_eq(p.trainable[2], 0);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
}

Test(plan, crossing_spans_are_an_error)
{
    network *net = tiny_net();
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "shard_group", "x");
    key(&c, 1, "shard_group", "y");
    key(&c, 2, "shard_group", "x");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_ERR_CONFIG);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
}

Test(plan, an_ancestors_layer_inside_a_childs_span_nests)
{
    network *net = tiny_net();
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "shard_group", "trunk");
    key(&c, 2, "shard_group", "trunk");   /* layer 1 stays in the root, inside trunk's span */
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    cr_assert_eq(p.layer_group[1], 0);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
}

Test(plan, auto_groups_collect_ungrouped_layers)
{
    network *net = tiny_net();
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    fsdp_cfg_option(&c, "t.cfg", 2, -1, "shard_auto_group", "400");
    key(&c, 4, "shard_group", "out");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    /* 91 + 0 + 384 >= 400 closes auto0 after layer 2; layer 3 (2435) opens auto1;
     * layer 4 is named; layer 5 (no parameters) opens auto2. */
    cr_assert_str_eq(p.groups[p.layer_group[0]].name, "auto0");
    cr_assert_eq(p.layer_group[2], p.layer_group[0]);
    cr_assert_str_eq(p.groups[p.layer_group[3]].name, "auto1");
    cr_assert_str_eq(p.groups[p.layer_group[4]].name, "out");
    cr_assert_str_eq(p.groups[p.layer_group[5]].name, "auto2");
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
}

/* ---- the step plan ------------------------------------------------------- */

/* The ops at one point, as "unshard head.train, grad_point head.train"; an
 * op that applies only in some steps carries them: "[inference]". */
static const char *render(const fsdp_step_plan *sp, const fsdp_layout_plan *lp, int i, fsdp_at at)
{
    static char out[1024];
    static const char *kind[] = { "unshard", "prefetch", "reshard", "grad_point", "grad_unpoint", "reduce",
                                  "settle", "step", "acts_in", "acts_out", "recompute", "acts_back" };
    static const char *when[] = { "", " [training]", " [inference]", " [last micro]", " [not last micro]" };
    int n;
    const fsdp_op *ops = i < 0 ? fsdp_step_plan_update(sp, &n) : fsdp_step_plan_at(sp, i, at, &n);
    out[0] = 0;
    for (int k = 0; k < n; ++k) {
        const fsdp_op *o = &ops[k];
        char one[128];
        if (o->group < 0) snprintf(one, sizeof one, "%s", kind[o->kind]);
        else snprintf(one, sizeof one, "%s %s.%s%s", kind[o->kind], lp->groups[o->group].name,
                      o->flat == FSDP_FLAT_FROZEN ? "frozen" : "train", when[o->when]);
        strcat(out, k ? ", " : "");
        strcat(out, one);
    }
    return out;
}

Test(stepplan, a_frozen_trunk_a_head_that_stays_and_prefetch)
{
    network *net = tiny_net();   /* conv, maxpool, conv, connected, connected, softmax */
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "shard_group", "trunk");
    key(&c, 0, "frozen", "1");
    key(&c, 1, "shard_group", "trunk");
    key(&c, 2, "shard_group", "mid");
    key(&c, 3, "shard_group", "head");
    fsdp_layout_plan lp;
    cr_assert_eq(fsdp_plan_build(&lp, &c, net), FSDP_OK);
    fsdp_step_plan sp;
    fsdp_step_inputs in = { &lp, net, FSDP_SHARD_FULL, 1, 1 };
    cr_assert_eq(fsdp_step_plan_build(&sp, &in), FSDP_OK);
    int trunk = lp.layer_group[0], mid = lp.layer_group[2], head = lp.layer_group[3];
    /* The trunk needs no backward; head's backward comes first and only the
     * root's layers follow it: it stays gathered, as the root does. */
    cr_assert_eq(sp.groups[trunk].bwd_hi, -1);
    cr_assert_eq(sp.groups[mid].bwd_hi, 2);
    cr_assert(sp.groups[head].stays_gathered);
    cr_assert(sp.groups[0].stays_gathered);
    cr_assert_not(sp.groups[mid].stays_gathered);
    /* Outer groups gather first; the next span (mid) is prefetched. */
    cr_assert_str_eq(render(&sp, &lp, 0, FSDP_AT_FORWARD_BEFORE),
                     "unshard (root).train, unshard (root).frozen, unshard trunk.train, unshard trunk.frozen, "
                     "prefetch mid.train, prefetch mid.frozen");
    cr_assert_str_eq(render(&sp, &lp, 1, FSDP_AT_FORWARD_AFTER), "reshard trunk.frozen, reshard trunk.train");
    cr_assert_str_eq(render(&sp, &lp, 3, FSDP_AT_FORWARD_AFTER),
                     "reshard head.frozen, reshard head.train [inference]");
    cr_assert_str_eq(render(&sp, &lp, 5, FSDP_AT_FORWARD_AFTER),
                     "reshard (root).frozen, reshard (root).train [inference]");
    /* Backward: the root keeps its parameters; head prefetches mid. */
    cr_assert_str_eq(render(&sp, &lp, 5, FSDP_AT_BACKWARD_BEFORE),
                     "unshard (root).train, grad_point (root).train, prefetch head.train");
    cr_assert_str_eq(render(&sp, &lp, 4, FSDP_AT_BACKWARD_AFTER),
                     "reduce (root).train [last micro], grad_unpoint (root).train [not last micro]");
    cr_assert_str_eq(render(&sp, &lp, 3, FSDP_AT_BACKWARD_BEFORE),
                     "unshard head.train, grad_point head.train, prefetch mid.train");
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_BACKWARD_AFTER),
                     "reduce mid.train [last micro], grad_unpoint mid.train [not last micro], reshard mid.train, "
                     "reshard mid.frozen");
    cr_assert_str_eq(render(&sp, &lp, 1, FSDP_AT_BACKWARD_BEFORE), "");
    cr_assert_str_eq(render(&sp, &lp, -1, FSDP_AT_FORWARD_BEFORE),
                     "settle, step (root).train, reshard (root).train, reshard (root).frozen, step trunk.train, "
                     "reshard trunk.train, reshard trunk.frozen, step mid.train, reshard mid.train, reshard mid.frozen, "
                     "step head.train, reshard head.train, reshard head.frozen");
    fsdp_step_plan_free(&sp);
    /* A recomputed group: its inner activations into the arena for its
     * forward and out after it; before its backward, once gathered, its
     * forward again; out after its backward. */
    unsigned char recompute[8] = { 0 };
    recompute[mid] = 1;
    in.recompute = recompute;
    cr_assert_eq(fsdp_step_plan_build(&sp, &in), FSDP_OK);
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_FORWARD_BEFORE),
                     "unshard mid.train, unshard mid.frozen, acts_in mid.train, prefetch head.train, prefetch head.frozen");
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_FORWARD_AFTER),
                     "acts_out mid.train, reshard mid.frozen, reshard mid.train");
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_BACKWARD_BEFORE),
                     "unshard mid.train, recompute mid.train, grad_point mid.train");
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_BACKWARD_AFTER),
                     "reduce mid.train [last micro], grad_unpoint mid.train [not last micro], acts_out mid.train, "
                     "reshard mid.train, reshard mid.frozen");
    cr_assert_not(sp.groups[mid].acts_stay);
    fsdp_step_plan_free(&sp);
    /* head recomputed too: its backward comes first, only the root runs
     * between, so its activations stay in training and nothing runs again. */
    recompute[head] = 1;
    cr_assert_eq(fsdp_step_plan_build(&sp, &in), FSDP_OK);
    cr_assert(sp.groups[head].acts_stay);
    cr_assert_not(sp.groups[mid].acts_stay);
    cr_assert_str_eq(render(&sp, &lp, 3, FSDP_AT_FORWARD_AFTER),
                     "acts_out head.train [inference], reshard head.frozen, reshard head.train [inference]");
    cr_assert_str_eq(render(&sp, &lp, 3, FSDP_AT_BACKWARD_BEFORE),
                     "unshard head.train, acts_back head.train, grad_point head.train, prefetch mid.train");
    cr_assert_str_eq(render(&sp, &lp, 2, FSDP_AT_BACKWARD_BEFORE),
                     "unshard mid.train, recompute mid.train, grad_point mid.train");
    fsdp_step_plan_free(&sp);
    in.recompute = NULL;
    /* reshard_after_forward=0: every group stays, and backward prefetches nothing. */
    in.reshard_after_forward = 0;
    cr_assert_eq(fsdp_step_plan_build(&sp, &in), FSDP_OK);
    cr_assert(sp.groups[mid].stays_gathered);
    cr_assert_str_eq(render(&sp, &lp, 3, FSDP_AT_BACKWARD_BEFORE), "unshard head.train, grad_point head.train");
    fsdp_step_plan_free(&sp);
    fsdp_plan_free(&lp);
    fsdp_cfg_free(&c);
}

/* ---- the optimizer against Darknet's own update ------------------------- */

Test(optim, sgd_matches_update_connected_layer)
{
    int in = 13, out = 5;
    layer l = make_connected_layer(4, in, out, LINEAR, 0, 0);
    size_t nw = (size_t)in * out;
    float *w = malloc(nw * sizeof(float)), *m = malloc(nw * sizeof(float)), *g = malloc(nw * sizeof(float));
    float *b = malloc(out * sizeof(float)), *bm = malloc(out * sizeof(float)), *bg = malloc(out * sizeof(float));
    srand(3);
    for (size_t i = 0; i < nw; ++i) {
        w[i] = l.weights[i] = rand_uniform(-1, 1);
        m[i] = rand_uniform(-1, 1);
        g[i] = rand_uniform(-1, 1);
        l.weight_updates[i] = m[i] + g[i];   /* Darknet's one buffer: momentum plus new gradient */
    }
    for (int i = 0; i < out; ++i) {
        b[i] = l.biases[i] = rand_uniform(-1, 1);
        bm[i] = rand_uniform(-1, 1);
        bg[i] = rand_uniform(-1, 1);
        l.bias_updates[i] = bm[i] + bg[i];
    }
    update_args a = { .batch = 24, .learning_rate = 0.1f, .momentum = 0.9f, .decay = 0.0005f };
    update_connected_layer(l, a);
    fsdp_optim_args o = { 0.1f, 0.9f, 0.0005f, 24, 0, 0, 0, 0, 1 };
    fsdp_sgd(w, m, g, nw, 1, &o);
    fsdp_sgd(b, bm, bg, out, 0, &o);
    for (size_t i = 0; i < nw; ++i) {
        cr_assert_float_eq(w[i], l.weights[i], 1e-6, "weight %zu", i);
        cr_assert_float_eq(m[i], l.weight_updates[i], 1e-6, "momentum %zu", i);
    }
    for (int i = 0; i < out; ++i) {
        cr_assert_float_eq(b[i], l.biases[i], 1e-6, "bias %d (no decay)", i);
        cr_assert_float_eq(bm[i], l.bias_updates[i], 1e-6);
    }
}

Test(optim, adam_matches_darknets_gpu_update)
{
    /* adam_update_gpu: m = B1 m + (1-B1) d, v = B2 v + (1-B2) d^2 with
     * d = g - decay*batch*w, x += rate * mhat / (sqrt(vhat) + eps). */
    float w[3] = { 0.5f, -1.f, 2.f }, m[3] = { 0.1f, 0, -0.2f }, v[3] = { 0.01f, 0.02f, 0 };
    float g[3] = { 1.f, -2.f, 0.5f };
    fsdp_optim_args o = { 0.01f, 0, 0.001f, 8, 1, 0.9f, 0.999f, 1e-7f, 3 };
    double ew[3];
    for (int i = 0; i < 3; ++i) {
        double d = g[i] - 0.001 * 8 * w[i];
        double mi = 0.9 * m[i] + 0.1 * d, vi = 0.999 * v[i] + 0.001 * d * d;
        ew[i] = w[i] + 0.01 * (mi / (1 - pow(0.9, 3))) / (sqrt(vi / (1 - pow(0.999, 3))) + 1e-7);
    }
    fsdp_adam(w, m, v, g, 3, &o);
    for (int i = 0; i < 3; ++i) cr_assert_float_eq(w[i], ew[i], 1e-5, "w[%d] %g vs %g", i, w[i], ew[i]);
}

Test(optim, no_gradient_still_decays_and_keeps_momentum)
{
    float w = 1.f, m = 0.5f;
    fsdp_optim_args o = { 0.1f, 0.9f, 0.01f, 10, 0, 0, 0, 0, 1 };
    fsdp_sgd(&w, &m, NULL, 1, 1, &o);
    /* u = 0.5 - 0.01*10*1 = 0.4; w = 1 + 0.01*0.4; m = 0.36 */
    cr_assert_float_eq(w, 1.004f, 1e-6);
    cr_assert_float_eq(m, 0.36f, 1e-6);
}

/* The node-shared update reads the ranks' gradient slots straight into the
 * step: it must move exactly the floats of a reduced buffer summed in rank
 * order, for every term count (its own loops up to four, blocks beyond),
 * SGD with and without decay, and Adam; n crosses block boundaries. */
Test(optim, summed_terms_step_as_the_reduced_gradient)
{
    size_t n = 2 * FSDP_SUM_BLOCK + 37;
    float *w0 = malloc(n * sizeof(float)), *m0 = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
    float *w[2], *m[2], *v[2], *g[7], *sum = malloc(n * sizeof(float));
    for (int k = 0; k < 2; ++k) {
        w[k] = malloc(n * sizeof(float));
        m[k] = malloc(n * sizeof(float));
        v[k] = malloc(n * sizeof(float));
    }
    srand(11);
    for (int q = 0; q < 7; ++q) {
        g[q] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) g[q][i] = rand_uniform(-1, 1) * (q + 1);
    }
    for (size_t i = 0; i < n; ++i) {
        w0[i] = rand_uniform(-1, 1);
        m0[i] = rand_uniform(-1, 1);
        v0[i] = rand_uniform(0, 1);
    }
    for (int adam = 0; adam < 2; ++adam)
        for (int decays = 0; decays < 2; ++decays)
            for (int ng = 1; ng <= 7; ++ng) {
                fsdp_optim_args o = { 0.1f, 0.9f, 0.0005f, 24, adam, 0.9f, 0.999f, 1e-7f, 3 };
                for (int k = 0; k < 2; ++k) {
                    memcpy(w[k], w0, n * sizeof(float));
                    memcpy(m[k], m0, n * sizeof(float));
                    memcpy(v[k], v0, n * sizeof(float));
                }
                fsdp_sum_rows(sum, (const float *const *)g, ng, 0, n);
                fsdp_optim_step(0, w[0], m[0], adam ? v[0] : NULL, sum, n, decays, &o);
                fsdp_optim_step_sum(w[1], m[1], adam ? v[1] : NULL, (const float *const *)g, ng, n, decays, &o);
                cr_assert(memcmp(w[0], w[1], n * sizeof(float)) == 0, "weights differ: adam %d decays %d, %d terms",
                          adam, decays, ng);
                cr_assert(memcmp(m[0], m[1], n * sizeof(float)) == 0, "momentum differs: adam %d decays %d, %d terms",
                          adam, decays, ng);
                cr_assert(memcmp(v[0], v[1], n * sizeof(float)) == 0, "adam's v differs: %d terms", ng);
                cr_assert(memcmp(w[0], w0, n * sizeof(float)) != 0, "the step moved nothing");
            }
    for (int q = 0; q < 7; ++q) free(g[q]);
    for (int k = 0; k < 2; ++k) {
        free(w[k]);
        free(m[k]);
        free(v[k]);
    }
    free(w0);
    free(m0);
    free(v0);
    free(sum);
}

/* ---- the ABI stamp ------------------------------------------------------ */

/* A Darknet and a plugin that differ in any one field refuse each other:
 * test_abi.sh sees layer, network and GPU differ at once; here each alone. */
Test(abi, every_field_counts)
{
    const dn_abi cur = DN_ABI_CURRENT;
    cr_assert_eq(cur.hooks_size, sizeof(dn_hooks));
    dn_abi a = cur;
    cr_assert(dn_abi_equal(&a, &cur));
    a = cur; a.api_version++; cr_assert(!dn_abi_equal(&a, &cur), "api_version");
    a = cur; a.layer_size++; cr_assert(!dn_abi_equal(&a, &cur), "layer_size");
    a = cur; a.network_size++; cr_assert(!dn_abi_equal(&a, &cur), "network_size");
    a = cur; a.load_args_size++; cr_assert(!dn_abi_equal(&a, &cur), "load_args_size");
    a = cur; a.gpu = !a.gpu; cr_assert(!dn_abi_equal(&a, &cur), "gpu");
    a = cur; a.hooks_size -= sizeof(void *); cr_assert(!dn_abi_equal(&a, &cur), "hooks_size: a hook fewer");
}
