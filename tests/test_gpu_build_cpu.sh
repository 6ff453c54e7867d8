#!/usr/bin/env bash
# The GPU build on the CPU (-nogpu, patch 0017) against the CPU build, same
# seed and ranks: the GPU build's plugin has its own struct layouts (the
# tensor table's *_gpu fields, Darknet's GPU-only layer fields) and its
# host paths, which no GPU is needed to check.  A GPU build whose plugin
# misreads them crashes or trains other weights here.  Runs on every CI run;
# skipped when the GPU build was not made.
# env: FSDP_GPU_BUILD (default $FSDP_SOURCE/build-gpu)
. "$(dirname "$0")/lib.sh"
G=${FSDP_GPU_BUILD:-$S/build-gpu}
if [ ! -x "$G/darknet" ] || [ ! -f "$G/libdarknet_fsdp.so" ]; then
  echo "skipped: no GPU build in $G (.ci/gpu-build)"
  exit 77
fi
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
cpu() { DN=$B/darknet PLUGIN=$B/libdarknet_fsdp.so "$@"; }
gpu() { DN=$G/darknet PLUGIN=$G/libdarknet_fsdp.so "$@"; }

# Stock Darknet, the GPU build on the CPU: the build itself.
c=$(test_cfg tiny 8)
cpu train "$WORK/stock-cpu.w" "$D/data.data" "$c" -seed 5
gpu train "$WORK/stock-gpu.w" "$D/data.data" "$c" -seed 5 -nogpu
check "stock Darknet: GPU build -nogpu equals the CPU build" \
  "$WDIFF" "$WORK/stock-cpu.w" "$WORK/stock-gpu.w" --tol 1e-6

# The plugin on one rank and on two, each cfg's layer types (rnn, gru,
# deconvolutional, residual routes), SGD and Adam, prefetch, recomputed
# activations (the GPU build's host recomputation).
for spec in "tiny 1" "residual 2 shard_prefetch=1" "rnn 2" "layers 1" "layers 2 shard=grad_op" \
            "tiny 2 adam=1" "recompute 2"; do
  read -r name np keys <<< "$spec"
  # shellcheck disable=SC2086 # keys: a list
  c=$(test_cfg "$name" 4 $keys)
  if [ "$np" = 1 ]; then
    cpu train "$WORK/$name-cpu.w" "$D/data.data" "$c" -plugin "$B/libdarknet_fsdp.so" -seed 5
    gpu train "$WORK/$name-gpu.w" "$D/data.data" "$c" -plugin "$G/libdarknet_fsdp.so" -seed 5 -nogpu
  else
    cpu train_np "$WORK/$name-cpu.w" "$np" "$D/data.data" "$c" -seed 5
    gpu train_np "$WORK/$name-gpu.w" "$np" "$D/data.data" "$c" -seed 5 -nogpu
  fi
  check "plugin, $name.cfg, $np rank(s)${keys:+, $keys}: GPU build -nogpu equals the CPU build" \
    "$WDIFF" "$WORK/$name-cpu.w" "$WORK/$name-gpu.w" --tol 1e-6
done

# The linear probe: a nested frozen trunk under a trained head, 2 ranks.
c=$(test_cfg tiny 4)
probe_cfg "$c"
cpu train "$WORK/init.w" "$D/data.data" "$S/cfg/tests/tiny.cfg" -seed 2
cpu train_np "$WORK/probe-cpu.w" 2 "$D/data.data" "$c" -seed 6 -clear "$WORK/init.w"
gpu train_np "$WORK/probe-gpu.w" 2 "$D/data.data" "$c" -seed 6 -clear -nogpu -fsdp-stats "$WORK/probe.json" "$WORK/init.w"
check "probe, 2 ranks: GPU build -nogpu equals the CPU build" \
  "$WDIFF" "$WORK/probe-cpu.w" "$WORK/probe-gpu.w" --tol 1e-6
check "probe: the frozen trunk (475 floats) is bit-identical" \
  "$WDIFF" "$WORK/init.w" "$WORK/probe-gpu.w" --exact --floats 0:475
check "the GPU build on the CPU takes the MPI backend" grep -q '"backend": "mpi"' "$WORK/probe.json"
finish
