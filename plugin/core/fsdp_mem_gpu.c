/* The device placement: GPU runs' buffers, in device memory, ordered on
 * Darknet's compute stream (fsdp_mem.h).  A step's buffers come from the
 * device's own stream-ordered pool (fsdp_mem_device_setup), not the host
 * pool. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_mem.h"
#include "fsdp_cuda.h"
#include "fsdp_kernels.h"
#include "darknet.h"   /* cuda_make_array, cuda_free */

static float *dev_alloc(const fsdp_mem_ctx *m, size_t n, int zero)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    void *p = NULL;
    cudaError_t e = m->no_pool ? cudaMalloc(&p, bytes) : cudaMallocAsync(&p, bytes, DN_COMPUTE_STREAM);
    if (e == cudaSuccess && zero) e = cudaMemsetAsync(p, 0, bytes, DN_COMPUTE_STREAM);
    if (e != cudaSuccess) {
        fsdp_fail(FSDP_ERR_NOMEM, "out of device memory for %zu floats: %s", n, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void dev_free(const fsdp_mem_ctx *m, float *p)
{
    /* cudaFree waits for all the device's work: as safe as the ordered free. */
    if (m->no_pool) cudaFree(p);
    else cudaFreeAsync(p, DN_COMPUTE_STREAM);
}

static fsdp_status dev_zero(const fsdp_mem_ctx *m, float *x, size_t n)
{
    cudaCheck(cudaMemsetAsync(x, 0, n * sizeof(float), DN_COMPUTE_STREAM));
    return FSDP_OK;
}

static fsdp_status dev_scale(const fsdp_mem_ctx *m, float *x, int n, float a)
{
    fsdp_bn_scale_gpu(x, n, a);
    return fsdp_kernels_status();
}

static fsdp_status dev_from_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
    return FSDP_OK;
}

static fsdp_status dev_to_host(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
    return FSDP_OK;
}

static fsdp_status dev_copy(const fsdp_mem_ctx *m, float *dst, const float *src, size_t n)
{
    cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, DN_COMPUTE_STREAM));
    return FSDP_OK;
}

static float *dev_alloc_darknet(const fsdp_mem_ctx *m, size_t n) { return cuda_make_array(NULL, n); }

/* Darknet's cuda_make_array memory: its own cuda_free. */
static void dev_free_darknet(const fsdp_mem_ctx *m, float **array)
{
    if (*array) cuda_free(*array);
    *array = NULL;
}

const fsdp_place_i fsdp_place_device = {
    .name = "device",
    .computes = 1,
    .alloc = dev_alloc,
    .free = dev_free,
    .take = dev_alloc,
    .give = dev_free,
    .zero = dev_zero,
    .scale = dev_scale,
    .from_host = dev_from_host,
    .to_host = dev_to_host,
    .copy = dev_copy,
    .alloc_darknet = dev_alloc_darknet,
    .free_darknet = dev_free_darknet,
};

static fsdp_status pool_threshold(int device, uint64_t keep)
{
    cudaMemPool_t pool;
    cudaCheck(cudaDeviceGetDefaultMemPool(&pool, device));
    cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    return FSDP_OK;
}

fsdp_status fsdp_mem_device_setup(fsdp_mem_ctx *m, int device)
{
    if (!m->device) return FSDP_OK;
    const char *env = getenv("FSDP_DEVICE_POOL");
    int pools = 0;
    cudaCheck(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
    if (!pools || (env && !strcmp(env, "0"))) {
        m->no_pool = 1;
        fprintf(stderr, "fsdp: GPU %d: %s: cudaMalloc and cudaFree instead (slower)\n", device,
                pools ? "FSDP_DEVICE_POOL=0" : "no stream-ordered memory pools");
        return FSDP_OK;
    }
    m->pool_device = device;
    return pool_threshold(device, 0);
}

fsdp_status fsdp_mem_device_keep(fsdp_mem_ctx *m, size_t bytes)
{
    if (!m->device || m->no_pool) return FSDP_OK;
    cudaMemPool_t pool;
    /* Set-up's frees are ordered on the compute stream: done before the trim. */
    cudaCheck(cudaStreamSynchronize(DN_COMPUTE_STREAM));
    cudaCheck(cudaDeviceGetDefaultMemPool(&pool, m->pool_device));
    cudaCheck(cudaMemPoolTrimTo(pool, 0));
    return pool_threshold(m->pool_device, bytes);
}
