/* fsdp_planfan.h: one parse of a cfg for several of -fsdp-plan's builds.
 *
 * Darknet's parse of a cfg (mostly drawing its initial weights) is most of
 * a build's time, and it does not depend on the world or the strategy the
 * engine later sets the network up for; the set-up consumes the network.
 * So the cfg is parsed once, its keys going to every engine, and each
 * engine sets up its own copy of the network in a child process (fork:
 * the copy costs only the pages it writes), which sends its answers back
 * through a pipe and exits.  The children print nothing: the cfg was
 * checked by a build in this process first (fsdp_planner.c). */
#ifndef FSDP_PLANFAN_H
#define FSDP_PLANFAN_H

#include "darknet_plugin.h"
#include "fsdp.h"
#include "fsdp_cfg.h"
#include "fsdp_engine.h"

#define FSDP_FAN_MAX 9   /* three strategies, each at one rank, two, and two machines of two */

/* In the child of build k: its engine set up on net, rank 0 of its world;
 * writes its answers to fd.  A status other than FSDP_OK is the child's
 * exit status 1. */
typedef fsdp_status (*fsdp_fan_serve)(int k, const fsdp_engine *e, const network *net, int fd, void *arg);

typedef struct fsdp_fan {
    int n;
    int fd[FSDP_FAN_MAX];      /* read ends, one per build */
    int pid[FSDP_FAN_MAX];
} fsdp_fan;

/* Parses cfg once for n builds (build k: world[k] ranks on machines[k]
 * machines of equal ranks, under strategy[k]) and starts a child for each. */
fsdp_status fsdp_fan_open(const char *cfg, int n, const int *world, const int *machines, const fsdp_strategy *strategy,
                          dn_hooks *hooks, fsdp_fan_serve serve, void *arg, fsdp_fan *out);
/* Reads exactly n bytes of build k's answers: FSDP_ERR_IO where its child
 * stopped first. */
fsdp_status fsdp_fan_read(const fsdp_fan *f, int k, void *buf, size_t n);
/* Waits for every child: FSDP_ERR_IO where one failed. */
fsdp_status fsdp_fan_close(fsdp_fan *f);

/* Writes exactly n bytes to fd. */
fsdp_status fsdp_fan_write(int fd, const void *buf, size_t n);

#endif
