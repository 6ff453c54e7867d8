#include <stdarg.h>
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
    va_list ap;
    va_start(ap, fmt);
    fputs("fsdp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return s;
}
