/* test_flat: a flat's layout and every transition of its parameters'
 * table (plugin/core/fsdp_flat.h), over the self and null backends, with
 * node memory in plain arrays: no Darknet run, no mpirun. */
#include <criterion/criterion.h>
#include <signal.h>
#include "flat_fixture.h"

static const fsdp_flat_kind SHARDED_TRAIN = { .sharded = 1, .trainable = 1 };

/* ---- layout and padding -------------------------------------------------- */

Test(flat, shards_are_equal_padded_and_runs_cover_the_shard)
{
    /* Two tensors, 10 and 7 floats (17), three ranks: shards of 6, one pad float. */
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 3, .rank = 2 });
    fsdp_tensor t[2];
    fixture_layer(&x, 1, 10, 7, t);
    fsdp_flat f;
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, SHARDED_TRAIN), FSDP_OK);
    cr_assert_eq(f.lay.count, 17);
    cr_assert_eq(f.lay.shard, 6);
    cr_assert_eq(f.lay.nfull, 18);
    cr_assert_null(x.layers[1].weights, "Darknet's array is freed and the layer points nowhere");
    /* Rank 2 owns floats 12..17: biases 2..6, then one zero pad. */
    for (int i = 0; i < 5; ++i) cr_assert_float_eq(f.res.own[i], 152.f + i, 0);
    cr_assert_float_eq(f.res.own[5], 0.f, 0);
    cr_assert_eq(f.lay.nruns, 1);
    cr_assert_eq(f.lay.runs[0].off, 0);
    cr_assert_eq(f.lay.runs[0].len, 5, "the pad float is never updated");
    cr_assert_eq(f.lay.runs[0].is_weight, 0);
    fsdp_flat_part p = fsdp_flat_own_part(&x.c, &f);
    cr_assert(p.lo == 12 && p.n == 6 && p.nbuf == 2, "checkpoints: its part [12, 18), parameters and momentum");
    cr_assert(p.buf[0] == f.res.own && p.buf[1] == f.opt.m);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, aligned_tensors_and_shards)
{
    /* Device layout (mem.align) on the host: tensors of 10 and 7 floats at
     * multiples of 8 floats: 0..9, gap 10..15, 16..22; two ranks, shards of
     * 12 rounded up to 16. */
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 2, .rank = 1 });
    x.mem.align = 8;
    fsdp_tensor t[2];
    fixture_layer(&x, 0, 10, 7, t);
    fsdp_flat f;
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, SHARDED_TRAIN), FSDP_OK);
    cr_assert_eq(f.lay.off[1], 16);
    cr_assert_eq(f.lay.count, 23);
    cr_assert_eq(f.lay.params, 17);
    cr_assert_eq(f.lay.shard, 16);
    cr_assert_eq(f.lay.nfull, 32);
    /* Rank 1 owns floats 16..31: the biases, then 9 pad floats. */
    for (int i = 0; i < 7; ++i) cr_assert_float_eq(f.res.own[i], 50.f + i, 0);
    for (int i = 7; i < 16; ++i) cr_assert_float_eq(f.res.own[i], 0.f, 0);
    cr_assert_eq(f.lay.nruns, 1);
    cr_assert_eq(f.lay.runs[0].off, 0);
    cr_assert_eq(f.lay.runs[0].len, 7);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

/* ---- the parameters' transitions ------------------------------------------ */

/* A sharded trainable flat of 10 weights and 6 biases (layer 0's). */
static void sharded(fixture *x, fixture_shape shape, fsdp_flat *f)
{
    fixture_init(x, shape);
    fsdp_tensor t[2];
    fixture_layer(x, 0, 10, 6, t);
    cr_assert_eq(fsdp_flat_setup(&x->c, f, t, 2, SHARDED_TRAIN), FSDP_OK);
}

Test(flat, sharded_unshard_keeps_and_reshard)
{
    fixture x;
    fsdp_flat f;
    sharded(&x, (fixture_shape){ .world = 4, .rank = 1 }, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_SHARDED);
    cr_assert_null(x.layers[0].weights);
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert_eq(f.res.state, FSDP_FLAT_GATHERED);
    cr_assert_eq(bytes, 16 * sizeof(float), "the full buffer's bytes");
    cr_assert_eq(x.layers[0].weights, f.res.full);
    cr_assert_eq(x.layers[0].biases, f.res.full + 10);
    cr_assert_eq(x.pool.live, x.pool.footprint, "the gathered buffer is the pool's");
    float *full = f.res.full;
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.state == FSDP_FLAT_GATHERED && f.res.full == full && bytes == 0, "GATHERED: kept, nothing moves");
    fsdp_flat_reshard(&x.c, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_SHARDED);
    cr_assert_null(f.res.full);
    cr_assert_null(x.layers[0].weights, "the layers point nowhere again");
    cr_assert(x.pool.live == 0 && x.pool.bytes > 0, "the buffer went back to the pool");
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, prefetch_gathers_where_the_backend_starts)
{
    fixture x;
    fsdp_flat f;
    sharded(&x, (fixture_shape){ .world = 4, .rank = 3, .starts = 1 }, &f);
    cr_assert_eq(fsdp_flat_unshard_start(&x.c, &f), FSDP_OK);
    cr_assert_eq(f.res.state, FSDP_FLAT_GATHERING);
    cr_assert_not_null(f.res.pending);
    cr_assert_null(x.layers[0].weights, "GATHERING: the layers still point nowhere");
    float *pending = f.res.pending;
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.state == FSDP_FLAT_GATHERED && f.res.full == pending && !f.res.pending);
    cr_assert_eq(bytes, 16 * sizeof(float));
    fsdp_flat_reshard(&x.c, &f);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, blocking_backend_prefetches_nothing)
{
    fixture x;
    fsdp_flat f;
    sharded(&x, (fixture_shape){ .world = 4, .rank = 0 }, &f);
    cr_assert_eq(fsdp_flat_unshard_start(&x.c, &f), FSDP_OK);
    cr_assert_eq(f.res.state, FSDP_FLAT_SHARDED);
    cr_assert_null(f.res.pending);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, world_of_one_gathers_its_own_part)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 1, .rank = 0 });
    fsdp_tensor t[2];
    fixture_layer(&x, 2, 5, 3, t);
    fsdp_flat f;
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, SHARDED_TRAIN), FSDP_OK);
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.full == f.res.own && bytes == 8 * sizeof(float), "no buffer, the bytes counted");
    cr_assert_float_eq(x.layers[2].biases[2], 252.f, 0, "the values as Darknet had them");
    fsdp_flat_reshard(&x.c, &f);
    cr_assert_eq(x.pool.footprint, 0, "nothing taken");
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, replicated_stays_gathered)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 2, .rank = 1 });
    fsdp_tensor t[2];
    fixture_layer(&x, 0, 10, 6, t);
    fsdp_flat f;
    fsdp_flat_kind grad_op = { .sharded = 0, .trainable = 1 };
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, grad_op), FSDP_OK);
    cr_assert_eq(f.res.state, FSDP_FLAT_GATHERED);
    cr_assert(f.res.own_in_full && f.res.own == f.res.full + 8, "rank 1 updates its part of the replica in place");
    fsdp_flat_reshard(&x.c, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_GATHERED, "replicated parameters stay");
    cr_assert_eq(x.layers[0].weights, f.res.full);
    fsdp_flat_part p = fsdp_flat_own_part(&x.c, &f);
    cr_assert(p.lo == 8 && p.n == 8);
    fsdp_flat_free(&x.c, &f);
    fsdp_tensor u[2];
    fixture_layer(&x, 1, 4, 4, u);
    fsdp_flat fz;
    cr_assert_eq(fsdp_flat_setup(&x.c, &fz, u, 2, (fsdp_flat_kind){ 0 }), FSDP_OK);
    cr_assert(fz.res.state == FSDP_FLAT_GATHERED && !fz.res.own, "replicated frozen parameters: no part of their own");
    cr_assert_eq(fsdp_flat_own_part(&x.c, &fz).n, 0, "and none in a checkpoint");
    fsdp_flat_free(&x.c, &fz);
    fixture_free(&x);
}

Test(flat, node_memory_gathers_by_pointing)
{
    fixture x;
    fsdp_flat f;
    sharded(&x, (fixture_shape){ .world = 4, .rank = 2, .machines = 1 }, &f);
    fixture_node(&x, f.lay.nfull, f.lay.nfull);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &f, x.node_params), FSDP_OK);
    cr_assert(f.res.in_node && f.res.own == x.node_params + 2 * f.lay.shard, "its own part, in node memory");
    cr_assert_float_eq(x.node_params[2 * 4], 8.f, 0, "copied in: weight 8 starts rank 2's part");
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_own_written(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(x.node.stale && bytes == 0, "one machine: the node is stale, nothing crosses");
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.full == x.node_params && bytes == 0 && !x.node.stale, "synced, pointed, nothing moved");
    cr_assert_eq(x.pool.footprint, 0);
    fsdp_flat_reshard(&x.c, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_SHARDED);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, several_machines_send_the_updated_part)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = 4, .rank = 3, .machines = 2, .starts = 1 });
    cr_assert(x.node.at.machines == 2 && x.node.at.ranks == 2 && x.node.at.rank == 1);
    fsdp_tensor t[2];
    fixture_layer(&x, 0, 10, 6, t);
    fsdp_flat f;
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, SHARDED_TRAIN), FSDP_OK);
    fixture_node(&x, f.lay.nfull, f.lay.nfull);
    cr_assert_eq(fsdp_flat_move_to_node(&x.c, &f, x.node_params), FSDP_OK);
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_own_written(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(x.node.publishing && bytes == f.lay.nfull * sizeof(float), "its part on its way to its peers");
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(!x.node.publishing && !x.node.stale, "the gather waits for it, then syncs");
    fsdp_flat_reshard(&x.c, &f);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat, save_gathers_and_gives_back)
{
    fixture x;
    fsdp_flat f;
    sharded(&x, (fixture_shape){ .world = 2, .rank = 0 }, &f);
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_save_begin(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.state == FSDP_FLAT_GATHERED && bytes == 16 * sizeof(float));
    fsdp_flat_save_end(&x.c, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_SHARDED, "as before the save");
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert_eq(fsdp_flat_save_begin(&x.c, &f, &bytes), FSDP_OK);
    cr_assert_eq(bytes, 0, "gathered already: nothing moves");
    fsdp_flat_save_end(&x.c, &f);
    cr_assert_eq(f.res.state, FSDP_FLAT_GATHERED, "and it stays gathered");
    fsdp_flat_reshard(&x.c, &f);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

/* ---- calls in the wrong state stop the run (FSDP_CHECKS) ------------------ */

#ifdef FSDP_CHECKS
static void sharded_flat(fixture *x, fsdp_flat *f, int starts)
{
    sharded(x, (fixture_shape){ .world = 2, .rank = 0, .starts = starts }, f);
}

Test(flat_checks, reshard_of_a_sharded_flat, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 0);
    fsdp_flat_reshard(&x.c, &f);
}

Test(flat_checks, prefetch_of_a_gathered_flat, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 1);
    uint64_t bytes;
    fsdp_flat_unshard(&x.c, &f, &bytes);
    fsdp_flat_unshard_start(&x.c, &f);
}

Test(flat_checks, prefetch_twice, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 1);
    fsdp_flat_unshard_start(&x.c, &f);
    fsdp_flat_unshard_start(&x.c, &f);
}

Test(flat_checks, save_while_gathering, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 1);
    fsdp_flat_unshard_start(&x.c, &f);
    uint64_t bytes;
    fsdp_flat_save_begin(&x.c, &f, &bytes);
}

/* ---- the whole flat against its state (fsdp_flat_check) ------------------- */

Test(flat_checks, every_state_of_a_sound_flat_passes)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 1);
    cr_assert(fsdp_flat_check(&x.c, &f), "SHARDED");
    cr_assert_eq(fsdp_flat_unshard_start(&x.c, &f), FSDP_OK);
    cr_assert(f.res.state == FSDP_FLAT_GATHERING && fsdp_flat_check(&x.c, &f), "GATHERING");
    uint64_t bytes;
    cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
    cr_assert(f.res.state == FSDP_FLAT_GATHERED && fsdp_flat_check(&x.c, &f), "GATHERED");
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(flat_checks, a_layer_pointing_elsewhere_while_gathered, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 0);
    uint64_t bytes;
    fsdp_flat_unshard(&x.c, &f, &bytes);
    x.layers[0].biases = f.res.full;
    fsdp_flat_check(&x.c, &f);
}

Test(flat_checks, a_sharded_flat_holding_a_full_buffer, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 0);
    f.res.full = f.res.own;
    fsdp_flat_check(&x.c, &f);
}

Test(flat_checks, gathering_without_its_destination, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 1);
    fsdp_flat_unshard_start(&x.c, &f);
    f.res.pending = NULL;
    fsdp_flat_check(&x.c, &f);
}

Test(flat_checks, a_frozen_flat_with_optimizer_state, .signal = SIGABRT)
{
    fixture x;
    fsdp_flat f;
    sharded_flat(&x, &f, 0);
    f.kind.trainable = 0;
    fsdp_flat_check(&x.c, &f);
}
#endif
