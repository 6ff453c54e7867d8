/* test_collectives: every collective of the MPI backend, host control and
 * buffer collectives (and, on one rank, of the self backend) against
 * results each rank computes alone, in the spirit of nccl-tests.  Values are small integers, so sums over ranks are exact in
 * float and any difference is a bug, never rounding.  Outputs start as NaN
 * so that an element a collective forgot to write shows up too.
 *
 * Built a second time with FSDP_TEST_DEVICE as test_collectives_gpu (GPU
 * builds): the same checks on device buffers for the NCCL backend (blocking
 * and start/wait, plus the ticket ring) and the MPI backend staged through
 * host memory, and that collectives order against Darknet's stream, with
 * the MPI host control beside them; see main() at the end.  Without a GPU it exits 77 (skipped).
 *
 * Run under mpirun on 1 to 4 ranks.  A mismatch prints the collective, size
 * and first bad index and the run goes on (every rank still issues the same
 * collectives); the exit status is non-zero if any rank saw one. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "fsdp_backend.h"
#include "fsdp_hosts.h"
#include "fsdp_cuda_backends.h"
#ifdef FSDP_TEST_DEVICE
#include <cuda_runtime.h>
#include "gpu_test.h"
#endif

typedef struct {
    fsdp_ctl *h;    /* host control */
    fsdp_coll *b;   /* buffer collectives */
    char label[48];
    int async;      /* all-gather and reduce-scatter through *_start + wait */
    int checks;
    int failures;
    int machines;          /* node memory's checks: how many machines, */
    const int *host_of;    /* each rank's (fsdp_hosts numbering) */
    const int *place;      /* and its place there, in rank order */
} suite;

static const size_t plain_sizes[] = { 0, 1, 7, 1000, ((size_t)1 << 20) + 3 };
/* With a chunk limit of 1000: below, at and across it, not multiples of it. */
static const size_t chunk_sizes[] = { 0, 1, 999, 1000, 1001, 2500, 12345 };
static const size_t tiny_sizes[] = { 1, 3, 7 };
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Rank r's value at index i: an integer in [-510, 510]. */
static float val(int rank, size_t i)
{
    return (float)((long)((i * 7 + (size_t)rank * 13) % 1021) - 510);
}

static float val_sum(int world, size_t i)
{
    float s = 0;
    for (int r = 0; r < world; r++)
        s += val(r, i);
    return s;
}

static unsigned char byte_val(int root, size_t i)
{
    return (unsigned char)(i * 31 + (size_t)root * 7 + 1);
}

/* Buffers hold at least one element, so that size 0 still gets a pointer. */
static void *alloc(size_t count, size_t size)
{
    void *p = malloc((count ? count : 1) * size);
    if (!p) {
        fprintf(stderr, "test_collectives: out of memory (%zu x %zu bytes)\n", count, size);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

static float *nan_floats(size_t count)
{
    float *p = alloc(count, sizeof(float));
    for (size_t i = 0; i < count; i++)
        p[i] = NAN;
    return p;
}

/* Buffers a collective reads or writes live where the backend wants them
 * (b->mem).  The checks make inputs and expected results in host memory and
 * move them with mem_copy; on host backends these are plain copies. */
static void *mem_alloc(const suite *t, size_t count, size_t size)
{
    (void)t;
#ifdef FSDP_TEST_DEVICE
    if (t->b->mem == FSDP_MEM_DEVICE) {
        void *p = NULL;
        cuda_must(cudaMalloc(&p, (count ? count : 1) * size), "cudaMalloc");
        return p;
    }
#endif
    return alloc(count, size);
}

static void mem_free(const suite *t, void *p)
{
    (void)t;
#ifdef FSDP_TEST_DEVICE
    if (t->b->mem == FSDP_MEM_DEVICE) {
        cuda_must(cudaFree(p), "cudaFree");
        return;
    }
#endif
    free(p);
}

/* Between host memory and the backend's, either way (CUDA tells the
 * direction from the pointers).  On the legacy stream, so a copy of a
 * collective's result comes after whatever the collective made it wait for. */
static void mem_copy(const suite *t, void *dst, const void *src, size_t bytes)
{
    (void)t;
#ifdef FSDP_TEST_DEVICE
    if (t->b->mem == FSDP_MEM_DEVICE) {
        cuda_must(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* The collective under test, blocking or through a ticket. */
static fsdp_status do_all_gather(suite *t, const float *shard, float *full, size_t n)
{
    fsdp_coll *b = t->b;
    int ticket = -1;
    if (!t->async)
        return fsdp_coll_all_gather(b, shard, full, n);
    FSDP_TRY(fsdp_coll_all_gather_start(b, shard, full, n, &ticket));
    return fsdp_coll_wait(b, ticket);
}

static fsdp_status do_reduce_scatter(suite *t, const float *full, float *shard, size_t n)
{
    fsdp_coll *b = t->b;
    int ticket = -1;
    if (!t->async)
        return fsdp_coll_reduce_scatter(b, full, shard, n);
    FSDP_TRY(fsdp_coll_reduce_scatter_start(b, full, shard, n, &ticket));
    return fsdp_coll_wait(b, ticket);
}

/* A status other than OK means the ranks may no longer agree on which
 * collective comes next: stop them all rather than hang. */
static void must(suite *t, fsdp_status s, const char *coll, size_t n)
{
    if (s == FSDP_OK)
        return;
    fprintf(stderr, "FAIL %s %s size=%zu rank %d: returned %s\n", t->label, coll, n,
            t->b->rank, fsdp_status_str(s));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void mismatch(suite *t, const char *coll, size_t n, size_t i, double got, double want)
{
    fprintf(stderr, "FAIL %s %s size=%zu rank %d of %d: first bad index %zu: got %.17g, want %.17g\n",
            t->label, coll, n, t->b->rank, t->b->world, i, got, want);
    t->failures++;
}

static void expect_floats(suite *t, const char *coll, size_t n, const float *got,
                          const float *want, size_t count)
{
    t->checks++;
    for (size_t i = 0; i < count; i++)
        if (!(got[i] == want[i])) {
            mismatch(t, coll, n, i, got[i], want[i]);
            return;
        }
}

/* An all-gather's buffers, made in the backend's memory: full starts as NaN
 * apart from this rank's part when in place; shard holds val(rank, i). */
typedef struct {
    float *full, *shard; /* backend memory; shard may lie inside full */
    float *want;         /* host: the gathered buffer */
} gather_bufs;

static gather_bufs gather_setup(suite *t, size_t n, int in_place)
{
    fsdp_coll *b = t->b;
    size_t full_n = (size_t)b->world * n;
    gather_bufs g = { .want = alloc(full_n, sizeof(float)) };
    float *nans = nan_floats(full_n), *mine = alloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        mine[i] = val(b->rank, i);
    for (size_t j = 0; j < full_n; j++)
        g.want[j] = val((int)(j / n), j % n);
    g.full = mem_alloc(t, full_n, sizeof(float));
    mem_copy(t, g.full, nans, full_n * sizeof(float));
    g.shard = in_place ? g.full + (size_t)b->rank * n : mem_alloc(t, n, sizeof(float));
    mem_copy(t, g.shard, mine, n * sizeof(float));
    free(nans);
    free(mine);
    return g;
}

static void gather_free(suite *t, gather_bufs *g, int in_place)
{
    if (!in_place)
        mem_free(t, g->shard);
    mem_free(t, g->full);
    free(g->want);
}

static void gather_check(suite *t, gather_bufs *g, const char *coll, size_t n, int in_place)
{
    size_t full_n = (size_t)t->b->world * n;
    float *got = alloc(full_n, sizeof(float));
    mem_copy(t, got, g->full, full_n * sizeof(float));
    expect_floats(t, coll, n, got, g->want, full_n);
    gather_free(t, g, in_place);
    free(got);
}

static void check_all_gather(suite *t, size_t n, int in_place)
{
    gather_bufs g = gather_setup(t, n, in_place);
    const char *coll = in_place ? "all_gather in place" : "all_gather";
    must(t, do_all_gather(t, g.shard, g.full, n), coll, n);
    gather_check(t, &g, coll, n, in_place);
}

/* A reduce-scatter's buffers: full holds val(rank, j), shard starts as NaN
 * (or is this rank's part of full). */
typedef struct {
    float *full, *shard;     /* backend memory */
    float *want, *want_full; /* host: the shard, and full afterwards */
} scatter_bufs;

static scatter_bufs scatter_setup(suite *t, size_t n, int in_place)
{
    fsdp_coll *b = t->b;
    size_t full_n = (size_t)b->world * n, mine = (size_t)b->rank * n;
    scatter_bufs r = { .want = alloc(n, sizeof(float)),
                       .want_full = alloc(full_n, sizeof(float)) };
    for (size_t j = 0; j < full_n; j++)
        r.want_full[j] = val(b->rank, j);
    for (size_t i = 0; i < n; i++)
        r.want[i] = val_sum(b->world, mine + i);
    r.full = mem_alloc(t, full_n, sizeof(float));
    mem_copy(t, r.full, r.want_full, full_n * sizeof(float));
    if (in_place) {
        r.shard = r.full + mine;
        memcpy(r.want_full + mine, r.want, n * sizeof(float));
    } else {
        float *nans = nan_floats(n);
        r.shard = mem_alloc(t, n, sizeof(float));
        mem_copy(t, r.shard, nans, n * sizeof(float));
        free(nans);
    }
    return r;
}

static void scatter_check(suite *t, scatter_bufs *r, const char *coll, size_t n, int in_place)
{
    size_t full_n = (size_t)t->b->world * n;
    float *got = alloc(full_n, sizeof(float));
    mem_copy(t, got, r->shard, n * sizeof(float));
    expect_floats(t, coll, n, got, r->want, n);
    /* The input is const: other ranks' parts must survive. */
    mem_copy(t, got, r->full, full_n * sizeof(float));
    expect_floats(t, in_place ? "reduce_scatter in place (input)" : "reduce_scatter (input)",
                  n, got, r->want_full, full_n);
    if (!in_place)
        mem_free(t, r->shard);
    mem_free(t, r->full);
    free(r->want);
    free(r->want_full);
    free(got);
}

static void check_reduce_scatter(suite *t, size_t n, int in_place)
{
    scatter_bufs r = scatter_setup(t, n, in_place);
    const char *coll = in_place ? "reduce_scatter in place" : "reduce_scatter";
    must(t, do_reduce_scatter(t, r.full, r.shard, n), coll, n);
    scatter_check(t, &r, coll, n, in_place);
}

static void check_all_reduce(suite *t, size_t n)
{
    fsdp_coll *b = t->b;
    float *host = alloc(n, sizeof(float)), *want = alloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) {
        host[i] = val(b->rank, i);
        want[i] = val_sum(b->world, i);
    }
    float *buf = mem_alloc(t, n, sizeof(float));
    mem_copy(t, buf, host, n * sizeof(float));
    must(t, fsdp_coll_all_reduce(b, buf, n), "all_reduce", n);
    mem_copy(t, host, buf, n * sizeof(float));
    expect_floats(t, "all_reduce", n, host, want, n);
    mem_free(t, buf);
    free(host);
    free(want);
}

static void check_broadcast(suite *t, size_t bytes)
{
    fsdp_ctl *h = t->h;
    unsigned char *buf = alloc(bytes, 1);
    for (int root = 0; root < h->world; root++) {
        for (size_t i = 0; i < bytes; i++)
            buf[i] = h->rank == root ? byte_val(root, i) : 0;
        must(t, fsdp_ctl_broadcast(h, buf, bytes, root), "broadcast", bytes);
        t->checks++;
        for (size_t i = 0; i < bytes; i++)
            if (buf[i] != byte_val(root, i)) {
                mismatch(t, "broadcast", bytes, i, buf[i], byte_val(root, i));
                break;
            }
    }
    free(buf);
}

static void check_sum_f64(suite *t, size_t n)
{
    fsdp_ctl *h = t->h;
    double *v = alloc(n, sizeof(double));
    double w = h->world;
    for (size_t i = 0; i < n; i++)
        v[i] = h->rank + 0.5 * (double)i;
    must(t, fsdp_ctl_sum_f64(h, v, n), "sum_f64", n);
    t->checks++;
    for (size_t i = 0; i < n; i++) {
        double want = w * (w - 1) / 2 + w * 0.5 * (double)i;
        if (v[i] != want) {
            mismatch(t, "sum_f64", n, i, v[i], want);
            break;
        }
    }
    free(v);
}

/* Element-wise maxima: each element's largest rank differs, and values near
 * 2^64 would come out wrong through a signed or double reduction. */
static uint64_t max_val(int rank, int world, size_t i)
{
    uint64_t r = (uint64_t)((size_t)rank + i) % (uint64_t)world;
    return i % 2 ? UINT64_MAX - (uint64_t)world + r : r * 1000 + i;
}

static void check_max_u64(suite *t, size_t n)
{
    fsdp_ctl *h = t->h;
    uint64_t *v = alloc(n, sizeof(uint64_t));
    for (size_t i = 0; i < n; i++)
        v[i] = max_val(h->rank, h->world, i);
    must(t, fsdp_ctl_max_u64(h, v, n), "max_u64", n);
    t->checks++;
    for (size_t i = 0; i < n; i++) {
        uint64_t want = max_val(h->world - 1 - (int)(i % (size_t)h->world), h->world, i);
        if (v[i] != want) {
            fprintf(stderr, "FAIL %s max_u64 size=%zu rank %d of %d: first bad index %zu: got %llu, want %llu\n",
                    t->label, n, h->rank, h->world, i, (unsigned long long)v[i], (unsigned long long)want);
            t->failures++;
            break;
        }
    }
    free(v);
}

static void check_min_max(suite *t, const char *what, uint64_t v, uint64_t want_min,
                          uint64_t want_max)
{
    uint64_t lo = 0, hi = 0;
    must(t, fsdp_ctl_min_max_u64(t->h, v, &lo, &hi), "min_max_u64", 1);
    t->checks++;
    if (lo != want_min || hi != want_max) {
        fprintf(stderr, "FAIL %s min_max_u64 (%s) rank %d: got [%llu, %llu], want [%llu, %llu]\n",
                t->label, what, t->h->rank, (unsigned long long)lo, (unsigned long long)hi,
                (unsigned long long)want_min, (unsigned long long)want_max);
        t->failures++;
    }
}

static void check_min_max_all(suite *t)
{
    uint64_t r = (uint64_t)t->h->rank, w = (uint64_t)t->h->world;
    check_min_max(t, "equal", 0x5eedcafef00dULL, 0x5eedcafef00dULL, 0x5eedcafef00dULL);
    check_min_max(t, "small", 1000 + r * r, 1000, 1000 + (w - 1) * (w - 1));
    /* Near 2^64: a signed or double reduction would get these wrong. */
    check_min_max(t, "large", UINT64_MAX - r, UINT64_MAX - (w - 1), UINT64_MAX);
}

/* What a call prints on stderr, caught in a file, so that expected refusals
 * neither clutter the log nor go unchecked: catch_stderr() before the call,
 * released_stderr() after it returns the text (caller frees). */
typedef struct {
    FILE *tmp;
    int saved;
} caught;

static caught catch_stderr(void)
{
    caught c = { tmpfile(), dup(fileno(stderr)) };
    if (!c.tmp || c.saved < 0) {
        fprintf(stderr, "test_collectives: cannot catch stderr\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fflush(stderr);
    dup2(fileno(c.tmp), fileno(stderr));
    return c;
}

static char *released_stderr(caught c)
{
    fflush(stderr);
    dup2(c.saved, fileno(stderr));
    close(c.saved);
    long len = ftell(c.tmp);
    char *text = alloc((size_t)(len > 0 ? len : 0) + 1, 1);
    rewind(c.tmp);
    text[fread(text, 1, (size_t)(len > 0 ? len : 0), c.tmp)] = 0;
    fclose(c.tmp);
    return text;
}

/* A refusal: status `want`, and `message` printed (frees text). */
static void expect_refusal(suite *t, const char *what, fsdp_status s, char *text,
                           fsdp_status want, const char *message)
{
    t->checks++;
    if (s != want || !strstr(text, message)) {
        fprintf(stderr, "FAIL %s %s rank %d: got \"%s\" printing \"%s\", want \"%s\" "
                "printing \"...%s...\"\n", t->label, what, t->b->rank, fsdp_status_str(s),
                text, fsdp_status_str(want), message);
        t->failures++;
    }
    free(text);
}

/* Calls every rank refuses before talking to the others, so that no rank is
 * left waiting in a collective. */
static void check_refusals(suite *t)
{
    fsdp_coll *b = t->b;
    float x = 0;
    caught c = catch_stderr();
    fsdp_status s = fsdp_ctl_broadcast(t->h, &x, sizeof x, t->h->world);
    expect_refusal(t, "broadcast from root == world", s, released_stderr(c), FSDP_ERR_COMM,
                   "broadcast root");

    /* shard starts one float into full: overlapping, yet not this rank's part. */
    float *buf = mem_alloc(t, 2 * (size_t)b->world + 1, sizeof(float));
    c = catch_stderr();
    s = fsdp_coll_all_gather(b, buf + 1, buf, 2);
    expect_refusal(t, "all_gather with overlapping buffers", s, released_stderr(c),
                   FSDP_ERR_UNSUPPORTED, "overlaps");
    mem_free(t, buf);
}

static void check_size(suite *t, size_t n)
{
    for (int in_place = 0; in_place <= 1; in_place++) {
        check_all_gather(t, n, in_place);
        check_reduce_scatter(t, n, in_place);
    }
    check_all_reduce(t, n);
    check_broadcast(t, n);
    check_sum_f64(t, n);
    check_max_u64(t, n);
    if (t->b->rank == 0)
        printf("%-22s world=%d size=%-8zu all_gather, reduce_scatter (each also in place), "
               "all_reduce, broadcast, sum_f64, max_u64\n", t->label, t->b->world, n);
}

#ifdef FSDP_TEST_DEVICE
/* The collective must read what the compute stream (the legacy default
 * stream) wrote just before the call, and that stream must read its result:
 * the input arrives by an asynchronous copy queued behind slow memsets, and
 * the collective is called at once, without synchronising. */
static void check_stream_order(suite *t)
{
    fsdp_coll *b = t->b;
    size_t n = ((size_t)1 << 20) + 3, w = (size_t)b->world, slow_bytes = (size_t)256 << 20;
    void *slow = mem_alloc(t, slow_bytes, 1);
    float *pinned = NULL, *nans = nan_floats(w * n);
    cuda_must(cudaMallocHost((void **)&pinned, w * n * sizeof(float)), "cudaMallocHost");

    gather_bufs g = gather_setup(t, n, 0);
    for (size_t i = 0; i < n; i++)
        pinned[i] = val(b->rank, i);
    mem_copy(t, g.shard, nans, n * sizeof(float));
    for (int i = 0; i < 8; i++)
        cuda_must(cudaMemsetAsync(slow, i, slow_bytes, cudaStreamLegacy), "cudaMemsetAsync");
    cuda_must(cudaMemcpyAsync(g.shard, pinned, n * sizeof(float), cudaMemcpyHostToDevice,
                              cudaStreamLegacy), "cudaMemcpyAsync");
    must(t, do_all_gather(t, g.shard, g.full, n), "all_gather after async input", n);
    gather_check(t, &g, "all_gather after async input", n, 0);

    scatter_bufs r = scatter_setup(t, n, 0);
    memcpy(pinned, r.want_full, w * n * sizeof(float));
    mem_copy(t, r.full, nans, w * n * sizeof(float));
    for (int i = 0; i < 8; i++)
        cuda_must(cudaMemsetAsync(slow, i, slow_bytes, cudaStreamLegacy), "cudaMemsetAsync");
    cuda_must(cudaMemcpyAsync(r.full, pinned, w * n * sizeof(float), cudaMemcpyHostToDevice,
                              cudaStreamLegacy), "cudaMemcpyAsync");
    must(t, do_reduce_scatter(t, r.full, r.shard, n), "reduce_scatter after async input", n);
    scatter_check(t, &r, "reduce_scatter after async input", n, 0);

    cuda_must(cudaFreeHost(pinned), "cudaFreeHost");
    mem_free(t, slow);
    free(nans);
}

#endif

/* Several collectives in flight, waited for in order; the ticket ring used
 * round and round; more outstanding than the ring holds; unknown tickets. */
static void check_tickets(suite *t)
{
    fsdp_coll *b = t->b;
    size_t n = 1007;
    gather_bufs g[3];
    scatter_bufs r[2];
    int tk[5], distinct = 1;
    for (int i = 0; i < 3; i++)
        g[i] = gather_setup(t, n + i, i == 1);
    for (int i = 0; i < 2; i++)
        r[i] = scatter_setup(t, n + i, i == 1);
    for (int i = 0; i < 3; i++)
        must(t, fsdp_coll_all_gather_start(b, g[i].shard, g[i].full, n + i, &tk[i]), "all_gather_start", n + i);
    for (int i = 0; i < 2; i++)
        must(t, fsdp_coll_reduce_scatter_start(b, r[i].full, r[i].shard, n + i, &tk[3 + i]),
             "reduce_scatter_start", n + i);
    for (int i = 0; i < 5; i++) {
        must(t, fsdp_coll_wait(b, tk[i]), "wait", n);
        distinct &= i == 0 || tk[i] != tk[i - 1];
    }
    for (int i = 0; i < 3; i++)
        gather_check(t, &g[i], "all_gather_start, 5 in flight", n + i, i == 1);
    for (int i = 0; i < 2; i++)
        scatter_check(t, &r[i], "reduce_scatter_start, 5 in flight", n + i, i == 1);
    t->checks++;
    if (!distinct) {
        fprintf(stderr, "FAIL %s rank %d: tickets in flight are not distinct: %d %d %d %d %d\n",
                t->label, b->rank, tk[0], tk[1], tk[2], tk[3], tk[4]);
        t->failures++;
    }

    /* Round the ring a few times, then fill it until a start is refused. */
    gather_bufs ring = gather_setup(t, 3, 0);
    int ticket = -1, held[64], started = 0;
    for (int i = 0; i < 100; i++) {
        must(t, fsdp_coll_all_gather_start(b, ring.shard, ring.full, 3, &ticket), "all_gather_start", 3);
        must(t, fsdp_coll_wait(b, ticket), "wait", 3);
    }
    /* Each outstanding start into buffers of its own: MPI forbids two
     * pending receives into the same memory. */
    fsdp_status s = FSDP_OK;
    char *text = NULL;
    gather_bufs outstanding[64];
    while (s == FSDP_OK && started < 64) {
        outstanding[started] = gather_setup(t, 3, 0);
        caught c = catch_stderr();
        s = fsdp_coll_all_gather_start(b, outstanding[started].shard, outstanding[started].full, 3, &held[started]);
        free(text);
        text = released_stderr(c);
        if (s != FSDP_OK) gather_free(t, &outstanding[started], 0);
        started += s == FSDP_OK;
    }
    expect_refusal(t, "one start more than the ticket ring holds", s, text,
                   FSDP_ERR_UNSUPPORTED, "not yet waited for");
    for (int i = 0; i < started; i++) {
        must(t, fsdp_coll_wait(b, held[i]), "wait", 3);
        gather_check(t, &outstanding[i], "all_gather_start, the ring full", 3, 0);
    }
    must(t, fsdp_coll_all_gather_start(b, ring.shard, ring.full, 3, &ticket), "all_gather_start after the ring emptied",
         3);
    must(t, fsdp_coll_wait(b, ticket), "wait", 3);
    gather_check(t, &ring, "all_gather_start round the ring", 3, 0);
    if (b->rank == 0)
        printf("%-22s world=%d 5 collectives in flight, 100 start/wait, ring of %d outstanding\n",
               t->label, b->world, started);

    caught c = catch_stderr();
    s = fsdp_coll_wait(b, -1);
    expect_refusal(t, "wait for ticket -1", s, released_stderr(c), FSDP_ERR_UNSUPPORTED,
                   "never issued");
    c = catch_stderr();
    s = fsdp_coll_wait(b, ticket + 1000);
    expect_refusal(t, "wait for a ticket not yet issued", s, released_stderr(c),
                   FSDP_ERR_UNSUPPORTED, "never issued");
}

#ifndef FSDP_TEST_DEVICE   /* node memory: the host backend's (run_node_suite) */
/* Node memory (shard_node_shared=1): a region every rank maps, the
 * others' writes seen after node_sync, in every rank's slot. */
/* Node memory: each rank's slot of its machine (its place there), written
 * by it and read back by every rank of the machine after a node_sync. */
static void check_node(suite *t)
{
    fsdp_coll *b = t->b;
    fsdp_node_layout at = fsdp_coll_node_layout(b);
    size_t stride = ((size_t)1 << 20) + 5;
    float *slots = NULL;
    t->checks++;
    if (fsdp_coll_node_alloc(b, stride * (size_t)at.ranks, &slots) != FSDP_OK || !slots) {
        mismatch(t, "node_alloc", stride * (size_t)at.ranks, 0, 0, 1);
        return;
    }
    float *mine = slots + (size_t)at.rank * stride;
    for (size_t j = 0; j < stride; j++) mine[j] = (float)b->rank + 0.5f;
    must(t, fsdp_coll_node_sync(b), "node_sync", stride);
    /* Slot p holds the rank at place p of this machine. */
    for (int q = 0; q < b->world; q++) {
        if (t->host_of[q] != t->host_of[b->rank]) continue;
        const float *theirs = slots + (size_t)t->place[q] * stride;
        float want = (float)q + 0.5f;
        t->checks++;
        if (theirs[0] != want || theirs[stride - 1] != want) mismatch(t, "node_sync (a rank's writes)", stride, 0, theirs[0], want);
    }
}

static float peer_val(int from, int block, size_t j) { return (float)(1000 * from + 10 * block) + (float)(j % 7); }

/* Several machines: the layout (equal machines, a rank's peers hold its
 * place on each, in machine order) and the peer exchanges, chunked too. */
static void check_peers(suite *t, size_t count, size_t shard)
{
    fsdp_coll *b = t->b;
    fsdp_node_layout at = fsdp_coll_node_layout(b);
    int m = at.machines, me = t->host_of[b->rank];
    t->checks++;
    if (m != t->machines || at.ranks * m != b->world || at.peers[me] != b->rank) {
        fprintf(stderr, "FAIL %s layout rank %d: %d machines of %d, peer on its own %d\n", t->label, b->rank, m,
                at.ranks, at.peers[me]);
        t->failures++;
        return;
    }
    for (int q = 0; q < b->world; q++) {
        t->checks++;
        if (at.ranks_at[(size_t)t->host_of[q] * at.ranks + t->place[q]] != q) {
            fprintf(stderr, "FAIL %s rank %d: ranks_at misplaces rank %d\n", t->label, b->rank, q);
            t->failures++;
        }
    }
    for (int k = 0; k < m; k++) {
        t->checks++;
        if (t->host_of[at.peers[k]] != k || t->place[at.peers[k]] != at.rank) {
            fprintf(stderr, "FAIL %s rank %d: peer %d is rank %d, on machine %d at place %d\n", t->label, b->rank,
                    k, at.peers[k], t->host_of[at.peers[k]], t->place[at.peers[k]]);
            t->failures++;
        }
    }
    float *send = alloc((size_t)m * count, sizeof(float)), *recv = alloc((size_t)m * count, sizeof(float));
    float *want = alloc((size_t)m * count, sizeof(float));
    for (int k = 0; k < m; k++)
        for (size_t j = 0; j < count; j++) {
            send[(size_t)k * count + j] = peer_val(b->rank, k, j);
            recv[(size_t)k * count + j] = NAN;
            want[(size_t)k * count + j] = peer_val(at.peers[k], me, j);
        }
    must(t, fsdp_coll_peer_all_to_all(b, send, recv, count), "peer_all_to_all", count);
    expect_floats(t, "peer_all_to_all", count, recv, want, (size_t)m * count);
    /* In node memory: every rank's part lands on every machine. */
    float *full = NULL;
    must(t, fsdp_coll_node_alloc(b, shard * (size_t)b->world, &full), "node_alloc", shard);
    for (size_t j = 0; j < shard; j++) full[(size_t)b->rank * shard + j] = val(b->rank, j);
    must(t, fsdp_coll_peer_all_gather(b, full, shard), "peer_all_gather", shard);
    must(t, fsdp_coll_node_sync(b), "node_sync", shard);
    float *all = alloc(shard * (size_t)b->world, sizeof(float));
    for (size_t j = 0; j < shard * (size_t)b->world; j++) all[j] = val((int)(j / shard), j % shard);
    expect_floats(t, "peer_all_gather", shard, full, all, shard * (size_t)b->world);
    /* Started: complete once waited for, with an exchange in between
     * (every rank of the machine done reading before its part changes). */
    must(t, fsdp_coll_node_sync(b), "node_sync", shard);
    for (size_t j = 0; j < shard * (size_t)b->world; j++) all[j] = -all[j];
    for (size_t j = 0; j < shard; j++) full[(size_t)b->rank * shard + j] = -val(b->rank, j);
    must(t, fsdp_coll_node_sync(b), "node_sync", shard);
    int ticket;
    must(t, fsdp_coll_peer_all_gather_start(b, full, shard, &ticket), "peer_all_gather_start", shard);
    must(t, fsdp_coll_peer_all_to_all(b, send, recv, count), "peer_all_to_all", count);
    must(t, fsdp_coll_wait(b, ticket), "wait (peer_all_gather_start)", shard);
    must(t, fsdp_coll_node_sync(b), "node_sync", shard);
    expect_floats(t, "peer_all_gather_start", shard, full, all, shard * (size_t)b->world);
    expect_floats(t, "peer_all_to_all (beside a started gather)", count, recv, want, (size_t)m * count);
    free(send);
    free(recv);
    free(want);
    free(all);
}
#endif

static int run_suite(fsdp_ctl *h, fsdp_coll *b, const char *label, int async, const size_t *sizes,
                     size_t count)
{
    suite t = { .h = h, .b = b, .async = async };
    snprintf(t.label, sizeof t.label, "%s", label);
    for (size_t i = 0; i < count; i++)
        check_size(&t, sizes[i]);
    check_min_max_all(&t);
    check_refusals(&t);
#ifdef FSDP_TEST_DEVICE
    if (b->mem == FSDP_MEM_DEVICE)
        check_stream_order(&t);
#endif
    if (async)
        check_tickets(&t);
    if (b->rank == 0)
        printf("%-22s world=%d min_max_u64 (equal, small, near 2^64), refusals; %d checks\n",
               t.label, b->world, t.checks);
    return t.failures;
}

/* A backend's rank, world and name (its host control's or its buffer
 * collectives') are MPI_COMM_WORLD's and the expected. */
static int check_identity(const char *got, int got_rank, int got_world, const char *name)
{
    int rank = -1, world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (got_rank == rank && got_world == world && strcmp(got, name) == 0)
        return 0;
    fprintf(stderr, "FAIL %s create: rank %d world %d name %s, MPI says %d of %d\n", name,
            got_rank, got_world, got, rank, world);
    return 1;
}

#define CHECK_IDENTITY(x, want) check_identity((x)->name, (x)->rank, (x)->world, want)

static int report(int failures, int world)
{
    int total = 0, rank = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("test_collectives: world=%d: %s (%d failures over all ranks)\n", world,
               total ? "FAILED" : "passed", total);
    MPI_Finalize();
    return failures ? 1 : 0;
}

#ifndef FSDP_TEST_DEVICE
/* Node memory's checks where the backend offers it: per machine, and on
 * several machines the exchanges between peers. */
static int run_node_suite(fsdp_ctl *h, fsdp_coll *b, int machines, const int *host_of, const int *place)
{
    suite t = { .h = h, .b = b, .machines = machines, .host_of = host_of, .place = place };
    snprintf(t.label, sizeof t.label, "mpi node memory");
    check_node(&t);
    if (machines > 1) {
        check_peers(&t, 3000, 2500);
        fsdp_backend_mpi_set_chunk_limit(b, 1000);
        snprintf(t.label, sizeof t.label, "mpi peers chunk<=1000");
        check_peers(&t, 3000, 2500);
        fsdp_backend_mpi_set_chunk_limit(b, INT_MAX);
    }
    if (b->rank == 0)
        printf("%-22s world=%d, %d machines: node_alloc, node_sync%s; %d checks\n", t.label, b->world, machines,
               machines > 1 ? ", peer_all_to_all, peer_all_gather" : "", t.checks);
    return t.failures;
}

static int run_mpi_suites(int *checked_world)
{
    fsdp_ctl *h = NULL;
    fsdp_coll *b = NULL;
    if (fsdp_backend_mpi_create(&h, &b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int failures = CHECK_IDENTITY(b, "mpi") + CHECK_IDENTITY(h, "mpi");
    *checked_world = b->world;
    /* Machines as host control tells them (tests/test_machines.sh runs this
     * on two): the shared-memory path where every rank shares one, unless
     * FSDP_SHM=0 asks for the point-to-point path; node memory there, and on
     * several machines running as many ranks each. */
    int world = b->world, *leader = alloc((size_t)world, sizeof(int)), *host_of = alloc((size_t)world, sizeof(int));
    int *place = alloc((size_t)world, sizeof(int)), *size = alloc((size_t)world, sizeof(int));
    if (fsdp_ctl_host_leaders(h, leader) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int machines = fsdp_hosts_number(world, leader, host_of), equal = 1;
    memset(size, 0, (size_t)world * sizeof(int));
    for (int q = 0; q < world; q++) place[q] = size[host_of[q]]++;
    for (int k = 1; k < machines; k++) equal &= size[k] == size[0];
    const char *shm = getenv("FSDP_SHM");
    int want_shm = world > 1 && !(shm && !strcmp(shm, "0"));
    int want_path = want_shm && machines == 1, want_node = want_shm && equal;
    if (fsdp_backend_mpi_shared_memory(b) != want_path) {
        fprintf(stderr, "FAIL mpi: shared-memory path %s, expected %s\n",
                fsdp_backend_mpi_shared_memory(b) ? "on" : "off", want_path ? "on" : "off");
        failures++;
    }
    failures += run_suite(h, b, "mpi", 0, plain_sizes, COUNT(plain_sizes));
    if (fsdp_coll_maps_node(b) != want_node) {
        fprintf(stderr, "FAIL mpi: node memory %s, expected %s\n", fsdp_coll_maps_node(b) ? "offered" : "not offered",
                want_node ? "offered" : "not");
        failures++;
    } else if (want_node) {
        failures += run_node_suite(h, b, machines, host_of, place);
    }
    free(leader);
    free(host_of);
    free(place);
    free(size);
    failures += run_suite(h, b, "mpi started", 1, plain_sizes, COUNT(plain_sizes));
    fsdp_backend_mpi_set_chunk_limit(b, 1000);
    failures += run_suite(h, b, "mpi chunk<=1000", 0, chunk_sizes, COUNT(chunk_sizes));
    failures += run_suite(h, b, "mpi started chunk<=1000", 1, chunk_sizes, COUNT(chunk_sizes));
    fsdp_backend_mpi_set_chunk_limit(b, 0); /* clamps to 1 */
    failures += run_suite(h, b, "mpi chunk<=1", 0, tiny_sizes, COUNT(tiny_sizes));
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    return failures;
}

static int run_self_suite(void)
{
    fsdp_ctl *h = NULL;
    fsdp_coll *b = NULL;
    if (fsdp_backend_self_create(&h, &b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    fsdp_backend_mpi_set_chunk_limit(b, 1000); /* must leave other backends alone */
    int failures = run_suite(h, b, "self", 0, plain_sizes, COUNT(plain_sizes));
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    return failures;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world = 0;
    int failures = run_mpi_suites(&world);
    if (world == 1)
        failures += run_self_suite();
    return report(failures, world);
}

#else /* FSDP_TEST_DEVICE: test_collectives_gpu */

/* The MPI backend staged through host memory, every rank on GPU 0 (and, on
 * one rank, the self backend staged the same way); host control is the
 * host backend's. */
static int run_staged_suites(int world)
{
    cuda_must(cudaSetDevice(0), "cudaSetDevice(0)");
    fsdp_ctl *h = NULL;
    fsdp_coll *host = NULL, *b = NULL;
    if (fsdp_backend_mpi_create(&h, &host) != FSDP_OK || fsdp_backend_staged_create(host, &b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int failures = CHECK_IDENTITY(b, "mpi-staged");
    if (b->mem != FSDP_MEM_DEVICE || b->iface.all_gather_start || b->iface.reduce_scatter_start || b->iface.wait) {
        fprintf(stderr, "FAIL mpi-staged create: want device memory and no start/wait\n");
        failures++;
    }
    failures += run_suite(h, b, "mpi-staged", 0, plain_sizes, COUNT(plain_sizes));
    fsdp_backend_staged_set_stage_limit(b, 1000);
    failures += run_suite(h, b, "mpi-staged stage<=1000", 0, chunk_sizes, COUNT(chunk_sizes));
    fsdp_backend_staged_set_stage_limit(b, 0); /* clamps to one float per rank */
    failures += run_suite(h, b, "mpi-staged stage<=world", 0, tiny_sizes, COUNT(tiny_sizes));
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    if (world == 1) {
        if (fsdp_backend_self_create(&h, &host) != FSDP_OK || fsdp_backend_staged_create(host, &b) != FSDP_OK)
            MPI_Abort(MPI_COMM_WORLD, 2);
        failures += run_suite(h, b, "self-staged", 0, plain_sizes, COUNT(plain_sizes));
        fsdp_coll_free(b);
        fsdp_ctl_free(h);
    }
    return failures;
}

/* NCCL, one GPU per rank: only when there are as many GPUs as ranks (NCCL
 * refuses two ranks on one GPU). */
static int run_nccl_suites(int world, int gpus)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (gpus < world) {
        if (rank == 0)
            printf("%-22s world=%d skipped: needs %d GPUs, found %d\n", "nccl", world, world, gpus);
        return 0;
    }
    cuda_must(cudaSetDevice(rank), "cudaSetDevice");
    fsdp_ctl *h = NULL;
    fsdp_coll *b = NULL;
    if (fsdp_backend_mpi_create(&h, NULL) != FSDP_OK || fsdp_backend_nccl_create(h, rank, &b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int failures = CHECK_IDENTITY(b, "nccl");
    if (b->mem != FSDP_MEM_DEVICE || !b->iface.all_gather_start || !b->iface.reduce_scatter_start ||
        !b->iface.wait) {
        fprintf(stderr, "FAIL nccl create: want device memory and start/wait\n");
        failures++;
    }
    failures += run_suite(h, b, "nccl", 0, plain_sizes, COUNT(plain_sizes));
    failures += run_suite(h, b, "nccl start/wait", 1, plain_sizes, COUNT(plain_sizes));
    fsdp_coll_free(b);
    fsdp_ctl_free(h);
    return failures;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int gpus = gpu_count(rank == 0);
    if (!gpus) {
        MPI_Finalize();
        return GPU_TEST_SKIP;
    }
    int failures = run_staged_suites(world);
    failures += run_nccl_suites(world, gpus);
    return report(failures, world);
}
#endif
