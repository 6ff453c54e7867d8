/* fsdp_wire.h: the bytes that cross between machines: how parameters and
 * gradient sums are written on the wire (shard_wire, docs/cfg-keys.md) and
 * how many went each way.
 *
 *   fp32  the floats as they are (the default: exact).
 *   bf16  each float's upper 16 bits, rounded to nearest even: 8 bits of
 *         mantissa, the exponent whole.
 *   int8  blocks of FSDP_WIRE_BLOCK floats, each an fp32 scale (the
 *         block's largest magnitude / 127) and one signed byte per float,
 *         rounded to nearest: an error of at most scale / 2 per float.
 *
 * Encoding is a pure function of the floats, so a seeded run repeats byte
 * for byte.  Sums are decoded before they are added, and added in fp32. */
#ifndef FSDP_WIRE_H
#define FSDP_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef enum fsdp_wire_format { FSDP_WIRE_FP32 = 0, FSDP_WIRE_BF16, FSDP_WIRE_INT8 } fsdp_wire_format;

#define FSDP_WIRE_BLOCK 256

/* A backend's exchanges with other machines: the format they use now, and
 * the bytes posted to and from other machines so far. */
typedef struct fsdp_wire {
    fsdp_wire_format format;
    uint64_t out, in;
} fsdp_wire;

const char *fsdp_wire_name(fsdp_wire_format f);
/* "fp32", "bf16", "int8": its format; -1: none of them. */
int fsdp_wire_parse(const char *text);
/* Bytes of n floats on the wire. */
size_t fsdp_wire_bytes(fsdp_wire_format f, size_t n);
/* The largest error of one float in encoding, relative to its block's
 * largest magnitude (int8) or to itself (bf16); 0 for fp32. */
double fsdp_wire_error(fsdp_wire_format f);
void fsdp_wire_encode(fsdp_wire_format f, const float *x, size_t n, void *out);
void fsdp_wire_decode(fsdp_wire_format f, const void *in, size_t n, float *x);

#endif
