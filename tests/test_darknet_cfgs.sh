#!/usr/bin/env bash
# Darknet's own classifier cfgs (deps/darknet/cfg) on NP ranks against stock
# Darknet with the NP-times batch, with -seed, at a small input: the weights
# equal within TOL (the oracle's own rounding: sums in another order, batch
# norm's in particular).  Each cfg is made to train here: batch, one
# subdivision, 2 steps, a constant learning rate, the input SIZE x SIZE, a
# [crop] SIZE - 8 (it must fit its input), the 1000- or 10-way classifier
# a 6-way one.  Cfgs with [dropout] and [crop] check that forward's draws
# are keyed like the data (patch 0045): one process and N ranks draw the
# same masks and crops.  Also: a [crop] larger than its input is refused by
# its line, with and without the plugin, before any work.
# usage: test_darknet_cfgs.sh NP SIZE TOL CFG...
. "$(dirname "$0")/lib.sh"
np=$1 size=$2 tol=$3
shift 3
D=$WORK/data
make_data "$D" --classes 6 --per-class 8 --size "$size"

# prep NAME BATCH OUT [CROP]: the cfg, made to train here; CROP: the crop's size.
prep() {
  python3 - "$S/deps/darknet/cfg/$1.cfg" "$2" "$size" "${4:-$((size - 8))}" > "$3" <<'PY'
import re, sys
src, batch, size, crop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
s = open(src).read()
net, rest = s.split("\n[", 1)
for k, v in (("batch", batch), ("subdivisions", "1"), ("height", size), ("width", size),
             ("max_batches", "2"), ("policy", "constant"), ("burn_in", "0")):
    net, n = re.subn(r"(?m)^%s\s*=.*$" % k, "%s=%s" % (k, v), net)
    if not n:
        net += "\n%s=%s" % (k, v)
rest = re.sub(r"(?m)^crop_(height|width)\s*=.*$", lambda m: "crop_%s=%s" % (m.group(1), crop), rest)
# The classifier before the softmax: 6 classes.
sections = ("[" + rest).split("\n[")
for i in range(len(sections) - 1, -1, -1):
    if re.match(r"\[?(connected|convolutional)\]", sections[i]):
        sections[i] = re.sub(r"(?m)^(output|filters)\s*=\s*\d+\s*$", r"\1=6", sections[i])
        break
print(net + "\n" + "\n[".join(sections))
PY
}

for name in "$@"; do
  mkdir -p "$D/backup"   # (expect_refusal leaves none)
  prep "$name" $((2 * np)) "$WORK/$name.cfg"
  if ! train "$WORK/$name-ref.w" "$D/data.data" "$WORK/$name.cfg" -seed 7; then
    fail "$name: stock Darknet with batch $((2 * np)) ran"
    continue
  fi
  prep "$name" 2 "$WORK/$name.cfg"
  if train_np "$WORK/$name-np.w" "$np" "$D/data.data" "$WORK/$name.cfg" -seed 7; then
    check "$name at ${size}px, $np ranks: weights equal stock Darknet with batch $((2 * np)) ($("$WDIFF" "$WORK/$name-ref.w" "$WORK/$name-np.w" --tol "$tol" | tail -n 1))" \
      "$WDIFF" "$WORK/$name-ref.w" "$WORK/$name-np.w" --tol "$tol"
  else
    fail "$name: $np ranks ran"
  fi
  if grep -q '^\[crop\]' "$WORK/$name.cfg"; then
    # The cfg's own crop (224) on this small input: refused by its line.
    prep "$name" 2 "$WORK/big-crop.cfg" 224
    line=$(grep -n '^crop_height=' "$WORK/big-crop.cfg" | cut -d: -f1)
    want="big-crop.cfg:$line: \[crop\] \(layer 0\) crop_height=224: larger than its input, $size x $size"
    rc=0
    out=$(cd "$D" && timeout 60 "$DN" classifier train "$D/data.data" "$WORK/big-crop.cfg" 2>&1) || rc=$?
    check "$name: a crop of 224 on ${size}px refused by its line without the plugin (exit $rc)" \
      [ "$rc" != 0 -a "$rc" != 124 -a "$(grep -cE "$want" <<< "$out")" = 1 ]
    expect_refusal "$name: and on $np ranks" "$want" "$WORK/big-crop.cfg"
  fi
done
finish
