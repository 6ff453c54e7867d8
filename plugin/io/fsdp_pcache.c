/* The probe cache: deciding, reusing or building, serving (fsdp_pcache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include "fsdp_pcache.h"
#include "fsdp_pcache_build.h"
#include "fsdp_prefix.h"
#include "fsdp_resume.h"
#include "fsdp_timeline.h"

#define REF_MARK (-1.5f)
#define REF_SPLIT 4194304u   /* 2^22: each half of a variant's number is a float exactly */

fsdp_status fsdp_pcache_init(fsdp_pcache *pc, const char *flag, int argc, char **argv)
{
    memset(pc, 0, sizeof *pc);
    pc->off = flag && !strcmp(flag, "off");
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "train")) snprintf(pc->command, sizeof pc->command, "%s train", argv[i - 1]);
    if (flag && !pc->off) {
        pc->given = 1;
        pc->dir = strdup(flag);
        return pc->dir ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    char *backup = pc->off ? NULL : fsdp_resume_backup(argc, argv);
    if (!pc->off && !backup) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    pc->dir = backup;   /* BACKUP/NAME.probe once the cfg is known */
    return FSDP_OK;
}

fsdp_status fsdp_pcache_note_built(fsdp_pcache *pc, fsdp_engine *e, const char *cfg, const char *weights)
{
    if (pc->off || pc->cfg) return FSDP_OK;
    if (strcmp(pc->command, "classifier train") && fsdp_prefix_length(e) > 0 && fsdp_engine_ctl(e)->rank == 0)
        fprintf(stderr, "fsdp: probe cache: not used: only classifier train is served from it, not %s\n",
                pc->command[0] ? pc->command : "this command");
    pc->cfg = strdup(cfg);
    pc->weights = weights ? strdup(weights) : NULL;
    pc->machines = fsdp_coll_node_layout(fsdp_engine_coll(e)).machines;
    pc->rank0 = fsdp_engine_ctl(e)->rank == 0;
    if (!pc->cfg || (weights && !pc->weights)) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (pc->given) return FSDP_OK;
    char *name = NULL, *fsdp = fsdp_resume_folder(pc->dir, cfg, &name);
    free(name);
    if (!fsdp) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    strcpy(fsdp + strlen(fsdp) - strlen(".fsdp"), ".probe");   /* same length */
    free(pc->dir);
    pc->dir = fsdp;
    return FSDP_OK;
}

/* The layers the prefix may hold: each gives an image's output whatever
 * else is in the batch, and draws nothing. */
static int per_image(LAYER_TYPE t)
{
    return t == CONVOLUTIONAL || t == MAXPOOL || t == AVGPOOL || t == ROUTE || t == SHORTCUT || t == UPSAMPLE ||
           t == BATCHNORM || t == ACTIVE || t == DROPOUT || t == REORG;
}

/* Why the cache cannot serve this run; NULL if it can. */
static const char *unfit(const fsdp_pcache *pc, const network *net, const load_args *a, char *buf, size_t n)
{
    char key[256];
    const char *random = fsdp_pcache_random_input(net, a, key, sizeof key);
    if (random) return snprintf(buf, n, "the input is random: %s", random), buf;
    if (net->gpu_index >= 0) return "GPU runs are not served from it";
    if (a->m < 1) return "the train list is empty";
    if (pc->machines > 1) return "the ranks span machines";
    if (!pc->weights) return "no weights file: the frozen layers' weights are random";
    for (int i = 0; i < pc->k; ++i) {
        if (!per_image(net->layers[i].type))
            return snprintf(buf, n, "frozen layer %d is of a type whose output may depend on the batch or a draw "
                            "(only convolutional, pooling, route, shortcut, upsample, batchnorm, activation, dropout "
                            "and reorg layers are served)", i), buf;
        if (net->layers[i].dontload) return snprintf(buf, n, "frozen layer %d has dontload=1", i), buf;
    }
    return NULL;
}

/* The prefix's outputs that layers from k on read: k - 1's, and those a
 * route or shortcut names (read[j] set). */
static void served(const network *net, int k, unsigned char *read)
{
    read[k - 1] = 1;
    for (int i = k; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        for (int j = 0; l->type == ROUTE && j < l->n; ++j)
            if (l->input_layers[j] < k) read[l->input_layers[j]] = 1;
        if (l->type == SHORTCUT && l->index < k) read[l->index] = 1;
    }
}

uint64_t fsdp_pcache_variant_floats(const fsdp_engine *e, const network *net)
{
    int k = fsdp_prefix_length(e);
    unsigned char *read = k > 0 ? calloc((size_t)k, 1) : NULL;
    uint64_t floats = 0;
    if (read) served(net, k, read);
    for (int j = 0; read && j < k; ++j) floats += read[j] ? (uint64_t)net->layers[j].outputs : 0;
    free(read);
    return floats;
}

static fsdp_status layout(fsdp_pcache *pc, const network *net)
{
    int k = pc->k;
    unsigned char *read = calloc((size_t)k, 1);
    pc->need = calloc((size_t)k, sizeof *pc->need);
    if (!read || !pc->need) return free(read), fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    served(net, k, read);
    uint64_t floats = 0, h = fsdp_hash(&k, sizeof k);
    for (int j = 0; j < k; ++j) {
        if (!read[j]) continue;
        pc->need[pc->nneed++] = j;
        floats += (uint64_t)net->layers[j].outputs;
        h = fsdp_hash_word(h, ((uint64_t)j << 32) | (uint64_t)net->layers[j].outputs);
    }
    free(read);
    pc->m->floats = floats;
    pc->m->key.layout = h;
    return FSDP_OK;
}

static int by_path(const void *a, const void *b)
{
    const char *x = ((const fsdp_pcache_index *)a)->path, *y = ((const fsdp_pcache_index *)b)->path;
    return x < y ? -1 : x > y;
}

/* The key, the parts of a build on this world, and the loader's paths. */
static fsdp_status key(fsdp_pcache *pc, fsdp_engine *e, const network *net, const load_args *a)
{
    fsdp_pcache_key *k = &pc->m->key;
    FSDP_TRY(fsdp_pcache_hash_cfg(pc->cfg, pc->k, &k->cfg));
    fsdp_status w = fsdp_pcache_hash_weights(net, pc->k, pc->weights, &k->weights);
    if (w == FSDP_ERR_UNSUPPORTED) return w;   /* the caller says so */
    FSDP_TRY(w);
    FSDP_TRY(fsdp_pcache_hash_images(a->paths, a->m, &k->images));
    k->layout = fsdp_hash_word(k->layout, (uint64_t)a->center);
    k->nimages = (uint64_t)a->m;
    k->w = a->size, k->h = a->size, k->c = 3;
    int world = fsdp_engine_ctl(e)->world;
    pc->m->variants = 2 * (uint64_t)a->m;
    pc->m->nparts = world;
    /* By image: both variants of one in the same part. */
    for (int r = 0; r < world; ++r) {
        pc->m->first[r] = 2 * ((uint64_t)a->m * (uint64_t)r / (uint64_t)world);
        pc->m->count[r] = 2 * ((uint64_t)a->m * (uint64_t)(r + 1) / (uint64_t)world) - pc->m->first[r];
    }
    pc->nimages = a->m;
    pc->index = malloc(sizeof *pc->index * (size_t)a->m);
    if (!pc->index) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < a->m; ++i) pc->index[i] = (fsdp_pcache_index){ a->paths[i], i };
    qsort(pc->index, (size_t)a->m, sizeof *pc->index, by_path);
    return FSDP_OK;
}

/* Every rank reads the manifest; all must find it matching the key and
 * their share of the parts intact to reuse it.  Rank 0 names what
 * differed. */
static fsdp_status try_reuse(fsdp_pcache *pc, fsdp_engine *e, int *reuse)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    fsdp_pcache_manifest *old = malloc(sizeof *old);
    if (!old) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    char why[4300] = "";
    fsdp_status s = fsdp_pcache_manifest_read(pc->dir, old, why, sizeof why);
    const char *differs = s == FSDP_OK ? fsdp_pcache_key_differs(&old->key, &pc->m->key) : NULL;
    if (!differs && s == FSDP_OK && old->floats != pc->m->floats) differs = "the layers served from the cache";
    int ok = s == FSDP_OK && !differs;
    unsigned char verify[FSDP_PCACHE_MAX_PARTS];
    for (int i = 0; ok && i < old->nparts; ++i) verify[i] = i % ctl->world == ctl->rank;
    if (ok && fsdp_pcache_parts_open(&pc->parts, pc->dir, old, verify, why, sizeof why) != FSDP_OK) {
        fprintf(stderr, "fsdp: probe cache %s: rebuilding it: %s\n", pc->dir, why);
        ok = 0;
    }
    uint64_t fail = !ok;
    FSDP_TRY(fsdp_ctl_max_u64(ctl, &fail, 1));
    if (ok && fail) fsdp_pcache_parts_close(&pc->parts);
    if (!fail) {
        free(pc->m);
        pc->m = old;
    } else {
        free(old);
    }
    if (ctl->rank == 0 && s != FSDP_OK)
        fprintf(stderr, "fsdp: probe cache %s: none complete (%s): building it\n", pc->dir, why);
    else if (ctl->rank == 0 && differs)
        fprintf(stderr, "fsdp: probe cache %s: made for other inputs (%s differ): rebuilding it\n", pc->dir, differs);
    *reuse = !fail;
    return FSDP_OK;
}

/* Rank 0: the folder made, its manifest gone, the space checked; the
 * verdict told to every rank (*fits). */
static fsdp_status make_room(fsdp_pcache *pc, fsdp_engine *e, int *fits)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    int v[2] = { 1, 0 };   /* fits, error */
    if (ctl->rank == 0) {
        uint64_t need = 0;
        for (int i = 0; i < pc->m->nparts; ++i) need += fsdp_pcache_part_bytes(pc->m->count[i], pc->m->floats);
        struct statvfs sv;
        if (mkdir(pc->dir, 0755) != 0 && errno != EEXIST) {
            v[1] = 1;
            fsdp_fail(FSDP_ERR_IO, "-fsdp-probe-cache: cannot make the folder %s: %s", pc->dir, strerror(errno));
        } else if (statvfs(pc->dir, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < need) {
            v[0] = 0;
            fprintf(stderr, "fsdp: probe cache %s: not used: it needs %.1f MB, and its disk has %.1f MB free\n",
                    pc->dir, need / 1e6, (double)sv.f_bavail * sv.f_frsize / 1e6);
        }
        if (!v[1]) fsdp_pcache_manifest_remove(pc->dir);
    }
    FSDP_TRY(fsdp_ctl_broadcast(ctl, v, sizeof v, 0));
    if (v[1]) return ctl->rank == 0 ? FSDP_ERR_IO : fsdp_fail(FSDP_ERR_IO, "rank 0 could not make the probe cache's folder");
    *fits = v[0];
    return FSDP_OK;
}

/* Reused, or built and opened; *serve unless it turned out unusable. */
static fsdp_status reuse_or_build(fsdp_pcache *pc, fsdp_engine *e, network *net, const load_args *a, int *serve)
{
    int reuse = 0, fits = 1, bad = 0;
    FSDP_TRY(try_reuse(pc, e, &reuse));
    if (!reuse) {
        FSDP_TRY(make_room(pc, e, &fits));
        if (!fits) return FSDP_OK;
        double t0 = fsdp_tl_clock();
        FSDP_TRY(fsdp_pcache_build(pc, e, net, a, a->paths, &bad));
        pc->extract_s = fsdp_tl_clock() - t0;
        if (bad) return FSDP_OK;
        char why[4300];
        if (fsdp_pcache_parts_open(&pc->parts, pc->dir, pc->m, NULL, why, sizeof why) != FSDP_OK)
            return fsdp_fail(FSDP_ERR_IO, "probe cache: the parts just written do not read back: %s", why);
        pc->built = 1;
    }
    *serve = 1;
    return FSDP_OK;
}

fsdp_status fsdp_pcache_train_inputs(fsdp_pcache *pc, fsdp_engine *e, network *net, load_args *a, int *serve)
{
    *serve = 0;
    if (pc->off || net != fsdp_engine_net(e) || pc->state != FSDP_PCACHE_OFF) return FSDP_OK;
    pc->state = FSDP_PCACHE_UNUSED;
    pc->k = fsdp_prefix_length(e);
    if (pc->k == 0) return FSDP_OK;   /* no frozen prefix: nothing to cache */
    int rank0 = fsdp_engine_ctl(e)->rank == 0;
    char buf[512];
    const char *why = unfit(pc, net, a, buf, sizeof buf);
    if (why) {
        if (rank0) fprintf(stderr, "fsdp: probe cache: not used: %s\n", why);
        return FSDP_OK;
    }
    pc->m = calloc(1, sizeof *pc->m);
    if (!pc->m) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    FSDP_TRY(layout(pc, net));
    fsdp_status s = key(pc, e, net, a);
    if (s == FSDP_ERR_UNSUPPORTED) {
        if (rank0)
            fprintf(stderr, "fsdp: probe cache: not used: %s ends inside the frozen layers: some keep their random "
                    "initialisation\n", pc->weights);
        return FSDP_OK;
    }
    FSDP_TRY(s);
    FSDP_TRY(reuse_or_build(pc, e, net, a, serve));
    if (!*serve) return FSDP_OK;
    pc->row = malloc(sizeof(float) * (size_t)pc->m->floats);
    if (!pc->row) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    pc->state = FSDP_PCACHE_SERVING;
    pc->steps_from = fsdp_tl_clock();
    if (!rank0) return FSDP_OK;
    char served[256] = "";
    for (int j = 0, at = 0; j < pc->nneed && at < (int)sizeof served - 16; ++j)
        at += snprintf(served + at, sizeof served - (size_t)at, "%s%d", j ? ", " : "", pc->need[j]);
    fprintf(stderr, "fsdp: probe cache %s: %s, %.1f MB: %llu images x 2 variants (the image, mirrored), %llu floats "
            "each, the outputs of layer%s %s; each forward starts at layer %d\n", pc->dir, pc->built ? "built" : "reused",
            fsdp_pcache_bytes(pc) / 1e6, (unsigned long long)pc->m->key.nimages, (unsigned long long)pc->m->floats,
            pc->nneed > 1 ? "s" : "", served, pc->k);
    if (pc->built) fprintf(stderr, "fsdp: probe cache: extraction took %.2f s\n", pc->extract_s);
    return FSDP_OK;
}

fsdp_status fsdp_pcache_sample_input(const fsdp_pcache *pc, const char *path, int flip, float *row, int cols)
{
    if (pc->state != FSDP_PCACHE_SERVING) return fsdp_fail(FSDP_ERR_IO, "probe cache: asked for an input while not serving");
    fsdp_pcache_index want = { path, 0 };
    const fsdp_pcache_index *hit = bsearch(&want, pc->index, (size_t)pc->nimages, sizeof want, by_path);
    if (!hit || cols < 3) return fsdp_fail(FSDP_ERR_IO, "probe cache: %s is not in the train list it was made for", path);
    uint64_t v = 2 * (uint64_t)hit->image + (flip != 0);
    row[0] = REF_MARK;
    row[1] = (float)(v / REF_SPLIT);
    row[2] = (float)(v % REF_SPLIT);
    return FSDP_OK;
}

fsdp_status fsdp_pcache_forward_start(fsdp_pcache *pc, fsdp_engine *e, network *net, int *start)
{
    *start = 0;
    if (pc->state != FSDP_PCACHE_SERVING || net != fsdp_engine_net(e)) return FSDP_OK;
    if (!net->train)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "probe cache: a forward outside training on the cache's inputs");
    FSDP_TRY(fsdp_prefix_skip(e, net, pc->k));
    for (int b = 0; b < net->batch; ++b) {
        const float *row = net->input + (size_t)b * net->inputs;
        int named = row[0] == REF_MARK && row[1] >= 0 && row[1] < REF_SPLIT && row[2] >= 0 && row[2] < REF_SPLIT;
        uint64_t v = named ? (uint64_t)row[1] * REF_SPLIT + (uint64_t)row[2] : 0;
        if (!named || v >= pc->m->variants)
            return fsdp_fail(FSDP_ERR_IO, "probe cache: row %d of the batch names no image of the cache", b);
        FSDP_TRY(fsdp_pcache_parts_read(&pc->parts, pc->m, v, pc->row));
        const float *src = pc->row;
        for (int j = 0; j < pc->nneed; ++j) {
            const layer *l = &net->layers[pc->need[j]];
            if (!l->output) return fsdp_fail(FSDP_ERR_IO, "probe cache: layer %d has no output buffer", pc->need[j]);
            memcpy(l->output + (size_t)b * l->outputs, src, sizeof(float) * (size_t)l->outputs);
            src += l->outputs;
        }
    }
    *start = pc->k;
    return FSDP_OK;
}

void fsdp_pcache_predict(const fsdp_pcache *pc, size_t *peak, size_t *pss, int ranks)
{
    if (pc->state != FSDP_PCACHE_SERVING || !*peak) return;
    size_t row = sizeof(float) * (size_t)pc->m->floats;
    *peak += row;
    *pss += row;
    if (pc->rank0)
        fprintf(stderr, "fsdp: probe cache: read through the page cache, which holds its %.1f MB once for the "
                "machine's %d ranks and in none's RSS or PSS; each rank adds a buffer of %.1f KB: predicted peak "
                "%.1f MB, PSS %.1f MB\n", fsdp_pcache_bytes(pc) / 1e6, ranks, row / 1e3, *peak / 1e6, *pss / 1e6);
}

const char *fsdp_pcache_state_str(const fsdp_pcache *pc)
{
    if (pc->state == FSDP_PCACHE_SERVING) return pc->built ? "built" : "reused";
    return pc->state == FSDP_PCACHE_UNUSED && pc->k > 0 ? "unused" : "off";
}

uint64_t fsdp_pcache_bytes(const fsdp_pcache *pc)
{
    uint64_t bytes = 0;
    for (int i = 0; i < pc->parts.nparts; ++i) bytes += pc->parts.bytes[i];
    return bytes;
}

double fsdp_pcache_steps_s(const fsdp_pcache *pc)
{
    return pc->state == FSDP_PCACHE_SERVING ? fsdp_tl_clock() - pc->steps_from : 0;
}

void fsdp_pcache_report(const fsdp_pcache *pc, int rank)
{
    if (rank == 0 && pc->state == FSDP_PCACHE_SERVING)
        fprintf(stderr, "fsdp: probe cache %s: the steps took %.2f s after %s\n", pc->dir, fsdp_pcache_steps_s(pc),
                pc->built ? "its extraction" : "reusing it");
}

void fsdp_pcache_free(fsdp_pcache *pc)
{
    fsdp_pcache_parts_close(&pc->parts);
    free(pc->m);
    free(pc->row);
    free(pc->need);
    free(pc->index);
    free(pc->dir);
    free(pc->cfg);
    free(pc->weights);
    memset(pc, 0, sizeof *pc);
}
