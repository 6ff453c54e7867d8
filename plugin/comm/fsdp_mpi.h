/* fsdp_mpi.h: mpiCheck, shared by the code that calls MPI (the MPI backend
 * and its shared-memory path): an MPI error becomes FSDP_ERR_COMM with
 * MPI's own message, returned, never exit().  fsdp_mpi.c holds the one
 * function behind it. */
#ifndef FSDP_MPI_H
#define FSDP_MPI_H

#include <mpi.h>
#include "fsdp.h"

fsdp_status fsdp_mpi_fail(int err, const char *file, int line, const char *call);

#define mpiCheck(call)                                                          \
    do {                                                                        \
        int mpi_err_ = (call);                                                  \
        if (mpi_err_ != MPI_SUCCESS)                                            \
            return fsdp_mpi_fail(mpi_err_, __FILE__, __LINE__, #call);          \
    } while (0)

#endif
