#define DN_RAND_IMPL
#include <stdint.h>
#include "dn_rand.h"
#include "dn_plugin.h"

static __thread int on;
static __thread uint64_t seed_, base_, state;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dn_rand_thread_begin(int seeded, unsigned long seed, size_t base)
{
    on = seeded;
    seed_ = seed;
    base_ = base;
}

void dn_rand_sample(size_t i, unsigned stream)
{
    if(!on) return;
    uint64_t x = seed_ * 0x2545F4914F6CDD1Dull + dn_sample_index(base_ + i) * 4 + stream;
    state = splitmix64(&x);
}

void dn_rand_thread_end(void) { on = 0; }

int dn_rand(void)
{
    if(!on) return rand();
    return (int)(splitmix64(&state) >> 33) & RAND_MAX;
}

int dn_rand_keyed(unsigned long seed, size_t key, unsigned stream)
{
    uint64_t x = seed * 0x2545F4914F6CDD1Dull + key * 4 + stream;
    return (int)(splitmix64(&x) >> 33) & RAND_MAX;
}
