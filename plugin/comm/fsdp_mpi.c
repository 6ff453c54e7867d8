/* fsdp_mpi.c: see fsdp_mpi.h.  Its own file, so that the MPI backend and
 * the shared-memory path it uses (fsdp_shm.c) both depend on it rather
 * than on each other. */
#include <stdio.h>
#include "fsdp_mpi.h"

fsdp_status fsdp_mpi_fail(int err, const char *file, int line, const char *call)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error code %d", err);
    return fsdp_fail(FSDP_ERR_COMM, "%s:%d: %s: MPI error: %s", file, line, call, msg);
}
