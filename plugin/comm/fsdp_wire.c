/* Parameters and sums on the wire between machines (fsdp_wire.h). */
#include <math.h>
#include <string.h>
#include "fsdp_wire.h"

static const char *const names[] = { "fp32", "bf16", "int8" };

const char *fsdp_wire_name(fsdp_wire_format f) { return (unsigned)f < 3 ? names[f] : "?"; }

int fsdp_wire_parse(const char *text)
{
    for (int k = 0; k < 3; ++k)
        if (!strcmp(text, names[k])) return k;
    return -1;
}

size_t fsdp_wire_bytes(fsdp_wire_format f, size_t n)
{
    switch (f) {
    case FSDP_WIRE_BF16: return 2 * n;
    case FSDP_WIRE_INT8: return n + sizeof(float) * ((n + FSDP_WIRE_BLOCK - 1) / FSDP_WIRE_BLOCK);
    default: return sizeof(float) * n;
    }
}

double fsdp_wire_error(fsdp_wire_format f)
{
    return f == FSDP_WIRE_BF16 ? 1.0 / 256 : f == FSDP_WIRE_INT8 ? 0.5 / 127 : 0;
}

/* Round to nearest even on the upper half; NaN stays NaN. */
static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* int8 layout: the blocks' scales first, then the bytes. */
static void encode_int8(const float *x, size_t n, unsigned char *out)
{
    size_t blocks = (n + FSDP_WIRE_BLOCK - 1) / FSDP_WIRE_BLOCK;
    int8_t *q = (int8_t *)(out + sizeof(float) * blocks);
    for (size_t b = 0; b < blocks; ++b) {
        size_t lo = b * FSDP_WIRE_BLOCK, hi = lo + FSDP_WIRE_BLOCK < n ? lo + FSDP_WIRE_BLOCK : n;
        float most = 0;
        for (size_t i = lo; i < hi; ++i) most = fmaxf(most, fabsf(x[i]));
        float scale = most / 127.0f, inv = most > 0 ? 127.0f / most : 0;
        memcpy(out + sizeof(float) * b, &scale, sizeof scale);
        for (size_t i = lo; i < hi; ++i) {
            float v = nearbyintf(x[i] * inv);
            q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
}

static void decode_int8(const unsigned char *in, size_t n, float *x)
{
    size_t blocks = (n + FSDP_WIRE_BLOCK - 1) / FSDP_WIRE_BLOCK;
    const int8_t *q = (const int8_t *)(in + sizeof(float) * blocks);
    for (size_t b = 0; b < blocks; ++b) {
        size_t lo = b * FSDP_WIRE_BLOCK, hi = lo + FSDP_WIRE_BLOCK < n ? lo + FSDP_WIRE_BLOCK : n;
        float scale;
        memcpy(&scale, in + sizeof(float) * b, sizeof scale);
        for (size_t i = lo; i < hi; ++i) x[i] = scale * (float)q[i];
    }
}

void fsdp_wire_encode(fsdp_wire_format f, const float *x, size_t n, void *out)
{
    if (f == FSDP_WIRE_BF16) {
        uint16_t *h = out;
        for (size_t i = 0; i < n; ++i) h[i] = to_bf16(x[i]);
    } else if (f == FSDP_WIRE_INT8) {
        encode_int8(x, n, out);
    } else if (out != (const void *)x) {
        memcpy(out, x, sizeof(float) * n);
    }
}

void fsdp_wire_decode(fsdp_wire_format f, const void *in, size_t n, float *x)
{
    if (f == FSDP_WIRE_BF16) {
        const uint16_t *h = in;
        for (size_t i = 0; i < n; ++i) x[i] = from_bf16(h[i]);
    } else if (f == FSDP_WIRE_INT8) {
        decode_int8(in, n, x);
    } else if (in != (const void *)x) {
        memcpy(x, in, sizeof(float) * n);
    }
}
