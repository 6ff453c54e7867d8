/* The session's backends: host control and host memory's collectives, the
 * device's, the watchdog's wrapper, and this rank's GPU (fsdp_session_impl.h). */
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_cuda_backends.h"
#include "fsdp_devices.h"
#include "fsdp_session_impl.h"
#include "fsdp_watch.h"
#ifdef GPU
#include <cuda_runtime.h>
#endif

fsdp_status fsdp_session_host_backend(fsdp_session *ses, fsdp_ctl **ctl)
{
    if (!ses->mpi_started) return fsdp_backend_self_create(ctl, &ses->host_coll);
    return fsdp_backend_mpi_create(ctl, &ses->host_coll);
}

/* GPU runs move parameters in device memory: NCCL, or MPI through host
 * staging buffers when asked (several ranks may then share one GPU); host
 * runs move them with MPI.  Each -fsdp-backend value names one of these. */
static fsdp_status device_collectives(fsdp_session *ses, network *net)
{
    fsdp_engine *e = ses->engine;
#ifdef GPU
    int gpu = net->gpu_index >= 0;
#else
    int gpu = 0;
#endif
    const char *want = ses->backend_flag ? ses->backend_flag : gpu ? "nccl" : "mpi";
    if (!gpu && strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend %s: this run computes on the host (-nogpu or a "
                         "CPU build), where the collectives are MPI's: -fsdp-backend mpi", want);
    if (gpu && !strcmp(want, "mpi"))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-backend mpi: this run computes on the GPU: -fsdp-backend "
                         "mpi-staged moves its buffers through host memory with MPI (ranks may share a GPU), "
                         "nccl (the default) between GPUs");
#ifdef GPU
    if (!gpu || fsdp_engine_ctl(e)->world == 1 || fsdp_engine_coll(e) != ses->host_coll) return FSDP_OK;
    fsdp_coll *dev = NULL;
    if (!strcmp(want, "mpi-staged")) {
        /* Its host collectives on an MPI communicator of their own. */
        fsdp_coll *host = NULL;
        FSDP_TRY(fsdp_backend_mpi_create(NULL, &host));
        FSDP_TRY(fsdp_backend_staged_create(host, &dev));
    } else {
        /* NCCL refuses ranks sharing a GPU with a bare "invalid usage": named here first. */
        FSDP_TRY(fsdp_devices_agree(fsdp_engine_ctl(e), &ses->hosts, net->gpu_index));
        FSDP_TRY(fsdp_backend_nccl_create(fsdp_engine_ctl(e), net->gpu_index, &dev));
    }
    fsdp_engine_set_coll(e, dev);
#else
    (void)e;
#endif
    return FSDP_OK;
}

/* The watchdog's wrapper around the device collectives (host control and
 * host memory's are wrapped at start-up). */
static fsdp_status watch_device(fsdp_session *ses)
{
    fsdp_coll *coll = fsdp_engine_coll(ses->engine);
    if (coll == ses->host_coll || ses->timeout_s <= 0) return FSDP_OK;
    FSDP_TRY(fsdp_watch_wrap(NULL, &coll));
    fsdp_engine_set_coll(ses->engine, coll);
    return FSDP_OK;
}

fsdp_status fsdp_session_device_backend(fsdp_session *ses, network *net)
{
    fsdp_status s = device_collectives(ses, net);
    /* Without the hook GPU builds keep cuDNN's batch norm (darknet_plugin.h). */
    if (!fsdp_engine_cfg(ses->engine)->sync_bn) ses->hooks->bn_sync = NULL;
    return s == FSDP_OK ? watch_device(ses) : s;
}

/* One GPU per rank on a node, by the rank's place on its node.  Ranks that
 * share a GPU (more ranks than GPUs) need -fsdp-backend mpi-staged. */
int fsdp_session_pick_device(const fsdp_session *ses)
{
#ifdef GPU
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 0;
    return fsdp_hosts_local_rank(&ses->hosts, fsdp_engine_ctl(ses->engine)->rank) % ndev;
#else
    (void)ses;
    return 0;
#endif
}
