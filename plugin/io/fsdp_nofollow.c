#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fsdp_nofollow.h"

static const char *reason(int err)
{
    return err == ELOOP ? "a symbolic link (not followed)" : strerror(err);
}

int fsdp_open_regular(int dirfd, const char *name, uint64_t *size, const char **why)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = reason(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file (a FIFO, a device or a folder)";
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

int fsdp_open_folder(int dirfd, const char *name, const char **why)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) *why = errno == ENOTDIR ? "not a folder (a symbolic link, not followed, or a file)" : reason(errno);
    return fd;
}

int fsdp_is_regular(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

FILE *fsdp_create_nofollow(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (fd >= 0 && !f) close(fd);
    return f;
}
