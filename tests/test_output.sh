#!/usr/bin/env bash
# What ranks print (docs/DESIGN.md, "Command line"): on 3 ranks only rank 0
# prints Darknet's start-up lines (the layer table, "Loading weights"), while
# a rank that fails alone still shows its own error, Darknet's or the
# plugin's; FSDP_ALL_RANKS_PRINT=1 lets every rank print (0 is as unset); a
# resumed run says what it loaded.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 8
cfg=$S/cfg/tests/tiny.cfg
np3=("${MPIRUN[@]}" -np 3 "$DN" -plugin "$PLUGIN")
train "$WORK/init.w" "$D/data.data" "$cfg" -seed 2

(cd "$D" && rm -rf backup/* && timeout 120 "${np3[@]}" classifier train "$D/data.data" "$cfg" "$WORK/init.w" -clear \
  > "$WORK/np3.out" 2> "$WORK/np3.err") && rc=0 || rc=$?
check "3 ranks train (exit $rc)" [ "$rc" = 0 -a -s "$D/backup/tiny.weights" ]
# Tables counted by their header line wherever it starts: the launcher may
# forward another rank's unfinished line ("    1 ") just before it.
tables() { grep -o 'layer     filters' "$1" | wc -l; }
check "one layer table on stderr, not three ($(tables "$WORK/np3.err"))" [ "$(tables "$WORK/np3.err")" = 1 ]
check "one 'Loading weights' line ($(grep -c 'Loading weights' "$WORK/np3.err"))" [ "$(grep -c 'Loading weights' "$WORK/np3.err")" = 1 ]

(cd "$D" && rm -rf backup/* && FSDP_ALL_RANKS_PRINT=1 timeout 120 "${MPIRUN[@]}" -np 3 -x FSDP_ALL_RANKS_PRINT "$DN" \
  -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" > /dev/null 2> "$WORK/all.err") && rc=0 || rc=$?
check "FSDP_ALL_RANKS_PRINT=1: every rank prints its table (exit $rc, $(tables "$WORK/all.err"))" \
  [ "$rc" = 0 -a "$(tables "$WORK/all.err")" = 3 ]
(cd "$D" && rm -rf backup/* && FSDP_ALL_RANKS_PRINT=0 timeout 120 "${MPIRUN[@]}" -np 3 -x FSDP_ALL_RANKS_PRINT "$DN" \
  -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" > /dev/null 2> "$WORK/none.err") && rc=0 || rc=$?
check "FSDP_ALL_RANKS_PRINT=0: rank 0 alone prints, as unset (exit $rc, $(tables "$WORK/none.err"))" \
  [ "$rc" = 0 -a "$(tables "$WORK/none.err")" = 1 ]

# Rank 2 alone is given a weights file that does not exist: Darknet stops it
# while it loads, inside the quiet start-up; its own message must show.
(cd "$D" && rm -rf backup/* && timeout 120 "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$cfg" "$WORK/init.w" : -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" \
  "$WORK/missing.w" > /dev/null 2> "$WORK/miss.err") && rc=0 || rc=$?
check "rank 2's own Darknet error shows (exit $rc)" \
  [ "$rc" != 0 -a "$rc" != 124 -a "$(grep -c "Couldn't open file: $WORK/missing.w" "$WORK/miss.err")" = 1 ]
check "  ... said to be rank 2's" grep -q "fsdp: rank 2 stopped while starting; its last lines on stderr:" "$WORK/miss.err"
check "  ... with rank 0's table, and no other" [ "$(tables "$WORK/miss.err")" = 1 ]

# Rank 1 alone has a bad cfg key: the plugin's message from rank 1 shows.
sed 's/^\[net\]$/[net]\nshard=fully/' "$cfg" > "$WORK/bad.cfg"
(cd "$D" && rm -rf backup/* && timeout 120 "${MPIRUN[@]}" -np 1 "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$cfg" : -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/bad.cfg" \
  : -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" > /dev/null 2> "$WORK/bad.err") && rc=0 || rc=$?
bad=$(grep -n -m1 '^shard=fully' "$WORK/bad.cfg" | cut -d: -f1)
check "rank 1's own cfg error shows (exit $rc)" \
  [ "$rc" != 0 -a "$rc" != 124 -a "$(grep -c "bad.cfg:$bad: shard=fully: expected full, grad_op or none" "$WORK/bad.err")" = 1 ]
check "  ... and one layer table" [ "$(tables "$WORK/bad.err")" = 1 ]

# Resume: rank 0 says what it loaded.
sed 's/^max_batches=.*/max_batches=2/' "$cfg" > "$WORK/two.cfg"
(cd "$D" && rm -rf backup/* && timeout 120 "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$WORK/two.cfg" -seed 4 -fsdp-checkpoint > /dev/null 2>&1) && rc=0 || rc=$?
check "2 ranks save a checkpoint (exit $rc)" [ "$rc" = 0 -a -s "$D/backup/two.weights.fsdp-1-of-2" ]
mkdir -p "$WORK/ck" && cp "$D"/backup/two.weights* "$WORK/ck/"
(cd "$D" && rm -rf backup/* && timeout 120 "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" classifier train \
  "$D/data.data" "$cfg" -seed 4 -fsdp-resume "$WORK/ck/two.weights" > /dev/null 2> "$WORK/resume.err") && rc=0 || rc=$?
check "the resumed run says once what it loaded: step, files, world (exit $rc)" \
  [ "$rc" = 0 -a "$(grep -c "^fsdp: resumed at step 2 (32 images seen) from $WORK/ck/two.weights and its shard checkpoints $WORK/ck/two.weights.fsdp-{0..1}-of-2, written on 2 ranks, resumed on 2" "$WORK/resume.err")" = 1 ]
finish
