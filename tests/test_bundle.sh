#!/usr/bin/env bash
# The GPU bundle (tools/gpu-bundle make, run by tools/test before CTest):
# what tools/gpu-check runs on a GPU machine whose system is not Debian 12.
# Here, with the bundle's environment (its Open MPI relocated, its libraries
# first on the path): every program finds its libraries, the bundle's own
# mpirun and CPU engine train 2 ranks equal to 1 rank with twice the batch,
# and its GPU tests are found and skip honestly without a GPU.  (A bare
# Debian chroot without Open MPI was checked by hand.)
. "$(dirname "$0")/lib.sh"
BUNDLE=$S/deps/gpu-bundle
if [ ! -f "$BUNDLE/bundle.txt" ]; then
  echo "skipped: no deps/gpu-bundle (tools/gpu-bundle make; tools/test makes it)"
  exit 77
fi

# A bundle that is not there is refused by name, with a non-zero exit.
set +e
msg=$("$S/tools/gpu-bundle" env "$WORK/none" 2>&1); rc=$?
set -e
check "env refuses a folder that is no bundle (exit $rc: $msg)" \
  bash -c '[ "$1" != 0 ] && grep -q "none is not a bundle" <<< "$2"' _ "$rc" "$msg"

check "the bundle was made from this tree's sources" "$S/tools/gpu-bundle" check "$BUNDLE"
mkdir -p "$WORK/stale"
sed 's/^sources .*/sources 0123456789abcdef/' "$BUNDLE/bundle.txt" > "$WORK/stale/bundle.txt"
set +e
msg=$("$S/tools/gpu-bundle" check "$WORK/stale" 2>&1); rc=$?
set -e
check "a bundle of other sources is named stale (exit $rc)" \
  bash -c '[ "$1" = 1 ] && grep -q "was made from other sources (0123456789abcdef" <<< "$2"' _ "$rc" "$msg"

eval "$("$S/tools/gpu-bundle" env "$BUNDLE" 2> "$WORK/env.err")"
check "env finds the CUDA libraries ($(tr '\n' ' ' < "$WORK/env.err"))" \
  bash -c 'while read -r l; do grep -q "^gpu-bundle: $l from /" "$1" || exit 1; done < "$2"' _ "$WORK/env.err" "$BUNDLE/cuda-libs.txt"
check "mpirun is the bundle's" test "$(command -v mpirun)" = "$BUNDLE/mpi/usr/bin/mpirun"
check "every library resolves inside the bundle or to the machine's glibc, CUDA, base libraries ($("$S/tools/gpu-bundle" closure "$BUNDLE" 2>&1 | tail -1))" \
  "$S/tools/gpu-bundle" closure "$BUNDLE"
check "the machine's own libstdc++ wins over the bundle's copy" \
  bash -c 'l=$(ldd "$1" | grep "libstdc++.so.6 => /"); [ -n "$l" ] && [[ $l != *"$2"* ]]' _ "$BUNDLE/build-gpu/darknet" "$BUNDLE"
check "the plugin loads the bundle's libmpi" bash -c 'ldd "$1" | grep -q "libmpi.so.40 => $2/"' _ "$BUNDLE/build/libdarknet_fsdp.so" "$BUNDLE/mpi"

# The bundle's CPU engine under the bundle's mpirun (MPI_Init, the relocated
# components, shared-memory transport) against one rank.
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
sed 's/^batch=.*/batch=4/' "$S/cfg/tests/residual.cfg" > "$WORK/r4.cfg"
sed 's/^batch=.*/batch=8/' "$S/cfg/tests/residual.cfg" > "$WORK/r8.cfg"
MPIRUN=(mpirun "${FSDP_MPIRUN_FLAGS[@]}")  # the bundle's, first on PATH
DN=$BUNDLE/build/darknet PLUGIN=$BUNDLE/build/libdarknet_fsdp.so WDIFF=$BUNDLE/build/fsdp_wdiff
train_np "$WORK/np2.w" 2 "$D/data.data" "$WORK/r4.cfg" -seed 5
train "$WORK/np1.w" "$D/data.data" "$WORK/r8.cfg" -plugin "$PLUGIN" -seed 5
check "the bundle: 2 ranks under its mpirun equal 1 rank with batch 8" \
  "$WDIFF" "$WORK/np1.w" "$WORK/np2.w" --tol 1e-4

# Again with this machine's own Open MPI and PMIx hidden (a private mount
# namespace with empty folders over theirs): only the relocated bundle can
# start the ranks, as on a GPU machine without Open MPI.
masked() {
  unshare -m bash -c 'for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
                              /usr/share/openmpi /usr/share/pmix /etc/openmpi; do
                        if [ -d "$d" ]; then mount -t tmpfs none "$d" || exit 1; fi; done; exec "$@"' _ "$@"
}
if masked true 2> /dev/null; then
  plain=("${MPIRUN[@]}")
  MPIRUN=(masked "${plain[@]}")
  train_np "$WORK/masked.w" 2 "$D/data.data" "$WORK/r4.cfg" -seed 5
  MPIRUN=("${plain[@]}")
  check "the bundle with the system's Open MPI hidden: 2 ranks equal 1 rank with batch 8" \
    "$WDIFF" "$WORK/np1.w" "$WORK/masked.w" --tol 1e-4
else
  echo "skip - no private mount namespace here (unshare -m): the hidden-Open-MPI run is left out"
fi

# Its GPU tests (tests/gpu.cmake, tests/gpu_engine.cmake), moved to the bundle's paths.
"$S/tools/gpu-bundle" tests "$BUNDLE" > "$WORK/tests.out" 2>&1 || true
tail -5 "$WORK/tests.out"
# Whether there is a GPU, as the CUDA runtime sees it (77: none).
set +e
"$BUNDLE/build-gpu/tests/test_kernels_gpu" --probe > /dev/null 2>&1; probe=$?
set -e
for t in kernels_gpu collectives_gpu_np1 collectives_gpu_np2 gpu_engine gpu_engine_frozen gpu_engine_bn; do
  if [ "$probe" != 77 ]; then want=Passed; else want=Skipped; fi
  check "gpu test $t: $want" grep -q "Test #[0-9]*: $t \.\.\. $want" "$WORK/tests.out"
done
finish
