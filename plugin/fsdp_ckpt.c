#include <stdlib.h>
#include <string.h>
#include "fsdp_ckpt.h"

#define CKPT_MAGIC "FSDPCKP2"
#define CKPT_MAGIC_V1 "FSDPCKP1"   /* before the layout fields: refused by name */

/* What a checkpoint starts with; everything after it is, per group, the
 * trainable then the frozen flat: own, then m and v where kept. */
typedef struct ckpt_header {
    char magic[8];
    uint32_t world, rank;
    uint64_t plan_hash;
    uint64_t seen;
    int32_t t;
    uint32_t ngroups;
    uint32_t strategy;
    uint32_t adam;
    uint32_t align;    /* the flats' tensor alignment in floats: 1 on the host, 64 on a GPU */
    uint32_t pad;
    uint64_t floats;   /* every float that follows */
} ckpt_header;

static char *shard_path(const char *weights, int rank, int world)
{
    size_t n = strlen(weights) + 48;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.fsdp-%d-of-%d", weights, rank, world);
    return p;
}

/* One buffer of n floats (host or device) through a host bounce buffer. */
static fsdp_status put(fsdp_engine *e, FILE *f, float *buf, size_t n, float *host)
{
    if (!n) return FSDP_OK;
    FSDP_TRY(fsdp_mem_to_host(&e->mem, host, buf, n));
    return fwrite(host, sizeof(float), n, f) == n ? FSDP_OK : FSDP_ERR_IO;
}

static fsdp_status get(fsdp_engine *e, FILE *f, float *buf, size_t n, float *host)
{
    if (!n) return FSDP_OK;
    if (fread(host, sizeof(float), n, f) != n) return FSDP_ERR_IO;
    return fsdp_mem_from_host(&e->mem, buf, host, n);
}

static size_t largest_own(const fsdp_engine *e)
{
    size_t n = 1;
    for (int k = 0; k < e->ngroups; ++k) {
        if (e->groups[k].train.own_count > n) n = e->groups[k].train.own_count;
        if (e->groups[k].frozen.own_count > n) n = e->groups[k].frozen.own_count;
    }
    return n;
}

/* own, m, v of every flat, in one order for writing and reading. */
typedef fsdp_status (*flat_io)(fsdp_engine *e, FILE *f, float *buf, size_t n, float *host);

static fsdp_status each_buffer(fsdp_engine *e, FILE *f, float *host, flat_io io)
{
    for (int k = 0; k < e->ngroups; ++k) {
        fsdp_flat *fl[2] = { &e->groups[k].train, &e->groups[k].frozen };
        for (int j = 0; j < 2; ++j) {
            size_t n = fl[j]->own ? fl[j]->own_count : 0;
            FSDP_TRY(io(e, f, fl[j]->own, n, host));
            if (fl[j]->m) FSDP_TRY(io(e, f, fl[j]->m, n, host));
            if (fl[j]->v) FSDP_TRY(io(e, f, fl[j]->v, n, host));
        }
    }
    return FSDP_OK;
}

static ckpt_header header_of(const fsdp_engine *e, const network *net)
{
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.world = (uint32_t)e->be->world;
    h.rank = (uint32_t)e->be->rank;
    h.plan_hash = e->plan_hash;
    h.seen = *net->seen;
    h.t = *net->t;
    h.ngroups = (uint32_t)e->ngroups;
    h.strategy = (uint32_t)e->strategy;
    h.adam = (uint32_t)net->adam;
    h.align = (uint32_t)e->mem.align;
    for (int k = 0; k < e->ngroups; ++k) {
        const fsdp_flat *fl[2] = { &e->groups[k].train, &e->groups[k].frozen };
        for (int j = 0; j < 2; ++j)
            if (fl[j]->own) h.floats += fl[j]->own_count * (1 + !!fl[j]->m + !!fl[j]->v);
    }
    return h;
}

fsdp_status fsdp_ckpt_write(fsdp_engine *e, network *net, const char *weights)
{
    char *path = shard_path(weights, e->be->rank, e->be->world);
    char *tmp = path ? malloc(strlen(path) + 5) : NULL;
    float *host = malloc(largest_own(e) * sizeof(float));
    fsdp_status s = FSDP_OK;
    if (!path || !tmp || !host) {
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory writing a checkpoint");
        goto out;
    }
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        s = fsdp_fail(FSDP_ERR_IO, "cannot write the checkpoint %s", tmp);
        goto out;
    }
    ckpt_header h = header_of(e, net);
    s = fwrite(&h, sizeof h, 1, f) == 1 ? FSDP_OK : FSDP_ERR_IO;
    if (s == FSDP_OK) s = each_buffer(e, f, host, put);
    if (fclose(f) != 0) s = FSDP_ERR_IO;
    if (s == FSDP_OK && rename(tmp, path) != 0) s = FSDP_ERR_IO;
    if (s != FSDP_OK) {
        remove(tmp);
        s = fsdp_fail(s, "cannot write the checkpoint %s", path);
    }
out:
    free(path);
    free(tmp);
    free(host);
    return s;
}

static fsdp_status check_header(const fsdp_engine *e, const network *net, const ckpt_header *h,
                                const char *path)
{
    ckpt_header want = header_of(e, net);
    if (!memcmp(h->magic, CKPT_MAGIC_V1, 8))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s is a checkpoint of an older darknet-fsdp (format 1, "
                         "without its layout); resume from the weights file alone", path);
    if (memcmp(h->magic, CKPT_MAGIC, 8))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s is not a darknet-fsdp checkpoint", path);
    if (h->world != want.world || h->rank != want.rank)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was written by rank %u of %u; this is rank %u of %u "
                         "(resume on the same number of ranks)", path, h->rank, h->world, want.rank, want.world);
    if (h->align != want.align)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was written by a %s run, and this is a %s run: their "
                         "shards are laid out differently; resume on the same kind of device", path,
                         h->align > 1 ? "GPU" : "CPU", want.align > 1 ? "GPU" : "CPU");
    if (h->plan_hash != want.plan_hash || h->ngroups != want.ngroups || h->strategy != want.strategy ||
        h->adam != want.adam)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s was written for another network (layers, frozen flags, "
                         "groups, shard strategy or optimizer differ from this cfg)", path);
    if (h->floats != want.floats)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s holds %llu floats, this run's shards %llu", path,
                         (unsigned long long)h->floats, (unsigned long long)want.floats);
    if (h->seen != want.seen)
        return fsdp_fail(FSDP_ERR_MISMATCH, "%s is from another save than the weights file (seen %llu, "
                         "weights file %llu); resume from the weights file it was saved with", path,
                         (unsigned long long)h->seen, (unsigned long long)want.seen);
    return FSDP_OK;
}

/* Every rank reads its own file; all stop together if any rank cannot. */
fsdp_status fsdp_ckpt_read(fsdp_engine *e, network *net)
{
    fsdp_status s = FSDP_OK;
    char *path = NULL;
    float *host = NULL;
    FILE *f = NULL;
    if (!e->weights_file) {
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume needs the weights file the checkpoint was saved "
                      "with on the command line");
        goto agree;
    }
    path = shard_path(e->weights_file, e->be->rank, e->be->world);
    host = malloc(largest_own(e) * sizeof(float));
    if (!path || !host) {
        s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory reading a checkpoint");
        goto agree;
    }
    f = fopen(path, "rb");
    if (!f) {
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-resume: cannot open %s (saved with -fsdp-checkpoint "
                      "on %d ranks?)", path, e->be->world);
        goto agree;
    }
    ckpt_header h;
    if (fread(&h, sizeof h, 1, f) != 1) s = fsdp_fail(FSDP_ERR_CONFIG, "%s: too short for a checkpoint", path);
    if (s == FSDP_OK) s = check_header(e, net, &h, path);
    if (s == FSDP_OK && each_buffer(e, f, host, get) != FSDP_OK)
        s = fsdp_fail(FSDP_ERR_CONFIG, "%s: shorter than its header says (truncated?)", path);
    if (s == FSDP_OK && fgetc(f) != EOF) s = fsdp_fail(FSDP_ERR_CONFIG, "%s: longer than its header says", path);
    if (s == FSDP_OK) *net->t = h.t;
agree:
    if (f) fclose(f);
    free(path);
    free(host);
    s = fsdp_backend_all_ok(e->be, s, FSDP_ERR_MISMATCH, "could not load its checkpoint");
    return s;
}
