/* flat_fixture.h: one rank of a world for driving flats and gradients in a
 * unit test, with no Darknet run and no mpirun: host memory (or the count
 * placement) with a pool, a null backend shaped as asked (world, rank,
 * whether collectives start, the machines), node memory in plain host
 * arrays, and layers whose arrays the flats take over. */
#ifndef FLAT_FIXTURE_H
#define FLAT_FIXTURE_H

#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_flat.h"
#include "fsdp_grad.h"
#include "fsdp_mem.h"
#include "darknet.h"

typedef struct fixture {
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    fsdp_mem_pool pool;
    fsdp_mem_count count;
    fsdp_mem_ctx mem;
    fsdp_node node;
    fsdp_flat_ctx c;
    int peers[8], ranks_at[16];
    float *node_params, *slots;
    layer layers[4];
} fixture;

/* What the fixture's rank is part of. */
typedef struct fixture_shape {
    int world, rank;
    int starts;       /* the backend starts collectives (and they do not block) */
    int machines;     /* > 0: node memory, on this many machines of world / machines ranks */
    int counts;       /* the count placement instead of host memory */
} fixture_shape;

/* Stand-ins for a real backend's entry points: only their presence is read. */
static fsdp_status fx_ag_start(fsdp_coll *c, const float *s, float *f, size_t n, int *t) { return FSDP_OK; }
static fsdp_status fx_rs_start(fsdp_coll *c, const float *f, float *s, size_t n, int *t) { return FSDP_OK; }
static fsdp_status fx_wait(fsdp_coll *c, int t) { return FSDP_OK; }
static fsdp_status fx_node_alloc(fsdp_coll *c, size_t n, float **o) { return FSDP_OK; }
static fsdp_status fx_node_sync(fsdp_coll *c) { return FSDP_OK; }

static inline void fixture_init(fixture *x, fixture_shape s)
{
    memset(x, 0, sizeof *x);
    fsdp_coll shape = { .name = "fixture", .rank = s.rank, .world = s.world, .starts_block = !s.starts };
    if (s.starts) {
        shape.iface.all_gather_start = fx_ag_start;
        shape.iface.reduce_scatter_start = fx_rs_start;
        shape.iface.wait = fx_wait;
    }
    if (s.machines) {
        shape.iface.node_alloc = fx_node_alloc;
        shape.iface.node_sync = fx_node_sync;
    }
    int per = s.machines ? s.world / s.machines : s.world;
    if (s.machines > 1) {
        for (int k = 0; k < s.machines; ++k) x->peers[k] = k * per + s.rank % per;
        for (int r = 0; r < s.world; ++r) x->ranks_at[r] = r;
        shape.node = (fsdp_node_layout){ s.machines, per, s.rank % per, x->peers, x->ranks_at };
    }
    fsdp_ctl_lone_create("fixture", s.world, &x->ctl);
    x->ctl->rank = s.rank;
    fsdp_backend_null_like(&shape, &x->coll);
    if (s.counts) fsdp_mem_count_init(&x->mem, &x->count, &x->pool, 1);
    else x->mem = (fsdp_mem_ctx){ .pool = &x->pool, .align = 1 };
    x->node.terms = malloc(16 * sizeof *x->node.terms);
    x->c = (fsdp_flat_ctx){ &x->mem, x->ctl, x->coll, 0, &x->node, NULL };
    if (s.machines) {
        x->node.on = 1;
        x->node.at = fsdp_coll_node_layout(x->coll);
        x->node.stale = 1;
    }
}

/* Node memory: a region for the flats' parameters and, for slot_floats per
 * rank, the gradient slots (and the reduce slots on several machines). */
static inline void fixture_node(fixture *x, size_t params, size_t slot_floats)
{
    x->node_params = calloc(params, sizeof(float));
    int nslots = x->node.at.machines > 1 ? 2 : 1;
    x->slots = calloc(slot_floats * (size_t)x->node.at.ranks * (size_t)nslots, sizeof(float));
    x->node.grad_slots = x->slots;
    x->node.reduce_slots = nslots == 2 ? x->slots + slot_floats * (size_t)x->node.at.ranks : NULL;
    x->node.slot_floats = slot_floats;
}

/* Layer i with a weight tensor of nw floats and a bias tensor of nb, their
 * values i * 100 + their index; t[0..2) describes them. */
static inline void fixture_layer(fixture *x, int i, size_t nw, size_t nb, fsdp_tensor *t)
{
    layer *l = &x->layers[i];
    l->weights = calloc(nw, sizeof(float));
    l->biases = calloc(nb, sizeof(float));
    l->learning_rate_scale = 1;
    for (size_t k = 0; k < nw; ++k) l->weights[k] = (float)(i * 100 + (int)k);
    for (size_t k = 0; k < nb; ++k) l->biases[k] = (float)(i * 100 + 50 + (int)k);
    t[0] = (fsdp_tensor){ .owner = l, .data = &l->weights, .grad = &l->weight_updates, .count = nw, .is_weight = 1 };
    t[1] = (fsdp_tensor){ .owner = l, .data = &l->biases, .grad = &l->bias_updates, .count = nb };
}

static inline void fixture_free(fixture *x)
{
    fsdp_mem_pool_drain(&x->mem);
    if (x->count.live) fsdp_mem_count_free(&x->mem);
    free(x->node.terms);
    free(x->node_params);
    free(x->slots);
    fsdp_coll_free(x->coll);
    fsdp_ctl_free(x->ctl);
}

#endif
