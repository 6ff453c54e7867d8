/* fsdp_sum.h: the one summing loop of reduce-scatters on one machine
 * (the shared-memory window's, and the optimizer's over node slots): the
 * ranks' terms added in rank order, so every path gives the same floats. */
#ifndef FSDP_SUM_H
#define FSDP_SUM_H

#include <stddef.h>

/* Floats summed aside, in the first-level cache, before they are written. */
#define FSDP_SUM_BLOCK 2048

/* out[0..k) = in[0][0..k) + in[1][0..k) + ..., in that order; out may be
 * one of the in[q] (each block is summed aside before it is written, so
 * each input float is read once). */
void fsdp_sum_rows(float *out, const float *const *in, int nin, size_t k);

#endif
