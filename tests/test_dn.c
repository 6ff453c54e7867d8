/* test_dn: what the engine does to Darknet's layers beside their
 * parameters (dn/), each module on a network parsed in this process: no
 * Darknet run, no mpirun; the self backend where a world is needed.
 * Staging's slices and their way back, the frozen layers' wrappers,
 * synchronized batch norm's global values, recomputation's choice of what
 * to keep. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_bn.h"
#include "fsdp_cfg.h"
#include "fsdp_delta_pool.h"
#include "fsdp_frozen.h"
#include "fsdp_groups.h"
#include "fsdp_recompute.h"
#include "fsdp_stage.h"
#include "parser.h"

static network *parse(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/cfg/tests/%s", getenv("FSDP_SOURCE") ? getenv("FSDP_SOURCE") : ".", name);
    network *net = parse_network_cfg(path);
    cr_assert_not_null(net, "%s", path);
    return net;
}

static void key(fsdp_cfg *c, int layer, const char *k, const char *v)
{
    fsdp_cfg_option(c, "t.cfg", layer + 10, layer, k, v);
}

/* ---- staging: a rank's slices from build to take-back ---------------------- */

Test(stage, a_layer_keeps_its_slices_and_takes_them_back_whole)
{
    network *net = parse("tiny.cfg");   /* conv 2x2x3x7 + 7: 84 weights, 7 biases */
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    cr_assert_eq(fsdp_backend_self_create(&ctl, &coll), FSDP_OK);
    fsdp_stage s = { .enabled = 1, .rank = 0, .world = 1, .coll = coll };
    layer *l = &net->layers[0];
    float *w = malloc(84 * sizeof *w);
    memcpy(w, l->weights, 84 * sizeof *w);
    float b0 = l->biases[0] = 1.5f;
    cr_assert_eq(fsdp_stage_layer_built(&s, net, 0), FSDP_OK);
    cr_assert_eq(s.layers[0].state, FSDP_STAGE_SLICED);
    cr_assert(!l->weights && !l->biases, "Darknet's arrays freed: the slices alone");
    cr_assert_eq(fsdp_stage_take_back(&s, net, 0), FSDP_OK);
    cr_assert_eq(s.layers[0].state, FSDP_STAGE_GATHERED);
    cr_assert_arr_eq(l->weights, w, 84 * sizeof *w, "the same floats, whole again");
    cr_assert_float_eq(l->biases[0], b0, 0);
    cr_assert_eq(s.gather_bytes, (84 + 7) * sizeof(float), "every rank's slices gathered");
    cr_assert_eq(fsdp_stage_take_back(&s, net, 0), FSDP_OK, "GATHERED: no-op");
    cr_assert_eq(fsdp_stage_layer_built(&s, net, 1), FSDP_OK, "a layer without parameters");
    free(w);
    fsdp_stage_free(&s);
    free_network(net);
    fsdp_coll_free(coll);
    fsdp_ctl_free(ctl);
}

Test(stage, each_rank_keeps_an_equal_padded_slice)
{
    cr_assert_eq(fsdp_stage_slice(84, 1), 84);
    cr_assert_eq(fsdp_stage_slice(84, 5), 17, "ceil(84 / 5)");
    cr_assert_eq(fsdp_stage_slice(7, 8), 1, "more ranks than floats: one each, padded");
}

/* ---- frozen layers: wrappers standing in for Darknet's functions ----------- */

Test(frozen, frozen_layers_run_wrapped_and_get_their_own_back)
{
    network *net = parse("tiny.cfg");   /* conv, maxpool, conv, connected, connected, softmax */
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "frozen", "1");
    key(&c, 3, "frozen", "1");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    cr_assert_eq(fsdp_frozen_check_plan(&p, &c, net), FSDP_OK);
    void (*fwd[6])(struct layer, struct network), (*bwd[6])(struct layer, struct network);
    for (int i = 0; i < net->n; ++i) {
        fwd[i] = net->layers[i].forward;
        bwd[i] = net->layers[i].backward;
    }
    fsdp_layer_fns *orig;
    cr_assert_eq(fsdp_frozen_install(&p, net, &orig), FSDP_OK);
    for (int i = 0; i < net->n; ++i) {
        int frozen = i == 0 || i == 3;
        cr_assert_eq(net->layers[i].forward != fwd[i], frozen, "layer %d's forward %s", i,
                     frozen ? "wrapped" : "its own");
        cr_assert_eq(orig[i].forward, fwd[i], "layer %d's own forward kept", i);
    }
    /* Layer 3 has trainable layers below it (layers 1, 2): it passes deltas
     * back through a wrapper; layer 0 has none below, so no backward. */
    cr_assert(p.need_bwd[3] && net->layers[3].backward != bwd[3]);
    fsdp_frozen_uninstall(net, orig);
    for (int i = 0; i < net->n; ++i) {
        cr_assert_eq(net->layers[i].forward, fwd[i], "layer %d: Darknet's forward again", i);
        cr_assert_eq(net->layers[i].backward, bwd[i], "layer %d: Darknet's backward again", i);
    }
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
    free_network(net);
}

/* ---- synchronized batch norm: sums over ranks made global values ----------- */

/* Rank 0 of 4 on the null backend, whose all-reduce leaves each rank's own
 * values: the sum over ranks is this rank's alone, so what is left to see
 * is each quantity's factor (fsdp_bn.h), the order mean_delta waits in, and
 * the bytes counted per group. */
Test(bn, each_quantity_becomes_its_global_value)
{
    network *net = parse("tiny.cfg");
    net->train = 1;
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, 0, "shard_group", "body");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    cr_assert_eq(fsdp_backend_null_create(4, &ctl, &coll), FSDP_OK);
    fsdp_mem_ctx mem = { .align = 1 };
    fsdp_bn bn = { 0 };
    cr_assert_eq(fsdp_bn_attach(&bn, net, ctl, coll, &mem, &p), FSDP_OK);
    float mean[2] = { 4, 8 }, var[1] = { 39 }, md[1] = { 4 }, vd[1] = { 8 };
    cr_assert_eq(fsdp_bn_sync(&bn, net, 0, DN_BN_MEAN, mean, 2, 10), FSDP_OK);
    cr_assert(mean[0] == 1 && mean[1] == 2, "the mean: the average over 4 ranks");
    cr_assert_eq(fsdp_bn_sync(&bn, net, 0, DN_BN_VARIANCE, var, 1, 10), FSDP_OK);
    cr_assert_float_eq(var[0], 9.f, 1e-5, "the variance: the sum times (10 - 1) / (4 * 10 - 1)");
    cr_assert_eq(fsdp_bn_sync(&bn, net, 3, DN_BN_MEAN_DELTA, md, 1, 10), FSDP_OK);
    cr_assert_eq(md[0], 4, "mean_delta waits for variance_delta");
    cr_assert_eq(fsdp_bn_sync(&bn, net, 3, DN_BN_VARIANCE_DELTA, vd, 1, 10), FSDP_OK);
    cr_assert(md[0] == 1 && vd[0] == 2, "both deltas averaged, in one all-reduce");
    cr_assert_eq(bn.bytes, 5 * sizeof(float));
    cr_assert_eq(bn.group_bytes[p.layer_group[0]], 3 * sizeof(float), "layer 0's, in its group");
    cr_assert_eq(bn.group_bytes[0], 2 * sizeof(float), "layer 3's, in the root");
    cr_assert_eq(fsdp_bn_sync(&bn, net, 0, DN_BN_MEAN, mean, 2, 1), FSDP_ERR_CONFIG,
                 "one value per channel has no variance to combine");
    net->train = 0;
    cr_assert_eq(fsdp_bn_sync(&bn, net, 0, DN_BN_MEAN, mean, 2, 10), FSDP_OK);
    cr_assert(mean[0] == 1 && bn.bytes == 5 * sizeof(float), "inference moves nothing");
    fsdp_bn_free(&bn);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
    free_network(net);
    fsdp_coll_free(coll);
    fsdp_ctl_free(ctl);
}

/* ---- recomputation: which layers keep their activations -------------------- */

/* recompute.cfg: group a = layers 0-4 (conv, conv, shortcut from 0, dropout,
 * conv), group b = layers 5-7 (conv, upsample, route of 6 and 2), then the
 * root (maxpool, conv, connected, softmax); [net] recompute=1. */
Test(recompute, a_group_keeps_what_later_layers_read)
{
    network *net = parse("recompute.cfg");
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    key(&c, -1, "recompute", "1");
    for (int i = 0; i < 5; ++i) key(&c, i, "shard_group", "a");
    for (int i = 5; i < 8; ++i) key(&c, i, "shard_group", "b");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    fsdp_recompute r = { .enabled = 1 };
    cr_assert_eq(fsdp_recompute_plan(&r, &p, &c, net, 0), FSDP_OK);
    int a = p.layer_group[0], b = p.layer_group[5];
    cr_assert(r.group_on[a] && r.group_on[b] && !r.group_on[0], "a and b recompute; the root holds the loss");
    cr_assert_eq(r.ngroups_on, 2);
    fsdp_mem_ctx mem = { .align = 1 };
    fsdp_delta_pool deltas = { 0 };
    cr_assert_eq(fsdp_recompute_setup(&r, &mem, net, &deltas), FSDP_OK);
    /* Kept: each group's last layer (4, 7) and the shortcut a route past
     * group a names (2); inner layers give their outputs to the arena. */
    int kept[] = { 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1 };
    for (int i = 0; i < net->n; ++i)
        cr_assert_eq(net->layers[i].output != NULL, kept[i], "layer %d's output %s", i,
                     kept[i] ? "kept" : "in the arena, between passes at nothing");
    cr_assert_gt(fsdp_recompute_bytes(&r), 0);
    /* Group a's forward: its inner layers in the arena, out again after. */
    fsdp_recompute_enter_forward(&r, net, a);
    cr_assert(net->layers[0].output && net->layers[1].output, "in the arena for the forward");
    cr_assert_null(net->layers[5].output, "group b's stay out");
    fsdp_recompute_leave(&r, net, a);
    cr_assert_null(net->layers[0].output);
    fsdp_recompute_release(&r, &mem, net);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
    free_network(net);
}

Test(recompute, a_group_the_cfg_names_that_cannot_is_refused)
{
    network *net = parse("tiny.cfg");   /* softmax in the root; a loss cannot recompute */
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    for (int i = 3; i < 6; ++i) key(&c, i, "shard_group", "head");
    key(&c, 3, "recompute", "1");
    fsdp_layout_plan p;
    cr_assert_eq(fsdp_plan_build(&p, &c, net), FSDP_OK);
    fsdp_recompute r = { .enabled = 1 };
    cr_assert_eq(fsdp_recompute_plan(&r, &p, &c, net, 0), FSDP_ERR_CONFIG);
    fsdp_recompute_release(&r, &(fsdp_mem_ctx){ .align = 1 }, net);
    fsdp_plan_free(&p);
    fsdp_cfg_free(&c);
    free_network(net);
}
