#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_ckpt.h"
#include "fsdp_clock.h"
#include "fsdp_clock_state.h"
#include "fsdp_env.h"
#include "fsdp_manifest.h"
#include "fsdp_timeline.h"
#include "fsdp_nofollow.h"

struct fsdp_clock {
    fsdp_engine *e;
    fsdp_clock_opts o;        /* its folder and name: copies this clock owns */
    fsdp_clock_fsm fsm;       /* its state, and when the next is due */
    struct {                  /* the checkpoint in flight */
        long step;            /* Darknet's iteration it holds */
        uint64_t seen, run_id;
        char *dir, *path;     /* its step's folder, and this rank's file in it */
        double stall_s;       /* how long the step that took it stopped */
    } flight;
    /* the snapshot and its writer */
    unsigned char *snap;
    size_t snap_bytes;
    int foreground;           /* the step writes the file itself */
    int said_foreground;
    pthread_t thread;
    int thread_live;
    atomic_int writer_busy;
    int writer_rc;
    uint64_t file_bytes, file_sum;
    double write_t0, write_s;   /* the writer's start (monotonic) and seconds */
    char why[512];
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Bytes the kernel says this machine could still give (MemAvailable); 0
 * where it does not say. */
static size_t available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (size_t)kb * 1024;
}

fsdp_status fsdp_clock_create(fsdp_engine *e, const network *net, const fsdp_clock_opts *o, fsdp_clock **out)
{
    fsdp_clock *c = calloc(1, sizeof *c);
    if (!c) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    c->e = e;
    c->o = *o;
    c->o.folder = strdup(o->folder);
    c->o.name = strdup(o->name);
    if (!c->o.folder || !c->o.name) {
        fsdp_clock_free(c);
        return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    }
    fsdp_clock_fsm_init(&c->fsm, o->every_s, now_s());
    c->snap_bytes = fsdp_ckpt_self_bytes(e, net);
    /* The machine's ranks each hold one: at most half of what is free. */
    size_t avail = available_bytes(), all = c->snap_bytes * (size_t)(o->local_ranks > 0 ? o->local_ranks : 1);
    if (fsdp_env_switch("FSDP_CHECKPOINT_FOREGROUND")) {
        c->foreground = 1;
        snprintf(c->why, sizeof c->why, "FSDP_CHECKPOINT_FOREGROUND=1");
    } else if (!c->snap_bytes || (avail && all > avail / 2) || !(c->snap = malloc(c->snap_bytes))) {
        c->foreground = 1;
        snprintf(c->why, sizeof c->why, "a snapshot of %.1f MB per rank (%.1f MB for this machine's %d) does not "
                 "fit in half of the %.1f MB free", c->snap_bytes / 1e6, all / 1e6, o->local_ranks, avail / 1e6);
    } else {
        /* Resident from now on, as the prediction counts it: the first
         * snapshot's step takes no page faults. */
        memset(c->snap, 0, c->snap_bytes);
    }
    *out = c;
    return FSDP_OK;
}

size_t fsdp_clock_snapshot_bytes(const fsdp_clock *c)
{
    return c && !c->foreground ? c->snap_bytes : 0;
}

static void *writer(void *arg)
{
    fsdp_clock *c = arg;
    double t0 = now_s();
    c->write_t0 = t0;
    c->writer_rc = fsdp_ckpt_image_store(c->flight.path, c->snap, c->snap_bytes, &c->file_sum, c->why, sizeof c->why);
    c->file_bytes = c->snap_bytes;
    c->write_s = now_s() - t0;
    atomic_store(&c->writer_busy, 0);
    return NULL;
}

static void clear_flight(fsdp_clock *c)
{
    free(c->flight.dir);
    free(c->flight.path);
    c->flight.dir = c->flight.path = NULL;
}

/* A step folder that was there already must be a folder, not a symbolic
 * link: the files are never written through one, out of the backup folder. */
static fsdp_status real_folder(const char *dir)
{
    const char *why = NULL;
    int fd = fsdp_open_folder(AT_FDCWD, dir, &why);
    if (fd < 0) return fsdp_fail(FSDP_ERR_IO, "cannot write the checkpoint folder %s: %s", dir, why);
    close(fd);
    return FSDP_OK;
}

/* Every rank: its file of the checkpoint at this step, written by its
 * thread from a snapshot, or here. */
static fsdp_status start(fsdp_clock *c, network *net)
{
    FSDP_ASSERT(c->fsm.state == FSDP_CLOCK_IDLE, "clock start: IDLE");
    const fsdp_ctl *ctl = fsdp_engine_ctl(c->e);
    double t0 = now_s();
    c->flight.step = (long)get_current_batch(net);
    /* An earlier attempt of the run may have left this step's folder
     * (its MANIFEST, another world's files): gone before any rank writes
     * there, which the broadcast below orders. */
    if (ctl->rank == 0) fsdp_manifest_clear(c->o.folder, c->o.name, c->flight.step);
    FSDP_TRY(fsdp_ckpt_run_id(c->e, &c->flight.run_id));
    c->flight.seen = (uint64_t)*net->seen;
    c->flight.dir = fsdp_manifest_step_dir(c->o.folder, c->flight.step);
    size_t n = c->flight.dir ? strlen(c->flight.dir) + strlen(c->o.name) + 48 : 0;
    c->flight.path = n ? malloc(n) : NULL;
    fsdp_status s = c->flight.path ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK) {
        snprintf(c->flight.path, n, "%s/%s.fsdp-%d-of-%d", c->flight.dir, c->o.name, ctl->rank, ctl->world);
        /* Each rank makes the folders it writes into (one machine's
         * mkdir may race another's: EEXIST is theirs). */
        if ((mkdir(c->o.folder, 0755) != 0 && errno != EEXIST) || (mkdir(c->flight.dir, 0755) != 0 && errno != EEXIST))
            s = fsdp_fail(FSDP_ERR_IO, "cannot make the checkpoint folder %s: %s", c->flight.dir, strerror(errno));
        else s = real_folder(c->flight.dir);
    }
    if (s == FSDP_OK && c->foreground) {
        c->writer_rc = 0;
        s = fsdp_ckpt_self_write(c->e, net, c->flight.run_id, c->flight.path, &c->file_bytes, &c->file_sum);
        if (s != FSDP_OK) {
            c->writer_rc = -1;
            snprintf(c->why, sizeof c->why, "%s: not written", c->flight.path);
            s = FSDP_OK;   /* told to every rank when the checkpoint completes */
        }
        c->write_s = now_s() - t0;
    } else if (s == FSDP_OK) {
        s = fsdp_ckpt_self_image(c->e, net, c->flight.run_id, c->snap);
        if (s == FSDP_OK) {
            atomic_store(&c->writer_busy, 1);
            int rc = pthread_create(&c->thread, NULL, writer, c);
            if (rc != 0) {
                atomic_store(&c->writer_busy, 0);
                s = fsdp_fail(FSDP_ERR_IO, "cannot start the checkpoint writer: %s", strerror(rc));
            } else {
                c->thread_live = 1;
            }
        }
    }
    c->flight.stall_s = now_s() - t0;
    /* The step's time line (-fsdp-log-events, -fsdp-trace): the stop, with the file's bytes. */
    fsdp_tl_add(fsdp_engine_timeline(c->e), c->foreground ? "write" : "snapshot", -1, t0, t0 + c->flight.stall_s,
                c->foreground ? c->file_bytes : c->snap_bytes, 0);
    if (s != FSDP_OK) {
        clear_flight(c);
        return s;
    }
    fsdp_clock_fsm_start(&c->fsm);
    return FSDP_OK;
}

/* Every rank, once every writer is done: rank 0 makes the checkpoint
 * complete and keeps the newest `keep`. */
static fsdp_status complete(fsdp_clock *c)
{
    fsdp_clock_fsm_done(&c->fsm);
    fsdp_ctl *ctl = fsdp_engine_ctl(c->e);
    if (c->thread_live) {
        pthread_join(c->thread, NULL);
        fsdp_tl_add(fsdp_engine_timeline(c->e), "write", -1, c->write_t0, c->write_t0 + c->write_s, c->file_bytes, 0);
    }
    c->thread_live = 0;
    fsdp_status s = c->writer_rc == 0 ? FSDP_OK
                                      : fsdp_fail(FSDP_ERR_IO, "cannot write the checkpoint %s: %s", c->flight.path, c->why);
    s = fsdp_ctl_all_ok(ctl, s, FSDP_ERR_IO, "could not write its checkpoint file");
    uint64_t *v = s == FSDP_OK ? calloc(2 * (size_t)ctl->world, sizeof *v) : NULL;
    if (s == FSDP_OK && !v) s = fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    if (s == FSDP_OK) {
        v[ctl->rank] = c->file_bytes;
        v[ctl->world + ctl->rank] = c->file_sum;
        s = fsdp_ctl_max_u64(ctl, v, 2 * (size_t)ctl->world);
    }
    fsdp_status w = FSDP_OK;
    if (s == FSDP_OK && ctl->rank == 0) {
        fsdp_manifest m = { c->flight.run_id, c->flight.seen, c->flight.step, ctl->world, v, v + ctl->world };
        w = fsdp_manifest_write(c->flight.dir, c->o.name, &m);
        if (w == FSDP_OK) {
            fsdp_manifest_prune(c->o.folder, c->o.name, c->flight.step, c->o.keep);
            uint64_t all = 0;
            for (int r = 0; r < ctl->world; ++r) all += v[r];
            fprintf(stderr, "fsdp: checkpoint %s complete: %d files, %.1f MB; the step stopped %.3f s, the "
                    "file was written %s in %.2f s\n", c->flight.dir, ctl->world, all / 1e6, c->flight.stall_s,
                    c->foreground ? "in the foreground" : "in the background", c->write_s);
        }
    }
    if (s == FSDP_OK) s = fsdp_ctl_all_ok(ctl, w, FSDP_ERR_IO, "could not complete the checkpoint");
    free(v);
    clear_flight(c);
    return s;
}

fsdp_status fsdp_clock_step(fsdp_clock *c, network *net)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(c->e);
    /* One all-reduce a step: rank 0's clock, and the writers still busy. */
    double v[2] = { ctl->rank == 0 && fsdp_clock_fsm_due(&c->fsm, now_s()), atomic_load(&c->writer_busy) };
    FSDP_TRY(fsdp_ctl_sum_f64(ctl, v, 2));
    fsdp_clock_plan p = fsdp_clock_fsm_plan(&c->fsm, v[0] > 0, v[1] != 0);
    if (p.complete) FSDP_TRY(complete(c));
    if (p.start) {
        if (ctl->rank == 0) fsdp_clock_fsm_rearm(&c->fsm, now_s());
        /* Each rank decides by its own machine's memory. */
        if (c->foreground && !c->said_foreground)
            fprintf(stderr, "fsdp: rank %d: checkpoints on the clock are written in the foreground: %s\n", ctl->rank,
                    c->why);
        c->said_foreground = 1;
        FSDP_TRY(start(c, net));
    }
    return FSDP_OK;
}

int fsdp_clock_writing(const fsdp_clock *c)
{
    return c && c->fsm.state == FSDP_CLOCK_WRITING;
}

fsdp_status fsdp_clock_finish(fsdp_clock *c)
{
    if (!fsdp_clock_writing(c)) return FSDP_OK;
    return complete(c);   /* which waits for the writer */
}

void fsdp_clock_free(fsdp_clock *c)
{
    if (!c) return;
    if (c->thread_live) pthread_join(c->thread, NULL);
    clear_flight(c);
    free(c->snap);
    free((char *)c->o.folder);
    free((char *)c->o.name);
    free(c);
}
