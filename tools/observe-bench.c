/* tools/observe-bench: what seeing inside a run costs per event, for
 * tools/bench trace: N collectives into a flight recorder's ring in a file
 * (fsdp_ring.h), with the watchdog's words for where each is, and N events
 * into a trace's window (fsdp_trace.h), each with the clock reads a layer's
 * event takes; prints nanoseconds per collective and per event, and the
 * ring's bytes.
 *   observe-bench DIR [N] */
#include <stdio.h>
#include <stdlib.h>
#include "fsdp_ring.h"
#include "fsdp_timeline.h"
#include "fsdp_trace.h"

static double ring_ns(const char *dir, long n)
{
    char stem[4096];
    snprintf(stem, sizeof stem, "%s/bench", dir);
    if (fsdp_ring_open(stem, 0, 2) != FSDP_OK) exit(1);
    double t0 = fsdp_tl_clock();
    for (long k = 0; k < n; ++k) {
        char where[96];
        snprintf(where, sizeof where, "(group trunk.block%ld, training step %ld)", k % 16, k / 64 + 1);
        fsdp_ring_end(fsdp_ring_begin("all-gather", 4u << 20, where), 1);
    }
    double t = fsdp_tl_clock() - t0;
    fsdp_ring_close(0);
    return 1e9 * t / (double)n;
}

/* A one-rank trace recording: its events as a layer's are taken (two clock reads each). */
static double trace_ns(long n)
{
    fsdp_trace t = { .on = 1, .world = 1, .first = 1, .last = 1, .step = 1 };
    double t0 = fsdp_tl_clock();
    for (long k = 0; k < n; ++k) {
        double a = fsdp_tl_clock();
        fsdp_trace_add(&t, "forward", FSDP_TRACK_COMPUTE, (int)(k % 100), a, fsdp_tl_clock(), 0, 0);
    }
    double s = fsdp_tl_clock() - t0;
    if (t.n != (size_t)n) {
        fprintf(stderr, "observe-bench: kept %zu events of %ld\n", t.n, n);
        exit(1);
    }
    fsdp_trace_free(&t);
    return 1e9 * s / (double)n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: observe-bench DIR [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    double ring = ring_ns(argv[1], n), trace = trace_ns(n);
    printf("ring %.1f ns per collective, %d bytes (%d entries of %d); trace %.1f ns per event\n", ring,
           FSDP_RING_BYTES, FSDP_RING_ENTRIES, FSDP_RING_LINE, trace);
    return 0;
}
