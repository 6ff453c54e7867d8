/* tools/ring-bench: the flight recorder's cost per collective (fsdp_ring.h),
 * for tools/bench trace: N begin/end pairs into a ring in a file, with the
 * watchdog's words for where each is (a label as fsdp_engine_describe_wait
 * writes it), timed; prints nanoseconds per collective and the ring's bytes.
 *   ring-bench DIR [N] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "fsdp_ring.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ring-bench DIR [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    char stem[4096];
    snprintf(stem, sizeof stem, "%s/bench", argv[1]);
    if (fsdp_ring_open(stem, 0, 2) != FSDP_OK) return 1;
    double t0 = now();
    for (long k = 0; k < n; ++k) {
        char where[96];
        snprintf(where, sizeof where, "(group trunk.block%ld, training step %ld)", k % 16, k / 64 + 1);
        fsdp_ring_end(fsdp_ring_begin("all-gather", 4u << 20, where), 1);
    }
    double per = (now() - t0) / (double)n;
    printf("%.1f ns per collective, ring %d bytes (%d entries of %d)\n", per * 1e9, FSDP_RING_BYTES,
           FSDP_RING_ENTRIES, FSDP_RING_LINE);
    fsdp_ring_close(0);
    return 0;
}
