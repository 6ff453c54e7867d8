/* test_devices: the (machine, GPU) pairs checked before NCCL starts, on
 * device maps given as data: -i N, more ranks than GPUs, several machines. */
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_devices.h"

static int one_host[4] = { 0, 0, 0, 0 };
static int two_hosts[4] = { 0, 0, 1, 1 };

/* One GPU per rank: on one machine, and the same GPU numbers on two. */
Test(devices, own_gpus_pass)
{
    fsdp_hosts one = { 4, 1, one_host }, two = { 4, 2, two_hosts };
    int a = -1, b = -1;
    cr_assert_eq(fsdp_devices_find_shared(&one, (int[]){ 0, 1, 2, 3 }, &a, &b), 0);
    cr_assert_eq(fsdp_devices_find_shared(&two, (int[]){ 0, 1, 0, 1 }, &a, &b), 0);
    cr_assert_eq(fsdp_devices_check_unique(&two, (int[]){ 1, 0, 1, 0 }), FSDP_OK);
    cr_assert(a == -1 && b == -1, "no pair reported");
}

/* Ranks on the host (negative) share nothing. */
Test(devices, host_ranks_pass)
{
    fsdp_hosts one = { 4, 1, one_host };
    int a, b;
    cr_assert_eq(fsdp_devices_find_shared(&one, (int[]){ -1, -1, 0, -1 }, &a, &b), 0);
}

/* -i 0 on a machine of two ranks: every rank there on GPU 0. */
Test(devices, same_gpu_by_flag_found)
{
    fsdp_hosts two = { 4, 2, two_hosts };
    int a, b;
    cr_assert_eq(fsdp_devices_find_shared(&two, (int[]){ 0, 1, 0, 0 }, &a, &b), 1);
    cr_assert(a == 2 && b == 3, "ranks %d and %d", a, b);
}

/* Three ranks, two GPUs: the place modulo the GPUs puts ranks 0 and 2 together. */
Test(devices, more_ranks_than_gpus_refused, .init = cr_redirect_stderr)
{
    fsdp_hosts one = { 3, 1, one_host };
    cr_assert_eq(fsdp_devices_check_unique(&one, (int[]){ 0, 1, 0 }), FSDP_ERR_CONFIG);
    fflush(stderr);
    char buf[1024] = "";
    FILE *f = cr_get_redirected_stderr();
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    cr_assert(strstr(buf, "fsdp: ranks 0 and 2 both compute on GPU 0 of one machine"), "%s", buf);
    cr_assert(strstr(buf, "-fsdp-backend mpi-staged"), "%s", buf);
}

/* The collective form: a lone rank's map is its own device, never shared. */
Test(devices, agree_alone)
{
    fsdp_ctl *ctl = NULL;
    cr_assert_eq(fsdp_backend_null_create(1, &ctl, NULL), FSDP_OK);
    fsdp_hosts h = { 1, 1, one_host };
    cr_assert_eq(fsdp_devices_agree(ctl, &h, 0), FSDP_OK);
    fsdp_ctl_free(ctl);
}
