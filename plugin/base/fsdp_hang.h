/* fsdp_hang.h: the one line a hung job ends with (docs/DESIGN.md, "Flight
 * recorder"): from every rank's ring (fsdp_ring.h), which rank holds the
 * others up and where it is, and where the others wait.  The rank held
 * up is the one that gives no sign of life (stopped, dead), else the one
 * behind: fewest collectives entered. */
#ifndef FSDP_HANG_H
#define FSDP_HANG_H

#include <stddef.h>
#include "fsdp.h"

/* Reads STEM.ring.0 .. STEM.ring.(WORLD - 1) at NOW (seconds since the
 * epoch) into OUT ("rank 3 (host b) is in ... since 12 s; ranks 0-2 wait
 * in ..."). */
fsdp_status fsdp_hang_summary(const char *stem, int world, double now, char *out, size_t n);
/* The watchdog's: the first rank to claim STEM.hang writes the summary
 * there and on stderr, once per job; 0 when another rank did. */
int fsdp_hang_report(const char *stem, int world);

#endif
