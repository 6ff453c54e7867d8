/* The device half of frozen layers' wrappers (fsdp_frozen.h), GPU builds
 * only: the device twins of the arrays a frozen backward touches, and the
 * device math, Darknet's and the plugin's kernels (fsdp_kernels.h). */
#include "activations.h"
#include "blas.h"
#include "gemm.h"
#include "fsdp_frozen.h"
#include "fsdp_kernels.h"

static void device_add(int n, float *x, float *y) { axpy_gpu(n, 1, x, 1, y, 1); }

static void device_arrays(const layer *l, const network *net, fsdp_frozen_arrays *a)
{
    *a = (fsdp_frozen_arrays){ l->output_gpu, l->delta_gpu, l->scales_gpu, l->rolling_variance_gpu,
                               net->delta_gpu };
}

/* Darknet's backward_connected_layer_gpu clips first, with these bounds. */
static void device_clip(int n, float *delta) { constrain_gpu(n, 1, delta, 1); }

/* The end of backward_connected_layer_gpu (same gemm) for a frozen layer:
 * no weight gradients, only the delta of the layer below, if it needs one. */
static void connected_rest(layer l, network net)
{
    if (net.delta_gpu)
        gemm_gpu(0, 0, l.batch, l.inputs, l.outputs, 1, l.delta_gpu, l.outputs, l.weights_gpu, l.inputs, 1,
                 net.delta_gpu, l.inputs);
}

const fsdp_frozen_device fsdp_frozen_gpu = {
    { gradient_array_gpu, fsdp_bn_inference_delta_gpu, device_add },
    device_arrays,
    device_clip,
    connected_rest,
};
