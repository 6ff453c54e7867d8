#!/usr/bin/env bash
# cfg fuzzer: mutants of cfg/tests/{tiny,plain,residual,layers,rnn}.cfg
# (tests/cfg_fuzz.py: deleted lines, duplicated sections, random and missing
# values, odd and deeply nested group names, stray lines) trained briefly
# with the plugin.  Every mutant must end in time: no hang, no crash where
# stock Darknet does not crash on the same cfg (then the crash is the
# plugin's), and every refusal of the plugin must name the cfg file.
# usage: test_cfg_fuzz.sh NP COUNT SEED
#   NP 1: one process with the plugin; NP 2: half the mutants on both ranks,
#   half on the last rank only (the ranks must agree or refuse by name).
. "$(dirname "$0")/lib.sh"
np=$1 count=$2 seed=$3
D=$WORK/data
make_data "$D" --classes 3 --per-class 4
mkdir -p "$WORK/base"
for c in tiny plain residual layers rnn; do
  sed 's/^max_batches=.*/max_batches=1/' "$S/cfg/tests/$c.cfg" > "$WORK/base/$c.cfg"
done
python3 "$S/tests/cfg_fuzz.py" "$WORK/m" "$count" "$seed" "$WORK"/base/*.cfg > "$WORK/mutants"

# Seconds a mutant may take (most take a tenth alone, two under mpirun); a
# slower one is a hang unless stock Darknet is as slow.
LIMIT=$((np == 1 ? 4 : 20))
# run_dn CFG...: sets rc and out; memory capped so a huge mutant fails, not the machine.
run_plugin() { # run_plugin CFG [BASE_FOR_OTHER_RANKS]
  rc=0
  if [ "$np" = 1 ]; then
    out=$(cd "$D" && ulimit -v 8000000 && timeout -k 2 $LIMIT "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$1" 2>&1) || rc=$?
  elif [ -n "${2:-}" ]; then
    out=$(cd "$D" && ulimit -v 8000000 && timeout -k 2 $LIMIT "${MPIRUN[@]}" -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$2" \
          : -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$1" 2>&1) || rc=$?
  else
    out=$(cd "$D" && ulimit -v 8000000 && timeout -k 2 $LIMIT "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$1" 2>&1) || rc=$?
  fi
}
# Stock Darknet refuses frozen=1 without the plugin (patch 0022) before
# it trains: without those lines it runs the same layers.
run_stock() {
  rc=0
  sed '/^frozen=/d' "$1" > "$WORK/stock.cfg"
  out=$(cd "$D" && ulimit -v 8000000 && timeout -k 2 $LIMIT "$DN" classifier train "$D/data.data" "$WORK/stock.cfg" 2>&1) || rc=$?
}
crashed() { [ "$rc" -ge 128 ] && [ "$rc" != 137 ] || grep -qE "exited on signal|Segmentation fault|core dumped|Floating point exception" <<< "$out"; }
hung() { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }

accepted=0 refused=0 darknet_own=0 k=0
while IFS=$'\t' read -r cfg base what <&3; do
  k=$((k + 1))
  name=$(basename "$cfg")
  odd=""
  [ "$np" = 2 ] && [ $((k % 2)) = 0 ] && odd=$WORK/base/$base
  if [ "$np" = 2 ]; then
    # What stock Darknet cannot run alone (a crash, a huge input) costs a
    # launcher's time and says nothing about the ranks: skipped.
    run_stock "$cfg"
    if hung || crashed; then darknet_own=$((darknet_own + 1)); continue; fi
  fi
  run_plugin "$cfg" $odd
  prc=$rc pout=$out
  if hung || crashed; then
    run_stock "$cfg"
    if [ "$prc" = 124 ] || [ "$prc" = 137 ]; then
      if hung; then darknet_own=$((darknet_own + 1)); continue; fi
      fail "$name ($base: $what): hangs with the plugin (exit $prc), stock Darknet ends (exit $rc)"
    else
      if crashed; then darknet_own=$((darknet_own + 1)); continue; fi
      fail "$name ($base: $what): crashes with the plugin (exit $prc: $(grep -E "signal|fault|fsdp" <<< "$pout" | head -2)), not in stock Darknet"
    fi
    continue
  fi
  if [ "$prc" = 0 ]; then accepted=$((accepted + 1)); continue; fi
  refused=$((refused + 1))
  grep -qF -e "$name" -e "$base" <<< "$pout" && continue
  # Not named: fine only where stock Darknet refuses it too (its own
  # messages, e.g. "Config file error line 10", name no file).
  run_stock "$cfg"
  [ "$rc" != 0 ] && continue
  fail "$name ($base: $what): refused without naming the file, stock Darknet trains it: $(grep "^fsdp: " <<< "$pout" | head -2)"
done 3< "$WORK/mutants"   # fd 3: mpirun reads stdin
check "$k mutants: $accepted trained, $refused refused, $darknet_own crashed or timed out in stock Darknet too; both paths taken" \
  [ "$accepted" -gt 0 -a "$refused" -gt 0 ]
finish
