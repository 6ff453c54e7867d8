/* The step plan (fsdp_stepplan.h): built once from the layout. */
#include <stdlib.h>
#include "fsdp_layers.h"
#include "fsdp_stepplan.h"

/* Ops go into one array in hook order: layer 0's four points, layer 1's,
 * ..., then the update. */
typedef struct builder {
    fsdp_step_plan *p;
    int cap;
} builder;

static fsdp_status add(builder *b, fsdp_op_kind kind, fsdp_op_when when, int group, int flat, int backward)
{
    fsdp_step_plan *p = b->p;
    if (p->nops == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        fsdp_op *ops = realloc(p->ops, (size_t)cap * sizeof *ops);
        if (!ops) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
        p->ops = ops;
        b->cap = cap;
    }
    p->ops[p->nops++] = (fsdp_op){ kind, when, group, flat, backward };
    return FSDP_OK;
}

/* Per group: its direct layers needing backward, and whether a frozen one
 * with parameters does (its frozen flat is then gathered in backward). */
static void backward_span(fsdp_step_group *sg, const fsdp_group_info *info, const fsdp_layout_plan *lp,
                          const network *net)
{
    sg->bwd_hi = sg->bwd_lo = -1;
    for (int k = 0; k < info->nlayers; ++k) {
        int i = info->layers[k];
        if (!lp->need_bwd[i]) continue;
        fsdp_tensor t[FSDP_MAX_TENSORS];
        if (sg->bwd_hi < i) sg->bwd_hi = i;
        if (sg->bwd_lo < 0 || i < sg->bwd_lo) sg->bwd_lo = i;
        if (lp->frozen[i] && fsdp_layer_tensors((layer *)&net->layers[i], t)) sg->frozen_bwd = 1;
    }
}

/* Which groups stay gathered from forward to backward in training: the
 * root, every group under reshard_after_forward=0, and the group whose
 * backward comes first when only the root's own layers (the head, the
 * loss) run between its span and its backward: resharding it would gather
 * the same bytes again at once.  If that group recomputes, its activations
 * stay in the arena too: no other recomputed group runs before its
 * backward, so running its forward again would write the same values. */
static void stays_gathered(fsdp_step_plan *p, const fsdp_step_inputs *in)
{
    const fsdp_layout_plan *lp = in->layout;
    int first = -1;
    for (int k = 1; k < p->ngroups; ++k)
        if (p->groups[k].bwd_hi >= 0 && (first < 0 || p->groups[k].bwd_hi > p->groups[first].bwd_hi)) first = k;
    int first_stays = first >= 0;
    for (int i = first >= 0 ? lp->groups[first].span_last + 1 : p->nlayers; i < p->nlayers; ++i)
        if (lp->layer_group[i] != 0) first_stays = 0;
    for (int k = 0; k < p->ngroups; ++k) {
        int keep = k == 0 || !in->reshard_after_forward || (k == first && first_stays);
        p->groups[k].stays_gathered = keep && p->groups[k].bwd_hi >= 0;
        p->groups[k].acts_stay = k == first && first_stays && in->recompute && in->recompute[k];
    }
}

/* Prefetch targets: in forward the group whose span starts first after
 * layer i, in backward the group with the highest backward layer below i
 * (the lowest-numbered group on a tie); -1 for none. */
static int next_forward(const fsdp_step_plan *p, const fsdp_layout_plan *lp, int i)
{
    int f = -1;
    for (int k = 0; k < p->ngroups; ++k)
        if (lp->groups[k].span_first > i && (f < 0 || lp->groups[k].span_first < lp->groups[f].span_first)) f = k;
    return f;
}

static int next_backward(const fsdp_step_plan *p, int i)
{
    int b = -1;
    for (int k = 0; k < p->ngroups; ++k)
        if (p->groups[k].bwd_hi >= 0 && p->groups[k].bwd_hi < i && (b < 0 || p->groups[k].bwd_hi > p->groups[b].bwd_hi))
            b = k;
    return b;
}

/* Groups are numbered parent before child: outer groups gather first. */
static fsdp_status forward_ops(builder *b, const fsdp_step_inputs *in, int i, fsdp_at a)
{
    fsdp_step_plan *p = b->p;
    const fsdp_layout_plan *lp = in->layout;
    for (int k = 0; k < p->ngroups; ++k) {
        const fsdp_step_group *g = &p->groups[k];
        int recomputed = in->recompute && in->recompute[k];
        if (a == FSDP_AT_FORWARD_BEFORE && lp->groups[k].span_first == i) {
            FSDP_TRY(add(b, FSDP_OP_UNSHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 0));
            FSDP_TRY(add(b, FSDP_OP_UNSHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_FROZEN, 0));
            if (recomputed) FSDP_TRY(add(b, FSDP_OP_ACTS_IN, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 0));
        }
        if (a == FSDP_AT_FORWARD_AFTER && lp->groups[k].span_last == i) {
            if (recomputed)
                FSDP_TRY(add(b, FSDP_OP_ACTS_OUT, g->acts_stay ? FSDP_WHEN_INFERENCE : FSDP_WHEN_ALWAYS, k,
                             FSDP_FLAT_TRAIN, 0));
            /* What backward needs stays; frozen parameters nobody needs
             * in backward never do. */
            int frozen_stays = g->stays_gathered && g->frozen_bwd;
            FSDP_TRY(add(b, FSDP_OP_RESHARD, frozen_stays ? FSDP_WHEN_INFERENCE : FSDP_WHEN_ALWAYS, k,
                         FSDP_FLAT_FROZEN, 0));
            FSDP_TRY(add(b, FSDP_OP_RESHARD, g->stays_gathered ? FSDP_WHEN_INFERENCE : FSDP_WHEN_ALWAYS, k,
                         FSDP_FLAT_TRAIN, 0));
        }
    }
    /* One prefetch at a time keeps memory bounded. */
    int next = a == FSDP_AT_FORWARD_BEFORE && in->prefetch ? next_forward(p, lp, i) : -1;
    if (next >= 0) {
        FSDP_TRY(add(b, FSDP_OP_PREFETCH, FSDP_WHEN_ALWAYS, next, FSDP_FLAT_TRAIN, 0));
        FSDP_TRY(add(b, FSDP_OP_PREFETCH, FSDP_WHEN_ALWAYS, next, FSDP_FLAT_FROZEN, 0));
    }
    return FSDP_OK;
}

/* Before a group's highest layer needing backward: gather, point the
 * gradient, prefetch the next group down.  After its lowest: reduce once
 * per update; every group but the root gives its parameters back. */
static fsdp_status backward_ops(builder *b, const fsdp_step_inputs *in, int i, fsdp_at a)
{
    fsdp_step_plan *p = b->p;
    const fsdp_layout_plan *lp = in->layout;
    if (!lp->need_bwd[i]) return FSDP_OK;
    int k = lp->layer_group[i];
    const fsdp_step_group *g = &p->groups[k];
    if (a == FSDP_AT_BACKWARD_BEFORE && i == g->bwd_hi) {
        FSDP_TRY(add(b, FSDP_OP_UNSHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 1));
        if (g->frozen_bwd) FSDP_TRY(add(b, FSDP_OP_UNSHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_FROZEN, 1));
        /* A recomputed group's layers all need backward: its span is its backward's. */
        if (in->recompute && in->recompute[k])
            FSDP_TRY(add(b, g->acts_stay ? FSDP_OP_ACTS_BACK : FSDP_OP_RECOMPUTE, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 1));
        FSDP_TRY(add(b, FSDP_OP_GRAD_POINT, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 1));
        /* Under reshard_after_forward=0 every group is still gathered. */
        int next = in->prefetch && in->reshard_after_forward ? next_backward(p, i) : -1;
        if (next >= 0) {
            FSDP_TRY(add(b, FSDP_OP_PREFETCH, FSDP_WHEN_ALWAYS, next, FSDP_FLAT_TRAIN, 1));
            if (p->groups[next].frozen_bwd) FSDP_TRY(add(b, FSDP_OP_PREFETCH, FSDP_WHEN_ALWAYS, next, FSDP_FLAT_FROZEN, 1));
        }
    }
    if (a == FSDP_AT_BACKWARD_AFTER && i == g->bwd_lo) {
        FSDP_TRY(add(b, FSDP_OP_REDUCE, FSDP_WHEN_LAST_MICRO, k, FSDP_FLAT_TRAIN, 1));
        FSDP_TRY(add(b, FSDP_OP_GRAD_UNPOINT, FSDP_WHEN_NOT_LAST_MICRO, k, FSDP_FLAT_TRAIN, 1));
        if (in->recompute && in->recompute[k]) FSDP_TRY(add(b, FSDP_OP_ACTS_OUT, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 1));
        if (k != 0) {   /* the root keeps its parameters through the step */
            FSDP_TRY(add(b, FSDP_OP_RESHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 1));
            FSDP_TRY(add(b, FSDP_OP_RESHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_FROZEN, 1));
        }
    }
    return FSDP_OK;
}

/* The update: the reduce in flight settles; groups backward never reached
 * (below stopbackward, or frozen) still step, as in Darknet, where decay
 * and momentum move them; gathered parameters (the root's) are stale now. */
static fsdp_status update_ops(builder *b)
{
    FSDP_TRY(add(b, FSDP_OP_SETTLE, FSDP_WHEN_ALWAYS, -1, FSDP_FLAT_TRAIN, 0));
    for (int k = 0; k < b->p->ngroups; ++k) {
        FSDP_TRY(add(b, FSDP_OP_STEP, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 0));
        FSDP_TRY(add(b, FSDP_OP_RESHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_TRAIN, 0));
        FSDP_TRY(add(b, FSDP_OP_RESHARD, FSDP_WHEN_ALWAYS, k, FSDP_FLAT_FROZEN, 0));
    }
    return FSDP_OK;
}

fsdp_status fsdp_step_plan_build(fsdp_step_plan *p, const fsdp_step_inputs *in)
{
    const fsdp_layout_plan *lp = in->layout;
    *p = (fsdp_step_plan){ .ngroups = lp->ngroups, .nlayers = lp->nlayers };
    p->groups = calloc((size_t)p->ngroups, sizeof *p->groups);
    p->first = malloc(((size_t)p->nlayers * FSDP_AT_LAYER_POINTS + 1) * sizeof *p->first);
    if (!p->groups || !p->first) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < p->ngroups; ++k) backward_span(&p->groups[k], &lp->groups[k], lp, in->net);
    stays_gathered(p, in);
    builder b = { p, 0 };
    for (int i = 0; i < p->nlayers; ++i)
        for (int a = 0; a < FSDP_AT_LAYER_POINTS; ++a) {
            p->first[i * FSDP_AT_LAYER_POINTS + a] = p->nops;
            if (a <= FSDP_AT_FORWARD_AFTER) FSDP_TRY(forward_ops(&b, in, i, (fsdp_at)a));
            else FSDP_TRY(backward_ops(&b, in, i, (fsdp_at)a));
        }
    p->first[p->nlayers * FSDP_AT_LAYER_POINTS] = p->update_first = p->nops;
    return update_ops(&b);
}

void fsdp_step_plan_free(fsdp_step_plan *p)
{
    free(p->groups);
    free(p->ops);
    free(p->first);
    *p = (fsdp_step_plan){ 0 };
}

const fsdp_op *fsdp_step_plan_at(const fsdp_step_plan *p, int i, fsdp_at a, int *n)
{
    int at = i * FSDP_AT_LAYER_POINTS + a;
    *n = p->first[at + 1] - p->first[at];
    return p->ops + p->first[at];
}

const fsdp_op *fsdp_step_plan_update(const fsdp_step_plan *p, int *n)
{
    *n = p->nops - p->update_first;
    return p->ops + p->update_first;
}
