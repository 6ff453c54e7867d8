#!/usr/bin/env bash
# Bad cfg keys, group layouts, flags and rank mismatches stop the run before
# any step: a "file:line: what" message, a non-zero exit on every rank, no
# weights or stats file written, and no hang.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 8
base=$S/cfg/tests/tiny.cfg

# expect_error NAME PATTERN NP CFG [args]: runs NP ranks (or one process
# with the plugin for NP=1) and checks exit code, message and no output.
expect_error() {
  local what=$1 pat=$2 np=$3 cfg=$4; shift 4
  local out rc=0
  [ $# = 0 ] && set -- -fsdp-stats "$WORK/stats.json"
  rm -rf "$D/backup"/* "$WORK/stats.json"
  if [ "$np" = 1 ]; then
    out=$(cd "$D" && timeout 60 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" "$@" 2>&1) || rc=$?
  else
    out=$(cd "$D" && timeout 60 "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$cfg" "$@" 2>&1) || rc=$?
  fi
  local written; written=$( { find "$D/backup" -type f; ls "$WORK/stats.json" 2>/dev/null; } | grep -c . || true)
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qE -- "$pat" <<< "$out" && [ "$written" = 0 ]; then
    pass "$what (exit $rc)"
  else
    fail "$what: exit $rc, files written $written, output: $(grep -i "fsdp\|error" <<< "$out" | head -3)"
  fi
}

# with SED_EDIT: a copy of tiny.cfg edited by sed.
with() { local f=$WORK/c$RANDOM.cfg; sed "$1" "$base" > "$f"; echo "$f"; }
# line_of CFG PATTERN: the line number the error must name.
line_of() { grep -n -m1 -- "$2" "$1" | cut -d: -f1; }

c=$(with 's/^\[net\]$/[net]\nshard=fully/')
expect_error "bad shard value" "c[0-9]+\.cfg:$(line_of "$c" shard=fully): shard=fully: expected full, grad_op or none" 2 "$c"
c=$(with 's/^\[net\]$/[net]\nshard_prefetsh=1/')
expect_error "unknown shard_ key in [net]" "cfg:$(line_of "$c" shard_prefetsh): unknown key shard_prefetsh" 1 "$c"
c=$(with 's/^\[net\]$/[net]\nreshard_after_forward=yes/')
expect_error "reshard_after_forward must be 0 or 1" "cfg:$(line_of "$c" reshard_after): reshard_after_forward=yes: expected 0 or 1" 1 "$c"
c=$(with 's/^\[net\]$/[net]\nshard_auto_group=-5/')
expect_error "shard_auto_group must be a count" "cfg:$(line_of "$c" shard_auto): shard_auto_group=-5" 1 "$c"
c=$(with '0,/^shard_group=body$/s//shard_group=body..x/')
expect_error "malformed group name" "cfg:$(line_of "$c" body..x): shard_group=body..x: a group name is" 2 "$c"
c=$(with '0,/^shard_group=body$/s//shard_group=bo\/dy/')
expect_error "group name with a slash" "cfg:$(line_of "$c" bo/dy): shard_group=bo/dy" 1 "$c"
c=$(with '0,/^filters=7$/s//filters=7\nfrozen=2/')
expect_error "frozen=2 is an error" "cfg:$(line_of "$c" frozen=2): frozen=2: expected 0 or 1" 3 "$c"
c=$(with '0,/^filters=7$/s//filters=7\nshard_grup=x/')
expect_error "unknown shard_ key in a layer" "unknown layer key shard_grup" 1 "$c"
c=$(with 's/^\[net\]$/[net]\nfrozen=1/')
expect_error "frozen in [net]" "cfg:$(line_of "$c" frozen=1): frozen is a layer key" 1 "$c"
# A forward of no image (patch 0049): stock Darknet died of SIGFPE.
c=$(with 's/^subdivisions=1$/subdivisions=16/')
expect_error "batch below subdivisions, by its line" "cfg:$(line_of "$c" subdivisions=16): \[net\] batch=8, subdivisions=16: each forward takes batch/subdivisions images, at least one" 2 "$c"
c=$(with 's/^subdivisions=1$/subdivisions=0/')
expect_error "subdivisions=0, by its line" "cfg:$(line_of "$c" subdivisions=0): \[net\] batch=8, subdivisions=0" 1 "$c"
rc=0
out=$(cd "$D" && timeout 60 "$DN" classifier train "$D/data.data" "$c" 2>&1) || rc=$?
check "and without the plugin (exit $rc)" [ "$rc" = 1 -a "$(grep -c "subdivisions=0: each forward" <<< "$out")" = 1 ]
# A key without '=' reaches the plugin with no value.
for k in frozen shard_group; do
  c=$(with "0,/^filters=7\$/s//filters=7\n$k/")
  expect_error "bare $k line" "cfg:$(line_of "$c" "^$k\$"): $k has no value: write $k=VALUE" 2 "$c"
done
for k in shard shard_prefetch shard_auto_group; do
  c=$(with "s/^\[net\]\$/[net]\n$k/")
  expect_error "bare $k line in [net]" "cfg:$(line_of "$c" "^$k\$"): $k has no value" 1 "$c"
done
# "key=": Darknet dropped the line ("could parse") and the run trained
# without it; kept with an empty value (patch 0051), refused by its line.
c=$(with "0,/^filters=7\$/s//filters=7\nshard_group=/")
expect_error "shard_group= with no value" "cfg:$(line_of "$c" "^shard_group=\$"): shard_group has no value: write shard_group=VALUE" 2 "$c"
for k in shard_auto_group shard_wire; do
  c=$(with "s/^\[net\]\$/[net]\n$k=/")
  expect_error "$k= with no value in [net]" "cfg:$(line_of "$c" "^$k=\$"): $k has no value" 1 "$c"
done
# Crossing spans: layer 3 in group body2 sits between body's layers 0-2 and 4.
c=$(with 's/^output=5$/output=5\nshard_group=other/; s/^output=3$/output=3\nshard_group=body/')
expect_error "crossing group spans" "cfg:$(line_of "$c" shard_group=other): layer 3 \(group other\) lies inside the span of group body \(layers 0-4\)" 2 "$c"
# A frozen deconvolutional layer above a trained one would pass gradients back
# through NULL gradient buffers: refused, naming the frozen=1 line.
h=$(( $(line_of "$base" "filters=6") - 2 ))
c=$(with "${h}s/.*/[deconvolutional]/; s/^filters=6$/filters=6\nfrozen=1/")
expect_error "frozen deconvolutional above a trained layer" "cfg:$(line_of "$c" frozen=1): layer 2 \(deconvolutional\) is frozen but has trainable layers below it" 2 "$c"
# ... and so would a frozen recurrent layer with batch norm.
h=$(( $(line_of "$base" "output=5") - 1 ))
c=$(with "${h}s/.*/[rnn]/; s/^output=5$/output=5\nbatch_normalize=1\nfrozen=1/")
expect_error "frozen recurrent layer with batch norm above a trained layer" "cfg:$(line_of "$c" frozen=1): layer 3 \(recurrent, with batch_normalize\) is frozen but has trainable layers below it" 2 "$c"
expect_error "-fsdp-stats in a missing folder" "-fsdp-stats .*cannot write" 1 "$base" -fsdp-stats "$WORK/no/such/dir/s.json"
expect_error "-fsdp-backend must be mpi, mpi-staged or nccl" "-fsdp-backend tcp: expected mpi, mpi-staged or nccl" 1 "$base" -fsdp-backend tcp
expect_error "-fsdp-plan needs a count of ranks" "-fsdp-plan x: expected a number of ranks from 1 to 4096" 1 "$base" -fsdp-plan x
expect_error "-fsdp-backend mpi-staged needs a GPU build" "-fsdp-backend mpi-staged: this plugin was built without GPU support" 2 "$base" -fsdp-backend mpi-staged

# A weights file that ends inside a layer (truncated, or for another cfg) is
# refused on every rank; one that ends between layers (a trunk) is fine.
train "$WORK/good.w" "$D/data.data" "$base" -seed 2
head -c 5000 "$WORK/good.w" > "$WORK/cut.w"
expect_error "a weights file that ends inside a layer" "cut.w ends inside layer 3: it holds 1245 floats, 475 of them before that layer, which needs 2435" \
  2 "$base" -fsdp-stats "$WORK/stats.json" "$WORK/cut.w"
head -c 13 "$WORK/good.w" > "$WORK/tiny.w"
expect_error "a weights file shorter than its header" "tiny.w: 13 bytes, shorter than a weights file's header" 1 "$base" -fsdp-stats "$WORK/stats.json" "$WORK/tiny.w"
head -c $((20 + 4 * 475)) "$WORK/good.w" > "$WORK/trunk.w"
(cd "$D" && rm -rf backup/* && "${MPIRUN[@]}" -np 2 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$base" -clear "$WORK/trunk.w" > "$WORK/trunk.log" 2>&1) && rc=0 || rc=$?
check "a weights file that ends between layers (a trunk) loads (exit $rc)" [ "$rc" = 0 -a -s "$D/backup/tiny.weights" ]

# Ranks given different cfgs (frozen flags differ): an error on every rank, not a hang.
c1=$(with 's/^filters=6$/filters=6\nfrozen=1/')
rm -rf "$D/backup"/*
out=$(cd "$D" && timeout 60 "${MPIRUN[@]}" -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$base" : \
      -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$c1" 2>&1) && rc=0 || rc=$?
n=$(grep -c "the ranks were given different networks" <<< "$out" || true)
check "frozen flags that differ between ranks stop every rank (exit $rc, $n ranks said so)" \
  [ "$rc" != 0 -a "$rc" != 124 -a "$n" = 2 -a ! -e "$D/backup/tiny.weights" ]
# One rank's cfg error stops the others too.
c2=$(with 's/^\[net\]$/[net]\nshard=bogus/')
out=$(cd "$D" && timeout 60 "${MPIRUN[@]}" -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$base" : \
      -np 1 "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$c2" 2>&1) && rc=0 || rc=$?
check "one rank's cfg error stops the other (exit $rc)" \
  grep -q "another rank found an error in its cfg" <<< "$out"
finish
