/* Buffers shared by lifetime (fsdp_bufs.h). */
#include <stdlib.h>
#include "fsdp_bufs.h"

fsdp_status fsdp_bufs_init(fsdp_bufs *s, int max, int zero)
{
    *s = (fsdp_bufs){ .max = max > 0 ? max : 1, .zero = zero };
    s->cap = calloc((size_t)s->max, sizeof *s->cap);
    s->until = calloc((size_t)s->max, sizeof *s->until);
    return s->cap && s->until ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
}

int fsdp_bufs_take(fsdp_bufs *s, size_t need, int start, int stop)
{
    int fit = -1, big = -1;
    for (int b = 0; b < s->n; ++b) {
        if (s->until[b] >= start) continue;
        if (s->cap[b] >= need && (fit < 0 || s->cap[b] < s->cap[fit])) fit = b;
        if (big < 0 || s->cap[b] > s->cap[big]) big = b;
    }
    int b = fit >= 0 ? fit : big >= 0 ? big : s->n++;
    if (s->cap[b] < need) s->cap[b] = need;
    s->until[b] = stop;
    return b;
}

fsdp_status fsdp_bufs_alloc(fsdp_bufs *s, const fsdp_mem_ctx *m)
{
    s->ptr = calloc((size_t)s->max, sizeof *s->ptr);
    if (!s->ptr) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int b = 0; b < s->n; ++b)
        if (!(s->ptr[b] = fsdp_mem_alloc(m, s->cap[b], s->zero)))
            return fsdp_fail(FSDP_ERR_NOMEM, "out of memory for %zu MB of activations", (s->cap[b] * sizeof(float)) >> 20);
    return FSDP_OK;
}

fsdp_status fsdp_bufs_grow(fsdp_bufs *s, const fsdp_mem_ctx *m, int b, size_t need)
{
    if (need <= s->cap[b]) return FSDP_OK;
    fsdp_mem_free(m, s->ptr[b]);
    s->cap[b] = need;
    s->ptr[b] = fsdp_mem_alloc(m, need, s->zero);
    return s->ptr[b] ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory growing activations to %zu MB",
                                           (need * sizeof(float)) >> 20);
}

fsdp_status fsdp_bufs_index(int n, const int *buf, const int *key, int **at, int **list)
{
    size_t cap = n > 0 ? (size_t)n : 1;
    int *fill = calloc(cap, sizeof *fill);
    *at = calloc(cap + 1, sizeof **at);
    *list = malloc(cap * sizeof **list);
    if (!fill || !*at || !*list) {
        free(fill);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < n; ++j)
        if (buf[j] >= 0) ++(*at)[key[j] + 1];
    for (int i = 0; i < n; ++i) (*at)[i + 1] += (*at)[i];
    for (int j = 0; j < n; ++j)
        if (buf[j] >= 0) (*list)[(*at)[key[j]] + fill[key[j]]++] = j;
    free(fill);
    return FSDP_OK;
}

size_t fsdp_bufs_bytes(const fsdp_bufs *s)
{
    size_t n = 0;
    for (int b = 0; s->ptr && b < s->n; ++b) n += s->cap[b];
    return n * sizeof(float);
}

void fsdp_bufs_free(fsdp_bufs *s, const fsdp_mem_ctx *m)
{
    for (int b = 0; s->ptr && b < s->n; ++b) fsdp_mem_free(m, s->ptr[b]);
    free(s->ptr);
    free(s->cap);
    free(s->until);
    *s = (fsdp_bufs){ 0 };
}
