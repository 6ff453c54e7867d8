/* Buffer collectives as messages between every two ranks (fsdp_pairs.h). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_pairs.h"
#include "fsdp_sum.h"

/* The tags of blocking and started exchanges: each kind matches its own in
 * the order every rank posts them. */
enum { TAG_NOW, TAG_STARTED };

/* The blocking sums' scratch: one round's term of each other rank (and a
 * float: an all-reduce's share), about 1 MB in all, made whole at the
 * first one (the start-up warm-up, fsdp_memplan.h) and never grown. */
static size_t now_floats(const fsdp_pairs *p)
{
    return (size_t)(p->size - 1) * (fsdp_pairs_round(p->size) + 1);
}


fsdp_status fsdp_pairs_open(fsdp_pairs *p, MPI_Comm comm, size_t limit)
{
    *p = (fsdp_pairs){ .comm = comm, .limit = limit ? limit : 1 };
    mpiCheck(MPI_Comm_rank(comm, &p->rank));
    mpiCheck(MPI_Comm_size(comm, &p->size));
    size_t n = (size_t)p->size;
    p->to = malloc(n * sizeof *p->to);
    p->from = malloc(n * sizeof *p->from);
    p->sc = malloc(n * sizeof *p->sc);
    p->rc = malloc(n * sizeof *p->rc);
    p->terms = malloc(n * sizeof *p->terms);
    p->req = malloc(2 * n * sizeof *p->req);
    p->started = malloc(2 * n * FSDP_TICKETS * sizeof *p->started);
    if (!p->to || !p->from || !p->sc || !p->rc || !p->terms || !p->req || !p->started)
        return fsdp_fail(FSDP_ERR_NOMEM, "no memory for the exchanges between %d ranks", p->size);
    return FSDP_OK;
}

void fsdp_pairs_close(fsdp_pairs *p)
{
    free(p->to); free(p->from); free(p->sc); free(p->rc); free(p->terms); free(p->req); free(p->started);
    free(p->scratch[FSDP_PAIRS_NOW]);
    free(p->scratch[FSDP_PAIRS_HELD]);
    *p = (fsdp_pairs){ .comm = MPI_COMM_NULL };
}

/* The scratch `which` with room for `floats`, kept and grown: a step asks
 * the same sizes every time, so after the first nothing is allocated. */
static fsdp_status scratch(fsdp_pairs *p, int which, size_t floats, float **out)
{
    if (floats > p->scratch_floats[which]) {
        free(p->scratch[which]);
        p->scratch[which] = malloc(floats * sizeof(float));
        p->scratch_floats[which] = p->scratch[which] ? floats : 0;
        if (!p->scratch[which])
            return fsdp_fail(FSDP_ERR_NOMEM, "no memory for %.1f MB of the other ranks' terms", floats * 4 / 1e6);
    }
    *out = p->scratch[which];
    return FSDP_OK;
}

static void counts(fsdp_pairs *p, int k)
{
    for (int q = 0; q < p->size; ++q) p->sc[q] = p->rc[q] = k;
}

/* Posts, for every other rank q, sc[q] floats from to[q] + off and rc[q]
 * floats into from[q] + off, into req; *n: how many requests. */
static fsdp_status post(fsdp_pairs *p, size_t off, int tag, MPI_Request *req, int *n)
{
    *n = 0;
    for (int q = 0; q < p->size; ++q) {
        if (q == p->rank) continue;
        if (p->rc[q]) mpiCheck(MPI_Irecv(p->from[q] + off, p->rc[q], MPI_FLOAT, q, tag, p->comm, &req[(*n)++]));
        if (p->sc[q]) mpiCheck(MPI_Isend(p->to[q] + off, p->sc[q], MPI_FLOAT, q, tag, p->comm, &req[(*n)++]));
    }
    return FSDP_OK;
}

static fsdp_status post_wait(fsdp_pairs *p, size_t off)
{
    int n;
    FSDP_TRY(post(p, off, TAG_NOW, p->req, &n));
    mpiCheck(MPI_Waitall(n, p->req, MPI_STATUSES_IGNORE));
    return FSDP_OK;
}

/* count floats each way with every other rank, chunk by chunk. */
static fsdp_status exchange(fsdp_pairs *p, size_t count)
{
    for (size_t off = 0; off < count; off += p->limit) {
        counts(p, (int)fsdp_min_size(p->limit, count - off));
        FSDP_TRY(post_wait(p, off));
    }
    return FSDP_OK;
}

/* This rank's shard to every rank; rank q's into full + place[q] * n. */
static void aim_gather(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place)
{
    for (int q = 0; q < p->size; ++q) {
        p->to[q] = shard;
        p->from[q] = full + (size_t)(place ? place[q] : q) * n;
    }
}

/* Part q of full (n floats apart) to rank q; rank q's term of this rank's
 * part into the scratch, `room` floats apart (the others' terms in rank
 * order, this rank's left out). */
static void aim_scatter(fsdp_pairs *p, const float *full, float *scratch, size_t n, size_t room)
{
    for (int q = 0; q < p->size; ++q) {
        p->to[q] = full + (size_t)q * n;
        p->from[q] = q == p->rank ? NULL : scratch + (size_t)(q - (q > p->rank)) * room;
    }
}

/* out[0 .. k) = the terms in rank order: this rank's from own, rank q's
 * from from[q] + off (out may be own). */
static void add_terms(fsdp_pairs *p, float *out, const float *own, size_t off, size_t k)
{
    for (int q = 0; q < p->size; ++q) p->terms[q] = q == p->rank ? own : p->from[q] + off;
    fsdp_sum_rows(out, p->terms, p->size, 0, k);
}

static void copy_own(float *own, const float *shard, size_t n)
{
    if (own != shard) memcpy(own, shard, n * sizeof(float));
}

fsdp_status fsdp_pairs_all_gather(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place)
{
    copy_own(full + (size_t)(place ? place[p->rank] : p->rank) * n, shard, n);
    aim_gather(p, shard, full, n, place);
    return exchange(p, n);
}

/* Blocking: round by round, each round's terms summed before the next
 * comes, so the scratch stays one round's (its output written after the
 * round's sends, which read only the other ranks' parts). */
fsdp_status fsdp_pairs_reduce_scatter(fsdp_pairs *p, const float *full, float *shard, size_t n)
{
    float *s = NULL;
    if (p->size > 1) FSDP_TRY(scratch(p, FSDP_PAIRS_NOW, now_floats(p), &s));
    size_t round = fsdp_min_size(p->limit, fsdp_pairs_round(p->size));
    for (size_t off = 0; off < n; off += round) {
        size_t k = fsdp_min_size(round, n - off);
        aim_scatter(p, full + off, s, n, round);
        counts(p, (int)k);
        FSDP_TRY(post_wait(p, 0));
        add_terms(p, shard + off, full + (size_t)p->rank * n + off, 0, k);
    }
    return FSDP_OK;
}

fsdp_status fsdp_pairs_all_reduce(fsdp_pairs *p, float *buf, size_t count)
{
    if (p->size == 1) return FSDP_OK;
    float *s = NULL;
    FSDP_TRY(scratch(p, FSDP_PAIRS_NOW, now_floats(p), &s));
    /* Pieces whose shares fit a round (and a message). */
    size_t round = fsdp_pairs_round(p->size);
    size_t piece = fsdp_min_size(p->limit, round * (size_t)p->size), most = round + 1;
    for (size_t off = 0; off < count; off += piece) {
        size_t k = fsdp_min_size(piece, count - off);
        float *b = buf + off;
        size_t lo = fsdp_share_lo(k, p->rank, p->size), mine = fsdp_share_lo(k, p->rank + 1, p->size) - lo;
        /* Each rank's terms of this rank's share in, its share of this
         * rank's terms out; then the sums the other way. */
        for (int q = 0; q < p->size; ++q) {
            size_t a = fsdp_share_lo(k, q, p->size);
            p->to[q] = b + a;
            p->sc[q] = (int)(fsdp_share_lo(k, q + 1, p->size) - a);
            p->from[q] = q == p->rank ? NULL : s + (size_t)(q - (q > p->rank)) * most;
            p->rc[q] = (int)mine;
        }
        FSDP_TRY(post_wait(p, 0));
        add_terms(p, b + lo, b + lo, 0, mine);
        for (int q = 0; q < p->size; ++q) {
            size_t a = fsdp_share_lo(k, q, p->size);
            p->to[q] = b + lo;
            p->sc[q] = (int)mine;
            p->from[q] = b + a;
            p->rc[q] = (int)(fsdp_share_lo(k, q + 1, p->size) - a);
        }
        FSDP_TRY(post_wait(p, 0));
    }
    return FSDP_OK;
}

fsdp_status fsdp_pairs_all_to_all(fsdp_pairs *p, const float *send, float *recv, size_t count)
{
    for (int q = 0; q < p->size; ++q) {
        p->to[q] = send + (size_t)q * count;
        p->from[q] = recv + (size_t)q * count;
    }
    memcpy(recv + (size_t)p->rank * count, send + (size_t)p->rank * count, count * sizeof(float));
    return exchange(p, count);
}

static fsdp_status post_started(fsdp_pairs *p, size_t n, int slot)
{
    counts(p, (int)n);
    return post(p, 0, TAG_STARTED, p->started + (size_t)slot * 2 * (size_t)p->size, &p->nstarted[slot]);
}

fsdp_status fsdp_pairs_all_gather_start(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place,
                                        int slot)
{
    if (n > p->limit) return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a started exchange of %zu floats (at most %zu)", n, p->limit);
    copy_own(full + (size_t)(place ? place[p->rank] : p->rank) * n, shard, n);
    aim_gather(p, shard, full, n, place);
    return post_started(p, n, slot);
}

fsdp_status fsdp_pairs_reduce_scatter_start(fsdp_pairs *p, const float *full, float *shard, size_t n, int slot)
{
    if (n > p->limit) return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a started exchange of %zu floats (at most %zu)", n, p->limit);
    if (p->held.live) FSDP_TRY(fsdp_pairs_complete(p, p->held.slot));
    float *s = NULL;
    if (p->size > 1) FSDP_TRY(scratch(p, FSDP_PAIRS_HELD, (size_t)(p->size - 1) * n, &s));
    aim_scatter(p, full, s, n, n);
    FSDP_TRY(post_started(p, n, slot));
    p->held.live = 1;
    p->held.slot = slot;
    p->held.full = full;
    p->held.shard = shard;
    p->held.n = n;
    return FSDP_OK;
}

fsdp_status fsdp_pairs_complete(fsdp_pairs *p, int slot)
{
    int n = p->nstarted[slot];
    p->nstarted[slot] = 0;
    if (n) mpiCheck(MPI_Waitall(n, p->started + (size_t)slot * 2 * (size_t)p->size, MPI_STATUSES_IGNORE));
    if (p->held.live && p->held.slot == slot) {
        p->held.live = 0;
        aim_scatter(p, p->held.full, p->scratch[FSDP_PAIRS_HELD], p->held.n, p->held.n);
        add_terms(p, p->held.shard, p->held.full + (size_t)p->rank * p->held.n, 0, p->held.n);
    }
    return FSDP_OK;
}
