/* The probe cache's key (fsdp_pcache_key.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "fsdp_hash.h"
#include "fsdp_pcache_key.h"

const char *fsdp_pcache_key_differs(const fsdp_pcache_key *a, const fsdp_pcache_key *b)
{
    if (a->cfg != b->cfg) return "the cfg's frozen layers";
    if (a->weights != b->weights) return "the frozen layers' weights";
    if (a->w != b->w || a->h != b->h || a->c != b->c) return "the input size";
    if (a->nimages != b->nimages || a->images != b->images)
        return "the images (the train list, or an image's size or modification time)";
    if (a->layout != b->layout) return "the layers served from the cache";
    return NULL;
}

/* A variant of 1 means none (load_thread's default for 0). */
static int is_one(float v) { return v == 0 || v == 1; }

const char *fsdp_pcache_random_input(const network *net, const load_args *a, char *buf, size_t n)
{
    if (a->type != CLASSIFICATION_DATA) return "the data type (only classification data)";
    if (net->random) return "random=1 (the input size changes during training)";
    if (a->angle != 0) return snprintf(buf, n, "angle=%g (a random rotation)", a->angle), buf;
    if (!is_one(a->aspect)) return snprintf(buf, n, "aspect=%g (a random aspect ratio)", a->aspect), buf;
    if (a->hue != 0) return snprintf(buf, n, "hue=%g (random colour distortion)", a->hue), buf;
    if (!is_one(a->saturation)) return snprintf(buf, n, "saturation=%g (random colour distortion)", a->saturation), buf;
    if (!is_one(a->exposure)) return snprintf(buf, n, "exposure=%g (random colour distortion)", a->exposure), buf;
    if (!a->center && (a->min != a->size || a->max != a->size))
        return snprintf(buf, n, "min_crop=%d max_crop=%d (a random crop unless both are the width, %d)", a->min,
                        a->max, a->size), buf;
    if (net->w != a->size || net->h != a->size || net->c != 3 || net->inputs != a->size * a->size * 3)
        return snprintf(buf, n, "width=%d height=%d channels=%d (the loader makes square colour crops)", net->w,
                        net->h, net->c), buf;
    return NULL;
}

/* A cfg line that counts: not blank, not a comment. */
static int counts(const char *line)
{
    line += strspn(line, " \t\r\n");
    return *line && *line != '#' && *line != ';';
}

fsdp_status fsdp_pcache_hash_cfg(const char *cfg, int k, uint64_t *hash)
{
    FILE *f = fopen(cfg, "r");
    if (!f) return fsdp_fail(FSDP_ERR_IO, "%s: cannot read it for the probe cache's key", cfg);
    char line[4096];
    int section = -1;   /* [net] is section 0, layer i section i + 1 */
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    while (fgets(line, sizeof line, f)) {
        if (!counts(line)) continue;
        const char *t = line + strspn(line, " \t");
        if (*t == '[') ++section;
        if (section > k) break;
        /* The plugin's keys (groups, sharding) change no output. */
        if (section >= 1 && strncmp(t, "shard_", 6)) fsdp_hasher_add(&h, t, strcspn(t, "\r\n"));
    }
    fclose(f);
    *hash = fsdp_hasher_end(&h);
    return FSDP_OK;
}

/* The floats load_weights reads for layer l. */
static size_t layer_floats(const layer *l)
{
    switch (l->type) {
    case CONVOLUTIONAL: return (size_t)l->n * (l->batch_normalize ? 4 : 1) + (size_t)l->nweights;
    case BATCHNORM: return (size_t)l->c * 3;
    default: return 0;
    }
}

fsdp_status fsdp_pcache_hash_weights(const network *net, int k, const char *file, uint64_t *hash)
{
    FILE *f = fopen(file, "rb");
    if (!f) return fsdp_fail(FSDP_ERR_IO, "%s: cannot read it for the probe cache's key", file);
    int v[3] = { 0, 0, 0 };
    size_t head = 3 * sizeof(int), floats = 0;
    if (fread(v, sizeof(int), 3, f) == 3) head += (v[0] * 10 + v[1] >= 2) ? sizeof(size_t) : sizeof(int);
    for (int i = 0; i < k; ++i) floats += net->layers[i].dontload ? 0 : layer_floats(&net->layers[i]);
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    fsdp_hasher_add(&h, v, sizeof v);
    size_t left = floats * sizeof(float);
    char buf[65536];
    int ok = fseek(f, (long)head, SEEK_SET) == 0;
    while (ok && left) {
        size_t want = left < sizeof buf ? left : sizeof buf, got = fread(buf, 1, want, f);
        fsdp_hasher_add(&h, buf, got);
        left -= got;
        ok = got == want;
    }
    fclose(f);
    if (!ok) return FSDP_ERR_UNSUPPORTED;
    *hash = fsdp_hasher_end(&h);
    return FSDP_OK;
}

fsdp_status fsdp_pcache_hash_images(char **paths, int n, uint64_t *hash)
{
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    for (int i = 0; i < n; ++i) {
        struct stat st;
        if (stat(paths[i], &st) != 0)
            return fsdp_fail(FSDP_ERR_IO, "%s: cannot stat this image of the train list", paths[i]);
        uint64_t t[3] = { (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec };
        fsdp_hasher_add(&h, paths[i], strlen(paths[i]) + 1);
        fsdp_hasher_add(&h, t, sizeof t);
    }
    *hash = fsdp_hasher_end(&h);
    return FSDP_OK;
}
