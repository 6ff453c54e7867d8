/* The (machine, GPU) pairs of a run, unique before NCCL starts (fsdp_devices.h). */
#include <stdint.h>
#include <stdlib.h>
#include "fsdp_devices.h"

int fsdp_devices_find_shared(const fsdp_hosts *h, const int *device_of, int *a, int *b)
{
    /* Quadratic over the ranks, once at start-up: the first pair in rank
     * order is the one a user can find in the launcher's placement. */
    for (int i = 0; i < h->world; ++i) {
        if (device_of[i] < 0) continue;
        for (int j = i + 1; j < h->world; ++j) {
            if (device_of[j] != device_of[i] || h->host_of[j] != h->host_of[i]) continue;
            *a = i;
            *b = j;
            return 1;
        }
    }
    return 0;
}

fsdp_status fsdp_devices_check_unique(const fsdp_hosts *h, const int *device_of)
{
    int a, b;
    if (!fsdp_devices_find_shared(h, device_of, &a, &b)) return FSDP_OK;
    return fsdp_fail(FSDP_ERR_CONFIG,
                     "ranks %d and %d both compute on GPU %d of one machine (machine %d, rank %d's), and NCCL "
                     "needs a GPU of its own for each rank: run at most as many ranks on a machine as it has "
                     "GPUs, without -i (each rank then takes the GPU of its place on its machine), or pass "
                     "-fsdp-backend mpi-staged, which moves the buffers through host memory with MPI and lets "
                     "ranks share a GPU", a, b, device_of[a], h->host_of[a], a);
}

fsdp_status fsdp_devices_agree(fsdp_ctl *ctl, const fsdp_hosts *h, int device)
{
    /* Each rank fills its own entry, device + 1 (0: the host); the maximum
     * over ranks is then every rank's entry. */
    uint64_t *v = calloc((size_t)h->world, sizeof *v);
    int *device_of = malloc((size_t)h->world * sizeof *device_of);
    fsdp_status s = v && device_of ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK) {
        v[ctl->rank] = device >= 0 ? (uint64_t)device + 1 : 0;
        s = fsdp_ctl_max_u64(ctl, v, (size_t)h->world);
    }
    if (s == FSDP_OK) {
        int a, b;
        for (int r = 0; r < h->world; ++r) device_of[r] = (int)v[r] - 1;
        if (ctl->rank == 0) s = fsdp_devices_check_unique(h, device_of);
        else if (fsdp_devices_find_shared(h, device_of, &a, &b)) s = FSDP_ERR_CONFIG;
        if (s != FSDP_OK) fsdp_agreed_stop();   /* the same verdict on every rank */
    }
    free(v);
    free(device_of);
    return s;
}
