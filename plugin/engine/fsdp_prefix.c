/* A frozen prefix's forward apart from the step (fsdp_prefix.h). */
#include "fsdp_prefix.h"
#include "fsdp_engine_impl.h"

int fsdp_prefix_length(const fsdp_engine *e)
{
    for (int i = 0; i < e->plan.nlayers; ++i)
        if (e->plan.need_bwd[i]) return i;
    return 0;
}

/* Whether op belongs to the prefix [0, k): a frozen flat whose layers
 * with parameters all lie in it, or the activations of a group whose
 * layers all do.  A group without such layers has no such op. */
static int prefix_op(const fsdp_engine *e, const fsdp_op *op, int k)
{
    int activations = fsdp_op_on_activations(op->kind);
    if (!activations && op->flat != FSDP_FLAT_FROZEN) return 0;
    int any = 0;
    for (int i = 0; i < e->plan.nlayers; ++i) {
        if (e->plan.layer_group[i] != op->group) continue;
        if (!activations && !(e->plan.frozen[i] && e->plan.layer_params[i])) continue;
        if (i >= k) return 0;
        any = 1;
    }
    return any;
}

/* The ops at layer i's forward point `at`: the prefix's (mine = 1) or
 * the others' (mine = 0). */
static fsdp_status run_ops(fsdp_engine *e, int i, fsdp_at at, int k, int mine)
{
    int n;
    const fsdp_op *ops = fsdp_step_plan_at(&e->step_plan, i, at, &n);
    for (int j = 0; j < n; ++j) {
        if (!fsdp_op_applies(&ops[j], 1, 0) || prefix_op(e, &ops[j], k) != mine) continue;
        FSDP_TRY(fsdp_engine_run_op(e, &ops[j]));
    }
    return FSDP_OK;
}

/* Flats of the prefix still gathered (kept for a backward that never
 * comes, reshard_after_forward=0) go back, as the update would: the
 * engine's reshard gives back only a gathered flat. */
static fsdp_status give_back(fsdp_engine *e, int k)
{
    for (int g = 0; g < e->ngroups; ++g) {
        fsdp_op op = { FSDP_OP_RESHARD, FSDP_WHEN_ALWAYS, g, FSDP_FLAT_FROZEN, 0 };
        if (prefix_op(e, &op, k))
            FSDP_TRY(fsdp_engine_run_op(e, &op));
    }
    return FSDP_OK;
}

fsdp_status fsdp_prefix_forward(fsdp_engine *e, network *net, int k)
{
    int train = net->train;
    net->train = 1;
    network copy = *net;
    fsdp_status s = FSDP_OK;
    for (int i = 0; i < k && s == FSDP_OK; ++i) {
        copy.index = i;
        s = run_ops(e, i, FSDP_AT_FORWARD_BEFORE, k, 1);
        if (s != FSDP_OK) break;
        fsdp_acts_forward(&e->dn.acts, net, i, DN_BEFORE);
        layer l = net->layers[i];
        l.forward(l, copy);
        fsdp_acts_forward(&e->dn.acts, net, i, DN_AFTER);
        copy.input = l.output;
        s = run_ops(e, i, FSDP_AT_FORWARD_AFTER, k, 1);
    }
    if (s == FSDP_OK) s = give_back(e, k);
    net->train = train;
    return s;
}

void fsdp_prefix_forward_done(fsdp_engine *e, network *net, int k)
{
    /* As the forward of the layers after the prefix would close them. */
    for (int i = k; i < net->n; ++i) fsdp_acts_forward(&e->dn.acts, net, i, DN_AFTER);
}

fsdp_status fsdp_prefix_skip(fsdp_engine *e, network *net, int k)
{
    for (int i = 0; i < k; ++i) {
        FSDP_TRY(run_ops(e, i, FSDP_AT_FORWARD_BEFORE, k, 0));
        fsdp_acts_forward(&e->dn.acts, net, i, DN_BEFORE);
        fsdp_acts_forward(&e->dn.acts, net, i, DN_AFTER);
        FSDP_TRY(run_ops(e, i, FSDP_AT_FORWARD_AFTER, k, 0));
    }
    return FSDP_OK;
}
