#include <stdlib.h>
#include <string.h>
#include "fsdp_groups.h"
#include "fsdp_layers.h"

static int find_group(const fsdp_layout_plan *p, const char *name)
{
    for (int i = 0; i < p->ngroups; ++i)
        if (!strcmp(p->groups[i].name, name)) return i;
    return -1;
}

static int new_group(fsdp_layout_plan *p, const char *name, int parent, int line)
{
    fsdp_group_info *g = realloc(p->groups, (size_t)(p->ngroups + 1) * sizeof *g);
    if (!g) return -1;
    p->groups = g;
    g = &p->groups[p->ngroups];
    memset(g, 0, sizeof *g);
    g->name = strdup(name);
    g->parent = parent;
    g->span_first = g->span_last = -1;
    g->line = line;
    return g->name ? p->ngroups++ : -1;
}

/* The group for a dotted name, creating it and its missing ancestors. */
static int group_for(fsdp_layout_plan *p, const char *name, int line)
{
    int g = find_group(p, name);
    if (g >= 0) return g;
    const char *dot = strrchr(name, '.');
    int parent = 0;
    if (dot) {
        char *prefix = strndup(name, (size_t)(dot - name));
        if (!prefix) return -1;
        parent = group_for(p, prefix, line);
        free(prefix);
        if (parent < 0) return -1;
    }
    return new_group(p, name, parent, line);
}

int fsdp_group_is_ancestor(const fsdp_layout_plan *p, int a, int b)
{
    for (; b >= 0; b = p->groups[b].parent)
        if (a == b) return 1;
    return 0;
}

/* Layer l's output, delta, and batch norm's x and x_norm, in bytes (a
 * dropout's are its input's). */
static size_t act_bytes(const layer *l)
{
    if (l->type == DROPOUT) return 0;
    return fsdp_layer_act_floats(l) * sizeof(float) * (fsdp_layer_has_bn(l) ? 4 : 2);
}

/* Automatic groups end at a loss layer when [net] says recompute=1: the
 * loss stays in the root group, which holds the head, and the layers
 * before it form a group that can recompute (fsdp_recompute.h); and at
 * p->auto_acts bytes of activations, but never just before a dropout. */
static fsdp_status assign_groups(fsdp_layout_plan *p, const fsdp_cfg *cfg, const network *net)
{
    int auto_open = -1, auto_count = 0;
    size_t auto_params = 0, auto_acts = 0;
    for (int i = 0; i < p->nlayers; ++i) {
        const fsdp_layer_cfg *lc = i < cfg->nlayers ? &cfg->layers[i] : NULL;
        int g = 0;
        if (lc && lc->group) {
            g = group_for(p, lc->group, lc->group_line);
            auto_open = -1;
        } else if (p->auto_group > 0 && cfg->recompute && fsdp_layer_is_loss(&net->layers[i])) {
            auto_open = -1;
        } else if (p->auto_group > 0) {
            /* Under recompute=1 a dropout stays with the layer it scales: a
             * group starting with one cannot recompute. */
            int joins = cfg->recompute && auto_open >= 0 && net->layers[i].type == DROPOUT;
            if (!joins && (auto_open < 0 || auto_params >= (size_t)p->auto_group ||
                           (p->auto_acts && auto_acts >= p->auto_acts))) {
                char name[32];
                snprintf(name, sizeof name, "auto%d", auto_count++);
                if (find_group(p, name) >= 0)
                    return fsdp_fail(FSDP_ERR_CONFIG, "%s: shard_auto_group would create group %s, "
                                     "which the cfg already names; rename it", cfg->file, name);
                auto_open = new_group(p, name, 0, 0);
                auto_params = auto_acts = 0;
            }
            g = auto_open;
            auto_params += p->layer_params[i];
            auto_acts += act_bytes(&net->layers[i]);
        }
        if (g < 0) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory building groups");
        p->layer_group[i] = g;
        fsdp_group_info *gi = &p->groups[g];
        int *l = realloc(gi->layers, (size_t)(gi->nlayers + 1) * sizeof *l);
        if (!l) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory building groups");
        gi->layers = l;
        gi->layers[gi->nlayers++] = i;
        /* The span covers the group and all its ancestors' spans too. */
        for (int a = g; a >= 0; a = p->groups[a].parent) {
            fsdp_group_info *ga = &p->groups[a];
            if (ga->span_first < 0 || i < ga->span_first) ga->span_first = i;
            if (i > ga->span_last) ga->span_last = i;
        }
    }
    return FSDP_OK;
}

/* A layer inside a group's span must belong to that group, a descendant or
 * an ancestor (whose span holds the group's anyway): otherwise the two
 * groups' spans cross without nesting. */
static fsdp_status check_nesting(const fsdp_layout_plan *p, const fsdp_cfg *cfg)
{
    for (int i = 0; i < p->nlayers; ++i) {
        for (int g = 1; g < p->ngroups; ++g) {
            const fsdp_group_info *gi = &p->groups[g];
            if (i < gi->span_first || i > gi->span_last) continue;
            int lg = p->layer_group[i];
            if (fsdp_group_is_ancestor(p, g, lg) || fsdp_group_is_ancestor(p, lg, g)) continue;
            const fsdp_layer_cfg *lc = i < cfg->nlayers ? &cfg->layers[i] : NULL;
            int line = lc && lc->group ? lc->group_line : gi->line;
            return fsdp_fail(FSDP_ERR_CONFIG,
                             "%s:%d: layer %d (group %s) lies inside the span of group %s "
                             "(layers %d-%d) but is not nested in it: group spans must nest, not cross",
                             cfg->file, line, i, p->groups[p->layer_group[i]].name, gi->name,
                             gi->span_first, gi->span_last);
        }
    }
    return FSDP_OK;
}

int fsdp_layer_needs_backward(const network *net, int i, int trainable, const unsigned char *need)
{
    int in[FSDP_MAX_INPUTS], n = fsdp_layer_inputs(net, i, in);
    for (int k = 0; k < n && !trainable; ++k)
        if (in[k] >= 0 && in[k] < i && need[in[k]]) trainable = 1;
    return trainable;
}

static void backward_analysis(fsdp_layout_plan *p, network *net)
{
    int stop = -1;
    for (int i = 0; i < p->nlayers; ++i)
        if (net->layers[i].stopbackward) stop = i;
    /* Darknet's backward loop stops at the last stopbackward layer. */
    for (int i = 0; i < p->nlayers; ++i)
        p->need_bwd[i] = (unsigned char)(i > stop && fsdp_layer_needs_backward(net, i, p->trainable[i], p->need_bwd));
}

/* The cfg's shard_auto_group, or where the cfg names no grouping at all
 * the default (fsdp_groups.h). */
static void default_grouping(fsdp_layout_plan *p, const fsdp_cfg *cfg)
{
    p->auto_group = cfg->auto_group;
    if (cfg->auto_group_set) return;
    for (int i = 0; i < cfg->nlayers; ++i)
        if (cfg->layers[i].group) return;
    size_t total = 0;
    for (int i = 0; i < p->nlayers; ++i) total += p->layer_params[i];
    size_t n = total / FSDP_DEFAULT_GROUPS;
    if (n < FSDP_DEFAULT_GROUP_MIN) n = FSDP_DEFAULT_GROUP_MIN;
    /* Under recompute=1 a small model still gets groups, by activations. */
    if (total < 2 * n && !cfg->recompute) return;
    p->auto_group = (long)n;
    p->auto_default = 1;
}

fsdp_status fsdp_plan_build(fsdp_layout_plan *p, const fsdp_cfg *cfg, network *net)
{
    memset(p, 0, sizeof *p);
    int n = net->n;
    p->nlayers = n;
    p->layer_group = calloc((size_t)n, sizeof *p->layer_group);
    p->trainable = calloc((size_t)n, 1);
    p->frozen = calloc((size_t)n, 1);
    p->need_bwd = calloc((size_t)n, 1);
    p->layer_params = calloc((size_t)n, sizeof *p->layer_params);
    if (!p->layer_group || !p->trainable || !p->frozen || !p->need_bwd || !p->layer_params ||
        new_group(p, FSDP_ROOT_NAME, -1, 0) != 0)
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory planning %d layers", n);
    if (cfg->nlayers > n)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: keys for layer %d, but the network has %d layers",
                         cfg->file ? cfg->file : "cfg", cfg->nlayers - 1, n);
    for (int i = 0; i < n; ++i) {
        fsdp_tensor t[FSDP_MAX_TENSORS];
        int nt = fsdp_layer_tensors(&net->layers[i], t);
        for (int k = 0; k < nt; ++k) {
            /* Darknet's sizes are ints: a negative one (filters=-1) wraps. */
            if (t[k].count > ((size_t)1 << 40))
                return fsdp_fail(FSDP_ERR_CONFIG, "%s: layer %d has a tensor of %lld floats: its size keys "
                                 "(filters, size, output, ...) are out of range", cfg->file ? cfg->file : "cfg",
                                 i, (long long)t[k].count);
            p->layer_params[i] += t[k].count;
        }
        p->frozen[i] = (unsigned char)(i < cfg->nlayers && cfg->layers[i].frozen);
        p->trainable[i] = (unsigned char)(nt > 0 && !p->frozen[i]);
    }
    default_grouping(p, cfg);
    if (cfg->recompute && p->auto_group > 0) {
        for (int i = 0; i < n; ++i) p->auto_acts += act_bytes(&net->layers[i]);
        p->auto_acts /= FSDP_RECOMPUTE_SEGMENTS;
    }
    FSDP_TRY(assign_groups(p, cfg, net));
    FSDP_TRY(check_nesting(p, cfg));
    backward_analysis(p, net);
    return FSDP_OK;
}

void fsdp_plan_free(fsdp_layout_plan *p)
{
    for (int g = 0; g < p->ngroups; ++g) {
        free(p->groups[g].name);
        free(p->groups[g].layers);
    }
    free(p->groups);
    free(p->layer_group);
    free(p->trainable);
    free(p->frozen);
    free(p->need_bwd);
    free(p->layer_params);
    memset(p, 0, sizeof *p);
}
