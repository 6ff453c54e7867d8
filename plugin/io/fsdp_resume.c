#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_agree.h"
#include "fsdp_manifest.h"
#include "fsdp_resume.h"

char *fsdp_resume_backup(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], "-backup")) return strdup(argv[i + 1]);
    const char *data = fsdp_data_arg(argc, argv);
    char dir[4096];
    if (data && fsdp_data_value(data, "backup", dir, sizeof dir)) return strdup(dir);
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "rnn")) return strdup("/home/pjreddie/backup/");
    return strdup("/backup/");
}

char *fsdp_resume_folder(const char *backup, const char *cfg, char **name)
{
    const char *base = strrchr(cfg, '/');
    base = base ? base + 1 : cfg;
    *name = strndup(base, strcspn(base, "."));
    size_t n = strlen(backup) + strlen(base) + 16;
    char *f = *name ? malloc(n) : NULL;
    if (f) snprintf(f, n, "%s%s%s.fsdp", backup, backup[0] && backup[strlen(backup) - 1] == '/' ? "" : "/", *name);
    return f;
}

fsdp_status fsdp_resume_pick(fsdp_ctl *ctl, const char *folder, const char *name, fsdp_resume_point *out)
{
    char pick[4096] = "";
    uint64_t v[3] = { 0, 0, 0 };   /* world, step, seen */
    if (ctl->rank == 0) {
        char *dir = NULL;
        fsdp_manifest m;
        fsdp_manifest_newest(folder, name, &dir, &m);
        if (dir) {
            snprintf(pick, sizeof pick, "%s/%s", dir, name);
            v[0] = (uint64_t)m.world;
            v[1] = (uint64_t)m.step;
            v[2] = m.seen;
            fprintf(stderr, "fsdp: -fsdp-resume auto: resuming from %s (step %ld, %llu images seen, written on "
                    "%d ranks; complete: its MANIFEST and %d files check out)\n", dir, m.step,
                    (unsigned long long)m.seen, m.world, m.world);
        } else {
            fprintf(stderr, "fsdp: -fsdp-resume auto: no complete checkpoint in %s; starting as the command line "
                    "says\n", folder);
        }
        fsdp_manifest_free(&m);
        free(dir);
    }
    FSDP_TRY(fsdp_ctl_broadcast(ctl, pick, sizeof pick, 0));
    FSDP_TRY(fsdp_ctl_broadcast(ctl, v, sizeof v, 0));
    out->base = pick[0] ? strdup(pick) : NULL;
    out->world = (int)v[0];
    out->step = (long)v[1];
    out->seen = v[2];
    if (pick[0] && !out->base) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    return FSDP_OK;
}

fsdp_status fsdp_resume_keep_batch(network *net, long global, int from, int to, int say)
{
    int64_t micro = (int64_t)net->batch * to;
    if ((int64_t)global == micro * net->subdivisions) return FSDP_OK;
    if (global <= 0)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: the checkpoint says its updates saw %ld images each "
                         "(its MANIFEST's seen / step): 1 or more", global);
    if (global % micro)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: the checkpoint's updates saw %ld images each; on %d "
                         "ranks with micro-batches of %d that needs %ld / %lld subdivisions, which is not whole: run "
                         "on a number of ranks that divides %ld / %d, or change the cfg's batch", global, to,
                         net->batch, global, (long long)micro, global, net->batch);
    int64_t sub = (int64_t)global / micro;
    if (sub > FSDP_KEEP_BATCH_MAX_SUBDIVISIONS)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: the checkpoint's updates saw %ld images each; on %d "
                         "ranks with micro-batches of %d that needs %lld subdivisions, over the %d it keeps", global,
                         to, net->batch, (long long)sub, FSDP_KEEP_BATCH_MAX_SUBDIVISIONS);
    if (say)
        fprintf(stderr, "fsdp: -fsdp-keep-batch: the checkpoint's %ld images per update (written on %d ranks) kept "
                "on %d ranks: subdivisions %d -> %lld (micro-batches of %d)\n", global, from, to, net->subdivisions,
                (long long)sub, net->batch);
    net->subdivisions = (int)sub;
    return FSDP_OK;
}
