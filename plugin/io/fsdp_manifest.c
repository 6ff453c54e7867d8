#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fsdp_ckpt_check.h"
#include "fsdp_fs.h"
#include "fsdp_hash.h"
#include "fsdp_manifest.h"
#include "fsdp_nofollow.h"

#define MANIFEST_HEAD "darknet-fsdp checkpoint 1\n"

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

char *fsdp_manifest_step_dir(const char *folder, long step)
{
    char name[32];
    snprintf(name, sizeof name, "step-%08ld", step);
    return join(folder, name);
}

fsdp_status fsdp_manifest_write(const char *dir, const char *name, const fsdp_manifest *m)
{
    size_t cap = 256 + (size_t)m->world * (strlen(name) + 96), n = 0;
    char *text = malloc(cap);
    char *path = join(dir, "MANIFEST"), *tmp = join(dir, "MANIFEST.tmp");
    fsdp_status s = FSDP_OK;
    if (!text || !path || !tmp) {
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory writing a manifest");
        goto out;
    }
    n += (size_t)snprintf(text + n, cap - n, MANIFEST_HEAD "run %016" PRIx64 "\nstep %ld\nseen %" PRIu64
                          "\nworld %d\n", m->run_id, m->step, m->seen, m->world);
    for (int r = 0; r < m->world; ++r)
        n += (size_t)snprintf(text + n, cap - n, "file %s.fsdp-%d-of-%d %" PRIu64 " %016" PRIx64 "\n", name, r,
                              m->world, m->size[r], m->sum[r]);
    n += (size_t)snprintf(text + n, cap - n, "sum %016" PRIx64 "\n", fsdp_hash(text, n));
    FILE *f = fsdp_create_nofollow(tmp);
    int ok = f && fwrite(text, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f) != 0) ok = 0;
    if (ok) ok = rename(tmp, path) == 0 && fsdp_sync_dir(dir) == 0;
    if (ok) fsdp_sync_folder_of(dir);   /* the step folder's own entry, in its parent */
    if (!ok) {
        s = fsdp_fail(FSDP_ERR_IO, "cannot write the checkpoint's manifest %s: %s", path, strerror(errno));
        remove(tmp);
    }
out:
    free(text);
    free(path);
    free(tmp);
    return s;
}

void fsdp_manifest_free(fsdp_manifest *m)
{
    free(m->size);
    free(m->sum);
    m->size = m->sum = NULL;
}

static int parse(int dfd, const char *name, char *text, fsdp_manifest *m, char *why, size_t whylen);
static long step_of(const char *dir);
static long step_name(const char *name);

/* A MANIFEST names at most FSDP_CKPT_MAX_WORLD files: one larger is
 * refused unread. */
#define MANIFEST_MAX_BYTES ((uint64_t)16 << 20)

int fsdp_manifest_read(const char *dir, const char *name, fsdp_manifest *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    const char *no = NULL;
    int dfd = fsdp_open_folder(AT_FDCWD, dir, &no);
    if (dfd < 0) {
        snprintf(why, whylen, "the step folder is %s", no);
        return -1;
    }
    uint64_t size = 0;
    int fd = fsdp_open_regular(dfd, "MANIFEST", &size, &no);
    if (fd < 0 || size > MANIFEST_MAX_BYTES) {
        if (fd < 0 && errno == ENOENT) snprintf(why, whylen, "no MANIFEST: half-written");
        else if (fd < 0) snprintf(why, whylen, "its MANIFEST is %s", no);
        else snprintf(why, whylen, "its MANIFEST is %llu bytes, over the %llu a MANIFEST may be (refused unread)",
                      (unsigned long long)size, (unsigned long long)MANIFEST_MAX_BYTES);
        if (fd >= 0) close(fd);
        close(dfd);
        return -1;
    }
    char *text = malloc((size_t)size + 1);
    ssize_t n = text ? read(fd, text, (size_t)size) : -1;
    close(fd);
    int rc = -1;
    if (n != (ssize_t)size) {
        snprintf(why, whylen, "its MANIFEST cannot be read");
    } else if (text[n] = 0, strlen(text) != (size_t)n) {
        snprintf(why, whylen, "its MANIFEST holds a NUL byte: not a MANIFEST");
    } else if ((rc = parse(dfd, name, text, m, why, whylen)) == 0 && m->step != step_of(dir)) {
        snprintf(why, whylen, "its MANIFEST's field step is %ld, and its folder's name says %ld", m->step,
                 step_of(dir));
        rc = -1;
    }
    if (rc) fsdp_manifest_free(m);
    free(text);
    close(dfd);
    return rc;
}

/* The trailing checksum of the regular file `file` in dfd (its last 8
 * bytes) and its header's seen; -1 with why filled. */
static int file_sums(int dfd, const char *file, uint64_t size, uint64_t *sum, uint64_t *seen, char *why,
                     size_t whylen)
{
    const char *no = NULL;
    uint64_t have = 0;
    int fd = fsdp_open_regular(dfd, file, &have, &no);
    if (fd < 0) {
        snprintf(why, whylen, "%s is %s", file, errno == ENOENT ? "missing" : no);
        return -1;
    }
    int ok = have == size && size >= FSDP_CKPT_SEEN_AT + 16 &&
             pread(fd, sum, sizeof *sum, (off_t)(size - sizeof *sum)) == (ssize_t)sizeof *sum &&
             pread(fd, seen, sizeof *seen, FSDP_CKPT_SEEN_AT) == (ssize_t)sizeof *seen;
    close(fd);
    if (!ok) snprintf(why, whylen, "%s is not the file its MANIFEST names (size or checksum)", file);
    return ok ? 0 : -1;
}

/* "KEY DIGITS\n" at *p, strictly (hex: 16 digits), at most max: *v, and
 * *p past it. */
static int field(char **p, const char *key, uint64_t max, int hex, uint64_t *v)
{
    size_t k = strlen(key);
    if (strncmp(*p, key, k) || (*p)[k] != ' ') return -1;
    char *s = *p + k + 1, *end;
    if (!(hex ? isxdigit((unsigned char)*s) : isdigit((unsigned char)*s))) return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, hex ? 16 : 10);
    if (errno || *end != '\n' || (hex ? end - s != 16 : end - s > 20) || x > max) return -1;
    *v = x;
    *p = end + 1;
    return 0;
}

/* "file NAME.fsdp-R-of-W SIZE SUM\n" at *p, strictly, and that file in
 * dfd: a regular file of that size, ending in that checksum, whose header
 * says the MANIFEST's seen. */
static int parse_file(int dfd, const char *name, char **p, fsdp_manifest *m, int r, char *why, size_t whylen)
{
    char want[4200], *s, *end;
    int k = snprintf(want, sizeof want, "file %s.fsdp-%d-of-%d ", name, r, m->world);
    if (k >= (int)sizeof want || strncmp(*p, want, (size_t)k)) {
        snprintf(why, whylen, "its MANIFEST does not name %.*s as file %d (another cfg's?)", k - 6, want + 5, r);
        return -1;
    }
    s = *p + k;
    errno = 0;
    m->size[r] = isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
    int ok = isdigit((unsigned char)*s) && !errno && *end == ' ' && isxdigit((unsigned char)end[1]);
    if (ok) m->sum[r] = strtoull(s = end + 1, &end, 16);
    if (!ok || errno || *end != '\n' || end - s != 16) {
        snprintf(why, whylen, "its MANIFEST's line for %.*s is not one this build reads", k - 6, want + 5);
        return -1;
    }
    *p = end + 1;
    want[k - 1] = 0;
    uint64_t sum = 0, seen = 0;
    if (file_sums(dfd, want + 5, m->size[r], &sum, &seen, why, whylen)) return -1;
    if (sum != m->sum[r]) {
        snprintf(why, whylen, "%s is not the file its MANIFEST names (size or checksum)", want + 5);
        return -1;
    }
    if (seen != m->seen) {
        snprintf(why, whylen, "its MANIFEST's field seen is %llu, and %s's header says %llu",
                 (unsigned long long)m->seen, want + 5, (unsigned long long)seen);
        return -1;
    }
    return 0;
}

static int parse(int dfd, const char *name, char *text, fsdp_manifest *m, char *why, size_t whylen)
{
    char *sum_line = NULL, *end;
    for (char *q = text; (q = strstr(q, "\nsum ")); ++q) sum_line = q + 1;
    uint64_t stored = 0, v[2];
    if (!sum_line || strncmp(text, MANIFEST_HEAD, strlen(MANIFEST_HEAD)) ||
        field((end = sum_line, &end), "sum", UINT64_MAX, 1, &stored) || *end ||
        stored != fsdp_hash(text, (size_t)(sum_line - text))) {
        snprintf(why, whylen, "its MANIFEST does not match its checksum");
        return -1;
    }
    char *p = text + strlen(MANIFEST_HEAD);
    const char *bad = field(&p, "run", UINT64_MAX, 1, &m->run_id) ? "run"
                      : field(&p, "step", 99999999, 0, &v[0]) ? "step"
                      : field(&p, "seen", UINT64_MAX, 0, &m->seen) ? "seen"
                      : field(&p, "world", FSDP_CKPT_MAX_WORLD, 0, &v[1]) || !v[1] ? "world" : NULL;
    if (bad) {
        snprintf(why, whylen, "its MANIFEST's field %s is not one this build reads (step: 8 digits, world: 1 to %d)",
                 bad, FSDP_CKPT_MAX_WORLD);
        return -1;
    }
    m->step = (long)v[0];
    m->world = (int)v[1];
    m->size = calloc((size_t)m->world, sizeof *m->size);
    m->sum = calloc((size_t)m->world, sizeof *m->sum);
    if (!m->size || !m->sum) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (int r = 0; r < m->world; ++r)
        if (parse_file(dfd, name, &p, m, r, why, whylen)) return -1;
    if (p != sum_line) {
        snprintf(why, whylen, "its MANIFEST has lines after its %d files", m->world);
        return -1;
    }
    return 0;
}

/* The step of a step folder's name: strictly step- and 8 digits; -1 for
 * any other name. */
static long step_name(const char *name)
{
    if (strncmp(name, "step-", 5) || strlen(name) != 13) return -1;
    long v = 0;
    for (const char *c = name + 5; *c; ++c) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

/* The step a step folder's path names (its last component); -1 if none. */
static long step_of(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return step_name(slash ? slash + 1 : dir);
}

static int by_step(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The step folders in folder, as steps (malloc'd), sorted, newest last:
 * names strictly step- and 8 digits (no sign, no other length), so no
 * name aliases another's step. */
static int list_steps(const char *folder, long **out)
{
    DIR *d = opendir(folder);
    long *v = NULL, step;
    int n = 0, cap = 0;
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
        if ((step = step_name(ent->d_name)) < 0) continue;
        if (n == cap) {
            long *m = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *m);
            if (!m) break;
            v = m;
        }
        v[n++] = step;
    }
    if (d) closedir(d);
    if (n > 1) qsort(v, (size_t)n, sizeof *v, by_step);
    *out = v;
    return n;
}

fsdp_status fsdp_manifest_newest(const char *folder, const char *name, char **dir, fsdp_manifest *m)
{
    *dir = NULL;
    memset(m, 0, sizeof *m);
    long *steps;
    int n = list_steps(folder, &steps);
    for (int i = n - 1; i >= 0 && !*dir; --i) {
        char *d = fsdp_manifest_step_dir(folder, steps[i]), why[512];
        if (!d) break;
        if (fsdp_manifest_read(d, name, m, why, sizeof why) == 0) {
            *dir = d;
            break;
        }
        fsdp_manifest_free(m);
        fprintf(stderr, "fsdp: -fsdp-resume auto: skipped %s: %s\n", d, why);
        free(d);
    }
    free(steps);
    return FSDP_OK;
}

/* Whether `file` is a name clean-up wrote in a step folder: MANIFEST,
 * NAME.fsdp-R-of-W, or either with .tmp. */
static int ours(const char *file, const char *name)
{
    size_t n = strlen(file);
    char *stem = n > 4 && !strcmp(file + n - 4, ".tmp") ? strndup(file, n - 4) : strdup(file);
    int yes = stem && (!strcmp(stem, "MANIFEST") || fsdp_ckpt_name_world(stem, name, -1) > 0);
    free(stem);
    return yes;
}

/* Removes folder/step-IIIIIIII: only a real folder (a symbolic link there
 * is left as it is, said), and in it only the regular files of names this
 * run writes; the folder itself once empty. */
static void remove_step(const char *folder, const char *name, long step)
{
    char sname[32];
    snprintf(sname, sizeof sname, "step-%08ld", step);
    const char *why = NULL;
    int ffd = fsdp_open_folder(AT_FDCWD, folder, &why);
    int dfd = ffd < 0 ? -1 : fsdp_open_folder(ffd, sname, &why);
    if (dfd < 0) {
        if (errno != ENOENT) fprintf(stderr, "fsdp: left %s/%s as it is: %s\n", folder, sname, why);
        if (ffd >= 0) close(ffd);
        return;
    }
    /* MANIFEST first: from here on it is half-written, never complete. */
    if (fsdp_is_regular(dfd, "MANIFEST") && unlinkat(dfd, "MANIFEST", 0) == 0) fsync(dfd);
    DIR *d = fdopendir(dfd);
    struct dirent *ent;
    while (d && (ent = readdir(d)))
        if (ours(ent->d_name, name) && fsdp_is_regular(dfd, ent->d_name)) unlinkat(dfd, ent->d_name, 0);
    if (d) closedir(d);
    else close(dfd);
    unlinkat(ffd, sname, AT_REMOVEDIR);   /* fails, leaving it, where anything else is inside */
    close(ffd);
}

void fsdp_manifest_clear(const char *folder, const char *name, long step)
{
    remove_step(folder, name, step);
}

/* Whether folder/step-IIIIIIII is a real folder holding a MANIFEST. */
static int complete(const char *folder, long step)
{
    char sname[32];
    snprintf(sname, sizeof sname, "step-%08ld", step);
    const char *why = NULL;
    int ffd = fsdp_open_folder(AT_FDCWD, folder, &why);
    int dfd = ffd < 0 ? -1 : fsdp_open_folder(ffd, sname, &why);
    int yes = dfd >= 0 && fsdp_is_regular(dfd, "MANIFEST");
    if (dfd >= 0) close(dfd);
    if (ffd >= 0) close(ffd);
    return yes;
}

void fsdp_manifest_prune(const char *folder, const char *name, long step, int keep)
{
    long *steps;
    int n = list_steps(folder, &steps), kept = 1;   /* `step` itself */
    for (int i = n - 1; i >= 0; --i) {
        if (steps[i] == step) continue;
        if (steps[i] < step && kept < keep && complete(folder, steps[i])) ++kept;
        else remove_step(folder, name, steps[i]);
    }
    free(steps);
}
