#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_ring.h"
#include "fsdp_stop.h"

/* Written in the main thread between steps, read by the handler: the
 * handler only copies what is there (a message cut at a torn update is
 * still a message). */
static char step_text[96] = "before the first step";
static char saved_text[1024] = "no weights file written yet";
static const int stops[] = { SIGTERM, SIGINT, SIGHUP };

/* Writes the pieces as one line with one write: the launcher merges every
 * rank's stderr, and a line written in pieces can come out cut by another
 * rank's. */
static void put_line(const char *const *piece, int n)
{
    char line[1280];
    size_t len = 0;
    for (int i = 0; i < n; ++i) {
        size_t k = strlen(piece[i]);
        if (k > sizeof line - 1 - len) k = sizeof line - 1 - len;
        memcpy(line + len, piece[i], k);
        len += k;
    }
    line[len++] = '\n';
    for (const char *s = line; len > 0;) {
        ssize_t w = write(2, s, len);
        if (w <= 0) return;
        s += w;
        len -= (size_t)w;
    }
}

static void on_stop(int sig)
{
    const char *piece[] = { "fsdp: stopped by ", sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP",
                            " ", step_text, "; ", saved_text };
    put_line(piece, 6);
    fsdp_ring_dump();
    /* The launcher forwards output on its own time and may be tearing
     * the job down already: give it the line before the rank ends. */
    struct timespec pause = { 0, 200 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static char crash_prefix[32] = "fsdp: ";
static const int crashes[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

static void on_crash(int sig)
{
    const char *piece[] = { crash_prefix, sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" :
                            sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "SIGABRT",
                            ": this rank crashed; the launcher stops the others" };
    put_line(piece, 3);
    fsdp_ring_dump();
    signal(sig, SIG_DFL);
    raise(sig);
}

void fsdp_stop_install_crash(int rank)
{
    snprintf(crash_prefix, sizeof crash_prefix, "fsdp: rank %d: ", rank);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof crashes / sizeof crashes[0]; ++i) sigaction(crashes[i], &sa, NULL);
}

void fsdp_stop_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; ++i) sigaction(stops[i], &sa, NULL);
}

void fsdp_stop_note_step(size_t step, size_t max_steps)
{
    snprintf(step_text, sizeof step_text, "after step %zu of %zu", step, max_steps);
}

void fsdp_stop_note_saved(const char *file)
{
    snprintf(saved_text, sizeof saved_text, "the last weights file written: %s", file);
}
