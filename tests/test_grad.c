/* test_grad: every transition of a gradient's table (plugin/core/fsdp_grad.h)
 * and each of its homes (the momentum, the pool, the node slot, the reduce
 * slot between machines), over the self and null backends with node memory
 * in plain arrays: no Darknet run, no mpirun. */
#include <criterion/criterion.h>
#include <signal.h>
#include "flat_fixture.h"

static const fsdp_flat_kind SGD = { .sharded = 1, .trainable = 1 };
static const fsdp_flat_kind ADAM = { .sharded = 1, .trainable = 1, .adam = 1 };

/* A trainable flat of layer i: 10 weights, 6 biases. */
static void train_flat(fixture *x, int i, fsdp_flat *f, fsdp_flat_kind kind)
{
    fsdp_tensor t[2];
    fixture_layer(x, i, 10, 6, t);
    cr_assert_eq(fsdp_flat_setup(&x->c, f, t, 2, kind), FSDP_OK);
}

Test(grad, world_of_one_sgd_accumulates_in_the_momentum)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 1, .rank = 0 });
    fsdp_flat f;
    train_flat(&x, 0, &f, SGD);
    fsdp_grad g = { 0 };
    cr_assert_eq(fsdp_grad_place_of(&x.c, &f, 0), FSDP_GRAD_AT_MOMENTUM);
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_ACCUMULATING && g.home == FSDP_GRAD_HOME_MOMENTUM && !g.buf);
    cr_assert_eq(x.layers[0].weight_updates, f.opt.m, "Darknet's weight_updates: the momentum");
    cr_assert_eq(x.layers[0].bias_updates, f.opt.m + 10);
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCED && !fsdp_grad_reduced(&g), "no separate gradient for the optimizer");
    cr_assert(rs == 16 * sizeof(float) && ar == 0, "a world of one counts the bytes");
    cr_assert_null(x.layers[0].weight_updates, "the layers point nowhere after the reduce");
    cr_assert_eq(fsdp_grad_spent(&x.c, &g), FSDP_OK);
    cr_assert_eq(g.state, FSDP_GRAD_NONE);
    cr_assert_not_null(f.opt.m, "the momentum stays");
    cr_assert_eq(x.pool.footprint, 0);
    fsdp_grad_release(&x.c, &g, &f);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(grad, pool_buffer_reduce_scatter_and_spent)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 4, .rank = 2 });
    fsdp_flat f;
    train_flat(&x, 0, &f, ADAM);
    fsdp_grad g = { 0 };
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    cr_assert(g.home == FSDP_GRAD_HOME_POOL && g.buf, "a zeroed buffer of its own");
    for (size_t k = 0; k < f.lay.nfull; ++k) cr_assert_float_eq(g.buf[k], 0.f, 0);
    cr_assert_eq(x.layers[0].weight_updates, g.buf);
    float *buf = g.buf;
    fsdp_grad_unpoint(&g, &f);
    cr_assert_null(x.layers[0].weight_updates, "between micro-batches the layers point nowhere");
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    cr_assert(g.buf == buf && g.state == FSDP_GRAD_ACCUMULATING, "a later micro-batch adds to the same buffer");
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCED && g.part && !g.buf, "this rank's part, the full buffer given back");
    cr_assert(rs == f.lay.nfull * sizeof(float) && ar == 0);
    size_t started, any;
    fsdp_backend_null_largest(x.coll, &started, &any);
    cr_assert(started == 0 && any == f.lay.shard, "a blocking reduce-scatter of one part");
    cr_assert_eq(fsdp_grad_spent(&x.c, &g), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_NONE && x.pool.live == 0, "everything back in the pool");
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(grad, started_reduce_scatter_waits)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 4, .rank = 0, .starts = 1 });
    fsdp_flat f;
    train_flat(&x, 0, &f, SGD);
    fsdp_grad g = { 0 };
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    float *buf = g.buf;
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCING && g.rs_source == buf, "the full buffer lives until the wait");
    cr_assert_null(fsdp_grad_reduced(&g), "the optimizer sees nothing yet");
    size_t started, any;
    fsdp_backend_null_largest(x.coll, &started, &any);
    cr_assert_eq(started, f.lay.shard);
    cr_assert_eq(fsdp_grad_reduce_wait(&x.c, &g), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCED && !g.rs_source && fsdp_grad_reduced(&g) == g.part);
    cr_assert_eq(fsdp_grad_spent(&x.c, &g), FSDP_OK);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(grad, none_all_reduces_the_whole_gradient_in_place)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 3, .rank = 1 });
    fsdp_flat f;
    train_flat(&x, 0, &f, (fsdp_flat_kind){ .sharded = 0, .trainable = 1, .whole = 1 });
    fsdp_grad g = { 0 };
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    float *buf = g.buf;
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCED && g.part == buf, "the buffer itself, summed");
    cr_assert(rs == 0 && ar == f.lay.count * sizeof(float));
    cr_assert_eq(fsdp_grad_spent(&x.c, &g), FSDP_OK);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(grad, node_slot_one_machine)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 4, .rank = 1, .machines = 1 });
    fsdp_flat a, b;
    train_flat(&x, 0, &a, SGD);
    train_flat(&x, 1, &b, SGD);
    fixture_node(&x, 2 * a.lay.nfull, a.lay.nfull);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &a, x.node_params), FSDP_OK);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &b, x.node_params + a.lay.nfull), FSDP_OK);
    fsdp_grad ga = { 0 }, gb = { 0 };
    x.slots[1 * a.lay.nfull + 3] = 7.f;   /* what a slot held before is no gradient */
    cr_assert_eq(fsdp_grad_point(&x.c, &ga, &a), FSDP_OK);
    cr_assert(ga.home == FSDP_GRAD_HOME_SLOT && ga.buf == x.slots + a.lay.nfull && x.node.slot_busy,
              "rank 1's slot, taken");
    cr_assert_float_eq(ga.buf[3], 0.f, 0, "zeroed");
    cr_assert_eq(fsdp_grad_point(&x.c, &gb, &b), FSDP_OK);
    cr_assert_eq(gb.home, FSDP_GRAD_HOME_POOL, "the slot is busy: a buffer of its own");
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &ga, &a, &rs, &ar), FSDP_OK);
    cr_assert(ga.state == FSDP_GRAD_IN_SLOTS && rs == a.lay.nfull * sizeof(float));
    int n;
    const float *const *terms = fsdp_grad_slot_terms(&x.c, &ga, &a, 1, &n);
    cr_assert_eq(n, 4, "one term per rank of the machine");
    for (int q = 0; q < 4; ++q)
        cr_assert_eq(terms[q], x.slots + (size_t)q * a.lay.nfull + 1 * a.lay.shard + 1, "rank %d's slot, rank 1's part",
                     q);
    cr_assert_eq(fsdp_grad_spent(&x.c, &ga), FSDP_OK);
    cr_assert(ga.state == FSDP_GRAD_NONE && !x.node.slot_busy, "the slot is free again");
    cr_assert_eq(fsdp_grad_reduce(&x.c, &gb, &b, &rs, &ar), FSDP_OK);
    cr_assert_eq(gb.state, FSDP_GRAD_REDUCED, "one machine: a buffer of its own reduce-scatters");
    cr_assert_eq(fsdp_grad_spent(&x.c, &gb), FSDP_OK);
    fsdp_flat_free(&x.c, &a);
    fsdp_flat_free(&x.c, &b);
    fixture_free(&x);
}

Test(grad, several_machines_reduce_slot_and_sums)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 4, .rank = 2, .machines = 2 });
    fsdp_flat a, b;
    train_flat(&x, 0, &a, SGD);
    train_flat(&x, 1, &b, SGD);
    fixture_node(&x, 2 * a.lay.nfull, a.lay.nfull);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &a, x.node_params), FSDP_OK);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &b, x.node_params + a.lay.nfull), FSDP_OK);
    fsdp_grad ga = { 0 }, gb = { 0 };
    /* a (an outer group) accumulates in the slot; b (nested) in a buffer. */
    cr_assert_eq(fsdp_grad_point(&x.c, &ga, &a), FSDP_OK);
    cr_assert_eq(fsdp_grad_point(&x.c, &gb, &b), FSDP_OK);
    cr_assert(ga.home == FSDP_GRAD_HOME_SLOT && gb.home == FSDP_GRAD_HOME_POOL);
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &gb, &b, &rs, &ar), FSDP_OK);
    cr_assert(gb.home == FSDP_GRAD_HOME_REDUCE_SLOT && gb.buf == x.node.reduce_slots + 0 * a.lay.nfull,
              "moved into place 0's reduce slot, to be summed on the machine first");
    cr_assert(x.node.reduce_slot_used && gb.state == FSDP_GRAD_IN_SLOTS);
    cr_assert_not_null(gb.part, "this rank's part summed on each machine, exchanged with its peers");
    int n;
    const float *const *terms = fsdp_grad_slot_terms(&x.c, &gb, &b, 2, &n);
    cr_assert_eq(n, 2, "one term per machine");
    for (int k = 0; k < 2; ++k) cr_assert_eq(terms[k], gb.part + (size_t)k * b.lay.shard + 2, "machine %d's sum", k);
    cr_assert_eq(fsdp_grad_spent(&x.c, &gb), FSDP_OK);
    cr_assert(gb.state == FSDP_GRAD_NONE && x.node.slot_busy, "the reduce slot leaves the slot to a");
    cr_assert_eq(fsdp_grad_reduce(&x.c, &ga, &a, &rs, &ar), FSDP_OK);
    cr_assert(ga.state == FSDP_GRAD_IN_SLOTS && ga.home == FSDP_GRAD_HOME_SLOT);
    cr_assert_eq(fsdp_grad_spent(&x.c, &ga), FSDP_OK);
    cr_assert(!x.node.slot_busy && x.pool.live == 0, "the slot free, the sums back in the pool");
    fsdp_flat_free(&x.c, &a);
    fsdp_flat_free(&x.c, &b);
    fixture_free(&x);
}

Test(grad, release_in_flight_gives_everything_back)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 2, .rank = 1, .starts = 1 });
    fsdp_flat f;
    train_flat(&x, 0, &f, SGD);
    fsdp_grad g = { 0 };
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert_eq(g.state, FSDP_GRAD_REDUCING);
    fsdp_grad_release(&x.c, &g, &f);
    cr_assert(g.state == FSDP_GRAD_NONE && x.pool.live == 0);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

/* ---- calls in the wrong state stop the run (FSDP_CHECKS) ------------------ */

#ifdef FSDP_CHECKS
/* A gradient on 2 ranks: NONE (steps 0), ACCUMULATING (1) or REDUCED (2). */
static void gradient(fixture *x, fsdp_flat *f, fsdp_grad *g, int steps)
{
    fixture_init(x, (fixture_shape){ .world = 2, .rank = 0 });
    train_flat(x, 0, f, SGD);
    *g = (fsdp_grad){ 0 };
    uint64_t rs, ar;
    if (steps >= 1) fsdp_grad_point(&x->c, g, f);
    if (steps >= 2) fsdp_grad_reduce(&x->c, g, f, &rs, &ar);
}

Test(grad_checks, reduce_without_a_gradient, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 0);
    uint64_t rs, ar;
    fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar);
}

Test(grad_checks, reduce_twice, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 2);
    uint64_t rs, ar;
    fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar);
}

Test(grad_checks, wait_for_no_reduce_scatter, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 1);
    fsdp_grad_reduce_wait(&x.c, &g);
}

Test(grad_checks, spent_while_accumulating, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 1);
    fsdp_grad_spent(&x.c, &g);
}

Test(grad_checks, point_after_the_reduce, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 2);
    fsdp_grad_point(&x.c, &g, &f);
}

Test(grad_checks, slot_terms_of_a_reduced_part, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 2);
    int n;
    fsdp_grad_slot_terms(&x.c, &g, &f, 0, &n);
}

Test(grad_checks, unpoint_without_a_gradient, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 0);
    fsdp_grad_unpoint(&g, &f);
}

/* ---- the whole gradient against its state (fsdp_grad_check) --------------- */

Test(grad_checks, every_state_of_a_sound_gradient_passes)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 0);
    cr_assert(fsdp_grad_check(&x.c, &g, &f), "NONE");
    cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
    cr_assert(fsdp_grad_check(&x.c, &g, &f), "ACCUMULATING");
    uint64_t rs, ar;
    cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
    cr_assert(g.state == FSDP_GRAD_REDUCED && fsdp_grad_check(&x.c, &g, &f), "REDUCED");
    fsdp_grad_release(&x.c, &g, &f);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(grad_checks, reduced_still_holding_its_sum, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 2);
    g.buf = g.part;
    fsdp_grad_check(&x.c, &g, &f);
}

Test(grad_checks, accumulating_with_no_buffer, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 1);
    g.buf = NULL;
    fsdp_grad_check(&x.c, &g, &f);
}

Test(grad_checks, a_reduce_scatter_source_outside_reducing, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    fsdp_grad g;
    gradient(&x, &f, &g, 2);
    g.rs_source = g.part;
    fsdp_grad_check(&x.c, &g, &f);
}
#endif
