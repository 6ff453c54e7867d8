#ifndef DN_RAND_H
#define DN_RAND_H
/* Per-sample random numbers for the data loader.  With -seed, each loader
 * thread draws from its own generator, re-seeded for every sample from
 * (seed, the sample's global index, stream), so which sample lands in which
 * batch and how it is augmented no longer depend on thread scheduling or on
 * how many ranks share the global batch.  Off (plain rand()) otherwise. */
#include <stdlib.h>
#include <stddef.h>

void dn_rand_thread_begin(int seeded, unsigned long seed, size_t base);
void dn_rand_sample(size_t i, unsigned stream);
void dn_rand_thread_end(void);
int dn_rand(void);
/* One draw from (seed, key, stream), touching no generator state: for
 * choices every rank must make alike, keyed by the step.  Streams 0 and 1
 * are the loader's per-sample streams; DN_RAND_STREAM_STEP keys by step. */
#define DN_RAND_STREAM_STEP 3
int dn_rand_keyed(unsigned long seed, size_t key, unsigned stream);

#ifndef DN_RAND_IMPL
#define rand() dn_rand()
#endif
#endif
