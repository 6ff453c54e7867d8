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

fsdp_status fsdp_resume_pick(fsdp_ctl *ctl, const char *folder, const char *name, char **base, int *world)
{
    char pick[4096] = "";
    int w = 0;
    if (ctl->rank == 0) {
        char *dir = NULL;
        fsdp_manifest m;
        fsdp_manifest_newest(folder, name, &dir, &m);
        if (dir) {
            snprintf(pick, sizeof pick, "%s/%s", dir, name);
            w = m.world;
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
    FSDP_TRY(fsdp_ctl_broadcast(ctl, &w, sizeof w, 0));
    *base = pick[0] ? strdup(pick) : NULL;
    *world = w;
    if (pick[0] && !*base) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    return FSDP_OK;
}

fsdp_status fsdp_resume_keep_batch(network *net, int from, int to, int say)
{
    if (from == to) return FSDP_OK;
    long sub = (long)net->subdivisions * from;
    if (sub % to)
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-keep-batch: the checkpoint's global batch is %d ranks x %d "
                         "images; on %d ranks each would need subdivisions=%d x %d / %d, which is not whole: "
                         "run on a number of ranks that divides %ld, or change the cfg's batch", from,
                         net->batch * net->subdivisions, to, net->subdivisions, from, to, sub);
    if (say)
        fprintf(stderr, "fsdp: -fsdp-keep-batch: the checkpoint's %d ranks x %d images per update kept on %d ranks: "
                "subdivisions %d -> %ld (micro-batches of %d)\n", from, net->batch * net->subdivisions, to,
                net->subdivisions, sub / to, net->batch);
    net->subdivisions = (int)(sub / to);
    return FSDP_OK;
}
