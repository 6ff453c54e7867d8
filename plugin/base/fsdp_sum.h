/* fsdp_sum.h: the summing loop of reduce-scatters on one machine (the
 * shared-memory window's, and the optimizer's over node slots beyond the
 * term counts fsdp_optim.c steps from directly): the ranks' terms added in
 * rank order, so every path gives the same floats. */
#ifndef FSDP_SUM_H
#define FSDP_SUM_H

#include <stddef.h>

/* Floats summed aside, in the first-level cache, before they are written. */
#define FSDP_SUM_BLOCK 2048

/* out[0..k) = in[0][off..off+k) + in[1][off..off+k) + ..., in that order;
 * out may be one of the in[q] + off (each block is summed aside before it
 * is written, so each input float is read once). */
void fsdp_sum_rows(float *out, const float *const *in, int nin, size_t off, size_t k);

#endif
