#!/usr/bin/env bash
# A model that does not fit one rank trains on four (docs/DESIGN.md,
# "Memory"): a network of 22.6M parameters (six [connected] layers of 2048
# on 16x16x3 input, each its own group, SGD with momentum) needs some 185 MB
# in stock Darknet; under a cap of 150 MB per process (tools/memcap: a
# memory cgroup per rank) stock Darknet is killed, and 4 ranks with the
# plugin (shard=full) train it, each under the same cap, to the weights of
# one process without the cap and a 4-times batch.
. "$(dirname "$0")/lib.sh"
CAP=150
"$S/tools/memcap" 16 true 2> "$WORK/probe.err" || {
  rc=$?
  echo "skipped: $(cat "$WORK/probe.err")"
  exit "$rc"
}
D=$WORK/data
make_data "$D" --classes 3 --per-class 8 --size 16
cfg() { # cfg OUT BATCH
  printf '[net]\nbatch=%s\nsubdivisions=1\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.01\n' "$2" > "$1"
  printf 'momentum=0.9\ndecay=0.0005\nmax_batches=3\npolicy=constant\n' >> "$1"
  for g in 1 2 3 4 5 6; do printf '\n[connected]\noutput=2048\nactivation=leaky\nshard_group=g%s\n' "$g" >> "$1"; done
  printf '\n[connected]\noutput=3\nactivation=linear\n\n[softmax]\n' >> "$1"
}
mkdir -p "$WORK/one" "$WORK/four"
cfg "$WORK/one/cap.cfg" 8
cfg "$WORK/four/cap.cfg" 2

# Stock Darknet, one process with the whole batch, under the cap: killed.
rc=0
(cd "$D" && rm -rf backup/* && "$S/tools/memcap" "$CAP" "$DN" classifier train "$D/data.data" "$WORK/one/cap.cfg" \
  -seed 3 > "$WORK/capped.log" 2> "$WORK/capped.err") || rc=$?
check "stock Darknet does not fit $CAP MB (exit $rc, $(grep -o 'peak [0-9]* MB' "$WORK/capped.err"))" [ "$rc" -ne 0 ]

# The same without the cap: the reference weights.
train "$WORK/ref.w" "$D/data.data" "$WORK/one/cap.cfg" -seed 3 || fail "stock Darknet without the cap ran"

# Four ranks, each under the cap.
if (cd "$D" && rm -rf backup/* && "${MPIRUN[@]}" -np 4 "$S/tools/memcap" "$CAP" "$DN" -plugin "$PLUGIN" -seed 3 \
      classifier train "$D/data.data" "$WORK/four/cap.cfg" > "$WORK/four.log" 2> "$WORK/four.err"); then
  cp "$D/backup/cap.weights" "$WORK/four.w"
  peaks=$(grep -o 'peak [0-9]* MB' "$WORK/four.err" | awk '{ print $2 }' | sort -n | tr '\n' '/' | sed 's#/$##')
  pass "4 ranks ran under $CAP MB each (peaks $peaks MB)"
  check "4 ranks: weights equal one process without the cap ($("$WDIFF" "$WORK/ref.w" "$WORK/four.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/four.w" --tol 1e-4
else
  fail "4 ranks ran under $CAP MB each: $(tail -n 5 "$WORK/four.err")"
fi
finish
