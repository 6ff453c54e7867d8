/* fsdp_ring.h: the flight recorder (docs/DESIGN.md, "Flight recorder"):
 * each rank's last FSDP_RING_ENTRIES collectives, for the question a hung
 * job leaves: which rank is stuck, and in what.
 *
 * The ring is text of fixed width: a header line, then one line per
 * collective (its number, kind, bytes, start and end in seconds since the
 * epoch, state, and where: group and step).  With -fsdp-stats FILE it
 * lives in FILE.ring.RANK, mapped into memory, so that it is on disk
 * whatever becomes of the rank: a rank stopped by SIGSTOP or killed leaves
 * its ring there, and the watchdog of another rank reads every rank's
 * (fsdp_hang.h).  Without it the ring is in memory and a rank writes it on
 * stderr when its watchdog fires, it crashes, or a signal stops it.  A run
 * that ends well removes its file.
 *
 * Recording is main-thread only (where the collectives are called); the
 * watchdog's thread stamps the header with a sign of life (beat) that a
 * stopped rank no longer gives. */
#ifndef FSDP_RING_H
#define FSDP_RING_H

#include <stdint.h>
#include "fsdp.h"

#define FSDP_RING_ENTRIES 128
#define FSDP_RING_LINE 192   /* bytes per line, '\n' included */
#define FSDP_RING_BYTES ((FSDP_RING_ENTRIES + 1) * FSDP_RING_LINE)

/* One collective as read back from a ring. */
typedef struct fsdp_ring_entry {
    uint64_t seq;      /* 1, 2, ...: the rank's collectives in order; 0: an empty line */
    char what[49];
    uint64_t bytes;
    double t0, t1;     /* seconds since the epoch; t1 < 0: not ended */
    char state[8];     /* "open", "done", "failed" */
    char where[81];
} fsdp_ring_entry;

typedef struct fsdp_ring_header {
    int rank, world, pid;
    char host[65];
    double beat;       /* the last sign of life, seconds since the epoch */
} fsdp_ring_header;

/* Starts this rank's ring: in STEM.ring.RANK (truncated, made
 * FSDP_RING_BYTES long) where STEM is not NULL, else in memory.
 * Collectives before it are not recorded. */
fsdp_status fsdp_ring_open(const char *stem, int rank, int world);
/* A collective starts: its slot, for fsdp_ring_end; -1 when no ring. */
int fsdp_ring_begin(const char *what, uint64_t bytes, const char *where);
void fsdp_ring_end(int slot, int ok);
/* The watchdog's thread, every few tenths of a second. */
void fsdp_ring_beat(void);
/* The ring's file and the STEM it was opened with, or NULL (in memory, or none). */
const char *fsdp_ring_stem(void);
const char *fsdp_ring_path(void);
/* Whether a ring records; the world it was opened with. */
int fsdp_ring_on(void);
int fsdp_ring_world(void);
/* On stderr, one write per line, async-signal-safe: the ring's lines
 * oldest first where it is in memory, or where its file is. */
void fsdp_ring_dump(void);
/* The run is over: KEEP 0 removes the file (a run that ended well). */
void fsdp_ring_close(int keep);

/* Reading a ring file back: its header, and its entries by seq (empty
 * lines dropped); *n of at most FSDP_RING_ENTRIES.  FSDP_ERR_IO naming
 * PATH when it cannot be read or is not a ring. */
fsdp_status fsdp_ring_read(const char *path, fsdp_ring_header *h, fsdp_ring_entry *out, int *n);
/* Seconds since the epoch, as the ring keeps them. */
double fsdp_ring_now(void);

#endif
