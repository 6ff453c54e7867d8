/* test_engine: the engine running a training step's plan (engine/) over
 * the null backend, in one process: no Darknet run, no mpirun.  The
 * network is parsed but never computes: the hook points are called in the
 * order Darknet's forward, backward and update reach them, and what the
 * engine did is read back from its flats' and gradients' states and from
 * the operations its timeline recorded, against a table per strategy. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_backend.h"
#include "fsdp_engine_impl.h"
#include "fsdp_memplan.h"
#include "parser.h"

typedef struct rig {
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    fsdp_engine *e;
    network *net;
} rig;

/* tiny.cfg (conv, maxpool, conv, connected, connected, softmax) with
 * layers 0-1 in group "a", layer 2 in group "b", the rest in the root, on
 * rank 0 of `world` under `strategy` and shard_node_shared (the null
 * backend's ranks share one machine); rank 0 records its operations. */
static void rig_up(rig *r, int world, const char *strategy, const char *node_shared)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/cfg/tests/tiny.cfg", getenv("FSDP_SOURCE") ? getenv("FSDP_SOURCE") : ".");
    cr_assert_eq(fsdp_backend_null_create(world, &r->ctl, &r->coll), FSDP_OK);
    cr_assert_eq(fsdp_engine_create(r->ctl, r->coll, &r->e), FSDP_OK);
    fsdp_on_cfg_option(r->e, "t.cfg", 1, -1, "shard", strategy);
    fsdp_on_cfg_option(r->e, "t.cfg", 2, -1, "shard_node_shared", node_shared);
    for (int i = 0; i < 3; ++i) fsdp_on_cfg_option(r->e, "t.cfg", 10 + i, i, "shard_group", i < 2 ? "a" : "b");
    r->net = parse_network_cfg(path);
    cr_assert_not_null(r->net);
    r->net->gpu_index = -1;   /* the host, in GPU builds too */
    cr_assert_eq(fsdp_engine_log_events(r->e, 64), FSDP_OK);
    cr_assert_eq(fsdp_on_network_built(r->e, r->net), FSDP_OK);
    cr_assert_eq(r->e->ngroups, 3);
}

static void rig_down(rig *r)
{
    cr_assert_eq(fsdp_on_network_free(r->e, r->net), FSDP_OK);
    fsdp_engine_free(r->e);
    free_network(r->net);
    fsdp_coll_free(r->coll);
    fsdp_ctl_free(r->ctl);
}

/* The groups' states: per group its trainable flat (S, g(athering), G)
 * and its gradient (-, A(ccumulating), r(educing), R(educed), s(lots)). */
static const char *states(const fsdp_engine *e)
{
    static char out[64];
    out[0] = 0;
    for (int g = 0; g < e->ngroups; ++g) {
        char one[8];
        snprintf(one, sizeof one, "%s%c%c", g ? " " : "", "SgG"[e->groups[g].train.res.state],
                 "-ArRs"[e->groups[g].grad.state]);
        strcat(out, one);
    }
    return out;
}

/* The operations the timeline recorded since the last call, as
 * "what group" items, then a new step. */
static const char *events(fsdp_engine *e)
{
    static char out[512];
    out[0] = 0;
    fsdp_timeline *tl = fsdp_engine_timeline(e);
    for (int k = 0; k < tl->n; ++k) {
        char one[32];
        snprintf(one, sizeof one, "%s%s %d", k ? ", " : "", tl->ev[k].what, tl->ev[k].group);
        strcat(out, one);
    }
    fsdp_tl_next_step(tl, fsdp_tl_clock());
    return out;
}

/* One training step of one micro-batch, as Darknet's hooks reach the
 * engine; after each hook point with operations, its states in *seen. */
static void train_step(rig *r, char *seen, size_t n)
{
    fsdp_engine *e = r->e;
    const fsdp_step_plan *sp = fsdp_engine_step_plan(e);
    seen[0] = 0;
    int nl = r->net->n;
    for (int k = 0; k < 4 * nl; ++k) {
        int back = k >= 2 * nl, i = back ? nl - 1 - (k - 2 * nl) / 2 : k / 2;
        fsdp_at at = (fsdp_at)((back ? FSDP_AT_BACKWARD_BEFORE : FSDP_AT_FORWARD_BEFORE) + k % 2);
        int nops;
        fsdp_step_plan_at(sp, i, at, &nops);
        cr_assert_eq(fsdp_engine_run_point(e, r->net, i, at, 1, 1), FSDP_OK, "layer %d point %d", i, (int)at);
        if (!nops) continue;
        char one[48];
        snprintf(one, sizeof one, "%s%d%c%c:%s", seen[0] ? " | " : "", i, back ? 'b' : 'f', k % 2 ? '>' : '<',
                 states(e));
        cr_assert_lt(strlen(seen) + strlen(one), n);
        strcat(seen, one);
    }
    update_args a = e->step.args;   /* as the first reduce computed them */
    cr_assert_eq(fsdp_engine_run_update(e, &a), FSDP_OK);
}

struct strategy_case {
    const char *strategy, *node_shared;
    const char *seen;      /* states after each hook point with operations */
    const char *after;     /* after the update */
    const char *events;    /* the timeline's operations of the step */
    uint64_t ag, rs, ar;   /* the bytes counted, in floats */
};

/* Group 0 is the root (layers 3-5), group 1 "a" (layers 0-1), group 2 "b"
 * (layer 2).  Points are "layer, f(orward) or b(ackward), < before or >
 * after". */
static const struct strategy_case cases[] = {
    { "full", "0",
      /* The root stays gathered through the step.  a gathers for its
       * forward and again for its backward; b, whose backward comes first
       * with only the root's layers between, stays gathered from its
       * forward to its backward.  Each group steps on its reduce. */
      "0f<:G- G- S- | 1f>:G- S- S- | 2f<:G- S- G- | 2f>:G- S- G- | 5f>:G- S- G- | 5b<:GA S- G- | "
      "3b>:G- S- G- | 2b<:G- S- GA | 2b>:G- S- S- | 1b<:G- GA S- | 0b>:G- S- S-",
      "S- S- S-",
      /* Forward unshards both flats of a group (the frozen ones empty
       * here); backward the trainable ones; the update settles, then steps
       * each group that did not step in backward (none here). */
      "gather 0, gather 0, gather 1, gather 1, gather 2, gather 2, gather 0, reduce 0, gather 2, reduce 2, "
      "gather 1, reduce 1, settle -1, step 0, step 1, step 2",
      /* On 3 ranks the root's 2453 floats are 2454 gathered, a's 91 are
       * 93, b's 384 stay 384.  Gathered: every group in forward, a again
       * in backward; every gradient reduce-scattered. */
      2454 + 93 + 384 + 93, 2454 + 93 + 384, 0 },
    { "full", "1",
      /* Node memory on one machine: the same states; a gather points at
       * the node's buffer and moves nothing, a gradient sums from the
       * ranks' slots (its bytes counted as the reduce-scatter's). */
      "0f<:G- G- S- | 1f>:G- S- S- | 2f<:G- S- G- | 2f>:G- S- G- | 5f>:G- S- G- | 5b<:GA S- G- | "
      "3b>:G- S- G- | 2b<:G- S- GA | 2b>:G- S- S- | 1b<:G- GA S- | 0b>:G- S- S-",
      "S- S- S-",
      "gather 0, gather 0, gather 1, gather 1, gather 2, gather 2, gather 0, reduce 0, gather 2, reduce 2, "
      "gather 1, reduce 1, settle -1, step 0, step 1, step 2",
      0, 2454 + 93 + 384, 0 },
    { "grad_op", "0",
      /* Parameters replicated, gathered for life; the same points run,
       * their unshards and reshards keeping the flats as they are. */
      "0f<:G- G- G- | 1f>:G- G- G- | 2f<:G- G- G- | 2f>:G- G- G- | 5f>:G- G- G- | 5b<:GA G- G- | "
      "3b>:G- G- G- | 2b<:G- G- GA | 2b>:G- G- G- | 1b<:G- GA G- | 0b>:G- G- G-",
      "G- G- G-",
      /* Every gradient reduce-scattered, every updated part gathered again. */
      "gather 0, gather 0, gather 1, gather 1, gather 2, gather 2, gather 0, reduce 0, gather 2, reduce 2, "
      "gather 1, reduce 1, settle -1, step 0, step 1, step 2",
      2454 + 93 + 384, 2454 + 93 + 384, 0 },
    { "none", "0",
      "0f<:G- G- G- | 1f>:G- G- G- | 2f<:G- G- G- | 2f>:G- G- G- | 5f>:G- G- G- | 5b<:GA G- G- | "
      "3b>:G- G- G- | 2b<:G- G- GA | 2b>:G- G- G- | 1b<:G- GA G- | 0b>:G- G- G-",
      "G- G- G-",
      /* Every gradient all-reduced whole: 2453 + 91 + 384 floats. */
      "gather 0, gather 0, gather 1, gather 1, gather 2, gather 2, gather 0, reduce 0, gather 2, reduce 2, "
      "gather 1, reduce 1, settle -1, step 0, step 1, step 2",
      0, 0, 2453 + 91 + 384 },
};

Test(engine, each_strategy_runs_its_plan_as_the_table_says)
{
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const struct strategy_case *k = &cases[c];
        char name[64];
        snprintf(name, sizeof name, "shard=%s shard_node_shared=%s", k->strategy, k->node_shared);
        rig r;
        rig_up(&r, 3, k->strategy, k->node_shared);
        events(r.e);
        char seen[1024];
        train_step(&r, seen, sizeof seen);
        cr_assert_str_eq(seen, k->seen, "%s: %s", name, seen);
        cr_assert_str_eq(states(r.e), k->after, "%s after the update: %s", name, states(r.e));
        const char *ev = events(r.e);
        cr_assert_str_eq(ev, k->events, "%s's operations: %s", name, ev);
        const fsdp_tally *t = fsdp_engine_tally(r.e);
        cr_assert(t->ag == k->ag * 4 && t->rs == k->rs * 4 && t->ar == k->ar * 4, "%s's bytes: %llu %llu %llu", name,
                  (unsigned long long)t->ag, (unsigned long long)t->rs, (unsigned long long)t->ar);
        cr_assert(fsdp_engine_check(r.e));
        rig_down(&r);
    }
}

/* ---- what the engine reports to an observer --------------------------------- */

/* Records each operation the engine runs as "kind group" (the plan's
 * order, the flats' too: t(rainable) or f(rozen)) and sums the bytes it
 * reports moved. */
typedef struct recorder {
    char ops[2048];
    uint64_t moved[FSDP_MOVED_SAVE + 1];
    int begun, ended;
} recorder;

static void record(void *self, const fsdp_seen *s)
{
    static const char *kind[] = { "U", "P", "R", "gp", "gu", "red", "set", "st", "ai", "ao", "rc", "ab" };
    recorder *r = self;
    if (s->kind == FSDP_SEEN_MOVED) r->moved[s->moved] += s->bytes;
    if (s->kind == FSDP_SEEN_END) ++r->ended;
    if (s->kind != FSDP_SEEN_BEGIN) return;
    ++r->begun;
    char one[16];
    snprintf(one, sizeof one, "%s%s%d%c", r->ops[0] ? " " : "", kind[s->op->kind], s->op->group,
             s->op->flat == FSDP_FLAT_FROZEN ? 'f' : 't');
    cr_assert_lt(strlen(r->ops) + strlen(one), sizeof r->ops);
    strcat(r->ops, one);
}

/* The rig under full on 3 ranks, rec observing its engine. */
static void rig_observed(rig *r, recorder *rec)
{
    rig_up(r, 3, "full", "0");
    cr_assert_eq(fsdp_engine_observe(r->e, (fsdp_observer){ record, rec }), FSDP_OK);
}

Test(engine, an_observer_sees_every_operation_and_every_byte)
{
    rig r;
    recorder rec = { 0 };
    rig_observed(&r, &rec);
    char seen[1024];
    train_step(&r, seen, sizeof seen);
    /* Forward: the root and a gathered, a given back after layer 1, b
     * gathered and its trainable flat kept for its backward, as the root's
     * (their reshards are inference's: not run; the frozen flats' are);
     * backward: the root's gradient reduced and stepped, b's, then a
     * gathered again for its own (the last micro-batch: no grad_unpoint);
     * the update settles, steps (each group stepped in backward already)
     * and gives back. */
    cr_assert_str_eq(rec.ops,
                     "U0t U0f U1t U1f R1f R1t U2t U2f R2f R0f "
                     "U0t gp0t red0t "
                     "U2t gp2t red2t R2t R2f "
                     "U1t gp1t red1t R1t R1f "
                     "set-1t st0t R0t R0f st1t R1t R1f st2t R2t R2f", "%s", rec.ops);
    cr_assert_eq(rec.begun, rec.ended, "every operation begun ends");
    const fsdp_tally *t = fsdp_engine_tally(r.e);
    cr_assert(rec.moved[FSDP_MOVED_GATHER] == t->ag && rec.moved[FSDP_MOVED_REDUCE_SCATTER] == t->rs &&
              rec.moved[FSDP_MOVED_ALL_REDUCE] == t->ar, "the tally counts what the engine reported");
    rig_down(&r);
}

Test(engine, the_predictions_copy_counts_alone)
{
    rig r;
    recorder rec = { 0 };
    rig_observed(&r, &rec);
    fsdp_group_tally t[3];
    cr_assert_eq(fsdp_memplan_step_bytes(r.e, 1, t), FSDP_OK);
    cr_assert_eq(rec.begun, 0, "the copy's operations reach its own tally, not the run's observers");
    cr_assert_eq(t[2].ag_bytes, 384 * 4, "b gathered once: its forward's, kept for its backward");
    cr_assert_eq(fsdp_engine_tally(r.e)->ag, 0, "nor the run's tally");
    rig_down(&r);
}

Test(engine, observers_are_limited)
{
    rig r;
    rig_up(&r, 1, "full", "0");
    recorder rec = { 0 };
    fsdp_observer o = { record, &rec };
    cr_assert_eq(fsdp_engine_observe(r.e, o), FSDP_OK);
    cr_assert_eq(fsdp_engine_observe(r.e, o), FSDP_OK);
    cr_assert_eq(fsdp_engine_observe(r.e, o), FSDP_ERR_UNSUPPORTED, "the tally, the timeline and two more");
    rig_down(&r);
}

/* ---- the plan's order is checked: a wrong one stops the run ---------------- */

#ifdef FSDP_CHECKS
/* Training, the last micro-batch: layer i's point `at`. */
static void point(rig *r, int i, fsdp_at at)
{
    fsdp_engine_run_point(r->e, r->net, i, at, 1, 1);
}

Test(engine_checks, a_reduce_before_its_backward, .signal = SIGABRT)
{
    rig r;
    rig_up(&r, 3, "full", "0");
    point(&r, 3, FSDP_AT_BACKWARD_AFTER);   /* the root's reduce, no gradient yet */
}

Test(engine_checks, an_update_while_a_gradient_accumulates, .signal = SIGABRT)
{
    rig r;
    rig_up(&r, 3, "full", "0");
    point(&r, 5, FSDP_AT_BACKWARD_BEFORE);  /* the root's gradient accumulating */
    update_args a = { .batch = 1 };
    fsdp_engine_run_update(r.e, &a);
}

Test(engine_checks, a_reduce_in_flight_that_is_no_gradients, .signal = SIGABRT)
{
    rig r;
    rig_up(&r, 3, "full", "0");
    r.e->step.rs_inflight = &r.e->groups[1];
    fsdp_engine_check(r.e);
}
#endif
