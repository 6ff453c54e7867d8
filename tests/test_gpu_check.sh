#!/usr/bin/env bash
# tools/gpu-check's plan, on a machine without a GPU: --dry-run lists every
# part with its time limit and the total fits the budget and one GPU
# command's 10 minutes in both modes; a budget above that is refused; every
# part of the plan exists; bad arguments exit 2 with the reason; the versions
# part names the CUDA runtime and, without a driver, fails by name.
. "$(dirname "$0")/lib.sh"
GC=$S/tools/gpu-check
export FSDP_GPU_CHECK_LOGS=$WORK/logs

out=$("$GC" --dry-run) && rc=0 || rc=$?
echo "$out"
check "--dry-run: the plan fits (exit $rc)" test "$rc" = 0
for mode in bundle build; do
  total=$(awk -v m="$mode" '/on the GPU machine/ { on = index($0, m " mode") > 0 } on && $1 == "total" { print $2 }' <<< "$out")
  check "--dry-run, $mode mode: a total of ${total:-?} s, within 600 s" test "${total:-999}" -le 600
done
parts=$(awk '/on the GPU machine, bundle mode/ { on = 1; next } on && $1 == "total" { exit } on { print $1 }' <<< "$out")
check "--dry-run lists the parts ($(paste -sd' ' <<< "$parts"))" test "$(wc -l <<< "$parts")" -ge 10
for p in $parts; do
  check "part $p is defined" grep -q "^part_$p()" "$GC"
done
for p in versions ctest_quick ctest_engine ctest_recompute sanitizer; do
  check "the plan has $p" grep -qx "$p" <<< "$parts"
done

set +e
FSDP_GPU_CHECK_BUDGET=700 "$GC" --dry-run > "$WORK/over.txt" 2>&1; rc=$?
"$GC" --help > "$WORK/help.txt" 2>&1; help_rc=$?
msg=$("$GC" --only nope,steps 2>&1); only_rc=$?
bad=$("$GC" --frobnicate 2>&1); bad_rc=$?
FSDP_GPU_CHECK_MODE=build "$GC" --part versions > "$WORK/versions.txt" 2>&1; v_rc=$?
set -e
check "a budget of 700 s does not fit one GPU command (exit $rc)" \
  bash -c '[ "$1" = 1 ] && grep -q "does not fit" "$2"' _ "$rc" "$WORK/over.txt"
check "--help prints the usage (exit $help_rc)" \
  bash -c '[ "$1" = 0 ] && grep -q -- "--dry-run" "$2" && grep -q -- "--only PART" "$2"' _ "$help_rc" "$WORK/help.txt"
check "--only with an unknown part: exit 2, named ($msg)" \
  bash -c '[ "$1" = 2 ] && grep -q "no part named nope " <<< "$2"' _ "$only_rc" "$msg"
check "an unknown option: exit 2 with the usage ($bad)" \
  bash -c '[ "$1" = 2 ] && grep -q "^usage: tools/gpu-check" <<< "$2"' _ "$bad_rc" "$bad"
cat "$WORK/versions.txt"
if [ -e /dev/nvidiactl ]; then
  echo "skip - this machine has an NVIDIA driver: the no-driver case is left out"
else
  runtime=$( { /usr/local/cuda/bin/nvcc --version 2>/dev/null || true; } | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  check "versions without a driver: exit 1, the runtime named (CUDA ${runtime:-?})" \
    bash -c '[ "$1" = 1 ] && grep -q "^CUDA driver: none.*CUDA runtime: $2" "$3" && grep -q "no NVIDIA driver here" "$3"' \
    _ "$v_rc" "${runtime:-unknown}" "$WORK/versions.txt"
fi
finish
