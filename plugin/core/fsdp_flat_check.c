/* fsdp_flat_check.c: the whole flat against its state, in the manner of
 * SQLite's assert_pager_state(): which buffers exist, where they and the
 * layers' pointers point, which ticket is live (fsdp_flat.h's tables).
 * Every transition ends with it where checks are built in (FSDP_CHECK). */
#include "fsdp_flat.h"

static void check_layout(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    const fsdp_flat_layout *l = &f->lay;
    size_t world = (size_t)c->ctl->world;
    FSDP_ASSERT(l->params <= l->count && l->shard * world >= l->count, "flat layout: the shards cover the tensors");
    FSDP_ASSERT(l->nfull == l->count || l->nfull == l->shard * world, "flat layout: a full buffer is the layout "
                "or every rank's shard");
    FSDP_ASSERT(l->own_count == 0 || l->own_count == l->shard || l->own_count == l->count,
                "flat layout: this rank updates its shard, the whole replica or nothing");
    for (int k = 0; k < l->nt; ++k)
        FSDP_ASSERT(l->off[k] + l->t[k].count <= l->count &&
                    (k == 0 || l->off[k] >= l->off[k - 1] + l->t[k - 1].count),
                    "flat layout: tensors in order, apart, within the layout");
}

/* Which buffers the state implies, and what `own` is part of. */
static void check_buffers(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    const fsdp_flat_residency *r = &f->res;
    size_t lo = fsdp_flat_own_part(c, f).lo;
    FSDP_ASSERT(!r->own == !f->lay.own_count, "flat: an own part exactly where the rank updates or shards one");
    FSDP_ASSERT(!r->own_in_full || (!f->kind.sharded && r->full && r->own == r->full + lo),
                "flat: a replica holds own at this rank's part");
    FSDP_ASSERT(!r->in_node || (f->kind.sharded && r->node && r->own == r->node + lo),
                "flat: in node memory, own is this rank's part of it");
    FSDP_ASSERT(f->kind.sharded || r->state == FSDP_FLAT_GATHERED, "flat: a replicated flat stays GATHERED");
    switch (r->state) {
    case FSDP_FLAT_SHARDED:
        FSDP_ASSERT(!r->full && !r->pending, "flat SHARDED: no full buffer, no gather in flight");
        break;
    case FSDP_FLAT_GATHERING:
        FSDP_ASSERT(!r->full && r->pending && !r->in_node, "flat GATHERING: the gather's destination alone");
        break;
    case FSDP_FLAT_GATHERED:
        FSDP_ASSERT(r->full && !r->pending, "flat GATHERED: a full buffer, no gather in flight");
        FSDP_ASSERT(!r->in_node || r->full == r->node, "flat GATHERED in node memory: the node's buffer");
        FSDP_ASSERT(!f->kind.sharded || c->ctl->world > 1 || r->full == r->own,
                    "flat GATHERED in a world of one: its own part is the whole buffer");
        break;
    }
}

/* The layers' parameter pointers: into the gathered buffer, else at
 * nothing.  Over the count placement every tensor points at one sink. */
static void check_pointers(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    if (!fsdp_mem_computes(c->mem)) return;
    for (int k = 0; k < f->lay.nt; ++k) {
        const float *want = f->res.state == FSDP_FLAT_GATHERED ? f->res.full + f->lay.off[k] : NULL;
        FSDP_ASSERT(*f->res.data_at[k] == want, "flat: the layers point into the gathered buffer, else at nothing");
    }
}

/* The optimizer's state, saving's scratch, and the node's publication. */
static void check_beside(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    const fsdp_optim_state *o = &f->opt;
    FSDP_ASSERT(!o->m == !f->kind.trainable, "flat: optimizer state exactly for trainable flats");
    FSDP_ASSERT(!o->v == !(f->kind.trainable && f->kind.adam), "flat: a second moment exactly under Adam");
    FSDP_ASSERT(!o->grad_in_m || (c->ctl->world == 1 && !f->kind.adam), "flat: gradients in the momentum "
                "only alone, under SGD");
    FSDP_ASSERT(!f->save.gathered || (f->kind.sharded && f->res.state == FSDP_FLAT_GATHERED),
                "flat: gathered for a save until save_end");
    FSDP_ASSERT(!f->save.grad || c->mem->device, "flat: saving lends gradients on GPU runs alone");
    const fsdp_node *n = c->node;
    FSDP_ASSERT(n->publishing_flat != f || (n->publishing && f->res.in_node),
                "flat: parts on their way are a node-shared flat's, under a live ticket");
    FSDP_ASSERT(f->res.written_at <= n->syncs + 1, "flat: written before the next node_sync at the latest");
}

int fsdp_flat_check(const fsdp_flat_ctx *c, const fsdp_flat *f)
{
    if (!f->lay.nt) {
        FSDP_ASSERT(!f->res.own && !f->res.full && !f->res.pending && !f->opt.m,
                    "flat without tensors: no buffers");
        return 1;
    }
    check_layout(c, f);
    check_buffers(c, f);
    check_pointers(c, f);
    check_beside(c, f);
    return 1;
}
