/* fsdp_observe_tally.c: the tally (fsdp_tally.h) as an observer of the
 * engine: the bytes each group's operations moved, in all and per group,
 * and the gathers in backward that moved any.  The memory prediction's
 * copy of the engine counts with it too: the byte theory is the same
 * count over the count placement. */
#include "fsdp_engine_impl.h"

void fsdp_observe_tally(void *self, const fsdp_seen *s)
{
    if (s->kind != FSDP_SEEN_MOVED) return;
    fsdp_tally *t = &s->engine->tally;
    fsdp_group_tally *g = s->moved == FSDP_MOVED_PEER || s->moved == FSDP_MOVED_SAVE ? NULL : &t->group[s->group];
    switch (s->moved) {
    case FSDP_MOVED_GATHER:
        g->ag_bytes += s->bytes;
        t->ag += s->bytes;
        if (s->op && s->op->kind == FSDP_OP_UNSHARD && s->op->backward) ++g->backward_gathers;
        break;
    case FSDP_MOVED_REDUCE_SCATTER:
        g->rs_bytes += s->bytes;
        t->rs += s->bytes;
        break;
    case FSDP_MOVED_ALL_REDUCE:
        g->ar_bytes += s->bytes;
        t->ar += s->bytes;
        break;
    case FSDP_MOVED_PEER: t->peer += s->bytes; break;
    case FSDP_MOVED_SAVE: t->ckpt += s->bytes; break;
    }
}
