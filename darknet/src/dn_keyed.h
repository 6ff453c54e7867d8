#ifndef DN_KEYED_H
#define DN_KEYED_H
/* With -seed, the random draws layers make in forward (dropout's masks,
 * crop's flip and offsets, the YOLOv1 detection layer's random box) come
 * from keys, not from a stream: element j of the global sample `sample` at
 * layer `layer`, or a micro-batch's one draw.  One process with the
 * world's batch and N ranks with their share of it then draw the same
 * numbers, as the data loader's per-sample streams make them load the same
 * images (dn_rand.h).  The same arithmetic on the host and the device. */
#include <stdint.h>

#ifdef __CUDACC__
#define DN_KEYED_FN static __host__ __device__ inline
#else
#define DN_KEYED_FN static inline
#endif

DN_KEYED_FN uint64_t dn_keyed_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A float in [0, 1), 24 bits, for (seed, sample, layer, j). */
DN_KEYED_FN float dn_keyed_unit(uint64_t seed, uint64_t sample, uint64_t layer, uint64_t j)
{
    uint64_t x = dn_keyed_mix(seed * 0x2545F4914F6CDD1Dull + layer);
    x = dn_keyed_mix(x ^ sample);
    x = dn_keyed_mix(x ^ j);
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

#endif
