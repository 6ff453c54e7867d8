#!/usr/bin/env python3
"""Checks an -fsdp-stats file against the communication theory of docs/DESIGN.md.

usage: check_stats.py STATS --world N --strategy S --steps K [--subdivisions D]
                      [--reshard 0|1] [--sync-bn 0|1] [--bn NAME=CHANNELS]... [--node-shared 0|1|-1]
                      [--hosts H0,H1,...] GROUP...
GROUP is NAME=TRAINABLE,FROZEN,NEEDS_BACKWARD,FROZEN_BACKWARD with counts of
parameters worked out from the cfg by hand (see the cfg's comments) and 0/1
flags.  Per step, for a group with trainable T and frozen F parameters,
padded buffers of N*ceil(T/N) and N*ceil(F/N) floats:
  full:    all-gather of T's buffer in each forward (and again before backward
           unless it is the root, reshard_after_forward=0, or the group whose
           backward comes first when only root layers follow its span: it
           stays gathered); one reduce-scatter;
           frozen F: one all-gather per forward, one more before backward only
           when a frozen layer of the group must pass deltas back.
  grad_op: one reduce-scatter and one all-gather of T's buffer.
  none:    one all-reduce of T floats.
shard_node_shared=1 (--node-shared 1, or -1, the default: the cfg leaves
the key out, which turns it on where every rank shares one machine's
memory, FSDP_SHM not 0) under full with N > 1: every buffer
lives once in node memory, so gathers move nothing (all-gather 0 bytes, no
backward gathers), and node_shared_bytes is the sum of the padded buffers
plus L gradient slots of the largest trainable buffer, L the ranks per
machine (on several machines 2 L: L reduce slots too); otherwise 0.  On several machines (--hosts) each rank sends its
updated part of T's buffer to its peers after each step: one all-gather
of T's buffer per step, as grad_op's.
Synchronized batch norm (any strategy): a group whose trainable batch-norm
layers have CHANNELS channels in all (--bn; 0 when not given) all-reduces
4 * CHANNELS floats per micro-batch (mean and variance in forward,
mean_delta and variance_delta in backward): 16 * CHANNELS bytes * D per
step, when the world is larger than one and sync_bn=1; else nothing.
Machines (--hosts: each rank's machine, numbered from 0 in order of their
lowest rank; default every rank on machine 0): rank r with R ranks on other
machines sends them (all-gather + reduce-scatter bytes) / N * R plus
(all-reduce + batch-norm all-reduce bytes) * R (bytes_to_other_hosts);
with node memory on M > 1 machines (hybrid sharding, and every strategy's
all-gathers and reduce-scatters where the machines run equal ranks and
share memory within, FSDP_SHM not 0) the parts go to one peer per other
machine: (all-gather + reduce-scatter bytes) / N * (M - 1) instead.
Each group's plan_per_step (the plugin's step plan run over the group's
sizes, fsdp_memplan.c) times the steps must equal its counts too: the
plugin's theory and this one agree.
Exits 1 with every mismatch listed."""
import argparse
import json
import os
import sys


def ceil_div(a, b):
    return (a + b - 1) // b


def expected(world, strategy, steps, sd, reshard, node, hybrid, name, t, f, bwd, fbwd):
    tb = world * ceil_div(t, world) * 4 if t else 0
    fb = world * ceil_div(f, world) * 4 if f else 0
    root = name == "(root)"
    ag = rs = ar = gathers = 0
    if strategy == "full":
        for size, needed in ((tb, bwd and t), (fb, fbwd and f)):
            if not size:
                continue
            # The root keeps what backward needs through the step's micro-batches.
            ag += size if root and needed else size * sd
            if needed and not root and reshard:
                ag += size * sd
                gathers += sd
        rs = tb if bwd else 0
        if node and world > 1:
            ag = tb if hybrid else 0
            gathers = 0
    elif strategy == "grad_op":
        ag, rs = tb, (tb if bwd else 0)
    else:
        ar = t * 4 if bwd else 0
    return {"all_gather_bytes": ag * steps, "reduce_scatter_bytes": rs * steps,
            "all_reduce_bytes": ar * steps, "backward_gathers": gathers * steps,
            "trainable_params": t, "frozen_params": f}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stats")
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--subdivisions", type=int, default=1)
    ap.add_argument("--reshard", type=int, default=1)
    ap.add_argument("--sync-bn", type=int, default=1)
    ap.add_argument("--bn", action="append", default=[], metavar="NAME=CHANNELS")
    # -1: the cfg leaves the key out, whose default is on where every rank
    # shares one machine's memory (not FSDP_SHM=0).
    ap.add_argument("--node-shared", type=int, default=-1)
    ap.add_argument("--hosts", default=None, metavar="H0,H1,...")
    ap.add_argument("groups", nargs="+")
    a = ap.parse_args()
    st = json.load(open(a.stats))
    bad = []
    if st["world"] != a.world or st["strategy"] != a.strategy or st["steps"] != a.steps:
        bad.append("header: world %s strategy %s steps %s" % (st["world"], st["strategy"], st["steps"]))
    # docs/DESIGN.md's names and their meaning, whatever the numbers.
    for k in ("world", "strategy", "steps", "groups", "bytes", "peak_rss_bytes"):
        if k not in st:
            bad.append("missing key %s" % k)
    if st.get("peak_rss_bytes", 0) <= 0:
        bad.append("peak_rss_bytes is %s" % st.get("peak_rss_bytes"))
    seen_layers = []
    for g in st["groups"]:
        for k in ("name", "layers", "params", "frozen", "all_gather_bytes", "reduce_scatter_bytes",
                  "backward_gathers"):
            if k not in g:
                bad.append("group %s: missing key %s" % (g.get("name"), k))
        if g["params"] != g["trainable_params"] + g["frozen_params"]:
            bad.append("group %s: params %s != trainable + frozen" % (g["name"], g["params"]))
        if g["frozen"] != (g["params"] > 0 and g["trainable_params"] == 0):
            bad.append("group %s: frozen is %s" % (g["name"], g["frozen"]))
        seen_layers += g["layers"]
    if sorted(seen_layers) != list(range(len(seen_layers))):
        bad.append("groups' layers are not every layer exactly once: %s" % sorted(seen_layers))
    got = {g["name"]: g for g in st["groups"]}
    # The group whose backward comes first (its highest backward layer is the
    # highest outside the root) stays gathered when every layer after its
    # span (it and its descendants) is the root's own.
    nlayers = len(seen_layers)
    root_layers = set(got["(root)"]["layers"]) if "(root)" in got else set()
    def span_last(name):
        return max([l for g in st["groups"] if g["name"] == name or g["name"].startswith(name + ".")
                    for l in g["layers"]] or [-1])
    firsts = [g for g in st["groups"] if g["name"] != "(root)" and g.get("backward_layers")]
    kept = None
    if firsts:
        first = max(firsts, key=lambda g: max(g["backward_layers"]))
        if all(l in root_layers for l in range(span_last(first["name"]) + 1, nlayers)):
            kept = first["name"]
    for g in st["groups"]:
        stays = bool(g.get("backward_layers")) and (g["name"] == "(root)" or not a.reshard or g["name"] == kept)
        if g.get("stays_gathered") != stays:
            bad.append("group %s: stays_gathered = %s, theory %s" % (g["name"], g.get("stays_gathered"), stays))
    totals = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}
    hosts = [int(h) for h in a.hosts.split(",")] if a.hosts else [0] * a.world
    machines = len(set(hosts))
    if a.node_shared == -1:
        a.node_shared = int(machines == 1 and os.environ.get("FSDP_SHM", "1") != "0")
    node = a.node_shared and a.strategy == "full" and a.world > 1
    hybrid = node and machines > 1
    node_bytes = slot = 0
    for spec in a.groups:
        name, vals = spec.split("=")
        t, f, bwd, fbwd = (int(v) for v in vals.split(","))
        exp = expected(a.world, a.strategy, a.steps, a.subdivisions, 0 if name == kept else a.reshard,
                       node, hybrid, name, t, f, bwd, fbwd)
        if node:
            padded = [a.world * ceil_div(x, a.world) * 4 for x in (t, f)]
            node_bytes += sum(padded)
            slot = max(slot, padded[0])
        g = got.get(name)
        if g is None:
            bad.append("group %s missing" % name)
            continue
        for k, v in exp.items():
            if g[k] != v:
                bad.append("group %s: %s = %s, theory %s" % (name, k, g[k], v))
        # The plugin's own theory: its step plan run over the group's sizes.
        plan = g.get("plan_per_step")
        if plan is None:
            bad.append("group %s: missing key plan_per_step" % name)
        else:
            for k, v in plan.items():
                if g[k] != v * a.steps:
                    bad.append("group %s: %s = %s, the step plan's %s per step x %d steps" % (name, k, g[k], v, a.steps))
        for k in totals:
            totals[k] += exp[k + "_bytes"]
    for k, v in totals.items():
        if st["bytes"][k] != v:
            bad.append("total %s = %s, theory %s" % (k, st["bytes"][k], v))
    # Several machines: L reduce slots as well.
    node_bytes += a.world // machines * slot * (2 if hybrid else 1)
    if st.get("node_shared_bytes") != node_bytes:
        bad.append("node_shared_bytes = %s, theory %s" % (st.get("node_shared_bytes"), node_bytes))
    bn = {k: int(v) for k, v in (spec.split("=") for spec in a.bn)}
    sync = a.sync_bn and a.world > 1
    bn_total = 0
    for g in st["groups"]:
        exp = 16 * bn.get(g["name"], 0) * a.subdivisions * a.steps if sync else 0
        bn_total += exp
        if g.get("bn_all_reduce_bytes") != exp:
            bad.append("group %s: bn_all_reduce_bytes = %s, theory %s" % (g["name"], g.get("bn_all_reduce_bytes"), exp))
    if st["bytes"].get("bn_all_reduce") != bn_total:
        bad.append("total bn_all_reduce = %s, theory %s" % (st["bytes"].get("bn_all_reduce"), bn_total))
    if len(hosts) != a.world:
        bad.append("--hosts names %d ranks, the world is %d" % (len(hosts), a.world))
    if st.get("hosts") != len(set(hosts)) or st.get("host_of_rank") != hosts:
        bad.append("hosts = %s, host_of_rank = %s, theory %s, %s" % (st.get("hosts"), st.get("host_of_rank"),
                                                                     len(set(hosts)), hosts))
    # Machines of equal ranks that map node memory exchange hierarchically:
    # each part to one peer on each other machine, as hybrid sharding does.
    counts = [hosts.count(h) for h in set(hosts)]
    hier = machines > 1 and len(set(counts)) == 1 and os.environ.get("FSDP_SHM", "1") != "0"
    spread = totals["all_gather"] + totals["reduce_scatter"]
    whole = totals["all_reduce"] + bn_total
    out = [spread // a.world * (machines - 1 if hybrid or hier else sum(1 for q in hosts if q != h))
           + whole * sum(1 for q in hosts if q != h) for h in hosts]
    if st.get("bytes_to_other_hosts") != out:
        bad.append("bytes_to_other_hosts = %s, theory %s" % (st.get("bytes_to_other_hosts"), out))
    for b in bad:
        print("stats: " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
