/* fsdp_ckpt_check.h: what a checkpoint's numbers may be.  A checkpoint file
 * is validated, not authenticated: its checksum catches corruption, not a
 * file made to pass it, so every number it holds is checked against the
 * run's own layout and the file's size, with arithmetic that cannot wrap,
 * before it sizes, offsets or indexes anything. */
#ifndef FSDP_CKPT_CHECK_H
#define FSDP_CKPT_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* The largest world a checkpoint, a MANIFEST or a shard file's name may
 * name: bounded before anything is allocated by it. */
#define FSDP_CKPT_MAX_WORLD 65536
/* Where a shard file's header holds its seen (a uint64): a MANIFEST's seen
 * is compared with it. */
#define FSDP_CKPT_SEEN_AT 24

/* A table entry of format 3 (fsdp_ckpt.c): a flat's part in one file. */
typedef struct fsdp_ckpt_flat {
    uint64_t count;          /* floats of the whole flat */
    uint64_t lo, n;          /* this file's part: [lo, lo + n) */
    uint32_t nbuf;           /* 0 (not kept: replicated frozen), 1 (frozen), 2 (SGD), 3 (Adam) */
    uint32_t pad;
} fsdp_ckpt_flat;

/* The part rank `rank` of a `world`-rank run of `strategy` (fsdp_strategy)
 * writes for a flat of `count` floats (its layout's, alignment gaps
 * included), `state`: trainable, `adam`: Adam's moments kept, `align`: the
 * shards' alignment in floats.  The caller has bounded world and align. */
fsdp_ckpt_flat fsdp_ckpt_writer_part(uint32_t strategy, uint32_t world, uint32_t rank, uint64_t count,
                                     uint32_t align, int state, int adam);
/* The first field of `have` that is not `want`'s ("count", "lo", "n",
 * "nbuf", "pad"), or NULL when it is the same part. */
const char *fsdp_ckpt_part_differs(const fsdp_ckpt_flat *have, const fsdp_ckpt_flat *want);
/* Bytes of a file of header `header` bytes, table t[nf], its buffers and,
 * where self, the extras' count and extras floats, and the checksum;
 * -1 where that does not fit in 64 bits. */
int fsdp_ckpt_file_bytes(uint64_t header, const fsdp_ckpt_flat *t, size_t nf, int self, uint64_t extras,
                         uint64_t *bytes);
/* Whether an optimizer step count t fits a run that saw `seen` images:
 * each update counts one and sees at least one image, so 0 <= t <= seen,
 * t >= 1 once anything was seen, and t < INT32_MAX (the next update). */
int fsdp_ckpt_t_fits(int32_t t, uint64_t seen);
/* The world a shard file's name says: NAME.fsdp-R-of-W past `prefix`,
 * strictly (decimal digits, no sign or spaces, no leading zero, W in 1 to
 * FSDP_CKPT_MAX_WORLD, R < W); -1 where it is not such a name.  `rank`:
 * -1 for any rank, else the one wanted. */
int fsdp_ckpt_name_world(const char *name, const char *prefix, int rank);

#endif
