/* fsdp_launch.h: whether a launcher started this process as one rank of
 * several, and MPI for such a rank. */
#ifndef FSDP_LAUNCH_H
#define FSDP_LAUNCH_H

#include "fsdp.h"

/* Launched by mpirun, srun or another PMI launcher?  Otherwise the world is
 * one process and MPI is not needed. */
int fsdp_launched(void);
/* MPI for this rank (the main thread calls MPI), and its crash report
 * naming the rank. */
fsdp_status fsdp_launch_mpi(int *argc, char **argv);

#endif
