/* fsdp_fs.h: making what a run wrote last a crash: a rename into a folder
 * is durable only once the folder itself is synced. */
#ifndef FSDP_FS_H
#define FSDP_FS_H

/* fsync of folder dir; 0, or -1 with errno. */
int fsdp_sync_dir(const char *dir);
/* fsync of the folder holding path ("." for a bare name). */
int fsdp_sync_folder_of(const char *path);

#endif
