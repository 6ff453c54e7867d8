/* test_plan: the group plan (groups, spans, which layers need backward,
 * default groups) and a step plan's operations at each hook point. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_groups.h"
#include "fsdp_stepplan.h"
#include "darknet_plugin.h"
#include "parser.h"

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
