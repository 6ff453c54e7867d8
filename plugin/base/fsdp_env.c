/* The one table of environment variables (fsdp_env.h).  A variable the
 * code reads gets its line here first; tools/reference prints the page. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_env.h"

#define EVERY_RANK "yes: `-x NAME`"
#define LAUNCHER "no: the launcher sets it"
#define TOOL "no: the tool reads it"
#define BUILD "no: `cmake -DNAME=VALUE`"

const fsdp_env_var fsdp_env_table[] = {
    /* Read by the plugin on every rank. */
    { "FSDP_ALL_RANKS_PRINT", FSDP_ENV_PLUGIN, "0|1", "0", EVERY_RANK, 0,
      "1: every rank prints Darknet's output, not only rank 0 (the others still print their errors)" },
    { "FSDP_SHM", FSDP_ENV_PLUGIN, "1|0", "1", EVERY_RANK, 0,
      "0: the ranks of a machine share no memory: host collectives go through MPI's own, "
      "and shard_node_shared (hybrid sharding too) is off; 0 on any rank turns it off for all" },
    { "FSDP_ACTS", FSDP_ENV_PLUGIN, "1|0", "1", EVERY_RANK, 0,
      "0: keep every layer's activations as Darknet does, instead of sharing the buffers of those backward never reads" },
    { "FSDP_CHECKPOINT_FOREGROUND", FSDP_ENV_PLUGIN, "0|1", "0", EVERY_RANK, 0,
      "1: -fsdp-checkpoint-every writes each checkpoint in the training step, without the copy a thread writes "
      "in the background (less memory, a longer step)" },
    { "FSDP_CHECKPOINT_SLOW_MS", FSDP_ENV_PLUGIN, "MS", "0", EVERY_RANK, 1,
      "a pause of MS ms after each 4 KiB a shard file takes: a slow disk, to stop a writer mid-file" },
    { "FSDP_DEVICE_POOL", FSDP_ENV_PLUGIN, "1|0", "1", EVERY_RANK, 0,
      "0: GPU runs take device buffers with plain cudaMalloc/cudaFree instead of CUDA's stream-ordered pool "
      "(slower; for compute-sanitizer, whose memcheck sees a use after free only in memory the driver has back)" },
    { "TMPDIR", FSDP_ENV_PLUGIN, "DIR", "/tmp", "no: read by -fsdp-plan, one process", 0,
      "where -fsdp-plan writes the cfg copies it predicts from" },
    /* Set by the launcher: the plugin only looks. */
    { "OMPI_COMM_WORLD_SIZE", FSDP_ENV_LAUNCHER, "N", "unset", LAUNCHER, 0,
      "set: launched by mpirun, so MPI starts (likewise PMI_SIZE, PMIX_RANK, PMI_RANK, MV2_COMM_WORLD_SIZE, "
      "SLURM_STEP_NUM_TASKS); unset: a world of one without MPI" },
    { "PMI_SIZE", FSDP_ENV_LAUNCHER, "N", "unset", LAUNCHER, 0, "set: launched by a PMI launcher (srun, mpiexec.hydra)" },
    { "PMIX_RANK", FSDP_ENV_LAUNCHER, "R", "unset", LAUNCHER, 0, "set: launched by a PMIx launcher; the rank -fsdp-help prints on" },
    { "PMI_RANK", FSDP_ENV_LAUNCHER, "R", "unset", LAUNCHER, 0, "set: launched by a PMI launcher; the rank -fsdp-help prints on" },
    { "MV2_COMM_WORLD_SIZE", FSDP_ENV_LAUNCHER, "N", "unset", LAUNCHER, 0, "set: launched by MVAPICH's launcher" },
    { "SLURM_STEP_NUM_TASKS", FSDP_ENV_LAUNCHER, "N", "unset", LAUNCHER, 0, "set: a Slurm job step (srun)" },
    { "OMPI_COMM_WORLD_RANK", FSDP_ENV_LAUNCHER, "R", "unset", LAUNCHER, 0,
      "the rank: -fsdp-help prints on rank 0 only" },
    { "OMPI_MCA_orte_hnp_uri", FSDP_ENV_LAUNCHER, "URI", "unset", LAUNCHER, 0,
      "set by mpirun: its control connections may notice a lost machine before -fsdp-timeout, which rank 0 then says" },
    /* Open MPI 4's defaults for the control connections' keepalive
     * (mpirun --mca NAME VALUE puts OMPI_MCA_NAME in the ranks' environment). */
    { "OMPI_MCA_oob_tcp_keepalive_time", FSDP_ENV_LAUNCHER, "S", "300", "no: `mpirun --mca oob_tcp_keepalive_time S`", 0,
      "with _intvl and _probes: when mpirun notices a lost machine, which rank 0 compares with -fsdp-timeout" },
    { "OMPI_MCA_oob_tcp_keepalive_intvl", FSDP_ENV_LAUNCHER, "S", "20", "no: `mpirun --mca oob_tcp_keepalive_intvl S`", 0,
      "seconds between mpirun's keepalive probes" },
    { "OMPI_MCA_oob_tcp_keepalive_probes", FSDP_ENV_LAUNCHER, "N", "9", "no: `mpirun --mca oob_tcp_keepalive_probes N`", 0,
      "keepalive probes mpirun sends before it gives a machine up" },
    { "OMPI_MCA_osc_sm_backing_directory", FSDP_ENV_LAUNCHER, "DIR", "/dev/shm",
      "no: `mpirun --mca osc_sm_backing_directory DIR`", 0,
      "where a machine's shared memory lives; the plugin checks it has room before it maps any" },
    /* Darknet: the project's loader and its patches. */
    { "DARKNET_PLUGIN", FSDP_ENV_DARKNET, "PATH", "unset", "yes: `-x DARKNET_PLUGIN`", 0,
      "load this plugin, as -plugin PATH does" },
    { "DN_BN_DOUBLE", FSDP_ENV_DARKNET, "0|1", "0", "yes: `-x DN_BN_DOUBLE`", 1,
      "1: batch norm's sums over the batch accumulate in double (the oracle's rounding, for the tests)" },
    /* The tools. */
    { "FSDP_BUILD_DIR", FSDP_ENV_TOOLS, "DIR", "build", TOOL, 0,
      "the build folder of tools/setup, tools/demo, tools/bench and tools/bench-torch" },
    { "FSDP_CMAKE_ARGS", FSDP_ENV_TOOLS, "ARGS", "empty", TOOL, 0,
      "tools/setup: more CMake options (e.g. -DFSDP_OPENBLAS=OFF); given, CMake configures again" },
    { "FSDP_TEST_JOBS", FSDP_ENV_TOOLS, "N", "2", TOOL, 0, "tools/test: tests run at once (ctest -j)" },
    { "CI", FSDP_ENV_TOOLS, "true", "unset", TOOL, 0,
      "true: tools/test also builds the GPU variant and runs every test, as --gpu does" },
    { "FSDP_MPIEXEC", FSDP_ENV_TOOLS, "PATH", "mpirun", TOOL, 1,
      "the mpirun tools/lib.sh's MPIRUN runs (CTest sets it to the one CMake found)" },
    { "FSDP_DEMO_RANKS", FSDP_ENV_TOOLS, "N", "2", TOOL, 0,
      "tools/demo: ranks of each run (the cfgs are rescaled to keep the global batch)" },
    { "FSDP_DEMO_PLUGIN", FSDP_ENV_TOOLS, "1|0", "1", TOOL, 0,
      "tools/demo: 0 runs Darknet without the plugin (with FSDP_DEMO_RANKS=1), for comparison" },
    { "FSDP_DEMO_TRAIN", FSDP_ENV_TOOLS, "N", "12000", TOOL, 0, "tools/demo: Fashion-MNIST training images" },
    { "FSDP_DEMO_TEST", FSDP_ENV_TOOLS, "N", "2000", TOOL, 0, "tools/demo: Fashion-MNIST held-out images" },
    { "FSDP_DEMO_DET_TRAIN", FSDP_ENV_TOOLS, "N", "800", TOOL, 0, "tools/demo: detection training images" },
    { "FSDP_DEMO_DET_TEST", FSDP_ENV_TOOLS, "N", "100", TOOL, 0, "tools/demo: detection held-out images" },
    { "FSDP_BENCH_DIR", FSDP_ENV_TOOLS, "DIR", "a temporary folder, removed", TOOL, 0,
      "tools/bench: where a mode writes its data, logs and stats; given, it is kept" },
    { "FSDP_BENCH_BUILT", FSDP_ENV_TOOLS, "0|1", "0", TOOL, 1,
      "1: tools/bench has built already, so the mode it runs (tools/bench.d/MODE) does not build again" },
    { "FSDP_BENCH_ROUNDS", FSDP_ENV_TOOLS, "N", "per mode (tools/bench --help)", TOOL, 0,
      "tools/bench: interleaved rounds of a mode's runs" },
    { "FSDP_BENCH_BASE", FSDP_ENV_TOOLS, "DIR", "unset", TOOL, 0,
      "tools/bench ab: the other build folder to time against (needed)" },
    { "FSDP_BENCH_WORLDS", FSDP_ENV_TOOLS, "N...", "1 2 4 8 16 32 64 128", TOOL, 0,
      "tools/bench scale: the worlds on one machine (empty: none)" },
    { "FSDP_BENCH_MACHINES", FSDP_ENV_TOOLS, "MxL...", "8x4", TOOL, 0,
      "tools/bench scale: the simulated machines (M of L ranks; needs root; empty: none)" },
    { "FSDP_BENCH_PLAN", FSDP_ENV_TOOLS, "WORLDS...", "64 1-1024", TOOL, 0,
      "tools/bench scale: the -fsdp-plan WORLDS timed on yolov3.cfg" },
    { "FSDP_BENCH_WORLD", FSDP_ENV_TOOLS, "N", "32", TOOL, 0, "tools/bench trace: ranks of the stragglers' runs" },
    { "FSDP_BENCH_LINKS", FSDP_ENV_TOOLS, "KIND RATE...", "veth 20mbit", TOOL, 0,
      "tools/bench machines: the simulated links between two machines (a kind and a tc rate each)" },
    { "FSDP_BENCH_LINK_STEPS", FSDP_ENV_TOOLS, "N", "5", TOOL, 0, "tools/bench machines: training steps per run" },
    { "FSDP_BENCH_MODES", FSDP_ENV_TOOLS, "MODE...", "flat full hybrid hybrid-bf16 hybrid-int8 full-int8", TOOL, 0,
      "tools/bench machines: the ways of crossing the link it compares" },
    { "FSDP_BENCH_SEEDS", FSDP_ENV_TOOLS, "S...", "1", TOOL, 0, "tools/bench wire: the seeds each quality run is averaged over" },
    { "FSDP_BENCH_STEPS", FSDP_ENV_TOOLS, "N", "300", TOOL, 0, "tools/bench longrun: training steps" },
    { "FSDP_BENCH_MINUTES", FSDP_ENV_TOOLS, "M", "1", TOOL, 0, "tools/bench longrun: -fsdp-checkpoint-every's interval" },
    { "FSDP_BENCH_RANKS", FSDP_ENV_TOOLS, "N", "2", TOOL, 0, "tools/bench probe-cache: ranks of every run" },
    { "FSDP_BENCH_TRAIN", FSDP_ENV_TOOLS, "N", "12000", TOOL, 0,
      "tools/bench probe-cache: Fashion-MNIST training images of the demo's probe" },
    { "FSDP_GPU_CHECK_LOGS", FSDP_ENV_TOOLS, "DIR", "build-gpu-check", TOOL, 0, "tools/gpu-check: where the full logs go" },
    { "FSDP_GPU_CHECK_BUDGET", FSDP_ENV_TOOLS, "S", "560", TOOL, 0,
      "tools/gpu-check: seconds for all parts together (its plan fits; at most 600, one GPU command's limit)" },
    { "FSDP_GPU_CHECK_STEPS", FSDP_ENV_TOOLS, "N", "20", TOOL, 0, "tools/gpu-check: training steps per benchmark run" },
    { "FSDP_GPU_CHECK_BUNDLE", FSDP_ENV_TOOLS, "auto|1|0", "auto", TOOL, 0,
      "tools/gpu-check: 1 always uses the bundle, 0 always builds on the GPU machine" },
    { "FSDP_GPU_CHECK_MODE", FSDP_ENV_TOOLS, "bundle|build", "chosen once", TOOL, 1,
      "tools/gpu-check: the build its parts use, passed from the run that chose it to each part" },
    { "FSDP_BUNDLE", FSDP_ENV_TOOLS, "DIR", "unset", TOOL, 0,
      "tools/gpu-bundle run/test: the unpacked bundle (`eval \"$(tools/gpu-bundle env DIR)\"` sets it)" },
    { "FSDP_BUNDLE_OK", FSDP_ENV_TOOLS, "1", "unset", TOOL, 1,
      "tools/gpu-check: the bundle passed its check, passed to each part" },
    { "FSDP_GPU_BUILD_DIR", FSDP_ENV_TOOLS, "DIR", "unset", TOOL, 0,
      "tools/gpu-bundle: the GPU build folder tools/setup makes for the bundle" },
    /* CMake options. */
    { "FSDP_GPU", FSDP_ENV_CMAKE, "ON|OFF", "OFF", BUILD, 0, "build Darknet and the plugin for CUDA (CUDA 12 or 13, cuDNN 9, NCCL 2.14+)" },
    { "FSDP_CUDNN", FSDP_ENV_CMAKE, "ON|OFF", "ON", BUILD, 0, "use cuDNN in the GPU build" },
    { "FSDP_OPENBLAS", FSDP_ENV_CMAKE, "ON|OFF", "ON", BUILD, 0, "route Darknet's CPU gemm through OpenBLAS" },
    { "FSDP_OPENCV", FSDP_ENV_CMAKE, "ON|OFF", "OFF", BUILD, 0, "build Darknet with OpenCV (image I/O, display)" },
    { "FSDP_TESTS", FSDP_ENV_CMAKE, "ON|OFF", "ON", BUILD, 0, "build the tests" },
    { "FSDP_CHECKS", FSDP_ENV_CMAKE, "ON|OFF", "FSDP_TESTS", BUILD, 0,
      "check every state transition of the flats, gradients and engine" },
    { "FSDP_CUDA_ARCHS", FSDP_ENV_CMAKE, "LIST", "80;90", BUILD, 0,
      "GPU architectures (CMake's CUDA_ARCHITECTURES); tools/gpu-check also reads it from the environment" },
    { "FSDP_CPU_BUILD_DIR", FSDP_ENV_CMAKE, "DIR", "build", BUILD, 1,
      "the GPU build's tests: the CPU build they compare against" },
};
const int fsdp_nenv = (int)(sizeof fsdp_env_table / sizeof fsdp_env_table[0]);

const fsdp_env_var *fsdp_env_find(const char *name)
{
    for (int i = 0; i < fsdp_nenv; ++i)
        if (!strcmp(fsdp_env_table[i].name, name)) return &fsdp_env_table[i];
    return NULL;
}

const char *fsdp_env(const char *name)
{
    if (!fsdp_env_find(name)) {
        fprintf(stderr, "fsdp: %s is read but missing from fsdp_env.c's table\n", name);
        return NULL;
    }
    return getenv(name);
}

static long table_default(const char *name)
{
    const fsdp_env_var *e = fsdp_env_find(name);
    return e ? strtol(e->dflt, NULL, 10) : 0;
}

int fsdp_env_switch(const char *name)
{
    const char *v = fsdp_env(name);
    if (!v || !*v) return table_default(name) != 0;
    return strcmp(v, "0") != 0;
}

long fsdp_env_long(const char *name)
{
    const char *v = fsdp_env(name);
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    return !v || end == v || *end ? table_default(name) : x;
}
