#!/usr/bin/env bash
# `darknet rnn train` (character-level, patches 0039-0040) on NP ranks with
# b streams each against stock Darknet, one process with NP*b streams, under
# -seed: weights equal to float tolerance for each strategy, two NP-rank
# runs byte-identical, and training moved the weights well beyond the
# tolerance.  Resets (1 in 64 streams per step) happen over 40 steps of 4-8
# streams, so the streams' global numbering is exercised.
# With `bn`: batch norm in the [rnn] layer's three inner layers, synchronized
# per time step over the ranks' streams, 3 steps at learning rate 0.01 (with
# 8 rows per normalisation this net multiplies rounding differences about
# tenfold per step: on another text 2e-8 after one step, 3e-6 after three,
# 5e-4 after ten, between one process and two ranks).
# usage: test_rnn.sh NP [bn]
. "$(dirname "$0")/lib.sh"
np=$1 b=4 tol=1e-4
bn=0 steps=40 lr=0.1
[ "${2:-}" = bn ] && bn=1 steps=3 lr=0.01
T=$WORK/text.txt
python3 - "$T" <<'PY'
import random, sys
r = random.Random(3)
words = ["shard", "rank", "darknet", "gather", "scatter", "frozen", "layer", "batch", "the", "a", "of"]
open(sys.argv[1], "w").write(" ".join(r.choice(words) for _ in range(4000)) + "\n")
PY
cfg() { # cfg OUT STREAMS [STRATEGY]
  printf '[net]\nsubdivisions=1\ninputs=256\nbatch=%s\ntime_steps=8\nmomentum=0.9\ndecay=0.001\n' "$2" > "$1"
  printf 'max_batches=%s\nlearning_rate=%s\npolicy=constant\n' "$steps" "$lr" >> "$1"
  [ -n "${3:-}" ] && printf 'shard=%s\n' "$3" >> "$1"
  printf '\n[rnn]\noutput=64\nhidden=64\nbatch_normalize=%s\nactivation=leaky\nshard_group=rnn\n' "$bn" >> "$1"
  printf '\n[connected]\noutput=256\nactivation=leaky\n\n[softmax]\n\n[cost]\ntype=sse\n' >> "$1"
}
# rnn OUT NP CFG [args]: NP=0 stock Darknet, one process; the final weights to OUT.
rnn() {
  local out=$1 n=$2 cfg=$3; shift 3
  local base; base=$(basename "$cfg" .cfg)
  rm -rf "$WORK/backup" && mkdir -p "$WORK/backup"
  local run=("$DN")
  [ "$n" = 0 ] || run=("${MPIRUN[@]}" -np "$n" "$DN" -plugin "$PLUGIN")
  if ! (cd "$WORK" && "${run[@]}" rnn train "$cfg" -file "$T" -backup "$WORK/backup" "$@" > "$out.log" 2>&1); then
    echo "rnn train failed:"; tail -n 20 "$out.log"; return 1
  fi
  cp "$WORK/backup/${base}_final.weights" "$out"
}
mkdir -p "$WORK/one" "$WORK/n"
cfg "$WORK/one/rnn.cfg" $((b * np))
rnn "$WORK/stock.w" 0 "$WORK/one/rnn.cfg" -seed 5 || fail "stock rnn train ran"
rnn "$WORK/stock2.w" 0 "$WORK/one/rnn.cfg" -seed 5 || fail "stock rnn train ran twice"
check "stock: two runs with -seed 5 byte-identical" cmp -s "$WORK/stock.w" "$WORK/stock2.w"
sed 's/^max_batches=.*/max_batches=1/' "$WORK/one/rnn.cfg" > "$WORK/one/first.cfg"
rnn "$WORK/first.w" 0 "$WORK/one/first.cfg" -seed 5 || fail "stock rnn train, one step"
moved=$({ "$WDIFF" "$WORK/first.w" "$WORK/stock.w" --floats 0:999999 || true; } | grep -o 'max |diff| [^,]*' | cut -d' ' -f3)
check "training moved the weights by $moved after the first step, over 20 x $tol" \
  awk -v m="$moved" -v t="$tol" 'BEGIN { exit !(m > 20 * t) }'
for s in full grad_op none; do
  cfg "$WORK/n/rnn.cfg" "$b" "$s"
  if rnn "$WORK/$s.w" "$np" "$WORK/n/rnn.cfg" -seed 5; then
    check "$np ranks of $b streams, shard=$s: weights equal one process of $((b * np)) streams ($("$WDIFF" "$WORK/stock.w" "$WORK/$s.w" --tol "$tol" | head -1))" \
      "$WDIFF" "$WORK/stock.w" "$WORK/$s.w" --tol "$tol"
  else
    fail "$np ranks, shard=$s ran"
  fi
done
rnn "$WORK/again.w" "$np" "$WORK/n/rnn.cfg" -seed 5 || fail "$np ranks ran twice"
check "$np ranks: two runs with -seed 5 byte-identical" cmp -s "$WORK/none.w" "$WORK/again.w"
# [net] recompute=1 passes the [rnn] layer's group by (its state carries
# between steps) and the root holds the loss: nothing recomputes, the same bytes.
sed 's/^\[net\]$/[net]\nrecompute=1/' "$WORK/n/rnn.cfg" > "$WORK/n/rnn-rc.cfg"
if rnn "$WORK/rc.w" "$np" "$WORK/n/rnn-rc.cfg" -seed 5; then
  check "$np ranks, [net] recompute=1: byte-identical" cmp -s "$WORK/none.w" "$WORK/rc.w"
  check_not "$np ranks, [net] recompute=1: no group recomputes" grep -q "recompute their activations" "$WORK/rc.w.log"
else
  fail "$np ranks, [net] recompute=1 ran"
fi
finish
