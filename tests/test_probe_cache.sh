#!/usr/bin/env bash
# The probe cache (docs/DESIGN.md, "The probe cache"): a frozen trunk's
# outputs computed once per image and variant, kept, and reused.  Weights
# byte-identical with and without it at 1 and 2 ranks (2 ranks dividing the
# extraction into two parts); 2 ranks with it against one process with the
# 2-times batch; reused by a second run; rebuilt, naming the part of the
# key that differed, after a touched image, other trunk weights and another
# cfg prefix; a cache without its manifest, with a cut or corrupt part, a
# crafted manifest or a linked one never read; a random crop runs without
# it and says so.
# usage: test_probe_cache.sh [routes|machines|memcheck]
#   routes: cfg/tests/probe-routes.cfg (nested frozen groups, a head that
#   reads the trunk through a route and a shortcut): byte-identical at 1 and
#   2 ranks, and reused; resumed from shard checkpoints and beside
#   checkpoints on the clock, bit for bit.
#   memcheck: the world-1 build and reuse under valgrind.
#   machines: two simulated machines (tests/twohosts.sh): the run goes on
#   without the cache, rank 0 saying why, and equals one machine's run
#   without it within the suite's tolerance.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 16 --size 16
said() { grep -qE -- "$1" "$2.err"; }
if [ "${1:-}" = memcheck ]; then
  # The build, then the reuse, of cfg/tests/probe-routes.cfg at world 1
  # under valgrind: a row read past a buffer trains the same weights and
  # shows only here.
  DN=$(valgrind_dn) || exit 77
  sed '/^frozen=1$/d' "$S/cfg/tests/probe-routes.cfg" > "$WORK/pre.cfg"
  sed 's/^max_batches=6/max_batches=3/' "$S/cfg/tests/probe-routes.cfg" > "$WORK/probe.cfg"
  make_data "$D" --classes 3 --per-class 4 --size 16
  train "$WORK/pre.w" "$D/data.data" "$WORK/pre.cfg" -seed 3
  for run in built reused; do
    train "$WORK/$run.w" "$D/data.data" "$WORK/probe.cfg" -plugin "$PLUGIN" -seed 5 -clear "$WORK/pre.w"
    check "valgrind: the cache $run, no memory error" said "probe cache .*: $run," "$WORK/$run.w"
  done
  check "valgrind: the same weights" cmp "$WORK/built.w" "$WORK/reused.w"
  finish
  exit
fi
if [ "${1:-}" = machines ]; then
  . "$(dirname "$0")/twohosts.sh"
  twohosts_up probecache
  sed '/^frozen=1$/d' "$S/cfg/tests/probe-routes.cfg" > "$WORK/pre.cfg"
  cp "$S/cfg/tests/probe-routes.cfg" "$WORK/probe.cfg"
  train "$WORK/pre.w" "$D/data.data" "$WORK/pre.cfg" -seed 3
  train_np "$WORK/one.w" 2 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$WORK/pre.w"
  (cd "$D" && rm -f backup/probe.weights &&
   on_a "${TH_MPIRUN[@]}" -np 2 --map-by node "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" \
     "$WORK/probe.cfg" -seed 5 -clear "$WORK/pre.w" > "$WORK/two.w.log" 2> "$WORK/two.w.err") \
    || { tail -n 30 "$WORK/two.w.log" "$WORK/two.w.err"; exit 1; }
  cp "$D/backup/probe.weights" "$WORK/two.w"
  check "two machines: not used, rank 0 says why" said "probe cache: not used: the ranks span machines" "$WORK/two.w"
  check "two machines without the cache equal one machine with it" "$WDIFF" "$WORK/one.w" "$WORK/two.w" --tol 1e-5
  finish
  exit
fi
if [ "${1:-}" = routes ]; then
  sed '/^frozen=1$/d' "$S/cfg/tests/probe-routes.cfg" > "$WORK/pre.cfg"
  cp "$S/cfg/tests/probe-routes.cfg" "$WORK/probe.cfg"
  train "$WORK/pre.w" "$D/data.data" "$WORK/pre.cfg" -seed 3
  C=$D/backup/probe.probe
  for np in 1 2; do
    rm -rf "$C"
    train_np "$WORK/off$np.w" "$np" "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear -fsdp-probe-cache off "$WORK/pre.w"
    train_np "$WORK/c$np.w" "$np" "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$WORK/pre.w"
    check "world $np: built, serving layers 1-3" said "probe cache $C: built.*the outputs of layers 1, 2, 3;" "$WORK/c$np.w"
    check "world $np: weights byte-identical with the cache" cmp "$WORK/off$np.w" "$WORK/c$np.w"
    train_np "$WORK/r$np.w" "$np" "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$WORK/pre.w"
    check "world $np: reused" said "probe cache $C: reused" "$WORK/r$np.w"
    check "world $np: reused, byte-identical" cmp "$WORK/off$np.w" "$WORK/r$np.w"
  done
  # Shard checkpoints with the cache: 3 steps, then resumed to 6, bit for bit.
  sed 's/^max_batches=6/max_batches=3/' "$S/cfg/tests/probe-routes.cfg" > "$WORK/probe.cfg"
  train_np "$WORK/half.w" 2 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear -fsdp-checkpoint "$WORK/pre.w"
  mkdir "$WORK/ck" && cp "$D"/backup/probe.weights* "$WORK/ck/"
  cp "$S/cfg/tests/probe-routes.cfg" "$WORK/probe.cfg"
  train_np "$WORK/res.w" 2 "$D/data.data" "$WORK/probe.cfg" -seed 5 -fsdp-resume "$WORK/ck/probe.weights"
  check "resumed from a shard checkpoint, served from the cache: bit for bit" cmp "$WORK/off2.w" "$WORK/res.w"
  train_np "$WORK/clock.w" 2 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear -fsdp-checkpoint-every 0.0001 \
    -fsdp-resume auto "$WORK/pre.w"
  check "checkpoints on the clock beside the cache: the same weights" cmp "$WORK/off2.w" "$WORK/clock.w"
  check "the served outputs: layers 1, 2 and 3 of a 4x8x8 each per variant" grep -q "^floats 768$" "$C/MANIFEST"
  check_not "the head trained" cmp "$WORK/pre.w" "$WORK/c1.w"
  finish
  exit
fi
probe_cfg() { # probe_cfg OUT BATCH [FROZEN_KEY] [NET_KEYS...]: trunk (frozen), head
  local out=$1 batch=$2 frozen=${3-frozen=1}; shift 3 || shift $#
  {
    printf '[net]\nbatch=%s\nsubdivisions=1\nwidth=16\nheight=16\nchannels=3\nmin_crop=16\nmax_crop=16\n' "$batch"
    printf 'learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=6\npolicy=constant\n'
    printf '%s\n' "$@"
    printf '\n[convolutional]\n%s\nshard_group=trunk.block1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n' "$frozen"
    printf '\n[maxpool]\n%s\nshard_group=trunk.block1\nsize=2\nstride=2\n' "$frozen"
    printf '\n[convolutional]\n%s\nshard_group=trunk.block2\nfilters=5\nsize=3\nstride=1\npad=1\nactivation=leaky\n' "$frozen"
    printf '\n[connected]\nshard_group=head\noutput=3\nactivation=linear\n\n[softmax]\nshard_group=head\n'
  } > "$out"
}
probe_cfg "$WORK/pre.cfg" 4 "" 
probe_cfg "$WORK/probe.cfg" 4
probe_cfg "$WORK/probe8.cfg" 8
# The trunk: the probe's layers trained unfrozen, by stock Darknet.
train "$WORK/pre.w" "$D/data.data" "$WORK/pre.cfg" -seed 3
C=$D/backup/probe.probe
run() { # run OUT NP [ARGS...]: the probe from pre.w, seeded
  local out=$1 np=$2; shift 2
  train_np "$out" "$np" "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$@" "$WORK/pre.w"
}

run "$WORK/off1.w" 1 -fsdp-probe-cache off
check "-fsdp-probe-cache off: no cache" test ! -e "$C"
run "$WORK/c1.w" 1
check "world 1: the cache was built" said "probe cache $C: built" "$WORK/c1.w"
check "world 1: weights byte-identical with the cache" cmp "$WORK/off1.w" "$WORK/c1.w"
check_not "the trunk stayed, the head trained" cmp "$WORK/pre.w" "$WORK/c1.w"
run "$WORK/r1.w" 1 -fsdp-stats "$WORK/r1.json"
check "a second run reuses it" said "probe cache $C: reused" "$WORK/r1.w"
check "the stats file says so, with its size and the steps' seconds" python3 -c '
import json, os, sys
p = json.load(open(sys.argv[1]))["probe_cache"]
size = sum(os.path.getsize(os.path.join(sys.argv[2], f)) for f in os.listdir(sys.argv[2]) if f.startswith("part-"))
assert p["state"] == "reused" and p["bytes"] == size > 0 and p["steps_seconds"] > 0 and p["folder"] == sys.argv[2], p
' "$WORK/r1.json" "$C"
check "the start-up prediction counts the cache" said "probe cache: read through the page cache, which holds its 0\.[0-9] MB once for the machine's 1 ranks.*each rank adds a buffer of 1.3 KB" "$WORK/r1.w"
"$DN" -plugin "$PLUGIN" -fsdp-plan 1 "$WORK/probe.cfg" > "$WORK/plan.txt" 2>&1
check "-fsdp-plan: the cache's size per image (5x8x8 floats, two variants)" grep -q "Probe cache .*: 320 floats per image and variant, 2.6 KB per training image" "$WORK/plan.txt"
check "rank 0 closes with the steps' seconds" said "probe cache $C: the steps took [0-9.]+ s after reusing it" "$WORK/r1.w"
check "reused: byte-identical" cmp "$WORK/off1.w" "$WORK/r1.w"

run "$WORK/off2.w" 2 -fsdp-probe-cache off
run "$WORK/c2.w" 2 -fsdp-probe-cache "$WORK/two"
check "world 2: built into the folder given, in two parts" grep -q "^parts 2$" "$WORK/two/MANIFEST"
check "world 2: weights byte-identical with the cache" cmp "$WORK/off2.w" "$WORK/c2.w"
run "$WORK/r2.w" 2
check "world 2 reuses world 1's cache" said "probe cache $C: reused" "$WORK/r2.w"
check "world 2, world 1's cache: byte-identical" cmp "$WORK/off2.w" "$WORK/r2.w"
train "$WORK/one8.w" "$D/data.data" "$WORK/probe8.cfg" -plugin "$PLUGIN" -seed 5 -clear -fsdp-probe-cache off "$WORK/pre.w"
check "world 2 with the cache matches one process with the 2-times batch" "$WDIFF" "$WORK/one8.w" "$WORK/c2.w" --tol 1e-5

# Stale keys: each refused, named, rebuilt; the weights stay the same.
stale() { # stale WHAT PATTERN OUT [ARGS...]
  local what=$1 pat=$2 out=$3; shift 3
  run "$out" 1 "$@"
  check "$what: refused and rebuilt" said "made for other inputs \($pat.*differ\): rebuilding" "$out"
  check "$what: built again" said "probe cache $C: built" "$out"
}
touch -d '2001-01-01' "$(head -n 1 "$D/train.list")"
stale "a touched image" "the images" "$WORK/s1.w"
check "after a touched image: byte-identical" cmp "$WORK/off1.w" "$WORK/s1.w"
train "$WORK/pre2.w" "$D/data.data" "$WORK/pre.cfg" -seed 4
train_np "$WORK/s2.w" 1 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$WORK/pre2.w"
check "other trunk weights: refused and rebuilt" said "made for other inputs \(the frozen layers' weights differ\)" "$WORK/s2.w"
touch "$WORK/two/notes.txt"
train_np "$WORK/s2b.w" 1 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear -fsdp-probe-cache "$WORK/two" "$WORK/pre2.w"
check "a rebuild on another world leaves no part of the old build, and other files alone" \
  test "$(cd "$WORK/two" && ls | tr '\n' ' ')" = "MANIFEST notes.txt part-0-of-1.bin "
sed -i '0,/activation=leaky/s//activation=relu/' "$WORK/probe.cfg"
stale "another cfg prefix" "the cfg's frozen layers" "$WORK/s3.w"
run "$WORK/s3off.w" 1 -fsdp-probe-cache off
check "another cfg prefix: byte-identical to it without the cache" cmp "$WORK/s3off.w" "$WORK/s3.w"
probe_cfg "$WORK/probe.cfg" 4

# Incomplete or crafted caches: never read, rebuilt.
broken() { # broken WHAT PATTERN: the cache, broken by the caller, is rebuilt
  run "$WORK/b.w" 1
  check "$1: not read ($2)" said "$2" "$WORK/b.w"
  check "$1: rebuilt" said "probe cache $C: built" "$WORK/b.w"
  check "$1: byte-identical" cmp "$WORK/off1.w" "$WORK/b.w"
}
run "$WORK/x.w" 1
rm "$C/MANIFEST"
broken "no manifest (a build cut short)" "none complete"
truncate -s -4 "$C/part-0-of-1.bin"
broken "a cut part" "part-0-of-1.bin: a part's size is not the manifest's"
printf '\x7f' | dd of="$C/part-0-of-1.bin" bs=1 seek=100 conv=notrunc status=none
broken "a corrupt part" "a part's checksum is not the manifest's"
rm "$C/part-0-of-1.bin" && mkfifo "$C/part-0-of-1.bin"
broken "a FIFO in place of a part, not waited on" "part-0-of-1.bin: a part's size is not the manifest's"
rm "$C/MANIFEST" && mkfifo "$C/MANIFEST"
broken "a FIFO in place of the manifest, not waited on" "none complete"
sed -i 's/^parts 1$/parts 99999999/' "$C/MANIFEST"
broken "a manifest with too many parts" "parts out of bounds"
sed -i 's/^variants .*/variants 18446744073709551615/' "$C/MANIFEST"
broken "a manifest with a huge count" "variants out of bounds"
sed -i 's/^part 0 0 \([0-9]*\)/part 0 5 \1/' "$C/MANIFEST"
broken "parts that do not tile" "do not tile"
head -c 40 /dev/urandom > "$C/MANIFEST"
broken "a garbage manifest" "not a version-1 manifest"
mv "$C/MANIFEST" "$WORK/manifest.real" && ln -s "$WORK/manifest.real" "$C/MANIFEST"
broken "a linked manifest" "none complete"

# A random crop: no cache, one line naming the key.
probe_cfg "$WORK/crop.cfg" 4 frozen=1
sed -i 's/^max_crop=16$/max_crop=24/' "$WORK/crop.cfg"
train_np "$WORK/crop.w" 2 "$D/data.data" "$WORK/crop.cfg" -seed 5 -clear "$WORK/pre.w"
check "a random crop: the line naming the key" said "probe cache: not used: the input is random: min_crop=16 max_crop=24" "$WORK/crop.w"
"$DN" partial "$WORK/pre.cfg" "$WORK/pre.w" "$WORK/short.w" 1 > /dev/null 2>&1
train_np "$WORK/shortrun.w" 1 "$D/data.data" "$WORK/probe.cfg" -seed 5 -clear "$WORK/short.w"
check "a weights file ending inside the trunk: no cache, said" \
  said "probe cache: not used: .*short.w ends inside the frozen layers" "$WORK/shortrun.w"
check "a random crop: one line, from rank 0" test "$(grep -c "probe cache" "$WORK/crop.w.err")" = 1
finish
