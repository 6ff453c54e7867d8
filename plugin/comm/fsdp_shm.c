/* fsdp_shm.c: see fsdp_shm.h.
 *
 * Each rank's segment has two halves; a collective runs in rounds, round
 * after round alternating halves (across calls too).  A round writes this
 * rank's input into one half, meets the others at a barrier, and reads.
 * Round k + 2 writes that half again only after every rank passed round
 * k + 1's barrier, which each reaches after its reads of round k: one
 * barrier per round suffices for a reduce-scatter, two for an all-reduce
 * (whose reduced parts are read back from the segments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include "fsdp_mpi.h"
#include "fsdp_shm.h"
#include "fsdp_sum.h"

struct fsdp_shm {
    MPI_Comm node;     /* this machine's ranks of the communicator, in its order */
    MPI_Win win;       /* the collectives' segments (one float each where they do not apply) */
    int rank, world;   /* in `node` */
    int spans_all;     /* `node` is the whole communicator: the collectives apply */
    float **seg;       /* each rank's segment, mapped in this process */
    const float **rows; /* world terms of a sum, in rank order (scratch) */
    int half;          /* the half the next round writes */
    MPI_Win region[FSDP_SHM_REGIONS];   /* fsdp_shm_region's, freed with the rest */
    int nregions;
};

/* A part (FSDP_SHM_PART_FLOATS) is small enough that a round's copies and
 * sums stay in cache, large enough that a barrier per round costs little;
 * a half holds one part per rank, so a reduce-scatter (whose input holds
 * every rank's part) takes as few rounds as an all-gather of the same
 * shard. */
static size_t half_floats(const fsdp_shm *s) { return FSDP_SHM_PART_FLOATS * (size_t)s->world; }


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
        if (s->node != MPI_COMM_NULL) MPI_Comm_free(&s->node);
    }
    free(s->seg);
    free(s->rows);
    free(s);
}

/* The collectives' segments where they apply; elsewhere one float each,
 * which shows the window can be made before node memory needs one. */
static fsdp_status map_segments(fsdp_shm *s)
{
    float *base = NULL;
    size_t floats = s->spans_all ? 2 * half_floats(s) : 1;
    mpiCheck(MPI_Comm_set_errhandler(s->node, MPI_ERRORS_RETURN));
    mpiCheck(MPI_Win_allocate_shared((MPI_Aint)(floats * sizeof(float)), sizeof(float),
                                     MPI_INFO_NULL, s->node, &base, &s->win));
    for (int q = 0; q < s->world; ++q) {
        MPI_Aint size;
        int unit;
        mpiCheck(MPI_Win_shared_query(s->win, q, &size, &unit, &s->seg[q]));
    }
    /* One passive epoch for the window's life: the unified memory model
     * with MPI_Win_sync around each barrier orders the loads and stores. */
    mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win));
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
    sizes[0] = s->world;
    sizes[1] = -s->world;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MIN, comm));
    return FSDP_OK;
}

fsdp_status fsdp_shm_open(MPI_Comm comm, fsdp_shm **out)
{
    *out = NULL;
    const char *env = getenv("FSDP_SHM");
    int world, sizes[2] = { 0, 0 };
    mpiCheck(MPI_Comm_size(comm, &world));
    /* Every rank decides alike (the environment may differ between them). */
    int want = world > 1 && !(env && !strcmp(env, "0"));
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, comm));
    if (!want) return FSDP_OK;
    fsdp_shm *s = calloc(1, sizeof *s);
    if (!s) return fsdp_fail(FSDP_ERR_NOMEM, "shared-memory collectives: out of memory");
    s->node = MPI_COMM_NULL;
    s->win = MPI_WIN_NULL;
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
 * all after this. */
static fsdp_status meet(fsdp_shm *s)
{
    mpiCheck(MPI_Win_sync(s->win));
    for (int k = 0; k < s->nregions; ++k) mpiCheck(MPI_Win_sync(s->region[k]));
    mpiCheck(MPI_Barrier(s->node));
    mpiCheck(MPI_Win_sync(s->win));
    for (int k = 0; k < s->nregions; ++k) mpiCheck(MPI_Win_sync(s->region[k]));
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
    const char *env = getenv("OMPI_MCA_osc_sm_backing_directory");
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

/* out[0..k) = sum over ranks q, in rank order, of seg[q][half][at .. at + k),
 * except this rank's own term, read from own[0..k) (which may be out). */
static void sum_segments(const fsdp_shm *s, float *out, const float *own, size_t at, size_t k)
{
    const float **in = s->rows;
    size_t h = (size_t)s->half * half_floats(s) + at;
    for (int q = 0; q < s->world; ++q) in[q] = q == s->rank ? own : s->seg[q] + h;
    fsdp_sum_rows(out, in, s->world, 0, k);
}

fsdp_status fsdp_shm_reduce_scatter(fsdp_shm *s, const float *full, float *shard, size_t n)
{
    size_t c = FSDP_SHM_PART_FLOATS;
    for (size_t off = 0; off < n; off += c) {
        size_t k = fsdp_min_size(c, n - off);
        float *mine = s->seg[s->rank] + (size_t)s->half * half_floats(s);
        /* The others' parts only: this rank adds its own straight from full. */
        for (int r = 0; r < s->world; ++r)
            if (r != s->rank) memcpy(mine + (size_t)r * k, full + (size_t)r * n + off, k * sizeof(float));
        FSDP_TRY(meet(s));
        sum_segments(s, shard + off, full + (size_t)s->rank * n + off, (size_t)s->rank * k, k);
        s->half ^= 1;
    }
    return FSDP_OK;
}

fsdp_status fsdp_shm_all_gather(fsdp_shm *s, const float *shard, float *full, size_t n)
{
    size_t c = FSDP_SHM_PART_FLOATS;
    for (size_t off = 0; off < n; off += c) {
        size_t k = fsdp_min_size(c, n - off), h = (size_t)s->half * half_floats(s);
        memcpy(s->seg[s->rank] + h, shard + off, k * sizeof(float));
        FSDP_TRY(meet(s));
        /* In place, this rank's own part is copied onto itself: the same floats. */
        for (int q = 0; q < s->world; ++q) memcpy(full + (size_t)q * n + off, s->seg[q] + h, k * sizeof(float));
        s->half ^= 1;
    }
    return FSDP_OK;
}

fsdp_status fsdp_shm_all_reduce(fsdp_shm *s, float *buf, size_t count)
{
    for (size_t off = 0; off < count; off += FSDP_SHM_PART_FLOATS) {
        size_t k = fsdp_min_size(FSDP_SHM_PART_FLOATS, count - off);
        size_t h = (size_t)s->half * half_floats(s);
        memcpy(s->seg[s->rank] + h, buf + off, k * sizeof(float));
        FSDP_TRY(meet(s));
        /* Reduce this rank's part into buf (its own term read from buf
         * before the block is written), then publish the sum in the
         * segment for the others. */
        size_t lo = k * (size_t)s->rank / (size_t)s->world, hi = k * (size_t)(s->rank + 1) / (size_t)s->world;
        sum_segments(s, buf + off + lo, buf + off + lo, lo, hi - lo);
        memcpy(s->seg[s->rank] + h + lo, buf + off + lo, (hi - lo) * sizeof(float));
        FSDP_TRY(meet(s));
        for (int q = 0; q < s->world; ++q) {
            if (q == s->rank) continue;
            size_t a = k * (size_t)q / (size_t)s->world, b = k * (size_t)(q + 1) / (size_t)s->world;
            memcpy(buf + off + a, s->seg[q] + h + a, (b - a) * sizeof(float));
        }
        s->half ^= 1;
    }
    return FSDP_OK;
}
