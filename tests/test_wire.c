/* test_wire: parameters and sums on the wire between machines (shard_wire):
 * sizes, the error each format promises, exactness of fp32, and that an
 * encoding depends on the floats alone. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "fsdp_wire.h"

#define N 1000   /* 3 whole blocks of 256 and a part one */

static float x[N];

static void fill(unsigned seed)
{
    srand(seed);
    for (int i = 0; i < N; ++i) x[i] = ((float)rand() / RAND_MAX - 0.5f) * powf(10.0f, (float)(i % 7) - 3);
    x[5] = 0;
    x[300] = -1e-30f;
}

static float *round_trip(fsdp_wire_format f)
{
    unsigned char *coded = malloc(fsdp_wire_bytes(f, N));
    float *y = malloc(N * sizeof(float));
    fsdp_wire_encode(f, x, N, coded);
    fsdp_wire_decode(f, coded, N, y);
    free(coded);
    return y;
}

Test(wire, names_and_sizes)
{
    cr_assert_eq(fsdp_wire_parse("fp32"), FSDP_WIRE_FP32);
    cr_assert_eq(fsdp_wire_parse("bf16"), FSDP_WIRE_BF16);
    cr_assert_eq(fsdp_wire_parse("int8"), FSDP_WIRE_INT8);
    cr_assert_eq(fsdp_wire_parse("fp16"), -1);
    cr_assert_str_eq(fsdp_wire_name(FSDP_WIRE_INT8), "int8");
    cr_assert_eq(fsdp_wire_bytes(FSDP_WIRE_FP32, N), 4 * N);
    cr_assert_eq(fsdp_wire_bytes(FSDP_WIRE_BF16, N), 2 * N);
    /* 4 blocks: 4 scales and a byte a float. */
    cr_assert_eq(fsdp_wire_bytes(FSDP_WIRE_INT8, N), N + 4 * 4);
    cr_assert_eq(fsdp_wire_bytes(FSDP_WIRE_INT8, 0), 0);
}

Test(wire, fp32_is_exact)
{
    fill(1);
    float *y = round_trip(FSDP_WIRE_FP32);
    cr_assert(!memcmp(x, y, sizeof x));
    free(y);
}

Test(wire, bf16_within_its_8_bits)
{
    fill(2);
    float *y = round_trip(FSDP_WIRE_BF16);
    for (int i = 0; i < N; ++i)
        cr_assert(fabsf(y[i] - x[i]) <= fabsf(x[i]) * (float)fsdp_wire_error(FSDP_WIRE_BF16) * 1.0001f,
                  "%d: %g -> %g", i, x[i], y[i]);
    cr_assert_eq(y[5], 0.0f);
    free(y);
}

/* Each float within half a step of its block's scale (the block's largest
 * magnitude over 127); the largest of each block is exact. */
Test(wire, int8_within_half_a_step_of_its_block)
{
    fill(3);
    float *y = round_trip(FSDP_WIRE_INT8);
    for (int b = 0; b * FSDP_WIRE_BLOCK < N; ++b) {
        int lo = b * FSDP_WIRE_BLOCK, hi = lo + FSDP_WIRE_BLOCK < N ? lo + FSDP_WIRE_BLOCK : N;
        float most = 0;
        for (int i = lo; i < hi; ++i) most = fmaxf(most, fabsf(x[i]));
        for (int i = lo; i < hi; ++i) {
            cr_assert(fabsf(y[i] - x[i]) <= most * (float)fsdp_wire_error(FSDP_WIRE_INT8) * 1.0001f,
                      "%d: %g -> %g (block's largest %g)", i, x[i], y[i], most);
            if (fabsf(x[i]) == most) cr_assert(fabsf(y[i] - x[i]) <= most * 1e-6f, "%d", i);
        }
    }
    free(y);
}

Test(wire, int8_block_of_zeros_stays_zero)
{
    float z[300] = { 0 }, back[300];
    unsigned char coded[400];
    for (int i = 0; i < 300; ++i) back[i] = 1;
    fsdp_wire_encode(FSDP_WIRE_INT8, z, 300, coded);
    fsdp_wire_decode(FSDP_WIRE_INT8, coded, 300, back);
    for (int i = 0; i < 300; ++i) cr_assert_eq(back[i], 0.0f);
}

/* A seeded run repeats byte for byte: the same floats, the same bytes. */
Test(wire, encoding_depends_on_the_floats_alone)
{
    for (int f = FSDP_WIRE_BF16; f <= FSDP_WIRE_INT8; ++f) {
        fill(4);
        size_t n = fsdp_wire_bytes(f, N);
        unsigned char *a = malloc(n), *b = malloc(n);
        memset(a, 0xa5, n);
        memset(b, 0x5a, n);
        fsdp_wire_encode(f, x, N, a);
        fsdp_wire_encode(f, x, N, b);
        cr_assert(!memcmp(a, b, n), "%s", fsdp_wire_name(f));
        free(a);
        free(b);
    }
}
