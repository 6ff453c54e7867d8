/* fsdp.h: status codes and check macros shared by every part of the plugin. */
#ifndef FSDP_H
#define FSDP_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {   /* fsdp_kernels.cu reports through fsdp_fail */
#endif

typedef enum {
    FSDP_OK = 0,
    FSDP_ERR_CONFIG,   /* bad cfg key, value, group layout, flag or file */
    FSDP_ERR_ABI,      /* Darknet and the plugin were built differently */
    FSDP_ERR_MISMATCH, /* ranks disagree (cfg, world size, checkpoint) */
    FSDP_ERR_COMM,     /* MPI or NCCL failed */
    FSDP_ERR_CUDA,
    FSDP_ERR_NOMEM,
    FSDP_ERR_IO,
    FSDP_ERR_UNSUPPORTED,
} fsdp_status;

const char *fsdp_status_str(fsdp_status s);
/* Whether s is a failure of the run itself (communication, the device,
 * memory, a file) rather than of what the user gave or of the build. */
int fsdp_status_runtime(fsdp_status s);

/* Prints "fsdp: <what>" on stderr and returns the status, so a caller can
 * write `return fsdp_fail(FSDP_ERR_CONFIG, "%s:%d: ...", file, line);`. */
fsdp_status fsdp_fail(fsdp_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An error every rank saw alike (an agreement check failed on all of them):
 * the ranks stop together and may leave MPI in order.  After any other
 * error another rank may wait in a collective forever, so the plugin's
 * finish aborts the whole run instead (fsdp_run.h). */
void fsdp_agreed_stop(void);
int fsdp_stopped_together(void);

/* A state machine's check failed: prints "fsdp: internal check failed at
 * FILE:LINE: COND (WHAT)" and aborts: the run is wrong from here on, and
 * an abort ends every rank (mpirun) where a status might be lost. */
void fsdp_assert_fail(const char *file, int line, const char *cond, const char *what)
    __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

/* FSDP_ASSERT(COND, WHAT): a transition's precondition, from the tables in
 * the state machines' headers (fsdp_flat.h, fsdp_grad.h, fsdp_engine.h).
 * Checked in builds with FSDP_CHECKS (the default where the tests are built;
 * -DFSDP_CHECKS=OFF leaves them out): an operation called in the wrong state
 * stops there, not as wrong bytes an end-to-end test finds later. */
#ifdef FSDP_CHECKS
#define FSDP_ASSERT(cond, what) ((cond) ? (void)0 : fsdp_assert_fail(__FILE__, __LINE__, #cond, what))
#else
#define FSDP_ASSERT(cond, what) ((void)0)
#endif

/* A macro's value as a string literal: a default said once, in code and help. */
#define FSDP_STR_(x) #x
#define FSDP_STR(x) FSDP_STR_(x)

/* FSDP_CHECK(EXPR): a whole object checked against its state at the end of
 * a transition (fsdp_flat_check, fsdp_grad_check, fsdp_engine_check: every
 * invariant, not only the starting state), where checks are built in. */
#ifdef FSDP_CHECKS
#define FSDP_CHECK(expr) ((void)(expr))
#else
#define FSDP_CHECK(expr) ((void)0)
#endif

#define FSDP_TRY(expr) do { fsdp_status _s = (expr); if (_s != FSDP_OK) return _s; } while (0)

/* The smaller of two counts (the collectives' chunks and rounds). */
static inline size_t fsdp_min_size(size_t a, size_t b) { return a < b ? a : b; }
/* Where rank q's share of k floats starts when k is split among `world`
 * ranks for an all-reduce, [k q / world, k (q + 1) / world): the
 * shared-memory and point-to-point paths split alike, so both sum each
 * float in the same place. */
static inline size_t fsdp_share_lo(size_t k, int q, int world) { return k * (size_t)q / (size_t)world; }

#endif
