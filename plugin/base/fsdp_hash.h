/* fsdp_hash.h: a 64-bit checksum of a byte stream, eight bytes a step: fast
 * enough to run over every checkpoint and weights file it guards, and the
 * same whatever pieces the stream is fed in.  Each step is a bijection of
 * the running value for a fixed word, so a change in any one word always
 * changes the result.  It catches corruption and mix-ups (a flipped bit, a
 * file of another run), not attacks.  Beside it, FNV-1a for the
 * fingerprints whose values are kept (below). */
#ifndef FSDP_HASH_H
#define FSDP_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "fsdp.h"

typedef struct fsdp_hasher {
    uint64_t h, len;
    unsigned char tail[8];
    size_t ntail;
} fsdp_hasher;

static inline uint64_t fsdp_hash_word(uint64_t h, uint64_t w)
{
    return (((h << 27) | (h >> 37)) ^ w) * 0x9e3779b97f4a7c15ull;
}

static inline void fsdp_hasher_init(fsdp_hasher *s)
{
    memset(s, 0, sizeof *s);
    s->h = 0x243f6a8885a308d3ull;
}

static inline void fsdp_hasher_add(fsdp_hasher *s, const void *p, size_t n)
{
    const unsigned char *c = p;
    s->len += n;
    while (n && s->ntail) {
        s->tail[s->ntail++] = *c++;
        --n;
        if (s->ntail == 8) {
            uint64_t w;
            memcpy(&w, s->tail, 8);
            s->h = fsdp_hash_word(s->h, w);
            s->ntail = 0;
        }
    }
    for (; n >= 8; n -= 8, c += 8) {
        uint64_t w;
        memcpy(&w, c, 8);
        s->h = fsdp_hash_word(s->h, w);
    }
    memcpy(s->tail + s->ntail, c, n);
    s->ntail += n;
}

static inline uint64_t fsdp_hasher_end(const fsdp_hasher *s)
{
    uint64_t w = 0;
    memcpy(&w, s->tail, s->ntail);
    return fsdp_hash_word(fsdp_hash_word(s->h, w), s->len);
}

/* One buffer's checksum. */
static inline uint64_t fsdp_hash(const void *p, size_t n)
{
    fsdp_hasher s;
    fsdp_hasher_init(&s);
    fsdp_hasher_add(&s, p, n);
    return fsdp_hasher_end(&s);
}

/* FNV-1a, 64 bits, a byte a step, continued from h (FSDP_FNV1A_START to
 * start): the fingerprint of what ranks must agree on.  Slower than the
 * checksum above, but its values are kept: checkpoints store the plan hash
 * (fsdp_engine.c), so neither the arithmetic nor the start may change.  The
 * start is not FNV's offset basis, 14695981039346656037, but that number
 * short of its last digit, as the plan hash has always been seeded. */
#define FSDP_FNV1A_START 1469598103934665603ull

static inline uint64_t fsdp_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* A file's size and the checksum of its bytes (fsdp_hash.c); an error
 * naming the file and the system's reason when it cannot be read. */
fsdp_status fsdp_hash_file(const char *path, uint64_t *size, uint64_t *hash);

#endif
