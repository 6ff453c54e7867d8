/* test_clock: checkpoints on a clock (plugin/io/fsdp_clock.h) with no
 * Darknet run and no mpirun.  The clock's decisions (fsdp_clock_state.h)
 * transition by transition, with an illegal order stopping at its check;
 * then the clock itself over the self backend (a world of one), on an
 * engine with no layers and a network that is only its step counters:
 * each checkpoint's files and MANIFEST as the steps go (in the foreground
 * and from a snapshot in the background), keep-K pruning, and a write that
 * fails. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_backend.h"
#include "fsdp_clock.h"
#include "fsdp_clock_state.h"
#include "fsdp_manifest.h"

/* ---- the decisions ---------------------------------------------------------- */

static int plan_is(fsdp_clock_plan p, int complete, int start)
{
    return p.complete == complete && p.start == start;
}

Test(clock_state, idle_until_the_interval_has_passed)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 100);
    cr_assert_eq(m.state, FSDP_CLOCK_IDLE);
    cr_assert_not(fsdp_clock_fsm_due(&m, 159.9));
    cr_assert(fsdp_clock_fsm_due(&m, 160));
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 0, 0), 0, 0), "not due: nothing");
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 0, 1), 0, 0), "nothing in flight to complete");
}

Test(clock_state, due_starts_and_rearms)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 100);
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 1, 0), 0, 1));
    /* The next interval counts from the checkpoint taken, not the one due. */
    fsdp_clock_fsm_rearm(&m, 175);
    cr_assert_not(fsdp_clock_fsm_due(&m, 234.9));
    cr_assert(fsdp_clock_fsm_due(&m, 235));
    fsdp_clock_fsm_start(&m);
    cr_assert_eq(m.state, FSDP_CLOCK_WRITING);
}

Test(clock_state, writing_waits_for_every_writer)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 0);
    fsdp_clock_fsm_start(&m);
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 0, 1), 0, 0), "a writer busy: it stays in flight");
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 1, 1), 0, 0), "one in flight at most: a due one waits");
    cr_assert_eq(m.state, FSDP_CLOCK_WRITING);
}

Test(clock_state, done_completes_then_a_due_one_starts)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 0);
    fsdp_clock_fsm_start(&m);
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 0, 0), 1, 0));
    cr_assert(plan_is(fsdp_clock_fsm_plan(&m, 1, 0), 1, 1), "completed first, then the due one");
    fsdp_clock_fsm_done(&m);
    cr_assert_eq(m.state, FSDP_CLOCK_IDLE);
    fsdp_clock_fsm_start(&m);
    cr_assert_eq(m.state, FSDP_CLOCK_WRITING);
}

/* ---- calls in the wrong state stop the run (FSDP_CHECKS) ------------------ */

#ifdef FSDP_CHECKS
Test(clock_checks, start_while_writing, .signal = SIGABRT)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 0);
    fsdp_clock_fsm_start(&m);
    fsdp_clock_fsm_start(&m);
}

Test(clock_checks, done_while_idle, .signal = SIGABRT)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 0);
    fsdp_clock_fsm_done(&m);
}

Test(clock_checks, done_twice, .signal = SIGABRT)
{
    fsdp_clock_fsm m;
    fsdp_clock_fsm_init(&m, 60, 0);
    fsdp_clock_fsm_start(&m);
    fsdp_clock_fsm_done(&m);
    fsdp_clock_fsm_done(&m);
}
#endif

/* ---- the clock -------------------------------------------------------------- */

/* A checkpoint due at every step boundary. */
#define ALWAYS 1e-9
#define NAME "net"

static char top[64];
static char folder[300];

typedef struct rig {
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    fsdp_engine *e;
    network net;
    size_t seen;
    int t;
    fsdp_clock *clock;
} rig;

static void make_top(void)
{
    cr_redirect_stderr();
    /* In memory where the machine has it: the clock syncs every file and
     * folder it writes, which on a busy disk takes longer than the rest. */
    strcpy(top, "/dev/shm/fsdp-clock-XXXXXX");
    if (!mkdtemp(top)) {
        strcpy(top, "/tmp/fsdp-clock-XXXXXX");
        cr_assert(mkdtemp(top), "%s: %s", top, strerror(errno));
    }
    snprintf(folder, sizeof folder, "%s/" NAME ".fsdp", top);
}

static int remove_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

static void remove_top(void)
{
    nftw(top, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void rig_up(rig *r, double every_s, int keep)
{
    memset(r, 0, sizeof *r);
    cr_assert_eq(fsdp_backend_self_create(&r->ctl, &r->coll), FSDP_OK);
    cr_assert_eq(fsdp_engine_create(r->ctl, r->coll, &r->e), FSDP_OK);
    /* Darknet's iteration is seen / batch: one image a step here. */
    r->net.seen = &r->seen;
    r->net.t = &r->t;
    r->net.batch = r->net.subdivisions = 1;
    fsdp_clock_opts o = { every_s, keep, folder, NAME, 1 };
    cr_assert_eq(fsdp_clock_create(r->e, &r->net, &o, &r->clock), FSDP_OK);
}

static void rig_down(rig *r)
{
    fsdp_clock_free(r->clock);
    fsdp_engine_free(r->e);
    fsdp_coll_free(r->coll);
    fsdp_ctl_free(r->ctl);
}

/* The step boundary after Darknet's iteration `it`. */
static fsdp_status step_at(rig *r, long it)
{
    r->seen = (size_t)it;
    return fsdp_clock_step(r->clock, &r->net);
}

static void step_path(long step, const char *file, char *out, size_t n)
{
    snprintf(out, n, "%s/step-%08ld%s%s", folder, step, file ? "/" : "", file ? file : "");
}

static int exists(long step, const char *file)
{
    char p[512];
    struct stat st;
    step_path(step, file, p, sizeof p);
    return stat(p, &st) == 0;
}

/* The checkpoint at `step` is complete: its MANIFEST holds, and names this
 * rank's file with its size and checksum; *bytes: that file's size. */
static void assert_complete(long step, uint64_t *bytes)
{
    char d[512], why[512] = "";
    fsdp_manifest m;
    step_path(step, NULL, d, sizeof d);
    cr_assert_eq(fsdp_manifest_read(d, NAME, &m, why, sizeof why), 0, "%s: %s", d, why);
    cr_assert(m.step == step && m.world == 1 && m.seen == (uint64_t)step, "%s: step %ld", d, m.step);
    if (bytes) *bytes = m.size[0];
    fsdp_manifest_free(&m);
}

/* How many step folders the clock's folder holds. */
static int step_folders(void)
{
    int n = 0;
    DIR *d = opendir(folder);
    for (struct dirent *f; d && (f = readdir(d));) n += !strncmp(f->d_name, "step-", 5);
    if (d) closedir(d);
    return n;
}

static void pause_ms(long ms)
{
    struct timespec t = { 0, ms * 1000000L };
    nanosleep(&t, NULL);
}

static char *stderr_text(void)
{
    static char buf[8192];
    fflush(stderr);
    size_t n = fread(buf, 1, sizeof buf - 1, cr_get_redirected_stderr());
    buf[n] = 0;
    return buf;
}

Test(clock, not_due_writes_nothing, .init = make_top, .fini = remove_top)
{
    rig r;
    rig_up(&r, 3600, 2);
    for (long it = 1; it <= 5; ++it) cr_assert_eq(step_at(&r, it), FSDP_OK);
    cr_assert_not(fsdp_clock_writing(r.clock));
    cr_assert_eq(fsdp_clock_finish(r.clock), FSDP_OK, "nothing in flight: nothing to finish");
    struct stat st;
    cr_assert_neq(stat(folder, &st), 0, "no folder before the first checkpoint");
    rig_down(&r);
}

/* Written by the step itself: every transition is visible at its boundary. */
Test(clock, foreground_file_then_manifest, .init = make_top, .fini = remove_top)
{
    setenv("FSDP_CHECKPOINT_FOREGROUND", "1", 1);
    rig r;
    rig_up(&r, ALWAYS, 2);
    cr_assert_eq(fsdp_clock_snapshot_bytes(r.clock), 0, "no snapshot held");
    cr_assert_eq(step_at(&r, 1), FSDP_OK);
    cr_assert(fsdp_clock_writing(r.clock));
    cr_assert(exists(1, NAME ".fsdp-0-of-1"), "the step wrote its file");
    cr_assert_not(exists(1, "MANIFEST"), "not complete before the next boundary");
    cr_assert_eq(step_at(&r, 2), FSDP_OK);
    assert_complete(1, NULL);
    cr_assert(fsdp_clock_writing(r.clock), "still due: the next one started at the same boundary");
    cr_assert(exists(2, NAME ".fsdp-0-of-1") && !exists(2, "MANIFEST"));
    cr_assert_eq(fsdp_clock_finish(r.clock), FSDP_OK);
    cr_assert_not(fsdp_clock_writing(r.clock));
    assert_complete(2, NULL);
    rig_down(&r);
    const char *err = stderr_text();
    const char *said = strstr(err, "written in the foreground: FSDP_CHECKPOINT_FOREGROUND=1");
    cr_assert(said && !strstr(said + 1, "written in the foreground: "), "said once: %s", err);
    cr_assert(strstr(err, "fsdp: checkpoint ") && strstr(err, "/step-00000002 complete: 1 files"), "%s", err);
}

/* From a snapshot: the steps go on while the thread writes, and the
 * checkpoint completes at the first boundary after it is done. */
Test(clock, background_snapshot_completes_later, .init = make_top, .fini = remove_top)
{
    rig r;
    rig_up(&r, ALWAYS, 2);
    size_t snap = fsdp_clock_snapshot_bytes(r.clock);
    cr_assert_gt(snap, 0, "a snapshot buffer held");
    cr_assert_eq(step_at(&r, 1), FSDP_OK);
    cr_assert(fsdp_clock_writing(r.clock));
    long it = 1;
    while (!exists(1, "MANIFEST") && it < 2000) {
        pause_ms(1);
        cr_assert_eq(step_at(&r, ++it), FSDP_OK);
        cr_assert(fsdp_clock_writing(r.clock), "one in flight until its boundary, then the next");
    }
    uint64_t bytes = 0;
    assert_complete(1, &bytes);
    cr_assert_eq(bytes, snap, "the file is the snapshot and its checksum");
    cr_assert_not(exists(it, "MANIFEST"), "the one taken at that boundary is in flight");
    cr_assert_eq(fsdp_clock_finish(r.clock), FSDP_OK, "finish waits for the writer");
    cr_assert_not(fsdp_clock_writing(r.clock));
    assert_complete(it, NULL);
    cr_assert_eq(step_folders(), 2, "only the two checkpoints taken");
    rig_down(&r);
}

/* The newest `keep` complete ones stay; half-written ones and a newer one
 * an earlier attempt left go at the first completion. */
Test(clock, keeps_the_newest_k, .init = make_top, .fini = remove_top)
{
    setenv("FSDP_CHECKPOINT_FOREGROUND", "1", 1);
    char p[512];
    cr_assert_eq(mkdir(folder, 0755), 0);
    for (long s = 1; s <= 9; s += 8) {
        step_path(s, NULL, p, sizeof p);
        cr_assert_eq(mkdir(p, 0755), 0);
        step_path(s, NAME ".fsdp-0-of-1", p, sizeof p);
        FILE *f = fopen(p, "w");
        cr_assert(f && fputs("half", f) >= 0 && fclose(f) == 0);
    }
    rig r;
    rig_up(&r, ALWAYS, 2);
    cr_assert_eq(step_at(&r, 2), FSDP_OK);
    cr_assert_eq(step_at(&r, 3), FSDP_OK);
    cr_assert(!exists(1, NULL) && !exists(9, NULL), "the half-written ones are gone");
    assert_complete(2, NULL);
    for (long it = 4; it <= 5; ++it) cr_assert_eq(step_at(&r, it), FSDP_OK);
    cr_assert_eq(fsdp_clock_finish(r.clock), FSDP_OK);
    cr_assert(!exists(2, NULL) && !exists(3, NULL), "older than the newest 2: pruned");
    assert_complete(4, NULL);
    assert_complete(5, NULL);
    cr_assert_eq(step_folders(), 2);
    rig_down(&r);
}

/* A writer that fails: every rank stops with the file named, no MANIFEST
 * makes it complete, and the complete one before it stays. */
Test(clock, write_failure_is_reported_not_completed, .init = make_top, .fini = remove_top)
{
    setenv("FSDP_CHECKPOINT_FOREGROUND", "1", 1);
    rig r;
    rig_up(&r, ALWAYS, 1);
    cr_assert_eq(step_at(&r, 1), FSDP_OK);
    cr_assert_eq(fsdp_clock_finish(r.clock), FSDP_OK);
    rig_down(&r);
    assert_complete(1, NULL);
    /* The file's .tmp is taken by a folder the clock cannot clear. */
    char p[512];
    step_path(2, NULL, p, sizeof p);
    cr_assert_eq(mkdir(p, 0755), 0);
    step_path(2, NAME ".fsdp-0-of-1.tmp", p, sizeof p);
    cr_assert_eq(mkdir(p, 0755), 0);
    strcat(p, "/keep");
    FILE *f = fopen(p, "w");
    cr_assert(f && fclose(f) == 0);
    unsetenv("FSDP_CHECKPOINT_FOREGROUND");
    rig_up(&r, ALWAYS, 1);
    cr_assert_eq(step_at(&r, 2), FSDP_OK, "the snapshot is taken; its writer fails on its own");
    cr_assert(fsdp_clock_writing(r.clock));
    fsdp_status s = FSDP_OK;
    for (int k = 0; k < 2000 && s == FSDP_OK; ++k) {
        pause_ms(1);
        s = step_at(&r, 2);
    }
    cr_assert_eq(s, FSDP_ERR_IO);
    cr_assert_not(fsdp_clock_writing(r.clock), "IDLE: nothing in flight after the failure");
    cr_assert_not(exists(2, "MANIFEST"), "never complete");
    assert_complete(1, NULL);
    rig_down(&r);
    const char *err = stderr_text();
    cr_assert(strstr(err, "fsdp: cannot write the checkpoint ") &&
                  strstr(err, "/step-00000002/" NAME ".fsdp-0-of-1: "),
              "%s", err);
}
