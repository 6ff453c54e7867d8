#!/usr/bin/env bash
# Chaos on two simulated machines (tests/twohosts.sh), one rank each: a
# seeded 200-step run with -fsdp-checkpoint-every and -fsdp-resume auto,
# the same command each try, and FAILURES faults at random steps (seeded by
# SEED), in turn: a rank killed (SIGKILL), all of machine b's processes
# killed, the link cut (then mended for the next try).  After each: every
# process on both machines gone within -fsdp-timeout + 15 s, and no
# checkpoint half-written (every MANIFEST names whole files).  The last try
# runs to the end: its weights byte-identical to the run never interrupted
# on the same machines.  Prints each fault's figures: time to every process
# gone, from the relaunch to its first step, and steps lost.
# usage: test_chaos.sh [FAILURES] [SEED]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohosts.sh"
failures=${1:-10} seed=${2:-1}
twohosts_up chaos
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
# -fsdp-timeout above Open MPI's keepalive (11 s, tools/mpirun-flags.txt):
# a cut link is then mpirun's to notice, as docs/machines.md advises.
steps=200 timeout_s=15
sed -e "s/^batch=.*/batch=4/; s/^max_batches=.*/max_batches=$steps/" "$S/cfg/tests/tiny.cfg" > "$WORK/chaos.cfg"
F=$D/backup/chaos.fsdp
LOG=$WORK/steps.jsonl
cmd=("${TH_MPIRUN[@]}" -np 2 --map-by node "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/chaos.cfg"
     -seed 3 -fsdp-timeout "$timeout_s" -fsdp-checkpoint-every 0.002 -fsdp-resume auto -fsdp-log "$LOG")

straight() {
  (cd "$D" && on_a timeout 300 "${TH_MPIRUN[@]}" -np 2 --map-by node "$DN" -plugin "$PLUGIN" classifier train \
     "$D/data.data" "$WORK/chaos.cfg" -seed 3 > "$WORK/straight.log" 2>&1) && cp "$D/backup/chaos.weights" "$WORK/straight.w"
}
straight || { fail "the run never interrupted ran: $(tail -n 5 "$WORK/straight.log")"; finish; exit 1; }
rm -rf "$D/backup" && mkdir -p "$D/backup"

last_step() { [ -e "$LOG" ] && tail -n 1 "$LOG" | sed -n 's/^{"step": \([0-9]*\),.*/\1/p' || true; }
darknet_on() {
  local p
  for p in $(ip netns pids "$1"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = darknet ] && { echo "$p"; return; }; done
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# lost I SINCE: the steps try I finished after step SINCE (what the next
# try, resumed at SINCE, does again), and their seconds.
lost() {
  python3 -c "import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = [x['seconds'] for x in s if x['step'] > int(sys.argv[2])]
print('%d steps, %.2f s (a step: at most %.3f s)' % (len(t), sum(t), max(x['seconds'] for x in s) if s else 0))" "$WORK/steps$1.jsonl" "$2"
}

# Fault steps: FAILURES distinct random steps in [10, steps - 20), rising.
mapfile -t at < <(python3 -c "import random; random.seed($seed); print('\n'.join(map(str, sorted(random.sample(range(10, $steps - 20), $failures)))))")
kinds=(rank machine link)
for ((i = 0; i < failures; i++)); do
  kind=${kinds[$((i % 3))]}
  rm -f "$LOG"
  t_launch=$(now_ms)
  (cd "$D" && on_a timeout -k 5 300 "${cmd[@]}" > "$WORK/try$i.log" 2>&1) &
  mp=$!
  t_first=""
  while kill -0 "$mp" 2> /dev/null; do
    s=$(last_step)
    [ -n "$s" ] && [ -z "$t_first" ] && t_first=$(now_ms)
    [ -n "$s" ] && [ "$s" -ge "${at[$i]}" ] && break
    sleep 0.02
  done
  if ! kill -0 "$mp" 2> /dev/null; then
    fail "try $i ended before step ${at[$i]}: $(tail -n 3 "$WORK/try$i.log")"
    continue
  fi
  at_fault=$(last_step) t0=$(now_ms) why=""
  case $kind in
    rank) kill -9 "$(darknet_on "$TH_B")" ;;
    machine) for p in $(ip netns pids "$TH_B"); do kill -9 "$p" 2> /dev/null || true; done ;;
    link) ip -n "$TH_B" link set "$TH_DEV" down ;;
  esac
  # Every process of the job gone; with the link cut, machine a's (b's
  # learn of it only once the link is back, and are then gone too).
  gone=""
  while [ $(( $(now_ms) - t0 )) -le $(( (timeout_s + 15) * 1000 )) ]; do
    left=$(ip netns pids "$TH_A")
    [ "$kind" = link ] || left+=$(ip netns pids "$TH_B")
    [ -z "$left" ] && { gone=$(( $(now_ms) - t0 )); break; }
    sleep 0.1
  done
  [ -n "$gone" ] || for p in $(ip netns pids "$TH_A"); do kill -9 "$p" 2> /dev/null || true; done
  wait "$mp" 2> /dev/null || true
  hit=$(last_step)   # the last step it finished (the log is flushed each step)
  cp "$LOG" "$WORK/steps$i.jsonl" 2> /dev/null || : > "$WORK/steps$i.jsonl"
  if [ "$kind" = link ]; then
    ip -n "$TH_B" link set "$TH_DEV" up
    for _ in $(seq 300); do [ -z "$(ip netns pids "$TH_B")" ] && break; sleep 0.1; done
    [ -z "$(ip netns pids "$TH_B")" ] || why="machine b's processes left 30 s after the link came back"
    for p in $(ip netns pids "$TH_B"); do kill -9 "$p" 2> /dev/null || true; done
  fi
  resumed=$(grep -o "resumed at step [0-9]*" "$WORK/try$i.log" | grep -o "[0-9]*$" || echo 0)
  why=${why:-}
  [ -n "$gone" ] || why="processes left after $((timeout_s + 15)) s"
  bad=$(manifests_whole "$F") || why="$why; half-written: $bad"
  if [ -z "$why" ]; then
    pass "fault $((i + 1)) ($kind at step $at_fault, its last step $hit; this try resumed at step $resumed): every process gone in $gone ms, the relaunch's first step $(( t_first - t_launch )) ms after it started, every MANIFEST whole"
  else
    fail "fault $((i + 1)) ($kind at step $at_fault): $why"
    for p in $(ip netns pids "$TH_A") $(ip netns pids "$TH_B"); do kill -9 "$p" 2> /dev/null || true; done
  fi
  [ "$i" -gt 0 ] && echo "     lost to fault $i: $(lost $((i - 1)) "$resumed")"
done
rm -f "$LOG"
(cd "$D" && on_a timeout -k 5 300 "${cmd[@]}" > "$WORK/last.log" 2>&1) || fail "the last try ran: $(tail -n 3 "$WORK/last.log")"
resumed=$(grep -o "resumed at step [0-9]*" "$WORK/last.log" | grep -o "[0-9]*$" || echo 0)
echo "     lost to fault $failures: $(lost $((failures - 1)) "$resumed") (interval 0.12 s)"
check "after $failures faults, the last try (from step $resumed) ends byte-identical to the run never interrupted" \
  cmp "$WORK/straight.w" "$D/backup/chaos.weights"
check "no checkpoint half-written at the end" manifests_whole "$F"
finish
