#!/usr/bin/env bash
# Faults: whatever fails on any rank stops every rank within seconds, with a
# non-zero exit, a message naming the cause, and no file that was already
# written changed or left half-written.
# usage: test_faults.sh NP PART
#   startup     one rank refuses its weights file, flags or cfg
#   agree       the ranks were given different flags, cfgs or weights files
#   save        rank 0's save fails (missing folder, failed rename, full or
#               read-only filesystem), a rank's checkpoint write fails,
#               Darknet's own errors on one rank during the run
#   checkpoint  a killed rank and resume from the last complete save (bit for
#               bit), *.tmp leftovers removed, corrupt or foreign shard files
#   watchdog    a rank stopped with SIGSTOP: -fsdp-timeout stops the others;
#               mpirun given SIGINT or SIGTERM: rank 0 says what is on disk;
#               a rank crashes (SIGSEGV)
. "$(dirname "$0")/lib.sh"
np=$1 part=$2
D=$WORK/data
make_data "$D" --classes 3 --per-class 8
BOUND=45   # seconds any failing run may take, start-up included, on 2 loaded cores
base=$S/cfg/tests/tiny.cfg
last=$((np - 1))

# Each rank writes its pid before it becomes darknet, so that the test can
# tell every rank has ended.
RANK=$WORK/rank.sh
cat > "$RANK" <<EOF
#!/bin/sh
echo \$\$ > "$WORK/pid.\${OMPI_COMM_WORLD_RANK:-0}"
exec "\$@"
EOF
chmod +x "$RANK"
RUN=("$RANK" "$DN" -plugin "$PLUGIN")

# snapshot FOLDER: every file's checksum, to prove nothing was changed.
snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }

# launch [mpirun args]: in the data folder under timeout; sets rc, took, out.
launch() {
  rm -f "$WORK"/pid.*
  local t0; t0=$(date +%s%N)
  rc=0
  out=$(cd "$D" && timeout -k 5 "$BOUND" "${MPIRUN[@]}" "$@" 2>&1) || rc=$?
  took=$(( ($(date +%s%N) - t0) / 1000000 ))
}

# ranks_gone: every rank's process has ended (waits up to 10 s).
ranks_gone() {
  local p i
  for i in $(seq 50); do
    local alive=0
    for p in "$WORK"/pid.*; do [ -e "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.2
  done
  for p in "$WORK"/pid.*; do kill -9 "$(cat "$p")" 2>/dev/null || true; done
  return 1
}

# expect_stop WHAT PATTERN [FOLDER]: the last launch stopped every rank in
# time, non-zero, saying PATTERN; FOLDER (default the backup folder) holds
# the same files as before it, none half-written.
expect_stop() {
  local what=$1 pat=$2 dir=${3:-$D/backup} why=""
  [ "$rc" != 0 ] || why="exit 0"
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || why="hung (killed after $BOUND s)"
  grep -qE -- "$pat" <<< "$out" || why="$why; no message matching '$pat'"
  ranks_gone || why="$why; a rank was still running"
  [ "$(snapshot "$dir")" = "$before" ] || why="$why; files changed: $(diff <(echo "$before") <(snapshot "$dir") | head -3)"
  if [ -z "$why" ]; then pass "$what (exit $rc, ${took} ms)"
  else fail "$what: $why; output: $(grep -E "fsdp|rror|ouldn|annot" <<< "$out" | head -4)"; fi
}

# Backup folder with the files of an earlier run, which nothing may touch.
prime() {
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  cp "$WORK/good.w" "$D/backup/earlier.weights"
  before=$(snapshot "$D/backup")
}

# one_rank GOOD_ARGS -- ODD_ARGS: NP-1 ranks with GOOD_ARGS, the last with ODD_ARGS.
one_rank() {
  local good=() odd=()
  while [ "$1" != -- ]; do good+=("$1"); shift; done
  shift
  odd=("$@")
  launch -np "$last" "${RUN[@]}" "${good[@]}" : -np 1 "${RUN[@]}" "${odd[@]}"
}

train "$WORK/good.w" "$D/data.data" "$base" -seed 2
T=(classifier train "$D/data.data")

case $part in
startup)
  head -c 5000 "$WORK/good.w" > "$WORK/cut.w"
  : > "$WORK/empty.w"
  prime
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base" "$WORK/cut.w"
  expect_stop "one rank's weights file truncated" "cut.w ends inside layer 3"
  grep -q "rank 0: another rank could not use its weights file" <<< "$out" \
    && pass "the other ranks say why they stop" || fail "rank 0 did not say another rank failed"
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base" "$WORK/empty.w"
  expect_stop "one rank's weights file empty" "empty.w: 0 bytes, shorter than a weights file's header"
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base" "$WORK/good.w" -fsdp-resume
  expect_stop "-fsdp-resume on one rank only" "rank 0: -fsdp-resume differs between ranks \(here: not given\)"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$base" -fsdp-checkpoint
  expect_stop "-fsdp-checkpoint on one rank only" "-fsdp-checkpoint differs between ranks"
  one_rank "${T[@]}" "$base" -fsdp-stats "$WORK/s.json" -- "${T[@]}" "$base" -fsdp-stats "$WORK/no/such/s.json"
  expect_stop "-fsdp-stats folder missing on one rank" "-fsdp-stats .*no/such/s.json: cannot write in"
  grep -q "rank 0: another rank refused its command line" <<< "$out" \
    && pass "the others name the refusal" || fail "rank 0 did not say another rank refused"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$base" -fsdp-backend tcp
  expect_stop "a bad -fsdp-backend on one rank" "-fsdp-backend tcp: expected mpi, mpi-staged or nccl"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$base" -fsdp-tiemout 5
  expect_stop "an unknown -fsdp flag on one rank" "unknown flag -fsdp-tiemout: did you mean -fsdp-timeout"
  one_rank -seed 1 "${T[@]}" "$base" -- -seed 2 "${T[@]}" "$base"
  expect_stop "-seed differs between ranks" "-seed differs between ranks \(here: 1\)"
  one_rank "${T[@]}" "$base" -- -seed 2 "${T[@]}" "$base"
  expect_stop "-seed on one rank only" "-seed differs between ranks \(here: not given\)"
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base" "$WORK/good.w" -clear
  expect_stop "-clear on one rank only" "-clear differs between ranks"
  one_rank "${T[@]}" "$base" -fsdp-timeout 30 -- "${T[@]}" "$base" -fsdp-timeout 60
  expect_stop "-fsdp-timeout differs between ranks" "-fsdp-timeout differs between ranks \(here: 30\)"
  # A 20,000-level group name once took 1.7 GB before it was refused.
  c=$WORK/deep.cfg
  sed "0,/^shard_group=body\$/s//shard_group=$(seq -s . 20000 | sed 's/[0-9]*/g&/g')/" "$base" > "$c"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$c"
  expect_stop "a 20,000-level group name on one rank" "deep.cfg:[0-9]+: shard_group=g1.g2.*: 20000 levels; groups nest at most 64 deep"
  # Darknet's own refusals on one rank go through the plugin's abort.
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$WORK/missing.cfg"
  expect_stop "a missing cfg on one rank" "Couldn't open file: .*missing.cfg: No such file or directory"
  one_rank "${T[@]}" "$base" -- classifier train "$WORK/missing.data" "$base"
  expect_stop "a missing data file on one rank" "missing.data: cannot read the data file: No such file or directory"
  # shard_node_shared=1 where the shared-memory directory has no room: refused
  # on every rank before the first step, naming the directory and the sizes
  # (an overfull tmpfs would kill a rank with SIGBUS instead).
  if [ "$(id -u)" = 0 ] && mkdir -p "$WORK/shm" && mount -t tmpfs -o size=8m tmpfs "$WORK/shm" 2>/dev/null; then
    sed 's/^\[net\]$/[net]\nshard_node_shared=1/' "$base" > "$WORK/node.cfg"
    prime
    OMPI_MCA_osc_sm_backing_directory=$WORK/shm launch -np "$np" "${RUN[@]}" "${T[@]}" "$WORK/node.cfg"
    expect_stop "shard_node_shared=1 without room in the shared-memory directory" \
      "shard_node_shared=1: no shared memory for [0-9.]+ MB of node memory: $WORK/shm has [0-9.]+ MB free, and it needs [0-9.]+ MB \(and 64 MB to spare\)"
    umount "$WORK/shm"
  else
    echo "skipped: shard_node_shared=1 without room (need root and mount to make a small tmpfs)"
  fi
  ;;

agree)
  train "$WORK/other.w" "$D/data.data" "$base" -seed 5   # same network, other contents
  prime
  # Every [net] key and a layer's hyperparameters: the differing line, named.
  for kv in learning_rate=0.1 decay=0.005 momentum=0.8 batch=4 subdivisions=2 max_batches=7 policy=poly; do
    k=${kv%%=*}
    c=$WORK/$k.cfg
    sed "s/^$k=.*/$kv/" "$base" > "$c"
    grep -q "^$kv\$" "$c" || sed -i "s/^\[net\]\$/[net]\n$kv/" "$c"
    one_rank "${T[@]}" "$base" -- "${T[@]}" "$c"
    expect_stop "$k differs between ranks" "$k.cfg:$(grep -n -m1 "^$kv\$" "$c" | cut -d: -f1): $kv: the ranks were given different networks"
  done
  c=$WORK/angle.cfg
  sed "s/^\[net\]\$/[net]\nangle=7/" "$base" > "$c"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$c"
  expect_stop "an augmentation key on one rank only" "angle.cfg:$(grep -n -m1 "^angle=7" "$c" | cut -d: -f1): angle=7: the ranks were given different networks"
  c=$WORK/act.cfg
  sed "0,/^activation=leaky\$/s//activation=relu/" "$base" > "$c"
  one_rank "${T[@]}" "$base" -- "${T[@]}" "$c"
  expect_stop "a layer's activation differs" "act.cfg:$(grep -n -m1 "activation=relu" "$c" | cut -d: -f1): activation=relu: the ranks"
  # Another weights file: other contents, same size and seen.
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base" "$WORK/other.w"
  expect_stop "a different weights file on one rank" "the ranks loaded weights files with different contents"
  one_rank "${T[@]}" "$base" "$WORK/good.w" -- "${T[@]}" "$base"
  expect_stop "a weights file on some ranks only" "some ranks loaded a weights file and others none"
  # The data file's train list: the same images in another order on one rank.
  sort -r "$D/train.list" > "$WORK/other.list"
  sed "s|^train=.*|train=$WORK/other.list|" "$D/data.data" > "$WORK/other.data"
  one_rank "${T[@]}" "$base" -- classifier train "$WORK/other.data" "$base"
  expect_stop "another train list on one rank" "the data file, its train list or the -file text differs between ranks"
  ;;

save)
  c=$WORK/tiny.cfg
  sed "s/^max_batches=.*/max_batches=9/" "$base" > "$c"   # 24 images, global batch 8*np: a save per epoch
  data_to() { sed "s|^backup=.*|backup=$1|" "$D/data.data" > "$WORK/to.data"; }
  prime
  data_to "$WORK/no/such/folder"
  launch -np "$np" "${RUN[@]}" classifier train "$WORK/to.data" "$c"
  expect_stop "rank 0 saves into a missing folder" "Couldn't open file: .*folder/tiny_1.weights.tmp: No such file or directory"
  n=$(grep -c "Couldn't open file" <<< "$out" || true)
  check "the cause is printed once ($n)" [ "$n" = 1 ]
  data_to "$D/backup"
  mkdir "$D/backup/tiny_1.weights"
  before=$(snapshot "$D/backup")
  launch -np "$np" "${RUN[@]}" classifier train "$WORK/to.data" "$c"
  expect_stop "rank 0's rename fails (a folder in the way)" "Couldn't write weights file: .*tiny_1.weights: Is a directory"
  check "no tiny_1.weights.tmp left" [ ! -e "$D/backup/tiny_1.weights.tmp" ]
  prime
  mkdir "$D/backup/tiny_1.weights.fsdp-$last-of-$np"
  before=$(snapshot "$D/backup")
  launch -np "$np" "${RUN[@]}" classifier train "$WORK/to.data" "$c" -fsdp-checkpoint
  # rank 0 renamed tiny_1.weights into place before the shards: it is whole
  find "$D/backup" -maxdepth 1 -type f -name "tiny_1.weights*" -delete
  expect_stop "the last rank's checkpoint rename fails" "rank $last: .*|cannot write the checkpoint .*tiny_1.weights.fsdp-$last-of-$np: Is a directory"
  if [ "$(id -u)" = 0 ] && mkdir -p "$WORK/fs" && mount -t tmpfs -o size=16k tmpfs "$WORK/fs" 2>/dev/null; then
    cp "$WORK/good.w" "$WORK/fs/earlier.weights"   # 11.7 kB of 16: the next save cannot fit
    before=$(snapshot "$WORK/fs")
    data_to "$WORK/fs"
    launch -np "$np" "${RUN[@]}" classifier train "$WORK/to.data" "$c"
    expect_stop "rank 0 saves into a full filesystem" "Couldn't write weights file: .*tiny_1.weights: No space left on device" "$WORK/fs"
    check "no half-written file left in the full filesystem" [ -z "$(ls "$WORK/fs" | grep -v '^earlier.weights$')" ]
    mount -o remount,ro "$WORK/fs"
    launch -np "$np" "${RUN[@]}" classifier train "$WORK/to.data" "$c"
    expect_stop "rank 0 saves into a read-only filesystem" "Couldn't open file: .*tiny_1.weights.tmp: Read-only file system" "$WORK/fs"
    umount "$WORK/fs"
  else
    echo "skipped: saves into a full and a read-only filesystem (need root and mount to make a small tmpfs)"
  fi
  # Darknet's own errors on one rank, after the network is built.
  prime
  # The same data file and list on every rank (they must agree), naming a
  # relative path that one rank, started in another folder, finds broken.
  mkdir -p "$WORK/cwd-good/img" "$WORK/cwd-bad/img"
  cp "$(head -n 1 "$D/train.list")" "$WORK/cwd-good/img/alpha_0.png"
  echo "not an image" > "$WORK/cwd-bad/img/alpha_0.png"
  sed "s|^train=.*|train=$WORK/rel.list|" "$D/data.data" > "$WORK/rel.data"
  for i in $(seq 24); do echo "img/alpha_0.png"; done > "$WORK/rel.list"
  launch -np "$last" -wdir "$WORK/cwd-good" "${RUN[@]}" classifier train "$WORK/rel.data" "$c" : \
         -np 1 -wdir "$WORK/cwd-bad" "${RUN[@]}" classifier train "$WORK/rel.data" "$c"
  expect_stop "an image one rank cannot load" "Cannot load image .*alpha_0.png"
  sed "s|^train=.*|train=$WORK/no-list|" "$D/data.data" > "$WORK/nolist.data"
  one_rank "${T[@]}" "$c" -- classifier train "$WORK/nolist.data" "$c"
  expect_stop "a train list missing on one rank" "no-list: cannot read the train list .*nolist.data names: No such file or directory"
  ;;

checkpoint)
  # 24 images, global batch 4*np: a save every 6/np steps.
  c=$WORK/tiny.cfg
  sed "s/^batch=.*/batch=4/; s/^max_batches=.*/max_batches=60/" "$base" > "$c"
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  train_np "$WORK/straight.w" "$np" "$D/data.data" "$c" -seed 4
  # The same run, killed: one rank gets SIGKILL once two epochs are saved.
  slow=$WORK/slow.cfg   # the same network, saved as slow_N.weights
  cp "$c" "$slow"
  # The killed run would go on far beyond 60 steps (constant learning rate:
  # the same steps), so the kill never comes after its end.
  mkdir -p "$WORK/k" && sed "s/^max_batches=.*/max_batches=100000/" "$c" > "$WORK/k/slow.cfg"
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  rm -f "$WORK"/pid.*
  (cd "$D" && timeout -k 5 "$BOUND" "${MPIRUN[@]}" -np "$np" "${RUN[@]}" -seed 4 -fsdp-checkpoint classifier train \
     "$D/data.data" "$WORK/k/slow.cfg" > "$WORK/killed.log" 2>&1) & mp=$!
  complete() { [ -e "$D/backup/slow_$1.weights" ] && [ "$(ls "$D/backup" | grep -c "^slow_$1.weights.fsdp-[0-9]*-of-$np\$")" = "$np" ]; }
  for i in $(seq 200); do complete 2 && break; sleep 0.05; done
  kill -9 "$(cat "$WORK/pid.$last")" 2>/dev/null || true
  rc=0; wait $mp || rc=$?
  check "a killed rank stops the run (exit $rc)" [ "$rc" != 0 -a "$rc" != 124 ]
  check "every rank ended" ranks_gone
  k=0; for e in 1 2 3 4 5 6 7 8; do complete $e && k=$e; done
  check "the run saved a complete checkpoint before it was killed (epoch $k)" [ "$k" -ge 1 ]
  # Leftovers of an interrupted save, removed by the next one; a file of
  # another cfg stays.
  touch "$D/backup/slow_9.weights.tmp" "$D/backup/slow_9.weights.fsdp-0-of-$np.tmp" "$D/backup/slowly.weights.tmp"
  train_np "$WORK/resumed.w" "$np" "$D/data.data" "$slow" -seed 4 -fsdp-checkpoint -fsdp-resume "$D/backup/slow_$k.weights"
  check "resumed from epoch $k after the kill: equal to the run never killed, bit for bit" \
    "$WDIFF" "$WORK/straight.w" "$WORK/resumed.w" --exact
  check "*.tmp leftovers of this cfg removed at the next save" \
    [ ! -e "$D/backup/slow_9.weights.tmp" -a ! -e "$D/backup/slow_9.weights.fsdp-0-of-$np.tmp" ]
  check "another cfg's file left alone" [ -e "$D/backup/slowly.weights.tmp" ]
  # Trust: a flipped low bit, a shard of another run, a replaced weights file.
  w=$D/backup/slow_$k.weights
  cp -r "$D/backup" "$WORK/saved"
  resume() { launch -np "$np" "${RUN[@]}" -seed 4 -fsdp-resume classifier train "$D/data.data" "$slow" "$w"; }
  ck=$w.fsdp-$last-of-$np
  size=$(stat -c %s "$ck")
  python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^1]))" "$ck" $((size - 100))
  before=$(snapshot "$D/backup")
  resume
  expect_stop "a shard file with one flipped bit" "fsdp-$last-of-$np: checksum mismatch: the file is corrupt"
  cp "$WORK/saved/$(basename "$ck")" "$ck"
  # The same training again (same seed: same weights and shards) is another run.
  mkdir -p "$WORK/again" && cp "$c" "$WORK/again/slow.cfg"
  sed "s|^backup=.*|backup=$WORK/again|" "$D/data.data" > "$WORK/again.data"
  (cd "$D" && "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" -seed 4 -fsdp-checkpoint classifier train \
     "$WORK/again.data" "$WORK/again/slow.cfg" > "$WORK/again.log" 2>&1)
  cmp -s "$WORK/again/slow_$k.weights" "$w" && same=1 || same=0
  check "the second run saved the same weights at epoch $k" [ "$same" = 1 ]
  cp "$WORK/again/slow_$k.weights.fsdp-$last-of-$np" "$ck"
  before=$(snapshot "$D/backup")
  resume
  expect_stop "a shard file of another run at the same step" "fsdp-$last-of-$np: the ranks' checkpoint files come from different runs"
  cp "$WORK/saved/$(basename "$ck")" "$ck"
  cp "$WORK/good.w" "$w"
  before=$(snapshot "$D/backup")
  resume
  expect_stop "a weights file that is not the one the checkpoint was saved with" "was saved with another weights file than the one loaded"
  ;;

watchdog)
  c=$WORK/long.cfg
  sed "s/^max_batches=.*/max_batches=100000/" "$base" > "$c"
  prime
  rm -f "$WORK"/pid.*
  t0=$(date +%s%N)
  (cd "$D" && timeout -k 5 "$BOUND" "${MPIRUN[@]}" -np "$np" "${RUN[@]}" -fsdp-timeout 3 classifier train \
     "$D/data.data" "$c" > "$WORK/stop.log" 2>&1) & mp=$!
  for i in $(seq 200); do [ -e "$D/backup/long_1.weights" ] && break; sleep 0.1; done
  kill -STOP "$(cat "$WORK/pid.$last")"
  t1=$(date +%s%N)
  rc=0; wait $mp || rc=$?
  took=$(( ($(date +%s%N) - t1) / 1000000 ))
  out=$(cat "$WORK/stop.log")
  rm -f "$D/backup"/long_*   # saves of the run before the stop (a .tmp where it stopped in one)
  expect_stop "a stopped rank: the others stop after -fsdp-timeout 3" \
    "rank [0-$((last - 1))]: .* \((group [^,]+, |root group, )?training step [0-9]+\) made no progress for [0-9]+ s \(-fsdp-timeout 3\)"
  check "stopped within 20 s of the stop (${took} ms)" [ "$took" -lt 20000 ]
  # mpirun told to stop (^C; it sends the ranks SIGTERM): rank 0 says where
  # the run was and which weights file is the last one written.  mpirun
  # kills the ranks a second later and may drop a rank's last line while it
  # tears the job down (about 1 run in 10 at 3 ranks on 2 cores): up to 3
  # tries for the line, every try must stop.
  said="fsdp: stopped by SIGTERM after step [0-9]+ of 100000; the last weights file written: .*/long_[0-9]+.weights"
  for sig in INT TERM; do
    for try in 1 2 3; do
      prime
      rm -f "$WORK"/pid.*
      (cd "$D" && exec "${MPIRUN[@]}" -np "$np" "${RUN[@]}" classifier train "$D/data.data" "$c" \
         > "$WORK/sig.log" 2>&1) & mp=$!
      for i in $(seq 200); do [ -e "$D/backup/long_1.weights" ] && break; sleep 0.1; done
      t1=$(date +%s%N)
      kill -"$sig" "$mp"
      for i in $(seq 200); do kill -0 "$mp" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$mp" 2>/dev/null || true
      rc=0; wait $mp || rc=$?
      took=$(( ($(date +%s%N) - t1) / 1000000 ))
      out=$(cat "$WORK/sig.log")
      rm -f "$D/backup"/long_*
      grep -qE -- "$said" <<< "$out" && break
      [ "$rc" != 0 ] && ranks_gone || break   # a failure expect_stop reports
    done
    expect_stop "mpirun given SIG$sig: rank 0 names the step and the last weights file (try $try)" "$said"
  done
  # A crash of one rank (SIGSEGV): it says so and ends at once, whatever
  # locks the crashing thread held; the launcher stops the others.
  prime
  rm -f "$WORK"/pid.*
  (cd "$D" && exec timeout -k 5 "$BOUND" "${MPIRUN[@]}" -np "$np" "${RUN[@]}" classifier train "$D/data.data" "$c" \
     > "$WORK/crash.log" 2>&1) & mp=$!
  for i in $(seq 200); do [ -e "$D/backup/long_1.weights" ] && break; sleep 0.1; done
  t1=$(date +%s%N)
  kill -SEGV "$(cat "$WORK/pid.$last")"
  rc=0; wait $mp || rc=$?
  took=$(( ($(date +%s%N) - t1) / 1000000 ))
  out=$(cat "$WORK/crash.log")
  rm -f "$D/backup"/long_*
  expect_stop "a rank crashes (SIGSEGV): it names itself, the others stop" "fsdp: rank $last: SIGSEGV: this rank crashed"
  check "stopped within 20 s of the crash (${took} ms)" [ "$took" -lt 20000 ]
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
finish
