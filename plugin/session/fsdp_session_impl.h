/* fsdp_session_impl.h: the session's state, for session/'s files alone (fsdp_session.h). */
#ifndef FSDP_SESSION_IMPL_H
#define FSDP_SESSION_IMPL_H

#include <pthread.h>
#include "fsdp_agree.h"
#include "fsdp_hosts.h"
#include "fsdp_log.h"
#include "fsdp_longrun.h"
#include "fsdp_memplan.h"
#include "fsdp_meter.h"
#include "fsdp_observe.h"
#include "fsdp_pcache.h"
#include "fsdp_session.h"

struct fsdp_session {
    fsdp_engine *engine;           /* NULL once freed: the watchdog then describes the teardown */
    fsdp_coll *host_coll;          /* host memory's collectives; the engine's on host runs */
    fsdp_status first_error;       /* a runtime error stops every rank at finish */
    int mpi_started;
    pthread_t main_thread;         /* the one thread that may call MPI */
    const char *backend_flag;      /* -fsdp-backend, NULL: the default */
    double timeout_s;              /* -fsdp-timeout */
    dn_hooks *hooks;               /* Darknet's, to drop bn_sync under sync_bn=0 */
    fsdp_agree agreement;          /* cfg options and weights file, compared across ranks */
    fsdp_hosts hosts;              /* which ranks share a machine */
    fsdp_mem_fixed fixed_bytes;    /* resident before the network was built (the process, libraries, MPI) */
    fsdp_mem_prediction predicted; /* host runs, from the first network built on; peak 0 otherwise */
    fsdp_log log;                  /* rank 0: -fsdp-log and the progress lines */
    fsdp_meter meter;              /* -fsdp-stats */
    fsdp_longrun longrun;          /* checkpoints, resumes, the clock */
    fsdp_observe observe;          /* -fsdp-trace and the stragglers */
    fsdp_pcache pcache;            /* the probe cache (-fsdp-probe-cache) */
    int keep_ring;                 /* the flight recorder's file outlives a run that did not end well */
};

/* fsdp_session_flags.c: this rank's checks of the flags; then every rank's
 * agreement on them (fsdp_agree.h), local being this rank's status. */
fsdp_status fsdp_session_check_flags(fsdp_session *ses, const fsdp_flags *f, int argc, char **argv);
fsdp_status fsdp_session_agree_flags(fsdp_session *ses, fsdp_status local, fsdp_ctl *ctl, const fsdp_flags *f,
                                     int argc, char **argv);

/* fsdp_session_backends.c: host control and host memory's collectives
 * (whatever -fsdp-backend asks for); once the network is built, the
 * device's and the watchdog's wrapper around them; this rank's GPU. */
fsdp_status fsdp_session_host_backend(fsdp_session *ses, fsdp_ctl **ctl);
fsdp_status fsdp_session_device_backend(fsdp_session *ses, network *net);
int fsdp_session_pick_device(const fsdp_session *ses);

#endif
