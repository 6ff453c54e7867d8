#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp.h"

const char *fsdp_status_str(fsdp_status s)
{
    switch (s) {
    case FSDP_OK: return "ok";
    case FSDP_ERR_CONFIG: return "configuration error";
    case FSDP_ERR_ABI: return "plugin and Darknet built differently";
    case FSDP_ERR_MISMATCH: return "ranks disagree";
    case FSDP_ERR_COMM: return "communication error";
    case FSDP_ERR_CUDA: return "CUDA error";
    case FSDP_ERR_NOMEM: return "out of memory";
    case FSDP_ERR_IO: return "I/O error";
    case FSDP_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}

fsdp_status fsdp_fail(fsdp_status s, const char *fmt, ...)
{
    /* One write per message, so the lines of ranks sharing a terminal do
     * not interleave. */
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line) memcpy(line + sizeof line - 5, "...", 4);
    fprintf(stderr, "fsdp: %s\n", line);
    return s;
}

int fsdp_status_runtime(fsdp_status s)
{
    return s == FSDP_ERR_COMM || s == FSDP_ERR_CUDA || s == FSDP_ERR_NOMEM || s == FSDP_ERR_IO;
}

static int together;

void fsdp_agreed_stop(void) { together = 1; }
int fsdp_stopped_together(void) { return together; }

void fsdp_assert_fail(const char *file, int line, const char *cond, const char *what)
{
    fprintf(stderr, "fsdp: internal check failed at %s:%d: %s (%s)\n", file, line, cond, what);
    fflush(stderr);
    abort();
}
