/* fsdp_wdiff A B [--tol T] [--exact] [--floats START:END]
 * Compares two Darknet weights files: the header (version, seen) exactly
 * unless --floats is given (a range of floats: the header is not compared),
 * then the floats, element by element, with |a-b| <= T * max(1, |a|, |b|).
 * --floats limits the float comparison to [START, END) (e.g. the frozen
 * trunk).  Exits 0 when equal, 1 when not, 2 on bad input; says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int major, minor, revision; unsigned long long seen; float *v; size_t n; } wfile;

static int load(const char *path, wfile *w)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "wdiff: cannot open %s\n", path); return -1; }
    int hdr[3];
    if (fread(hdr, sizeof(int), 3, f) != 3) { fprintf(stderr, "wdiff: %s: short header\n", path); fclose(f); return -1; }
    w->major = hdr[0]; w->minor = hdr[1]; w->revision = hdr[2];
    if (w->major * 10 + w->minor >= 2) {
        size_t s;
        if (fread(&s, sizeof s, 1, f) != 1) { fprintf(stderr, "wdiff: %s: short header\n", path); fclose(f); return -1; }
        w->seen = s;
    } else {
        int s;
        if (fread(&s, sizeof s, 1, f) != 1) { fprintf(stderr, "wdiff: %s: short header\n", path); fclose(f); return -1; }
        w->seen = (unsigned)s;
    }
    long start = ftell(f);
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    fseek(f, start, SEEK_SET);
    w->n = (size_t)(end - start) / sizeof(float);
    w->v = malloc(w->n * sizeof(float) + 1);
    if (fread(w->v, sizeof(float), w->n, f) != w->n) { fprintf(stderr, "wdiff: %s: read error\n", path); fclose(f); return -1; }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    double tol = 1e-4;
    int exact = 0;
    size_t lo = 0, hi = (size_t)-1;
    const char *a = NULL, *b = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--tol") && i + 1 < argc) tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--exact")) exact = 1;
        else if (!strcmp(argv[i], "--floats") && i + 1 < argc) {
            if (sscanf(argv[++i], "%zu:%zu", &lo, &hi) != 2 || lo > hi) { fprintf(stderr, "wdiff: bad --floats %s\n", argv[i]); return 2; }
        } else if (!a) a = argv[i];
        else if (!b) b = argv[i];
        else { fprintf(stderr, "wdiff: unexpected argument %s\n", argv[i]); return 2; }
    }
    if (!a || !b) { fprintf(stderr, "usage: fsdp_wdiff A B [--tol T] [--exact] [--floats START:END]\n"); return 2; }
    wfile x, y;
    if (load(a, &x) || load(b, &y)) return 2;
    int whole = lo == 0 && hi == (size_t)-1;
    if (whole && (x.major != y.major || x.minor != y.minor || x.revision != y.revision || x.seen != y.seen)) {
        printf("header differs: %d.%d.%d seen %llu vs %d.%d.%d seen %llu\n", x.major, x.minor, x.revision,
               x.seen, y.major, y.minor, y.revision, y.seen);
        return 1;
    }
    if (whole && x.n != y.n) { printf("sizes differ: %zu vs %zu floats\n", x.n, y.n); return 1; }
    if (hi > x.n) hi = x.n;
    if (hi > y.n) hi = y.n;
    size_t bad = 0, first = 0;
    double maxd = 0;
    for (size_t i = lo; i < hi; ++i) {
        double d = fabs((double)x.v[i] - (double)y.v[i]);
        double s = fmax(1.0, fmax(fabs(x.v[i]), fabs(y.v[i])));
        int differs = exact ? memcmp(&x.v[i], &y.v[i], sizeof(float)) != 0 : !(d <= tol * s);
        if (d > maxd) maxd = d;
        if (differs && bad++ == 0) first = i;
    }
    printf("%zu floats compared [%zu,%zu), max |diff| %.3g, %zu differ%s\n", hi - lo, lo, hi, maxd, bad,
           exact ? " (exact)" : "");
    if (bad) printf("first difference at float %zu: %.9g vs %.9g\n", first, x.v[first], y.v[first]);
    return bad ? 1 : 0;
}
