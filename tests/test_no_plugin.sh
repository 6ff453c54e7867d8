#!/usr/bin/env bash
# Keys and flags of the plugin are never silently ignored without it
# (docs/DESIGN.md, "cfg keys"): training a cfg with frozen=1 stops before the
# first step, naming the line and how to load the plugin, with a non-zero
# exit and no weights written; inference with the same cfg works; shard keys
# are noted and change nothing (the stock oracle stays stock); a -fsdp-* flag
# is refused by name instead of being taken for a file.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 8
base=$S/cfg/tests/tiny.cfg
frozen=$WORK/frozen.cfg
sed 's/^filters=6$/filters=6\nfrozen=1/' "$base" > "$frozen"
line=$(grep -n -m1 '^frozen=1' "$frozen" | cut -d: -f1)

# run NAME CFG [darknet args...]: one process, no mpirun; sets OUT, RC.
run() {
  local name=$1 cfg=$2; shift 2
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  RC=0
  OUT=$(cd "$D" && timeout 60 "$DN" "$@" classifier train "$D/data.data" "$cfg" 2>&1 < /dev/null) || RC=$?
}
weights_written() { find "$D/backup" -name '*.weights' | grep -c . || true; }

run stock "$frozen"
check "frozen=1 without a plugin: exit $RC, stopped at $frozen:$line, no weights" \
  [ "$RC" = 1 -a "$(weights_written)" = 0 ]
check "  ... the message names the line and the plugin" \
  grep -q "frozen.cfg:$line: frozen=1 needs the darknet-fsdp plugin: run with -plugin PATH" <<< "$OUT"
check_not "  ... and no step ran" grep -qE "^[0-9]+, [0-9.]+: .* avg" <<< "$OUT"

run empty "$frozen" -plugin "$B/tests/libplugin_empty.so"
check "frozen=1 with a plugin that does not claim it: refused the same (exit $RC)" \
  [ "$RC" = 1 -a "$(weights_written)" = 0 ]

sed 's/^frozen=1$/frozen=0/' "$frozen" > "$WORK/frozen0.cfg"
run zero "$WORK/frozen0.cfg" -seed 3
check "frozen=0 without a plugin trains (exit $RC)" [ "$RC" = 0 -a -s "$D/backup/frozen0.weights" ]

run plugin "$frozen" -plugin "$PLUGIN" -seed 3
check "frozen=1 with the plugin trains (exit $RC)" [ "$RC" = 0 -a -s "$D/backup/frozen.weights" ]
cp "$D/backup/frozen.weights" "$WORK/frozen.w"
out=$(cd "$D" && "$DN" classifier valid "$D/data.data" "$frozen" "$WORK/frozen.w" 2>&1) && rc=0 || rc=$?
check "inference with the frozen cfg needs no plugin (classifier valid, exit $rc)" \
  grep -q "top 1:" <<< "$out"

# Shard keys: one note naming the first, and the weights of the cfg without them.
sed '/^shard_group=/d' "$base" > "$WORK/plain.cfg"
train "$WORK/plain.w" "$D/data.data" "$WORK/plain.cfg" -seed 3
train "$WORK/keys.w" "$D/data.data" "$base" -seed 3
first=$(grep -n -m1 '^shard_group=' "$base" | cut -d: -f1)
check "shard keys without the plugin: one note naming $base:$first" \
  [ "$(grep -c "tiny.cfg:$first: note: shard_group=body and the other sharding keys take effect only with the darknet-fsdp plugin" "$WORK/keys.w.err")" = 1 ]
check_not "  ... instead of Darknet's 'Unused field'" grep -q "Unused field" "$WORK/keys.w.err"
check "  ... and the weights are those of the cfg without them" cmp -s "$WORK/plain.w" "$WORK/keys.w"

# A plugin flag without the plugin: refused by name, not opened as a file.
run flag "$base" -fsdp-stats "$WORK/s.json"
check "-fsdp-stats without the plugin: exit $RC, named, not taken for a file" \
  [ "$RC" = 2 -a "$(weights_written)" = 0 ]
check "  ... the message says to load the plugin" \
  grep -q "darknet: -fsdp-stats is a flag of the darknet-fsdp plugin, and no plugin took it: load the plugin with -plugin PATH" <<< "$OUT"
check_not "  ... and Darknet never tried to open it" grep -q "Couldn't open file" <<< "$OUT"
finish
