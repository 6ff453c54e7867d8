/* Buffer collectives as messages between every two ranks (fsdp_pairs.h). */
#include <limits.h>
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
    p->each.to = malloc(n * sizeof *p->each.to);
    p->each.from = malloc(n * sizeof *p->each.from);
    p->each.sc = malloc(n * sizeof *p->each.sc);
    p->each.rc = malloc(n * sizeof *p->each.rc);
    p->each.terms = malloc(n * sizeof *p->each.terms);
    p->each.req = malloc(2 * n * sizeof *p->each.req);
    p->started = malloc(2 * n * FSDP_TICKETS * sizeof *p->started);
    if (!p->each.to || !p->each.from || !p->each.sc || !p->each.rc || !p->each.terms || !p->each.req || !p->started)
        return fsdp_fail(FSDP_ERR_NOMEM, "no memory for the exchanges between %d ranks", p->size);
    return FSDP_OK;
}

void fsdp_pairs_close(fsdp_pairs *p)
{
    free(p->each.to);
    free(p->each.from);
    free(p->each.sc);
    free(p->each.rc);
    free(p->each.terms);
    free(p->each.req);
    free(p->started);
    free(p->scratch[FSDP_PAIRS_NOW]);
    free(p->scratch[FSDP_PAIRS_HELD]);
    free(p->between.coded);
    for (int k = 0; k < FSDP_TICKETS; ++k) free(p->between.wired[k].coded);
    for (int k = 0; k <= FSDP_TICKETS; ++k) free(p->between.pieces[k]);
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
    for (int q = 0; q < p->size; ++q) p->each.sc[q] = p->each.rc[q] = k;
}

/* Posts, for every other rank q, sc[q] floats from to[q] + off and rc[q]
 * floats into from[q] + off, into req; *n: how many requests. */
static fsdp_status post(fsdp_pairs *p, size_t off, int tag, MPI_Request *req, int *n)
{
    *n = 0;
    for (int q = 0; q < p->size; ++q) {
        if (q == p->rank) continue;
        if (p->each.rc[q]) mpiCheck(MPI_Irecv(p->each.from[q] + off, p->each.rc[q], MPI_FLOAT, q, tag, p->comm, &req[(*n)++]));
        if (p->each.sc[q]) mpiCheck(MPI_Isend(p->each.to[q] + off, p->each.sc[q], MPI_FLOAT, q, tag, p->comm, &req[(*n)++]));
    }
    return FSDP_OK;
}

/* ---- between machines (fsdp_wire.h) ---------------------------------------
 *
 * Each buffer goes in pieces of at most FSDP_PAIRS_PIECE bytes, all posted
 * at once.  A piece that small is sent eagerly, without waiting for the
 * receiver's go-ahead: over TCP a larger message's go-ahead travels in the
 * same stream as the data the receiver is sending, behind all of it, so
 * the two directions of a link took turns (measured: an exchange between
 * two machines at 20 Mbit/s took 1.9-2.2x the link's time, in pieces
 * 1.05-1.4x).  Parts in fp32 go from and into the buffers themselves;
 * encoded ones through `coded`. */

static int coded(const fsdp_pairs *p) { return p->wire->format != FSDP_WIRE_FP32; }

/* A byte buffer of at least `bytes`, kept and grown. */
static fsdp_status bytes_room(unsigned char **buf, size_t *have, size_t bytes)
{
    if (bytes <= *have) return FSDP_OK;
    free(*buf);
    *buf = malloc(bytes);
    *have = *buf ? bytes : 0;
    return *buf ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "no memory for %.1f MB of encoded parts", bytes / 1e6);
}

/* Room for `n` requests in list `which` (a ticket slot, or FSDP_TICKETS:
 * a blocking exchange). */
static fsdp_status requests(fsdp_pairs *p, int which, size_t n)
{
    if (n <= p->between.pieces_cap[which]) return FSDP_OK;
    MPI_Request *r = realloc(p->between.pieces[which], n * sizeof *r);
    if (!r) return fsdp_fail(FSDP_ERR_NOMEM, "no memory for %zu requests", n);
    p->between.pieces[which] = r;
    p->between.pieces_cap[which] = n;
    return FSDP_OK;
}

/* Posts `bytes` from out[q] to every other rank q and into in[q] from it,
 * in pieces, into list `which`. */
static fsdp_status post_pieces(fsdp_pairs *p, unsigned char *const *out, unsigned char *const *in, size_t bytes,
                               int tag, int which)
{
    size_t piece = fsdp_min_size(FSDP_PAIRS_PIECE, p->limit * sizeof(float)), n = (bytes + piece - 1) / piece;
    FSDP_TRY(requests(p, which, 2 * n * (size_t)p->size));
    MPI_Request *req = p->between.pieces[which];
    int k = 0;
    for (int q = 0; q < p->size; ++q) {
        if (q == p->rank) continue;
        for (size_t off = 0; off < bytes; off += piece) {
            int len = (int)fsdp_min_size(piece, bytes - off);
            mpiCheck(MPI_Irecv(in[q] + off, len, MPI_BYTE, q, tag, p->comm, &req[k++]));
            mpiCheck(MPI_Isend(out[q] + off, len, MPI_BYTE, q, tag, p->comm, &req[k++]));
        }
        p->wire->out += bytes;
        p->wire->in += bytes;
    }
    p->between.npieces[which] = k;
    return FSDP_OK;
}

static fsdp_status wait_pieces(fsdp_pairs *p, int which)
{
    int n = p->between.npieces[which];
    p->between.npieces[which] = 0;
    if (n) mpiCheck(MPI_Waitall(n, p->between.pieces[which], MPI_STATUSES_IGNORE));
    return FSDP_OK;
}

/* Rank q's block of a buffer of blocks of `bytes`. */
static unsigned char *block(unsigned char *buf, int q, size_t bytes) { return buf + (size_t)q * bytes; }

/* Where rank q's part of a gather lands in full. */
static float *gathered(const float *full, size_t n, const int *place, int q)
{
    return (float *)full + (size_t)(place ? place[q] : q) * n;
}

/* Aims out/in for a gather of this rank's n floats at `mine` into full
 * (coded: through `buf`, this rank's part encoded into its block). */
static void aim_peer_gather(fsdp_pairs *p, const float *mine, float *full, size_t n, const int *place,
                            unsigned char *buf, size_t bytes)
{
    unsigned char **out = (unsigned char **)p->each.to, **in = (unsigned char **)p->each.from;
    if (coded(p)) fsdp_wire_encode(p->wire->format, mine, n, block(buf, p->rank, bytes));
    for (int q = 0; q < p->size; ++q) {
        out[q] = coded(p) ? block(buf, p->rank, bytes) : (unsigned char *)mine;
        in[q] = coded(p) ? block(buf, q, bytes) : (unsigned char *)gathered(full, n, place, q);
    }
}

static void decode_gather(fsdp_pairs *p, float *full, size_t n, const int *place, unsigned char *buf, size_t bytes)
{
    if (!coded(p)) return;
    for (int q = 0; q < p->size; ++q)
        if (q != p->rank) fsdp_wire_decode(p->wire->format, block(buf, q, bytes), n, gathered(full, n, place, q));
}

static fsdp_status peer_all_gather(fsdp_pairs *p, float *full, size_t n, const int *place)
{
    size_t bytes = fsdp_wire_bytes(p->wire->format, n);
    if (coded(p)) FSDP_TRY(bytes_room(&p->between.coded, &p->between.coded_bytes, bytes * (size_t)p->size));
    aim_peer_gather(p, gathered(full, n, place, p->rank), full, n, place, p->between.coded, bytes);
    FSDP_TRY(post_pieces(p, (unsigned char **)p->each.to, (unsigned char **)p->each.from, bytes, TAG_NOW, FSDP_TICKETS));
    FSDP_TRY(wait_pieces(p, FSDP_TICKETS));
    decode_gather(p, full, n, place, p->between.coded, bytes);
    return FSDP_OK;
}

/* Block q of send to rank q, rank q's into recv's block q (coded: through
 * 2 * size blocks of buf, what goes and what comes), posted into list
 * `which`. */
static fsdp_status post_all_to_all(fsdp_pairs *p, const float *send, float *recv, size_t count, unsigned char *buf,
                                   int tag, int which)
{
    size_t bytes = fsdp_wire_bytes(p->wire->format, count);
    unsigned char **out = (unsigned char **)p->each.to, **in = (unsigned char **)p->each.from;
    for (int q = 0; q < p->size; ++q) {
        out[q] = coded(p) ? block(buf, q, bytes) : (unsigned char *)(send + (size_t)q * count);
        in[q] = coded(p) ? block(buf, p->size + q, bytes) : (unsigned char *)(recv + (size_t)q * count);
        if (coded(p) && q != p->rank) fsdp_wire_encode(p->wire->format, send + (size_t)q * count, count, out[q]);
    }
    return post_pieces(p, out, in, bytes, tag, which);
}

static void decode_all_to_all(fsdp_pairs *p, fsdp_wire_format f, float *recv, size_t count, unsigned char *buf)
{
    size_t bytes = fsdp_wire_bytes(f, count);
    for (int q = 0; f != FSDP_WIRE_FP32 && q < p->size; ++q)
        if (q != p->rank) fsdp_wire_decode(f, block(buf, p->size + q, bytes), count, recv + (size_t)q * count);
}

static fsdp_status peer_all_to_all(fsdp_pairs *p, const float *send, float *recv, size_t count)
{
    if (coded(p))
        FSDP_TRY(bytes_room(&p->between.coded, &p->between.coded_bytes, 2 * fsdp_wire_bytes(p->wire->format, count) * (size_t)p->size));
    FSDP_TRY(post_all_to_all(p, send, recv, count, p->between.coded, TAG_NOW, FSDP_TICKETS));
    FSDP_TRY(wait_pieces(p, FSDP_TICKETS));
    decode_all_to_all(p, p->wire->format, recv, count, p->between.coded);
    return FSDP_OK;
}

static fsdp_status post_wait(fsdp_pairs *p, size_t off)
{
    int n;
    FSDP_TRY(post(p, off, TAG_NOW, p->each.req, &n));
    mpiCheck(MPI_Waitall(n, p->each.req, MPI_STATUSES_IGNORE));
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
        p->each.to[q] = shard;
        p->each.from[q] = full + (size_t)(place ? place[q] : q) * n;
    }
}

/* Part q of full (n floats apart) to rank q; rank q's term of this rank's
 * part into the scratch, `room` floats apart (the others' terms in rank
 * order, this rank's left out). */
static void aim_scatter(fsdp_pairs *p, const float *full, float *scratch, size_t n, size_t room)
{
    for (int q = 0; q < p->size; ++q) {
        p->each.to[q] = full + (size_t)q * n;
        p->each.from[q] = q == p->rank ? NULL : scratch + (size_t)(q - (q > p->rank)) * room;
    }
}

/* out[0 .. k) = the terms in rank order: this rank's from own, rank q's
 * from from[q] + off (out may be own). */
static void add_terms(fsdp_pairs *p, float *out, const float *own, size_t off, size_t k)
{
    for (int q = 0; q < p->size; ++q) p->each.terms[q] = q == p->rank ? own : p->each.from[q] + off;
    fsdp_sum_rows(out, p->each.terms, p->size, 0, k);
}

static void copy_own(float *own, const float *shard, size_t n)
{
    if (own != shard) memcpy(own, shard, n * sizeof(float));
}

fsdp_status fsdp_pairs_all_gather(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place)
{
    if (p->wire) {
        copy_own(gathered(full, n, place, p->rank), shard, n);
        return peer_all_gather(p, full, n, place);
    }
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
            p->each.to[q] = b + a;
            p->each.sc[q] = (int)(fsdp_share_lo(k, q + 1, p->size) - a);
            p->each.from[q] = q == p->rank ? NULL : s + (size_t)(q - (q > p->rank)) * most;
            p->each.rc[q] = (int)mine;
        }
        FSDP_TRY(post_wait(p, 0));
        add_terms(p, b + lo, b + lo, 0, mine);
        for (int q = 0; q < p->size; ++q) {
            size_t a = fsdp_share_lo(k, q, p->size);
            p->each.to[q] = b + lo;
            p->each.sc[q] = (int)mine;
            p->each.from[q] = b + a;
            p->each.rc[q] = (int)(fsdp_share_lo(k, q + 1, p->size) - a);
        }
        FSDP_TRY(post_wait(p, 0));
    }
    return FSDP_OK;
}

fsdp_status fsdp_pairs_all_to_all(fsdp_pairs *p, const float *send, float *recv, size_t count)
{
    if (p->wire) {
        memcpy(recv + (size_t)p->rank * count, send + (size_t)p->rank * count, count * sizeof(float));
        return peer_all_to_all(p, send, recv, count);
    }
    for (int q = 0; q < p->size; ++q) {
        p->each.to[q] = send + (size_t)q * count;
        p->each.from[q] = recv + (size_t)q * count;
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
    if (p->wire) {
        size_t bytes = fsdp_wire_bytes(p->wire->format, n);
        fsdp_pairs_wired *w = &p->between.wired[slot];
        if (coded(p)) FSDP_TRY(bytes_room(&w->coded, &w->coded_bytes, bytes * (size_t)p->size));
        aim_peer_gather(p, shard, full, n, place, w->coded, bytes);
        FSDP_TRY(post_pieces(p, (unsigned char **)p->each.to, (unsigned char **)p->each.from, bytes, TAG_STARTED, slot));
        w->kind = FSDP_PAIRS_GATHER;
        w->format = p->wire->format;
        w->n = n;
        w->out = full;
        w->place = place;
        return FSDP_OK;
    }
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

fsdp_status fsdp_pairs_all_to_all_start(fsdp_pairs *p, const float *send, float *recv, size_t count, int slot)
{
    if (!p->wire) return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a started all-to-all between ranks of one machine");
    memcpy(recv + (size_t)p->rank * count, send + (size_t)p->rank * count, count * sizeof(float));
    fsdp_pairs_wired *w = &p->between.wired[slot];
    if (coded(p))
        FSDP_TRY(bytes_room(&w->coded, &w->coded_bytes, 2 * fsdp_wire_bytes(p->wire->format, count) * (size_t)p->size));
    FSDP_TRY(post_all_to_all(p, send, recv, count, w->coded, TAG_STARTED, slot));
    w->kind = FSDP_PAIRS_ALL_TO_ALL;
    w->format = p->wire->format;
    w->out = recv;
    w->n = count;
    return FSDP_OK;
}

fsdp_status fsdp_pairs_complete(fsdp_pairs *p, int slot)
{
    int n = p->nstarted[slot];
    p->nstarted[slot] = 0;
    if (n) mpiCheck(MPI_Waitall(n, p->started + (size_t)slot * 2 * (size_t)p->size, MPI_STATUSES_IGNORE));
    if (p->wire) FSDP_TRY(wait_pieces(p, slot));
    fsdp_pairs_wired *w = &p->between.wired[slot];
    if (w->kind == FSDP_PAIRS_GATHER && w->format != FSDP_WIRE_FP32) {
        size_t bytes = fsdp_wire_bytes(w->format, w->n);
        for (int q = 0; q < p->size; ++q)
            if (q != p->rank) fsdp_wire_decode(w->format, block(w->coded, q, bytes), w->n, gathered(w->out, w->n, w->place, q));
    }
    if (w->kind == FSDP_PAIRS_ALL_TO_ALL) decode_all_to_all(p, w->format, w->out, w->n, w->coded);
    w->kind = 0;
    /* Given back: encoded parts are held only while in flight (the
     * prediction counts them so, fsdp_wire.h). */
    free(w->coded);
    w->coded = NULL;
    w->coded_bytes = 0;
    if (p->held.live && p->held.slot == slot) {
        p->held.live = 0;
        aim_scatter(p, p->held.full, p->scratch[FSDP_PAIRS_HELD], p->held.n, p->held.n);
        add_terms(p, p->held.shard, p->held.full + (size_t)p->rank * p->held.n, 0, p->held.n);
    }
    return FSDP_OK;
}
