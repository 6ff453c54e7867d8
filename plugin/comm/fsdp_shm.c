/* fsdp_shm.c: see fsdp_shm.h.
 *
 * Each rank's segment has one slot per rank, and each slot two halves; a
 * collective runs in rounds, round after round alternating halves (across
 * calls too).  A round writes this rank's input into its slots' halves,
 * meets the others at a barrier, and reads.  Round k + 2 writes that half
 * again only after every rank passed round k + 1's barrier, which each
 * reaches after its reads of round k: one barrier per round suffices for a
 * reduce-scatter, two for an all-reduce (whose sums are read back from the
 * segments).
 *
 * Rank r reads only two slots of rank q's segment: slot r (the terms q
 * sends r) and slot q (what q publishes to all).  A slot's two halves lie
 * side by side, so what a rank maps of the others' segments is the same
 * few pages in every call, whatever the sizes: the start-up warm-up maps
 * them all, and a rank's memory does not drift with the order of calls or
 * grow with more than one slot per other rank. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include "fsdp_mpi.h"
#include "fsdp_shm.h"
#include "fsdp_sum.h"
#include "fsdp_env.h"

struct fsdp_shm {
    MPI_Comm node;     /* this machine's ranks of the communicator, in its order */
    MPI_Win win;       /* the collectives' segments (one float each where they do not apply) */
    int rank, world;   /* in `node` */
    int spans_all;     /* `node` is the whole communicator: the collectives serve it */
    float **seg;       /* each rank's segment, mapped in this process */
    const float **rows; /* world terms of a sum, in rank order (scratch) */
    int half;          /* the half the next round writes */
    size_t part;       /* floats of a rank's part in a round (fsdp_shm_part_floats) */
    MPI_Win region[FSDP_SHM_REGIONS];   /* fsdp_shm_region's, freed with the rest */
    MPI_Win gate_win;  /* the node's barrier: one counter, in node rank 0's part */
    _Atomic uint64_t *arrived;   /* meets every rank has arrived at, times the ranks */
    uint64_t meets;    /* this rank's meets so far (the same on every rank) */
    int nregions;
};

/* A part (fsdp_shm_part_floats) is small enough that a round's copies and
 * sums stay in cache, large enough that a barrier per round costs little.
 * Rank q's slot `slot`, in the half this round writes. */
static float *slot_now(const fsdp_shm *s, int q, int slot)
{
    return s->seg[q] + ((size_t)slot * 2 + (size_t)s->half) * s->part;
}


void fsdp_shm_close(fsdp_shm *s)
{
    if (!s) return;
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) {
        for (int k = 0; k < s->nregions; ++k) {
            MPI_Win_unlock_all(s->region[k]);
            MPI_Win_free(&s->region[k]);
        }
        if (s->win != MPI_WIN_NULL) {
            MPI_Win_unlock_all(s->win);
            MPI_Win_free(&s->win);
        }
        if (s->gate_win != MPI_WIN_NULL) MPI_Win_free(&s->gate_win);
        if (s->node != MPI_COMM_NULL) MPI_Comm_free(&s->node);
    }
    free(s->seg);
    free(s->rows);
    free(s);
}

/* The collectives' segments: over the whole communicator where it is one
 * machine, over each machine's ranks where it spans several (the
 * exchanges between machines' second halves, fsdp_backend_mpi.c). */
static fsdp_status map_segments(fsdp_shm *s)
{
    float *base = NULL;
    size_t floats = 2 * s->part * (size_t)s->world;
    mpiCheck(MPI_Comm_set_errhandler(s->node, MPI_ERRORS_RETURN));
    mpiCheck(MPI_Win_allocate_shared((MPI_Aint)(floats * sizeof(float)), sizeof(float),
                                     MPI_INFO_NULL, s->node, &base, &s->win));
    for (int q = 0; q < s->world; ++q) {
        MPI_Aint size;
        int unit;
        mpiCheck(MPI_Win_shared_query(s->win, q, &size, &unit, &s->seg[q]));
    }
    /* One passive epoch for the window's life: the unified memory model
     * (coherent shared memory) lets the barrier's atomics order the plain
     * loads and stores. */
    mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win));
    void *gate = NULL;
    MPI_Aint size = s->rank == 0 ? 64 : 0, got;
    int unit;
    mpiCheck(MPI_Win_allocate_shared(size, 1, MPI_INFO_NULL, s->node, &gate, &s->gate_win));
    mpiCheck(MPI_Win_shared_query(s->gate_win, 0, &got, &unit, &gate));
    s->arrived = gate;
    if (s->rank == 0) atomic_init(s->arrived, 0);
    /* No rank counts before rank 0 has set the counter. */
    mpiCheck(MPI_Barrier(s->node));
    return FSDP_OK;
}

/* This rank's node (MPI_COMM_TYPE_SHARED) and its place there; *sizes =
 * the smallest node's size and minus the largest's, agreed over comm. */
static fsdp_status split_node(MPI_Comm comm, fsdp_shm *s, int *sizes)
{
    int rank;
    mpiCheck(MPI_Comm_rank(comm, &rank));
    mpiCheck(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &s->node));
    mpiCheck(MPI_Comm_rank(s->node, &s->rank));
    mpiCheck(MPI_Comm_size(s->node, &s->world));
    s->part = fsdp_shm_part_floats(s->world);
    sizes[0] = s->world;
    sizes[1] = -s->world;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MIN, comm));
    return FSDP_OK;
}

fsdp_status fsdp_shm_open(MPI_Comm comm, fsdp_shm **out)
{
    *out = NULL;
    int world, sizes[2] = { 0, 0 };
    mpiCheck(MPI_Comm_size(comm, &world));
    /* Every rank decides alike (the environment may differ between them). */
    int want = world > 1 && fsdp_env_switch("FSDP_SHM");
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, comm));
    if (!want) return FSDP_OK;
    fsdp_shm *s = calloc(1, sizeof *s);
    if (!s) return fsdp_fail(FSDP_ERR_NOMEM, "shared-memory collectives: out of memory");
    s->node = MPI_COMM_NULL;
    s->win = MPI_WIN_NULL;
    s->gate_win = MPI_WIN_NULL;
    fsdp_status st = split_node(comm, s, sizes);
    /* Machines of different sizes have no one layout of node memory
     * (shard_node_shared=1 pairs each rank with one of every machine). */
    int usable = st == FSDP_OK && sizes[0] == -sizes[1];
    s->spans_all = usable && sizes[0] == world;
    if (usable) {
        /* A window this MPI cannot make (no shared-memory support, a full
         * /dev/shm) is no reason to stop: the point-to-point path remains. */
        s->seg = calloc((size_t)s->world, sizeof *s->seg);
        s->rows = calloc((size_t)s->world, sizeof *s->rows);
        int ok = s->seg && s->rows && map_segments(s) == FSDP_OK, err;
        if ((err = MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm)) != MPI_SUCCESS)
            st = fsdp_mpi_fail(err, __FILE__, __LINE__, "MPI_Allreduce");
        else if (!ok) {
            int rank;
            MPI_Comm_rank(comm, &rank);
            if (rank == 0) fprintf(stderr, "fsdp: no shared-memory window: point-to-point collectives instead, "
                                           "and no node memory\n");
            usable = 0;
        }
    }
    if (st != FSDP_OK || !usable) {
        fsdp_shm_close(s);
        return st;
    }
    *out = s;
    return FSDP_OK;
}

int fsdp_shm_spans_all(const fsdp_shm *s)
{
    return s && s->spans_all;
}

void fsdp_shm_place(const fsdp_shm *s, int *node_rank, int *node_ranks)
{
    *node_rank = s->rank;
    *node_ranks = s->world;
}

/* Every rank's writes to its segment (and to the regions) are visible to
 * all after this: a barrier in the node's own memory.  Each rank adds its
 * arrival (release: its earlier stores go with it) and waits until every
 * rank has arrived as often as it has (acquire).  It costs a cache line's
 * round trip, where MPI's barrier costs messages through whatever
 * transport MPI picked for the node (TCP, where only TCP is allowed), and
 * yields the core while it waits, for ranks that outnumber the cores.  A
 * rank that never arrives is the watchdog's to find, as in any collective. */
static fsdp_status meet(fsdp_shm *s)
{
    uint64_t all = ++s->meets * (uint64_t)s->world;
    atomic_fetch_add_explicit(s->arrived, 1, memory_order_acq_rel);
    for (unsigned spin = 0; atomic_load_explicit(s->arrived, memory_order_acquire) < all; ++spin)
        if (spin >= 64) sched_yield();
    return FSDP_OK;
}

fsdp_status fsdp_shm_sync(fsdp_shm *s)
{
    return meet(s);
}

/* Whether the directory backing shared windows (Open MPI's
 * osc_sm_backing_directory, /dev/shm unless set) has room for `bytes`: a
 * full tmpfs would kill the process touching a page with SIGBUS. */
static int room_for(size_t bytes, char *why, size_t len)
{
    struct statvfs v;
    const char *env = fsdp_env("OMPI_MCA_osc_sm_backing_directory");
    const char *dir = env && *env ? env : "/dev/shm";
    if (statvfs(dir, &v) != 0) return 1;   /* another backing: MPI decides */
    unsigned long long free_bytes = (unsigned long long)v.f_bavail * v.f_frsize;
    if (free_bytes >= bytes + ((size_t)64 << 20)) return 1;
    snprintf(why, len, "%s has %.1f MB free, and it needs %.1f MB (and 64 MB to spare)", dir,
             free_bytes / 1e6, bytes / 1e6);
    return 0;
}

fsdp_status fsdp_shm_region(fsdp_shm *s, size_t count, float **out)
{
    *out = NULL;
    char why[160] = "";
    int ok = s->nregions < FSDP_SHM_REGIONS;
    if (!ok) snprintf(why, sizeof why, "more than %d regions", FSDP_SHM_REGIONS);
    if (ok && s->rank == 0) ok = room_for(count * sizeof(float), why, sizeof why);
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, s->node));
    if (!ok)
        return fsdp_fail(FSDP_ERR_NOMEM, "shard_node_shared=1: no shared memory for %.1f MB of node memory: %s; "
                         "give it more room (e.g. docker run --shm-size) or leave shard_node_shared off",
                         count * sizeof(float) / 1e6, why[0] ? why : "(see rank 0)");
    /* All of it in rank 0's part: one contiguous region at one offset.
     * Pages belong to the rank that first touches them (each its own
     * shards), not to rank 0. */
    float *base = NULL;
    MPI_Win win;
    MPI_Aint size = s->rank == 0 ? (MPI_Aint)(count * sizeof(float)) : 0;
    mpiCheck(MPI_Win_allocate_shared(size, sizeof(float), MPI_INFO_NULL, s->node, &base, &win));
    MPI_Aint got;
    int unit;
    mpiCheck(MPI_Win_shared_query(win, 0, &got, &unit, &base));
    mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    s->region[s->nregions++] = win;
    *out = base;
    return FSDP_OK;
}

/* out[0..k) = sum over ranks q, in rank order, of rank q's slot for this
 * rank, except this rank's own term, read from own[0..k) (which may be out). */
static void sum_slots(const fsdp_shm *s, float *out, const float *own, size_t k)
{
    const float **in = s->rows;
    for (int q = 0; q < s->world; ++q) in[q] = q == s->rank ? own : slot_now(s, q, s->rank);
    fsdp_sum_rows(out, in, s->world, 0, k);
}

/* Node rank q's part of a buffer of parts of n floats: at place[q] * n. */
static size_t at(const int *place, int q, size_t n) { return (size_t)(place ? place[q] : q) * n; }

fsdp_status fsdp_shm_reduce_scatter(fsdp_shm *s, const float *full, float *shard, size_t n, const int *place)
{
    for (size_t off = 0; off < n; off += s->part) {
        size_t k = fsdp_min_size(s->part, n - off);
        /* The others' terms only: this rank adds its own straight from full. */
        for (int r = 0; r < s->world; ++r)
            if (r != s->rank) memcpy(slot_now(s, s->rank, r), full + at(place, r, n) + off, k * sizeof(float));
        FSDP_TRY(meet(s));
        sum_slots(s, shard + off, full + at(place, s->rank, n) + off, k);
        s->half ^= 1;
    }
    return FSDP_OK;
}

fsdp_status fsdp_shm_all_gather(fsdp_shm *s, const float *shard, float *full, size_t n, const int *place)
{
    for (size_t off = 0; off < n; off += s->part) {
        size_t k = fsdp_min_size(s->part, n - off);
        memcpy(slot_now(s, s->rank, s->rank), shard + off, k * sizeof(float));
        FSDP_TRY(meet(s));
        /* In place, this rank's own part is copied onto itself: the same floats. */
        for (int q = 0; q < s->world; ++q) memcpy(full + at(place, q, n) + off, slot_now(s, q, q), k * sizeof(float));
        s->half ^= 1;
    }
    return FSDP_OK;
}

fsdp_status fsdp_shm_all_reduce(fsdp_shm *s, float *buf, size_t count)
{
    /* A piece whose every share fits a part. */
    size_t piece = s->part * (size_t)s->world;
    for (size_t off = 0; off < count; off += piece) {
        size_t k = fsdp_min_size(piece, count - off);
        float *b = buf + off;
        size_t lo = fsdp_share_lo(k, s->rank, s->world), mine = fsdp_share_lo(k, s->rank + 1, s->world) - lo;
        /* Each rank's share of this rank's terms to it; this rank's share
         * summed (its own term read from buf), then published in its own
         * slot of its segment, which no rank reads before the second meet. */
        for (int r = 0; r < s->world; ++r) {
            size_t a = fsdp_share_lo(k, r, s->world);
            if (r != s->rank) memcpy(slot_now(s, s->rank, r), b + a, (fsdp_share_lo(k, r + 1, s->world) - a) * sizeof(float));
        }
        FSDP_TRY(meet(s));
        sum_slots(s, b + lo, b + lo, mine);
        memcpy(slot_now(s, s->rank, s->rank), b + lo, mine * sizeof(float));
        FSDP_TRY(meet(s));
        for (int q = 0; q < s->world; ++q) {
            size_t a = fsdp_share_lo(k, q, s->world);
            if (q != s->rank) memcpy(b + a, slot_now(s, q, q), (fsdp_share_lo(k, q + 1, s->world) - a) * sizeof(float));
        }
        s->half ^= 1;
    }
    return FSDP_OK;
}
