/* Rank 0's notes once the network is built and sharded (fsdp_notes.h). */
#include <string.h>
#include "fsdp_log.h"
#include "fsdp_notes.h"

/* The prediction's terms, in one line. */
static void note_prediction(const fsdp_mem_prediction *m)
{
    char node_note[64] = "", scratch_note[128] = "";
    if (m->node_shared) snprintf(node_note, sizeof node_note, "node-shared %.1f + ", m->node_shared / 1e6);
    if (m->collective_scratch)
        snprintf(scratch_note, sizeof scratch_note, " + the other ranks' terms %.1f", m->collective_scratch / 1e6);
    if (m->snapshot)
        snprintf(scratch_note + strlen(scratch_note), sizeof scratch_note - strlen(scratch_note),
                 " + checkpoint snapshot %.1f", m->snapshot / 1e6);
    if (m->peak)
        fprintf(stderr, "fsdp: predicted peak memory per rank %.1f MB: fixed %.1f + activations %.1f + the "
                "largest of building %.1f, sharding %.1f, and model state %.1f + %sstep buffers %.1f%s\n",
                m->peak / 1e6, m->fixed / 1e6, m->activations / 1e6, m->build / 1e6, m->setup / 1e6,
                m->model_state / 1e6, node_note, m->step_buffers / 1e6, scratch_note);
}

void fsdp_notes_startup(const fsdp_engine *e, const fsdp_mem_prediction *m, const fsdp_hosts *hosts,
                        double timeout_s)
{
    note_prediction(m);
    /* RSS counts node memory in every rank that maps it; the machine holds it once. */
    fsdp_node_layout at = fsdp_coll_node_layout(fsdp_engine_coll(e));
    const fsdp_cfg *cfg = fsdp_engine_cfg(e);
    if (m->peak && fsdp_engine_node_on(e))
        fprintf(stderr, "fsdp: the parameters live once per machine in shared memory (shard_node_shared=1%s): "
                "its %d ranks need %.1f MB in all, %.1f MB each (PSS); RSS counts the %.1f MB of it each "
                "rank maps\n", cfg->node_shared_set ? "" : ", the default on one machine", at.ranks,
                m->pss * (double)at.ranks / 1e6, m->pss / 1e6, m->node_shared / 1e6);
    /* Hybrid sharding, where the cfg never chose: fewer bytes between
     * machines, one key away (its sums go machine by machine). */
    if (!cfg->node_shared_set && !fsdp_engine_node_shared_unfit(e) && at.machines > 1)
        fprintf(stderr, "fsdp: the %d ranks run on %d machines of %d: shard_node_shared=1 would keep the "
                "parameters once per machine and send between machines only the sums and updates of each "
                "rank's part (fewer bytes; docs/machines.md); shard_node_shared=0 leaves this note out\n",
                fsdp_engine_ctl(e)->world, at.machines, at.ranks);
    fsdp_hosts_note_keepalive(hosts, timeout_s);
}

void fsdp_notes_resumed(const fsdp_longrun *lr, network *net, int world)
{
    if (lr->resume && !lr->resume_auto) fsdp_report_resume(net, lr->weights_file, world);
    if (lr->point.base)
        fprintf(stderr, "fsdp: resumed at step %zu (%zu images seen) from %s.fsdp-{0..%d}-of-%d, written on %d "
                "ranks, resumed on %d\n", get_current_batch(net), *net->seen, lr->point.base,
                lr->point.world - 1, lr->point.world, lr->point.world, world);
}
