#!/usr/bin/env bash
# Synchronized batch norm: N ranks with cfg batch b against stock Darknet, one
# process with batch N*b, same seed, on Darknet's own resnet18 and darknet19
# (cfg/tests/*-bn.cfg: 32x32, every batch_normalize=1 kept).  Weights files,
# rolling statistics included, equal to float tolerance; every rank's rolling
# statistics bit-identical (the stats file's bn_rolling); bytes equal to the
# theory (check_stats.py --bn).
# usage: test_sync_bn.sh CASE NP
#   resnet18, darknet19: shard=full, grad_op and none; resnet18 also shows
#     that sync_bn=0 (per-rank statistics) does not match the oracle
#   subdiv2: resnet18 with subdivisions=2 (statistics per micro-batch)
#   frozen: resnet18 with its first layer frozen (shard_group=trunk), from
#     weights trained one step: the trunk, rolling statistics included, stays
#     bit-identical; the rest equals the plugin's world of one with the
#     N-times batch (stock Darknet has no frozen=1)
#   refused: what cannot be synchronized, and a bad sync_bn value, stop every
#     rank with a message and a non-zero exit
. "$(dirname "$0")/lib.sh"
case=$1 np=$2
D=$WORK/data
make_data "$D" --classes 3 --per-class 16 --size 32

# expect_refusal WHAT PATTERN CFG: NP ranks stop with PATTERN, non-zero, no hang, no weights.
expect_refusal() {
  local out rc=0
  rm -rf "$D/backup"
  out=$(cd "$D" && timeout 60 "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$3" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qE -- "$2" <<< "$out" && [ -z "$(ls "$D/backup" 2>/dev/null)" ]; then
    pass "$1 (exit $rc)"
  else
    fail "$1: exit $rc, output: $(grep -i "fsdp\|error" <<< "$out" | head -3)"
  fi
}
if [ "$case" = refused ]; then
  # tiny.cfg's layer 3, [connected] 486 -> 5, with batch norm over a batch of 1.
  cfg=$WORK/tiny-bn.cfg
  sed -e 's/^batch=.*/batch=1/' -e '0,/^\[connected\]$/s//[connected]\nbatch_normalize=1/' "$S/cfg/tests/tiny.cfg" > "$cfg"
  expect_refusal "batch norm over 1 value per channel per rank" \
    "layer 3: synchronized batch norm needs at least 2 values per channel on each rank \(batch x height x width is 1\); raise batch, or set sync_bn=0" "$cfg"
  sed -i 's/^\[net\]$/[net]\nsync_bn=2/' "$cfg"
  expect_refusal "sync_bn=2" "tiny-bn.cfg:$(grep -n -m1 '^sync_bn=2$' "$cfg" | cut -d: -f1): sync_bn=2: expected 0 or 1" "$cfg"
  finish
  exit
fi
global=8
b=$((global / np))
# Trainable parameters and batch-norm channels, worked out in the cfgs' comments.
case $case in
  darknet19) name=darknet19-bn params=19820451 channels=7200 ;;
  *) name=resnet18-bn params=11004227 channels=3904 ;;
esac
steps=3 sd=1
strategies="full grad_op none"
[ "$case" = subdiv2 ] || [ "$case" = frozen ] && strategies=full
[ "$np" -gt 2 ] && strategies=full
[ "$case" = subdiv2 ] && sd=2
cfg=$WORK/$name.cfg

# make_cfg BATCH [KEY=VALUE...]: cfg/tests/$name.cfg as $cfg, batch BATCH (per
# micro-batch), subdivisions sd, keys added to [net].
make_cfg() {
  local batch=$1 k; shift
  sed -e "s/^batch=.*/batch=$((batch * sd))/; s/^subdivisions=.*/subdivisions=$sd/" "$S/cfg/tests/$name.cfg" > "$cfg"
  for k in "$@"; do sed -i "s/^\[net\]$/[net]\n$k/" "$cfg"; done
  if [ "$case" = frozen ]; then
    sed -i '0,/^\[convolutional\]$/s//[convolutional]\nfrozen=1\nshard_group=trunk/' "$cfg"
    sed -i 's/^max_batches=.*/max_batches=4/' "$cfg"
  fi
}

# rolling STATS DIFFER: the stats file's rolling-statistics check ran and
# found DIFFER saves with rank-dependent rolling statistics.
rolling() {
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["bn_rolling"]
sys.exit(0 if r["checks"] >= 1 and r["differ"] == int(sys.argv[2]) else 1)' "$1" "$2"
}

start=()
groups=("(root)=$params,0,1,0")
bn=(--bn "(root)=$channels")
oracle=()
if [ "$case" = frozen ]; then
  # The starting point: stock Darknet, one step of the unfrozen network.
  sed -e "s/^batch=.*/batch=$global/; s/^max_batches=.*/max_batches=1/" "$S/cfg/tests/$name.cfg" > "$cfg"
  train "$WORK/start.w" "$D/data.data" "$cfg" -seed 5
  start=("$WORK/start.w")
  # Layer 0: 64 7x7x3 filters with batch norm: biases, scales, rolling mean,
  # rolling variance (4*64) then weights (9408) in the file; 9536 parameters.
  trunk=0:9664
  groups=("(root)=$((params - 9536)),0,1,0" "trunk=0,9536,0,0")
  bn=(--bn "(root)=$((channels - 64))")
  oracle=(-plugin "$PLUGIN")
  steps=3
fi

make_cfg "$global"
train "$WORK/ref.w" "$D/data.data" "$cfg" "${oracle[@]}" -seed 5 "${start[@]}"
what="stock Darknet"
[ "$case" = frozen ] && what="world 1"

for strategy in $strategies; do
  make_cfg "$b" "shard=$strategy"
  if ! train_np "$WORK/$strategy.w" "$np" "$D/data.data" "$cfg" -seed 5 -fsdp-stats "$WORK/$strategy.json" "${start[@]}"; then
    fail "$np ranks, shard=$strategy ran"
    continue
  fi
  check "$np ranks, shard=$strategy: weights and rolling statistics equal $what with batch $((global * sd)) ($("$WDIFF" "$WORK/ref.w" "$WORK/$strategy.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/$strategy.w" --tol 1e-4
  check "$np ranks, shard=$strategy: every rank's rolling statistics bit-identical" rolling "$WORK/$strategy.json" 0
  check "$np ranks, shard=$strategy: bytes in the stats file equal the theory (batch norm included)" \
    python3 "$S/tests/check_stats.py" "$WORK/$strategy.json" --world "$np" --strategy "$strategy" \
      --steps "$steps" --subdivisions "$sd" "${bn[@]}" "${groups[@]}"
done

if [ "$case" = frozen ]; then
  for w in ref full; do
    check "frozen trunk (weights and rolling statistics) bit-identical to the start ($w)" \
      "$WDIFF" "$WORK/start.w" "$WORK/$w.w" --exact --floats "$trunk"
  done
fi

if [ "$case" = resnet18 ] && [ "$np" = 2 ]; then
  # The test can fail: per-rank statistics are not the oracle's.
  make_cfg "$b" sync_bn=0
  train_np "$WORK/local.w" "$np" "$D/data.data" "$cfg" -seed 5 -fsdp-stats "$WORK/local.json"
  check_not "sync_bn=0: weights differ from stock Darknet with batch $global ($("$WDIFF" "$WORK/ref.w" "$WORK/local.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/local.w" --tol 1e-4
  check "sync_bn=0: the ranks' rolling statistics differ" rolling "$WORK/local.json" 1
  check "sync_bn=0: no batch-norm bytes" \
    python3 "$S/tests/check_stats.py" "$WORK/local.json" --world "$np" --strategy full \
      --steps "$steps" --sync-bn 0 "${bn[@]}" "${groups[@]}"
fi
finish
