#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_agree.h"
#include "fsdp_hash.h"

void fsdp_agree_free(fsdp_agree *a)
{
    for (int i = 0; i < a->n; ++i) free(a->where[i]);
    free(a->where);
    free(a->prefix);
    free(a->file);
    memset(a, 0, sizeof *a);
}

/* "file:line: key=value", for a message naming the option. */
static char *where_of(const char *file, int line, const char *key, const char *val)
{
    const char *fmt = "%s:%d: %s=%s";
    int n = snprintf(NULL, 0, fmt, file, line, key, val);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) snprintf(s, (size_t)n + 1, fmt, file, line, key, val);
    return s;
}

void fsdp_agree_note_option(fsdp_agree *a, const char *file, int line, int layer, const char *section,
                            const char *key, const char *val)
{
    if (a->oom) return;
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        uint64_t *p = realloc(a->prefix, (size_t)cap * sizeof *p);
        if (p) a->prefix = p;
        char **w = p ? realloc(a->where, (size_t)cap * sizeof *w) : NULL;
        if (w) a->where = w;
        if (!p || !w) { a->oom = FSDP_ERR_NOMEM; return; }
        a->cap = cap;
    }
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    uint64_t prev = a->n ? a->prefix[a->n - 1] : 0;
    fsdp_hasher_add(&h, &prev, sizeof prev);
    fsdp_hasher_add(&h, &layer, sizeof layer);
    fsdp_hasher_add(&h, section ? section : "", strlen(section ? section : "") + 1);
    fsdp_hasher_add(&h, key ? key : "", strlen(key ? key : "") + 1);
    fsdp_hasher_add(&h, val ? "=" : "", val ? 1 : 0);   /* a bare key differs from key= */
    fsdp_hasher_add(&h, val ? val : "", strlen(val ? val : "") + 1);
    char *where = where_of(file ? file : "cfg", line, key ? key : "", val ? val : "");
    if (!where) { a->oom = FSDP_ERR_NOMEM; return; }
    a->prefix[a->n] = fsdp_hasher_end(&h);
    a->where[a->n++] = where;
}

fsdp_status fsdp_agree_note_weights(fsdp_agree *a, const char *file)
{
    FSDP_TRY(fsdp_hash_file(file, &a->size, &a->hash));
    free(a->file);
    a->file = strdup(file);
    a->loaded = 1;
    return FSDP_OK;
}

fsdp_status fsdp_agree_u64(fsdp_ctl *be, uint64_t v, int *differs)
{
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_min_max_u64(be, v, &lo, &hi));
    *differs = lo != hi;
    return FSDP_OK;
}

fsdp_status fsdp_agree_loaded(fsdp_ctl *be, const fsdp_agree *a)
{
    fsdp_status s = fsdp_ctl_all_ok(be, a->load_error, FSDP_ERR_CONFIG, "could not use its weights file");
    if (s != FSDP_OK) fsdp_agreed_stop();
    return s;
}

/* The i-th option's checksum; past this rank's last option, one that no
 * rank's option has (with overwhelming likelihood). */
static uint64_t prefix_at(const fsdp_agree *a, uint64_t i)
{
    if (i < (uint64_t)a->n) return a->prefix[i];
    uint64_t v[2] = { a->n ? a->prefix[a->n - 1] : 0, i };
    return fsdp_hash(v, sizeof v) ^ 0x5bd1e995u;
}

/* The first option where the ranks' cfgs part: a binary search over the
 * prefix checksums (prefixes that agree up to i agree up to every j < i). */
static fsdp_status cfg_differs(fsdp_ctl *be, const fsdp_agree *a)
{
    uint64_t lo, hi;
    FSDP_TRY(fsdp_ctl_min_max_u64(be, (uint64_t)a->n, &lo, &hi));
    uint64_t top = hi;   /* the first difference is below top + 1 */
    int differs;
    FSDP_TRY(fsdp_agree_u64(be, prefix_at(a, top), &differs));
    if (!differs) return FSDP_OK;
    uint64_t first = 0, last = top;   /* prefix_at(last) differs; find the smallest such */
    while (first < last) {
        uint64_t mid = first + (last - first) / 2;
        FSDP_TRY(fsdp_agree_u64(be, prefix_at(a, mid), &differs));
        if (differs) last = mid;
        else first = mid + 1;
    }
    if (last < (uint64_t)a->n)
        fsdp_fail(FSDP_ERR_MISMATCH, "%s: the ranks were given different networks: their cfgs differ "
                  "first here (every rank needs the same cfg)", a->where[last]);
    else
        fsdp_fail(FSDP_ERR_MISMATCH, "%s: the ranks were given different networks: this rank's cfg "
                  "ends after this option, another rank's goes on (every rank needs the same cfg)",
                  a->n ? a->where[a->n - 1] : "cfg");
    return FSDP_ERR_MISMATCH;
}

fsdp_status fsdp_agree_network(fsdp_ctl *be, const fsdp_agree *a, const network *net)
{
    fsdp_status s = fsdp_ctl_all_ok(be, a->oom, FSDP_ERR_NOMEM, "ran out of memory reading its cfg");
    if (s == FSDP_OK) s = cfg_differs(be, a);
    int d = 0;
    const char *file = a->file ? a->file : "(no weights file)";
    if (s == FSDP_OK && (s = fsdp_agree_u64(be, (uint64_t)a->loaded, &d)) == FSDP_OK && d)
        s = fsdp_fail(FSDP_ERR_MISMATCH, "rank %d: some ranks loaded a weights file and others none (this "
                      "rank: %s); give every rank the same one", be->rank, file);
    if (s == FSDP_OK && (s = fsdp_agree_u64(be, a->size, &d)) == FSDP_OK && d)
        s = fsdp_fail(FSDP_ERR_MISMATCH, "%s: the ranks loaded weights files of different sizes (this rank's: "
                      "%llu bytes); give every rank the same file", file, (unsigned long long)a->size);
    if (s == FSDP_OK && (s = fsdp_agree_u64(be, a->hash, &d)) == FSDP_OK && d)
        s = fsdp_fail(FSDP_ERR_MISMATCH, "%s: the ranks loaded weights files with different contents "
                      "(checksum %016llx on this rank); give every rank the same file", file,
                      (unsigned long long)a->hash);
    if (s == FSDP_OK && (s = fsdp_agree_u64(be, (uint64_t)*net->seen, &d)) == FSDP_OK && d)
        s = fsdp_fail(FSDP_ERR_MISMATCH, "rank %d: the ranks start at different points (seen %llu here): "
                      "-clear given on some ranks only?", be->rank, (unsigned long long)*net->seen);
    if (s == FSDP_OK && (s = fsdp_agree_u64(be, (uint64_t)(int64_t)*net->t, &d)) == FSDP_OK && d)
        s = fsdp_fail(FSDP_ERR_MISMATCH, "rank %d: the ranks' optimizer step counters differ (t %d here)",
                      be->rank, *net->t);
    if (s != FSDP_OK) fsdp_agreed_stop();
    return s;
}

fsdp_status fsdp_agree_start(fsdp_ctl *be, fsdp_status local, const fsdp_agree_flag *flags, int n)
{
    /* One all-reduce of maxima: [refused, v0, ~v0, v1, ~v1, ...] gives the
     * max of each value and, through the complement, its min. */
    enum { MAX_FLAGS = 16 };
    uint64_t v[1 + 2 * MAX_FLAGS];
    if (n > MAX_FLAGS) n = MAX_FLAGS;
    v[0] = local != FSDP_OK;
    for (int i = 0; i < n; ++i) {
        v[1 + 2 * i] = flags[i].value;
        v[2 + 2 * i] = ~flags[i].value;
    }
    FSDP_TRY(fsdp_ctl_max_u64(be, v, (size_t)(1 + 2 * n)));
    if (v[0]) fsdp_agreed_stop();   /* every rank has this verdict */
    if (local != FSDP_OK) return local;
    if (v[0]) return fsdp_fail(FSDP_ERR_CONFIG, "rank %d: another rank refused its command line (see above)", be->rank);
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < n; ++i)
        if (v[1 + 2 * i] != ~v[2 + 2 * i])
            s = fsdp_fail(FSDP_ERR_MISMATCH, "rank %d: %s differs between ranks (here: %s); every rank needs "
                          "the same flags", be->rank, flags[i].name, flags[i].shown);
    if (s != FSDP_OK) fsdp_agreed_stop();
    return s;
}

/* Darknet's read_option: `key=value` with every space and tab removed. */
int fsdp_data_value(const char *data, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    FILE *f = fopen(data, "r");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *w = line;
        for (char *r = line; *r; ++r)
            if (*r != ' ' && *r != '\t' && *r != '\n' && *r != '\r') *w++ = *r;
        *w = 0;
        if (!strncmp(line, key, klen) && line[klen] == '=') {
            snprintf(out, n, "%s", line + klen + 1);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* Adds FILE's size and checksum to v[*n..]; an error naming it (and what
 * names it) when it cannot be read. */
static fsdp_status add_file(const char *file, const char *what, uint64_t *v, int *n)
{
    if (access(file, R_OK) != 0) return fsdp_fail(FSDP_ERR_CONFIG, "%s: cannot read %s: %s", file, what, strerror(errno));
    FSDP_TRY(fsdp_hash_file(file, &v[*n], &v[*n + 1]));
    *n += 2;
    return FSDP_OK;
}

const char *fsdp_data_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        size_t len = strlen(argv[i]);
        if (len >= 5 && !strcmp(argv[i] + len - 5, ".data")) return argv[i];
    }
    return NULL;
}

fsdp_status fsdp_agree_data(int argc, char **argv, uint64_t *hash, char *shown, size_t n)
{
    uint64_t v[6] = { 0 };
    int nv = 0;
    *hash = 0;
    snprintf(shown, n, "none");
    const char *data = fsdp_data_arg(argc, argv);
    if (data) {
        snprintf(shown, n, "%s", data);
        FSDP_TRY(add_file(data, "the data file", v, &nv));
        char list[4096];
        if (fsdp_data_value(data, "train", list, sizeof list)) {
            char what[4200];
            snprintf(what, sizeof what, "the train list %s names", data);
            FSDP_TRY(add_file(list, what, v, &nv));
        }
    }
    /* rnn train's text. */
    for (int i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], "-file")) {
            if (!nv) snprintf(shown, n, "%s", argv[i + 1]);
            FSDP_TRY(add_file(argv[i + 1], "the -file text", v, &nv));
            break;
        }
    if (nv) *hash = fsdp_hash(v, sizeof v) | 1;   /* never 0: "none" */
    return FSDP_OK;
}
