/* fsdp_pcache_build.h: the probe cache's extraction, divided over the
 * ranks (fsdp_pcache.h): each rank runs the frozen prefix on its share of
 * the images and variants, prepared exactly as Darknet's loader prepares
 * them, and writes its part; rank 0 then writes the manifest. */
#ifndef FSDP_PCACHE_BUILD_H
#define FSDP_PCACHE_BUILD_H

#include "fsdp_pcache.h"

/* Collective.  *bad set (every rank) where an image makes the input random
 * (its size is not the crop's): the cache is then not used, and the rank
 * that found it has said which. */
fsdp_status fsdp_pcache_build(fsdp_pcache *pc, fsdp_engine *e, network *net, const load_args *a, char **paths,
                              int *bad);

#endif
