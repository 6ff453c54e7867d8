/* -fsdp-log and the progress line (docs/DESIGN.md, "Log file"). */
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fsdp_log.h"

unsigned long long fsdp_rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    fclose(f);
    return resident * (unsigned long long)sysconf(_SC_PAGESIZE);
}

fsdp_status fsdp_log_open(fsdp_log *l, const char *path, int world)
{
    memset(l, 0, sizeof *l);
    l->world = world;
    if (path && !(l->path = strdup(path))) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    return FSDP_OK;
}

fsdp_status fsdp_log_start(fsdp_log *l, uint64_t bytes, double t)
{
    l->t_last = l->t_mark = t;
    l->bytes_last = bytes;
    if (!l->path || l->f) return FSDP_OK;
    l->f = fopen(l->path, "w");
    return l->f ? FSDP_OK : fsdp_fail(FSDP_ERR_IO, "-fsdp-log %s: cannot write it", l->path);
}

/* "1:02:03" or "2:03" */
static void clock_text(char *out, size_t n, double seconds)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(out, n, "%ld:%02ld", s / 60, s % 60);
}

/* Every tenth of max_batches, and at the first and last step, of runs of
 * at least ten steps: images/s and the time left at the rate since the last
 * line (one step's rate jumps with the data loader). */
static void progress(fsdp_log *l, const network *net, size_t step, float loss, double images, double t)
{
    size_t max = (size_t)net->max_batches, every = max / 10;
    if (max < 10 || (step != 1 && step != max && step % every)) return;
    double per_step = step > l->step_mark ? (t - l->t_mark) / (double)(step - l->step_mark) : 0;
    double ips = per_step > 0 ? images / per_step : 0;
    char left[32];
    clock_text(left, sizeof left, per_step * (double)(max > step ? max - step : 0));
    fprintf(stderr, "fsdp: step %zu/%zu (%d%%), loss %.4f (avg %.4f), %.0f images/s, %s left\n", step, max,
            (int)(100 * step / max), loss, l->avg_loss, ips, left);
    l->t_mark = t;
    l->step_mark = step;
}

/* "events": [[what, group, start, end, bytes out, bytes in], ...], times
 * from the step's start; an exchange still on its way ends null. */
static void write_events(FILE *f, const fsdp_timeline *tl, double t)
{
    fprintf(f, ", \"step_seconds\": %.6f, \"events\": [", t - tl->t_step);
    for (int k = 0; k < tl->n; ++k) {
        const fsdp_tl_event *v = &tl->ev[k];
        fprintf(f, "%s[\"%s\", %d, %.6f, ", k ? ", " : "", v->what, v->group, v->t0);
        if (!v->open) fprintf(f, "%.6f", v->t1);
        else fputs("null", f);
        fprintf(f, ", %llu, %llu]", (unsigned long long)v->wire_out, (unsigned long long)v->wire_in);
    }
    fprintf(f, "], \"events_dropped\": %d", tl->dropped);
}

/* "compute_s": every rank's compute seconds of each step of the window
 * that ended at this step (fsdp_straggle.h). */
static void write_compute(FILE *f, const fsdp_straggle *s)
{
    fprintf(f, ", \"compute_steps\": [%zu, %zu], \"compute_s\": [", s->first, s->first + (size_t)s->window - 1);
    for (int r = 0; r < s->world; ++r) {
        fputs(r ? ", [" : "[", f);
        for (int k = 0; k < s->window; ++k) fprintf(f, "%s%.6f", k ? ", " : "", s->rows[(size_t)r * s->window + k]);
        fputc(']', f);
    }
    fputc(']', f);
}

fsdp_status fsdp_log_step(fsdp_log *l, const network *net, float loss, uint64_t bytes, fsdp_timeline *tl)
{
    double t = fsdp_tl_clock(), dt = t - l->t_last;
    size_t step = get_current_batch((network *)net);
    double images = (double)net->batch * net->subdivisions * l->world;
    double ips = dt > 0 ? images / dt : 0;
    /* Darknet's own running average, as its iteration line prints it. */
    l->avg_loss = l->steps++ ? 0.9 * l->avg_loss + 0.1 * loss : loss;
    if (l->f) {
        fprintf(l->f, "{\"step\": %zu, \"loss\": %.9g, \"avg_loss\": %.9g, \"lr\": %.9g, \"seconds\": %.6f, "
                "\"images_per_s\": %.2f, \"images\": %zu, \"bytes\": %llu, \"rss_bytes\": %llu, "
                "\"world\": %d, \"max_batches\": %d",
                step, loss, l->avg_loss, get_current_rate((network *)net), dt, ips, *net->seen,
                (unsigned long long)(bytes - l->bytes_last), fsdp_rss_bytes(), l->world, net->max_batches);
        if (tl && tl->on) write_events(l->f, tl, t);
        if (l->straggle && l->straggle->fresh) write_compute(l->f, l->straggle);
        fputs("}\n", l->f);
        if (fflush(l->f) != 0 || ferror(l->f)) {
            fsdp_status s = fsdp_fail(FSDP_ERR_IO, "-fsdp-log %s: cannot write it", l->path);
            fsdp_log_close(l);
            return s;
        }
    }
    progress(l, net, step, loss, images, t);
    /* The next step starts at the instant this one's line was timed, not
     * after its write: a slow write would otherwise fall in neither. */
    fsdp_tl_next_step(tl, t);
    l->t_last = t;
    l->bytes_last = bytes;
    return FSDP_OK;
}

/* The world a checkpoint beside WEIGHTS was written on: WORLD's if its
 * rank-0 file is there, else the one WEIGHTS.fsdp-0-of-N there is; 0 if
 * that is not one file. */
static int written_on(const char *weights, int world)
{
    size_t n = strlen(weights) + 32;
    char *p = malloc(n);
    int found = 0, count = 0;
    if (!p) return 0;
    snprintf(p, n, "%s.fsdp-0-of-%d", weights, world);
    if (access(p, R_OK) == 0) {
        free(p);
        return world;
    }
    snprintf(p, n, "%s.fsdp-0-of-*", weights);
    glob_t g;
    if (glob(p, GLOB_NOSORT, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
            int w = atoi(strrchr(g.gl_pathv[i], '-') + 1);
            if (w > 0) { found = w; ++count; }
        }
        globfree(&g);
    }
    free(p);
    return count == 1 ? found : 0;
}

void fsdp_report_resume(const network *net, const char *weights, int world)
{
    int from = written_on(weights, world);
    fprintf(stderr, "fsdp: resumed at step %zu (%zu images seen) from %s and its shard checkpoints "
            "%s.fsdp-{0..%d}-of-%d, written on %d ranks, resumed on %d\n", get_current_batch((network *)net),
            *net->seen, weights, weights, from - 1, from, from, world);
}

void fsdp_log_close(fsdp_log *l)
{
    if (l->f) fclose(l->f);
    free(l->path);
    l->f = NULL;
    l->path = NULL;
}
