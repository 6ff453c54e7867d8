/* fsdp_observe_timeline.c: the timeline (fsdp_timeline.h) as an observer
 * of the engine: an event per gather, prefetch, reduce, settle and
 * optimizer step, with the bytes the wire counted between other machines
 * while it ran.  A started gather or reduce-scatter lasts until its wait;
 * hybrid sharding's updated parts, started inside an operation, are an
 * event of their own ("parts", fsdp_flat.c), so their bytes are not the
 * operation's. */
#include "fsdp_engine_impl.h"

/* The operations a log's events name; NULL: not an event. */
static const char *op_event(fsdp_op_kind k)
{
    switch (k) {
    case FSDP_OP_UNSHARD: return "gather";
    case FSDP_OP_PREFETCH: return "prefetch";
    case FSDP_OP_RECOMPUTE: return "recompute";
    case FSDP_OP_REDUCE: return "reduce";
    case FSDP_OP_SETTLE: return "settle";
    case FSDP_OP_STEP: return "step";
    default: return NULL;
    }
}

static fsdp_wire wire_now(const fsdp_engine *e)
{
    return e->coll->wire ? *e->coll->wire : (fsdp_wire){ 0 };
}

/* The unshard started ahead whose event this is, or -1. */
static int ahead_of(const fsdp_tl_watch *w, const fsdp_op *op)
{
    for (int k = 0; k < w->nahead; ++k)
        if (w->ahead[k].op == op) return k;
    return -1;
}

static void begin(fsdp_engine *e, const fsdp_op *op)
{
    fsdp_tl_watch *w = &e->watch.tl;
    w->what = ahead_of(w, op) < 0 ? op_event(op->kind) : NULL;
    if (!w->what) return;
    w->w0 = wire_now(e);
    w->ev = fsdp_tl_begin(&e->tl, w->what, op->group);
}

/* Ends an event started ahead: its bytes are its start's. */
static void end_ahead(fsdp_tl_watch *w, fsdp_timeline *tl, int k)
{
    fsdp_tl_end(tl, w->ahead[k].ev, w->ahead[k].out, w->ahead[k].in);
    w->ahead[k] = w->ahead[--w->nahead];
}

static void end(fsdp_engine *e, const fsdp_op *op)
{
    fsdp_tl_watch *w = &e->watch.tl;
    int k = ahead_of(w, op);
    if (k >= 0) {
        end_ahead(w, &e->tl, k);
        return;
    }
    if (!w->what) return;
    fsdp_wire w1 = wire_now(e);
    uint64_t started_out = 0, started_in = 0;
    if (e->node.publishing && fsdp_tl_find_open(&e->tl, "parts", -2) > w->ev) {
        started_out = e->node.publish_out;
        started_in = e->node.publish_in;
    }
    uint64_t out = w1.out - w->w0.out - started_out, in = w1.in - w->w0.in - started_in;
    const fsdp_group *g = &e->groups[op->group];
    const fsdp_flat *f = op->flat == FSDP_FLAT_FROZEN ? &g->frozen : &g->train;
    if ((op->kind == FSDP_OP_PREFETCH && f->res.state == FSDP_FLAT_GATHERING) ||
        (op->kind == FSDP_OP_REDUCE && e->step.rs_inflight == g))
        fsdp_tl_add_bytes(&e->tl, w->ev, out, in);
    else
        fsdp_tl_end(&e->tl, w->ev, out, in);
    w->what = NULL;
}

/* An unshard's gather started ahead: its event from now to the op's end. */
static void ahead(fsdp_engine *e, const fsdp_op *op, int started)
{
    fsdp_tl_watch *w = &e->watch.tl;
    if (!started) {
        int ev = fsdp_tl_begin(&e->tl, "gather", op->group);
        if (ev < 0 || w->nahead == (int)(sizeof w->ahead / sizeof w->ahead[0])) return;
        w->ahead[w->nahead++] = (fsdp_tl_ahead){ op, ev, wire_now(e), 0, 0 };
        return;
    }
    int k = ahead_of(w, op);
    if (k < 0) return;
    fsdp_wire now = wire_now(e);
    w->ahead[k].out = now.out - w->ahead[k].w0.out;
    w->ahead[k].in = now.in - w->ahead[k].w0.in;
}

void fsdp_observe_timeline(void *self, const fsdp_seen *s)
{
    fsdp_engine *e = s->engine;
    if (!e->tl.on) return;
    switch (s->kind) {
    case FSDP_SEEN_BEGIN: begin(e, s->op); break;
    case FSDP_SEEN_END: end(e, s->op); break;
    case FSDP_SEEN_AHEAD: ahead(e, s->op, 0); break;
    case FSDP_SEEN_STARTED: ahead(e, s->op, 1); break;
    case FSDP_SEEN_WAITED:
        fsdp_tl_end(&e->tl, fsdp_tl_find_open(&e->tl, s->waited == FSDP_OP_PREFETCH ? "prefetch" : "reduce",
                                               s->group), 0, 0);
        break;
    case FSDP_SEEN_MOVED: break;
    }
}
