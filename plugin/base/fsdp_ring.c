/* The flight recorder (fsdp_ring.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_ring.h"

/* An entry's line: seq|what|bytes|start|end|state|where, fixed widths, so
 * that its end is written in place and a reader needs no index. */
#define FMT_ENTRY "%10llu|%-48.48s|%14llu|%17.6f|%17s|%-6s|%-72.72s"
#define OFF_END (10 + 1 + 48 + 1 + 14 + 1 + 17 + 1)   /* where the end's field starts */

static struct {
    char *mem;        /* FSDP_RING_BYTES: the header line, then the entries */
    int mapped;
    char *path, *stem;
    uint64_t seq;     /* collectives recorded */
    int rank, world;
    size_t beat_off;  /* where the header's beat is written */
} R;

double fsdp_ring_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* TEXT into LINE, space-padded to the line's width and ended by '\n'. */
static void put(char *line, const char *text)
{
    size_t k = strlen(text);
    if (k > FSDP_RING_LINE - 1) k = FSDP_RING_LINE - 1;
    memcpy(line, text, k);
    memset(line + k, ' ', FSDP_RING_LINE - 1 - k);
    line[FSDP_RING_LINE - 1] = '\n';
}

static fsdp_status map_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fsdp_fail(FSDP_ERR_IO, "%s: cannot write the flight recorder's ring", path);
    int ok = ftruncate(fd, FSDP_RING_BYTES) == 0;
    void *m = ok ? mmap(NULL, FSDP_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return fsdp_fail(FSDP_ERR_IO, "%s: cannot map the flight recorder's ring", path);
    }
    R.mem = m;
    R.mapped = 1;
    R.path = strdup(path);
    return R.path ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
}

fsdp_status fsdp_ring_open(const char *stem, int rank, int world)
{
    fsdp_ring_close(0);
    R.rank = rank;
    R.world = world;
    char path[4096];
    if (stem && snprintf(path, sizeof path, "%s.ring.%d", stem, rank) >= (int)sizeof path)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: too long a path for the flight recorder's ring", stem);
    if (stem && !(R.stem = strdup(stem))) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (stem) FSDP_TRY(map_file(path));
    else if (!(R.mem = malloc(FSDP_RING_BYTES))) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    char host[65] = "";
    gethostname(host, sizeof host - 1);
    char head[FSDP_RING_LINE];
    int n = snprintf(head, sizeof head, "fsdp-ring 1 rank %d world %d pid %d host %.64s beat ", rank, world,
                     (int)getpid(), host[0] ? host : "?");
    R.beat_off = (size_t)n;
    put(R.mem, head);
    for (int k = 1; k <= FSDP_RING_ENTRIES; ++k) put(R.mem + (size_t)k * FSDP_RING_LINE, "");
    fsdp_ring_beat();
    return FSDP_OK;
}

void fsdp_ring_beat(void)
{
    if (!R.mem) return;
    char t[24];
    snprintf(t, sizeof t, "%17.6f", fsdp_ring_now());
    memcpy(R.mem + R.beat_off, t, 17);
}

static char *slot_line(int slot) { return R.mem + (size_t)(slot + 1) * FSDP_RING_LINE; }

int fsdp_ring_begin(const char *what, uint64_t bytes, const char *where)
{
    if (!R.mem) return -1;
    int slot = (int)(R.seq++ % FSDP_RING_ENTRIES);
    char line[FSDP_RING_LINE + 64];
    snprintf(line, sizeof line, FMT_ENTRY, (unsigned long long)R.seq, what, (unsigned long long)bytes,
             fsdp_ring_now(), "-", "open", where ? where : "");
    put(slot_line(slot), line);
    return slot;
}

void fsdp_ring_end(int slot, int ok)
{
    if (!R.mem || slot < 0) return;
    char field[32];
    snprintf(field, sizeof field, "%17.6f|%-6s", fsdp_ring_now(), ok ? "done" : "failed");
    memcpy(slot_line(slot) + OFF_END, field, 17 + 1 + 6);
}

const char *fsdp_ring_path(void) { return R.path; }
const char *fsdp_ring_stem(void) { return R.stem; }
int fsdp_ring_on(void) { return R.mem != NULL; }
int fsdp_ring_world(void) { return R.world; }

static void write_all(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Signal-safe: no stdio, no allocation. */
void fsdp_ring_dump(void)
{
    if (!R.mem) return;
    char line[FSDP_RING_LINE + 64] = "fsdp: rank ";
    size_t pre = strlen(line);
    char num[12];
    int k = 0;
    for (unsigned r = (unsigned)R.rank; k == 0 || r; r /= 10) num[k++] = (char)('0' + r % 10);
    while (k) line[pre++] = num[--k];
    if (R.path) {
        const char *mid = ": its last collectives are in ";
        write_all(line, pre);
        write_all(mid, strlen(mid));
        write_all(R.path, strlen(R.path));
        write_all("\n", 1);
        return;
    }
    memcpy(line + pre, " ring: ", 7);
    pre += 7;
    uint64_t first = R.seq > FSDP_RING_ENTRIES ? R.seq - FSDP_RING_ENTRIES : 0;
    for (uint64_t s = first; s <= R.seq; ++s) {
        /* The header, then the entries oldest first. */
        const char *src = s == first ? R.mem : slot_line((int)((s - 1) % FSDP_RING_ENTRIES));
        memcpy(line + pre, src, FSDP_RING_LINE);
        write_all(line, pre + FSDP_RING_LINE);
    }
}

void fsdp_ring_close(int keep)
{
    if (R.mem && R.mapped) munmap(R.mem, FSDP_RING_BYTES);
    else free(R.mem);
    if (R.path && !keep) unlink(R.path);
    free(R.path);
    free(R.stem);
    R.mem = NULL;
    R.path = R.stem = NULL;
    R.mapped = 0;
    R.seq = 0;
}

/* Trailing spaces off. */
static void trim(char *s)
{
    size_t k = strlen(s);
    while (k > 0 && s[k - 1] == ' ') s[--k] = 0;
}

static int parse_entry(const char *line, fsdp_ring_entry *e)
{
    char text[FSDP_RING_LINE + 1], end[24];
    memcpy(text, line, FSDP_RING_LINE);
    text[FSDP_RING_LINE - 1] = 0;
    unsigned long long seq, bytes;
    if (sscanf(text, "%llu|%48[^|]|%llu|%lf|%17[^|]|%6[^|]|%72[^\n]", &seq, e->what, &bytes, &e->t0, end,
               e->state, e->where) < 6 || seq == 0)
        return 0;
    e->seq = seq;
    e->bytes = bytes;
    char *stop = NULL;
    e->t1 = strtod(end, &stop);
    if (stop == end) e->t1 = -1;
    trim(e->what);
    trim(e->state);
    trim(e->where);
    return 1;
}

fsdp_status fsdp_ring_read(const char *path, fsdp_ring_header *h, fsdp_ring_entry *out, int *n)
{
    char *buf = malloc(FSDP_RING_BYTES + 1);
    FILE *f = buf ? fopen(path, "r") : NULL;
    size_t got = f ? fread(buf, 1, FSDP_RING_BYTES, f) : 0;
    if (f) fclose(f);
    *n = 0;
    memset(h, 0, sizeof *h);
    if (buf) buf[got < FSDP_RING_LINE ? got : FSDP_RING_LINE - 1] = 0;
    if (got != FSDP_RING_BYTES ||
        sscanf(buf, "fsdp-ring 1 rank %d world %d pid %d host %64s beat %lf", &h->rank, &h->world, &h->pid, h->host,
               &h->beat) != 5) {
        free(buf);
        return fsdp_fail(FSDP_ERR_IO, "%s: not a flight recorder's ring (or not readable)", path);
    }
    for (int k = 1; k <= FSDP_RING_ENTRIES; ++k) {
        fsdp_ring_entry e = { 0 };
        if (!parse_entry(buf + (size_t)k * FSDP_RING_LINE, &e)) continue;
        int j = (*n)++;
        for (; j > 0 && out[j - 1].seq > e.seq; --j) out[j] = out[j - 1];   /* by seq */
        out[j] = e;
    }
    free(buf);
    return FSDP_OK;
}
