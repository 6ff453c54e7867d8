/* fsdp_pairs.h: the buffer collectives of ranks that share no memory, as
 * point-to-point messages between every two ranks of a communicator, on
 * host memory.
 *
 * Why not MPI's own collectives: they allocate temporary buffers of their
 * own, whose sizes depend on the algorithm the library picks (Open MPI's
 * started reduce-scatter: more than the whole gradient), so no prediction
 * of a rank's memory could count them; and each adds the ranks' terms in
 * an order of its own.  Here every rank sends each other rank its part and
 * receives theirs straight into the destination, or, for a sum, into a
 * scratch buffer of (ranks - 1) parts that is kept for the run and grown
 * only when a larger part comes; the terms are then added in rank order
 * with fsdp_sum_rows, as the shared-memory path adds them (fsdp_shm.h): a
 * world of ranks gives the same floats whether its ranks share a machine
 * or not.  Each rank sends (ranks - 1) / ranks of a buffer and receives as
 * much, as a ring would.
 *
 * Buffers longer than `limit` floats go in chunks of at most `limit`
 * floats per message, each chunk complete before the next.  Started
 * exchanges are posted under a ticket slot (fsdp_backend.h) and complete
 * in fsdp_pairs_complete; a started reduce-scatter adds its terms there,
 * from a scratch of (ranks - 1) of its parts ("held"), kept and grown to
 * the largest.  One started reduce-scatter at a time holds it: a second
 * one completes the first before it starts.  Blocking sums go round by
 * round, fsdp_pairs_round floats of each term at a time, through a scratch
 * of their own ("now": (ranks - 1) rounds, made whole at the first, which
 * is the start-up warm-up), so they may run while a started one is in
 * flight and their memory does not grow with the buffers. */
#ifndef FSDP_PAIRS_H
#define FSDP_PAIRS_H

#include <stddef.h>
#include "fsdp_backend.h"
#include "fsdp_mpi.h"
#include "fsdp_wire.h"

enum { FSDP_PAIRS_NOW, FSDP_PAIRS_HELD };
enum { FSDP_PAIRS_GATHER = 1, FSDP_PAIRS_ALL_TO_ALL };   /* the scratch of blocking calls, of the started one */
/* Floats of each term a blocking sum takes at once: FSDP_PAIRS_ROUND up
 * to 5 ranks, then fewer, so that the round's scratch for the other ranks'
 * terms stays FSDP_PAIRS_NOW_FLOATS at any world (and a page at least). */
#define FSDP_PAIRS_ROUND ((size_t)1 << 16)
/* Bytes in one message between machines: below Open MPI's TCP eager limit
 * (64 KB with its header), so that no message waits for a go-ahead. */
#define FSDP_PAIRS_PIECE ((size_t)60 * 1024)
#define FSDP_PAIRS_NOW_FLOATS ((size_t)1 << 18)
static inline size_t fsdp_pairs_round(int ranks)
{
    size_t r = ranks > 1 ? FSDP_PAIRS_NOW_FLOATS / (size_t)(ranks - 1) : FSDP_PAIRS_ROUND, page = 1024;
    return r > FSDP_PAIRS_ROUND ? FSDP_PAIRS_ROUND : r < page ? page : r;
}

/* A started exchange between machines, to decode at its completion. */
typedef struct fsdp_pairs_wired {
    int kind;                /* 0: none; FSDP_PAIRS_GATHER, FSDP_PAIRS_ALL_TO_ALL */
    fsdp_wire_format format;
    unsigned char *coded;    /* its encoded parts, held until it completes */
    size_t coded_bytes, n;
    float *out;
    const int *place;
} fsdp_pairs_wired;

/* Per rank of the communicator, the exchange under way. */
typedef struct fsdp_pairs_each {
    const float **to;        /* what goes to it */
    float **from;            /* where what comes from it lands */
    int *sc, *rc;            /* floats sent to it, received from it */
    const float **terms;     /* its term of a sum */
    MPI_Request *req;        /* 2 per rank: a blocking exchange */
} fsdp_pairs_each;

/* Between machines: the encoded parts and the messages that carry them. */
typedef struct fsdp_pairs_between {
    unsigned char *coded;    /* encoded parts: this rank's, then the others' (a blocking exchange) */
    size_t coded_bytes;
    MPI_Request *pieces[FSDP_TICKETS + 1];   /* per ticket slot, and blocking */
    size_t pieces_cap[FSDP_TICKETS + 1];
    int npieces[FSDP_TICKETS + 1];
    fsdp_pairs_wired wired[FSDP_TICKETS];   /* per ticket slot */
} fsdp_pairs_between;

typedef struct fsdp_pairs {
    MPI_Comm comm;
    int rank, size;
    size_t limit;            /* most floats in one message */
    fsdp_pairs_each each;
    MPI_Request *started;    /* 2 per rank for each ticket slot */
    int nstarted[FSDP_TICKETS];
    float *scratch[2];
    size_t scratch_floats[2];
    fsdp_wire *wire;         /* between machines: the format, and the bytes counted (NULL: neither) */
    fsdp_pairs_between between;
    struct {                 /* the started reduce-scatter whose terms are still to add */
        int live, slot;
        const float *full;
        float *shard;
        size_t n;
    } held;
} fsdp_pairs;

/* Where the exchanges cross between machines (a rank and its peers): the
 * all-gathers and all-to-alls travel in wire->format (fsdp_wire.h), each
 * part encoded once and decoded where it lands, and the bytes are counted
 * there.  Sums (reduce-scatter, all-reduce) between such ranks are the
 * caller's: it sends each machine's sum through the all-to-all. */

/* On comm (not owned); collective only in that every rank opens its own. */
fsdp_status fsdp_pairs_open(fsdp_pairs *p, MPI_Comm comm, size_t limit);
void fsdp_pairs_close(fsdp_pairs *p);

/* full[place[q] * n .. + n) = rank q's shard on every rank (place NULL: q);
 * shard may be this rank's own place in full. */
fsdp_status fsdp_pairs_all_gather(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place);
/* shard = the sum over ranks, in rank order, of full[rank * n .. + n);
 * shard may be this rank's own part of full. */
fsdp_status fsdp_pairs_reduce_scatter(fsdp_pairs *p, const float *full, float *shard, size_t n);
/* buf = the sum over ranks of buf, in rank order, in place. */
fsdp_status fsdp_pairs_all_reduce(fsdp_pairs *p, float *buf, size_t count);
/* Block q of send (count floats at q * count) to rank q; recv's block q
 * from rank q (its own block copied; send and recv apart). */
fsdp_status fsdp_pairs_all_to_all(fsdp_pairs *p, const float *send, float *recv, size_t count);

/* The same, started under ticket slot `slot` (n at most limit, else refused). */
fsdp_status fsdp_pairs_all_gather_start(fsdp_pairs *p, const float *shard, float *full, size_t n, const int *place,
                                        int slot);
fsdp_status fsdp_pairs_reduce_scatter_start(fsdp_pairs *p, const float *full, float *shard, size_t n, int slot);
/* Between machines (wire set): the all-to-all, started. */
fsdp_status fsdp_pairs_all_to_all_start(fsdp_pairs *p, const float *send, float *recv, size_t count, int slot);
/* Slot's exchange done: its messages waited for, a reduce-scatter's terms
 * added.  Nothing to do is fine. */
fsdp_status fsdp_pairs_complete(fsdp_pairs *p, int slot);

#endif
