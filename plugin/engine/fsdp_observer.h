/* fsdp_observer.h: what the engine reports as it runs the step plan, to
 * whoever observes it.  The engine's control flow reports and counts
 * nothing itself: each operation's beginning and end, the bytes it moved
 * and for which group, and each exchange it waits for that an earlier
 * operation started.  The tally (fsdp_tally.h: the stats' bytes, and the
 * byte theory's, counted on the memory prediction's copy of the engine)
 * and the timeline (fsdp_timeline.h: -fsdp-log-events, which the step log
 * writes) are the engine's own observers (fsdp_observe_tally.c,
 * fsdp_observe_timeline.c); others may join them. */
#ifndef FSDP_OBSERVER_H
#define FSDP_OBSERVER_H

#include <stdint.h>
#include "fsdp.h"
#include "fsdp_stepplan.h"

struct fsdp_engine;

typedef enum fsdp_seen_kind {
    FSDP_SEEN_BEGIN = 0,   /* `op` is about to run */
    FSDP_SEEN_END,         /* `op` ran */
    FSDP_SEEN_AHEAD,       /* unshard `op`'s gather is about to start ahead of the op, so that the
                            * prefetches behind it start right after it (the op ends it later) */
    FSDP_SEEN_STARTED,     /* unshard `op`'s gather started ahead */
    FSDP_SEEN_MOVED,       /* `bytes` of `moved` for `group` (`op`: the operation moving them, or NULL) */
    FSDP_SEEN_WAITED,      /* the exchange `waited` (a prefetch's gather, a reduce-scatter) of `group`,
                            * started by an earlier operation, is complete */
} fsdp_seen_kind;

typedef enum fsdp_moved {
    FSDP_MOVED_GATHER = 0,      /* all-gathered: parameters, updated parts */
    FSDP_MOVED_REDUCE_SCATTER,
    FSDP_MOVED_ALL_REDUCE,
    FSDP_MOVED_PEER,            /* of the above, the parts that went to peers alone (hybrid sharding) */
    FSDP_MOVED_SAVE,            /* gathered for a weights file */
} fsdp_moved;

typedef struct fsdp_seen {
    fsdp_seen_kind kind;
    struct fsdp_engine *engine;
    const fsdp_op *op;
    int group;
    fsdp_moved moved;
    uint64_t bytes;
    fsdp_op_kind waited;        /* FSDP_OP_PREFETCH or FSDP_OP_REDUCE */
} fsdp_seen;

typedef struct fsdp_observer {
    void (*see)(void *self, const fsdp_seen *s);
    void *self;
} fsdp_observer;

enum { FSDP_OBSERVERS_MAX = 4 };

/* Adds an observer after the engine's own (FSDP_ERR_UNSUPPORTED past
 * FSDP_OBSERVERS_MAX in all).  Observers see in the order they were added. */
fsdp_status fsdp_engine_observe(struct fsdp_engine *e, fsdp_observer o);

#endif
