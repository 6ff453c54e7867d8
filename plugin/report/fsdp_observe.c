/* The trace and the stragglers, fed (fsdp_observe.h). */
#include <stdlib.h>
#include <string.h>
#include "fsdp_observe.h"
#include "fsdp_timeline.h"
#include "fsdp_watch.h"

static void on_collective(void *ctx, const char *what, const void *buf, uint64_t bytes, double t0, double t1)
{
    fsdp_trace_add(ctx, what, FSDP_TRACK_COLL, -1, t0, t1, bytes, 0);
}

static fsdp_status parse_window(const char *text, int *window)
{
    char *end = NULL;
    long w = text ? strtol(text, &end, 10) : FSDP_STRAGGLE_WINDOW;
    if (text && (end == text || *end || w < 0 || w > 100000))
        return fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-straggler-window %s: expected a whole number of steps, 1 to "
                         "100000 (0: off)", text);
    *window = (int)w;
    return FSDP_OK;
}

fsdp_status fsdp_observe_open(fsdp_observe *o, const fsdp_flags *f, fsdp_engine *e, fsdp_log *log)
{
    memset(o, 0, sizeof *o);
    o->e = e;
    fsdp_ctl *ctl = fsdp_engine_ctl(e);
    int window = FSDP_STRAGGLE_WINDOW, first = FSDP_TRACE_FIRST_STEP, last = FSDP_TRACE_LAST_STEP;
    fsdp_status s = parse_window(f->straggler_window, &window);
    if (s == FSDP_OK && f->trace_steps && !f->trace)
        s = fsdp_fail(FSDP_ERR_CONFIG, "-fsdp-trace-steps %s: it chooses the steps of -fsdp-trace; give "
                      "-fsdp-trace FILE too", f->trace_steps);
    if (s == FSDP_OK && f->trace_steps) s = fsdp_trace_parse_steps(f->trace_steps, &first, &last);
    FSDP_TRY(fsdp_ctl_all_ok(ctl, s, FSDP_ERR_CONFIG, "refused its -fsdp-trace or -fsdp-straggler-window"));
    o->on = 1;
    /* Opened even when off (0): the trace names the ranks' hosts from it. */
    FSDP_TRY(fsdp_straggle_open(&o->straggle, ctl, window > 0 ? window : 1));
    o->straggle.on = window > 0;
    if (f->log_events) log->straggle = &o->straggle;   /* the lines' keys stay as they were without it */
    if (!f->trace) return FSDP_OK;
    FSDP_TRY(fsdp_trace_open(&o->trace, f->trace, first, last, ctl));
    if (!fsdp_engine_timeline(e)->on) {
        FSDP_TRY(fsdp_engine_log_events(e, 4096));
        o->own_timeline = 1;
    }
    fsdp_watch_observe(on_collective, &o->trace);
    return FSDP_OK;
}

void fsdp_observe_layer(fsdp_observe *o, const char *name, const network *net, int i, dn_when w)
{
    if (!o->on || !fsdp_trace_recording(&o->trace) || net != fsdp_engine_net(o->e) || i < 0 || i >= o->nlayers) return;
    if (w == DN_BEFORE) o->layer_t0[i] = fsdp_tl_clock();
    else fsdp_trace_add(&o->trace, name, FSDP_TRACK_COMPUTE, i, o->layer_t0[i], fsdp_tl_clock(), 0, 0);
}

void fsdp_observe_next_step(fsdp_observe *o, const network *net)
{
    if (o->on && net == fsdp_engine_net(o->e)) fsdp_straggle_start(&o->straggle, fsdp_tl_clock());
}

fsdp_status fsdp_observe_start(fsdp_observe *o, const network *net, double t)
{
    if (!o->on) return FSDP_OK;
    fsdp_straggle_start(&o->straggle, t);
    o->trace.step = (int)get_current_batch((network *)net) + 1;
    if (!o->trace.on || o->layer_t0) return FSDP_OK;
    o->nlayers = net->n;
    o->layer_t0 = calloc((size_t)net->n, sizeof *o->layer_t0);
    return o->layer_t0 ? FSDP_OK : fsdp_fail(FSDP_ERR_NOMEM, "out of memory");
}

static const char *group_name(const void *ctx, int g)
{
    const fsdp_layout_plan *l = fsdp_engine_layout(ctx);
    return l && g >= 0 && g < l->ngroups ? l->groups[g].name : "?";
}

/* The step's ended events of the time line, and the memory at its end;
 * the time line's next step starts (rank 0's log starts it there). */
static void trace_step(fsdp_observe *o, double t)
{
    fsdp_timeline *tl = fsdp_engine_timeline(o->e);
    for (int k = 0; k < tl->n; ++k) {
        const fsdp_tl_event *v = &tl->ev[k];
        /* A checkpoint's stop and its writer's file have a track of their own. */
        int ckpt = !strcmp(v->what, "snapshot") || !strcmp(v->what, "write");
        if (!v->open)
            fsdp_trace_add(&o->trace, v->what, ckpt ? FSDP_TRACK_CKPT : FSDP_TRACK_PLAN, v->group,
                           tl->t_step + v->t0, tl->t_step + v->t1, v->wire_out, v->wire_in);
    }
    fsdp_trace_add(&o->trace, "resident memory", FSDP_TRACK_MEMORY, -1, t, t, fsdp_rss_bytes(), 0);
    if (o->trace.rank != 0) fsdp_tl_next_step(tl, t);
}

fsdp_status fsdp_observe_step(fsdp_observe *o, const network *net)
{
    if (!o->on) return FSDP_OK;
    double t = fsdp_tl_clock();
    size_t step = get_current_batch((network *)net);
    FSDP_TRY(fsdp_straggle_step(&o->straggle, fsdp_engine_ctl(o->e), step, t));
    if (!o->trace.on) return FSDP_OK;
    if (fsdp_trace_recording(&o->trace)) trace_step(o, t);
    else if (o->trace.rank != 0) fsdp_tl_next_step(fsdp_engine_timeline(o->e), t);   /* before the window */
    o->trace.step = (int)step + 1;
    if ((int)step < o->trace.last || o->trace.written) return FSDP_OK;
    fsdp_status s = fsdp_trace_write(&o->trace, fsdp_engine_ctl(o->e), group_name, o->e, o->straggle.host);
    /* After the window nothing is recorded, and nothing feeds it. */
    fsdp_watch_observe(NULL, NULL);
    if (o->own_timeline) fsdp_tl_close(fsdp_engine_timeline(o->e));
    o->own_timeline = 0;
    return s;
}

fsdp_status fsdp_observe_finish(fsdp_observe *o)
{
    if (!o->on || !o->trace.on) return FSDP_OK;
    /* What ended since the last step: the last checkpoint's writer, waited for at exit. */
    if (fsdp_trace_recording(&o->trace)) trace_step(o, fsdp_tl_clock());
    return fsdp_trace_write(&o->trace, fsdp_engine_ctl(o->e), group_name, o->e, o->straggle.host);
}

void fsdp_observe_free(fsdp_observe *o)
{
    if (o->trace.on) fsdp_watch_observe(NULL, NULL);
    fsdp_straggle_free(&o->straggle);
    fsdp_trace_free(&o->trace);
    free(o->layer_t0);
    memset(o, 0, sizeof *o);
}
