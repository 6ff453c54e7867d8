# Shared helpers for the driver scripts in tests/.  Source it; it sets -eu.
set -euo pipefail
B=${FSDP_BUILD:?FSDP_BUILD must name the build folder}
S=${FSDP_SOURCE:?FSDP_SOURCE must name the source folder}
DN=$B/darknet
PLUGIN=$B/libdarknet_fsdp.so
WDIFF=$B/fsdp_wdiff
# MPIRUN (mpirun with the shared flags), as root; median_step.
. "$S/tools/lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fsdp-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
CHECKS=0

pass() { CHECKS=$((CHECKS + 1)); echo "ok   - $*"; }
fail() { CHECKS=$((CHECKS + 1)); FAILS=$((FAILS + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
check_not() { local what=$1; shift; if "$@"; then fail "$what"; else pass "$what"; fi; }
# How many GPUs the CUDA runtime sees, as the GPU build's probe reports them
# ("GPU 0 of N: ..."); 0 without a GPU or without a GPU build.  The runtime,
# not nvidia-smi: a driver too old for the build's CUDA is a failure there
# (the probe exits 3, printing both versions), not a skip.
runtime_gpus() {
  local out rc
  out=$("$B/tests/test_kernels_gpu" --probe 2>&1) && rc=0 || rc=$?
  if [ "$rc" = 0 ]; then sed -n 's/^GPU 0 of \([0-9]*\):.*/\1/p' <<< "$out" | head -1; return; fi
  [ "$rc" = 77 ] || [ ! -x "$B/tests/test_kernels_gpu" ] && { echo 0; return; }
  printf '%s\n' "$out" >&2
  echo "a GPU is there but the CUDA runtime cannot use it (see above)" >&2
  exit 1
}

finish() { echo "$((CHECKS - FAILS)) passed, $FAILS failed"; [ "$FAILS" = 0 ]; }

# make_data DIR [make-testdata options]: a small labelled image set.
# valgrind_dn: prints a darknet that runs under valgrind (memory errors exit
# 9: a use-after-free of a buffer given back, say, which trains the same
# weights); fails, saying why, where there is no valgrind (skip: exit 77).
valgrind_dn() {
  command -v valgrind > /dev/null || { echo "skipped: no valgrind" >&2; return 1; }
  printf '#!/bin/sh\nexec valgrind -q --error-exitcode=9 --leak-check=no "%s" "$@"\n' "$DN" > "$WORK/dn-valgrind"
  chmod +x "$WORK/dn-valgrind"
  echo "$WORK/dn-valgrind"
}

make_data() { "$S/tools/make-testdata" "$@" >/dev/null; }

# train OUT_WEIGHTS DATA CFG [darknet args...] [WEIGHTS]: one process, no
# plugin unless the args load one (flags may stand after the cfg).  Darknet's
# stdout goes to OUT_WEIGHTS.log, its stderr to OUT_WEIGHTS.err: apart, since
# a stderr line can land inside a buffered stdout line.
# Runs in the data folder; copies the final weights to OUT_WEIGHTS.
train() {
  local out=$1 data=$2 cfg=$3; shift 3
  local base; base=$(basename "$cfg" .cfg)
  (cd "$(dirname "$data")" && rm -f backup/"$base".weights &&
   "$DN" classifier train "$data" "$cfg" "$@" > "$out.log" 2> "$out.err") \
    || { echo "darknet failed, log:"; tail -n 20 "$out.log" "$out.err"; return 1; }
  cp "$(dirname "$data")/backup/$base.weights" "$out"
}

# train_np OUT_WEIGHTS NP DATA CFG [darknet args...]: NP ranks with the plugin.
train_np() {
  local out=$1 np=$2 data=$3 cfg=$4; shift 4
  local base; base=$(basename "$cfg" .cfg)
  (cd "$(dirname "$data")" && rm -f backup/"$base".weights &&
   "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train "$data" "$cfg" "$@" > "$out.log" 2> "$out.err") \
    || { echo "mpirun -np $np failed, log:"; tail -n 30 "$out.log" "$out.err"; return 1; }
  cp "$(dirname "$data")/backup/$base.weights" "$out"
}

# expect_refusal WHAT PATTERN CFG: $np ranks training CFG on $D stop with
# PATTERN, non-zero, no hang, no weights.
expect_refusal() {
  local out rc=0
  rm -rf "$D/backup"
  out=$(cd "$D" && timeout 60 "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$3" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qE -- "$2" <<< "$out" && [ -z "$(ls "$D/backup" 2>/dev/null)" ]; then
    pass "$1 (exit $rc)"
  else
    fail "$1: exit $rc, output: $(grep -i "fsdp\|error" <<< "$out" | head -3)"
  fi
}

# test_cfg NAME BATCH [KEY=VALUE...]: cfg/tests/NAME.cfg with another batch
# and keys added to [net], as $WORK/NAME-BATCH.cfg; prints its path.
test_cfg() {
  local name=$1 batch=$2 out=$WORK/$1-$2.cfg k; shift 2
  sed "s/^batch=.*/batch=$batch/" "$S/cfg/tests/$name.cfg" > "$out"
  for k in "$@"; do sed -i "s/^\[net\]$/[net]\n$k/" "$out"; done
  echo "$out"
}

# probe_cfg CFG: tiny.cfg made a linear probe in place: its body group split
# into trunk.a and trunk.b, both frozen (475 floats), under the trained head.
probe_cfg() {
  sed -i '0,/^shard_group=body$/s//shard_group=trunk.a\nfrozen=1/' "$1"
  sed -i 's/^shard_group=body$/shard_group=trunk.b/' "$1"
  sed -i '0,/^filters=6$/s//filters=6\nfrozen=1/' "$1"
}

# count NAME FILE: a value from a "name value" file.
count() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

# manifests_whole FOLDER: every MANIFEST of the checkpoints on the clock in
# FOLDER (docs/DESIGN.md, "Checkpoints on the clock") names files there of
# the sizes it gives; prints the others and fails.
manifests_whole() {
  python3 - "$1" <<'PY'
import os, sys
folder, bad = sys.argv[1], []
for d in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
    m = os.path.join(folder, d, "MANIFEST")
    if os.path.exists(m):
        for w in (line.split() for line in open(m)):
            p = os.path.join(folder, d, w[1]) if w[0] == "file" else None
            if p and (not os.path.exists(p) or os.path.getsize(p) != int(w[2])):
                bad.append(p)
if bad:
    print(" ".join(bad))
sys.exit(1 if bad else 0)
PY
}
