#!/usr/bin/env bash
# The memory each rank needs, predicted before the first step
# (docs/DESIGN.md, "Memory"), against what the ranks use: a 15M-parameter
# network whose model state dominates, at worlds 1-4, for each strategy and
# for a frozen trunk.  Per run: every rank's peak RSS (/usr/bin/time) within
# [0.85, 1.10] x the prediction; the step buffers the pool measured equal the
# replayed schedule's; the model state per rank equal the theory.  Under
# shard_node_shared=1 (`full-node`) a rank's RSS counts the node memory it
# maps, which the prediction adds (node_shared); with FSDP_SHM=0
# (`full-p2p`, as between machines) the point-to-point path's buffer for the
# other ranks' terms, N - 1 parts of the largest group (collective_scratch).
# usage: test_memory.sh [--fast] NP...
#   --fast: per world only full (the pool), full-node (node memory) and
#   full-p2p (the collectives' scratch): one case of each part of the model,
#   for the everyday suite.
. "$(dirname "$0")/lib.sh"
FAST=0
[ "${1:-}" = --fast ] && { FAST=1; shift; }
D=$WORK/data
make_data "$D" --classes 3 --per-class 8 --size 32
P=$(( 3072 * 2048 + 2048 + 2 * (2048 * 2048 + 2048) + 2048 * 3 + 3 ))   # parameters
cfg() { # cfg OUT SHARD FROZEN: 3 connected layers of 2048 in groups a, b, c, then the head
  {
    printf '[net]\nbatch=2\nsubdivisions=1\nwidth=32\nheight=32\nchannels=3\nlearning_rate=0.01\n'
    printf 'momentum=0.9\ndecay=0.0005\nmax_batches=3\npolicy=constant\nshard=%s\n' "${2%-*}"
    [ "$2" = full-node ] && printf 'shard_node_shared=1\n'
    [ "$2" = full ] && printf 'shard_node_shared=0\n'   # the copying path (node memory is full-node)
    for g in a b c; do
      printf '\n[connected]\noutput=2048\nactivation=leaky\nshard_group=trunk.%s\n' "$g"
      [ "$3" = 1 ] && printf 'frozen=1\n'
    done
    printf '\n[connected]\noutput=3\nactivation=linear\nshard_group=head\n\n[softmax]\n'
  } > "$1"
}

run() { # run NP SHARD FROZEN
  local np=$1 s=$2 fz=$3 name=$2-np$1-frozen$3
  cfg "$WORK/$name.cfg" "$s" "$fz"
  rm -f "$WORK"/rss.*
  if ! (cd "$D" && FSDP_SHM=$([ "$s" = full-p2p ] && echo 0 || echo 1) "${MPIRUN[@]}" -np "$np" sh -c '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$WORK/rss" "$DN" -plugin "$PLUGIN" -seed 1 classifier train "$D/data.data" "$WORK/$name.cfg" \
        -fsdp-stats "$WORK/$name.json" > "$WORK/$name.log" 2>&1); then
    fail "$name: the run failed: $(tail -n 3 "$WORK/$name.log")"
    return
  fi
  local out
  out=$(python3 - "$WORK/$name.json" "$np" "$s" "$fz" "$P" "$WORK"/rss.* <<'EOF'
import json, sys
stats, np, shard, frozen, params = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
node = shard == "full-node" and np > 1
p2p = shard == "full-p2p" and np > 1
shard = shard.replace("-node", "").replace("-p2p", "")
d = json.load(open(stats))
pred = d["predicted"]
peak = d["predicted_peak_bytes"]
rss = [int(open(f).read().split()[0]) * 1024 for f in sys.argv[6:]]
bad = []
if len(rss) != np:
    bad.append("%d rank peaks for %d ranks" % (len(rss), np))
for r, m in enumerate(rss):
    if not 0.85 * peak <= m <= 1.10 * peak:
        bad.append("a rank's peak %.1f MB is %.2f x the prediction %.1f MB" % (m / 1e6, m / peak, peak / 1e6))
if abs(d["step_buffers_bytes"] - pred["step_buffers"]) > 0.01 * pred["step_buffers"] + 65536:
    bad.append("step buffers measured %d, predicted %d" % (d["step_buffers_bytes"], pred["step_buffers"]))
# Model state per rank (SGD: parameters and momentum; frozen: parameters):
# trainable ones as shards under full, replicated parameters with sharded
# momentum under grad_op, replicated under none (padding: a float per rank
# and group at most).
frozen_params = 3072 * 2048 + 2048 + 2 * (2048 * 2048 + 2048) if frozen else 0
train = params - frozen_params
want = {"full": (2 * train + frozen_params) / np,
        "grad_op": train + train / np + frozen_params,
        "none": 2 * train + frozen_params}[shard] * 4
if abs(d["model_state_bytes"] - want) > 4 * 4 * np * 4:
    bad.append("model state %d, theory %d" % (d["model_state_bytes"], want))
# Step buffers: the largest group's gathered parameters G (padded), its
# gradient G and its reduced part G/N under full; gradient and reduced part
# under grad_op; the gradient alone (all-reduced in place) under none; the
# gathered frozen group alone for a frozen trunk (the head's are KBs); none
# in a world of one (SGD's gradients go into the momentum).
def padded(n): return -(-n // np) * np * 4
G = padded(3072 * 2048 + 2048)
# Node-shared: no gathered buffers, the gradient in node memory, summed
# by the optimizer straight from the slots: none.
bufs = 0 if np == 1 or node else G if frozen else {"full": 2 * G + G // np, "grad_op": G + G // np, "none": G}[shard]
# (Point to point, the reduce-scatters are started: the step holds a
# gradient in flight besides, which the schedule replays; no hand theory.)
if not p2p and abs(pred["step_buffers"] - bufs) > 0.01 * bufs + 131072:
    bad.append("step buffers predicted %d, theory %d" % (pred["step_buffers"], bufs))
want_scratch = (np - 1) * (G // np) if p2p else 0
if pred["collective_scratch"] != want_scratch:
    bad.append("the other ranks' terms predicted %d, theory %d" % (pred["collective_scratch"], want_scratch))
# Node memory a rank maps beyond its own parts: every parameter but its
# own, its gradient slot G, and of each other rank's slot the parts it sums,
# [r * shard, (r + 1) * shard) of each group, each widened to the 64 KB
# windows the kernel maps around a read fault (the rank with most of them).
groups = (3072 * 2048 + 2048, 2048 * 2048 + 2048, 2048 * 2048 + 2048, 2048 * 3 + 3)
allp = sum(padded(c) for c in groups)
def slots_read(r):
    W, slot = 16384, G // 4
    spans = [(r * slot, (r + 1) * slot)]
    for q in range(np):
        if q == r:
            continue
        for c in groups:
            sh = padded(c) // np // 4
            a = q * slot + r * sh
            spans.append((a - a % W, min(-(-(a + sh) // W) * W, np * slot)))
    total, upto = 0, 0
    for lo, hi in sorted(spans):
        lo = max(lo, upto)
        total += max(hi - lo, 0)
        upto = max(upto, hi)
    return total * 4
want_node = allp - allp // np + max(slots_read(r) for r in range(np)) if node else 0
if pred["node_shared"] != want_node:
    bad.append("node memory predicted %d, theory %d" % (pred["node_shared"], want_node))
# The build (docs/DESIGN.md, "Memory"): on N ranks each keeps its slice,
# ceil(count/N) floats, of every tensor of the layers built so far, plus
# the layer being built whole; then it gathers them back at setup, N slices
# per tensor.  A world of one builds the whole model as Darknet does.
tensors = [[3072 * 2048, 2048], [2048 * 2048, 2048], [2048 * 2048, 2048], [2048 * 3, 3]]
sl = lambda c: -(-c // np)
if np == 1:
    build = sum(map(sum, tensors)) * 4
    gathered = 0
else:
    build, kept = 0, 0
    for t in tensors:
        build = max(build, kept + sum(t) * 4)
        kept += sum(map(sl, t)) * 4
    gathered = sum(np * sl(c) for t in tensors for c in t) * 4
if pred["build"] != build:
    bad.append("build predicted %d, theory %d" % (pred["build"], build))
if d["bytes"]["setup_all_gather"] != gathered or (np > 1 and d["bytes"]["broadcast"] != 0):
    bad.append("set-up moved %d (all-gather) + %d (broadcast), theory %d + 0" % (
        d["bytes"]["setup_all_gather"], d["bytes"]["broadcast"], gathered))
print("; ".join(bad) if bad else "peaks %s MB, predicted %.1f MB (model state %.1f + step buffers %.1f)" % (
    "/".join("%.0f" % (m / 1e6) for m in rss), peak / 1e6, pred["model_state"] / 1e6, pred["step_buffers"] / 1e6))
sys.exit(1 if bad else 0)
EOF
) && pass "$name: $out" || fail "$name: $out"
}

for np in "$@"; do
  if [ "$FAST" = 1 ]; then
    run "$np" full 0
  else
    for s in full grad_op none; do run "$np" "$s" 0; done
    run "$np" full 1
  fi
  [ "$np" -gt 1 ] && run "$np" full-node 0
  [ "$np" -gt 1 ] && run "$np" full-p2p 0
done

# The planner (-fsdp-plan N CFG, one process, no training) predicts for each
# world and strategy what those runs predicted for themselves: the same model
# state, node memory and step buffers (its fixed cost is this process's,
# without MPI).  plan2: the cfg with shard_node_shared=1 (full-node runs).
for fz in 0 1 2; do
  [ "$FAST" = 1 ] && [ "$fz" = 1 ] && continue   # no frozen run to compare with
  if [ "$fz" = 2 ]; then cfg "$WORK/plan2.cfg" full-node 0; else cfg "$WORK/plan$fz.cfg" full "$fz"; fi
  max=$(printf '%s
' "$@" | sort -n | tail -n 1)
  if ! "$DN" -plugin "$PLUGIN" -fsdp-plan "$max" "$WORK/plan$fz.cfg" > "$WORK/plan$fz.md" 2> "$WORK/plan$fz.err"; then
    fail "-fsdp-plan $max: $(tail -n 2 "$WORK/plan$fz.err")"
    continue
  fi
  out=$(python3 - "$WORK" "$fz" "$@" <<'EOF'
import json, os, re, sys
work, fz, worlds = sys.argv[1], sys.argv[2], [int(w) for w in sys.argv[3:]]
rows = {}
for line in open(os.path.join(work, "plan%s.md" % fz)):
    m = re.match(r"\| (\d+) \|(.*)\|\s*$", line)
    if m:
        # (a node-shared cell ends with "; PSS X", the machine's share: not compared here)
        rows[int(m.group(1))] = [tuple(map(float, re.findall(r"[\d.]+", c.split(";")[0]))) for c in m.group(2).split("|")]
bad, seen = [], 0
node = fz == "2"
for w in worlds:
    for i, shard in enumerate(("full", "grad_op", "none")):
        name = "full-node-np%d-frozen0" % w if node else "%s-np%d-frozen%s" % (shard, w, fz)
        path = os.path.join(work, name + ".json")
        if not os.path.exists(path) or (node and i > 0):
            continue
        d = json.load(open(path))
        cell = rows[w][i]
        peak, state, bufs = cell[0], cell[1], cell[-1]
        shared = cell[2] if len(cell) == 4 else 0.0
        seen += 1
        p = d["predicted"]
        if max(abs(state - p["model_state"] / 1e6), abs(bufs - p["step_buffers"] / 1e6),
               abs(shared - p["node_shared"] / 1e6)) > 0.06:
            bad.append("%s at %d ranks: plan %.1f + %.1f + %.1f MB, the run %.1f + %.1f + %.1f" % (
                name, w, state, shared, bufs, p["model_state"] / 1e6, p["node_shared"] / 1e6, p["step_buffers"] / 1e6))
print("; ".join(bad) if bad else "%d worlds and strategies as the runs predicted them" % seen)
sys.exit(1 if bad or not seen else 0)
EOF
) && pass "-fsdp-plan, case $fz (1: frozen trunk, 2: shard_node_shared=1): $out" || fail "-fsdp-plan, case $fz: $out"
done
finish
