#include <string.h>
#include "fsdp_sum.h"

void fsdp_sum_rows(float *out, const float *const *in, int nin, size_t off, size_t k)
{
    float acc[FSDP_SUM_BLOCK];
    for (size_t j0 = 0; j0 < k; j0 += FSDP_SUM_BLOCK) {
        size_t b = k - j0 < FSDP_SUM_BLOCK ? k - j0 : FSDP_SUM_BLOCK;
        memcpy(acc, in[0] + off + j0, b * sizeof(float));
        for (int q = 1; q < nin; ++q) {
            const float *restrict x = in[q] + off + j0;
            for (size_t j = 0; j < b; ++j) acc[j] += x[j];
        }
        memcpy(out + j0, acc, b * sizeof(float));
    }
}
