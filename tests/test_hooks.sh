#!/usr/bin/env bash
# The plugin interface: hooks are called where documented, a plugin that does
# nothing changes nothing (byte-identical weights), -seed reproduces a run,
# and bad plugins and flags are refused with a message and non-zero exit.
. "$(dirname "$0")/lib.sh"

D=$WORK/data
make_data "$D" --classes 3 --per-class 16
CFG=$S/cfg/tests/plain.cfg

train "$WORK/stock.w" "$D/data.data" "$CFG" -seed 11
train "$WORK/stock2.w" "$D/data.data" "$CFG" -seed 11
train "$WORK/other.w" "$D/data.data" "$CFG" -seed 12
check "same -seed gives byte-identical weights" cmp -s "$WORK/stock.w" "$WORK/stock2.w"
check_not "another -seed gives other weights" cmp -s "$WORK/stock.w" "$WORK/other.w"

train "$WORK/empty.w" "$D/data.data" "$CFG" -plugin "$B/tests/libplugin_empty.so" -seed 11
check "a plugin with no hooks changes nothing" cmp -s "$WORK/stock.w" "$WORK/empty.w"
DARKNET_PLUGIN="$B/tests/libplugin_empty.so" train "$WORK/env.w" "$D/data.data" "$CFG" -seed 11
check "DARKNET_PLUGIN loads the same way" cmp -s "$WORK/stock.w" "$WORK/env.w"

# Flags anywhere on the command line: -seed after the command's own args.
(cd "$D" && rm -f backup/plain.weights && "$DN" classifier train "$D/data.data" "$CFG" -seed 11 >/dev/null 2>&1)
check "-seed after the command's arguments works too" cmp -s "$WORK/stock.w" "$D/backup/plain.weights"

# The counting plugin: every hook, exact counts.  plain.cfg: 5 layers, 5 steps.
sed 's/^\[maxpool\]$/[maxpool]\ncounter_key=1/' "$CFG" > "$WORK/plain.cfg"
export FSDP_COUNT_FILE=$WORK/counts
train "$WORK/counted.w" "$D/data.data" "$WORK/plain.cfg" -plugin "$B/tests/libplugin_counter.so" -seed 11
check "the counting plugin changes nothing" cmp -s "$WORK/stock.w" "$WORK/counted.w"
C=$FSDP_COUNT_FILE
expect() { local v; v=$(count "$1" "$C"); check "hook $1 called $2 times (got ${v:-none})" [ "${v:-x}" = "$2" ]; }
options=$(grep -cE '^[a-z_]+=' "$WORK/plain.cfg")
expect layers 5
expect status 0
expect cfg_option "$options"
expect cfg_claimed 1
expect network_built 1
expect forward_before 25
expect forward_after 25
expect backward_before 25
expect backward_after 25
expect update_before 5
expect update_after 5
expect update_layer_before 25
expect update_layer_after 25
expect train_step 5
expect weights_loaded 0
expect save_begin 1
expect save_layer_before 5
expect save_layer_after 5
expect save_end 1
check_not "a claimed key is not reported as unused" grep -q "counter_key" "$WORK/counted.w.log" "$WORK/counted.w.err"
check "an unclaimed unknown key still is" grep -q "Unused field" <(cd "$D" && "$DN" classifier train "$D/data.data" "$WORK/plain.cfg" -seed 11 2>&1 >/dev/null)

# Loading a weights file calls weights_loaded; training on from it works.
(cd "$D" && "$DN" -plugin "$B/tests/libplugin_counter.so" classifier train "$D/data.data" "$WORK/plain.cfg" "$WORK/stock.w" -seed 11 -clear >/dev/null 2>&1)
expect weights_loaded 1
expect network_built 1

# Refusals: message and exit code.
refuse() { # refuse WHAT PATTERN CMD...
  local what=$1 pat=$2; shift 2
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && grep -q -- "$pat" <<< "$out"; then pass "$what (exit $rc)"; else fail "$what: exit $rc, output: $(tail -3 <<< "$out")"; fi
}
refuse "missing plugin file" "cannot load plugin" "$DN" -plugin "$WORK/nope.so" classifier train "$D/data.data" "$CFG"
refuse "-seed needs a number" "not a non-negative integer" "$DN" -seed abc classifier train "$D/data.data" "$CFG"
refuse "-plugin needs a value" "needs a value" "$DN" classifier train "$D/data.data" "$CFG" -plugin
refuse "missing cfg file exits non-zero" "Couldn't open file" "$DN" classifier train "$D/data.data" "$WORK/none.cfg"
finish
