#include <errno.h>
#include <stdio.h>
#include "fsdp_hash.h"

fsdp_status fsdp_hash_file(const char *path, uint64_t *size, uint64_t *hash)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fsdp_fail(FSDP_ERR_IO, "%s: cannot read it: %s", path, strerror(errno));
    static unsigned char buf[1 << 20];
    fsdp_hasher h;
    fsdp_hasher_init(&h);
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) fsdp_hasher_add(&h, buf, got);
    int bad = ferror(f);
    fclose(f);
    if (bad) return fsdp_fail(FSDP_ERR_IO, "%s: cannot read it", path);
    *size = h.len;
    *hash = fsdp_hasher_end(&h);
    return FSDP_OK;
}
