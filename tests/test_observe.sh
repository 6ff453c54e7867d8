#!/usr/bin/env bash
# test_observe.sh PART: seeing inside a run (docs/observe.md).
#   hang       one rank of 4 stopped (SIGSTOP) while training: the summary
#              line names it, the collective, group and step it was last
#              in, and the collective the others wait in; every rank's ring
#              (-fsdp-stats FILE.ring.R) is there and whole; a run that
#              ends well leaves no ring
#   straggler  4 ranks: no rank named over the first 3 windows; then rank 3
#              bound to core 1 with a CPU hog of the highest priority, and
#              rank 3 is named, with its host, within two windows of the
#              hog's start, and no other rank
#   trace      -fsdp-trace of 2 simulated machines x 2 ranks (tests/hosts.sh):
#              tests/check_trace.py (the Trace Event Format, a rank and a
#              track on every event, tracks that nest or follow, every
#              rank's steps, hosts, clock error, rank 0's collective
#              bytes equal to the stats file's, and with
#              -fsdp-checkpoint-every each rank's snapshots and writes);
#              -fsdp-trace-steps 3-4 holds those steps alone; with -fsdp-log-events the
#              log's line at each window's end carries each rank's compute
#              seconds, and the stats
#              file their sums
. "$(dirname "$0")/lib.sh"
part=$1
D=$WORK/data

# long_cfg OUT: tiny.cfg with a step count no test reaches.
long_cfg() { sed "s/^max_batches=.*/max_batches=100000/" "$S/cfg/tests/tiny.cfg" > "$1"; }

# ring_pid FILE: the process a ring belongs to (its header).
ring_pid() { awk 'NR == 1 { for (i = 1; i < NF; ++i) if ($i == "pid") print $(i + 1); exit }' "$1"; }

case $part in
hang)
  make_data "$D" --classes 3 --per-class 8
  long_cfg "$WORK/long.cfg"
  stats=$WORK/run.json
  (cd "$D" && exec "${MPIRUN[@]}" -np 4 "$DN" -plugin "$PLUGIN" classifier train data.data "$WORK/long.cfg" \
     -fsdp-stats "$stats" -fsdp-timeout 10 > "$WORK/hang.log" 2> "$WORK/hang.err") &
  job=$!
  # Once rank 3 has trained a few steps: its ring has entries of step 3.
  for _ in $(seq 600); do
    grep -q "training step 4" "$stats.ring.3" 2>/dev/null && break
    sleep 0.1
  done
  pid=$(ring_pid "$stats.ring.3")
  kill -STOP "$pid"
  rc=0
  timeout 120 tail --pid="$job" -f /dev/null || rc=$?
  wait "$job" || true
  kill -CONT "$pid" 2>/dev/null || true
  kill -9 "$pid" 2>/dev/null || true
  check "the job ended within 120 s of rank 3's stop" [ "$rc" = 0 ]
  line=$(grep "^fsdp: hang: " "$WORK/hang.err" || true)
  echo "$line"
  check "one summary line" [ "$(grep -c "^fsdp: hang: " "$WORK/hang.err")" = 1 ]
  check "it names rank 3 first, with its host and no sign of life" \
    grep -qE "^fsdp: hang: rank 3 \\(host [^)]+\\) is .* with no sign of life for [0-9]+ s" <<< "$line"
  # Rank 3's last collective and the others', as their rings hold them.
  last3=$(grep -v '^fsdp-ring' "$stats.ring.3" | grep '|' | sort -n | tail -n 1)
  what3=$(cut -d'|' -f2 <<< "$last3" | sed 's/ *$//'); where3=$(cut -d'|' -f7 <<< "$last3" | sed 's/ *$//')
  last0=$(grep -v '^fsdp-ring' "$stats.ring.0" | grep '|' | sort -n | tail -n 1)
  check "rank 0's last collective is open (it waits)" grep -q '| *- *|open' <<< "$last0"
  check "rank 3's collective, group and step are named: $what3 $where3" grep -qF "rank 3 (host" <<< "$line"
  check "... as its ring has them" grep -qF "$what3 $where3" <<< "$line"
  # Ranks 0-2 may be in different collectives (one may have left a sum that
  # rank 3 had sent its part of): each where its own ring says.
  check "ranks 0-2 each wait where their rings say" python3 - "$line" "$stats" <<'PY'
import re, sys
line, stats = sys.argv[1], sys.argv[2]
said = {}
for part in line.split("; ")[1:]:
    m = re.match(r"ranks? ([0-9 and-]+) waits? in (.*) since [0-9]+ s", part)
    if not m:
        continue
    for piece in m.group(1).split(" and "):
        lo, _, hi = piece.partition("-")
        for r in range(int(lo), int(hi or lo) + 1):
            said[r] = m.group(2)
ok = True
for r in range(3):
    rows = [l.split("|") for l in open("%s.ring.%d" % (stats, r)) if "|" in l and l.strip()]
    last = max(rows, key=lambda f: int(f[0]))
    want = "%s %s" % (last[1].strip(), last[6].strip())
    print("rank %d: ring %r, summary %r" % (r, want, said.get(r)))
    ok &= said.get(r, "").startswith(want)
sys.exit(0 if ok else 1)
PY
  check "the step is named" grep -qE "training step [0-9]+" <<< "$where3"
  check "the summary is also in $stats.hang" grep -qF "$line" "$stats.hang"
  for r in 0 1 2 3; do
    check "rank $r's ring: $(stat -c %s "$stats.ring.$r") bytes, at most 64 KB" [ "$(stat -c %s "$stats.ring.$r")" -le 65536 ]
  done
  # A run that ends well removes its rings.
  sed "s/^max_batches=.*/max_batches=3/" "$S/cfg/tests/tiny.cfg" > "$WORK/short.cfg"
  train_np "$WORK/ok.w" 4 "$D/data.data" "$WORK/short.cfg" -fsdp-stats "$WORK/ok.json"
  check "a run that ended well leaves no ring" [ -z "$(ls "$WORK"/ok.json.ring.* 2>/dev/null)" ]
  ;;
straggler)
  [ "$(nproc)" -ge 2 ] || { echo "skipped: needs 2 cores"; exit 77; }
  [ "$(id -u)" = 0 ] || { echo "skipped: the hog's priority needs root"; exit 77; }
  make_data "$D" --classes 3 --per-class 8
  # tiny.cfg made heavier: steps of tens of milliseconds of compute, far
  # above the scheduler's slices.
  sed "s/^max_batches=.*/max_batches=100000/; s/^batch=.*/batch=32/; s/^width=.*/width=48/; s/^height=.*/height=48/;
       s/^filters=[67]$/filters=32/" "$S/cfg/tests/tiny.cfg" > "$WORK/long.cfg"
  w=5
  (cd "$D" && exec "${MPIRUN[@]}" -np 4 "$DN" -plugin "$PLUGIN" classifier train data.data \
     "$WORK/long.cfg" -fsdp-log "$WORK/log.json" -fsdp-log-events -fsdp-straggler-window $w \
     -fsdp-stats "$WORK/s.json" > "$WORK/s.log" 2> "$WORK/s.err") &
  job=$!
  hog=
  stop_all() { [ -z "$hog" ] || kill "$hog" 2>/dev/null || true; kill "$job" 2>/dev/null || true; }
  trap 'stop_all; rm -rf "$WORK"' EXIT
  last_step() { tail -n 1 "$WORK/log.json" 2>/dev/null | sed -n 's/^{"step": \([0-9]*\),.*/\1/p'; }
  # wait_step N: until the log has step N, or rank 3 is named.
  wait_step() {
    for _ in $(seq 2400); do
      [ "$(last_step)" -ge "$1" ] 2>/dev/null && return 0
      grep -q "^fsdp: straggler: rank 3 " "$WORK/s.err" && return 0
      sleep 0.1
    done
    return 1
  }
  check "3 windows without the hog ran" wait_step $((3 * w))
  check "no rank named over them" [ -z "$(grep "^fsdp: straggler: " "$WORK/s.err")" ]
  grep "^fsdp: straggler: " "$WORK/s.err" || true
  s0=$(last_step)
  # Rank 3 (every thread of it; its ring names its process) bound to core 1,
  # and the hog: always busy, bound to that core, 20 steps of niceness
  # above the ranks (about 90 times their weight).  The scheduler balances
  # the cores' load by weight, so a hog of the ranks' own priority would
  # only push the machine's other work onto the other core and slow every
  # rank alike; this one leaves rank 3 about 1% of its core, while the
  # others share what the machine has.
  taskset -a -p -c 1 "$(ring_pid "$WORK/s.json.ring.3")" > /dev/null
  taskset -c 1 nice -n -20 sh -c 'while :; do :; done' &
  hog=$!
  # Named at the end of the second whole window after the hog started, at the latest.
  bound=$(( (s0 / w + 2) * w ))
  wait_step $((bound + 1)) || true
  stop_all
  wait "$job" 2>/dev/null || true
  line=$(grep "^fsdp: straggler: rank 3 " "$WORK/s.err" | head -n 1 || true)
  echo "hog from step $s0: $line"
  check "rank 3 is named, with its host and how much slower" \
    grep -qE "^fsdp: straggler: rank 3 \\(host [^)]+\\) computes [0-9.]+x the median of the ranks .* over steps [0-9]+-[0-9]+, slow since step [0-9]+" <<< "$line"
  to=$(sed -n 's/.* over steps [0-9]*-\([0-9]*\),.*/\1/p' <<< "$line")
  check "within two windows of the hog's start (step $s0): by step ${to:-none} <= $bound" [ -n "$to" ] && [ "$to" -le "$bound" ]
  check "no other rank is named" [ -z "$(grep "^fsdp: straggler: " "$WORK/s.err" | grep -v "^fsdp: straggler: rank 3 ")" ]
  grep -o '"step": [0-9]*\|"compute_s": [^}]*' "$WORK/log.json" | grep -A1 compute_steps | tail -n 8 || true
  ;;
trace)
  . "$S/tests/twohosts.sh"
  twohosts_up observe
  make_data "$D" --classes 3 --per-class 16
  sed "s/^max_batches=.*/max_batches=6/" "$S/cfg/tests/tiny.cfg" > "$WORK/six.cfg"
  (cd "$D" && on_a "${TH_MPIRUN[@]}" -np 4 --map-by node "$DN" -plugin "$PLUGIN" classifier train data.data \
     "$WORK/six.cfg" -fsdp-trace "$WORK/trace.json" -fsdp-stats "$WORK/stats.json" -fsdp-log "$WORK/log.json" \
     -fsdp-log-events -fsdp-straggler-window 3 -fsdp-checkpoint-every 0.001 > "$WORK/trace.log" 2> "$WORK/trace.err") \
    || { echo "mpirun failed:"; tail -n 30 "$WORK/trace.err"; exit 1; }
  check "rank 0 says where the trace is" grep -q "^fsdp: trace of steps 1-6 on 4 ranks written to $WORK/trace.json" \
    "$WORK/trace.err"
  if python3 "$S/tests/check_trace.py" "$WORK/trace.json" --world 4 --steps 6 --stats "$WORK/stats.json" --checkpoints \
       --hosts fsdp-host-0,fsdp-host-1,fsdp-host-0,fsdp-host-1 > "$WORK/check.out"; then
    pass "tests/check_trace.py"
  else
    fail "tests/check_trace.py"
  fi
  cat "$WORK/check.out"
  check "the lines of steps 3 and 6 carry 4 ranks' compute seconds of 3 steps" python3 - "$WORK/log.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
carry = [l["step"] for l in lines if "compute_s" in l]
ok = carry == [3, 6] and all(len(l["compute_s"]) == 4 and all(len(r) == 3 and min(r) > 0 for r in l["compute_s"])
                             for l in lines if "compute_s" in l)
sys.exit(0 if ok else 1)
PY
  check "the stats file's compute seconds are the lines' sums" python3 - "$WORK/log.json" "$WORK/stats.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
stats = json.load(open(sys.argv[2]))
sums = [sum(sum(l["compute_s"][r]) for l in lines if "compute_s" in l) for r in range(4)]
ok = stats["compute_steps"] == 6 and all(abs(a - b) < 1e-5 for a, b in zip(sums, stats["compute_s"]))
sys.exit(0 if ok else 1)
PY
  # A window inside the run: written when its last step has run, and only its steps.
  (cd "$D" && on_a "${TH_MPIRUN[@]}" -np 4 --map-by node "$DN" -plugin "$PLUGIN" classifier train data.data \
     "$WORK/six.cfg" -fsdp-trace "$WORK/window.json" -fsdp-trace-steps 3-4 > "$WORK/window.log" 2> "$WORK/window.err") \
    || { echo "mpirun failed:"; tail -n 30 "$WORK/window.err"; exit 1; }
  check "-fsdp-trace-steps 3-4: written after step 4" grep -q "^fsdp: trace of steps 3-4 on 4 ranks written to" \
    "$WORK/window.err"
  check "... with steps 3 and 4 alone, every rank's" python3 - "$WORK/window.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") in ("X", "C")]
sys.exit(0 if all({e["args"]["step"] for e in ev if e["pid"] == r} == {3, 4} for r in range(4)) else 1)
PY
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
finish
