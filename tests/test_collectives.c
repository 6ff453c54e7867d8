/* test_collectives: every collective of the MPI backend (and, on one rank, of
 * the self backend) against results each rank computes alone, in the spirit
 * of nccl-tests.  Values are small integers, so sums over ranks are exact in
 * float and any difference is a bug, never rounding.  Outputs start as NaN
 * so that an element a collective forgot to write shows up too.
 *
 * Run under mpirun on 1 to 4 ranks.  A mismatch prints the collective, size
 * and first bad index and the run goes on (every rank still issues the same
 * collectives); the exit status is non-zero if any rank saw one. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "fsdp_backend.h"

typedef struct {
    fsdp_backend *b;
    char label[48];
    int checks;
    int failures;
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

static void check_all_gather(suite *t, size_t n, int in_place)
{
    fsdp_backend *b = t->b;
    size_t full_n = (size_t)b->world * n;
    float *full = nan_floats(full_n), *want = alloc(full_n, sizeof(float));
    float *shard = in_place ? full + (size_t)b->rank * n : alloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        shard[i] = val(b->rank, i);
    for (size_t j = 0; j < full_n; j++)
        want[j] = val((int)(j / n), j % n);
    const char *coll = in_place ? "all_gather in place" : "all_gather";
    must(t, b->all_gather(b, shard, full, n), coll, n);
    expect_floats(t, coll, n, full, want, full_n);
    if (!in_place)
        free(shard);
    free(full);
    free(want);
}

static void check_reduce_scatter(suite *t, size_t n, int in_place)
{
    fsdp_backend *b = t->b;
    size_t full_n = (size_t)b->world * n, mine = (size_t)b->rank * n;
    float *full = alloc(full_n, sizeof(float)), *want_full = alloc(full_n, sizeof(float));
    float *want = alloc(n, sizeof(float));
    float *shard = in_place ? full + mine : nan_floats(n);
    for (size_t j = 0; j < full_n; j++)
        full[j] = want_full[j] = val(b->rank, j);
    for (size_t i = 0; i < n; i++)
        want[i] = val_sum(b->world, mine + i);
    if (in_place)
        memcpy(want_full + mine, want, n * sizeof(float));
    const char *coll = in_place ? "reduce_scatter in place" : "reduce_scatter";
    must(t, b->reduce_scatter(b, full, shard, n), coll, n);
    expect_floats(t, coll, n, shard, want, n);
    /* The input is const: other ranks' parts must survive. */
    expect_floats(t, in_place ? "reduce_scatter in place (input)" : "reduce_scatter (input)",
                  n, full, want_full, full_n);
    if (!in_place)
        free(shard);
    free(full);
    free(want_full);
    free(want);
}

static void check_all_reduce(suite *t, size_t n)
{
    fsdp_backend *b = t->b;
    float *buf = alloc(n, sizeof(float)), *want = alloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) {
        buf[i] = val(b->rank, i);
        want[i] = val_sum(b->world, i);
    }
    must(t, b->all_reduce(b, buf, n), "all_reduce", n);
    expect_floats(t, "all_reduce", n, buf, want, n);
    free(buf);
    free(want);
}

static void check_broadcast(suite *t, size_t bytes)
{
    fsdp_backend *b = t->b;
    unsigned char *buf = alloc(bytes, 1);
    for (int root = 0; root < b->world; root++) {
        for (size_t i = 0; i < bytes; i++)
            buf[i] = b->rank == root ? byte_val(root, i) : 0;
        must(t, b->broadcast(b, buf, bytes, root), "broadcast", bytes);
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
    fsdp_backend *b = t->b;
    double *v = alloc(n, sizeof(double));
    double w = b->world;
    for (size_t i = 0; i < n; i++)
        v[i] = b->rank + 0.5 * (double)i;
    must(t, b->sum_f64(b, v, n), "sum_f64", n);
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

static void check_min_max(suite *t, const char *what, uint64_t v, uint64_t want_min,
                          uint64_t want_max)
{
    uint64_t lo = 0, hi = 0;
    must(t, t->b->min_max_u64(t->b, v, &lo, &hi), "min_max_u64", 1);
    t->checks++;
    if (lo != want_min || hi != want_max) {
        fprintf(stderr, "FAIL %s min_max_u64 (%s) rank %d: got [%llu, %llu], want [%llu, %llu]\n",
                t->label, what, t->b->rank, (unsigned long long)lo, (unsigned long long)hi,
                (unsigned long long)want_min, (unsigned long long)want_max);
        t->failures++;
    }
}

static void check_min_max_all(suite *t)
{
    uint64_t r = (uint64_t)t->b->rank, w = (uint64_t)t->b->world;
    check_min_max(t, "equal", 0x5eedcafef00dULL, 0x5eedcafef00dULL, 0x5eedcafef00dULL);
    check_min_max(t, "small", 1000 + r * r, 1000, 1000 + (w - 1) * (w - 1));
    /* Near 2^64: a signed or double reduction would get these wrong. */
    check_min_max(t, "large", UINT64_MAX - r, UINT64_MAX - (w - 1), UINT64_MAX);
}

/* Runs call(t) with stderr caught in a file and returns what it printed
 * (caller frees), so expected refusals neither clutter the log nor go
 * unchecked. */
static char *caught_stderr(suite *t, fsdp_status (*call)(fsdp_backend *b), fsdp_status *s)
{
    FILE *tmp = tmpfile();
    int saved = dup(fileno(stderr));
    if (!tmp || saved < 0) {
        fprintf(stderr, "test_collectives: cannot catch stderr\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fflush(stderr);
    dup2(fileno(tmp), fileno(stderr));
    *s = call(t->b);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    long len = ftell(tmp);
    char *text = alloc((size_t)(len > 0 ? len : 0) + 1, 1);
    rewind(tmp);
    text[fread(text, 1, (size_t)(len > 0 ? len : 0), tmp)] = 0;
    fclose(tmp);
    return text;
}

static fsdp_status broadcast_bad_root(fsdp_backend *b)
{
    float x = 0;
    return b->broadcast(b, &x, sizeof x, b->world);
}

/* shard starts one float into full: overlapping, yet not this rank's part. */
static fsdp_status gather_overlapping(fsdp_backend *b)
{
    float *buf = nan_floats(2 * (size_t)b->world + 1);
    fsdp_status s = b->all_gather(b, buf + 1, buf, 2);
    free(buf);
    return s;
}

/* Calls every rank refuses before talking to the others, so that no rank is
 * left waiting in a collective. */
static void check_refusal(suite *t, const char *what, fsdp_status (*call)(fsdp_backend *b),
                          fsdp_status want, const char *message)
{
    fsdp_status s;
    char *text = caught_stderr(t, call, &s);
    t->checks++;
    if (s != want || !strstr(text, message)) {
        fprintf(stderr, "FAIL %s %s rank %d: got \"%s\" printing \"%s\", want \"%s\" "
                "printing \"...%s...\"\n", t->label, what, t->b->rank, fsdp_status_str(s),
                text, fsdp_status_str(want), message);
        t->failures++;
    }
    free(text);
}

static void check_refusals(suite *t)
{
    check_refusal(t, "broadcast from root == world", broadcast_bad_root, FSDP_ERR_COMM,
                  "broadcast root");
    check_refusal(t, "all_gather with overlapping buffers", gather_overlapping,
                  FSDP_ERR_UNSUPPORTED, "overlaps");
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
    if (t->b->rank == 0)
        printf("%-22s world=%d size=%-8zu all_gather, reduce_scatter (each also in place), "
               "all_reduce, broadcast, sum_f64\n", t->label, t->b->world, n);
}

static int run_suite(fsdp_backend *b, const char *label, const size_t *sizes, size_t count)
{
    suite t = { .b = b };
    snprintf(t.label, sizeof t.label, "%s", label);
    for (size_t i = 0; i < count; i++)
        check_size(&t, sizes[i]);
    check_min_max_all(&t);
    check_refusals(&t);
    if (b->rank == 0)
        printf("%-22s world=%d min_max_u64 (equal, small, near 2^64), refusals; %d checks\n",
               t.label, b->world, t.checks);
    return t.failures;
}

static int run_mpi_suites(int *checked_world)
{
    fsdp_backend *b = NULL;
    if (fsdp_backend_mpi_create(&b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int rank = -1, world = 0, failures = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (b->rank != rank || b->world != world || strcmp(b->name, "mpi") != 0) {
        fprintf(stderr, "FAIL mpi create: rank %d world %d, MPI says %d of %d\n", b->rank,
                b->world, rank, world);
        failures++;
    }
    *checked_world = b->world;
    failures += run_suite(b, "mpi", plain_sizes, COUNT(plain_sizes));
    fsdp_backend_mpi_set_chunk_limit(b, 1000);
    failures += run_suite(b, "mpi chunk<=1000", chunk_sizes, COUNT(chunk_sizes));
    fsdp_backend_mpi_set_chunk_limit(b, 0); /* clamps to 1 */
    failures += run_suite(b, "mpi chunk<=1", tiny_sizes, COUNT(tiny_sizes));
    b->destroy(b);
    return failures;
}

static int run_self_suite(void)
{
    fsdp_backend *b = NULL;
    if (fsdp_backend_self_create(&b) != FSDP_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    fsdp_backend_mpi_set_chunk_limit(b, 1000); /* must leave other backends alone */
    int failures = run_suite(b, "self", plain_sizes, COUNT(plain_sizes));
    b->destroy(b);
    return failures;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world = 0;
    int failures = run_mpi_suites(&world);
    if (world == 1)
        failures += run_self_suite();
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("test_collectives: world=%d: %s (%d failures over all ranks)\n", world,
               total ? "FAILED" : "passed", total);
    MPI_Finalize();
    return failures ? 1 : 0;
}
