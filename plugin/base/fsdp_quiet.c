/* Only rank 0 prints Darknet's start-up lines (docs/DESIGN.md, "Command
 * line"): every rank parses the same cfg and prints the same layer table,
 * and N interleaved copies bury what matters.  From plugin start to the
 * network being built, other ranks write stderr into a private file; the
 * plugin's own messages ("fsdp: ...") are passed on when that window ends,
 * and if the rank stops inside it (a file Darknet could not open, an
 * abort), its last lines are printed, so each rank still shows its own
 * errors.  Everything here after setup is async-signal-safe. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fsdp_quiet.h"
#include "fsdp_env.h"

static int real_err = -1;    /* the rank's stderr while it is captured */
static int capture = -1;     /* the private file */
static int rank_no;
static int ended_well;
static char buf[1 << 16];    /* the capture's tail, when it is passed on */
static const int fatal[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
static struct sigaction old_action[sizeof fatal / sizeof fatal[0]];

static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(real_err, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_str(const char *s) { put(s, strlen(s)); }

/* Reads the last sizeof buf bytes of the capture, from a line's start. */
static size_t tail(char **start)
{
    off_t end = lseek(capture, 0, SEEK_END);
    off_t from = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
    size_t n = 0;
    ssize_t r;
    if (lseek(capture, from, SEEK_SET) < 0) return 0;
    while (n < sizeof buf && (r = read(capture, buf + n, sizeof buf - n)) > 0) n += (size_t)r;
    *start = buf;
    if (from > 0) {   /* skip the partial first line */
        char *nl = memchr(buf, '\n', n);
        if (!nl) return 0;
        *start = nl + 1;
        n -= (size_t)(*start - buf);
    }
    return n;
}

static char *next_line(char *line, char *end)
{
    char *nl = memchr(line, '\n', (size_t)(end - line));
    return nl ? nl + 1 : end;
}

static int ours(const char *line) { return !strncmp(line, "fsdp:", 5); }

/* Passes on the plugin's lines and the last `last` others. */
static void pass_on(int last)
{
    char *s;
    size_t n = tail(&s);
    char *end = s + n;
    int others = 0, k = 0;
    for (char *l = s; l < end; l = next_line(l, end)) others += !ours(l);
    for (char *l = s, *next; l < end; l = next) {
        next = next_line(l, end);
        if (ours(l) || k++ >= others - last) {
            put(l, (size_t)(next - l));
            if (next[-1] != '\n') put_str("\n");
        }
    }
}

static void restore(void)
{
    if (capture < 0) return;
    dup2(real_err, 2);
    close(real_err);
    close(capture);
    capture = -1;
    real_err = -1;
}

static void stopped(void)
{
    /* One write: the launcher merges every rank's stderr, and a line
     * written in pieces can come out cut by another rank's. */
    static const char head[] = "fsdp: rank ", tail_text[] = " stopped while starting; its last lines on stderr:\n";
    char line[sizeof head + 16 + sizeof tail_text], num[16], *p = num + sizeof num;
    unsigned r = (unsigned)rank_no;
    *--p = 0;
    do *--p = (char)('0' + r % 10); while ((r /= 10) && p > num);
    size_t n = 0, k;
    memcpy(line + n, head, k = sizeof head - 1), n += k;
    memcpy(line + n, p, k = strlen(p)), n += k;
    memcpy(line + n, tail_text, k = sizeof tail_text - 1), n += k;
    put(line, n);
    pass_on(3);
}

static void at_exit(void)
{
    if (capture < 0) return;
    if (!ended_well) stopped();
    restore();
}

static void on_signal(int sig)
{
    if (capture >= 0) {
        stopped();
        dup2(real_err, 2);
        capture = -1;
    }
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; ++i)
        if (fatal[i] == sig) sigaction(sig, &old_action[i], NULL);
    raise(sig);
}

fsdp_status fsdp_quiet_begin(int rank)
{
    if (rank == 0 || fsdp_env_switch("FSDP_ALL_RANKS_PRINT")) return FSDP_OK;
    return fsdp_quiet_capture(rank);
}

fsdp_status fsdp_quiet_capture(int rank)
{
    static int at_exit_set;
    rank_no = rank;
    fflush(stderr);
    int fd = memfd_create("fsdp-stderr", MFD_CLOEXEC);   /* in memory: no folder needed */
    if (fd < 0) return FSDP_OK;   /* no capture: every rank prints, as before */
    real_err = dup(2);
    if (real_err < 0 || dup2(fd, 2) < 0) {
        if (real_err >= 0) close(real_err);
        close(fd);
        real_err = -1;
        return FSDP_OK;
    }
    capture = fd;
    if (!at_exit_set) at_exit_set = atexit(at_exit) == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; ++i) sigaction(fatal[i], &sa, &old_action[i]);
    return FSDP_OK;
}

/* The capture ends, passing on the plugin's lines or nothing. */
static void end_capture(int pass_ours)
{
    if (capture < 0) return;
    fflush(stderr);
    if (pass_ours) pass_on(0);
    restore();
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; ++i) sigaction(fatal[i], &old_action[i], NULL);
}

void fsdp_quiet_end(void) { end_capture(1); }
void fsdp_quiet_drop(void) { end_capture(0); }

void fsdp_quiet_ok(void)
{
    ended_well = 1;
}

void fsdp_quiet_failed(void)
{
    at_exit();
}
