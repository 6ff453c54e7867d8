#include <limits.h>
#include <string.h>
#include "fsdp_ckpt_check.h"

/* fsdp_strategy's values (fsdp_cfg.h): full, grad_op, none. */
enum { FULL = 0, GRAD_OP = 1, NONE = 2 };

fsdp_ckpt_flat fsdp_ckpt_writer_part(uint32_t strategy, uint32_t world, uint32_t rank, uint64_t count,
                                     uint32_t align, int state, int adam)
{
    fsdp_ckpt_flat p = { count, 0, 0, 0, 0 };
    /* An empty flat, or replicated frozen parameters: no own part
     * (fsdp_flat.c's own_count). */
    if (!count || (strategy != FULL && !state)) return p;
    uint64_t a = align ? align : 1, shard = count / world + (count % world != 0);
    shard = (shard + a - 1) / a * a;
    p.nbuf = state ? 2u + (adam != 0) : 1u;
    if (strategy == NONE) {
        p.n = count;
        return p;
    }
    p.lo = (uint64_t)rank * shard;
    p.n = shard;
    return p;
}

const char *fsdp_ckpt_part_differs(const fsdp_ckpt_flat *have, const fsdp_ckpt_flat *want)
{
    return have->count != want->count ? "count" : have->lo != want->lo ? "lo" : have->n != want->n ? "n"
           : have->nbuf != want->nbuf ? "nbuf" : have->pad != want->pad ? "pad" : NULL;
}

int fsdp_ckpt_file_bytes(uint64_t header, const fsdp_ckpt_flat *t, size_t nf, int self, uint64_t extras,
                         uint64_t *bytes)
{
    uint64_t at = header, k;
    if (__builtin_mul_overflow((uint64_t)nf, (uint64_t)sizeof *t, &k) || __builtin_add_overflow(at, k, &at))
        return -1;
    for (size_t i = 0; i < nf; ++i)
        if (__builtin_mul_overflow(t[i].n, (uint64_t)t[i].nbuf, &k) || __builtin_mul_overflow(k, 4, &k) ||
            __builtin_add_overflow(at, k, &at))
            return -1;
    if (self && (__builtin_mul_overflow(extras, 4, &k) || __builtin_add_overflow(at, k, &at) ||
                 __builtin_add_overflow(at, 8, &at)))
        return -1;
    if (__builtin_add_overflow(at, 8, &at)) return -1;
    *bytes = at;
    return 0;
}

int fsdp_ckpt_t_fits(int32_t t, uint64_t seen)
{
    return t >= 0 && t < INT32_MAX && (uint64_t)t <= seen && (t >= 1 || seen == 0);
}

/* Decimal digits at *p, no leading zero but "0" itself, at most `max`;
 * -1 where there are none or it is larger.  *p moves past them. */
static long digits(const char **p, long max)
{
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9')) return -1;
    for (; *s >= '0' && *s <= '9'; ++s) {
        v = v * 10 + (*s - '0');
        if (v > max) return -1;
    }
    *p = s;
    return v;
}

int fsdp_ckpt_name_world(const char *name, const char *prefix, int rank)
{
    size_t k = strlen(prefix);
    if (strncmp(name, prefix, k) || strncmp(name + k, ".fsdp-", 6)) return -1;
    const char *p = name + k + 6;
    long r = digits(&p, FSDP_CKPT_MAX_WORLD);
    if (r < 0 || strncmp(p, "-of-", 4)) return -1;
    p += 4;
    long w = digits(&p, FSDP_CKPT_MAX_WORLD);
    if (w < 1 || *p || r >= w || (rank >= 0 && r != rank)) return -1;
    return (int)w;
}
