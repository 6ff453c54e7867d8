/* The probe cache's files (fsdp_pcache_file.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fsdp_nofollow.h"
#include "fsdp_pcache_file.h"

static const char magic[8] = { 'D', 'N', 'P', 'C', 'A', 'C', 'H', 'E' };
#define VERSION 1u

uint64_t fsdp_pcache_part_bytes(uint64_t count, uint64_t floats)
{
    return FSDP_PCACHE_HEADER + count * floats * sizeof(float);
}

static void part_path(char *out, size_t n, const char *dir, int part, int nparts)
{
    snprintf(out, n, "%s/part-%d-of-%d.bin", dir, part, nparts);
}

static void header(unsigned char *h, const fsdp_pcache_manifest *m, int part)
{
    uint32_t v[2] = { VERSION, (uint32_t)m->floats };
    uint64_t u[3] = { m->first[part], m->count[part], m->key.layout };
    memcpy(h, magic, 8);
    memcpy(h + 8, v, 8);
    memcpy(h + 16, u, 24);
}

fsdp_status fsdp_pcache_part_open(fsdp_pcache_writer *w, const char *dir, int part, int nparts,
                                  const fsdp_pcache_manifest *m)
{
    part_path(w->path, sizeof w->path, dir, part, nparts);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", w->path, (long)getpid());
    w->f = fsdp_create_nofollow(w->tmp);
    if (!w->f) {
        return fsdp_fail(FSDP_ERR_IO, "%s: cannot write the probe cache: %s", w->tmp, strerror(errno));
    }
    unsigned char h[FSDP_PCACHE_HEADER];
    header(h, m, part);
    fsdp_hasher_init(&w->h);
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h) return fsdp_fail(FSDP_ERR_IO, "%s: write failed", w->tmp);
    return FSDP_OK;
}

fsdp_status fsdp_pcache_part_add(fsdp_pcache_writer *w, const float *x, size_t n)
{
    fsdp_hasher_add(&w->h, x, n * sizeof *x);
    if (fwrite(x, sizeof *x, n, w->f) != n)
        return fsdp_fail(FSDP_ERR_IO, "%s: write failed: %s", w->tmp, strerror(errno));
    return FSDP_OK;
}

fsdp_status fsdp_pcache_part_close(fsdp_pcache_writer *w, uint64_t *hash)
{
    int ok = fflush(w->f) == 0 && fsync(fileno(w->f)) == 0;
    ok = (fclose(w->f) == 0) && ok;
    w->f = NULL;
    if (!ok || rename(w->tmp, w->path) != 0) {
        int err = errno;
        unlink(w->tmp);
        return fsdp_fail(FSDP_ERR_IO, "%s: cannot finish the probe cache's part: %s", w->path, strerror(err));
    }
    *hash = fsdp_hasher_end(&w->h);
    return FSDP_OK;
}

void fsdp_pcache_part_abandon(fsdp_pcache_writer *w)
{
    if (w->f) fclose(w->f);
    w->f = NULL;
    unlink(w->tmp);
}

void fsdp_pcache_manifest_remove(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    unlink(p);
    DIR *d = opendir(dir);
    for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d)) {
        int i, n, end = 0;
        /* Only names a build writes: part-I-of-N.bin. */
        if (sscanf(de->d_name, "part-%d-of-%d.bin%n", &i, &n, &end) == 2 && !de->d_name[end]) {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    if (d) closedir(d);
}

fsdp_status fsdp_pcache_manifest_write(const char *dir, const fsdp_pcache_manifest *m)
{
    char p[4096], tmp[4200];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    FILE *f = fsdp_create_nofollow(tmp);
    if (!f) {
        return fsdp_fail(FSDP_ERR_IO, "%s: cannot write the probe cache's manifest: %s", tmp, strerror(errno));
    }
    const fsdp_pcache_key *k = &m->key;
    fprintf(f, "darknet-fsdp probe cache %u\ncfg %016" PRIx64 "\nweights %016" PRIx64 "\ninput %d %d %d\n"
            "images %" PRIu64 " %016" PRIx64 "\nlayout %016" PRIx64 "\nfloats %" PRIu64 "\nvariants %" PRIu64
            "\nparts %d\n", VERSION, k->cfg, k->weights, k->w, k->h, k->c, k->nimages, k->images, k->layout,
            m->floats, m->variants, m->nparts);
    for (int i = 0; i < m->nparts; ++i)
        fprintf(f, "part %d %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n", i, m->first[i], m->count[i], m->hash[i]);
    int ok = fprintf(f, "end\n") > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, p) != 0) {
        int err = errno;
        unlink(tmp);
        return fsdp_fail(FSDP_ERR_IO, "%s: cannot write the probe cache's manifest: %s", p, strerror(err));
    }
    return FSDP_OK;
}

/* The manifest's numbers, each in its bounds; the parts tile [0, variants). */
static const char *manifest_bounds(const fsdp_pcache_manifest *m)
{
    if (m->floats < 1 || m->floats > FSDP_PCACHE_MAX_FLOATS) return "floats per image out of bounds";
    if (m->variants < 1 || m->variants > FSDP_PCACHE_MAX_VARIANTS || m->variants != 2 * m->key.nimages)
        return "variants out of bounds";
    if (m->nparts < 1 || m->nparts > FSDP_PCACHE_MAX_PARTS) return "parts out of bounds";
    uint64_t next = 0;
    for (int i = 0; i < m->nparts; ++i) {
        if (m->first[i] != next || m->count[i] > m->variants - next) return "its parts do not tile the variants";
        next += m->count[i];
    }
    return next == m->variants ? NULL : "its parts do not cover the variants";
}

static const char *parse_manifest(FILE *f, fsdp_pcache_manifest *m)
{
    fsdp_pcache_key *k = &m->key;
    unsigned version = 0;
    if (fscanf(f, "darknet-fsdp probe cache %u\n", &version) != 1 || version != VERSION) return "not a version-1 manifest";
    if (fscanf(f, "cfg %" SCNx64 "\nweights %" SCNx64 "\ninput %d %d %d\nimages %" SCNu64 " %" SCNx64
               "\nlayout %" SCNx64 "\nfloats %" SCNu64 "\nvariants %" SCNu64 "\nparts %d\n", &k->cfg, &k->weights,
               &k->w, &k->h, &k->c, &k->nimages, &k->images, &k->layout, &m->floats, &m->variants, &m->nparts) != 11)
        return "malformed key";
    if (m->nparts < 1 || m->nparts > FSDP_PCACHE_MAX_PARTS) return "parts out of bounds";
    for (int i = 0; i < m->nparts; ++i) {
        int at = -1;
        if (fscanf(f, "part %d %" SCNu64 " %" SCNu64 " %" SCNx64 "\n", &at, &m->first[i], &m->count[i], &m->hash[i]) != 4 ||
            at != i)
            return "malformed part line";
    }
    char end[8] = "";
    if (fscanf(f, "%7s", end) != 1 || strcmp(end, "end")) return "no end line (cut short)";
    return manifest_bounds(m);
}

fsdp_status fsdp_pcache_manifest_read(const char *dir, fsdp_pcache_manifest *m, char *why, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    memset(m, 0, sizeof *m);
    uint64_t size = 0;
    const char *no = NULL;
    int fd = fsdp_open_regular(AT_FDCWD, p, &size, &no);
    if (fd < 0 || size > (1 << 20)) {
        snprintf(why, n, "%s: %s", p, fd < 0 ? no : "not a regular file of at most 1 MB");
        if (fd >= 0) close(fd);
        return FSDP_ERR_IO;
    }
    FILE *f = fdopen(fd, "r");
    const char *bad = f ? parse_manifest(f, m) : "cannot read it";
    if (f) fclose(f);
    else close(fd);
    if (!bad) return FSDP_OK;
    snprintf(why, n, "%s: %s", p, bad);
    return FSDP_ERR_CONFIG;
}

/* Part i's checksum, read in pieces. */
static int checksum_ok(int fd, uint64_t bytes, uint64_t want)
{
    static const size_t chunk = 1 << 20;
    unsigned char *buf = malloc(chunk);
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    uint64_t at = FSDP_PCACHE_HEADER;
    while (buf && at < bytes) {
        size_t n = bytes - at < chunk ? (size_t)(bytes - at) : chunk;
        ssize_t got = pread(fd, buf, n, (off_t)at);
        if (got <= 0) break;
        fsdp_hasher_add(&h, buf, (size_t)got);
        at += (uint64_t)got;
    }
    free(buf);
    return at == bytes && fsdp_hasher_end(&h) == want;
}

/* Part i opened and checked; *why otherwise. */
static const char *open_part(fsdp_pcache_parts *p, const char *dir, const fsdp_pcache_manifest *m, int i, int verify)
{
    char path[4096];
    part_path(path, sizeof path, dir, i, m->nparts);
    uint64_t want = fsdp_pcache_part_bytes(m->count[i], m->floats);
    uint64_t size = 0;
    const char *no = NULL;
    errno = 0;
    int fd = fsdp_open_regular(AT_FDCWD, path, &size, &no);
    /* errno is left 0 where the name exists but is no regular file. */
    if (fd < 0) return errno ? "a part is missing" : "a part's size is not the manifest's";
    p->fd[i] = fd;
    p->bytes[i] = want;
    if (size != want) return "a part's size is not the manifest's";
    unsigned char h[FSDP_PCACHE_HEADER], got[FSDP_PCACHE_HEADER];
    header(h, m, i);
    if (pread(fd, got, sizeof got, 0) != (ssize_t)sizeof got || memcmp(h, got, sizeof h))
        return "a part's header is not the manifest's";
    if (verify && !checksum_ok(fd, want, m->hash[i])) return "a part's checksum is not the manifest's";
    return NULL;
}

fsdp_status fsdp_pcache_parts_open(fsdp_pcache_parts *p, const char *dir, const fsdp_pcache_manifest *m,
                                   const unsigned char *verify, char *why, size_t n)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < FSDP_PCACHE_MAX_PARTS; ++i) p->fd[i] = -1;
    p->nparts = m->nparts;
    for (int i = 0; i < m->nparts; ++i) {
        const char *bad = open_part(p, dir, m, i, verify && verify[i]);
        if (bad) {
            snprintf(why, n, "%s/part-%d-of-%d.bin: %s", dir, i, m->nparts, bad);
            fsdp_pcache_parts_close(p);
            return FSDP_ERR_CONFIG;
        }
    }
    return FSDP_OK;
}

fsdp_status fsdp_pcache_parts_read(const fsdp_pcache_parts *p, const fsdp_pcache_manifest *m, uint64_t v, float *out)
{
    int lo = 0, hi = m->nparts - 1;   /* the part whose first variant is the last at or below v */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->first[mid] <= v) lo = mid;
        else hi = mid - 1;
    }
    size_t bytes = (size_t)m->floats * sizeof(float);
    off_t at = (off_t)(FSDP_PCACHE_HEADER + (v - m->first[lo]) * bytes);
    for (size_t done = 0; done < bytes;) {
        ssize_t got = pread(p->fd[lo], (char *)out + done, bytes - done, at + (off_t)done);
        if (got <= 0)
            return fsdp_fail(FSDP_ERR_IO, "probe cache: reading variant %llu of part %d failed: %s",
                             (unsigned long long)v, lo, got < 0 ? strerror(errno) : "the file is shorter");
        done += (size_t)got;
    }
    return FSDP_OK;
}

void fsdp_pcache_parts_close(fsdp_pcache_parts *p)
{
    for (int i = 0; i < p->nparts; ++i)
        if (p->fd[i] >= 0) close(p->fd[i]);
    memset(p, 0, sizeof *p);
}
