/* fsdp_layers.h: what the plugin needs to know about Darknet's layer types:
 * which float arrays are trainable parameters (and their gradients), and
 * which layers feed which. */
#ifndef FSDP_LAYERS_H
#define FSDP_LAYERS_H

#include "darknet.h"

/* One parameter array of a layer or of a layer's sub-layer (rnn, gru, lstm,
 * crnn keep connected/convolutional sub-layers behind pointers). */
typedef struct fsdp_tensor {
    layer *owner;      /* the struct whose pointers are re-pointed */
    float **data;      /* &owner->weights, &owner->biases, ... */
    float **grad;      /* &owner->weight_updates, ... */
#ifdef GPU
    float **data_gpu;  /* &owner->weights_gpu, ... */
    float **grad_gpu;  /* &owner->weight_updates_gpu, ... */
#endif
    size_t count;
    int is_weight;     /* SGD decays weights only (biases, scales: none) */
} fsdp_tensor;

#define FSDP_MAX_TENSORS 32

/* Fills out[] with layer l's parameter tensors; returns how many (0 for
 * layers without parameters). */
int fsdp_layer_tensors(layer *l, fsdp_tensor *out);

/* The array of t a run computes with: the host one, or on a device run
 * its *_gpu twin (the host arrays serve loading, and saving lends them);
 * grad selects the gradient. */
float **fsdp_tensor_array(const fsdp_tensor *t, int device, int grad);

/* Frees the *_gpu twins Darknet made of t's arrays and sets them to NULL
 * (nothing in a CPU build). */
void fsdp_tensor_free_device(const fsdp_tensor *t);

/* Whether Darknet's structs have device twins of their arrays (*_gpu): a
 * GPU build's do, on any run (some layers make them even under -nogpu). */
int fsdp_layers_have_device_arrays(void);

/* Whether the layer computes a loss (and its delta) in its forward: yolo,
 * region, detection, cost, softmax, logxent, iseg. */
int fsdp_layer_is_loss(const layer *l);

/* Whether the layer's output, delta and x are arrays of its own that only
 * its own forward and backward, and its readers', use: convolutional,
 * connected, maxpool, avgpool, route, shortcut, upsample, reorg (not a
 * truth layer).  Loss layers, recurrent layers (state carried between
 * steps) and the rest keep theirs; dropout shares its input's. */
int fsdp_layer_plain_arrays(const layer *l);

/* Floats in each of a layer's activation arrays (output, delta, x,
 * x_norm): one forward's batch of its outputs. */
size_t fsdp_layer_act_floats(const layer *l);

/* Whether the layer has batch norm's x and x_norm (batch_normalize=1, or
 * a [batchnorm] layer). */
int fsdp_layer_has_bn(const layer *l);
/* Whether a recurrent layer's sub-layers normalize their batches. */
int fsdp_layer_recurrent_bn(const layer *l);

/* A layer's activation array `which`: the host one, or with device its
 * *_gpu twin (the host one in a CPU build, as fsdp_tensor_array). */
typedef enum { FSDP_ACT_OUTPUT, FSDP_ACT_DELTA, FSDP_ACT_X, FSDP_ACT_X_NORM } fsdp_act_array;
float **fsdp_layer_act(layer *l, fsdp_act_array which, int device);

/* A batch-norm layer's rolling mean and variance: the host arrays, or with
 * device their *_gpu twins, as fsdp_layer_act. */
void fsdp_layer_rolling(const layer *l, int device, float **mean, float **variance);

/* Fills in[] with the indexes of the layers whose outputs layer `index`
 * reads; returns how many (at most FSDP_MAX_INPUTS). */
#define FSDP_MAX_INPUTS 16
int fsdp_layer_inputs(const network *net, int index, int *in);

/* Per layer, the last layer reading its output (fsdp_layer_inputs), or the
 * layer itself when none does; NULL when out of memory; the caller frees
 * it. */
int *fsdp_layer_last_readers(const network *net);

/* Whether a layer writes its delta during forward (loss layers): such a
 * layer keeps its delta buffer even when it needs no backward. */
int fsdp_layer_writes_delta_in_forward(const layer *l);

/* Frees the optimizer-state arrays Darknet allocated for adam=1 (the plugin
 * keeps its own, sharded). */
void fsdp_layer_free_darknet_optimizer(layer *l);

#endif
