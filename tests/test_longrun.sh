#!/usr/bin/env bash
# Long runs on one machine (docs/DESIGN.md, "Checkpoints on the clock"):
# usage: test_longrun.sh PART
#   clock       2 ranks, -fsdp-checkpoint-every: the weights byte-identical
#               to a run without it; at most -fsdp-checkpoint-keep complete
#               checkpoints left, each MANIFEST naming files of its sizes; a
#               run stopped early and continued with -fsdp-resume auto (the
#               same command) byte-identical to the run never stopped; with
#               no checkpoint, auto starts as the command line says
#   detector    the same for detector train (cfg/tests/yolov3-tiny.cfg, batch
#               norm's rolling statistics carried): 20 steps with a clock,
#               then -fsdp-resume auto to 40, byte-identical to 40 in one go
#   killed      the writer stopped mid-file (every rank killed while a slow
#               disk, FSDP_CHECKPOINT_SLOW_MS, holds it): that checkpoint
#               has no MANIFEST, the next try skips it, saying so, resumes
#               the complete one before it, and ends byte-identical
#   half        a checkpoint of 4 ranks resumed on 2 with -fsdp-keep-batch
#               (subdivisions doubled), stopped again and resumed on 2 by the
#               same command (its checkpoints say the batch it kept): equal
#               to the 4-rank run never stopped to float tolerance; on 3
#               ranks refused by its numbers
#   refusals    the flags' bad values and companions, by message and exit;
#               tools/relaunch: tries again until the command succeeds, up
#               to -n, and exits with the last try's status
. "$(dirname "$0")/lib.sh"
part=$1
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
# mk OUT STEPS BATCH: cfg/tests/residual.cfg for STEPS steps of BATCH per rank.
mk() { sed -e "s/^batch=.*/batch=$3/; s/^max_batches=.*/max_batches=$2/" "$S/cfg/tests/residual.cfg" > "$1"; }
mkdir -p "$WORK/a" "$WORK/b"
F=$D/backup/residual.fsdp

# run NP CFG OUT [flags...]: NP ranks train CFG, as the same command each
# time; the final weights to OUT (when it ends well); exit status returned.
run() {
  local np=$1 cfg=$2 out=$3 rc=0; shift 3
  (cd "$D" && rm -f backup/residual*.weights && timeout -k 5 120 "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" \
    classifier train "$D/data.data" "$cfg" -seed 3 "$@" > "$out.log" 2> "$out.err") || rc=$?
  [ "$rc" = 0 ] && cp "$D/backup/residual.weights" "$out"
  return "$rc"
}

complete_count() { ls "$F"/step-*/MANIFEST 2> /dev/null | wc -l; }

case $part in
clock)
  mk "$WORK/a/residual.cfg" 400 4
  mk "$WORK/b/residual.cfg" 150 4
  run 2 "$WORK/a/residual.cfg" "$WORK/straight.w" || fail "2 ranks, 400 steps, ran"
  run 2 "$WORK/a/residual.cfg" "$WORK/clock.w" -fsdp-checkpoint-every 0.001 -fsdp-checkpoint-keep 2 ||
    fail "with -fsdp-checkpoint-every ran: $(tail -n 3 "$WORK/clock.w.err")"
  made=$(grep -c "complete: 2 files" "$WORK/clock.w.err" || true)
  check "checkpoints every 0.06 s: $made made, byte-identical weights to the run without them" \
    [ "$made" -ge 3 ] && cmp "$WORK/straight.w" "$WORK/clock.w"
  check "-fsdp-checkpoint-keep 2: $(complete_count) complete ones left, no other folder" \
    [ "$(complete_count)" = 2 -a "$(ls "$F" | wc -l)" = 2 ]
  check "every MANIFEST names files of its sizes" manifests_whole "$F"
  rm -rf "$F"
  run 2 "$WORK/b/residual.cfg" "$WORK/first.w" -fsdp-checkpoint-every 0.001 || fail "150 steps ran"
  newest=$(ls -d "$F"/step-* | tail -n 1)
  check "the first 150 steps left a complete checkpoint ($(basename "$newest"))" [ -e "$newest/MANIFEST" ]
  run 2 "$WORK/a/residual.cfg" "$WORK/resumed.w" -fsdp-checkpoint-every 0.001 -fsdp-resume auto ||
    fail "the same command with -fsdp-resume auto ran: $(tail -n 3 "$WORK/resumed.w.err")"
  check "-fsdp-resume auto names what it resumed: $(grep -o "resuming from [^ ]*" "$WORK/resumed.w.err")" \
    grep -q "resuming from $newest (step" "$WORK/resumed.w.err"
  check "resumed from it, the weights byte-identical to 400 steps never stopped" cmp "$WORK/straight.w" "$WORK/resumed.w"
  rm -rf "$F"
  run 2 "$WORK/a/residual.cfg" "$WORK/fresh.w" -fsdp-resume auto || fail "auto with no checkpoint ran"
  check "auto with no checkpoint: said, and trained as the command line says (byte-identical)" \
    grep -q "no complete checkpoint in $F; starting as the command line says" "$WORK/fresh.w.err" &&
    cmp "$WORK/straight.w" "$WORK/fresh.w"
  ;;

detector)
  "$S/tools/make-detdata" "$WORK/det" --images 16 --size 96 > /dev/null
  for n in 20 40; do sed -e "s/^max_batches *=.*/max_batches=$n/" "$S/cfg/tests/yolov3-tiny.cfg" > "$WORK/y$n.cfg"; done
  det() { # det STEPS OUT [flags...]: 2 ranks, the cfg always named y.cfg (its checkpoints' NAME)
    local n=$1 out=$2; shift 2
    cp "$WORK/y$n.cfg" "$WORK/y.cfg"
    (cd "$WORK/det" && timeout -k 5 120 "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" detector train data.data \
       "$WORK/y.cfg" -seed 2 "$@" > "$out.log" 2> "$out.err") && cp "$WORK/det/backup/y_final.weights" "$out"
  }
  det 40 "$WORK/straight.w" || fail "detector train, 40 steps, ran"
  rm -rf "$WORK/det/backup"/*
  det 20 "$WORK/first.w" -fsdp-checkpoint-every 0.001 || fail "20 steps with -fsdp-checkpoint-every ran"
  det 40 "$WORK/resumed.w" -fsdp-checkpoint-every 0.001 -fsdp-resume auto ||
    fail "-fsdp-resume auto ran: $(tail -n 3 "$WORK/resumed.w.err")"
  at=$(grep -o "resumed at step [0-9]*" "$WORK/resumed.w.err" || true)
  check "detector train: $at of 40, the weights byte-identical to 40 steps never stopped" \
    [ -n "$at" ] && cmp "$WORK/straight.w" "$WORK/resumed.w"
  ;;

killed)
  mk "$WORK/a/residual.cfg" 600 4
  run 2 "$WORK/a/residual.cfg" "$WORK/straight.w" || fail "600 steps ran"
  rm -rf "$F"
  # A slow disk: each file takes 2 s past its first 4 KiB.
  (cd "$D" && rm -f backup/residual*.weights && FSDP_CHECKPOINT_SLOW_MS=2000 timeout -k 5 120 "${MPIRUN[@]}" -np 2 \
     -x FSDP_CHECKPOINT_SLOW_MS "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/a/residual.cfg" -seed 3 \
     -fsdp-checkpoint-every 0.001 > "$WORK/k.log" 2> "$WORK/k.err") &
  mp=$!
  for _ in $(seq 600); do [ "$(complete_count)" -ge 1 ] && ls "$F"/step-*/*.tmp > /dev/null 2>&1 &&
    [ "$(ls -d "$F"/step-* | wc -l)" -ge 2 ] && break; sleep 0.05; done
  pkill -9 -f "$DN -plugin $PLUGIN classifier train $D/data.data $WORK/a/residual.cfg" || true
  wait "$mp" || true
  half=$(ls -d "$F"/step-* | tail -n 1)
  check "killed mid-file: $(basename "$half") holds $(ls "$half" | tr '\n' ' ')and no MANIFEST" \
    [ ! -e "$half/MANIFEST" ] && ls "$half"/*.tmp > /dev/null 2>&1
  check "the complete one before it checks out" manifests_whole "$F"
  run 2 "$WORK/a/residual.cfg" "$WORK/resumed.w" -fsdp-checkpoint-every 0.001 -fsdp-resume auto ||
    fail "the next try ran: $(tail -n 3 "$WORK/resumed.w.err")"
  check "the next try skipped it, saying why" grep -q "skipped $half: no MANIFEST: half-written" "$WORK/resumed.w.err"
  check "and resumed the one before: byte-identical to 600 steps never stopped" cmp "$WORK/straight.w" "$WORK/resumed.w"
  check "the half-written one is gone once a newer one is complete" [ ! -e "$half" ]
  ;;

half)
  mk "$WORK/a/residual.cfg" 200 2
  mk "$WORK/b/residual.cfg" 80 2
  run 4 "$WORK/a/residual.cfg" "$WORK/straight.w" || fail "4 ranks, 200 steps ran"
  run 4 "$WORK/b/residual.cfg" "$WORK/first.w" -fsdp-checkpoint-every 0.001 || fail "4 ranks, 80 steps ran"
  mkdir -p "$WORK/c"
  mk "$WORK/c/residual.cfg" 140 2
  run 2 "$WORK/c/residual.cfg" "$WORK/part.w" -fsdp-resume auto -fsdp-keep-batch -fsdp-checkpoint-every 0.001 ||
    fail "resumed on 2 ranks: $(tail -n 3 "$WORK/part.w.err")"
  check "on 2 ranks the global batch of 4 x 2 is kept: subdivisions 1 -> 2" \
    grep -q "kept on 2 ranks: subdivisions 1 -> 2" "$WORK/part.w.err"
  run 2 "$WORK/a/residual.cfg" "$WORK/half.w" -fsdp-resume auto -fsdp-keep-batch -fsdp-checkpoint-every 0.001 ||
    fail "resumed on 2 ranks again: $(tail -n 3 "$WORK/half.w.err")"
  check "resumed on 2 again, from the 2 ranks' checkpoint: still subdivisions 2 ($(grep -o "subdivisions [0-9]* -> [0-9]*" "$WORK/half.w.err"))" \
    grep -q "resuming from .*written on 2 ranks" "$WORK/half.w.err" && grep -q "kept on 2 ranks: subdivisions 1 -> 2" "$WORK/half.w.err"
  check "resumed on half the ranks: equal to 4 ranks never stopped ($("$WDIFF" "$WORK/straight.w" "$WORK/half.w" --tol 1e-5 | tail -n 1))" \
    "$WDIFF" "$WORK/straight.w" "$WORK/half.w" --tol 1e-5
  rc=0
  run 3 "$WORK/a/residual.cfg" "$WORK/three.w" -fsdp-resume auto -fsdp-keep-batch || rc=$?
  check "on 3 ranks refused by its numbers (exit $rc)" \
    [ "$rc" != 0 -a "$rc" != 124 ] && grep -q "needs 8 / 6 subdivisions, which is not whole" "$WORK/three.w.err"
  ;;

refusals)
  mk "$WORK/a/residual.cfg" 20 4
  for bad in "-fsdp-checkpoint-every 0|-fsdp-checkpoint-every 0: expected minutes" \
             "-fsdp-checkpoint-every soon|-fsdp-checkpoint-every soon: expected minutes" \
             "-fsdp-checkpoint-every 1 -fsdp-checkpoint-keep 0|-fsdp-checkpoint-keep 0: expected a whole number" \
             "-fsdp-checkpoint-keep 3|-fsdp-checkpoint-keep 3: it says how many checkpoints of -fsdp-checkpoint-every" \
             "-fsdp-keep-batch|-fsdp-keep-batch: it keeps a resumed checkpoint's global batch"; do
    flags=${bad%%|*} want=${bad#*|} rc=0
    # shellcheck disable=SC2086 # the flags split into words
    run 2 "$WORK/a/residual.cfg" "$WORK/bad.w" $flags || rc=$?
    check "$flags: refused ('$want'), exit $rc, no weights" \
      [ "$rc" != 0 -a "$rc" != 124 ] && grep -q -- "$want" "$WORK/bad.w.err" && [ -z "$(ls "$D/backup" 2> /dev/null | grep weights)" ]
  done
  # A command that fails twice, then succeeds: its tries counted in a file.
  printf '#!/bin/sh\nn=$(cat "$1" 2>/dev/null || echo 0); echo $((n + 1)) > "$1"; [ "$n" -ge 2 ]\n' > "$WORK/flaky"
  rc=0
  "$S/tools/relaunch" -n 5 -w 0 -- sh "$WORK/flaky" "$WORK/count" 2> "$WORK/relaunch.err" || rc=$?
  check "tools/relaunch: a command that fails twice succeeds on try 3 (exit $rc, $(cat "$WORK/count") tries)" \
    [ "$rc" = 0 -a "$(cat "$WORK/count")" = 3 ] && grep -q "try 3 of 5, 0 s after exit 1" "$WORK/relaunch.err"
  rm -f "$WORK/count"
  rc=0
  "$S/tools/relaunch" -n 2 -w 0 -- sh -c 'exit 7' 2> "$WORK/relaunch.err" || rc=$?
  check "tools/relaunch -n 2: a command that always fails, tried twice, exits with its status ($rc)" \
    [ "$rc" = 7 ] && grep -q "2 tries, the last exited 7" "$WORK/relaunch.err"
  ;;
esac
finish
