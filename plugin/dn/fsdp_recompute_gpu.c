/* The device half of activation recomputation (fsdp_recompute.h), GPU
 * builds only: a layer's device forward again, and a dropout's replayed
 * with the device draws its forward kept. */
#include "fsdp_kernels.h"
#include "fsdp_recompute.h"

/* As forward_network_gpu chains them: each layer reads the one below, the
 * first the network's device input. */
static void device_forward(network *net, int k)
{
    layer l = net->layers[k];
    network n = *net;
    if (k) {
        n.input_gpu = net->layers[k - 1].output_gpu;
        n.input = net->layers[k - 1].output;
    }
    n.index = k;
    l.forward_gpu(l, n);
}

/* forward_dropout_layer_gpu draws l.rand_gpu anew and scales its input in
 * place; the replay scales with the draws already there.  A dropout never
 * starts a recomputed group: layer k - 1 is in it. */
static fsdp_status device_dropout(network *net, int k)
{
    const layer *l = &net->layers[k];
    fsdp_dropout_replay_gpu(net->layers[k - 1].output_gpu, l->rand_gpu, (size_t)l->batch * l->inputs,
                            l->probability, l->scale);
    return fsdp_kernels_status();
}

const fsdp_recompute_ops fsdp_recompute_gpu = { device_forward, device_dropout };
