#!/usr/bin/env bash
# Resume on another world size or strategy: 3 steps on FROM ranks with
# -fsdp-checkpoint, then 3 more on TO ranks with -fsdp-resume (per-rank batch
# scaled so the global batch stays 12) equal 6 steps on FROM ranks in one go,
# to float tolerance: parameters, momentum, Adam's moments and step carried
# across the reshard.  Resuming from the weights file alone (optimizer state
# lost) does not.
# usage: test_resume.sh FROM TO STRATEGY_FROM STRATEGY_TO [adam]
. "$(dirname "$0")/lib.sh"
from=$1 to=$2 s_from=$3 s_to=$4 opt=${5:-sgd}
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
mk() { # mk OUT WORLD STRATEGY MAX_BATCHES
  sed -e "s/^batch=.*/batch=$((12 / $2))/; s/^max_batches=.*/max_batches=$4/; s/^\[net\]$/[net]\nshard=$3/" \
      "$S/cfg/tests/residual.cfg" > "$1"
  if [ "$opt" = adam ]; then sed -i 's/^\[net\]$/[net]\nadam=1\nB1=0.9\nB2=0.999\neps=0.00001/' "$1"; fi
}
mkdir -p "$WORK/a" "$WORK/b" "$WORK/c"
mk "$WORK/a/residual.cfg" "$from" "$s_from" 6
mk "$WORK/b/residual.cfg" "$from" "$s_from" 3
mk "$WORK/c/residual.cfg" "$to" "$s_to" 6
train_np "$WORK/straight.w" "$from" "$D/data.data" "$WORK/a/residual.cfg" -seed 3
(cd "$D" && rm -f backup/residual.weights* && "${MPIRUN[@]}" -np "$from" "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint > "$WORK/first.log" 2>&1)
cp "$D"/backup/residual.weights* "$WORK/b/"
shards=$(ls "$WORK/b/" | grep -c "residual.weights.fsdp-[0-9]*-of-$from$" || true)
check "$from ranks wrote their checkpoint ($shards files)" [ "$shards" = "$from" ]
if [ "$to" = 1 ]; then
  train "$WORK/resumed.w" "$D/data.data" "$WORK/c/residual.cfg" -plugin "$PLUGIN" -seed 3 -fsdp-resume "$WORK/b/residual.weights"
else
  train_np "$WORK/resumed.w" "$to" "$D/data.data" "$WORK/c/residual.cfg" -seed 3 -fsdp-resume "$WORK/b/residual.weights"
fi
check "rank 0 says the checkpoint of $from ranks resumed on $to" \
  grep -q "written on $from ranks, resumed on $to" "$WORK/resumed.w.err"
check "$from ranks ($s_from, $opt) 3 steps + resume on $to ($s_to) 3 steps equals 6 steps (tol 1e-5)" \
  "$WDIFF" "$WORK/straight.w" "$WORK/resumed.w" --tol 1e-5
if [ "$to" = 1 ]; then
  train "$WORK/plain.w" "$D/data.data" "$WORK/c/residual.cfg" -plugin "$PLUGIN" -seed 3 "$WORK/b/residual.weights"
else
  train_np "$WORK/plain.w" "$to" "$D/data.data" "$WORK/c/residual.cfg" -seed 3 "$WORK/b/residual.weights"
fi
check_not "resuming from the weights file alone (optimizer state lost) differs at that tolerance" \
  "$WDIFF" "$WORK/straight.w" "$WORK/plain.w" --tol 1e-5
finish
