/* gpu_test.h: what the GPU test programs share (GPU builds only). */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cuda_runtime.h>

/* A failed CUDA call ends the program (under mpirun, the job: mpirun stops
 * the other ranks when one exits non-zero). */
static inline void cuda_must(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(3);
}

/* Exit code that CTest reports as a skip (SKIP_RETURN_CODE in tests/gpu.cmake). */
#define GPU_TEST_SKIP 77

/* How many GPUs the CUDA runtime sees; with none, 0 after printing (if
 * `say`) "skipped: no GPU" and why.  Only a machine without a GPU skips: no
 * device, or no driver and no NVIDIA device node.  A GPU the runtime cannot
 * use (a driver too old, a sandbox refusing it) is a failure, not a skip. */
static inline int gpu_count(int say)
{
    int gpus = 0;
    cudaError_t e = cudaGetDeviceCount(&gpus);
    if (e == cudaSuccess && gpus > 0)
        return gpus;
    int absent = e == cudaSuccess || e == cudaErrorNoDevice ||
                 (e == cudaErrorInsufficientDriver && access("/dev/nvidiactl", F_OK) != 0);
    if (!absent) {
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        fprintf(stderr, "a GPU is there but CUDA cannot use it (cudaGetDeviceCount: %s; the driver supports "
                "CUDA %d.%d, this build's runtime is CUDA %d.%d)\n", cudaGetErrorString(e), driver / 1000,
                driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        if (e == cudaErrorInsufficientDriver)
            fprintf(stderr, "build with the CUDA %d toolkit (cmake/gpu.cmake takes the one it finds; CUDA 12 and "
                    "13 work), or install a driver for CUDA %d\n", driver / 1000, runtime / 1000);
        exit(3);
    }
    if (say)
        printf("skipped: no GPU (cudaGetDeviceCount: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
}

#endif
