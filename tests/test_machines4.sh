#!/usr/bin/env bash
# Four simulated machines (tests/hosts.sh: network namespaces on a bridge,
# TCP only), cfg/bench/link.cfg (2.95M parameters in three groups), shard=full:
# - 8 ranks, 2 per machine, round-robin: weights equal stock Darknet with
#   the 8-times batch; the same bytes run after run; the stats' bytes to
#   other machines equal the theory (check_stats.py, hierarchical);
# - what each machine sends on its link per step (its counter, a 3-step run
#   less a 1-step one) within 5% of the hierarchical theory: each part of
#   each all-gather and reduce-scatter to one peer on each other machine,
#   (M - 1) / M of the bytes the plugin counts;
# - 4 ranks, 1 per machine, with the same global batch: the same bytes on
#   each link per step (within 5%), so they do not grow with the ranks per
#   machine.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hosts.sh"
hosts_up m4 4
D=$WORK/data
make_data "$D" --classes 6 --per-class 40 --size 32   # no epoch ends in 3 steps (no save between them)
M=4

cfg() { # cfg OUT BATCH STEPS
  sed "s/^batch=.*/batch=$2/; s/^max_batches=.*/max_batches=$3/" "$S/cfg/bench/link.cfg" > "$1"
}
# run NAME NP BATCH STEPS [darknet args]: NP ranks round-robin over the four
# machines; NAME.w, NAME.log/.err; NAME.tx: what each machine sent meanwhile.
run() {
  local name=$1 np=$2 batch=$3 steps=$4 k; shift 4
  cfg "$WORK/link.cfg" "$batch" "$steps"
  local before=() after=()
  for k in 0 1 2 3; do before[k]=$(hosts_tx $k); done
  (cd "$D" && rm -f backup/link.weights &&
   on_host 0 "${HOSTS_MPIRUN[@]}" -np "$np" --map-by node "$DN" -plugin "$PLUGIN" -seed 5 classifier train \
     "$D/data.data" "$WORK/link.cfg" "$@" > "$WORK/$name.log" 2> "$WORK/$name.err") ||
    { echo "mpirun -np $np on four machines failed:"; tail -n 20 "$WORK/$name.err"; return 1; }
  for k in 0 1 2 3; do after[k]=$(hosts_tx $k); done
  for k in 0 1 2 3; do echo $((after[k] - before[k])); done > "$WORK/$name.tx"
  cp "$D/backup/link.weights" "$WORK/$name.w"
}

cfg "$WORK/link.cfg" 32 3
train "$WORK/ref.w" "$D/data.data" "$WORK/link.cfg" -seed 5
ok=1
run np8 8 4 3 -fsdp-stats "$WORK/np8.json" && run np8-1 8 4 1 && run np8-again 8 4 3 || ok=0
if [ $ok = 1 ]; then
  check "4 machines x 2 ranks: weights equal stock Darknet with batch 32 ($("$WDIFF" "$WORK/ref.w" "$WORK/np8.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/np8.w" --tol 1e-4
  check "4 machines x 2 ranks: byte-identical run after run" cmp "$WORK/np8.w" "$WORK/np8-again.w"
  check "4 machines x 2 ranks: the stats' bytes, to other machines included, equal the hierarchical theory" \
    python3 "$S/tests/check_stats.py" "$WORK/np8.json" --world 8 --strategy full --steps 3 --hosts 0,1,2,3,0,1,2,3 \
      "(root)=4614,0,1,0" "a=2360064,0,1,0" "b=590592,0,1,0"
else
  fail "8 ranks on four machines ran"
fi
run np4 4 8 3 && run np4-1 4 8 1 || { ok=0; fail "4 ranks on four machines ran"; }
if [ $ok = 1 ]; then
  out=$(python3 - "$WORK" "$M" <<'PY'
import json, sys
work, M = sys.argv[1], int(sys.argv[2])
tx = lambda n: [int(x) for x in open("%s/%s.tx" % (work, n))]
d = json.load(open(work + "/np8.json"))
# Two steps: a 3-step run less a 1-step one (start-up, the first step and
# the weights file alike).
per = {np: [(a - b) / 2 for a, b in zip(tx("np%d" % np), tx("np%d-1" % np))] for np in (4, 8)}
# Each rank sends its part of each all-gather and reduce-scatter to one peer
# per other machine: (M - 1) / M of the counted bytes per machine; all-reduces
# (none here) to every rank.  The link's counter sees TCP's frames, which a
# veth link takes whole (segmentation offload, up to 64 KB a frame): their
# headers and ACKs add well under 1%.
counted = (d["bytes"]["all_gather"] + d["bytes"]["reduce_scatter"]) / d["steps"]
wire = counted * (M - 1) / M
bad = []
for np, v in per.items():
    for k, x in enumerate(v):
        if abs(x / wire - 1) > 0.05:
            bad.append("%d ranks: machine %d sent %.2f MB per step, theory %.2f" % (np, k, x / 1e6, wire / 1e6))
for k in range(M):
    if abs(per[4][k] / per[8][k] - 1) > 0.05:
        bad.append("machine %d: %.2f MB per step with 1 rank, %.2f with 2" % (k, per[4][k] / 1e6, per[8][k] / 1e6))
print("; ".join(bad) if bad else "per machine per step %s MB (1 rank each), %s MB (2 each), theory %.2f" % (
    " ".join("%.2f" % (x / 1e6) for x in per[4]), " ".join("%.2f" % (x / 1e6) for x in per[8]), wire / 1e6))
sys.exit(1 if bad else 0)
PY
) && pass "each machine's link carries the hierarchical theory, whatever the ranks per machine: $out" ||
    fail "each machine's link: $out"
fi
finish
