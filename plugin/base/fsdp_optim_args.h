/* fsdp_optim_args.h: one optimizer step's settings, shared by the host
 * optimizer (fsdp_optim.h) and its device kernels (fsdp_kernels.h), which
 * sit below it and include nothing of the engine's. */
#ifndef FSDP_OPTIM_ARGS_H
#define FSDP_OPTIM_ARGS_H

typedef struct fsdp_optim_args {
    float learning_rate;   /* already times the layer's learning_rate scale */
    float momentum;
    float decay;
    int batch;             /* global batch: batch * subdivisions * world */
    int adam;
    float B1, B2, eps;
    int t;
} fsdp_optim_args;

#endif
