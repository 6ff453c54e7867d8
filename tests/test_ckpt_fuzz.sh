#!/usr/bin/env bash
# Checkpoint fuzzer (tests/ckpt_fuzz.py): genuine checkpoints made once per
# family (beside a weights file on 2 and on 3 ranks, shard=full with Adam and
# a frozen layer; shard=none with SGD; on the clock, with a MANIFEST), then
# hundreds of crafted copies with valid checksums, each resumed on 2 ranks:
# every rank ends within 10 s naming the file, under 100 MB above the
# genuine resume's peak, nothing outside the backup folder changed.
# usage: test_ckpt_fuzz.sh [JOBS]   cases at once (mpirun's start-up is mostly waiting);
#   FUZZ_ONLY=TEXT: the cases whose name holds it; FUZZ_VALGRIND=N: N loader cases under valgrind
. "$(dirname "$0")/lib.sh"
jobs=${1:-2}
D=$WORK/data
make_data "$D" --classes 3 --per-class 4
# mk NAME SHARD OPT: cfg/tests/residual.cfg, 2 steps of 2, its stem frozen.
mk() {
  sed -e "s/^batch=.*/batch=2/; s/^max_batches=.*/max_batches=2/; s/^\[net\]$/[net]\nshard=$2/; 0,/^filters=4$/s//filters=4\nfrozen=1/" \
      "$S/cfg/tests/residual.cfg" > "$WORK/$1.cfg"
  [ "$3" = adam ] && sed -i 's/^\[net\]$/[net]\nadam=1\nB1=0.9\nB2=0.999\neps=0.00001/' "$WORK/$1.cfg"
  return 0
}
mk beside2 full adam
mk beside3 full adam
mk none2 none sgd
mk clock full adam
save() { # save FAMILY NP FLAGS...: the genuine checkpoint of a family
  local fam=$1 np=$2; shift 2
  rm -rf "$D/backup" && mkdir -p "$D/backup"
  cp "$WORK/$fam.cfg" "$WORK/a.cfg"
  local x=(); [ "${1:-}" = -x ] && { x=(-x "$2"); shift 2; }
  (cd "$D" && "${MPIRUN[@]}" "${x[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier train "$D/data.data" "$WORK/a.cfg" \
     -seed 3 "$@" > "$WORK/$fam.log" 2>&1) || { fail "$fam: the genuine checkpoint: $(tail -n 3 "$WORK/$fam.log")"; finish; }
}
for f in beside2:2 beside3:3 none2:2; do
  save "${f%:*}" "${f#*:}" -fsdp-checkpoint
  mkdir -p "$WORK/${f%:*}" && cp "$D"/backup/a.weights* "$WORK/${f%:*}/"
done
# In the foreground: a checkpoint at each of the 2 steps, whatever the disk's speed.
FSDP_CHECKPOINT_FOREGROUND=1 save clock 2 -x FSDP_CHECKPOINT_FOREGROUND -fsdp-checkpoint-every 0.00001 -fsdp-checkpoint-keep 2
cp -r "$D/backup" "$WORK/clock"
rm -f "$WORK"/clock/*.weights
check "the genuine checkpoints: $(ls "$WORK"/beside2 | wc -l) + $(ls "$WORK"/beside3 | wc -l) + $(ls "$WORK"/none2 | wc -l) files, $(ls "$WORK"/clock/a.fsdp | tr '\n' ' ')" \
  [ -e "$WORK/beside3/a.weights.fsdp-2-of-3" ] && [ -e "$WORK/clock/a.fsdp/step-00000001/MANIFEST" ] && [ -e "$WORK/clock/a.fsdp/step-00000002/MANIFEST" ]
[ -n "${FUZZ_PREP_ONLY:-}" ] && { python3 "$S/tests/ckpt_fuzz.py" "$WORK" "$DN" "$PLUGIN" "$jobs"; exit; }
check "every crafted checkpoint refused by name or skipped, in time, within memory, nothing outside changed" \
  python3 "$S/tests/ckpt_fuzz.py" "$WORK" "$DN" "$PLUGIN" "$jobs" "${MPIRUN[@]}"
# The cases whose files reach the loader's reads (fill, load_extras), and the
# genuine ones, with every rank under valgrind: no memory error.
if command -v valgrind > /dev/null; then
  check "the loader's cases under valgrind: no memory error" \
    env FUZZ_VALGRIND=2 python3 "$S/tests/ckpt_fuzz.py" "$WORK" "$DN" "$PLUGIN" "$jobs" "${MPIRUN[@]}"
else
  echo "skipped: no valgrind (tools/packages.txt installs it)"
fi
finish
