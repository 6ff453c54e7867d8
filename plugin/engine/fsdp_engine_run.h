/* fsdp_engine_run.h: the step plan's runner, for the engine's hooks and for
 * the memory prediction, which runs the same operations on a copy of the
 * engine over the count placement (fsdp_memplan.c).  Inside engine/ only. */
#ifndef FSDP_ENGINE_RUN_H
#define FSDP_ENGINE_RUN_H

#include "fsdp_engine.h"

/* The ops at layer i's hook point `at` that apply to a step that trains
 * (or not) and, in backward, is (or not) the update's last micro-batch. */
fsdp_status fsdp_engine_run_point(fsdp_engine *e, network *net, int i, fsdp_at at, int training, int last);
/* The update's ops: the reduce in flight settled, the groups that did not
 * step in backward stepped. */
fsdp_status fsdp_engine_run_update(fsdp_engine *e, const update_args *a);

#endif
