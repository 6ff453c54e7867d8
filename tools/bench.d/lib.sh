# shellcheck shell=bash
# tools/bench.d/lib.sh: what every benchmark mode shares; each mode sources
# it first.  It runs from the repository root with the build in
# FSDP_BUILD_DIR (default build/), works in FSDP_BENCH_DIR (a temporary
# folder, removed at exit, when not given) and provides:
#   bench_rounds N    the rounds of an interleaved comparison: 1 ..
#                     FSDP_BENCH_ROUNDS (default N); each round runs every
#                     side once, so a busy moment hits them all
#   median_step LOG   a run's median step time (tools/lib.sh), the figure
#                     every mode compares
#   run, json, d53_cfgs   below
# A mode run alone (tools/bench.d/MODE) builds first; tools/bench builds
# once for all the modes it runs (FSDP_BENCH_BUILT=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
[ "${FSDP_BENCH_BUILT:-}" = 1 ] || tools/setup >/dev/null
B=$ROOT/${FSDP_BUILD_DIR:-build}  # tools/setup builds there too
. tools/lib.sh  # MPIRUN (as root), median_step
W=${FSDP_BENCH_DIR:-$(mktemp -d /tmp/fsdp-bench.XXXXXX)}
[ -n "${FSDP_BENCH_DIR:-}" ] || trap 'rm -rf "$W"' EXIT

bench_rounds() { seq "${FSDP_BENCH_ROUNDS:-$1}"; }

# json FILE EXPR: EXPR evaluated in Python with d the JSON of FILE.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

run() { # run LOG NP DATA CFG [args]: NP=0 means stock Darknet, one process, no plugin; DN, PLUGIN: another build's
  local log=$1 np=$2 data=$3 cfg; cfg=$(realpath "$4"); shift 4
  rm -rf "$(dirname "$data")/backup"/*
  if [ "$np" = 0 ]; then
    (cd "$(dirname "$data")" && "${DN:-$B/darknet}" classifier train "$data" "$cfg" "$@" > "$log" 2>&1)
  else
    (cd "$(dirname "$data")" && "${MPIRUN[@]}" -np "$np" "${DN:-$B/darknet}" -plugin "${PLUGIN:-$B/libdarknet_fsdp.so}" \
      classifier train "$data" "$cfg" "$@" > "$log" 2>&1)
  fi
}

# d53_cfgs: Darknet's darknet53.cfg at 128x128, batch 8, 6 steps, groups of
# at least 2M parameters, its 1000-way classifier made a 6-class head:
# $W/d53-probe.cfg (every other conv frozen) and $W/d53-tune.cfg (none).
d53_cfgs() {
  python3 - deps/darknet/cfg/darknet53.cfg "$W" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
for k, v in (("batch", "8"), ("height", "128"), ("width", "128"), ("max_batches", "6"),
             ("burn_in", "0"), ("policy", "constant"), ("learning_rate", "0.01")):
    s = re.sub(r"(?m)^%s=.*$" % k, "%s=%s" % (k, v), s, count=1)
s = s.replace("[net]", "[net]\nshard_auto_group=2000000", 1)
parts = s.split("\n[convolutional]")
# Every convolutional layer but the last (the 1000-way classifier) frozen; the last has 6 filters.
probe = "\n[convolutional]\nfrozen=1".join(parts[:-1]) + "\n[convolutional]" + parts[-1].replace("filters=1000", "filters=6")
open(sys.argv[2] + "/d53-probe.cfg", "w").write(probe)
open(sys.argv[2] + "/d53-tune.cfg", "w").write(probe.replace("frozen=1\n", ""))
PY
}
