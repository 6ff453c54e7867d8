/* -fsdp-plan WORLDS CFG's mode (fsdp_plan_mode.h). */
#include <mpi.h>
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_launch.h"
#include "fsdp_linkplan.h"
#include "fsdp_plan_mode.h"
#include "fsdp_planner.h"

fsdp_status fsdp_plan_flags_check(const fsdp_flags *f)
{
    if (f->link)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link %s: it describes the machines -fsdp-plan plans a step for; "
                         "give -fsdp-plan WORLDS CFG with it", f->link);
    if (f->budget)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-budget %s: it bounds the settings -fsdp-plan prints; give "
                         "-fsdp-plan WORLDS CFG with it", f->budget);
    return FSDP_OK;
}

/* -fsdp-link probe: the plan's machines and link are the ranks' own,
 * measured over MPI (fsdp_linkplan.h); rank 0 prints the memory tables and
 * the step's plan. */
static fsdp_status plan_probed(int *argc, char **argv, const fsdp_flags *f, dn_hooks *h)
{
    if (!fsdp_launched())
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-link probe: it measures the link between the ranks it runs on; "
                         "launch it with ranks on each machine (e.g. mpirun -np 4 --map-by node darknet ... "
                         "-fsdp-plan %s CFG -fsdp-link probe), or describe the link: -fsdp-link "
                         "MACHINESxRANKS,MBIT[,MS]", f->plan);
    FSDP_TRY(fsdp_launch_mpi(argc, argv));
    fsdp_ctl *ctl = NULL;
    fsdp_coll *coll = NULL;
    const char *cfg = *argc > 1 ? argv[1] : NULL;
    fsdp_status s = fsdp_backend_mpi_create(&ctl, &coll);
    if (s == FSDP_OK) {
        fsdp_status mine = ctl->rank == 0 ? fsdp_planner_run(cfg, f->plan, f->budget, h, stdout) : FSDP_OK;
        s = fsdp_ctl_all_ok(ctl, mine, FSDP_ERR_CONFIG, "could not plan the memory");
    }
    if (s == FSDP_OK) s = fsdp_linkplan_probe_run(cfg, f->budget, h, ctl, coll, stdout);
    fflush(stdout);
    fsdp_coll_free(coll);
    fsdp_ctl_free(ctl);
    MPI_Finalize();
    return s;
}

fsdp_status fsdp_plan_mode(int *argc, char **argv, const fsdp_flags *f, dn_hooks *h)
{
    gpu_index = -1;
    if (f->link && !strcmp(f->link, "probe")) return plan_probed(argc, argv, f, h);
    /* A prediction of host memory, in this one process: no MPI, no GPU. */
    fsdp_status s = fsdp_planner_run(*argc > 1 ? argv[1] : NULL, f->plan, f->budget, h, stdout);
    if (s == FSDP_OK && f->link) s = fsdp_linkplan_run(argv[1], f->link, f->budget, h, stdout);
    return s;
}
