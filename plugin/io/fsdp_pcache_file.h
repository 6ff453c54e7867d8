/* fsdp_pcache_file.h: the probe cache's files (docs/DESIGN.md, "The probe
 * cache").  A folder holds part-I-of-N.bin, one per rank that extracted
 * it (a header, then each variant's floats in order), and MANIFEST, which
 * names the key and every part with its size and checksum.  Each file is
 * written under a temporary name and renamed into place; the manifest
 * comes last, so a folder without one, or whose parts do not match it, is
 * never read.  Every number read is checked against its bounds; symbolic
 * links are not followed.  A run reads the parts with pread, through the
 * page cache: the ranks of a machine share its one copy, which is in no
 * rank's resident set (and the kernel may drop and read it again). */
#ifndef FSDP_PCACHE_FILE_H
#define FSDP_PCACHE_FILE_H

#include <stdio.h>
#include "fsdp_hash.h"
#include "fsdp_pcache_key.h"

#define FSDP_PCACHE_MAX_PARTS 4096
#define FSDP_PCACHE_MAX_FLOATS (1u << 28)        /* per variant */
#define FSDP_PCACHE_MAX_VARIANTS (1ull << 32)
#define FSDP_PCACHE_HEADER 40

typedef struct fsdp_pcache_manifest {
    fsdp_pcache_key key;
    uint64_t floats;     /* per variant */
    uint64_t variants;   /* images x 2 (the image, mirrored) */
    int nparts;
    uint64_t first[FSDP_PCACHE_MAX_PARTS], count[FSDP_PCACHE_MAX_PARTS], hash[FSDP_PCACHE_MAX_PARTS];
} fsdp_pcache_manifest;

/* The bytes of a part holding `count` variants of `floats` floats. */
uint64_t fsdp_pcache_part_bytes(uint64_t count, uint64_t floats);

/* One part being written. */
typedef struct fsdp_pcache_writer {
    FILE *f;
    char tmp[4200], path[4096];
    fsdp_hasher h;
} fsdp_pcache_writer;
fsdp_status fsdp_pcache_part_open(fsdp_pcache_writer *w, const char *dir, int part, int nparts,
                                  const fsdp_pcache_manifest *m);
fsdp_status fsdp_pcache_part_add(fsdp_pcache_writer *w, const float *x, size_t n);
/* Flushed, synced and renamed into place; its checksum in *hash. */
fsdp_status fsdp_pcache_part_close(fsdp_pcache_writer *w, uint64_t *hash);
void fsdp_pcache_part_abandon(fsdp_pcache_writer *w);

/* The manifest, atomically; and removed with every part a build of any
 * world left (a cache being rebuilt is incomplete from the start, and
 * holds no other build's parts). */
fsdp_status fsdp_pcache_manifest_write(const char *dir, const fsdp_pcache_manifest *m);
void fsdp_pcache_manifest_remove(const char *dir);
/* FSDP_OK and *m, or a status with why (no manifest, a malformed one). */
fsdp_status fsdp_pcache_manifest_read(const char *dir, fsdp_pcache_manifest *m, char *why, size_t n);

/* The parts opened read-only and checked against the manifest: header,
 * size, and the checksum of the parts with verify[i] set.  *why on a
 * mismatch. */
typedef struct fsdp_pcache_parts {
    int nparts;
    int fd[FSDP_PCACHE_MAX_PARTS];
    uint64_t bytes[FSDP_PCACHE_MAX_PARTS];
} fsdp_pcache_parts;
fsdp_status fsdp_pcache_parts_open(fsdp_pcache_parts *p, const char *dir, const fsdp_pcache_manifest *m,
                                   const unsigned char *verify, char *why, size_t n);
/* Variant v's floats (m->floats of them) into out. */
fsdp_status fsdp_pcache_parts_read(const fsdp_pcache_parts *p, const fsdp_pcache_manifest *m, uint64_t v, float *out);
void fsdp_pcache_parts_close(fsdp_pcache_parts *p);

#endif
