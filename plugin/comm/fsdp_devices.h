/* fsdp_devices.h: which GPU each rank computes on, checked across ranks
 * before NCCL starts.  NCCL refuses two ranks of one communicator on the
 * same GPU with a bare "invalid usage"; that happens with -i N (every rank of
 * a machine on GPU N) or with more ranks on a machine than it has GPUs.
 * Here it is refused first, naming the ranks, the machine, the GPU and the
 * backend that lets ranks share a GPU (-fsdp-backend mpi-staged). */
#ifndef FSDP_DEVICES_H
#define FSDP_DEVICES_H

#include "fsdp.h"
#include "fsdp_backend.h"
#include "fsdp_hosts.h"

/* device_of[r]: the GPU rank r computes on (h->world entries; negative: on
 * the host, never shared).  1 with *a < *b the first two ranks on one
 * (machine, GPU) pair, in rank order; 0 if every pair is a rank's own. */
int fsdp_devices_find_shared(const fsdp_hosts *h, const int *device_of, int *a, int *b);
/* FSDP_ERR_CONFIG, with those two ranks, the GPU and the remedy printed, if
 * two ranks share a GPU; else FSDP_OK. */
fsdp_status fsdp_devices_check_unique(const fsdp_hosts *h, const int *device_of);

/* Collective over ctl (world h->world): every rank's device gathered, then
 * checked as above.  Every rank gives the same answer and, refusing, stops
 * with the others (fsdp_agreed_stop); rank 0 alone prints why. */
fsdp_status fsdp_devices_agree(fsdp_ctl *ctl, const fsdp_hosts *h, int device);

#endif
