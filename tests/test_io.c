/* test_io: plugin/io/ without Darknet runs or mpirun: the checkpoint
 * format's parts against the flats' own layout (fsdp_flat_own_part, for
 * every strategy, world and rank) and its numbers' refusals
 * (fsdp_ckpt_check.h); the MANIFEST's round trip, parse and refusals, and
 * the backup folder's clean-up (fsdp_manifest.h); resume's choice of
 * checkpoint and -fsdp-keep-batch's limits (fsdp_resume.h). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include "flat_fixture.h"
#include "fsdp_ckpt_check.h"
#include "fsdp_hash.h"
#include "fsdp_manifest.h"
#include "fsdp_resume.h"

/* ---- the checkpoint's parts ------------------------------------------------ */

/* The part fsdp_ckpt.c writes for a flat (part_of): what the layout holds. */
static void check_part(int world, int rank, int strategy, int state, int adam)
{
    fixture x;
    fixture_init(&x, (fixture_shape){ .world = world, .rank = rank });
    fsdp_flat_kind k = { .sharded = strategy == 0, .trainable = state, .whole = strategy == 2 && state,
                         .adam = adam && state };
    fsdp_tensor t[2];
    fixture_layer(&x, 0, 10, 7, t);
    fsdp_flat f;
    cr_assert_eq(fsdp_flat_setup(&x.c, &f, t, 2, k), FSDP_OK);
    fsdp_flat_part p = fsdp_flat_own_part(&x.c, &f);
    fsdp_ckpt_flat have = { f.lay.count, p.lo, p.n, (uint32_t)p.nbuf, 0 };
    fsdp_ckpt_flat want = fsdp_ckpt_writer_part((uint32_t)strategy, (uint32_t)world, (uint32_t)rank, f.lay.count, 1,
                                                state, adam);
    cr_assert_null(fsdp_ckpt_part_differs(&have, &want),
                   "world %d rank %d strategy %d state %d adam %d: %s differs (lo %zu n %zu nbuf %d; want %llu %llu %u)",
                   world, rank, strategy, state, adam, fsdp_ckpt_part_differs(&have, &want), p.lo, p.n, p.nbuf,
                   (unsigned long long)want.lo, (unsigned long long)want.n, want.nbuf);
    fsdp_flat_free(&x.c, &f);
    fixture_free(&x);
}

Test(ckpt, writer_part_is_the_flats_own_part_for_every_strategy_world_and_rank)
{
    for (int world = 1; world <= 5; ++world)
        for (int rank = 0; rank < world; ++rank)
            for (int strategy = 0; strategy < 3; ++strategy)
                for (int kind = 0; kind < 3; ++kind) check_part(world, rank, strategy, kind > 0, kind == 2);
}

Test(ckpt, writer_part_of_an_empty_flat_and_aligned_shards)
{
    fsdp_ckpt_flat e = fsdp_ckpt_writer_part(0, 4, 3, 0, 64, 1, 1);
    cr_assert(e.count == 0 && e.lo == 0 && e.n == 0 && e.nbuf == 0, "an empty flat has no part");
    fsdp_ckpt_flat a = fsdp_ckpt_writer_part(0, 4, 3, 1000, 64, 1, 0);
    cr_assert(a.n == 256 && a.lo == 768 && a.nbuf == 2, "shards of 250 aligned to 64: 256, rank 3 at 768");
}

Test(ckpt, part_differs_names_the_first_field)
{
    fsdp_ckpt_flat w = { 100, 50, 50, 3, 0 }, h = w;
    cr_assert_null(fsdp_ckpt_part_differs(&h, &w));
    h.pad = 1;
    cr_assert_str_eq(fsdp_ckpt_part_differs(&h, &w), "pad");
    h.n = 1;
    cr_assert_str_eq(fsdp_ckpt_part_differs(&h, &w), "n");
    h.lo = 0;
    cr_assert_str_eq(fsdp_ckpt_part_differs(&h, &w), "lo");
    h.count = 1;
    cr_assert_str_eq(fsdp_ckpt_part_differs(&h, &w), "count");
}

Test(ckpt, file_bytes_refuses_what_wraps)
{
    fsdp_ckpt_flat t[2] = { { 100, 0, 50, 3, 0 }, { 10, 0, 10, 1, 0 } };
    uint64_t b;
    cr_assert_eq(fsdp_ckpt_file_bytes(96, t, 2, 0, 0, &b), 0);
    cr_assert_eq(b, 96 + 64 + 4 * (150 + 10) + 8);
    cr_assert_eq(fsdp_ckpt_file_bytes(96, t, 2, 1, 7, &b), 0);
    cr_assert_eq(b, 96 + 64 + 4 * (150 + 10) + 8 + 28 + 8, "the extras' count and floats");
    t[0].n = ((uint64_t)1 << 62) + 9;   /* n * nbuf * 4 wraps to a small number */
    cr_assert_eq(fsdp_ckpt_file_bytes(96, t, 2, 0, 0, &b), -1);
    t[0].n = UINT64_MAX;
    cr_assert_eq(fsdp_ckpt_file_bytes(96, t, 2, 0, 0, &b), -1);
    t[0].n = 1;
    cr_assert_eq(fsdp_ckpt_file_bytes(96, t, 2, 1, UINT64_MAX / 2, &b), -1, "an extras' count that wraps");
}

Test(ckpt, t_fits_the_images_seen)
{
    cr_assert(fsdp_ckpt_t_fits(0, 0), "a run that saw nothing made no update");
    cr_assert(fsdp_ckpt_t_fits(3, 24));
    cr_assert(!fsdp_ckpt_t_fits(0, 24), "Adam's t >= 1 after a step");
    cr_assert(!fsdp_ckpt_t_fits(-1, 24));
    cr_assert(!fsdp_ckpt_t_fits(INT_MIN, 24));
    cr_assert(!fsdp_ckpt_t_fits(25, 24), "each update sees an image at least");
    cr_assert(!fsdp_ckpt_t_fits(INT_MAX, UINT64_MAX), "the next update would overflow");
}

Test(ckpt, shard_names_are_parsed_strictly_and_bounded)
{
    cr_assert_eq(fsdp_ckpt_name_world("a.weights.fsdp-0-of-4", "a.weights", 0), 4);
    cr_assert_eq(fsdp_ckpt_name_world("a.weights.fsdp-3-of-4", "a.weights", -1), 4);
    cr_assert_eq(fsdp_ckpt_name_world("a.weights.fsdp-3-of-4", "a.weights", 0), -1, "not rank 0's");
    cr_assert_eq(fsdp_ckpt_name_world("a.weights.fsdp-0-of-65536", "a.weights", 0), 65536);
    const char *bad[] = { "a.weights.fsdp-0-of-65537", "a.weights.fsdp-0-of-10000000", "a.weights.fsdp-0-of-0",
                          "a.weights.fsdp-0-of--1", "a.weights.fsdp-0-of-+3", "a.weights.fsdp-0-of-03",
                          "a.weights.fsdp-0-of-3 ", "a.weights.fsdp-0-of-0x10", "a.weights.fsdp-4-of-4",
                          "a.weights.fsdp-0-of-99999999999999999999", "b.weights.fsdp-0-of-2", "a.weights.fsdp-0-of-" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i)
        cr_assert_eq(fsdp_ckpt_name_world(bad[i], "a.weights", -1), -1, "%s", bad[i]);
}

/* ---- the manifest and the backup folder ------------------------------------ */

static char root[64];

static void mkroot(void)
{
    snprintf(root, sizeof root, "/tmp/test_io.XXXXXX");
    cr_assert_not_null(mkdtemp(root));
}

static void rmroot(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    cr_assert_eq(system(cmd), 0);
}

static void put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A shard file of `seen` images: 40 bytes, seen where a header holds it,
 * its checksum last; its size and checksum in *size, *sum. */
static void shard(const char *dir, int r, int world, uint64_t seen, uint64_t *size, uint64_t *sum)
{
    unsigned char b[40] = { 0 };
    memcpy(b + FSDP_CKPT_SEEN_AT, &seen, 8);
    *sum = fsdp_hash(b, 32);
    memcpy(b + 32, sum, 8);
    *size = sizeof b;
    char p[256];
    snprintf(p, sizeof p, "%s/a.fsdp-%d-of-%d", dir, r, world);
    put(p, b, sizeof b);
}

/* folder/a.fsdp/step-IIIIIIII with 2 ranks' files and its MANIFEST (when
 * complete); its path. */
static char *checkpoint(long step, uint64_t seen, int complete)
{
    char folder[128];
    snprintf(folder, sizeof folder, "%s/a.fsdp", root);
    mkdir(folder, 0755);
    char *dir = fsdp_manifest_step_dir(folder, step);
    cr_assert_eq(mkdir(dir, 0755), 0);
    uint64_t size[2], sum[2];
    for (int r = 0; r < 2; ++r) shard(dir, r, 2, seen, &size[r], &sum[r]);
    fsdp_manifest m = { 0x1234, seen, step, 2, size, sum };
    if (complete) cr_assert_eq(fsdp_manifest_write(dir, "a", &m), FSDP_OK);
    return dir;
}

static int manifest_refused(const char *dir, const char *reason)
{
    fsdp_manifest m;
    char why[512] = "";
    int rc = fsdp_manifest_read(dir, "a", &m, why, sizeof why);
    fsdp_manifest_free(&m);
    cr_log_info("%s", why);
    return rc == -1 && strstr(why, reason) != NULL;
}

/* Rewrites dir/MANIFEST's text with `from` replaced by `to`, its checksum refitted. */
static void edit_manifest(const char *dir, const char *from, const char *to)
{
    char p[256], text[4096], out[4096];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    FILE *f = fopen(p, "rb");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    *strstr(text, "sum ") = 0;
    char *at = strstr(text, from);
    cr_assert_not_null(at, "%s in the MANIFEST", from);
    int k = snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    snprintf(out + k, sizeof out - (size_t)k, "sum %016llx\n", (unsigned long long)fsdp_hash(out, (size_t)k));
    put(p, out, strlen(out));
}

Test(manifest, round_trip)
{
    mkroot();
    char *dir = checkpoint(40, 320, 1);
    fsdp_manifest m;
    char why[512] = "";
    cr_assert_eq(fsdp_manifest_read(dir, "a", &m, why, sizeof why), 0, "%s", why);
    cr_assert(m.run_id == 0x1234 && m.seen == 320 && m.step == 40 && m.world == 2);
    fsdp_manifest_free(&m);
    free(dir);
    rmroot();
}

Test(manifest, refusals_by_field)
{
    mkroot();
    char *dir = checkpoint(40, 320, 1);
    const char *cases[][3] = {
        { "step 40\n", "step 41\n", "field step is 41, and its folder's name says 40" },
        { "step 40\n", "step -5\n", "field step" },
        { "step 40\n", "step +40\n", "field step" },
        { "step 40\n", "step 99999999999999999999\n", "field step" },
        { "seen 320\n", "seen 321\n", "field seen is 321" },
        { "seen 320\n", "seen 18446744073709551616\n", "field seen" },
        { "world 2\n", "world 0\n", "field world" },
        { "world 2\n", "world 10000000\n", "field world" },
        { "world 2\n", "world 1\n", "a.fsdp-0-of-1 as file 0" },
        { "world 2\n", "world 3\n", "a.fsdp-0-of-3 as file 0" },
        { "a.fsdp-1-of-2", "../outside-1-of-2", "as file 1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        char p[256], keep[4096];
        snprintf(p, sizeof p, "%s/MANIFEST", dir);
        FILE *f = fopen(p, "rb");
        size_t n = fread(keep, 1, sizeof keep, f);
        fclose(f);
        edit_manifest(dir, cases[i][0], cases[i][1]);
        cr_assert(manifest_refused(dir, cases[i][2]), "%s -> %s", cases[i][0], cases[i][1]);
        put(p, keep, n);
    }
    char p[256];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    FILE *f = fopen(p, "ab");
    fputs("x", f);
    fclose(f);
    cr_assert(manifest_refused(dir, "does not match its checksum"));
    free(dir);
    rmroot();
}

Test(manifest, special_files_refused_without_blocking)
{
    mkroot();
    char *dir = checkpoint(7, 56, 1), p[256], q[256];
    snprintf(p, sizeof p, "%s/MANIFEST", dir);
    snprintf(q, sizeof q, "%s/MANIFEST.real", root);
    cr_assert_eq(rename(p, q), 0);
    cr_assert_eq(mkfifo(p, 0644), 0);
    cr_assert(manifest_refused(dir, "its MANIFEST is not a regular file"), "a FIFO: refused, not waited on");
    unlink(p);
    cr_assert_eq(symlink(q, p), 0);
    cr_assert(manifest_refused(dir, "its MANIFEST is a symbolic link"));
    unlink(p);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    cr_assert_eq(ftruncate(fd, (off_t)1 << 30), 0);
    close(fd);
    cr_assert(manifest_refused(dir, "refused unread"), "a 1 GiB sparse MANIFEST");
    free(dir);
    char link[256];
    snprintf(link, sizeof link, "%s/a.fsdp/step-00000009", root);
    cr_assert_eq(symlink(root, link), 0);
    cr_assert(manifest_refused(link, "the step folder is"), "a symlinked step folder is not followed");
    rmroot();
}

Test(manifest, newest_complete_is_picked_and_others_skipped)
{
    mkroot();
    free(checkpoint(10, 80, 1));
    free(checkpoint(20, 160, 1));
    free(checkpoint(30, 240, 0));   /* half-written */
    char folder[128], alias[160], *dir = NULL;
    snprintf(folder, sizeof folder, "%s/a.fsdp", root);
    snprintf(alias, sizeof alias, "%s/step-+0000040", folder);
    mkdir(alias, 0755);   /* not a step name: never aliases step 40 */
    fsdp_manifest m;
    cr_assert_eq(fsdp_manifest_newest(folder, "a", &dir, &m), FSDP_OK);
    cr_assert_not_null(dir);
    cr_assert(strstr(dir, "step-00000020") && m.step == 20 && m.seen == 160, "%s", dir);
    fsdp_manifest_free(&m);
    free(dir);
    rmroot();
}

Test(manifest, prune_removes_only_what_the_run_wrote)
{
    mkroot();
    free(checkpoint(1, 8, 1));
    free(checkpoint(2, 16, 1));
    char *dir3 = checkpoint(3, 24, 1);
    char folder[128], outside[160], p[256];
    snprintf(folder, sizeof folder, "%s/a.fsdp", root);
    snprintf(outside, sizeof outside, "%s/outside", root);
    mkdir(outside, 0755);
    uint64_t size, sum;
    shard(outside, 0, 2, 8, &size, &sum);   /* a file of one of our names, outside */
    snprintf(p, sizeof p, "%s/step-00000000", folder);
    cr_assert_eq(symlink("../outside", p), 0);
    snprintf(p, sizeof p, "%s/step-00000002/notes.txt", folder);
    put(p, "mine", 4);
    fsdp_manifest_prune(folder, "a", 3, 1);
    snprintf(p, sizeof p, "%s/a.fsdp-0-of-2", outside);
    cr_assert_eq(access(p, F_OK), 0, "the symlinked step folder's target is untouched");
    snprintf(p, sizeof p, "%s/step-00000000", folder);
    struct stat st;
    cr_assert(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "the link itself is left, not ours");
    snprintf(p, sizeof p, "%s/step-00000001", folder);
    cr_assert_neq(access(p, F_OK), 0, "an older complete checkpoint beyond keep: removed");
    snprintf(p, sizeof p, "%s/step-00000002/notes.txt", folder);
    cr_assert_eq(access(p, F_OK), 0, "a file of a name the run never writes is left");
    snprintf(p, sizeof p, "%s/step-00000002/MANIFEST", folder);
    cr_assert_neq(access(p, F_OK), 0, "its MANIFEST went first");
    snprintf(p, sizeof p, "%s/MANIFEST", dir3);
    cr_assert_eq(access(p, F_OK), 0, "the checkpoint just made is kept");
    free(dir3);
    rmroot();
}

/* ---- resume ------------------------------------------------------------------ */

Test(resume, keep_batch_in_64_bits_and_bounded)
{
    network net = { 0 };
    net.batch = 2;
    net.subdivisions = 1;
    cr_assert_eq(fsdp_resume_keep_batch(&net, 8, 4, 2, 0), FSDP_OK);
    cr_assert_eq(net.subdivisions, 2, "8 images an update on 2 ranks of 2: 2 subdivisions");
    net.subdivisions = 1;
    long bad[] = { 0, -4, 6, 4L * 1024 * 2 + 4, 4L * 1025, LONG_MAX, LONG_MIN };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
        cr_assert_neq(fsdp_resume_keep_batch(&net, bad[i], 4, 2, 0), FSDP_OK, "%ld images an update", bad[i]);
        cr_assert_eq(net.subdivisions, 1, "unchanged when refused");
    }
    cr_assert_eq(fsdp_resume_keep_batch(&net, 4L * FSDP_KEEP_BATCH_MAX_SUBDIVISIONS, 4, 2, 0), FSDP_OK);
    cr_assert_eq(net.subdivisions, FSDP_KEEP_BATCH_MAX_SUBDIVISIONS, "the limit itself is kept");
}

Test(resume, folder_of_the_cfg)
{
    char *name = NULL, *f = fsdp_resume_folder("/b/", "cfg/yolo.v3.cfg", &name);
    cr_assert_str_eq(f, "/b/yolo.fsdp");
    cr_assert_str_eq(name, "yolo");
    free(f);
    free(name);
}
