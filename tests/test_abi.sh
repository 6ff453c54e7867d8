#!/usr/bin/env bash
# A plugin built for another Darknet is refused with a message and exit 3:
# the CPU build's plugin loaded into the GPU build's darknet (layer and
# network differ in size), before anything runs.  The plugin of the GPU build
# does not even load into the CPU darknet (it needs Darknet's CUDA symbols).
# Needs build-gpu/ (tools/test --gpu builds it first); exit 77 (skipped) without.
. "$(dirname "$0")/lib.sh"
G=${FSDP_GPU_BUILD:-$S/build-gpu}
if [ ! -x "$G/darknet" ] || [ ! -f "$G/libdarknet_fsdp.so" ]; then echo "skipped: no GPU build in $G"; exit 77; fi
if [ "$(realpath "$G")" = "$(realpath "$B")" ]; then echo "skipped: run from the CPU build"; exit 77; fi
D=$WORK/data
make_data "$D" --classes 3 --per-class 4
out=$(cd "$D" && "$G/darknet" -plugin "$PLUGIN" classifier train "$D/data.data" "$S/cfg/tests/plain.cfg" 2>&1) && rc=0 || rc=$?
check "the CPU plugin in the GPU darknet: exit 3 (got $rc)" [ "$rc" = 3 ]
check "with a message naming what differs" grep -q "built for a different Darknet (plugin API 3/3, sizeof(layer) [0-9]*/[0-9]*, sizeof(network) [0-9]*/[0-9]*, sizeof(load_args) [0-9]*/[0-9]*, sizeof(dn_hooks) [0-9]*/[0-9]*, GPU 0/1" <<< "$out"
check "before any weights are written" [ ! -e "$D/backup/plain.weights" ]
out=$(cd "$D" && "$DN" -plugin "$G/libdarknet_fsdp.so" classifier train "$D/data.data" "$S/cfg/tests/plain.cfg" 2>&1) && rc=0 || rc=$?
check "the GPU plugin in the CPU darknet: refused at load (exit $rc)" [ "$rc" = 2 ]
check "naming the plugin" grep -q "cannot load plugin $G/libdarknet_fsdp.so" <<< "$out"
finish
