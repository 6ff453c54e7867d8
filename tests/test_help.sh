#!/usr/bin/env bash
# Help on the command line (docs/DESIGN.md, "Command line"): `darknet help`,
# -h and --help list Darknet's commands and global flags, and with the plugin
# its flags and cfg keys; -fsdp-help covers every -fsdp-* flag and every cfg
# key the code reads (found in the source here, so a new flag or key without
# a line of help fails this test); an unknown or mistyped flag is refused by
# name instead of reaching Darknet.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 4
cfg=$S/cfg/tests/tiny.cfg

for h in help -h --help; do
  out=$("$DN" $h 2>&1) && rc=0 || rc=$?
  check "darknet $h without a plugin: exit $rc, commands and global flags" \
    [ "$rc" = 0 -a "$(grep -cE '^  (classifier|-plugin PATH|-seed S) ' <<< "$out")" = 3 ]
  check "  ... and how to see the plugin's" grep -q "No plugin loaded" <<< "$out"
done

help=$("$DN" -plugin "$PLUGIN" -fsdp-help 2>&1) && rc=0 || rc=$?
check "-fsdp-help exits 0 ($rc)" [ "$rc" = 0 ]
# Every flag the plugin's source names, and every key fsdp_cfg.c compares.
flags=$(grep -ohE '"-fsdp-[a-z0-9-]+"' "$S"/plugin/*.c "$S"/plugin/*/*.c | tr -d '"' | sort -u)
keys=$(grep -ohE 'strcmp\(key, "[A-Za-z0-9_]+"\)' "$S/plugin/core/fsdp_cfg.c" | sed 's/.*"\(.*\)".*/\1/' | sort -u)
[ -n "$flags" ] && [ -n "$keys" ] || fail "found no flags or keys in the source"
for f in $flags; do
  check "-fsdp-help explains $f on one line" grep -qE "^  $f( [^ ]+)? +[A-Za-z0-9].{10,}" <<< "$help"
done
for k in $keys; do
  check "-fsdp-help explains cfg key $k on one line" grep -qE "^  $k=[^ ]+ +[A-Za-z0-9].{10,}" <<< "$help"
done
n=$(grep -cE '^  -fsdp-' <<< "$help")
check "-fsdp-help lists each flag once ($n lines, $(wc -w <<< "$flags") flags in the source)" [ "$n" = "$(wc -w <<< "$flags")" ]

out=$(cd "$D" && "${MPIRUN[@]}" -np 3 "$DN" -plugin "$PLUGIN" -fsdp-help 2>&1) && rc=0 || rc=$?
check "-fsdp-help on 3 ranks prints once (exit $rc)" [ "$rc" = 0 -a "$(grep -c '^  -fsdp-help ' <<< "$out")" = 1 ]

both=$("$DN" -plugin "$PLUGIN" help 2>&1) && rc=0 || rc=$?
check "darknet help with the plugin: Darknet's part and the plugin's (exit $rc)" \
  [ "$rc" = 0 -a "$(grep -c '^  -plugin PATH' <<< "$both")" = 1 -a "$(grep -cE '^  -fsdp-' <<< "$both")" = "$n" ]

rm -rf "$D/backup"; mkdir -p "$D/backup"
out=$(cd "$D" && "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" -fsdp-help 2>&1) && rc=0 || rc=$?
check "-fsdp-help after a command prints help and runs nothing (exit $rc)" \
  [ "$rc" = 0 -a -z "$(ls "$D/backup")" ] 
check_not "  ... no layer was built" grep -q "^layer " <<< "$out"

# refuse WHAT PATTERN ARGS...: a non-zero exit, the message, nothing trained.
refuse() {
  local what=$1 pat=$2 out rc=0; shift 2
  rm -rf "$D/backup"; mkdir -p "$D/backup"
  out=$(cd "$D" && timeout 60 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" "$@" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qF -- "$pat" <<< "$out" && [ -z "$(ls "$D/backup")" ] &&
     ! grep -q "Couldn't open file" <<< "$out"; then
    pass "$what (exit $rc)"
  else
    fail "$what: exit $rc, output: $(tail -n 3 <<< "$out")"
  fi
}
refuse "a mistyped flag is named, with the one meant" "fsdp: unknown flag -fsdp-stat: did you mean -fsdp-stats?" -fsdp-stat "$WORK/x.json"
refuse "an unknown flag is named, with the flags there are" "fsdp: unknown flag -fsdp-bogus (the plugin's flags: -fsdp-stats," -fsdp-bogus
refuse "a flag given twice" "fsdp: -fsdp-log is given twice" -fsdp-log "$WORK/a.jsonl" -fsdp-log "$WORK/b.jsonl"
refuse "a flag without its value" "fsdp: -fsdp-log needs a value (FILE)" -fsdp-log
refuse "-fsdp-log in a folder that does not exist" "fsdp: -fsdp-log $WORK/no/l.jsonl: cannot write in $WORK/no" -fsdp-log "$WORK/no/l.jsonl"
finish
