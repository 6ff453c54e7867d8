/* The probe cache's extraction (fsdp_pcache_build.h). */
#include <stdlib.h>
#include <string.h>
#include "dn_rand.h"
#include "image.h"
#include "fsdp_pcache_build.h"
#include "fsdp_prefix.h"

/* The image last decoded and cropped: its two variants come in a row. */
typedef struct crop_memo {
    int image;           /* -1: none */
    int fixed;           /* its crop's offsets are not random */
    image crop;          /* before the flip */
} crop_memo;

/* Variant v's input as the loader makes it (load_image_augment_paths),
 * its flip given; the draws come from a stream of their own, so the run's
 * own streams are untouched, and (with min_crop = max_crop = the image's
 * size, or center=1) their values are fixed.  0 where the image's size
 * makes the crop's offsets random. */
static int prepare(const load_args *a, char **paths, int img, int flip, crop_memo *memo, float *row)
{
    dn_rand_thread_begin(1, 0, 0);
    dn_rand_sample(0, 1);
    if (memo->image != img) {
        free_image(memo->crop);
        image im = load_image_color(paths[img], 0, 0);
        memo->fixed = a->center || (im.w == a->size && im.h == a->size);
        memo->crop = a->center ? center_crop_image(im, a->size, a->size)
                               : random_augment_image(im, a->angle, a->aspect ? a->aspect : 1, a->min, a->max,
                                                      a->size, a->size);
        memo->image = img;
        free_image(im);
    }
    image crop = copy_image(memo->crop);
    if (flip) flip_image(crop);
    random_distort_image(crop, a->hue, a->saturation ? a->saturation : 1, a->exposure ? a->exposure : 1);
    memcpy(row, crop.data, sizeof(float) * (size_t)a->size * a->size * 3);
    free_image(crop);
    dn_rand_thread_end();
    return memo->fixed;
}

/* Row b's served outputs, one after the other, into out. */
static void collect(const fsdp_pcache *pc, const network *net, int b, float *out)
{
    for (int j = 0; j < pc->nneed; ++j) {
        const layer *l = &net->layers[pc->need[j]];
        memcpy(out, l->output + (size_t)b * l->outputs, sizeof(float) * (size_t)l->outputs);
        out += l->outputs;
    }
}

/* One batch of this rank's variants [first + from, ...): rows past its
 * share repeat its last variant and are not written. */
static fsdp_status batch(fsdp_pcache *pc, fsdp_engine *e, network *net, const load_args *a, char **paths,
                         uint64_t first, uint64_t count, uint64_t from, fsdp_pcache_writer *w, float *buf, int *bad,
                         crop_memo *memo)
{
    int rows = 0;
    for (int b = 0; b < net->batch; ++b) {
        uint64_t j = from + (uint64_t)b;
        if (j < count) rows = b + 1;
        uint64_t v = first + (count ? (j < count ? j : count - 1) : 0);
        int image = (int)(v / 2);
        if (!prepare(a, paths, image, (int)(v % 2), memo, net->input + (size_t)b * net->inputs) && !*bad) {
            fprintf(stderr, "fsdp: probe cache: not used: %s is not %dx%d, the crop's size: its crop's offsets "
                    "are random\n", paths[image], a->size, a->size);
            *bad = 1;
        }
    }
    FSDP_TRY(fsdp_prefix_forward(e, net, pc->k));
    for (int b = 0; b < rows && count; ++b) collect(pc, net, b, buf + (size_t)b * pc->m->floats);
    fsdp_prefix_forward_done(e, net, pc->k);
    return *bad ? FSDP_OK : fsdp_pcache_part_add(w, buf, (size_t)rows * pc->m->floats);
}

/* Every rank's part: extracted, written, its checksum in hash[rank]. */
static fsdp_status extract(fsdp_pcache *pc, fsdp_engine *e, network *net, const load_args *a, char **paths,
                           uint64_t *hash, int *bad)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    fsdp_pcache_manifest *m = pc->m;
    uint64_t first = m->first[ctl->rank], count = m->count[ctl->rank];
    uint64_t most = 0;
    for (int r = 0; r < m->nparts; ++r) most = m->count[r] > most ? m->count[r] : most;
    fsdp_pcache_writer w;
    fsdp_status s = fsdp_pcache_part_open(&w, pc->dir, ctl->rank, m->nparts, m);
    float *buf = s == FSDP_OK ? malloc(sizeof(float) * (size_t)net->batch * m->floats) : NULL;
    if (s == FSDP_OK && !buf) s = fsdp_fail(FSDP_ERR_NOMEM, "probe cache: out of memory");
    /* Every rank runs as many batches: the prefix's gathers are collective. */
    crop_memo memo = { -1, 0, { 0 } };
    for (uint64_t from = 0; from < most && s == FSDP_OK; from += (uint64_t)net->batch)
        s = batch(pc, e, net, a, paths, first, count, from, &w, buf, bad, &memo);
    free_image(memo.crop);
    free(buf);
    if (s == FSDP_OK && !*bad) return fsdp_pcache_part_close(&w, &hash[ctl->rank]);
    fsdp_pcache_part_abandon(&w);
    return s;
}

fsdp_status fsdp_pcache_build(fsdp_pcache *pc, fsdp_engine *e, network *net, const load_args *a, char **paths,
                              int *bad)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    uint64_t *hash = calloc((size_t)ctl->world, sizeof *hash);
    if (!hash) return fsdp_fail(FSDP_ERR_NOMEM, "probe cache: out of memory");
    *bad = 0;
    fsdp_status s = extract(pc, e, net, a, paths, hash, bad);
    s = fsdp_ctl_all_ok(ctl, s, FSDP_ERR_IO, "could not build the probe cache");
    uint64_t any = (uint64_t)*bad;
    if (s == FSDP_OK) s = fsdp_ctl_max_u64(ctl, &any, 1);
    if (s == FSDP_OK) s = fsdp_ctl_max_u64(ctl, hash, (size_t)ctl->world);
    *bad = any != 0;
    if (s == FSDP_OK && !*bad && ctl->rank == 0) {
        memcpy(pc->m->hash, hash, sizeof *hash * (size_t)ctl->world);
        s = fsdp_pcache_manifest_write(pc->dir, pc->m);
    }
    free(hash);
    return fsdp_ctl_all_ok(ctl, s, FSDP_ERR_IO, "could not write the probe cache's manifest");
}
