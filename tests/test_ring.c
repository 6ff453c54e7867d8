/* test_ring: the flight recorder's ring (fsdp_ring.h) written and read
 * back, its wrap-around and size, and the hang summary (fsdp_hang.h) over
 * rings made here: who is blamed and how the others are grouped. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_hang.h"
#include "fsdp_ring.h"

static char dir[] = "/tmp/fsdp-ring-XXXXXX";
static char stem[256];

static void make_dir(void)
{
    cr_assert(mkdtemp(dir));
    snprintf(stem, sizeof stem, "%s/run.json", dir);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    for (struct dirent *f; d && (f = readdir(d));) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, f->d_name);
        if (f->d_name[0] != '.') unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static void path_of(int rank, char *out, size_t n) { snprintf(out, n, "%s.ring.%d", stem, rank); }

Test(ring, writes_and_reads_back, .init = make_dir, .fini = remove_dir)
{
    cr_assert_eq(fsdp_ring_open(stem, 2, 4), FSDP_OK);
    fsdp_ring_end(fsdp_ring_begin("all-gather", 4096, "(group a, training step 1)"), 1);
    fsdp_ring_end(fsdp_ring_begin("reduce-scatter", 8192, "(group b, training step 1)"), 0);
    fsdp_ring_begin("exchange of updated parameters between machines", 12, "(training step 2)");
    char path[300];
    path_of(2, path, sizeof path);
    cr_assert_str_eq(fsdp_ring_path(), path);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_size, FSDP_RING_BYTES);
    cr_assert_leq(st.st_size, 65536);
    fsdp_ring_header h;
    fsdp_ring_entry e[FSDP_RING_ENTRIES];
    int n = 0;
    cr_assert_eq(fsdp_ring_read(path, &h, e, &n), FSDP_OK);
    cr_assert(h.rank == 2 && h.world == 4 && h.pid == (int)getpid() && h.beat > 0);
    cr_assert_eq(n, 3);
    cr_assert(e[0].seq == 1 && !strcmp(e[0].what, "all-gather") && e[0].bytes == 4096 && !strcmp(e[0].state, "done"));
    cr_assert_str_eq(e[0].where, "(group a, training step 1)");
    cr_assert(e[0].t1 >= e[0].t0 && e[0].t0 > 0);
    cr_assert(e[1].seq == 2 && !strcmp(e[1].state, "failed") && e[1].bytes == 8192);
    cr_assert(e[2].seq == 3 && !strcmp(e[2].state, "open") && e[2].t1 < 0);
    cr_assert_str_eq(e[2].what, "exchange of updated parameters between machines");
    fsdp_ring_close(0);
    cr_assert_neq(access(path, F_OK), 0, "a run that ended well removes its ring");
}

Test(ring, keeps_the_last_entries, .init = make_dir, .fini = remove_dir)
{
    cr_assert_eq(fsdp_ring_open(stem, 0, 2), FSDP_OK);
    for (int k = 1; k <= 300; ++k) fsdp_ring_end(fsdp_ring_begin("all-reduce", (uint64_t)k, "(training step 1)"), 1);
    fsdp_ring_close(1);
    char path[300];
    path_of(0, path, sizeof path);
    fsdp_ring_header h;
    fsdp_ring_entry e[FSDP_RING_ENTRIES];
    int n = 0;
    cr_assert_eq(fsdp_ring_read(path, &h, e, &n), FSDP_OK);
    cr_assert_eq(n, FSDP_RING_ENTRIES);
    for (int k = 0; k < n; ++k) cr_assert(e[k].seq == (uint64_t)(300 - FSDP_RING_ENTRIES + 1 + k) && e[k].bytes == e[k].seq);
}

Test(ring, refuses_a_file_that_is_not_one, .init = make_dir, .fini = remove_dir)
{
    char path[300];
    snprintf(path, sizeof path, "%s/other", dir);
    FILE *f = fopen(path, "w");
    fputs("not a ring\n", f);
    fclose(f);
    fsdp_ring_header h;
    fsdp_ring_entry e[FSDP_RING_ENTRIES];
    int n = 7;
    cr_redirect_stderr();
    cr_assert_eq(fsdp_ring_read(path, &h, e, &n), FSDP_ERR_IO);
    cr_assert_eq(n, 0);
}

/* Rank R's ring: DONE collectives of group a ended, then, if IN_ONE, one
 * all-gather of WHERE not ended; its beat AGE seconds old. */
static void make_rank(int r, int world, int done, int in_one, const char *where, double age)
{
    cr_assert_eq(fsdp_ring_open(stem, r, world), FSDP_OK);
    for (int k = 0; k < done; ++k) fsdp_ring_end(fsdp_ring_begin("reduce-scatter", 64, "(group a, training step 4)"), 1);
    if (in_one) fsdp_ring_begin("all-gather", 64, where);
    fsdp_ring_close(1);
    if (age <= 0) return;
    char path[300], head[FSDP_RING_LINE + 1] = "", beat[32];
    path_of(r, path, sizeof path);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0 && read(fd, head, FSDP_RING_LINE) == FSDP_RING_LINE);
    char *at = strstr(head, "beat ");
    cr_assert(at);
    snprintf(beat, sizeof beat, "%17.6f", fsdp_ring_now() - age);
    cr_assert_eq(pwrite(fd, beat, 17, (at - head) + 5), 17);
    close(fd);
}

Test(hang, names_the_silent_rank_and_where_the_others_wait, .init = make_dir, .fini = remove_dir)
{
    for (int r = 0; r < 3; ++r) make_rank(r, 4, 5, 1, "(group b, training step 5)", 0);
    make_rank(3, 4, 4, 0, "", 30);
    char out[1024];
    cr_assert_eq(fsdp_hang_summary(stem, 4, fsdp_ring_now(), out, sizeof out), FSDP_OK);
    char host[65] = "";
    gethostname(host, sizeof host - 1);
    char want[512];
    snprintf(want, sizeof want, "rank 3 (host %s) is outside the collectives since 0 s, after reduce-scatter (group a, "
             "training step 4), with no sign of life for 30 s; ranks 0-2 wait in all-gather (group b, training step 5) "
             "since 0 s", host);
    cr_assert_str_eq(out, want);
}

Test(hang, without_a_silent_rank_blames_the_one_behind, .init = make_dir, .fini = remove_dir)
{
    make_rank(0, 5, 5, 1, "(group b, training step 5)", 0);
    make_rank(1, 5, 5, 1, "(group b, training step 5)", 0);
    make_rank(2, 5, 3, 1, "(group c, training step 4)", 0);
    make_rank(3, 5, 5, 1, "(group b, training step 5)", 0);
    make_rank(4, 5, 6, 0, "", 0);
    char out[1024];
    cr_assert_eq(fsdp_hang_summary(stem, 5, fsdp_ring_now(), out, sizeof out), FSDP_OK);
    cr_assert(strstr(out, "rank 2 (host ") == out, "%s", out);
    cr_assert(strstr(out, ") is in all-gather (group c, training step 4) since 0 s; ranks 0-1 and 3 wait in all-gather "
                          "(group b, training step 5) since 0 s; rank 4 is outside the collectives, after "
                          "reduce-scatter (group a, training step 4) since 0 s"), "%s", out);
}

Test(hang, a_rank_without_a_ring_is_said_so, .init = make_dir, .fini = remove_dir)
{
    make_rank(0, 2, 2, 1, "(group b, training step 5)", 0);
    char out[1024];
    cr_redirect_stderr();
    cr_assert_eq(fsdp_hang_summary(stem, 2, fsdp_ring_now(), out, sizeof out), FSDP_OK);
    cr_assert_str_eq(out, "rank 1 left no ring here; rank 0 waits in all-gather (group b, training step 5) since 0 s");
}
