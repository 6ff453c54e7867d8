#!/usr/bin/env bash
# Eight simulated machines of four ranks (tests/hosts.sh: network namespaces
# on a bridge, TCP only), cfg/bench/link.cfg (2.95M parameters in three
# groups), shard=full with its default between machines (hierarchical
# exchanges, parameters copied per rank):
# - 32 ranks, 4 per machine (by slot): weights equal stock Darknet with the
#   32-times batch;
# - what each machine sends on its link per step (its counter, a 3-step run
#   less a 1-step one) within 5% of the hierarchical theory: each rank's part
#   of each all-gather and reduce-scatter (1/N of the buffer the plugin
#   counts) to one peer on each other machine: L (M - 1) / N = (M - 1) / M
#   of the counted bytes per machine, whatever the ranks per machine;
# - every rank's peak RSS within [0.85, 1.10] x its prediction.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hosts.sh"
M=8 L=4
hosts_up m8 $M
D=$WORK/data
make_data "$D" --classes 6 --per-class 40 --size 32   # no epoch ends in 3 steps
cfg() { # cfg OUT BATCH STEPS
  sed "s/^batch=.*/batch=$2/; s/^max_batches=.*/max_batches=$3/" "$S/cfg/bench/link.cfg" > "$1"
}
machines() { seq 0 $((M - 1)); }
# run NAME STEPS [darknet args]: M x L ranks, L on each machine in turn;
# NAME.w, NAME.log/.err, NAME.rss.RANK; NAME.tx: what each machine sent.
run() {
  local name=$1 steps=$2 k; shift 2
  cfg "$WORK/link.cfg" 1 "$steps"
  local before=() after=()
  for k in $(machines); do before[k]=$(hosts_tx "$k"); done
  (cd "$D" && rm -f backup/link.weights &&
   on_host 0 "${HOSTS_MPIRUN[@]}" -np $((M * L)) --map-by "ppr:$L:node" \
     sh -c '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$WORK/$name.rss" \
     "$DN" -plugin "$PLUGIN" -seed 5 classifier train "$D/data.data" "$WORK/link.cfg" "$@" \
     > "$WORK/$name.log" 2> "$WORK/$name.err") ||
    { echo "mpirun -np $((M * L)) on $M machines failed:"; tail -n 20 "$WORK/$name.err"; return 1; }
  for k in $(machines); do after[k]=$(hosts_tx "$k"); done
  for k in $(machines); do echo $((after[k] - before[k])); done > "$WORK/$name.tx"
  cp "$D/backup/link.weights" "$WORK/$name.w"
}

cfg "$WORK/link.cfg" $((M * L)) 3
train "$WORK/ref.w" "$D/data.data" "$WORK/link.cfg" -seed 5
if run np32 3 -fsdp-stats "$WORK/np32.json" && run np32-1 1; then
  check "$M machines x $L ranks: weights equal stock Darknet with batch $((M * L)) ($("$WDIFF" "$WORK/ref.w" "$WORK/np32.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/np32.w" --tol 1e-4
  out=$(python3 - "$WORK" "$M" "$L" <<'PY'
import glob, json, sys
work, M, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tx = lambda n: [int(x) for x in open("%s/%s.tx" % (work, n))]
d = json.load(open(work + "/np32.json"))
per = [(a - b) / 2 for a, b in zip(tx("np32"), tx("np32-1"))]
# The stats count the full buffers; each of a machine's L ranks sends its
# 1/(M L) of each to one peer on each of the M - 1 other machines.
counted = (d["bytes"]["all_gather"] + d["bytes"]["reduce_scatter"]) / d["steps"]
wire = counted * (M - 1) / M
bad = ["machine %d sent %.2f MB per step, theory %.2f" % (k, x / 1e6, wire / 1e6)
       for k, x in enumerate(per) if abs(x / wire - 1) > 0.05]
peak = d["predicted_peak_bytes"]
rss = [int(open(f).read().split()[0]) * 1024 for f in glob.glob(work + "/np32.rss.*")]
if len(rss) != M * L:
    bad.append("%d rank peaks for %d ranks" % (len(rss), M * L))
bad += ["a rank's peak %.1f MB is %.2f x the prediction %.1f MB" % (m / 1e6, m / peak, peak / 1e6)
        for m in rss if not 0.85 * peak <= m <= 1.10 * peak]
print("; ".join(bad) if bad else "per machine per step %s MB, theory %.2f; peaks %.1f-%.1f MB, predicted %.1f" % (
    " ".join("%.2f" % (x / 1e6) for x in per), wire / 1e6, min(rss) / 1e6, max(rss) / 1e6, peak / 1e6))
sys.exit(1 if bad else 0)
PY
) && pass "each link carries the hierarchical theory, and each rank's peak its prediction: $out" ||
    fail "$M machines x $L ranks: $out"
else
  fail "$((M * L)) ranks on $M machines ran"
fi
finish
