#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fsdp_fs.h"
#include "fsdp_hash.h"
#include "fsdp_manifest.h"

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
    FILE *f = fopen(tmp, "wb");
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

static int parse(const char *dir, const char *name, char *text, fsdp_manifest *m, char *why, size_t whylen);

int fsdp_manifest_read(const char *dir, const char *name, fsdp_manifest *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    char *path = join(dir, "MANIFEST");
    FILE *f = path ? fopen(path, "rb") : NULL;
    free(path);
    if (!f) {
        snprintf(why, whylen, "no MANIFEST: half-written");
        return -1;
    }
    struct stat fst;
    char *text = fstat(fileno(f), &fst) == 0 && fst.st_size < (1 << 30) ? malloc((size_t)fst.st_size + 1) : NULL;
    size_t n = text ? fread(text, 1, (size_t)fst.st_size, f) : 0;
    fclose(f);
    if (!text || n != (size_t)fst.st_size) {
        free(text);
        snprintf(why, whylen, "its MANIFEST cannot be read");
        return -1;
    }
    text[n] = 0;
    int rc = parse(dir, name, text, m, why, whylen);
    free(text);
    return rc;
}

/* The trailing checksum of the file at p (its last 8 bytes). */
static int trailing_sum(const char *p, uint64_t *sum)
{
    FILE *f = fopen(p, "rb");
    int ok = f && fseeko(f, -(off_t)sizeof *sum, SEEK_END) == 0 && fread(sum, sizeof *sum, 1, f) == 1;
    if (f) fclose(f);
    return ok ? 0 : -1;
}

static int parse(const char *dir, const char *name, char *text, fsdp_manifest *m, char *why, size_t whylen)
{
    char *last = NULL;
    for (char *q = text; (q = strstr(q, "\nsum ")); ++q) last = q + 1;
    uint64_t stored = 0;
    if (!last || strncmp(text, MANIFEST_HEAD, strlen(MANIFEST_HEAD)) || sscanf(last, "sum %" SCNx64, &stored) != 1 ||
        stored != fsdp_hash(text, (size_t)(last - text))) {
        snprintf(why, whylen, "its MANIFEST does not match its checksum");
        return -1;
    }
    char *p = text + strlen(MANIFEST_HEAD);
    int used = 0;
    if (sscanf(p, "run %" SCNx64 "\nstep %ld\nseen %" SCNu64 "\nworld %d\n%n", &m->run_id, &m->step, &m->seen,
               &m->world, &used) != 4 || m->world < 1 || m->world > (1 << 20)) {
        snprintf(why, whylen, "its MANIFEST is not one this build reads");
        return -1;
    }
    p += used;
    m->size = calloc((size_t)m->world, sizeof *m->size);
    m->sum = calloc((size_t)m->world, sizeof *m->sum);
    if (!m->size || !m->sum) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (int r = 0; r < m->world; ++r) {
        char file[4096], want[4200];
        if (sscanf(p, "file %4095s %" SCNu64 " %" SCNx64 "\n%n", file, &m->size[r], &m->sum[r], &used) != 3) {
            snprintf(why, whylen, "its MANIFEST names %d files of %d", r, m->world);
            return -1;
        }
        p += used;
        snprintf(want, sizeof want, "%s.fsdp-%d-of-%d", name, r, m->world);
        if (strcmp(file, want)) {
            snprintf(why, whylen, "its MANIFEST names %s, not %s (another cfg's?)", file, want);
            return -1;
        }
        char *fp = join(dir, file);
        struct stat st;
        uint64_t sum = 0;
        int there = fp && stat(fp, &st) == 0;
        int same = there && (uint64_t)st.st_size == m->size[r] && trailing_sum(fp, &sum) == 0 && sum == m->sum[r];
        free(fp);
        if (!same) {
            snprintf(why, whylen, "%s is %s", file, !there ? "missing" : "not the file its MANIFEST names (size or "
                     "checksum)");
            return -1;
        }
    }
    return 0;
}

/* The step folders in folder, as steps (malloc'd), sorted, newest last. */
static int list_steps(const char *folder, long **out)
{
    DIR *d = opendir(folder);
    long *v = NULL;
    int n = 0, cap = 0;
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
        long step;
        int used = 0;
        if (sscanf(ent->d_name, "step-%ld%n", &step, &used) != 1 || ent->d_name[used] || strlen(ent->d_name) < 13)
            continue;
        if (n == cap) {
            long *m = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *m);
            if (!m) break;
            v = m;
        }
        v[n++] = step;
    }
    if (d) closedir(d);
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && v[j - 1] > v[j]; --j) {
            long t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
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

static void remove_step(const char *dir)
{
    char *man = join(dir, "MANIFEST");
    if (man && remove(man) == 0) fsdp_sync_dir(dir);   /* first: from here on it is half-written, never complete */
    free(man);
    DIR *d = opendir(dir);
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        char *p = join(dir, ent->d_name);
        if (p) remove(p);
        free(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

void fsdp_manifest_clear(const char *folder, long step)
{
    char *d = fsdp_manifest_step_dir(folder, step);
    if (d) remove_step(d);
    free(d);
}

void fsdp_manifest_prune(const char *folder, long step, int keep)
{
    long *steps;
    int n = list_steps(folder, &steps), kept = 1;   /* `step` itself */
    for (int i = n - 1; i >= 0; --i) {
        if (steps[i] == step) continue;
        char *d = fsdp_manifest_step_dir(folder, steps[i]);
        if (!d) continue;
        struct stat st;
        char *man = join(d, "MANIFEST");
        int complete = man && stat(man, &st) == 0;
        free(man);
        if (steps[i] < step && complete && kept < keep) ++kept;
        else remove_step(d);
        free(d);
    }
    free(steps);
}
