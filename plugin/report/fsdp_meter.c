/* What -fsdp-stats measures while the run goes (fsdp_meter.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "fsdp_meter.h"

/* The process's CPU time so far, every thread's, user and system. */
static uint64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

fsdp_status fsdp_meter_open(fsdp_meter *m, const char *path)
{
    if (path && !(m->path = strdup(path))) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    return FSDP_OK;
}

void fsdp_meter_built(fsdp_meter *m)
{
    m->setup_cpu_us = cpu_us();
}

/* Every rank's predicted peak, each with its own fixed cost (which differs
 * by the transport window it maps): a max over the world of arrays that
 * hold each rank's own at its place. */
static fsdp_status note_predictions(fsdp_meter *m, fsdp_ctl *ctl, size_t predicted_peak)
{
    m->predicted_each = calloc((size_t)ctl->world, sizeof *m->predicted_each);
    if (!m->predicted_each) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
    m->predicted_each[ctl->rank] = predicted_peak;
    return fsdp_ctl_max_u64(ctl, m->predicted_each, (size_t)ctl->world);
}

/* A page of node memory counts toward each rank that maps it, unevenly:
 * what the prediction's PSS stands for is the machine's, per rank, so the
 * ranks' mean is measured beside rank 0's own. */
static fsdp_status note_pss(fsdp_meter *m, fsdp_ctl *ctl)
{
    size_t pss = fsdp_memplan_pss();
    double sum = (double)pss;
    FSDP_TRY(fsdp_ctl_sum_f64(ctl, &sum, 1));
    size_t mean = (size_t)(sum / ctl->world);
    if (mean > m->mean_pss) m->mean_pss = mean;
    if (ctl->rank == 0 && pss > m->peak_pss) m->peak_pss = pss;
    return FSDP_OK;
}

fsdp_status fsdp_meter_step(fsdp_meter *m, const fsdp_engine *e, size_t predicted_peak)
{
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    if (fsdp_engine_steps(e) == 1) {
        uint64_t lo, hi;
        FSDP_TRY(fsdp_ctl_min_max_u64(ctl, m->setup_cpu_us, &lo, &hi));
        m->setup_cpu_s[0] = lo / 1e6;
        m->setup_cpu_s[1] = hi / 1e6;
    }
    if (!m->path) return FSDP_OK;
    if (!m->predicted_each) FSDP_TRY(note_predictions(m, ctl, predicted_peak));
    return note_pss(m, ctl);
}

fsdp_status fsdp_meter_write(fsdp_meter *m, const fsdp_engine *e, const fsdp_hosts *hosts,
                             const fsdp_mem_prediction *predicted, const fsdp_straggle *straggle,
                             const fsdp_pcache *pcache)
{
    if (!m->path || fsdp_engine_ctl(e)->rank != 0 || !fsdp_engine_net(e) || m->written) return FSDP_OK;
    m->written = 1;
    fsdp_stats_sources src = { e, fsdp_engine_bn(e), hosts, predicted, m->peak_pss,
                               { m->setup_cpu_s[0], m->setup_cpu_s[1] }, .straggle = straggle, .pcache = pcache,
                               .mean_pss = m->mean_pss, .predicted_each = m->predicted_each };
    return fsdp_write_stats(&src, m->path);
}

void fsdp_meter_free(fsdp_meter *m)
{
    free(m->path);
    free(m->predicted_each);
    memset(m, 0, sizeof *m);
}
