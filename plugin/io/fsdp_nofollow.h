/* fsdp_nofollow.h: opening what a backup folder holds without leaving it.
 * Checkpoints and manifests come from shared file systems and copies made
 * by hand: a symbolic link where a file or a step folder should be is
 * never followed, and a FIFO or a device is refused without blocking. */
#ifndef FSDP_NOFOLLOW_H
#define FSDP_NOFOLLOW_H

#include <stdint.h>
#include <stdio.h>

/* Opens `name` in folder dirfd (AT_FDCWD: name is a path, whose last
 * component is not followed) read-only: a regular file, its size in *size.
 * Returns the descriptor, or -1 with *why set (a symbolic link, not a
 * regular file, or the system's reason). */
int fsdp_open_regular(int dirfd, const char *name, uint64_t *size, const char **why);
/* Opens the folder `name` in dirfd (AT_FDCWD: a path) without following
 * a symbolic link in its last component: its descriptor, or -1 with *why. */
int fsdp_open_folder(int dirfd, const char *name, const char **why);
/* Creates (or truncates) path for writing, never through a symbolic link
 * in its last component (which fails with ELOOP): fopen(path, "wb") that
 * cannot write outside the folder. */
FILE *fsdp_create_nofollow(const char *path);
/* Whether `name` in dirfd is a regular file itself (not a link to one). */
int fsdp_is_regular(int dirfd, const char *name);

#endif
