/* fsdp_quiet.h: rank 0 alone prints Darknet's start-up lines; the other
 * ranks still show their own errors (fsdp_quiet.c). */
#ifndef FSDP_QUIET_H
#define FSDP_QUIET_H

#include "fsdp.h"

/* On ranks other than 0 (unless FSDP_ALL_RANKS_PRINT is set), captures
 * stderr until fsdp_quiet_end. */
fsdp_status fsdp_quiet_begin(int rank);
/* Captures stderr whatever the rank (-fsdp-plan's builds, whose layer
 * tables nobody needs), until fsdp_quiet_end or fsdp_quiet_drop; a stop
 * inside the capture shows its last lines as above. */
fsdp_status fsdp_quiet_capture(int rank);
/* The network is built: stderr is the rank's own again; the plugin's
 * messages written meanwhile are passed on. */
void fsdp_quiet_end(void);
/* The same, passing on nothing (a build that went well). */
void fsdp_quiet_drop(void);
/* The run ended well: nothing captured needs showing. */
void fsdp_quiet_ok(void);
/* The rank stops now without exit's handlers (MPI_Abort, _exit): show
 * what it captured, as exit would. */
void fsdp_quiet_failed(void);

#endif
