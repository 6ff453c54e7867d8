/* fsdp_observer.c: the engine's observers (fsdp_observer.h): adding one,
 * and telling each what the engine did. */
#include "fsdp_engine_impl.h"

fsdp_status fsdp_engine_observe(fsdp_engine *e, fsdp_observer o)
{
    fsdp_engine_watch *w = &e->watch;
    if (w->n == FSDP_OBSERVERS_MAX)
        return fsdp_fail(FSDP_ERR_UNSUPPORTED, "the engine takes at most %d observers", FSDP_OBSERVERS_MAX);
    w->list[w->n++] = o;
    return FSDP_OK;
}

void fsdp_engine_watch_init(fsdp_engine *e)
{
    e->watch = (fsdp_engine_watch){ 0 };
    fsdp_engine_observe(e, (fsdp_observer){ fsdp_observe_tally, NULL });
    fsdp_engine_observe(e, (fsdp_observer){ fsdp_observe_timeline, NULL });
}

void fsdp_engine_see(fsdp_engine *e, fsdp_seen s)
{
    s.engine = e;
    for (int k = 0; k < e->watch.n; ++k) e->watch.list[k].see(e->watch.list[k].self, &s);
}

void fsdp_engine_moved(fsdp_engine *e, const fsdp_op *op, int group, fsdp_moved what, uint64_t bytes)
{
    fsdp_engine_see(e, (fsdp_seen){ .kind = FSDP_SEEN_MOVED, .op = op, .group = group, .moved = what,
                                    .bytes = bytes });
}
