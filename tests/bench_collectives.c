/* bench_collectives: an nccl-tests-style table for the MPI backend's
 * all_gather, reduce_scatter and all_reduce.
 *
 *   mpirun -np 2 --oversubscribe --mca btl_vader_single_copy_mechanism none \
 *       build/tests/bench_collectives [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-w WARMUP]
 *
 * Built a second time with FSDP_BENCH_DEVICE as bench_collectives_gpu (GPU
 * builds): the same table on device buffers for the NCCL backend (when there
 * are as many GPUs as ranks; rank r on GPU r) and the MPI backend staged
 * through host memory (ranks share GPU 0 when there are fewer GPUs), then
 * cudaMemcpy device to device on rank 0's GPU as the reference line.  A
 * timed call ends when the compute stream has the result
 * (cudaStreamSynchronize on the legacy stream).
 *
 * size is S, the full buffer in bytes (the gathered buffer, the buffer
 * reduce-scattered, the buffer all-reduced); count is S in floats.  Each
 * iteration starts after a barrier and takes the slowest rank's time; the
 * table shows the median.  algbw = S / time; busbw scales it by the share of
 * S each rank must send, as nccl-tests does: (n-1)/n for all-gather and
 * reduce-scatter, 2(n-1)/n for all-reduce.  Correctness is
 * test_collectives' job, not this one's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "fsdp_backend.h"
#include "fsdp_cuda_backends.h"
#ifdef FSDP_BENCH_DEVICE
#include <cuda_runtime.h>
#include "gpu_test.h"
#endif

typedef struct {
    size_t min_bytes, max_bytes;
    int iters, warmup;
} options;

typedef struct {
    const char *name;
    fsdp_status (*run)(fsdp_coll *b, float *full, float *shard, size_t shard_n);
    double bus_factor; /* busbw / algbw, times n / (n-1); 0: busbw = algbw (a copy) */
} collective;

static fsdp_status run_all_gather(fsdp_coll *b, float *full, float *shard, size_t n)
{
    return fsdp_coll_all_gather(b, shard, full, n);
}

static fsdp_status run_reduce_scatter(fsdp_coll *b, float *full, float *shard, size_t n)
{
    return fsdp_coll_reduce_scatter(b, full, shard, n);
}

static fsdp_status run_all_reduce(fsdp_coll *b, float *full, float *shard, size_t n)
{
    (void)shard;
    return fsdp_coll_all_reduce(b, full, n * (size_t)b->world);
}

static const collective collectives[] = {
    { "all_gather", run_all_gather, 1 },
    { "reduce_scatter", run_reduce_scatter, 1 },
    { "all_reduce", run_all_reduce, 2 },
};

static int parse(int argc, char **argv, options *o)
{
    *o = (options){ .min_bytes = 1024, .max_bytes = 64u << 20, .iters = 20, .warmup = 5 };
    for (int i = 1; i + 1 < argc; i += 2) {
        long long v = atoll(argv[i + 1]);
        if (v <= 0)
            return 0;
        if (!strcmp(argv[i], "-b"))
            o->min_bytes = (size_t)v;
        else if (!strcmp(argv[i], "-e"))
            o->max_bytes = (size_t)v;
        else if (!strcmp(argv[i], "-n"))
            o->iters = (int)v;
        else if (!strcmp(argv[i], "-w"))
            o->warmup = (int)v;
        else
            return 0;
    }
    return argc % 2 == 1 && o->min_bytes <= o->max_bytes;
}

static void must(fsdp_status s, const char *what)
{
    if (s == FSDP_OK)
        return;
    fprintf(stderr, "bench_collectives: %s: %s\n", what, fsdp_status_str(s));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#ifdef FSDP_BENCH_DEVICE
/* The reference: a device-to-device copy of S bytes on rank 0 (the other
 * ranks wait, so that ranks sharing a GPU do not compete). */
static fsdp_status run_memcpy(fsdp_coll *b, float *full, float *shard, size_t n)
{
    if (b->rank == 0)
        cuda_must(cudaMemcpy(shard, full, n * (size_t)b->world * sizeof(float),
                             cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
    return FSDP_OK;
}

static const collective memcpy_d2d = { "memcpy_d2d", run_memcpy, 0 };
#endif

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over iterations of the slowest rank's time, in seconds; h: the
 * ranks' host control, for the barriers. */
static double median_time(fsdp_ctl *h, fsdp_coll *b, const collective *c, const options *o,
                          float *full, float *shard, size_t n, double *times)
{
    for (int i = 0; i < o->warmup + o->iters; i++) {
        must(fsdp_ctl_barrier(h), "barrier");
        double t0 = MPI_Wtime();
        must(c->run(b, full, shard, n), c->name);
#ifdef FSDP_BENCH_DEVICE
        cuda_must(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
#endif
        if (i >= o->warmup)
            times[i - o->warmup] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, times, o->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(times, (size_t)o->iters, sizeof *times, by_value);
    return o->iters % 2 ? times[o->iters / 2]
                        : (times[o->iters / 2 - 1] + times[o->iters / 2]) / 2;
}

static void bench(fsdp_ctl *h, fsdp_coll *b, const collective *c, const options *o,
                  float *full, float *shard, double *times)
{
    int w = b->world;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
        size_t n = fsdp_shard_count((bytes + sizeof(float) - 1) / sizeof(float), w);
        size_t s = n * (size_t)w * sizeof(float); /* padded up to a multiple of the world */
        double t = median_time(h, b, c, o, full, shard, n, times);
        double algbw = (double)s / t / 1e9;
        double busbw = c->bus_factor ? algbw * c->bus_factor * (w - 1) / w : algbw;
        if (b->rank == 0)
            printf("%16s %12zu %14zu %11.1f %12.3f %12.3f\n", c->name, s, s / sizeof(float),
                   t * 1e6, algbw, busbw);
    }
}

static void print_header(const fsdp_coll *b, const options *o, const char *where)
{
    if (b->rank != 0)
        return;
    printf("# bench_collectives: backend %s, world %d%s, median of %d iterations after %d warmup\n"
           "# time: slowest rank after a barrier; algbw = size/time; busbw = algbw*(n-1)/n,\n"
           "# all_reduce 2(n-1)/n\n", b->name, b->world, where, o->iters, o->warmup);
    if (!strcmp(b->name, "mpi"))
        printf("# reduce-scatter and all-reduce: %s\n", fsdp_backend_mpi_shared_memory(b)
               ? "shared memory (fsdp_shm.h)" : "point to point (fsdp_pairs.h: FSDP_SHM=0, or ranks on several nodes)");
    printf("#\n");
    printf("# %14s %12s %14s %11s %12s %12s\n", "collective", "size(B)", "count(float)",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)");
}

static void bench_backend(fsdp_ctl *h, fsdp_coll *b, const options *o, const char *where, float *full,
                          float *shard, double *times)
{
    print_header(b, o, where);
    for (size_t i = 0; i < sizeof collectives / sizeof collectives[0]; i++)
        bench(h, b, &collectives[i], o, full, shard, times);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    options o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_collectives [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-w WARMUP]\n");
        MPI_Finalize();
        return 2;
    }
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t max_n = fsdp_shard_count((o.max_bytes + 3) / sizeof(float), world) * (size_t)world;
    double *times = calloc((size_t)o.iters, sizeof(double));
    if (!times)
        must(FSDP_ERR_NOMEM, "buffers");
#ifndef FSDP_BENCH_DEVICE
    fsdp_ctl *h = NULL;
    fsdp_coll *b = NULL;
    must(fsdp_backend_mpi_create(&h, &b), "mpi backend");
    /* Zeros stay zeros through every sum: no overflow, no denormals to slow
     * the reductions down. */
    float *full = calloc(max_n + 1, sizeof(float)), *shard = calloc(max_n + 1, sizeof(float));
    if (!full || !shard)
        must(FSDP_ERR_NOMEM, "buffers");
    bench_backend(h, b, &o, "", full, shard, times);
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    free(full);
    free(shard);
#else
    int gpus = gpu_count(rank == 0);
    if (!gpus) {
        MPI_Finalize();
        return GPU_TEST_SKIP;
    }
    int device = gpus >= world ? rank : 0;
    char where[64];
    snprintf(where, sizeof where, ", %d GPU(s): %s", gpus,
             gpus >= world ? "rank r on GPU r" : "ranks share GPU 0");
    cuda_must(cudaSetDevice(device), "cudaSetDevice");
    float *full = NULL, *shard = NULL;
    cuda_must(cudaMalloc((void **)&full, (max_n + 1) * sizeof(float)), "cudaMalloc");
    cuda_must(cudaMalloc((void **)&shard, (max_n + 1) * sizeof(float)), "cudaMalloc");
    cuda_must(cudaMemset(full, 0, (max_n + 1) * sizeof(float)), "cudaMemset");
    cuda_must(cudaMemset(shard, 0, (max_n + 1) * sizeof(float)), "cudaMemset");
    fsdp_ctl *h = NULL;
    fsdp_coll *b = NULL, *host = NULL;
    must(fsdp_backend_mpi_create(&h, &host), "mpi backend");
    if (gpus >= world) {
        must(fsdp_backend_nccl_create(h, device, &b), "nccl backend");
        bench_backend(h, b, &o, where, full, shard, times);
        fsdp_coll_free(b);
    } else if (rank == 0) {
        printf("# bench_collectives: backend nccl, world %d: skipped, needs %d GPUs, found %d\n",
               world, world, gpus);
    }
    must(fsdp_backend_staged_create(host, &b), "mpi-staged backend");
    if (rank == 0)
        printf("#\n");
    bench_backend(h, b, &o, where, full, shard, times);
    if (rank == 0)
        printf("#\n# reference: cudaMemcpy device to device of size bytes on rank 0's GPU "
               "(device memory traffic is twice size: read and write)\n");
    bench(h, b, &memcpy_d2d, &o, full, shard, times);
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    cudaFree(full);
    cudaFree(shard);
#endif
    free(times);
    MPI_Finalize();
    return 0;
}
