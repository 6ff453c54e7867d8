#!/usr/bin/env bash
# The engine on a GPU (GPU build): against the CPU engine and stock Darknet's
# GPU path on the same seed, N ranks against one, frozen probes, synchronized
# batch norm.  Several ranks share one GPU through -fsdp-backend mpi-staged (NCCL
# refuses that); with two GPUs or more, NCCL runs too.  Skips (exit 77)
# without a GPU.
# Arguments: the numbered sections to run (none: all), so that CTest runs the
# script as several tests, each within its own time limit (tests/gpu.cmake);
# section 5 compares with section 2's weights, so runs with it.
# env: FSDP_BUILD=the GPU build, FSDP_CPU_BUILD=the CPU build (default $FSDP_SOURCE/build)
. "$(dirname "$0")/lib.sh"
CPU=${FSDP_CPU_BUILD:-$S/build}
PARTS=" ${*:-1 2 3 4 5 6 7} "
part() { [[ $PARTS == *" $1 "* ]]; }
ngpu=$(runtime_gpus)
if [ "${ngpu:-0}" = 0 ]; then echo "skipped: no GPU"; exit 77; fi
echo "GPUs: $ngpu; sections:$PARTS"
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
cpu_train() { DN=$CPU/darknet PLUGIN=$CPU/libdarknet_fsdp.so train "$@"; }

# 1. One rank on the GPU against the CPU engine and against stock Darknet's GPU path.
if part 1; then
  c=$(test_cfg tiny 8)
  train "$WORK/gpu1.w" "$D/data.data" "$c" -plugin "$PLUGIN" -seed 5 -fsdp-stats "$WORK/gpu1.json"
  cpu_train "$WORK/cpu1.w" "$D/data.data" "$c" -plugin "$CPU/libdarknet_fsdp.so" -seed 5
  train "$WORK/stock1.w" "$D/data.data" "$c" -seed 5
  check "GPU world 1 equals the CPU engine ($("$WDIFF" "$WORK/cpu1.w" "$WORK/gpu1.w" --tol 1e-3 | head -1))" \
    "$WDIFF" "$WORK/cpu1.w" "$WORK/gpu1.w" --tol 1e-3
  check "GPU world 1 equals stock Darknet on the GPU ($("$WDIFF" "$WORK/stock1.w" "$WORK/gpu1.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/stock1.w" "$WORK/gpu1.w" --tol 1e-4
  # The device deltas live in the delta pool (fsdp_delta_pool.h), bit for bit.
  FSDP_ACTS=0 train "$WORK/gpu1-kept.w" "$D/data.data" "$c" -plugin "$PLUGIN" -seed 5
  check "GPU world 1: byte-identical to every delta kept (FSDP_ACTS=0)" cmp "$WORK/gpu1.w" "$WORK/gpu1-kept.w"
  check "GPU world 1: the deltas live in the device delta pool" \
    python3 -c "import json,sys; d=json.load(open('$WORK/gpu1.json')); sys.exit(0 if d['pooled_deltas'] > 0 and d['delta_buffers_bytes'] > 0 else 1)"
fi

# 2. Two ranks sharing the GPU (MPI through host staging) against one rank with twice the batch.
if part 2; then
  for s in full grad_op none; do
    c=$(test_cfg residual 4 "shard=$s")
    train_np "$WORK/mpi2-$s.w" 2 "$D/data.data" "$c" -seed 5 -fsdp-backend mpi-staged
    c=$(test_cfg residual 8 "shard=$s")
    train "$WORK/one-$s.w" "$D/data.data" "$c" -plugin "$PLUGIN" -seed 5
    check "GPU, 2 ranks on one GPU (mpi), shard=$s, equal one rank with batch 8" \
      "$WDIFF" "$WORK/one-$s.w" "$WORK/mpi2-$s.w" --tol 1e-4
  done
fi

# 3. The linear probe on the GPU: a frozen nested trunk stays bit-identical,
# and keeps no activations for backward.
if part 3; then
  c=$(test_cfg tiny 4)
  probe_cfg "$c"
  train "$WORK/init.w" "$D/data.data" "$S/cfg/tests/tiny.cfg" -seed 2
  train_np "$WORK/probe2.w" 2 "$D/data.data" "$c" -seed 6 -clear -fsdp-backend mpi-staged -fsdp-stats "$WORK/probe.json" "$WORK/init.w"
  check "GPU probe: the frozen trunk (475 floats) is bit-identical" "$WDIFF" "$WORK/init.w" "$WORK/probe2.w" --exact --floats 0:475
  check "GPU probe: no reduce-scatter for the frozen trunk" \
    python3 -c "import json,sys; d=json.load(open('$WORK/probe.json')); g={x['name']: x for x in d['groups']}; sys.exit(0 if g['trunk.a']['reduce_scatter_bytes'] == 0 and g['trunk.b']['backward_gathers'] == 0 else 1)"
  # The trunk's activations (fsdp_acts.h) on the device: layers 0 and 1 (the
  # first convolution and its pool) need no backward and feed none that does.
  check "GPU probe: the trunk's two transient outputs live in shared device buffers" \
    python3 -c "import json,sys; d=json.load(open('$WORK/probe.json')); sys.exit(0 if d['transient_outputs'] == 2 and d['activation_buffers_bytes'] > 0 else 1)"
  FSDP_ACTS=0 train_np "$WORK/probe2-kept.w" 2 "$D/data.data" "$c" -seed 6 -clear -fsdp-backend mpi-staged "$WORK/init.w"
  check "GPU probe: byte-identical to keeping every activation (FSDP_ACTS=0)" cmp "$WORK/probe2.w" "$WORK/probe2-kept.w"
  sed 's/^batch=4/batch=8/' "$c" > "$WORK/probe8.cfg"
  cpu_train "$WORK/probe-cpu.w" "$D/data.data" "$WORK/probe8.cfg" -plugin "$CPU/libdarknet_fsdp.so" -seed 6 -clear "$WORK/init.w"
  check "GPU probe on 2 ranks equals the CPU engine on one" "$WDIFF" "$WORK/probe-cpu.w" "$WORK/probe2.w" --tol 1e-3
fi

# 4. A frozen batch-norm layer between trainable ones (the inference-mode backward kernel).
# Darknet normalizes by sqrt(var) + 1e-6 on the CPU and sqrt(var + 1e-5) on
# the GPU, so the two engines agree only where the rolling variance is not
# tiny: start from weights whose frozen layer has rolling variance 1.
if part 4; then
  c=$(test_cfg tiny 8)
  sed -i '0,/^filters=6$/s//filters=6\nfrozen=1\nbatch_normalize=1/' "$c"
  sed '/^frozen=1$/d' "$c" > "$WORK/bn-init.cfg"
  cpu_train "$WORK/bn0.w" "$D/data.data" "$WORK/bn-init.cfg" -seed 3
  # Header 20 bytes; layer 0: 7 biases + 84 weights; layer 2: 6 biases, 6
  # scales, 6 rolling means, then the 6 rolling variances.
  python3 - "$WORK/bn0.w" <<'PY'
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); o = 20 + 4 * (91 + 18)
b[o:o + 24] = struct.pack("<6f", *[1.0] * 6); open(p, "wb").write(b)
PY
  train "$WORK/bn-gpu.w" "$D/data.data" "$c" -plugin "$PLUGIN" -seed 7 -clear "$WORK/bn0.w"
  cpu_train "$WORK/bn-cpu.w" "$D/data.data" "$c" -plugin "$CPU/libdarknet_fsdp.so" -seed 7 -clear "$WORK/bn0.w"
  check "GPU frozen batch norm between trainable layers equals the CPU engine" "$WDIFF" "$WORK/bn-cpu.w" "$WORK/bn-gpu.w" --tol 1e-3
  sed 's/^batch=8/batch=4/' "$c" > "$WORK/bn4.cfg"
  train_np "$WORK/bn-gpu2.w" 2 "$D/data.data" "$WORK/bn4.cfg" -seed 7 -clear -fsdp-backend mpi-staged "$WORK/bn0.w"
  check "GPU frozen batch norm, 2 ranks on one GPU (mpi), equal one rank with batch 8" "$WDIFF" "$WORK/bn-gpu.w" "$WORK/bn-gpu2.w" --tol 1e-4
fi

# 5. NCCL with prefetch and overlapped reduce-scatter, when there are two GPUs.
if part 5; then
  if [ "$ngpu" -ge 2 ]; then
    c=$(test_cfg residual 4 shard_prefetch=1)
    train_np "$WORK/nccl2.w" 2 "$D/data.data" "$c" -seed 5 -fsdp-stats "$WORK/nccl.json"
    check "NCCL, 2 GPUs, prefetch: equal one rank with batch 8" "$WDIFF" "$WORK/one-full.w" "$WORK/nccl2.w" --tol 1e-4
    check "the NCCL backend ran" grep -q '"backend": "nccl"' "$WORK/nccl.json"
  else
    echo "skip - NCCL with 2 ranks needs 2 GPUs (this machine has $ngpu)"
  fi
fi

# 6. Synchronized batch norm on the GPU: Darknet's resnet18 (32x32), 2 ranks on
# one GPU (mpi) running Darknet's batch-norm kernels normalised as cuDNN
# does, against stock Darknet's cuDNN path with twice the batch.
if part 6; then
  c=$WORK/resnet18-bn.cfg
  sed 's/^batch=.*/batch=8/' "$S/cfg/tests/resnet18-bn.cfg" > "$c"
  train "$WORK/bn-stock.w" "$D/data.data" "$c" -seed 5
  sed -i 's/^batch=.*/batch=4/' "$c"
  train_np "$WORK/bn-sync2.w" 2 "$D/data.data" "$c" -seed 5 -fsdp-backend mpi-staged -fsdp-stats "$WORK/bn-sync.json"
  check "GPU sync_bn, 2 ranks on one GPU (mpi), equal stock Darknet (cuDNN) with batch 8 ($("$WDIFF" "$WORK/bn-stock.w" "$WORK/bn-sync2.w" --tol 1e-3 | head -1))" \
    "$WDIFF" "$WORK/bn-stock.w" "$WORK/bn-sync2.w" --tol 1e-3
  check "GPU sync_bn: every rank's rolling statistics bit-identical" \
    python3 -c "import json,sys; r=json.load(open('$WORK/bn-sync.json'))['bn_rolling']; sys.exit(0 if r['checks'] >= 1 and r['differ'] == 0 else 1)"
fi

# 7. With -seed a GPU run repeats to the bit (patches 0042-0044): deterministic
# cuDNN algorithms, upsample's backward in a fixed order, dropout's device
# draws from the seed; stock Darknet and the plugin, tiny.cfg with an
# [upsample] and a [dropout] after its maxpool.
if part 7; then
  c=$WORK/repeat.cfg
  awk '{ print } /^stride=2$/ && !done { print "\n[upsample]\nshard_group=body\nstride=2\n\n[dropout]\nshard_group=body\nprobability=.3"; done = 1 }' \
    "$S/cfg/tests/tiny.cfg" > "$c"
  for who in stock plugin; do
    args=(); [ "$who" = plugin ] && args=(-plugin "$PLUGIN")
    train "$WORK/repeat-$who-a.w" "$D/data.data" "$c" "${args[@]}" -seed 8
    train "$WORK/repeat-$who-b.w" "$D/data.data" "$c" "${args[@]}" -seed 8
    check "GPU, $who: two runs with -seed byte-identical (upsample, dropout, convolutions)" \
      cmp "$WORK/repeat-$who-a.w" "$WORK/repeat-$who-b.w"
  done
  check "GPU: the plugin at world 1 equals stock Darknet with the same seed ($("$WDIFF" "$WORK/repeat-stock-a.w" "$WORK/repeat-plugin-a.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/repeat-stock-a.w" "$WORK/repeat-plugin-a.w" --tol 1e-4
fi

finish
