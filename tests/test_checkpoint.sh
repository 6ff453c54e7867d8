#!/usr/bin/env bash
# Sharded checkpoints: 3 steps, save with -fsdp-checkpoint, resume with
# -fsdp-resume for 3 more gives the same weights, bit for bit, as 6 steps in
# one go (momentum, Adam's moments and step restored); resuming from the
# weights file alone does not.  A checkpoint missing a rank's file, of another
# cfg, or a truncated one stops every rank with a message naming the file
# (resuming on another world size: test_resume.sh).
# usage: test_checkpoint.sh NP STRATEGY [adam] [node] [recompute]
#   node: shard_node_shared=1; recompute: recompute=1 in [net] (both runs)
. "$(dirname "$0")/lib.sh"
np=$1 strategy=$2 opt=sgd node=0 recompute=0
for v in "${@:3}"; do case $v in adam) opt=adam ;; node) node=1 ;; recompute) recompute=1 ;; esac; done
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
mk() { # mk OUT MAX_BATCHES
  sed -e "s/^batch=.*/batch=4/; s/^max_batches=.*/max_batches=$2/; s/^\[net\]$/[net]\nshard=$strategy/" \
      "$S/cfg/tests/residual.cfg" > "$1"
  if [ "$opt" = adam ]; then sed -i 's/^\[net\]$/[net]\nadam=1\nB1=0.9\nB2=0.999\neps=0.00001/' "$1"; fi
  if [ "$node" = 1 ]; then sed -i 's/^\[net\]$/[net]\nshard_node_shared=1/' "$1"; fi
  if [ "$recompute" = 1 ]; then sed -i 's/^\[net\]$/[net]\nrecompute=1/' "$1"; fi
}
mkdir -p "$WORK/a" "$WORK/b"
mk "$WORK/a/residual.cfg" 6
mk "$WORK/b/residual.cfg" 3
train_np "$WORK/straight.w" "$np" "$D/data.data" "$WORK/a/residual.cfg" -seed 3
(cd "$D" && rm -f backup/residual.weights* && "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint > "$WORK/first.log" 2>&1)
cp "$D"/backup/residual.weights* "$WORK/b/"
shards=$(ls "$WORK/b/" | grep -c "residual.weights.fsdp-[0-9]*-of-$np$" || true)
check "each of $np ranks wrote its checkpoint beside the weights file ($shards)" [ "$shards" = "$np" ]
train_np "$WORK/resumed.w" "$np" "$D/data.data" "$WORK/a/residual.cfg" -seed 3 -fsdp-resume "$WORK/b/residual.weights"
check "3 steps + resume 3 steps equals 6 steps, bit for bit" "$WDIFF" "$WORK/straight.w" "$WORK/resumed.w" --exact
if [ "$strategy" = full ] || [ "$opt" = adam ]; then
  train_np "$WORK/plain.w" "$np" "$D/data.data" "$WORK/a/residual.cfg" -seed 3 "$WORK/b/residual.weights"
  check_not "resuming from the weights file alone (momentum lost) differs" "$WDIFF" "$WORK/straight.w" "$WORK/plain.w" --exact
fi

refuse_np() { # refuse_np WHAT PATTERN NP CFG WEIGHTS
  local what=$1 pat=$2 n=$3 cfg=$4 w=$5 out rc=0
  rm -f "$D/backup/residual.weights"
  out=$(cd "$D" && timeout 120 "${MPIRUN[@]}" -np "$n" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" \
        "$cfg" -seed 3 -fsdp-resume "$w" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q -- "$pat" <<< "$out" && [ ! -e "$D/backup/residual.weights" ]; then
    pass "$what (exit $rc)"
  else
    fail "$what: exit $rc: $(grep fsdp <<< "$out" | head -2)"
  fi
}
last=$WORK/b/residual.weights.fsdp-$((np - 1))-of-$np
mv "$last" "$WORK/last.orig"
refuse_np "a checkpoint missing one rank's file" "cannot open .*residual.weights.fsdp-$((np - 1))-of-$np: No such file" "$np" "$WORK/a/residual.cfg" "$WORK/b/residual.weights"
mv "$WORK/last.orig" "$last"
sed -i '0,/^filters=4$/s//filters=4\nfrozen=1/' "$WORK/a/residual.cfg"
refuse_np "a checkpoint from another cfg" "was written for another network" "$np" "$WORK/a/residual.cfg" "$WORK/b/residual.weights"
mk "$WORK/a/residual.cfg" 6
# The header's layout fields: align (a uint32 at byte 48) 64 is a GPU run's.
ck=$WORK/b/residual.weights.fsdp-0-of-$np
cp "$ck" "$WORK/ck.orig"
printf '\x40\x00\x00\x00' | dd of="$ck" bs=1 seek=48 conv=notrunc status=none
refuse_np "a GPU run's checkpoint on the CPU" "fsdp-0-of-$np was written by a GPU run, and this is a CPU run" "$np" "$WORK/a/residual.cfg" "$WORK/b/residual.weights"
cp "$WORK/ck.orig" "$ck"
printf 'FSDPCKP1' | dd of="$ck" bs=1 conv=notrunc status=none
refuse_np "a format-1 checkpoint" "fsdp-0-of-$np is a checkpoint of an older darknet-fsdp" "$np" "$WORK/a/residual.cfg" "$WORK/b/residual.weights"
cp "$WORK/ck.orig" "$ck"
head -c 100 "$WORK/b/residual.weights.fsdp-0-of-$np" > "$WORK/t" && mv "$WORK/t" "$WORK/b/residual.weights.fsdp-0-of-$np"
refuse_np "a truncated checkpoint" "residual.weights.fsdp-0-of-$np: shorter than its header says" "$np" "$WORK/a/residual.cfg" "$WORK/b/residual.weights"
finish
