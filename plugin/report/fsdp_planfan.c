#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fsdp_acts.h"
#include "fsdp_planfan.h"
#include "fsdp_quiet.h"

/* Every engine gets each of the cfg's keys; the first one's answer stands
 * for all (the same keys, the same answers). */
typedef struct fan_keys {
    fsdp_engine *e[FSDP_FAN_MAX];
    int n;
} fan_keys;

static int fan_cfg(void *c, const char *cfg, int line, int layer, const char *sec, const char *key, const char *val)
{
    fan_keys *k = c;
    int r = 0;
    for (int i = 0; i < k->n; ++i) {
        int ri = fsdp_on_cfg_option(k->e[i], cfg, line, layer, key, val);
        if (i == 0) r = ri;
    }
    return r;
}

fsdp_status fsdp_fan_write(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: a build's answers could not be sent: %s",
                                     w < 0 ? strerror(errno) : "closed");
        p += w;
        n -= (size_t)w;
    }
    return FSDP_OK;
}

fsdp_status fsdp_fan_read(const fsdp_fan *f, int k, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(f->fd[k], p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: build %d stopped before giving its answers", k);
        p += r;
        n -= (size_t)r;
    }
    return FSDP_OK;
}

/* The child of build k: its engine sets up its copy of the network and
 * answers; it leaves by _exit, running none of the parent's handlers. */
static void child(int k, fsdp_engine *e, network *net, int fd, fsdp_fan_serve serve, void *arg)
{
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    fsdp_status s = fsdp_on_network_built(e, net);
    if (s == FSDP_OK) s = serve(k, e, net, fd, arg);
    close(fd);
    _exit(s == FSDP_OK ? 0 : 1);
}

/* Engines for each build, on stand-in backends of their worlds. */
static fsdp_status engines(int n, const int *world, const int *machines, fsdp_ctl **ctl, fsdp_coll **coll,
                           fan_keys *keys)
{
    for (int k = 0; k < n; ++k) {
        FSDP_TRY(fsdp_backend_null_create(world[k], &ctl[k], &coll[k]));
        if (machines[k] > 1) FSDP_TRY(fsdp_backend_null_machines(coll[k], machines[k]));
        FSDP_TRY(fsdp_engine_create(ctl[k], coll[k], &keys->e[k]));
        keys->n = k + 1;
        /* As fsdp_planner.c's builds: a training run, staged on several ranks. */
        fsdp_engine_set_options(keys->e[k], &(fsdp_engine_options){ .staged = world[k] > 1,
                                                                     .acts = fsdp_acts_wanted(), .recompute = 1 });
    }
    return FSDP_OK;
}

static fsdp_status start(int n, const fsdp_strategy *strategy, fan_keys *keys, network *net, fsdp_fan_serve serve,
                         void *arg, fsdp_fan *out)
{
    for (int k = 0; k < n; ++k) {
        int p[2];
        if (pipe(p) != 0) return fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: no pipe for a build: %s", strerror(errno));
        fsdp_engine_set_strategy(keys->e[k], strategy[k]);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            for (int j = 0; j < out->n; ++j) close(out->fd[j]);
            child(k, keys->e[k], net, p[1], serve, arg);
        }
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            return fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: cannot start a build: %s", strerror(errno));
        }
        out->fd[out->n] = p[0];
        out->pid[out->n++] = (int)pid;
    }
    return FSDP_OK;
}

fsdp_status fsdp_fan_open(const char *cfg, int n, const int *world, const int *machines, const fsdp_strategy *strategy,
                          dn_hooks *hooks, fsdp_fan_serve serve, void *arg, fsdp_fan *out)
{
    *out = (fsdp_fan){ 0 };
    if (n < 1 || n > FSDP_FAN_MAX) return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-plan: %d builds at once", n);
    fsdp_ctl *ctl[FSDP_FAN_MAX] = { 0 };
    fsdp_coll *coll[FSDP_FAN_MAX] = { 0 };
    fan_keys keys = { .n = 0 };
    fsdp_status s = engines(n, world, machines, ctl, coll, &keys);
    network *net = NULL;
    if (s == FSDP_OK) {
        hooks->ctx = &keys;
        hooks->cfg_option = fan_cfg;
        fsdp_quiet_capture(0);   /* Darknet's layer table: the cfg built once already */
        net = parse_network_cfg((char *)cfg);
        fsdp_quiet_drop();
        hooks->cfg_option = NULL;
        hooks->ctx = NULL;
        s = start(n, strategy, &keys, net, serve, arg, out);
    }
    /* This process's copy was never set up: Darknet's own free. */
    if (net) free_network(net);
    for (int k = 0; k < n; ++k) {
        if (k < keys.n) fsdp_engine_free(keys.e[k]);
        if (coll[k]) fsdp_coll_free(coll[k]);
        if (ctl[k]) fsdp_ctl_free(ctl[k]);
    }
    if (s != FSDP_OK) fsdp_fan_close(out);
    return s;
}

fsdp_status fsdp_fan_close(fsdp_fan *f)
{
    fsdp_status s = FSDP_OK;
    for (int k = 0; k < f->n; ++k) {
        close(f->fd[k]);
        int st = 0;
        while (waitpid(f->pid[k], &st, 0) < 0 && errno == EINTR) {}
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            s = fsdp_fail(FSDP_ERR_IO, "-fsdp-plan: build %d of the cfg failed (exit status %d)", k, st);
    }
    *f = (fsdp_fan){ 0 };
    return s;
}
