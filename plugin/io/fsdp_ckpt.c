#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_ckpt.h"
#include "fsdp_ckpt_check.h"
#include "fsdp_fs.h"
#include "fsdp_hash.h"
#include "fsdp_env.h"
#include "fsdp_nofollow.h"

#define CKPT_MAGIC "FSDPCKP3"
#define CKPT_MAGIC_V2 "FSDPCKP2"   /* before checksums and run identity: refused by name */
#define CKPT_MAGIC_V1 "FSDPCKP1"   /* before the layout fields */
/* A file of a checkpoint on the clock, which has no weights file beside
 * it: after the buffers, the extras (a uint64 count, then that many
 * floats): the rolling statistics of every layer with batch norm, in
 * layout order (each rank its own), and in rank 0's file the replicated
 * frozen flats whole.  Its seen is the run's, not a weights file's. */
#define CKPT_SELF 1u

/* Format 3 (docs/DESIGN.md, "Checkpoints"), host byte order:
 *   ckpt_header
 *   ckpt_flat[2 * ngroups]: per group, its trainable then its frozen flat
 *   per flat, nbuf buffers of n floats: parameters, momentum, Adam's v
 *   uint64 checksum (fsdp_hash.h) of everything before it
 * A flat's buffers hold the floats [lo, lo + n) of its whole, unpadded
 * layout (count floats; beyond count, zero padding), which does not depend
 * on the world size or the strategy: a checkpoint of N ranks resumes on M. */
typedef struct ckpt_header {
    char magic[8];
    uint32_t world, rank;
    uint64_t plan_hash;      /* the engine's plan (fsdp_engine.c): strategy and group names included */
    uint64_t seen;
    int32_t t;
    uint32_t ngroups;
    uint32_t strategy;
    uint32_t adam;
    uint32_t align;          /* the flats' tensor alignment in floats: 1 on the host, 64 on a GPU */
    uint32_t flags;          /* CKPT_SELF: carries what a weights file would (0 in files beside one) */
    uint64_t floats;         /* every float of the buffers */
    uint64_t layout_hash;    /* flats' sizes and kinds: what resuming on any world needs alike */
    uint64_t run_id;         /* the same in every shard file of a run */
    uint64_t weights_size, weights_hash;   /* the weights file saved with it */
} ckpt_header;

_Static_assert(offsetof(ckpt_header, seen) == FSDP_CKPT_SEEN_AT, "fsdp_ckpt_check.h's FSDP_CKPT_SEEN_AT");
typedef fsdp_ckpt_flat ckpt_flat;   /* count, lo, n, nbuf, pad (fsdp_ckpt_check.h) */

/* The run's identity: drawn by rank 0 at the first save, or taken from the
 * checkpoint a run resumes from. */
static uint64_t run_id;

static char *shard_path(const char *weights, int rank, int world)
{
    size_t n = strlen(weights) + 48;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.fsdp-%d-of-%d", weights, rank, world);
    return p;
}

/* This rank's part of flat f in the whole layout. */
static ckpt_flat part_of(const fsdp_engine *e, const fsdp_flat *f)
{
    fsdp_flat_part p = fsdp_flat_own_part(fsdp_engine_flat_ctx(e), f);
    ckpt_flat c = { f->lay.count, p.lo, p.n, (uint32_t)p.nbuf, 0 };
    return c;
}

static uint64_t layout_hash(fsdp_engine *e)
{
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    uint64_t head[2] = { (uint64_t)fsdp_engine_nflats(e) / 2, (uint64_t)fsdp_engine_mem(e)->align };
    fsdp_hasher_add(&h, head, sizeof head);
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        const fsdp_flat *f = fsdp_engine_flat(e, i);
        uint64_t v[3] = { f->lay.count, (uint64_t)f->lay.nt, (uint64_t)f->kind.trainable };
        fsdp_hasher_add(&h, v, sizeof v);
    }
    return fsdp_hasher_end(&h);
}

static size_t largest_own(fsdp_engine *e)
{
    size_t n = 1;
    for (int i = 0; i < fsdp_engine_nflats(e); ++i)
        if (fsdp_engine_flat(e, i)->lay.own_count > n) n = fsdp_engine_flat(e, i)->lay.own_count;
    return n;
}

static ckpt_header header_of(fsdp_engine *e, const network *net)
{
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.world = (uint32_t)fsdp_engine_ctl(e)->world;
    h.rank = (uint32_t)fsdp_engine_ctl(e)->rank;
    h.plan_hash = fsdp_engine_plan_hash(e);
    h.seen = *net->seen;
    h.t = *net->t;
    h.ngroups = (uint32_t)(fsdp_engine_nflats(e) / 2);
    h.strategy = (uint32_t)fsdp_engine_cfg(e)->strategy;
    h.adam = (uint32_t)net->adam;
    h.align = (uint32_t)fsdp_engine_mem(e)->align;
    h.layout_hash = layout_hash(e);
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        ckpt_flat c = part_of(e, fsdp_engine_flat(e, i));
        h.floats += c.n * c.nbuf;
    }
    return h;
}

static uint64_t new_run_id(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t v[3] = { (uint64_t)t.tv_sec, (uint64_t)t.tv_nsec, (uint64_t)getpid() };
    return fsdp_hash(v, sizeof v);
}

/* Rank 0 reads back the weights file it just wrote; every rank gets its
 * identity (and, at the first save, the run's), collectively. */
static fsdp_status weights_identity(fsdp_engine *e, const char *weights, uint64_t id[3])
{
    fsdp_status s = FSDP_OK;
    if (fsdp_engine_ctl(e)->rank == 0) {
        if (!run_id) run_id = new_run_id();
        s = fsdp_hash_file(weights, &id[0], &id[1]);
        id[2] = run_id;
    }
    /* Rank 0 failing must not leave the others in the broadcast. */
    FSDP_TRY(fsdp_ctl_all_ok(fsdp_engine_ctl(e), s, FSDP_ERR_IO, "could not read back the weights file it saved"));
    FSDP_TRY(fsdp_ctl_broadcast(fsdp_engine_ctl(e), id, 3 * sizeof(uint64_t), 0));
    run_id = id[2];
    return FSDP_OK;
}

/* ---- writing -------------------------------------------------------------- */

/* Where a file's bytes go: a stream (hashed on the way), or a snapshot
 * image in memory (hashed by whoever stores it, off the step). */
typedef struct ckpt_out {
    FILE *f;
    fsdp_hasher sum;
    int failed;
    unsigned char *mem;
    size_t at;
} ckpt_out;

static void out_put(ckpt_out *o, const void *p, size_t bytes)
{
    if (o->mem) {
        memcpy(o->mem + o->at, p, bytes);
        o->at += bytes;
        return;
    }
    fsdp_hasher_add(&o->sum, p, bytes);
    if (!o->failed && bytes && fwrite(p, 1, bytes, o->f) != bytes) o->failed = 1;
}

/* The layers whose rolling statistics a weights file carries: each owner
 * of a flat's tensors with batch norm (sub-layers of recurrent layers
 * included), once, in layout order.  Returns how many; *out (malloc'd)
 * lists them. */
static int bn_owners(fsdp_engine *e, layer ***out)
{
    int cap = 0, n = 0;
    layer **l = NULL;
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        const fsdp_flat *f = fsdp_engine_flat(e, i);
        for (int t = 0; t < f->lay.nt; ++t) {
            layer *o = f->lay.t[t].owner;
            if (!o->batch_normalize || !o->rolling_mean || !o->rolling_variance || o->out_c < 1) continue;
            int dup = 0;
            for (int k = n - 1; k >= 0 && !dup; --k) dup = l[k] == o;
            if (dup) continue;
            if (n == cap) {
                layer **m = realloc(l, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *m);
                if (!m) { free(l); *out = NULL; return -1; }
                l = m;
            }
            l[n++] = o;
        }
    }
    *out = l;
    return n;
}

/* Replicated frozen flats: every rank holds them whole, none a part. */
static int replicated(const fsdp_flat *f)
{
    return f->lay.nt && !f->res.own && f->res.full;
}

/* The extras' floats: rolling statistics, and the replicated frozen
 * flats (in rank 0's file); -1 out of memory. */
static int extras_sizes(fsdp_engine *e, size_t *rolling, size_t *rep)
{
    layer **l;
    int n = bn_owners(e, &l);
    if (n < 0) return -1;
    *rolling = *rep = 0;
    for (int i = 0; i < n; ++i) *rolling += 2 * (size_t)l[i]->out_c;
    free(l);
    for (int i = 0; i < fsdp_engine_nflats(e); ++i)
        if (replicated(fsdp_engine_flat(e, i))) *rep += fsdp_engine_flat(e, i)->lay.count;
    return 0;
}

/* Floats of this rank's extras; (size_t)-1 out of memory. */
static size_t extras_floats(fsdp_engine *e)
{
    size_t rolling, rep;
    if (extras_sizes(e, &rolling, &rep) != 0) return (size_t)-1;
    return rolling + (fsdp_engine_ctl(e)->rank == 0 ? rep : 0);
}

/* Copies the extras to or from host floats x (extras_floats of them):
 * out 1 from the run, 0 into it (rank 0's part: replicated, from the file
 * that has it). */
static fsdp_status extras_move(fsdp_engine *e, float *x, int out, int replicated_too)
{
    const fsdp_mem_ctx *mem = fsdp_engine_mem(e);
    layer **l;
    int n = bn_owners(e, &l);
    if (n < 0) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < n && s == FSDP_OK; ++i) {
        float *m, *v;
        size_t c = (size_t)l[i]->out_c;
        fsdp_layer_rolling(l[i], mem->device, &m, &v);
        s = out ? fsdp_mem_to_host(mem, x, m, c) : fsdp_mem_from_host(mem, m, x, c);
        if (s == FSDP_OK) s = out ? fsdp_mem_to_host(mem, x + c, v, c) : fsdp_mem_from_host(mem, v, x + c, c);
        x += 2 * c;
    }
    free(l);
    for (int i = 0; i < fsdp_engine_nflats(e) && s == FSDP_OK && replicated_too; ++i) {
        fsdp_flat *f = fsdp_engine_flat(e, i);
        if (!replicated(f)) continue;
        s = out ? fsdp_mem_to_host(mem, x, f->res.full, f->lay.count)
                : fsdp_mem_from_host(mem, f->res.full, x, f->lay.count);
        x += f->lay.count;
    }
    return s;
}

static fsdp_status write_body(fsdp_engine *e, ckpt_out *o, const ckpt_header *h, float *host)
{
    out_put(o, h, sizeof *h);
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        ckpt_flat c = part_of(e, fsdp_engine_flat(e, i));
        out_put(o, &c, sizeof c);
    }
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        fsdp_flat *f = fsdp_engine_flat(e, i);
        fsdp_flat_part p = fsdp_flat_own_part(fsdp_engine_flat_ctx(e), f);
        for (int b = 0; b < p.nbuf; ++b) {
            if (o->mem) {   /* straight into the image */
                FSDP_TRY(fsdp_mem_to_host(fsdp_engine_mem(e), (float *)(o->mem + o->at), p.buf[b], p.n));
                o->at += p.n * sizeof(float);
                continue;
            }
            FSDP_TRY(fsdp_mem_to_host(fsdp_engine_mem(e), host, p.buf[b], p.n));
            out_put(o, host, p.n * sizeof(float));
        }
    }
    if (h->flags & CKPT_SELF) {
        uint64_t k = extras_floats(e);
        out_put(o, &k, sizeof k);
        float *x = o->mem ? (float *)(o->mem + o->at) : malloc(k * sizeof(float) + 1);
        if (!x) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory writing a checkpoint");
        fsdp_status s = extras_move(e, x, 1, fsdp_engine_ctl(e)->rank == 0);
        if (o->mem) o->at += k * sizeof(float);
        else if (s == FSDP_OK) out_put(o, x, k * sizeof(float));
        if (!o->mem) free(x);
        FSDP_TRY(s);
    }
    if (o->mem) return FSDP_OK;   /* the checksum is the storer's */
    uint64_t sum = fsdp_hasher_end(&o->sum);
    if (!o->failed && fwrite(&sum, sizeof sum, 1, o->f) != 1) o->failed = 1;
    return FSDP_OK;
}

/* Writes this rank's file to path (through PATH.tmp, synced, renamed into
 * place); *bytes and *sum (when not NULL): its size and checksum. */
static fsdp_status write_file(fsdp_engine *e, const char *path, ckpt_header *h, uint64_t *bytes, uint64_t *sum)
{
    char *tmp = malloc(strlen(path) + 5);
    float *host = malloc(largest_own(e) * sizeof(float));
    fsdp_status s = FSDP_OK;
    const char *why = NULL;
    if (!tmp || !host) {
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory writing a checkpoint");
        goto out;
    }
    sprintf(tmp, "%s.tmp", path);
    ckpt_out o = { fsdp_create_nofollow(tmp), { 0 }, 0, NULL, 0 };
    if (!o.f) {
        s = fsdp_fail(FSDP_ERR_IO, "cannot write the checkpoint %s: %s", tmp, strerror(errno));
        goto out;
    }
    fsdp_hasher_init(&o.sum);
    errno = 0;
    s = write_body(e, &o, h, host);
    if (s == FSDP_OK && (o.failed || fflush(o.f) != 0 || fsync(fileno(o.f)) != 0)) s = FSDP_ERR_IO;
    if (s != FSDP_OK) why = errno ? strerror(errno) : "write failed";
    if (bytes) *bytes = (uint64_t)ftello(o.f);
    if (fclose(o.f) != 0 && s == FSDP_OK) {
        s = FSDP_ERR_IO;
        why = strerror(errno);
    }
    if (s == FSDP_OK && (rename(tmp, path) != 0 || fsdp_sync_folder_of(path) != 0)) {
        s = FSDP_ERR_IO;
        why = strerror(errno);
    }
    if (s != FSDP_OK) {
        remove(tmp);
        s = fsdp_fail(s, "cannot write the checkpoint %s: %s", path, why ? why : fsdp_status_str(s));
    }
    if (sum) *sum = fsdp_hasher_end(&o.sum);
out:
    free(tmp);
    free(host);
    return s;
}

fsdp_status fsdp_ckpt_write(fsdp_engine *e, network *net, const char *weights)
{
    uint64_t id[3] = { 0, 0, 0 };
    FSDP_TRY(weights_identity(e, weights, id));
    char *path = shard_path(weights, fsdp_engine_ctl(e)->rank, fsdp_engine_ctl(e)->world);
    if (!path) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory writing a checkpoint");
    ckpt_header h = header_of(e, net);
    h.run_id = id[2];
    h.weights_size = id[0];
    h.weights_hash = id[1];
    fsdp_status s = write_file(e, path, &h, NULL, NULL);
    free(path);
    return s;
}

/* ---- self-contained files (checkpoints on the clock) ---------------------- */

char *fsdp_ckpt_shard_path(const char *base, int rank, int world)
{
    return shard_path(base, rank, world);
}

fsdp_status fsdp_ckpt_run_id(fsdp_engine *e, uint64_t *id)
{
    if (fsdp_engine_ctl(e)->rank == 0 && !run_id) run_id = new_run_id();
    FSDP_TRY(fsdp_ctl_broadcast(fsdp_engine_ctl(e), &run_id, sizeof run_id, 0));
    *id = run_id;
    return FSDP_OK;
}

static ckpt_header self_header(fsdp_engine *e, const network *net, uint64_t id)
{
    ckpt_header h = header_of(e, net);
    h.flags = CKPT_SELF;
    h.run_id = id;
    return h;
}

size_t fsdp_ckpt_self_bytes(fsdp_engine *e, const network *net)
{
    ckpt_header h = header_of(e, net);
    size_t k = extras_floats(e);
    if (k == (size_t)-1) return 0;
    return sizeof h + (size_t)fsdp_engine_nflats(e) * sizeof(ckpt_flat) + (size_t)h.floats * sizeof(float) +
           sizeof(uint64_t) + k * sizeof(float) + sizeof(uint64_t);
}

fsdp_status fsdp_ckpt_self_image(fsdp_engine *e, const network *net, uint64_t id, void *img)
{
    ckpt_header h = self_header(e, net, id);
    ckpt_out o = { NULL, { 0 }, 0, img, 0 };
    return write_body(e, &o, &h, NULL);
}

fsdp_status fsdp_ckpt_self_write(fsdp_engine *e, const network *net, uint64_t id, const char *path, uint64_t *bytes,
                                 uint64_t *sum)
{
    ckpt_header h = self_header(e, net, id);
    return write_file(e, path, &h, bytes, sum);
}

int fsdp_ckpt_image_store(const char *path, void *img, size_t bytes, uint64_t *sum, char *why, size_t whylen)
{
    unsigned char *b = img;
    *sum = fsdp_hash(b, bytes - sizeof *sum);
    memcpy(b + bytes - sizeof *sum, sum, sizeof *sum);
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp) { snprintf(why, whylen, "out of memory"); return -1; }
    snprintf(tmp, n, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644), rc = fd < 0 ? -1 : 0;
    /* FSDP_CHECKPOINT_SLOW_MS: a slow disk, for the tests that stop a
     * writer mid-file (a pause after each 4 KiB). */
    long pause_ms = fsdp_env_long("FSDP_CHECKPOINT_SLOW_MS");
    size_t chunk = pause_ms > 0 ? 4096 : (1u << 24);
    for (size_t at = 0; rc == 0 && at < bytes;) {
        if (pause_ms > 0 && at) usleep((useconds_t)pause_ms * 1000);
        ssize_t k = write(fd, b + at, bytes - at > chunk ? chunk : bytes - at);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) errno = ENOSPC;   /* write(2) wrote nothing and said no more */
        if (k <= 0) rc = -1;
        else at += (size_t)k;
    }
    if (rc == 0 && fsync(fd) != 0) rc = -1;
    if (rc != 0) snprintf(why, whylen, "%s: %s", fd < 0 ? tmp : path, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && rc == 0) {
        rc = -1;
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
    }
    if (rc == 0 && (rename(tmp, path) != 0 || fsdp_sync_folder_of(path) != 0)) {
        rc = -1;
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
    }
    if (rc != 0) remove(tmp);
    free(tmp);
    return rc;
}

/* ---- reading -------------------------------------------------------------- */

/* One writer's file, open for reading its parts. */
typedef struct ckpt_in {
    FILE *f;
    char *path;
    ckpt_header h;
    ckpt_flat *flats;
    uint64_t *at;            /* per flat: where its first buffer starts in the file */
    uint64_t extras_at, extras_n;   /* CKPT_SELF: where the extras' floats start, and how many */
    uint64_t size;           /* the file's bytes, as fstat said when it was opened */
} ckpt_in;

static void in_close(ckpt_in *in)
{
    if (in->f) fclose(in->f);
    free(in->path);
    free(in->flats);
    free(in->at);
    memset(in, 0, sizeof *in);
}

/* The world a checkpoint beside `weights` was written by: this run's when
 * its rank 0 file is there, else the one world whose rank 0 file is. */
fsdp_status fsdp_ckpt_world(const char *weights, int mine, int *world)
{
    char *p = shard_path(weights, 0, mine);
    if (!p) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    struct stat st;
    int here = lstat(p, &st) == 0;
    free(p);
    if (here) { *world = mine; return FSDP_OK; }   /* opened, and refused if it is not a file, by in_open */
    char *copy = strdup(weights);
    if (!copy) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    char *slash = strrchr(copy, '/');
    const char *dir = slash ? (slash == copy ? "/" : copy) : ".", *name = slash ? slash + 1 : copy;
    if (slash) *slash = 0;
    DIR *d = opendir(dir);
    struct dirent *ent;
    int found = 0, n;
    fsdp_status s = FSDP_OK;
    while (d && s == FSDP_OK && (ent = readdir(d))) {
        /* Strictly NAME.fsdp-0-of-W, W at most FSDP_CKPT_MAX_WORLD: a name
         * says nothing larger, whatever it holds. */
        if ((n = fsdp_ckpt_name_world(ent->d_name, name, 0)) < 0) continue;
        if (found && n != *world)
            s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume: %s has checkpoints of %d and of %d ranks beside it; "
                          "remove one set", weights, *world, n);
        *world = n;
        found = 1;
    }
    if (d) closedir(d);
    free(copy);
    if (s == FSDP_OK && !found)
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume: no checkpoint beside %s (%s.fsdp-0-of-N, N from 1 to %d, "
                      "saved with -fsdp-checkpoint)", weights, weights, FSDP_CKPT_MAX_WORLD);
    return s;
}

static fsdp_status check_header(fsdp_engine *e, const network *net, const ckpt_in *in, int rank, int world,
                                uint64_t weights_size, uint64_t weights_hash)
{
    const ckpt_header *h = &in->h;
    const char *path = in->path;
    ckpt_header want = header_of(e, net);
    if (!memcmp(h->magic, CKPT_MAGIC_V1, 8) || !memcmp(h->magic, CKPT_MAGIC_V2, 8))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s is a checkpoint of an older darknet-fsdp (format %c, "
                         "without checksums); resume from the weights file alone", path, h->magic[7]);
    if (memcmp(h->magic, CKPT_MAGIC, 8))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s is not a darknet-fsdp checkpoint", path);
    if (h->world != (uint32_t)world || h->rank != (uint32_t)rank)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s says it was written by rank %u of %u (renamed?)", path, h->rank,
                         h->world);
    if (h->strategy > FSDP_SHARD_NONE)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: field strategy is %u, none of full (0), grad_op (1), none (2) "
                         "(corrupt)", path, h->strategy);
    int self = !weights_size && !weights_hash;   /* a checkpoint on the clock: no weights file beside it */
    if (h->flags != (self ? CKPT_SELF : 0u))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: field flags is %#x; a checkpoint %s has %#x (corrupt)", path, h->flags,
                         self ? "on the clock" : "beside a weights file", self ? CKPT_SELF : 0u);
    if (!fsdp_ckpt_t_fits(h->t, h->seen))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: field t (the optimizer's step) is %d, which %llu images seen cannot "
                         "give: 1 or more once anything was seen, at most one a seen image (corrupt)", path, h->t,
                         (unsigned long long)h->seen);
    if (h->align != want.align)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was written by a %s run, and this is a %s run: their "
                         "shards are laid out differently; resume on the same kind of device", path,
                         h->align > 1 ? "GPU" : "CPU", want.align > 1 ? "GPU" : "CPU");
    if (h->layout_hash != want.layout_hash || h->ngroups != want.ngroups || h->adam != want.adam ||
        (h->strategy == want.strategy && h->plan_hash != want.plan_hash))
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was written for another network (layers, frozen flags, "
                         "groups or optimizer differ from this cfg)", path);
    if (h->weights_size != weights_size || h->weights_hash != weights_hash)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was saved with another weights file than the one loaded "
                         "(%llu bytes, checksum %016llx; loaded: %llu bytes, %016llx); resume from the "
                         "weights file it was saved with", path, (unsigned long long)h->weights_size,
                         (unsigned long long)h->weights_hash, (unsigned long long)weights_size,
                         (unsigned long long)weights_hash);
    if ((h->flags & CKPT_SELF) && h->strategy != want.strategy)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s is a checkpoint on the clock of shard=%s, and this run is "
                         "shard=%s: such checkpoints resume on any world size, with the same strategy", path,
                         fsdp_strategy_str((fsdp_strategy)h->strategy), fsdp_strategy_str((fsdp_strategy)want.strategy));
    if (!(h->flags & CKPT_SELF) && h->seen != want.seen)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s is from another save than the weights file (seen %llu, "
                         "weights file %llu); resume from the weights file it was saved with", path,
                         (unsigned long long)h->seen, (unsigned long long)want.seen);
    return FSDP_OK;
}

/* Each table entry must be exactly the part rank r of the writer's world
 * wrote for this run's flat (fsdp_ckpt_check.h): nothing in it may size,
 * offset or index a buffer otherwise. */
static fsdp_status check_table(fsdp_engine *e, const ckpt_in *in, int r)
{
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        const fsdp_flat *f = fsdp_engine_flat(e, i);
        ckpt_flat want = fsdp_ckpt_writer_part(in->h.strategy, in->h.world, (uint32_t)r, f->lay.count, in->h.align,
                                               f->kind.trainable, (int)in->h.adam);
        const char *field = fsdp_ckpt_part_differs(&in->flats[i], &want);
        if (field)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: field %s of group %d's %s flat in its table is not the part "
                             "rank %d of %u writes (count %llu, lo %llu, n %llu, nbuf %u, pad %u; corrupt)", in->path,
                             field, i / 2, i % 2 ? "frozen" : "trainable", r, in->h.world,
                             (unsigned long long)in->flats[i].count, (unsigned long long)in->flats[i].lo,
                             (unsigned long long)in->flats[i].n, in->flats[i].nbuf, in->flats[i].pad);
    }
    return FSDP_OK;
}

/* The extras' count of a file on the clock: rank r's rolling statistics,
 * and in rank 0's the replicated frozen flats, exactly. */
static fsdp_status check_extras(fsdp_engine *e, ckpt_in *in, int r, uint64_t at)
{
    size_t rolling, rep;
    if (extras_sizes(e, &rolling, &rep) != 0) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    uint64_t want = rolling + (r == 0 ? rep : 0);
    if (in->size < at + sizeof in->extras_n || fseeko(in->f, (off_t)at, SEEK_SET) != 0 ||
        fread(&in->extras_n, sizeof in->extras_n, 1, in->f) != 1)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (truncated?)", in->path);
    if (in->extras_n != want)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: field extras is %llu floats, and this network's rolling statistics "
                         "and frozen parameters are %llu (another cfg, or corrupt)", in->path,
                         (unsigned long long)in->extras_n, (unsigned long long)want);
    in->extras_at = at + sizeof in->extras_n;
    return FSDP_OK;
}

/* The file's size against what its validated header and table say. */
static fsdp_status check_size(fsdp_engine *e, ckpt_in *in, int r)
{
    size_t nf = 2 * (size_t)in->h.ngroups;
    uint64_t bytes, at = sizeof in->h + nf * sizeof *in->flats, floats = 0;
    for (size_t i = 0; i < nf; ++i) {   /* bounded by the layout: cannot wrap */
        in->at[i] = at;
        at += in->flats[i].n * in->flats[i].nbuf * sizeof(float);
        floats += in->flats[i].n * in->flats[i].nbuf;
    }
    if (floats != in->h.floats)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: field floats is %llu, and its table holds %llu (corrupt)", in->path,
                         (unsigned long long)in->h.floats, (unsigned long long)floats);
    int self = (in->h.flags & CKPT_SELF) != 0;
    if (self) FSDP_TRY(check_extras(e, in, r, at));
    if (fsdp_ckpt_file_bytes(sizeof in->h, in->flats, nf, self, in->extras_n, &bytes) != 0 || in->size < bytes)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (truncated?): %llu bytes, its header "
                         "and table say %llu", in->path, (unsigned long long)in->size, (unsigned long long)bytes);
    if (in->size > bytes)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: longer than its header says: %llu bytes, its header and table say "
                         "%llu", in->path, (unsigned long long)in->size, (unsigned long long)bytes);
    return FSDP_OK;
}

/* The whole file against its checksum, before any of it is used. */
static fsdp_status check_sum(ckpt_in *in)
{
    static unsigned char buf[1 << 20];
    fsdp_hasher sum;
    fsdp_hasher_init(&sum);
    rewind(in->f);
    uint64_t left = in->size - sizeof(uint64_t), stored;
    while (left) {
        size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
        if (fread(buf, 1, k, in->f) != k)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (truncated?)", in->path);
        fsdp_hasher_add(&sum, buf, k);
        left -= k;
    }
    if (fread(&stored, sizeof stored, 1, in->f) != 1)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (no checksum: truncated?)", in->path);
    if (stored != fsdp_hasher_end(&sum))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: checksum mismatch: the file is corrupt (stored %016llx, computed "
                         "%016llx)", in->path, (unsigned long long)stored, (unsigned long long)fsdp_hasher_end(&sum));
    return FSDP_OK;
}

/* Opens rank r's file of a world-N checkpoint: a regular file, never
 * through a symbolic link nor blocking on a FIFO; reads its header and
 * table, checks every number in them, its size and its checksum. */
static fsdp_status in_open(fsdp_engine *e, const network *net, ckpt_in *in, const char *weights, int r, int world,
                           uint64_t weights_size, uint64_t weights_hash)
{
    memset(in, 0, sizeof *in);
    in->path = shard_path(weights, r, world);
    if (!in->path) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    const char *why = NULL;
    int fd = fsdp_open_regular(AT_FDCWD, in->path, &in->size, &why);
    if (fd < 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume: cannot open %s: %s (a checkpoint of %d ranks needs "
                         "every rank's file)", in->path, why, world);
    if (!(in->f = fdopen(fd, "rb"))) {
        close(fd);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    const char *path = in->path;
    if (fread(&in->h, sizeof in->h, 1, in->f) != 1)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: too short for a checkpoint", path);
    FSDP_TRY(check_header(e, net, in, r, world, weights_size, weights_hash));
    size_t nf = 2 * (size_t)in->h.ngroups;   /* this run's: check_header compared them */
    in->flats = calloc(nf, sizeof *in->flats);
    in->at = calloc(nf, sizeof *in->at);
    if (!in->flats || !in->at) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (fread(in->flats, sizeof *in->flats, nf, in->f) != nf)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (truncated?)", path);
    FSDP_TRY(check_table(e, in, r));
    FSDP_TRY(check_size(e, in, r));
    return check_sum(in);
}

/* A file other than the one a rank read first must come from the same
 * save: same run, step counters, strategy and kind. */
static fsdp_status same_save(const ckpt_in *in, const ckpt_in *ref)
{
    const ckpt_header *a = &in->h, *b = &ref->h;
    const char *field = a->run_id != b->run_id ? "run_id" : a->seen != b->seen ? "seen" : a->t != b->t ? "t"
                        : a->strategy != b->strategy ? "strategy" : a->flags != b->flags ? "flags" : NULL;
    if (field)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s: field %s differs from %s's: every shard file must come from one "
                         "save", in->path, field, ref->path);
    return FSDP_OK;
}

/* The writers: their files (opened as needed) and the one that describes
 * every rank's part (ranks' parts are equal shards, or each the whole
 * under `none`): this rank's own on the same world, else rank 0's. */
typedef struct ckpt_set {
    ckpt_in *files;
    int world, ref;
    const char *weights;
    uint64_t wsize, whash;
} ckpt_set;

/* Which writer holds float x of flat i, and its part. */
static int writer_of(const ckpt_set *w, int i, uint64_t x, ckpt_flat *part)
{
    const ckpt_in *ref = &w->files[w->ref];
    *part = ref->flats[i];
    if (ref->h.strategy == FSDP_SHARD_NONE || !part->n) return w->ref;
    int r = (int)(x / part->n);
    part->lo = (uint64_t)r * part->n;
    return r;
}

/* Fills buffer b (0 parameters, 1 momentum, 2 v) of this rank's part
 * [lo, lo + n) of flat i from the writers' files. */
static fsdp_status fill(fsdp_engine *e, const network *net, ckpt_set *set, int i, uint32_t b,
                        const ckpt_flat *mine, float *host)
{
    ckpt_in *files = set->files;
    memset(host, 0, mine->n * sizeof(float));   /* the padding beyond count */
    uint64_t x = mine->lo, end = mine->lo + mine->n < mine->count ? mine->lo + mine->n : mine->count;
    while (x < end) {
        ckpt_flat w;
        int r = writer_of(set, i, x, &w);
        if (r >= set->world || b >= w.nbuf || !w.n)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: no part of group %d's flat at float %llu (corrupt?)",
                             files[set->ref].path, i / 2, (unsigned long long)x);
        if (!files[r].f) {
            FSDP_TRY(in_open(e, net, &files[r], set->weights, r, set->world, set->wsize, set->whash));
            FSDP_TRY(same_save(&files[r], &files[set->ref]));
        }
        const ckpt_flat *have = &files[r].flats[i];
        if (have->lo != w.lo || have->n != w.n || have->nbuf != w.nbuf || have->count != mine->count)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: its part of group %d's flat is not where rank 0's file "
                             "says (files of different saves?)", files[r].path, i / 2);
        uint64_t upto = w.lo + w.n < end ? w.lo + w.n : end;
        if (x < w.lo || upto <= x)   /* the tables were checked: a guard, never a wrap */
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: its part of group %d is not where its table says",
                             files[r].path, i / 2);
        uint64_t off = files[r].at[i] + (b * w.n + (x - w.lo)) * sizeof(float);
        size_t k = (size_t)(upto - x);
        if (fseeko(files[r].f, (off_t)off, SEEK_SET) != 0 ||
            fread(host + (x - mine->lo), sizeof(float), k, files[r].f) != k)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: cannot read its part of group %d", files[r].path, i / 2);
        x = upto;
    }
    return FSDP_OK;
}

/* Adam's second moment is a mean of squares: never negative (nor NaN),
 * which would end in NaN losses. */
static fsdp_status check_v(const ckpt_set *set, int i, const float *v, uint64_t n)
{
    for (uint64_t k = 0; k < n; ++k)
        if (!(v[k] >= 0.f))
            return fsdp_fail(FSDP_ERR_CONFIG, "%s: Adam's v of group %d holds %g, and it is never negative "
                             "(corrupt)", set->files[set->ref].path, i / 2, (double)v[k]);
    return FSDP_OK;
}

/* Replaces this rank's parameters, momentum and v by the checkpoint's. */
static fsdp_status load_parts(fsdp_engine *e, const network *net, ckpt_set *set)
{
    float *host = malloc(largest_own(e) * sizeof(float));
    if (!host) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory reading a checkpoint");
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < fsdp_engine_nflats(e) && s == FSDP_OK; ++i) {
        fsdp_flat *f = fsdp_engine_flat(e, i);
        ckpt_flat mine = part_of(e, f);
        fsdp_flat_part p = fsdp_flat_own_part(fsdp_engine_flat_ctx(e), f);
        /* Frozen parameters a writer kept no part of (replicated under
         * grad_op and none) are the weights file's, already loaded. */
        if (!f->kind.trainable && set->files[set->ref].flats[i].nbuf == 0) continue;   /* or the extras' */
        for (uint32_t b = 0; b < mine.nbuf && s == FSDP_OK; ++b) {
            s = fill(e, net, set, i, b, &mine, host);
            if (s == FSDP_OK && b == 2) s = check_v(set, i, host, mine.n);
            if (s == FSDP_OK) s = fsdp_mem_from_host(fsdp_engine_mem(e), p.buf[b], host, mine.n);
        }
    }
    free(host);
    return s;
}

/* Once every rank loaded its parts: the node memory of every machine
 * holds them (fsdp_flat_own_written). */
static fsdp_status publish_parts(fsdp_engine *e)
{
    for (int i = 0; i < fsdp_engine_nflats(e); ++i) {
        uint64_t sent;
        FSDP_TRY(fsdp_flat_own_written(fsdp_engine_flat_ctx(e), fsdp_engine_flat(e, i), &sent));
    }
    return FSDP_OK;
}

/* The ranks' files must come from one save of one run: same identity, same
 * step counters, same world.  Every rank sees the same verdict. */
static fsdp_status agree_files(fsdp_engine *e, const ckpt_header *h, const char *path)
{
    const uint64_t v[4] = { h->run_id, h->seen, (uint64_t)(int64_t)h->t, h->world };
    const char *what[4] = { "run", "step", "optimizer step", "world size" };
    for (int i = 0; i < 4; ++i) {
        uint64_t lo, hi;
        FSDP_TRY(fsdp_ctl_min_max_u64(fsdp_engine_ctl(e), v[i], &lo, &hi));
        if (lo != hi) {
            fsdp_agreed_stop();
            return fsdp_fail(FSDP_ERR_MISMATCH, "%s: the ranks' checkpoint files come from different %ss "
                             "(this one: %016llx); every shard file must come from one save",
                             path, what[i], (unsigned long long)v[i]);
        }
    }
    return FSDP_OK;
}

/* A self-contained checkpoint's extras: the rolling statistics from the
 * file this rank reads first, the replicated frozen flats from rank 0's. */
static fsdp_status load_extras(fsdp_engine *e, const network *net, ckpt_set *set)
{
    size_t rolling, rep;
    if (extras_sizes(e, &rolling, &rep) != 0) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    ckpt_in *own = &set->files[set->ref], *zero = &set->files[0];
    if (!zero->f) {
        FSDP_TRY(in_open(e, net, zero, set->weights, 0, set->world, set->wsize, set->whash));
        FSDP_TRY(same_save(zero, own));
    }
    float *x = malloc((rolling + rep) * sizeof(float) + 1);
    if (!x) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory reading a checkpoint");
    fsdp_status s = FSDP_OK;
    if (fseeko(own->f, (off_t)own->extras_at, SEEK_SET) != 0 || fread(x, sizeof(float), rolling, own->f) != rolling ||
        fseeko(zero->f, (off_t)(zero->extras_at + rolling * sizeof(float)), SEEK_SET) != 0 ||
        fread(x + rolling, sizeof(float), rep, zero->f) != rep)
        s = fsdp_fail(FSDP_ERR_CONFIG, "%s: cannot read its rolling statistics", own->path);
    if (s == FSDP_OK) s = extras_move(e, x, 0, 1);
    free(x);
    return s;
}

/* Collective: every rank found the same writers' world, bounded, before
 * anything is allocated by it (each rank lists the folder itself). */
static fsdp_status agree_world(fsdp_engine *e, fsdp_status s, const char *weights, int *world)
{
    if (s == FSDP_OK && (*world < 1 || *world > FSDP_CKPT_MAX_WORLD))
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume: %s: a checkpoint of %d ranks; 1 to %d are read", weights,
                      *world, FSDP_CKPT_MAX_WORLD);
    FSDP_TRY(fsdp_ctl_all_ok(fsdp_engine_ctl(e), s, FSDP_ERR_CONFIG, "found no checkpoint to resume"));
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_min_max_u64(fsdp_engine_ctl(e), (uint64_t)*world, &lo, &hi));
    if (lo != hi) {
        fsdp_agreed_stop();
        return fsdp_fail(FSDP_ERR_MISMATCH, "-fsdp-resume: the ranks found checkpoints of %llu and of %llu ranks "
                         "beside %s; remove one set", (unsigned long long)lo, (unsigned long long)hi, weights);
    }
    return FSDP_OK;
}

fsdp_status fsdp_ckpt_read(fsdp_engine *e, network *net, const char *weights, uint64_t weights_size,
                           uint64_t weights_hash, int written_on)
{
    fsdp_status s = FSDP_OK;
    int world = 0;
    ckpt_in *files = NULL;
    ckpt_header h;
    memset(&h, 0, sizeof h);
    if (!weights)
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume needs the weights file the checkpoint was saved "
                      "with on the command line");
    if (s == FSDP_OK && written_on > 0) world = written_on;
    else if (s == FSDP_OK) s = fsdp_ckpt_world(weights, fsdp_engine_ctl(e)->world, &world);
    s = agree_world(e, s, weights, &world);
    if (s == FSDP_OK && !(files = calloc((size_t)world, sizeof *files)))
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory reading a checkpoint");
    /* On the same world each rank reads its own file; on another, the files
     * its part overlaps. */
    int mine = world == fsdp_engine_ctl(e)->world ? fsdp_engine_ctl(e)->rank : 0;
    ckpt_set set = { files, world, mine, weights, weights_size, weights_hash };
    if (s == FSDP_OK) s = in_open(e, net, &files[mine], weights, mine, world, weights_size, weights_hash);
    if (s == FSDP_OK) h = files[mine].h;
    if (s == FSDP_OK) s = load_parts(e, net, &set);
    if (s == FSDP_OK && (h.flags & CKPT_SELF)) s = load_extras(e, net, &set);
    const char *named = files && files[mine].path ? files[mine].path : weights ? weights : "-fsdp-resume";
    char *path = strdup(named);
    for (int r = 0; files && r < world; ++r) in_close(&files[r]);
    free(files);
    s = fsdp_ctl_all_ok(fsdp_engine_ctl(e), s, FSDP_ERR_MISMATCH, "could not load its checkpoint");
    if (s == FSDP_OK) s = publish_parts(e);
    if (s == FSDP_OK) s = agree_files(e, &h, path ? path : "-fsdp-resume");
    if (s == FSDP_OK) {
        *net->t = h.t;
        if (h.flags & CKPT_SELF) *net->seen = h.seen;   /* no weights file said it */
        run_id = h.run_id;   /* rank 0 says what was resumed (fsdp_report_resume) */
    }
    free(path);
    return s;
}

/* ---- leftovers of interrupted saves -------------------------------------- */

/* Darknet saves BASE.weights, BASE.backup, BASE_N.weights, BASE_final.weights. */
static size_t base_len(const char *name)
{
    size_t n = strlen(name);
    const char *sfx[] = { ".weights", ".backup" };
    for (int i = 0; i < 2; ++i) {
        size_t k = strlen(sfx[i]);
        if (n > k && !strcmp(name + n - k, sfx[i])) { n -= k; break; }
    }
    size_t u = n;
    while (u > 0 && name[u - 1] >= '0' && name[u - 1] <= '9') --u;
    if (u > 0 && u < n && name[u - 1] == '_') return u - 1;
    if (n > 6 && !strncmp(name + n - 6, "_final", 6)) return n - 6;
    return n;
}

/* Whether `name` is what a save of BASE leaves when interrupted:
 * BASE{.weights,.backup,_N.weights,_final.weights}[.fsdp-R-of-W].tmp;
 * *r and *w get the shard's rank and world (-1 for a weights file). */
static int leftover(const char *name, const char *base, size_t blen, int *r, int *w)
{
    size_t n = strlen(name);
    if (n < blen + 4 || strncmp(name, base, blen) || strcmp(name + n - 4, ".tmp")) return 0;
    char *stem = strndup(name, n - 4);
    if (!stem) return 0;
    *r = *w = -1;
    char *shard = strstr(stem, ".fsdp-");
    int ok = 1;
    if (shard) {
        int used = 0;
        ok = sscanf(shard, ".fsdp-%d-of-%d%n", r, w, &used) == 2 && shard[used] == 0;
        *shard = 0;
    }
    ok = ok && base_len(stem) == blen && strlen(stem) > blen;
    free(stem);
    return ok;
}

void fsdp_ckpt_clean_tmp(const char *weights, int rank, int world)
{
    char *copy = strdup(weights);
    if (!copy) return;
    char *slash = strrchr(copy, '/');
    const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
    const char *name = slash ? slash + 1 : copy;
    if (slash) *slash = 0;
    size_t blen = base_len(name);
    char *base = strndup(name, blen);
    DIR *d = base ? opendir(dir) : NULL;
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
        int r, w;
        if (!leftover(ent->d_name, base, blen, &r, &w)) continue;
        int mine = w < 0 ? rank == 0 : (w == world ? r == rank : rank == 0);
        /* Only a regular file itself: a link of that name is not followed
         * (nor removed), nor is anything else. */
        if (!mine || !fsdp_is_regular(dirfd(d), ent->d_name)) continue;
        if (unlinkat(dirfd(d), ent->d_name, 0) == 0)
            fprintf(stderr, "fsdp: removed %s/%s, left by an interrupted save\n", dir, ent->d_name);
    }
    if (d) closedir(d);
    free(base);
    free(copy);
}
