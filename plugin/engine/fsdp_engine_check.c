/* fsdp_engine_check.c: the engine's state across a step against its table
 * (fsdp_engine.h), with every group's flats and gradient (fsdp_flat_check,
 * fsdp_grad_check). */
#include "fsdp_engine_impl.h"

int fsdp_engine_check(const fsdp_engine *e)
{
    int reducing = 0;
    for (int k = 0; k < e->ngroups; ++k) {
        const fsdp_group *g = &e->groups[k];
        fsdp_flat_check(&e->flat, &g->train);
        fsdp_flat_check(&e->flat, &g->frozen);
        fsdp_grad_check(&e->flat, &g->grad, &g->train);
        FSDP_ASSERT((!g->train.lay.nt || g->train.kind.trainable) && !g->frozen.kind.trainable,
                    "engine: a group's trainable flat and its frozen one");
        if (g->grad.state != FSDP_GRAD_REDUCING) continue;
        ++reducing;
        FSDP_ASSERT(e->step.rs_inflight == g, "engine: the gradient REDUCING is the reduce in flight's");
    }
    FSDP_ASSERT(!e->step.rs_inflight || reducing == 1, "engine: one reduce-scatter in flight, its gradient REDUCING");
    FSDP_ASSERT(!e->node.publishing || (e->node.on && e->node.publishing_flat),
                "engine: parts on their way are a node-shared flat's");
    FSDP_ASSERT(!e->counting || !e->tl.on, "engine: a counting copy records no events");
    return 1;
}
