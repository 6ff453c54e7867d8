/* fsdp_pcache_key.h: what a probe cache's features depend on (docs/DESIGN.md,
 * "The probe cache"), and whether a run's inputs come from a finite set. */
#ifndef FSDP_PCACHE_KEY_H
#define FSDP_PCACHE_KEY_H

#include <stdint.h>
#include "darknet.h"
#include "fsdp.h"

/* Each part of the key, compared one by one so a refusal can name it. */
typedef struct fsdp_pcache_key {
    uint64_t cfg;        /* the prefix's sections of the cfg, comments, blank lines and shard_ keys left out */
    uint64_t weights;    /* the prefix's floats in the weights file */
    uint64_t images;     /* each image's path, size and modification time, in the list's order */
    uint64_t layout;     /* the prefix's length, the outputs served, the crop mode */
    uint64_t nimages;
    int w, h, c;
} fsdp_pcache_key;

#define FSDP_PCACHE_KEY_PARTS 5
/* Names the first part of the key where a and b differ; NULL if none. */
const char *fsdp_pcache_key_differs(const fsdp_pcache_key *a, const fsdp_pcache_key *b);

/* NULL where the loader's input for an image is one of its two variants
 * (itself, mirrored); else the cfg key or setting that makes it random,
 * e.g. "max_crop=56 (the crop's scale is random unless min_crop = max_crop
 * = width)". */
const char *fsdp_pcache_random_input(const network *net, const load_args *a, char *buf, size_t n);

/* The prefix's sections (layers [0, k)) of cfg: their hash. */
fsdp_status fsdp_pcache_hash_cfg(const char *cfg, int k, uint64_t *hash);
/* The prefix's floats in the weights file, as load_weights reads them;
 * FSDP_ERR_UNSUPPORTED, nothing printed, where the file ends inside the
 * prefix (load_weights stops there quietly: the rest keeps its random
 * initialisation). */
fsdp_status fsdp_pcache_hash_weights(const network *net, int k, const char *file, uint64_t *hash);
/* Each of the n images' path, size and modification time. */
fsdp_status fsdp_pcache_hash_images(char **paths, int n, uint64_t *hash);

#endif
