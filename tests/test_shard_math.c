/* test_shard_math: the shard arithmetic every layout relies on, and the
 * status strings users see in error messages. */
#include <stdint.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_backend.h"

Test(shard_count, small_cases)
{
    cr_assert_eq(fsdp_shard_count(0, 1), 0);
    cr_assert_eq(fsdp_shard_count(0, 4), 0);
    cr_assert_eq(fsdp_shard_count(1, 1), 1);
    cr_assert_eq(fsdp_shard_count(1, 4), 1);
    cr_assert_eq(fsdp_shard_count(7, 2), 4);
    cr_assert_eq(fsdp_shard_count(8, 4), 2);
    cr_assert_eq(fsdp_shard_count(9, 4), 3);
    cr_assert_eq(fsdp_shard_count(1000, 3), 334);
}

/* The defining property: the shards cover n, with less than one float of
 * padding per rank. */
Test(shard_count, covers_with_least_padding)
{
    for (int world = 1; world <= 17; world++)
        for (size_t n = 0; n <= 1000; n++) {
            size_t shard = fsdp_shard_count(n, world);
            cr_assert_geq(shard * (size_t)world, n, "n=%zu world=%d", n, world);
            cr_assert_lt(shard * (size_t)world, n + (size_t)world, "n=%zu world=%d", n, world);
        }
}

Test(shard_count, exact_when_divisible)
{
    for (int world = 1; world <= 8; world++)
        cr_assert_eq(fsdp_shard_count((size_t)world * 12345, world), 12345);
}

/* (n + world - 1) / world would wrap to 0 here. */
Test(shard_count, no_overflow_near_size_max)
{
    cr_assert_eq(fsdp_shard_count(SIZE_MAX, 1), SIZE_MAX);
    cr_assert_eq(fsdp_shard_count(SIZE_MAX, 2), SIZE_MAX / 2 + 1);
    cr_assert_eq(fsdp_shard_count(SIZE_MAX - 1, 4), SIZE_MAX / 4 + 1);
}

Test(shard_count, beyond_int_max)
{
    size_t n = (size_t)INT32_MAX * 3 + 1;
    cr_assert_eq(fsdp_shard_count(n, 3), (size_t)INT32_MAX + 1);
}

static const fsdp_status all_statuses[] = {
    FSDP_OK, FSDP_ERR_CONFIG, FSDP_ERR_ABI, FSDP_ERR_MISMATCH, FSDP_ERR_COMM,
    FSDP_ERR_CUDA, FSDP_ERR_NOMEM, FSDP_ERR_IO, FSDP_ERR_UNSUPPORTED,
};
#define NSTATUS (sizeof all_statuses / sizeof all_statuses[0])

Test(status_str, ok_is_ok)
{
    cr_assert_str_eq(fsdp_status_str(FSDP_OK), "ok");
}

/* Each status has its own words: a message must say which failure it was. */
Test(status_str, every_status_named_and_distinct)
{
    for (size_t i = 0; i < NSTATUS; i++) {
        const char *s = fsdp_status_str(all_statuses[i]);
        cr_assert_not_null(s);
        cr_assert_gt(strlen(s), 0);
        cr_assert_str_neq(s, "unknown status", "status %d has no name", (int)all_statuses[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(s, fsdp_status_str(all_statuses[j]), "statuses %d and %d share \"%s\"",
                              (int)all_statuses[i], (int)all_statuses[j], s);
    }
}

Test(status_str, unknown_value)
{
    cr_assert_str_eq(fsdp_status_str((fsdp_status)999), "unknown status");
    cr_assert_str_eq(fsdp_status_str((fsdp_status)-1), "unknown status");
}

Test(status_str, fail_prints_and_returns_status, .init = cr_redirect_stderr)
{
    cr_assert_eq(fsdp_fail(FSDP_ERR_CONFIG, "%s:%d: bad key", "net.cfg", 3), FSDP_ERR_CONFIG);
    fflush(stderr);
    cr_assert_stderr_eq_str("fsdp: net.cfg:3: bad key\n");
}
