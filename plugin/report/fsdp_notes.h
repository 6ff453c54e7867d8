/* fsdp_notes.h: rank 0's notes once the network is built and sharded, on
 * stderr after the engine's own lines: the memory prediction, the faster
 * mode one key away, the launcher's keepalive, and what was resumed. */
#ifndef FSDP_NOTES_H
#define FSDP_NOTES_H

#include "fsdp_engine.h"
#include "fsdp_hosts.h"
#include "fsdp_longrun.h"
#include "fsdp_memplan.h"

/* m: the prediction (peak 0: none, GPU runs); timeout_s: -fsdp-timeout's. */
void fsdp_notes_startup(const fsdp_engine *e, const fsdp_mem_prediction *m, const fsdp_hosts *hosts,
                        double timeout_s);
/* The checkpoint the run resumed from, if it resumed. */
void fsdp_notes_resumed(const fsdp_longrun *lr, network *net, int world);

#endif
