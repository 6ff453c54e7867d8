#!/usr/bin/env bash
# Two machines (tests/twohosts.sh: two network namespaces joined by a veth
# link, TCP only), one part per run:
# usage: test_machines.sh PART
#   equiv       4 ranks placed round-robin (--map-by node: ranks 0,2 | 1,3)
#               equal stock Darknet with the 4-times batch for shard=full,
#               grad_op and none, and the plugin's world of one for a frozen
#               nested trunk; the stats' bytes_to_other_hosts equal the
#               theory (hierarchical: each part to one peer per other
#               machine); none byte-identical to 4 ranks on one machine,
#               full and grad_op (sums machine by machine) equal to it within
#               1e-5 and byte-identical from run to run;
#               machine b given another cfg is refused by name;
#               then 2 ranks with the link limited to 20 Mbit/s (tc tbf):
#               the weights file of the fast link, byte for byte
#   sync_bn     synchronized batch norm (resnet18) on 2 ranks, one per machine
#   cut         the link cut during training, then all of machine b's
#               processes killed: every process on both machines gone within
#               -fsdp-timeout + 15 s, mpirun non-zero, the message, no file
#               half-written
#   kill_stop   a remote rank killed (SIGKILL), then a remote rank stopped
#               (SIGSTOP): the same; rank 0's note on keepalive where the
#               timeout is shorter than it, none where it is longer
#   checkpoint  a checkpoint written on two machines resumed on one, and the
#               reverse: bit for bit the run never interrupted
#   hybrid      shard_node_shared=1 on both machines (hybrid sharding), 4
#               ranks round-robin: equal to stock Darknet with the 4-times
#               batch (subdivisions 1 and 2, a frozen nested trunk too); the
#               bytes and bytes_to_other_hosts equal the theory, at most
#               full's (hierarchical) without it; checkpoints move between it and full on
#               one machine; machines of unequal ranks turn it off, said so
#   plan        -fsdp-plan with -fsdp-link probe over a 20 Mbit/s link: the
#               launch's machines, the link's rate, every row as the theory
#               at what it measured; refused by name on one machine, without
#               node memory, without a launcher
#   wire        shard_wire=bf16 / int8 under hybrid sharding and full, 4
#               ranks round-robin: a seeded run repeats byte for byte, is
#               near stock Darknet's and not equal to fp32's; the bytes on
#               the wire (-fsdp-log-events) are the format's share of
#               fp32's; rank 0 says what it costs, once; a checkpoint
#               resumes bit for bit; on one machine it changes nothing
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohosts.sh"
part=$1
twohosts_up "$part"
D=$WORK/data
NOTE="fsdp: the ranks span 2 machines, and mpirun notices a lost machine only after 11 s"
hosts_rr="0,1,0,1"   # --map-by node, 4 ranks

# train_2h OUT NP DATA CFG [darknet args...]: NP ranks over the two machines,
# round-robin; as train_np (tests/lib.sh).
train_2h() {
  local out=$1 np=$2 data=$3 cfg=$4; shift 4
  local base; base=$(basename "$cfg" .cfg)
  (cd "$(dirname "$data")" && rm -f backup/"$base".weights &&
   on_a "${TH_MPIRUN[@]}" -np "$np" --map-by node "$DN" -plugin "$PLUGIN" classifier train "$data" "$cfg" "$@" \
     > "$out.log" 2> "$out.err") \
    || { echo "mpirun -np $np on two machines failed, log:"; tail -n 30 "$out.log" "$out.err"; return 1; }
  cp "$(dirname "$data")/backup/$base.weights" "$out"
}

# residual_cfg OUT STEPS BATCH [KEY...]: cfg/tests/residual.cfg for STEPS
# steps of BATCH per rank, each KEY added to [net].
residual_cfg() {
  local out=$1 steps=$2 batch=$3 k; shift 3
  sed -e "s/^batch=.*/batch=$batch/; s/^max_batches=.*/max_batches=$steps/" "$S/cfg/tests/residual.cfg" > "$out"
  for k in "$@"; do sed -i "s/^\[net\]$/[net]\n$k/" "$out"; done
}

# ---- faults: one launch with a fault put in once training runs ------------
# run_fault WHAT TIMEOUT PATTERN FAULT...: trains long.cfg ($FAULT_CFG, else
# $WORK/long.cfg) on 2 ranks (one per
# machine) with -fsdp-timeout TIMEOUT; after the first save runs FAULT; then
# every process on both machines must be gone within TIMEOUT + 15 s of it,
# mpirun non-zero, its output matching PATTERN, and every weights and
# checkpoint file in the backup folder whole (as large as the first save's;
# a FILE.tmp an interrupted save leaves is not one, and the next save
# removes it).
run_fault() {
  local what=$1 to=$2 pat=$3; shift 3
  local bound=$((to + 15)) why="" rc=0 t0 gone
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  (cd "$D" && on_a timeout -k 5 $((bound + 60)) "${TH_MPIRUN[@]}" -np 2 --map-by node "$DN" -plugin "$PLUGIN" \
     classifier train "$D/data.data" "${FAULT_CFG:-$WORK/long.cfg}" -fsdp-timeout "$to" -fsdp-checkpoint > "$WORK/fault.log" 2>&1) &
  local mp=$!
  for _ in $(seq 300); do [ -e "$D/backup/long_1.weights.fsdp-1-of-2" ] && break; sleep 0.1; done
  t0=$(date +%s%N)
  "$@"
  gone=""
  while [ $(( ($(date +%s%N) - t0) / 1000000000 )) -le "$bound" ]; do
    [ -z "$(ip netns pids "$TH_A")$(ip netns pids "$TH_B")" ] && { gone=$(( ($(date +%s%N) - t0) / 1000000 )); break; }
    sleep 0.2
  done
  wait "$mp" || rc=$?
  [ -n "$gone" ] || why="processes left after $bound s: $(ip netns pids "$TH_A") | $(ip netns pids "$TH_B")"
  [ "$rc" != 0 ] || why="$why; mpirun exit 0"
  grep -qE -- "$pat" "$WORK/fault.log" || why="$why; no message matching '$pat'"
  local f first
  for f in "$D"/backup/*; do
    case $f in
      *.tmp) continue ;;
      *.weights) first=$D/backup/long_1.weights ;;
      *.weights.fsdp-[01]-of-2) first=$D/backup/long_1.weights.${f##*.weights.} ;;
      *) why="$why; $(basename "$f") left"; continue ;;
    esac
    [ "$(stat -c %s "$f")" = "$(stat -c %s "$first")" ] || why="$why; $(basename "$f") half-written"
  done
  if [ -z "$why" ]; then pass "$what: every process on both machines gone $gone ms after it (exit $rc)"
  else fail "$what: $why; output: $(grep -vE "^Loaded|avg, " "$WORK/fault.log" | tail -12)"; fi
  twohosts_down && twohosts_up "$part"   # the next fault on a fresh pair of machines
}

# darknet_on NS: the pid of a darknet rank in namespace NS.
darknet_on() {
  local p
  for p in $(ip netns pids "$1"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = darknet ] && { echo "$p"; return; }; done
}
cut_link() { ip -n "$TH_B" link set "$TH_DEV" down; }
kill_machine_b() { local p; for p in $(ip netns pids "$TH_B"); do kill -9 "$p" 2>/dev/null || true; done; }
kill_remote_rank() { kill -9 "$(darknet_on "$TH_B")"; }
stop_remote_rank() { kill -STOP "$(darknet_on "$TH_B")"; }

case $part in
equiv)
  make_data "$D" --classes 3 --per-class 16
  np=4 b=4
  steps=$(sed -n 's/^max_batches=//p' "$S/cfg/tests/tiny.cfg")
  train "$WORK/ref.w" "$D/data.data" "$(test_cfg tiny $((b * np)))" -seed 5
  for strategy in full grad_op none; do
    cfg=$(test_cfg tiny $b shard=$strategy)
    cp "$cfg" "$WORK/tiny.cfg"
    train_2h "$WORK/$strategy.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5 -fsdp-stats "$WORK/$strategy.json" ||
      { fail "shard=$strategy on two machines ran"; continue; }
    check "two machines, 4 ranks round-robin, shard=$strategy: weights equal one process with batch $((b * np))" \
      "$WDIFF" "$WORK/ref.w" "$WORK/$strategy.w" --tol 1e-4
    check "shard=$strategy: the stats' bytes, bytes_to_other_hosts included, equal the theory" \
      python3 "$S/tests/check_stats.py" "$WORK/$strategy.json" --world $np --strategy $strategy --steps "$steps" \
        --hosts "$hosts_rr" "(root)=2453,0,1,0" "body=475,0,1,0"
    check_not "shard=$strategy, default -fsdp-timeout: no note on keepalive" grep -q "mpirun notices a lost machine" "$WORK/$strategy.w.err"
    # The same ranks on one machine.  Gathers and all-reduces move or add
    # the same floats in the same order (none: byte-identical); reduce-
    # scatters between machines sum each machine's terms first, then the
    # machines' sums (docs/DESIGN.md, "Backends"): equal to float tolerance,
    # and the same bytes run after run.
    if train_np "$WORK/$strategy-one.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5; then
      if [ "$strategy" = none ]; then
        check "shard=$strategy: byte-identical to the 4 ranks on one machine" cmp "$WORK/$strategy.w" "$WORK/$strategy-one.w"
      else
        check "shard=$strategy: equal to the 4 ranks on one machine ($("$WDIFF" "$WORK/$strategy-one.w" "$WORK/$strategy.w" --tol 1e-5 | head -1))" \
          "$WDIFF" "$WORK/$strategy-one.w" "$WORK/$strategy.w" --tol 1e-5
        if train_2h "$WORK/$strategy-again.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5; then
          check "shard=$strategy on two machines: byte-identical run after run" cmp "$WORK/$strategy.w" "$WORK/$strategy-again.w"
        else
          fail "shard=$strategy on two machines ran again"
        fi
      fi
    else
      fail "shard=$strategy, 4 ranks on one machine ran"
    fi
  done
  # The linear probe: tiny's trunk frozen in two nested groups.
  probe_cfg "$(test_cfg tiny $((b * np)))"
  cp "$WORK/tiny-$((b * np)).cfg" "$WORK/tiny.cfg"
  train "$WORK/probe-ref.w" "$D/data.data" "$WORK/tiny.cfg" -plugin "$PLUGIN" -seed 5
  probe_cfg "$(test_cfg tiny $b)"
  cp "$WORK/tiny-$b.cfg" "$WORK/tiny.cfg"
  if train_2h "$WORK/probe.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5; then
    check "two machines, a frozen nested trunk: weights equal world 1 with batch $((b * np))" \
      "$WDIFF" "$WORK/probe-ref.w" "$WORK/probe.w" --tol 1e-4
  else
    fail "a frozen nested trunk on two machines ran"
  fi
  # A machine given another cfg: refused by name on both, before the first step.
  sed 's/^learning_rate=.*/learning_rate=0.1/' "$WORK/tiny.cfg" > "$WORK/lr.cfg"
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  rc=0
  (cd "$D" && on_a timeout 60 "${TH_MPIRUN[@]}" \
     -np 1 --host "$TH_ADDR_A" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/tiny.cfg" : \
     -np 1 --host "$TH_ADDR_B" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/lr.cfg" \
     > "$WORK/odd.log" 2>&1) || rc=$?
  said=$(grep -c "lr.cfg:$(grep -n -m1 '^learning_rate=0.1$' "$WORK/lr.cfg" | cut -d: -f1): learning_rate=0.1: the ranks were given different networks" "$WORK/odd.log" || true)
  check "machine b given another cfg: refused by name ($said lines), exit $rc, no weights written" \
    [ "$rc" != 0 -a "$rc" != 124 -a "$said" -ge 1 -a -z "$(ls "$D/backup")" ]
  # A slow link: the same floats, later (2 ranks: start-up's warm-up
  # collectives, plugin/engine/fsdp_memplan.c, grow with the world).
  test_cfg tiny $((b * 2)) shard=full > /dev/null
  cp "$WORK/tiny-$((b * 2)).cfg" "$WORK/tiny.cfg"
  train_2h "$WORK/fast2.w" 2 "$D/data.data" "$WORK/tiny.cfg" -seed 5 || fail "shard=full on 2 ranks ran"
  hosts_limit 0 20; hosts_limit 1 20
  t0=$(date +%s%N)
  if train_2h "$WORK/slow.w" 2 "$D/data.data" "$WORK/tiny.cfg" -seed 5; then
    check "a 20 Mbit/s link (tc tbf, $(( ($(date +%s%N) - t0) / 1000000 )) ms): weights byte-identical to the fast link's" \
      cmp "$WORK/fast2.w" "$WORK/slow.w"
  else
    fail "shard=full over a 20 Mbit/s link ran"
  fi
  ;;

sync_bn)
  make_data "$D" --classes 3 --per-class 16 --size 32
  # cfg/tests/resnet18-bn.cfg: 11004227 trainable parameters, 3904 batch-norm channels.
  steps=3
  sed -e "s/^batch=.*/batch=8/" "$S/cfg/tests/resnet18-bn.cfg" > "$WORK/resnet18-bn.cfg"
  train "$WORK/ref.w" "$D/data.data" "$WORK/resnet18-bn.cfg" -seed 5
  # One root group, which the byte theory below describes (without the key
  # the plugin would choose groups: docs/cfg-keys.md).
  sed -e "s/^batch=.*/batch=4/" -e 's/^\[net\]$/[net]\nshard_auto_group=0/' "$S/cfg/tests/resnet18-bn.cfg" > "$WORK/resnet18-bn.cfg"
  if train_2h "$WORK/bn.w" 2 "$D/data.data" "$WORK/resnet18-bn.cfg" -seed 5 -fsdp-stats "$WORK/bn.json"; then
    check "two machines, synchronized batch norm: weights and rolling statistics equal stock Darknet with batch 8" \
      "$WDIFF" "$WORK/ref.w" "$WORK/bn.w" --tol 1e-4
    check "the two machines' rolling statistics bit-identical" python3 -c \
      'import json, sys; r = json.load(open(sys.argv[1]))["bn_rolling"]; sys.exit(0 if r["checks"] >= 1 and r["differ"] == 0 else 1)' "$WORK/bn.json"
    check "bytes, batch norm's and bytes_to_other_hosts included, equal the theory" \
      python3 "$S/tests/check_stats.py" "$WORK/bn.json" --world 2 --strategy full --steps $steps \
        --hosts 0,1 --bn "(root)=3904" "(root)=11004227,0,1,0"
  else
    fail "synchronized batch norm on two machines ran"
  fi
  ;;

cut|kill_stop)
  make_data "$D" --classes 3 --per-class 8
  sed "s/^max_batches=.*/max_batches=100000/" "$S/cfg/tests/tiny.cfg" > "$WORK/long.cfg"
  if [ "$part" = cut ]; then
    # The keepalive (11 s, tools/mpirun-flags.txt) must notice before the
    # ranks' own timeout ends them: -fsdp-timeout 15.
    run_fault "the link cut" 15 "ORTE has lost communication with a remote daemon" cut_link
    check_not "-fsdp-timeout 15 above the keepalive's 11 s: no note" grep -q "$NOTE" "$WORK/fault.log"
    # Which of Open MPI's messages comes depends on what mpirun sees first:
    # the daemon's connection closing, the peer's hang-up, or its launcher's
    # exit (the remote shell that started the daemon dies with it).
    run_fault "machine b's processes all killed" 15 \
      "lost communication with a remote daemon|Peer host: +$TH_ADDR_B|ORTE was unable to reliably start one or more daemons|An ORTE daemon has unexpectedly failed" \
      kill_machine_b
  else
    run_fault "a remote rank killed" 5 "process rank 1 with PID [0-9]+ on node $TH_ADDR_B exited on signal 9" kill_remote_rank
    check "-fsdp-timeout 5 below the keepalive's 11 s: rank 0's note names the flags, once" \
      [ "$(grep -c "$NOTE.*--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2" "$WORK/fault.log")" = 1 ]
    run_fault "a remote rank stopped" 15 "rank 0: .* made no progress for [0-9]+ s \(-fsdp-timeout 15\)" stop_remote_rank
    # Under hybrid sharding (node memory on each machine, one rank each) the
    # ranks wait in the exchanges between peers, which the watchdog times too.
    mkdir -p "$WORK/hybrid"
    sed 's/^\[net\]$/[net]\nshard_node_shared=1/' "$WORK/long.cfg" > "$WORK/hybrid/long.cfg"
    FAULT_CFG=$WORK/hybrid/long.cfg run_fault "hybrid sharding, a remote rank stopped" 15 \
      "rank 0: .* made no progress for [0-9]+ s \(-fsdp-timeout 15\)" stop_remote_rank
  fi
  ;;

checkpoint)
  # As tests/test_checkpoint.sh: 3 steps, save, resume for 3 more, against 6
  # in one go; 2 ranks (a sum of two floats is the same in either order).
  make_data "$D" --classes 3 --per-class 16
  mkdir -p "$WORK/a" "$WORK/b"
  residual_cfg "$WORK/a/residual.cfg" 6 4
  residual_cfg "$WORK/b/residual.cfg" 3 4
  train_np "$WORK/straight.w" 2 "$D/data.data" "$WORK/a/residual.cfg" -seed 3
  for way in "two machines:one" "one:two machines"; do
    from=${way%%:*} to=${way#*:}
    rm -rf "$WORK/ck"; mkdir -p "$WORK/ck"
    if [ "$from" = one ]; then train_np "$WORK/first.w" 2 "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint
    else train_2h "$WORK/first.w" 2 "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint; fi
    cp "$D"/backup/residual.weights* "$WORK/ck/"
    check "written on $from: a checkpoint file per rank" [ "$(ls "$WORK/ck" | grep -c "residual.weights.fsdp-[01]-of-2$")" = 2 ]
    if [ "$to" = one ]; then train_np "$WORK/resumed.w" 2 "$D/data.data" "$WORK/a/residual.cfg" -seed 3 -fsdp-resume "$WORK/ck/residual.weights"
    else train_2h "$WORK/resumed.w" 2 "$D/data.data" "$WORK/a/residual.cfg" -seed 3 -fsdp-resume "$WORK/ck/residual.weights"; fi
    check "3 steps on $from + resumed on $to for 3: the 6 steps in one go, bit for bit" \
      "$WDIFF" "$WORK/straight.w" "$WORK/resumed.w" --exact
  done
  ;;
hybrid)
  # The backend first: node memory on each machine, and the exchanges
  # between peers, every float checked (tests/test_collectives.c); machines
  # of 2 and 1 rank get no node memory.
  for np in 4 3; do
    if on_a "${TH_MPIRUN[@]}" -np $np --map-by node "$B/tests/test_collectives" > "$WORK/coll$np.log" 2>&1; then
      pass "test_collectives on $np ranks over two machines: $(grep -c "checks" "$WORK/coll$np.log") suites passed"
    else
      fail "test_collectives on $np ranks over two machines: $(grep FAIL "$WORK/coll$np.log" | head -5)"
    fi
  done
  # (test_collectives itself fails where node memory is offered and should
  # not be, or the reverse.)
  check "4 ranks: node memory and peer exchanges checked" grep -q "peer_all_to_all, peer_all_gather" "$WORK/coll4.log"
  make_data "$D" --classes 3 --per-class 16
  np=4 b=4
  steps=$(sed -n 's/^max_batches=//p' "$S/cfg/tests/tiny.cfg")
  groups=("(root)=2453,0,1,0" "body=475,0,1,0")
  train "$WORK/ref.w" "$D/data.data" "$(test_cfg tiny $((b * np)))" -seed 5
  cp "$(test_cfg tiny $b shard=full)" "$WORK/tiny.cfg"
  train_2h "$WORK/full.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5 -fsdp-stats "$WORK/full.json" ||
    fail "shard=full on two machines ran"
  check "shard=full on two machines without the key: rank 0 points to shard_node_shared=1, once" \
    [ "$(grep -c "fsdp: the 4 ranks run on 2 machines of 2: shard_node_shared=1 would keep the parameters once per machine" "$WORK/full.w.err")" = 1 ]
  # subdivisions=2: each micro-batch as large as above, two per step (the
  # reference too).
  mkdir -p "$WORK/ref2"
  sed "s/^subdivisions=.*/subdivisions=2/; s/^batch=.*/batch=$((b * np * 2))/" "$S/cfg/tests/tiny.cfg" > "$WORK/ref2/tiny.cfg"
  train "$WORK/ref2.w" "$D/data.data" "$WORK/ref2/tiny.cfg" -seed 5
  for sd in 1 2; do
    cp "$(test_cfg tiny $b shard=full shard_node_shared=1)" "$WORK/tiny.cfg"
    [ $sd = 1 ] || sed -i "s/^subdivisions=.*/subdivisions=2/; s/^batch=.*/batch=$((b * 2))/" "$WORK/tiny.cfg"
    ref=$WORK/ref.w; [ $sd = 1 ] || ref=$WORK/ref2.w
    if train_2h "$WORK/hybrid$sd.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5 -fsdp-stats "$WORK/hybrid$sd.json"; then
      check "hybrid sharding, 4 ranks round-robin, subdivisions=$sd: weights equal one process with $sd micro-batches of $((b * np))" \
        "$WDIFF" "$ref" "$WORK/hybrid$sd.w" --tol 1e-4
      check "hybrid, subdivisions=$sd: bytes, node memory and bytes_to_other_hosts equal the theory" \
        python3 "$S/tests/check_stats.py" "$WORK/hybrid$sd.json" --world $np --strategy full --steps "$steps" \
          --subdivisions $sd --node-shared 1 --hosts "$hosts_rr" "${groups[@]}"
      check_not "hybrid, subdivisions=$sd: no note that the key is off" grep -q "shard_node_shared=1 is off" "$WORK/hybrid$sd.w.err"
    else
      fail "hybrid sharding, subdivisions=$sd, on two machines ran"
    fi
  done
  # The root above and below a group: the root's gradient accumulates
  # through the group's backward, and each still reduces through the slot.
  cp "$(test_cfg tiny $b shard_node_shared=1)" "$WORK/tiny.cfg"
  sed -i '0,/^shard_group=body$/{/^shard_group=body$/d}' "$WORK/tiny.cfg"
  if train_2h "$WORK/around.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5 -fsdp-stats "$WORK/around.json"; then
    check "hybrid, the root above and below a group: weights equal one process with batch $((b * np))" \
      "$WDIFF" "$WORK/ref.w" "$WORK/around.w" --tol 1e-4
    check "hybrid, the root above and below a group: bytes and bytes_to_other_hosts equal the theory" \
      python3 "$S/tests/check_stats.py" "$WORK/around.json" --world $np --strategy full --steps "$steps" \
        --node-shared 1 --hosts "$hosts_rr" "(root)=2544,0,1,0" "body=384,0,1,0"
  else
    fail "hybrid sharding with the root above and below a group ran"
  fi
  # What crosses between the machines: at most full's, whose exchanges are
  # hierarchical too (each part to one peer per other machine); hybrid
  # gathers from node memory, not across (per rank, per the stats' count of
  # what each rank sends to the other machine).
  most=$(python3 -c 'import json, sys
f, h = (json.load(open(p))["bytes_to_other_hosts"] for p in sys.argv[1:])
print("%d %d" % (max(h), min(f)), "ok" if all(x <= y for x, y in zip(h, f)) else "over")' "$WORK/full.json" "$WORK/hybrid1.json")
  check "hybrid: bytes to the other machine per rank at most full's ($most)" [ "${most##* }" = ok ]
  # The linear probe under hybrid sharding: the frozen trunk is never sent after start-up.
  probe_cfg "$(test_cfg tiny $((b * np)))"
  cp "$WORK/tiny-$((b * np)).cfg" "$WORK/tiny.cfg"
  train "$WORK/probe-ref.w" "$D/data.data" "$WORK/tiny.cfg" -plugin "$PLUGIN" -seed 5
  probe_cfg "$(test_cfg tiny $b shard_node_shared=1)"
  cp "$WORK/tiny-$b.cfg" "$WORK/tiny.cfg"
  if train_2h "$WORK/probe.w" $np "$D/data.data" "$WORK/tiny.cfg" -seed 5 -fsdp-stats "$WORK/probe.json"; then
    check "hybrid, a frozen nested trunk: weights equal world 1 with batch $((b * np))" \
      "$WDIFF" "$WORK/probe-ref.w" "$WORK/probe.w" --tol 1e-4
    check "hybrid, a frozen nested trunk: bytes equal the theory" \
      python3 "$S/tests/check_stats.py" "$WORK/probe.json" --world $np --strategy full --steps "$steps" \
        --node-shared 1 --hosts "$hosts_rr" "(root)=2453,0,1,0" "trunk.a=0,91,0,0" "trunk.b=0,384,0,0"
  else
    fail "hybrid sharding with a frozen nested trunk ran"
  fi
  # Machines of unequal ranks (2 + 1): off, said so, and the run goes on.
  cp "$(test_cfg tiny $b shard_node_shared=1)" "$WORK/tiny.cfg"
  if train_2h "$WORK/odd.w" 3 "$D/data.data" "$WORK/tiny.cfg" -seed 5; then
    check "3 ranks on machines of 2 and 1: rank 0 says shard_node_shared=1 is off, and why" \
      grep -q "fsdp: shard_node_shared=1 is off: the ranks share no memory (FSDP_SHM=0, or machines running different numbers of ranks)" "$WORK/odd.w.err"
  else
    fail "3 ranks on machines of 2 and 1 with shard_node_shared=1 ran"
  fi
  # Checkpoints: 3 steps under hybrid sharding, resumed for 3 more under it
  # (bit for bit the 6 in one go) and under full on one machine (the same
  # weights as stock Darknet's 6 steps, to float tolerance), and the reverse.
  mkdir -p "$WORK/a" "$WORK/b" "$WORK/c" "$WORK/d" "$WORK/s"
  residual_cfg "$WORK/a/residual.cfg" 6 $b shard_node_shared=1
  residual_cfg "$WORK/b/residual.cfg" 3 $b shard_node_shared=1
  residual_cfg "$WORK/c/residual.cfg" 6 $b
  residual_cfg "$WORK/d/residual.cfg" 3 $b
  residual_cfg "$WORK/s/residual.cfg" 6 $((b * np))
  train "$WORK/stock6.w" "$D/data.data" "$WORK/s/residual.cfg" -seed 3
  train_2h "$WORK/straight.w" $np "$D/data.data" "$WORK/a/residual.cfg" -seed 3 || fail "hybrid, 6 steps, ran"
  check "hybrid, residual.cfg: 6 steps equal stock Darknet's with batch $((b * np))" \
    "$WDIFF" "$WORK/stock6.w" "$WORK/straight.w" --tol 1e-4
  for way in "hybrid:hybrid" "hybrid:full on one machine" "full on one machine:hybrid"; do
    from=${way%%:*} to=${way#*:}
    rm -rf "$WORK/ck"; mkdir -p "$WORK/ck"
    if [ "$from" = hybrid ]; then train_2h "$WORK/first.w" $np "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint
    else train_np "$WORK/first.w" $np "$D/data.data" "$WORK/d/residual.cfg" -seed 3 -fsdp-checkpoint; fi
    cp "$D"/backup/residual.weights* "$WORK/ck/"
    if [ "$to" = hybrid ]; then train_2h "$WORK/resumed.w" $np "$D/data.data" "$WORK/a/residual.cfg" -seed 3 -fsdp-resume "$WORK/ck/residual.weights"
    else train_np "$WORK/resumed.w" $np "$D/data.data" "$WORK/c/residual.cfg" -seed 3 -fsdp-resume "$WORK/ck/residual.weights"; fi
    if [ "$way" = "hybrid:hybrid" ]; then
      check "3 steps under hybrid sharding + resumed under it for 3: the 6 in one go, bit for bit" \
        "$WDIFF" "$WORK/straight.w" "$WORK/resumed.w" --exact
    else
      check "3 steps under $from + resumed under $to for 3: stock Darknet's 6 steps" \
        "$WDIFF" "$WORK/stock6.w" "$WORK/resumed.w" --tol 1e-4
    fi
  done
  ;;
wire)
  make_data "$D" --classes 3 --per-class 16
  np=4 b=4
  mkdir -p "$WORK/s" "$WORK/w"
  residual_cfg "$WORK/s/residual.cfg" 6 $((b * np))
  train "$WORK/stock6.w" "$D/data.data" "$WORK/s/residual.cfg" -seed 3
  # wire_check FP32_LOG LOG WIRE: event by event (steps 2-6), the bytes
  # sent to the other machine are the fp32 run's in WIRE's format: int8 a
  # byte a float and a 4-byte scale a block of 256, bf16 2 bytes.
  wire_check() {
    python3 -c 'import json, sys
def events(path):
    return [e for l in open(path) for e in json.loads(l)["events"] if json.loads(l)["step"] > 1 and e[4]]
a, b, w = events(sys.argv[1]), events(sys.argv[2]), sys.argv[3]
coded = lambda n: 2 * n if w == "bf16" else n + 4 * -(-n // 256)
ok = len(a) == len(b) and all(x[0] == y[0] and y[4] == coded(x[4] // 4) and y[5] == coded(x[5] // 4) for x, y in zip(a, b))
print("%d events, %d bytes against fp32 %d" % (len(b), sum(y[4] for y in b), sum(x[4] for x in a)))
sys.exit(not ok)' "$@"
  }
  for mode in hybrid full; do
    node=1; [ $mode = full ] && node=0
    residual_cfg "$WORK/w/residual.cfg" 6 $b shard=full shard_node_shared=$node
    train_2h "$WORK/$mode-fp32.w" $np "$D/data.data" "$WORK/w/residual.cfg" -seed 3 \
      -fsdp-log "$WORK/$mode-fp32.log.json" -fsdp-log-events || fail "$mode fp32 ran"
    for wire in bf16 int8; do
      residual_cfg "$WORK/w/residual.cfg" 6 $b shard=full shard_node_shared=$node shard_wire=$wire
      for run in 1 2; do
        train_2h "$WORK/$mode-$wire-$run.w" $np "$D/data.data" "$WORK/w/residual.cfg" -seed 3 \
          -fsdp-log "$WORK/$mode-$wire.log.json" -fsdp-log-events || fail "$mode $wire ran"
      done
      check "$mode, shard_wire=$wire: a seeded run repeats byte for byte" \
        "$WDIFF" "$WORK/$mode-$wire-1.w" "$WORK/$mode-$wire-2.w" --exact
      # The measured differences: 1.4e-3 (bf16) and 3.8e-3 (int8).
      tol=5e-3; [ $wire = int8 ] && tol=1e-2
      check "$mode, shard_wire=$wire: within $tol of stock Darknet's 4-times batch" \
        "$WDIFF" "$WORK/stock6.w" "$WORK/$mode-$wire-1.w" --tol $tol
      check_not "$mode, shard_wire=$wire: not fp32's weights (the wire is encoded)" \
        "$WDIFF" "$WORK/$mode-fp32.w" "$WORK/$mode-$wire-1.w" --exact
      check "$mode, shard_wire=$wire: rank 0 says once what it costs" \
        [ "$(grep -c "fsdp: shard_wire=$wire: parameters and gradient sums cross between machines as $wire" "$WORK/$mode-$wire-1.w.err")" = 1 ]
      check "$mode, shard_wire=$wire: each exchange's bytes to the other machine are fp32's in $wire" \
        wire_check "$WORK/$mode-fp32.log.json" "$WORK/$mode-$wire.log.json" $wire
    done
  done
  # A checkpoint under int8 hybrid sharding resumes bit for bit: the other
  # machines' copies are the encoded masters, as in the run never stopped.
  mkdir -p "$WORK/a" "$WORK/b" "$WORK/ck"
  residual_cfg "$WORK/a/residual.cfg" 6 $b shard_node_shared=1 shard_wire=int8
  residual_cfg "$WORK/b/residual.cfg" 3 $b shard_node_shared=1 shard_wire=int8
  train_2h "$WORK/first.w" $np "$D/data.data" "$WORK/b/residual.cfg" -seed 3 -fsdp-checkpoint || fail "int8, 3 steps ran"
  cp "$D"/backup/residual.weights* "$WORK/ck/"
  train_2h "$WORK/resumed.w" $np "$D/data.data" "$WORK/a/residual.cfg" -seed 3 -fsdp-resume "$WORK/ck/residual.weights" ||
    fail "int8, resumed ran"
  check "hybrid, shard_wire=int8: 3 steps + resumed for 3, the 6 in one go, bit for bit" \
    "$WDIFF" "$WORK/hybrid-int8-1.w" "$WORK/resumed.w" --exact
  # One machine: nothing crosses a link, and nothing changes.
  residual_cfg "$WORK/w/residual.cfg" 6 $b shard_wire=int8
  train_np "$WORK/one.w" 2 "$D/data.data" "$WORK/w/residual.cfg" -seed 3 || fail "int8 on one machine ran"
  residual_cfg "$WORK/w/residual.cfg" 6 $b
  train_np "$WORK/one-fp32.w" 2 "$D/data.data" "$WORK/w/residual.cfg" -seed 3 || fail "fp32 on one machine ran"
  check "one machine, shard_wire=int8: the fp32 weights, byte for byte" "$WDIFF" "$WORK/one-fp32.w" "$WORK/one.w" --exact
  check "one machine, shard_wire=int8: rank 0 says it changes nothing" \
    grep -q "fsdp: shard_wire=int8 changes nothing here: every rank runs on one machine" "$WORK/one.w.err"
  ;;
plan)
  # -fsdp-plan with the link measured between the ranks it runs on, the
  # link limited to 20 Mbit/s each way: the machines and ranks are the
  # launch's, the rate the link's (its headers counted as the plan counts
  # them), and every row follows the theory at the measured rate and
  # latency (tests/test_plan_link.sh's check, given them).
  cfg=$S/cfg/bench/link.cfg
  hosts_limit 0 20; hosts_limit 1 20
  on_a "${TH_MPIRUN[@]}" -np 4 --map-by node "$DN" -plugin "$PLUGIN" -fsdp-plan 4 "$cfg" -fsdp-link probe \
    > "$WORK/probe.md" 2> "$WORK/probe.err" || fail "-fsdp-link probe on two machines ran (exit $?)"
  hosts_limit 0 0; hosts_limit 1 0
  read -r m l mbit ms <<< "$(sed -n 's/^A step on \([0-9]*\) machines of \([0-9]*\) ranks, \([0-9.e+]*\) Mbit\/s each way, \([0-9.e+-]*\) ms latency: the link as measured.*/\1 \2 \3 \4/p' "$WORK/probe.md")"
  check "-fsdp-link probe: 2 machines of 2 ranks, $mbit Mbit/s (the link: 20), $ms ms, once, from rank 0" \
    awk -v m="$m" -v l="$l" -v r="$mbit" -v n="$(grep -c '^A step on' "$WORK/probe.md")" \
      'BEGIN { exit !(m == 2 && l == 2 && r >= 17 && r <= 22 && n == 1) }'
  check "-fsdp-link probe: the memory tables once" [ "$(grep -c '^Fastest' "$WORK/probe.md")" = 1 ]
  check "-fsdp-link probe: every row follows the theory at the measured link" \
    bash "$S/tests/test_plan_link.sh" --check "$WORK/probe.md" "2x2,$mbit,$ms"
  # The link without a limit: the blocks grow to their largest (8 MB a
  # peer) and the rate is above the limited one.
  on_a "${TH_MPIRUN[@]}" -np 4 --map-by node "$DN" -plugin "$PLUGIN" -fsdp-plan 4 "$cfg" -fsdp-link probe \
    > "$WORK/fast.md" 2> "$WORK/fast.err" || fail "-fsdp-link probe on the unlimited link ran"
  fast=$(sed -n 's/^A step on 2 machines of 2 ranks, \([0-9.]*\) Mbit\/s each way, .*(blocks of \([0-9.]*\) MB to each peer).*/\1 \2/p' "$WORK/fast.md")
  check "-fsdp-link probe, the link without a limit: ${fast% *} Mbit/s in blocks of ${fast#* } MB" \
    awk -v r="${fast% *}" -v b="${fast#* }" 'BEGIN { exit !(r > 40 && b == 8.4) }'
  # Refused, by name, on every rank: all ranks on one machine, no node
  # memory, no launcher.
  refused_probe() { # WHAT PATTERN RANKS LAUNCH...: LAUNCH darknet, bounded by a timeout
    local what=$1 pattern=$2 n=$3 rc=0; shift 3
    "$@" "$DN" -plugin "$PLUGIN" -fsdp-plan 4 "$cfg" -fsdp-link probe > "$WORK/r.out" 2> "$WORK/r.err" || rc=$?
    check "$what: refused ($(grep -cF -- "$pattern" "$WORK/r.err") of $n ranks say why), exit $rc" \
      bash -c "[ $rc != 0 -a $rc != 124 ] && [ \$(grep -cF -- '$pattern' '$WORK/r.err') = $n ]"
  }
  refused_probe "-fsdp-link probe, 2 ranks on one machine" "the 2 ranks are all on one machine, so there is no link" \
    2 timeout 120 "${MPIRUN[@]}" -np 2
  refused_probe "-fsdp-link probe, FSDP_SHM=0" "the 4 ranks have no node memory to exchange between machines from" \
    4 on_a timeout 120 "${TH_MPIRUN[@]}" -x FSDP_SHM=0 -np 4 --map-by node
  refused_probe "-fsdp-link probe without a launcher" "-fsdp-link probe: it measures the link between the ranks it runs on" \
    1 timeout 120
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
finish
