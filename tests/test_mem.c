/* test_mem: the host pool's reuse, and the count placement against the host
 * placement: the same operations on the same flats take and give back the
 * same sizes, which is what the memory prediction relies on (fsdp_mem.h). */
#include <criterion/criterion.h>
#include "flat_fixture.h"

/* ---- the host buffer pool ---------------------------------------------- */

Test(mem, pool_reuses_fits_within_twice_and_serves_repeated_steps)
{
    fsdp_mem_pool pool = { 0 };
    fsdp_mem_ctx m = { .device = 0, .pool = &pool };
    float *a = fsdp_mem_take(&m, 1000, 0);
    for (int i = 0; i < 1000; ++i) a[i] = 7.f;
    fsdp_mem_give(&m, a);
    cr_assert_gt(pool.bytes, 0, "a buffer given back is kept");
    float *b = fsdp_mem_take(&m, 1000, 1);
    cr_assert_eq(b, a, "and served again for the same size");
    for (int i = 0; i < 1000; ++i) cr_assert_float_eq(b[i], 0.f, 0, "zeroed when asked");
    cr_assert_eq(pool.bytes, 0);
    fsdp_mem_give(&m, b);
    size_t held = pool.bytes;
    float *small = fsdp_mem_take(&m, 10, 0);
    cr_assert_neq(small, b, "a block more than twice the size does not serve a request");
    cr_assert_eq(pool.bytes, held, "and stays held");
    float *big = fsdp_mem_take(&m, 1250, 0);
    cr_assert_eq(pool.bytes, 0, "a request nothing fits frees the smaller held blocks first");
    fsdp_mem_give(&m, small);
    fsdp_mem_give(&m, big);
    cr_assert_eq(pool.live, 0);
    cr_assert_eq(pool.footprint, pool.bytes, "everything given back is held, and nothing more was ever out");
    float *half = fsdp_mem_take(&m, 700, 0);
    cr_assert_eq(half, big, "a block up to twice the size serves a smaller request");
    fsdp_mem_give(&m, half);
    fsdp_mem_pool_drain(&m);
    /* Steps that take and give the same buffers: from the second on, every
     * take is served by the pool. */
    fsdp_mem_pool fresh = { 0 };
    m.pool = &fresh;
    float *g1 = fsdp_mem_take(&m, 5000, 0), *p1 = fsdp_mem_take(&m, 3000, 0), *s1 = fsdp_mem_take(&m, 700, 0);
    fsdp_mem_give(&m, p1);
    fsdp_mem_give(&m, s1);
    fsdp_mem_give(&m, g1);
    cr_assert_geq(fresh.bytes, 8700 * sizeof(float), "all three kept");
    for (int step = 0; step < 3; ++step) {
        float *g = fsdp_mem_take(&m, 5000, 1), *p = fsdp_mem_take(&m, 3000, 0), *q = fsdp_mem_take(&m, 700, 0);
        cr_assert_eq(fresh.bytes, 0, "step %d: every buffer from the pool", step);
        cr_assert(g == g1 && p == p1 && q == s1, "step %d: the same buffers", step);
        fsdp_mem_give(&m, p);
        fsdp_mem_give(&m, q);
        fsdp_mem_give(&m, g);
    }
    fsdp_mem_pool_drain(&m);
    cr_assert_eq(pool.bytes, 0);
}

/* ---- the count placement --------------------------------------------------- */

/* One step of a group's operations, as the engine runs them under `full`
 * with a started reduce-scatter: gather, gradient, reduce, wait, spent,
 * reshard; then a prefetched gather.  Returns the pool's footprint. */
static size_t a_step(fixture_shape shape)
{
    fixture x;
    fixture_init(&x, shape);
    fsdp_tensor t[2];
    fixture_layer(&x, 0, 1000, 24, t);
    fsdp_flat f;
    fsdp_grad g = { 0 };
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, (fsdp_flat_kind){ .sharded = 1, .trainable = 1 }), FSDP_OK);
    uint64_t bytes, rs, ar;
    for (int step = 0; step < 2; ++step) {
        cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
        cr_assert_eq(fsdp_grad_point(&x.c, &g, &f), FSDP_OK);
        cr_assert_eq(fsdp_grad_reduce(&x.c, &g, &f, &rs, &ar), FSDP_OK);
        cr_assert_eq(fsdp_grad_reduce_wait(&x.c, &g), FSDP_OK);
        cr_assert_eq(fsdp_grad_spent(&x.c, &g), FSDP_OK);
        fsdp_flat_reshard(&x.c, &f);
        cr_assert_eq(fsdp_flat_unshard_start(&x.c, &f), FSDP_OK);
        cr_assert_eq(fsdp_flat_unshard(&x.c, &f, &bytes), FSDP_OK);
        fsdp_flat_reshard(&x.c, &f);
    }
    size_t footprint = x.pool.footprint;
    cr_assert_eq(x.pool.live, 0, "every buffer given back");
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
    return footprint;
}

Test(mem, count_placement_takes_what_host_memory_takes)
{
    fixture_shape host = { .world = 4, .rank = 1, .starts = 1 }, count = host;
    count.counts = 1;
    size_t real = a_step(host), counted = a_step(count);
    cr_assert_gt(real, 0);
    cr_assert_eq(counted, real, "footprint counted %zu, taken %zu", counted, real);
}

Test(mem, count_placement_stand_ins_are_apart_and_never_read)
{
    fsdp_mem_pool pool;
    fsdp_mem_count count;
    fsdp_mem_ctx m;
    fsdp_mem_count_init(&m, &count, &pool, 1);
    cr_assert_eq(fsdp_mem_computes(&m), 0);
    float *a = fsdp_mem_alloc(&m, 1000, 1), *b = fsdp_mem_take(&m, 5000, 1);
    cr_assert(a && b && (b >= a + 1000 || a >= b + 5000), "each has room for its floats");
    cr_assert_eq(fsdp_mem_zero(&m, b, 5000), FSDP_OK, "zeroing a stand-in touches nothing");
    cr_assert_eq(fsdp_mem_copy(&m, a, b, 1000), FSDP_OK);
    fsdp_mem_give(&m, b);
    cr_assert_eq(fsdp_mem_take(&m, 4000, 0), b, "the pool serves it again, as on the host");
    cr_assert_eq(count.nlive, 2);
    fsdp_mem_free(&m, a);
    cr_assert_eq(count.nlive, 1);
    fsdp_mem_count_free(&m);
}

/* ---- the device pool's hold ------------------------------------------------ */

/* GPU runs keep in the driver's pool what a step takes, as the prediction
 * counts it (step_buffers: the count placement's footprint), in 2 MiB
 * granules with an eighth more; nothing when a step takes nothing. */
Test(mem, device_pool_keeps_the_counted_step)
{
    const size_t g = FSDP_DEVICE_POOL_GRANULE;
    cr_assert_eq(fsdp_mem_pool_keep_bytes(0), 0);
    cr_assert_eq(fsdp_mem_pool_keep_bytes(1), g);
    cr_assert_eq(fsdp_mem_pool_keep_bytes(8 * g), 9 * g);
    cr_assert_eq(fsdp_mem_pool_keep_bytes(8 * g + 1), 10 * g);
    fixture_shape count = { .world = 4, .rank = 1, .starts = 1, .counts = 1 };
    size_t step = a_step(count), keep = fsdp_mem_pool_keep_bytes(step);
    cr_assert_gt(step, 0);
    cr_assert(keep >= step + step / 8 && keep < step + step / 8 + g && keep % g == 0,
              "a step of %zu bytes keeps %zu", step, keep);
}
