/* Whether a launcher started this process, and MPI for it (fsdp_launch.h). */
#include <stdlib.h>
#include <mpi.h>
#include "fsdp_env.h"
#include "fsdp_launch.h"
#include "fsdp_stop.h"

int fsdp_launched(void)
{
    const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                           "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i)
        if (fsdp_env(vars[i])) return 1;
    return 0;
}

fsdp_status fsdp_launch_mpi(int *argc, char **argv)
{
    int provided, world_rank = 0;
    if (MPI_Init_thread(argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return fsdp_fail(FSDP_ERR_COMM, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    fsdp_stop_install_crash(world_rank);
    return FSDP_OK;
}
