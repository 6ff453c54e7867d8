/* The prediction at another world from one set-up engine
 * (fsdp_memplan_predict_world, fsdp_memplan.h).
 *
 * Past one rank, what a world changes in a set-up engine is sizes alone:
 * each flat's shard (its count over the world, aligned), its full buffer
 * (world shards) and own part, so its model state; node memory's slots
 * (the largest full buffer, one per rank) and its total.  The groups, the
 * step plan, the flats' kinds and layouts, the activations and the staged
 * build are the same at every world of two ranks or more.  So a copy of
 * the engine with those sizes laid out again for the world, on a stand-in
 * control and null backend of that world, is the engine a build at that
 * world would have set up, as far as fsdp_memplan_predict reads it: the
 * unit tests hold the two predictions equal at several worlds and under
 * each strategy.  On several machines the same holds among builds on
 * several machines (node memory per machine, its slots two per rank). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_engine_impl.h"
#include "fsdp_memplan.h"

/* f as fsdp_flat_setup lays it out for `world` (lay_out, fsdp_flat.c);
 * its model state as setup counts it: its own part (sharded) or its full
 * buffer (replicas, frozen replicas), and the optimizer's moments. */
static void relay(const fsdp_mem_ctx *mem, fsdp_flat *f, int world)
{
    if (!f->lay.nt) return;
    const fsdp_flat_kind *k = &f->kind;
    f->lay.shard = fsdp_mem_aligned(mem, fsdp_shard_count(f->lay.count, world));
    f->lay.nfull = (k->sharded || k->trainable) && !k->whole ? f->lay.shard * (size_t)world : f->lay.count;
    f->lay.own_count = !k->sharded && !k->trainable ? 0 : k->whole ? f->lay.count : f->lay.shard;
    size_t floats = (k->sharded ? f->lay.own_count : f->lay.nfull) +
                    (k->trainable ? (size_t)(1 + k->adam) * f->lay.own_count : 0);
    f->lay.state_bytes = floats * sizeof(float);
}

/* Node memory as share_node (fsdp_engine.c) sizes it for the layout `at`:
 * every flat's full buffer, and per rank of a machine a slot of the
 * largest trainable one (two on several machines). */
static void resize_node(fsdp_engine *e, fsdp_node_layout at)
{
    size_t total = 0, slot = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        total += e->groups[g].train.lay.nfull + e->groups[g].frozen.lay.nfull;
        if (e->groups[g].train.lay.nfull > slot) slot = e->groups[g].train.lay.nfull;
    }
    size_t nslots = at.machines > 1 ? 2 : 1;
    e->node.at = at;
    e->node.slot_floats = slot;
    e->tally.node_bytes = (total + slot * (size_t)at.ranks * nslots) * sizeof(float);
}

/* The stand-in backend of `world` ranks on `machines` machines. */
static fsdp_status layout_for(const fsdp_coll *real, int world, int machines, fsdp_coll **out)
{
    FSDP_TRY(fsdp_backend_null_like(real, out));
    (*out)->world = world;
    return machines > 1 ? fsdp_backend_null_machines(*out, machines) : FSDP_OK;
}

fsdp_status fsdp_memplan_predict_world(const fsdp_engine *real, const network *net, fsdp_mem_fixed fixed, int world,
                                       int machines, fsdp_mem_prediction *out)
{
    /* One machine and several differ in more than sizes (the default
     * node memory, prefetch, the exchanges): each comes from its own kind. */
    int built_on = real->coll->node.machines > 1 ? real->coll->node.machines : 1;
    if (real->ctl->world < 2 || world < 2 || machines < 1 || world % machines || (built_on > 1) != (machines > 1))
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "a prediction at %d ranks on %d machines comes from an engine set up "
                         "at 2 or more ranks on one machine, or on several (this one: %d on %d)", world, machines,
                         real->ctl->world, built_on);
    fsdp_engine e = *real;
    fsdp_engine_watch_init(&e);   /* the run's other observers see nothing of the copy */
    e.ctl = NULL;
    e.coll = NULL;
    e.groups = calloc((size_t)real->ngroups, sizeof *e.groups);
    fsdp_status s = e.groups ? fsdp_ctl_lone_create("null", world, &e.ctl) : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK) s = layout_for(real->coll, world, machines, &e.coll);
    if (s == FSDP_OK) {
        /* What the flats see: this world's control, backend and node. */
        e.flat = (fsdp_flat_ctx){ &e.mem, e.ctl, e.coll, real->flat.values_agreed, &e.node, NULL };
        e.tally.model_state_bytes = 0;
        for (int g = 0; g < e.ngroups; ++g) {
            e.groups[g] = real->groups[g];
            relay(&e.mem, &e.groups[g].train, world);
            relay(&e.mem, &e.groups[g].frozen, world);
            e.tally.model_state_bytes += e.groups[g].train.lay.state_bytes + e.groups[g].frozen.lay.state_bytes;
        }
        if (e.node.on) resize_node(&e, fsdp_coll_node_layout(e.coll));
        fsdp_memplan_predict(&e, net, fixed, 0, out);
    }
    if (e.coll) fsdp_coll_free(e.coll);
    if (e.ctl) fsdp_ctl_free(e.ctl);
    free(e.groups);
    return s;
}
