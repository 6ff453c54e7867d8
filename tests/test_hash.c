/* test_hash: the checksum checkpoints and weights files are compared by,
 * and the plan hash's FNV-1a. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "fsdp_hash.h"

static unsigned char bytes[1003];

static void fill(void)
{
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = (unsigned char)(i * 131 + 7);
}

/* Checkpoints are hashed buffer by buffer when written and in 1 MB reads
 * when checked: the result must not depend on the pieces. */
Test(hash, same_for_any_pieces)
{
    fill();
    uint64_t whole = fsdp_hash(bytes, sizeof bytes);
    srand(3);
    for (int trial = 0; trial < 200; ++trial) {
        fsdp_hasher h;
        fsdp_hasher_init(&h);
        size_t at = 0;
        while (at < sizeof bytes) {
            size_t k = (size_t)rand() % 17;
            if (k > sizeof bytes - at) k = sizeof bytes - at;
            fsdp_hasher_add(&h, bytes + at, k);
            at += k;
        }
        cr_assert_eq(fsdp_hasher_end(&h), whole, "trial %d", trial);
    }
}

/* A flipped bit anywhere (the low bit of a float included) is caught. */
Test(hash, every_single_bit_flip_changes_it)
{
    fill();
    uint64_t whole = fsdp_hash(bytes, sizeof bytes);
    for (size_t i = 0; i < sizeof bytes; ++i)
        for (int b = 0; b < 8; ++b) {
            bytes[i] ^= (unsigned char)(1 << b);
            cr_assert_neq(fsdp_hash(bytes, sizeof bytes), whole, "byte %zu bit %d", i, b);
            bytes[i] ^= (unsigned char)(1 << b);
        }
}

Test(hash, length_counts)
{
    unsigned char z[16] = { 0 };
    cr_assert_neq(fsdp_hash(z, 15), fsdp_hash(z, 16));
    cr_assert_neq(fsdp_hash(z, 0), fsdp_hash(z, 8));
}

/* The plan hash lives in checkpoint files, so its values must never
 * change.  The steps are FNV-1a's (its reference vectors, from its offset
 * basis); from the plugin's start the values are pinned, computed apart. */
Test(hash, fnv1a_steps_and_the_plan_hash_start)
{
    const uint64_t basis = 14695981039346656037ull;
    cr_assert_eq(fsdp_fnv1a(basis, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(fsdp_fnv1a(basis, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(fsdp_fnv1a(basis, "foobar", 6), 0x85944171f73967e8ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "", 0), 0x14650fb0739d0383ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "a", 1), 0x44bd8ad473cd9906ull);
    cr_assert_eq(fsdp_fnv1a(FSDP_FNV1A_START, "foobar", 6), 0x88fad7c0a8ff07f2ull);
    cr_assert_eq(fsdp_fnv1a(fsdp_fnv1a(FSDP_FNV1A_START, "foo", 3), "bar", 3), 0x88fad7c0a8ff07f2ull);
}
