#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fsdp_fs.h"

int fsdp_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    int rc = fd < 0 ? -1 : fsync(fd);
    if (fd >= 0) close(fd);
    return rc;
}

int fsdp_sync_folder_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return -1;
    char *slash = strrchr(copy, '/');
    const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash && slash != copy) *slash = 0;
    int rc = fsdp_sync_dir(dir);
    free(copy);
    return rc;
}
