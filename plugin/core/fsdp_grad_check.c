/* fsdp_grad_check.c: the whole gradient against its state (fsdp_grad.h's
 * tables), as fsdp_flat_check is the flat's: which buffers exist for the
 * state and its home, which slot it holds, which ticket is live. */
#include "fsdp_grad.h"

/* The buffer the home implies, for a gradient that has one. */
static void check_home(const fsdp_flat_ctx *c, const fsdp_grad *g, const fsdp_flat *f)
{
    const fsdp_node *n = c->node;
    const float *mine = n->grad_slots + (size_t)n->at.rank * n->slot_floats;
    switch (g->home) {
    case FSDP_GRAD_HOME_NONE:
        FSDP_ASSERT(0, "grad: a gradient past NONE has a home");
        break;
    case FSDP_GRAD_HOME_MOMENTUM:
        FSDP_ASSERT(!g->buf && (!f || f->opt.grad_in_m), "grad at MOMENTUM: the flat's momentum, no buffer");
        break;
    case FSDP_GRAD_HOME_SLOT:
        FSDP_ASSERT(g->buf == mine && n->slot_busy, "grad at SLOT: this rank's slot, taken");
        break;
    case FSDP_GRAD_HOME_REDUCE_SLOT:
        FSDP_ASSERT(n->reduce_slots && g->buf == n->reduce_slots + (mine - n->grad_slots),
                    "grad at REDUCE_SLOT: this rank's reduce slot");
        break;
    case FSDP_GRAD_HOME_POOL:
        break;
    }
}

int fsdp_grad_check(const fsdp_flat_ctx *c, const fsdp_grad *g, const fsdp_flat *f)
{
    int slots = g->home == FSDP_GRAD_HOME_SLOT || g->home == FSDP_GRAD_HOME_REDUCE_SLOT;
    FSDP_ASSERT(!g->rs_source == (g->state != FSDP_GRAD_REDUCING), "grad: a reduce-scatter's source exactly "
                "while REDUCING, its ticket live");
    switch (g->state) {
    case FSDP_GRAD_NONE:
        FSDP_ASSERT(g->home == FSDP_GRAD_HOME_NONE && !g->buf && !g->part, "grad NONE: no buffers, no home");
        return 1;
    case FSDP_GRAD_ACCUMULATING:
        FSDP_ASSERT(!g->part && (g->buf || g->home == FSDP_GRAD_HOME_MOMENTUM),
                    "grad ACCUMULATING: a full-size sum, no part yet");
        break;
    case FSDP_GRAD_REDUCING:
        FSDP_ASSERT(g->home == FSDP_GRAD_HOME_POOL && !g->buf && g->part,
                    "grad REDUCING: the pool's source and part");
        return 1;
    case FSDP_GRAD_REDUCED:
        FSDP_ASSERT(!slots && !g->buf && (g->part || g->home == FSDP_GRAD_HOME_MOMENTUM),
                    "grad REDUCED: this rank's part alone");
        return 1;
    case FSDP_GRAD_IN_SLOTS:
        FSDP_ASSERT(slots && g->buf && !g->part == (c->node->at.machines == 1),
                    "grad IN_SLOTS: the slot, and the machines' sums on several machines");
        break;
    }
    check_home(c, g, f);
    return 1;
}
