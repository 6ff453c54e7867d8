#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_wire.h"

const char *fsdp_strategy_str(fsdp_strategy s)
{
    switch (s) {
    case FSDP_SHARD_FULL: return "full";
    case FSDP_SHARD_GRAD_OP: return "grad_op";
    case FSDP_SHARD_NONE: return "none";
    }
    return "?";
}

void fsdp_cfg_init(fsdp_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->strategy = FSDP_SHARD_FULL;
    c->reshard_after_forward = FSDP_CFG_DEFAULT_RESHARD;
    c->prefetch = 0;
    c->sync_bn = FSDP_CFG_DEFAULT_SYNC_BN;
}

void fsdp_cfg_free(fsdp_cfg *c)
{
    for (int i = 0; i < c->nlayers; ++i) free(c->layers[i].group);
    free(c->layers);
    free(c->file);
    memset(c, 0, sizeof *c);
}

static int error(fsdp_cfg *c, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int error(fsdp_cfg *c, const char *file, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fsdp_fail(FSDP_ERR_CONFIG, "%s:%d: %s", file, line, msg);
    if (!c->error) c->error = FSDP_ERR_CONFIG;
    return 1; /* the key is ours even when its value is bad */
}

int fsdp_group_name_valid(const char *name)
{
    int seg = 0;
    if (!*name) return 0;
    for (const char *p = name; *p; ++p) {
        if (*p == '.') {
            if (seg == 0) return 0;
            seg = 0;
        } else if (isalnum((unsigned char)*p) || *p == '_' || *p == '-') {
            ++seg;
        } else {
            return 0;
        }
    }
    return seg > 0;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "0")) { *out = 0; return 1; }
    if (!strcmp(v, "1")) { *out = 1; return 1; }
    return 0;
}

static fsdp_layer_cfg *layer_cfg(fsdp_cfg *c, int layer)
{
    if (layer >= c->cap) {
        int cap = c->cap ? c->cap : 16;
        while (cap <= layer) cap *= 2;
        fsdp_layer_cfg *l = realloc(c->layers, (size_t)cap * sizeof *l);
        if (!l) return NULL;
        memset(l + c->cap, 0, (size_t)(cap - c->cap) * sizeof *l);
        c->layers = l;
        c->cap = cap;
    }
    if (layer >= c->nlayers) c->nlayers = layer + 1;
    return &c->layers[layer];
}

static int net_option(fsdp_cfg *c, const char *file, int line, const char *key, const char *val)
{
    if (!strcmp(key, "shard")) {
        if (!strcmp(val, "full")) c->strategy = FSDP_SHARD_FULL;
        else if (!strcmp(val, "grad_op")) c->strategy = FSDP_SHARD_GRAD_OP;
        else if (!strcmp(val, "none")) c->strategy = FSDP_SHARD_NONE;
        else return error(c, file, line, "shard=%s: expected full, grad_op or none", val);
        return 1;
    }
    if (!strcmp(key, "reshard_after_forward")) {
        if (!parse_bool(val, &c->reshard_after_forward))
            return error(c, file, line, "reshard_after_forward=%s: expected 0 or 1", val);
        return 1;
    }
    if (!strcmp(key, "shard_prefetch")) {
        if (!parse_bool(val, &c->prefetch))
            return error(c, file, line, "shard_prefetch=%s: expected 0 or 1", val);
        c->prefetch_set = 1;
        return 1;
    }
    if (!strcmp(key, "shard_wire")) {
        int w = fsdp_wire_parse(val);
        if (w < 0) return error(c, file, line, "shard_wire=%s: expected fp32, bf16 or int8", val);
        c->wire = w;
        return 1;
    }
    if (!strcmp(key, "shard_node_shared")) {
        if (!parse_bool(val, &c->node_shared))
            return error(c, file, line, "shard_node_shared=%s: expected 0 or 1", val);
        c->node_shared_set = 1;
        return 1;
    }
    if (!strcmp(key, "sync_bn")) {
        if (!parse_bool(val, &c->sync_bn))
            return error(c, file, line, "sync_bn=%s: expected 0 or 1%s", val, "");
        return 1;
    }
    if (!strcmp(key, "shard_auto_group")) {
        char *end = NULL;
        errno = 0;
        long n = strtol(val, &end, 10);
        if (errno || !*val || *end || n < 0)
            return error(c, file, line, "shard_auto_group=%s: expected a parameter count >= 0", val);
        c->auto_group = n;
        c->auto_group_set = 1;
        return 1;
    }
    if (!strcmp(key, "recompute")) {
        if (!parse_bool(val, &c->recompute))
            return error(c, file, line, "recompute=%s: expected 0 or 1", val);
        c->recompute_line = line;
        return 1;
    }
    const fsdp_cfg_key *k = fsdp_cfg_key_find(key);
    if (k && !(k->where & FSDP_KEY_NET))
        return error(c, file, line, "%s is a layer key; it has no meaning in [net]", key);
    if (!strncmp(key, "shard_", 6))
        return error(c, file, line, "unknown key %s (known: %s)", key, fsdp_cfg_keys_known(FSDP_KEY_NET));
    return 0;
}

static int layer_option(fsdp_cfg *c, const char *file, int line, int layer, const char *key, const char *val)
{
    int is_frozen = !strcmp(key, "frozen"), is_group = !strcmp(key, "shard_group");
    if (!strcmp(key, "recompute")) {
        fsdp_layer_cfg *l = layer_cfg(c, layer);
        if (!l) return error(c, file, line, "out of memory reading %s", key);
        if (!parse_bool(val, &l->recompute)) return error(c, file, line, "recompute=%s: expected 0 or 1", val);
        l->recompute_line = line;
        return 1;
    }
    if (!is_frozen && !is_group) {
        if (!strncmp(key, "shard", 5) || fsdp_cfg_key_find(key))
            return error(c, file, line, "unknown layer key %s (layers take %s; the others belong in [net])", key,
                         fsdp_cfg_keys_known(FSDP_KEY_LAYER));
        return 0;
    }
    fsdp_layer_cfg *l = layer_cfg(c, layer);
    if (!l) return error(c, file, line, "out of memory reading %s", key);
    if (is_frozen) {
        if (!parse_bool(val, &l->frozen)) return error(c, file, line, "frozen=%s: expected 0 or 1", val);
        l->frozen_line = line;
        return 1;
    }
    if (!fsdp_group_name_valid(val))
        return error(c, file, line, "shard_group=%s: a group name is [A-Za-z0-9_-]+ joined by dots", val);
    /* The plan holds every level of every name: a 20,000-level name once
     * took 1.7 GB.  Real models nest a few levels. */
    int depth = 1;
    for (const char *p = val; *p; ++p) depth += *p == '.';
    if (depth > FSDP_MAX_GROUP_DEPTH)
        return error(c, file, line, "shard_group=%.40s...: %d levels; groups nest at most %d deep", val, depth,
                     FSDP_MAX_GROUP_DEPTH);
    free(l->group);
    l->group = strdup(val);
    l->group_line = line;
    return 1;
}

int fsdp_cfg_option(fsdp_cfg *c, const char *file, int line, int layer, const char *key, const char *val)
{
    if (!c->file || strcmp(c->file, file)) {
        /* A new cfg: the network being built now. */
        char *f = strdup(file);
        fsdp_cfg_free(c);
        fsdp_cfg_init(c);
        c->file = f;
    }
    if (layer >= 0) layer_cfg(c, layer);
    /* Darknet keeps a line without '=' as a key with no value, and "key="
     * as a key with an empty one (patch 0051). */
    if (!val || !*val) {
        int ours = fsdp_cfg_key_find(key) || !strncmp(key, "shard", 5);
        return ours ? error(c, file, line, "%s has no value: write %s=VALUE", key, key) : 0;
    }
    return layer < 0 ? net_option(c, file, line, key, val) : layer_option(c, file, line, layer, key, val);
}
