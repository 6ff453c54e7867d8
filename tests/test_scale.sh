#!/usr/bin/env bash
# Dozens of ranks on one machine (oversubscribed), the 21 MB net of
# tools/bench scale in four groups (cfg/bench/scale.cfg), batch 2 per rank: with the defaults
# (shard=full, node-shared parameters on one machine) and with
# shard_node_shared=0 (the copying path), each run's weights equal stock
# Darknet with an NP-times batch; every rank's peak RSS is within [0.85,
# 1.10] x its prediction (per-rank memory does not grow as the square of the
# ranks); rank 0's PSS at the steps' ends within [0.85, 1.15] x the predicted
# PSS, and the ranks' mean PSS (what the prediction stands for) within 10%;
# the stats give every rank's set-up CPU time; rank 0 prints the
# start-up lines once each.
# usage: test_scale.sh NP
. "$(dirname "$0")/lib.sh"
np=$1
D=$WORK/data
make_data "$D" --classes 6 --per-class $((np / 2 + 4)) --size 32
cfg() { # cfg OUT BATCH [KEY=VALUE]
  sed "s/^batch=.*/batch=$2/" "$S/cfg/bench/scale.cfg" > "$1"
  [ -z "${3:-}" ] || sed -i "s/^\[net\]$/[net]\n$3/" "$1"
}
cfg "$WORK/scale.cfg" $((2 * np))
train "$WORK/ref.w" "$D/data.data" "$WORK/scale.cfg" -seed 3

for variant in default copying; do
  cfg "$WORK/scale.cfg" 2 "$([ $variant = copying ] && echo shard_node_shared=0)"
  rm -f "$WORK"/rss.*
  if ! (cd "$D" && rm -f backup/scale.weights && "${MPIRUN[@]}" -np "$np" sh -c '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$WORK/rss" "$DN" -plugin "$PLUGIN" -seed 3 classifier train "$D/data.data" "$WORK/scale.cfg" \
        -fsdp-stats "$WORK/$variant.json" > "$WORK/$variant.log" 2> "$WORK/$variant.err"); then
    fail "$np ranks, $variant: the run failed: $(tail -n 3 "$WORK/$variant.err")"
    continue
  fi
  cp "$D/backup/scale.weights" "$WORK/$variant.w"
  check "$np ranks, $variant: weights equal stock Darknet with batch $((2 * np)) ($("$WDIFF" "$WORK/ref.w" "$WORK/$variant.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/$variant.w" --tol 1e-4
  out=$(python3 - "$WORK/$variant.json" "$np" "$variant" "$WORK"/rss.* <<'PY'
import json, sys
d, np, variant = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
# Each rank's peak against its own prediction: the fixed costs differ by
# the part of the transport window each rank maps.
rss = {int(f.rsplit(".", 1)[1]): int(open(f).read().split()[0]) * 1024 for f in sys.argv[4:]}
each = d["predicted_peak_per_rank"]
peak, pss = d["predicted_peak_bytes"], d["predicted_pss_bytes"]
bad = []
if len(rss) != np or len(each) != np or each[0] != peak:
    bad.append("%d rank peaks, %d predictions for %d ranks" % (len(rss), len(each), np))
for r, m in rss.items():
    p = each[r] if r < len(each) else peak
    if not 0.85 * p <= m <= 1.10 * p:
        bad.append("rank %d's peak %.1f MB is %.2f x its prediction %.1f MB" % (r, m / 1e6, m / p, p / 1e6))
if not 0.85 * pss <= d["peak_pss_bytes"] <= 1.15 * pss:
    bad.append("rank 0's PSS %.1f MB, predicted %.1f MB" % (d["peak_pss_bytes"] / 1e6, pss / 1e6))
# What the prediction stands for: the machine's memory per rank, the ranks' mean PSS.
if not 0.90 * pss <= d["mean_pss_bytes"] <= 1.10 * pss:
    bad.append("the ranks' mean PSS %.1f MB, predicted %.1f MB" % (d["mean_pss_bytes"] / 1e6, pss / 1e6))
node = variant == "default"
if (d["node_shared_bytes"] > 0) != node or (d["predicted"]["node_shared"] > 0) != node:
    bad.append("node memory %d, predicted %d: node-shared parameters %s" % (
        d["node_shared_bytes"], d["predicted"]["node_shared"], "expected" if node else "not expected"))
cpu = d["setup_cpu_seconds"]
if not 0 < cpu["min"] <= cpu["max"]:
    bad.append("set-up CPU seconds %s" % cpu)
ratio = [m / each[r] for r, m in rss.items()] if not bad else [0]
print("; ".join(bad) if bad else "peaks %.1f-%.1f MB, predicted %.1f-%.1f (each rank's own: %.2f-%.2f); PSS rank 0 %.1f, mean %.1f, predicted %.1f; set-up CPU %.2f-%.2f s" % (
    min(rss.values()) / 1e6, max(rss.values()) / 1e6, min(each) / 1e6, max(each) / 1e6, min(ratio), max(ratio),
    d["peak_pss_bytes"] / 1e6, d["mean_pss_bytes"] / 1e6, pss / 1e6, cpu["min"], cpu["max"]))
sys.exit(1 if bad else 0)
PY
) && pass "$np ranks, $variant: $out" || fail "$np ranks, $variant: $out"
  check "$np ranks, $variant: rank 0 prints the summary line once" \
    [ "$(grep -c "^fsdp: world $np, shard=full, 5 groups, 5265894 trainable + 0 frozen parameters" "$WORK/$variant.err")" = 1 ]
  check "$np ranks, $variant: and the prediction once" [ "$(grep -c "^fsdp: predicted peak memory per rank" "$WORK/$variant.err")" = 1 ]
  notes=$(grep -c "^fsdp: the parameters live once per machine in shared memory (shard_node_shared=1, the default on one machine): its $np ranks need" "$WORK/$variant.err" || true)
  check "$np ranks, $variant: the note on node-shared parameters $([ $variant = default ] && echo once || echo not at all)" \
    [ "$notes" = "$([ $variant = default ] && echo 1 || echo 0)" ]
done
check "$np ranks: the default and the copying path write the same bytes" cmp "$WORK/default.w" "$WORK/copying.w"
[ -z "${FSDP_TEST_KEEP:-}" ] || cp -r "$WORK" "$FSDP_TEST_KEEP"
finish
