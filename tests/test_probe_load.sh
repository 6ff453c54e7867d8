#!/usr/bin/env bash
# The probe workflow's loading: pre-trained weights into a probe cfg whose
# head differs.  Loading the whole pre-trained file with dontload=1 on the new
# head, and loading a trunk-only file cut by `darknet partial`, must both
# load the trunk and leave the head freshly initialised: on 2 ranks they
# train to the same weights, and the frozen trunk equals the pre-trained one.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
train "$WORK/pre.w" "$D/data.data" "$S/cfg/tests/plain.cfg" -seed 4   # conv 7, maxpool, conv 5, connected 3
trunk=$(( (7 + 27 * 7) + (5 + 63 * 5) ))
probe() { # probe OUT [KEY]: trunk frozen, a new two-layer head
  sed -e 's/^filters=\(.\)$/filters=\1\nfrozen=1\nshard_group=trunk/; s/^max_batches=.*/max_batches=3/' \
      -e "s/^\[connected\]$/[connected]\nshard_group=head\n${2:-}/; s/^output=3$/output=6\nactivation=leaky\n\n[connected]\n${2:-}\nshard_group=head\noutput=3/" \
      -e 's/^batch=8/batch=4/' "$S/cfg/tests/plain.cfg" > "$1"
}
probe "$WORK/dontload.cfg" dontload=1
probe "$WORK/partial.cfg"
"$DN" partial "$WORK/partial.cfg" "$WORK/pre.w" "$WORK/trunk.w" 3 > "$WORK/partial.log" 2>&1
train_np "$WORK/a.w" 2 "$D/data.data" "$WORK/dontload.cfg" -seed 8 -clear "$WORK/pre.w"
train_np "$WORK/b.w" 2 "$D/data.data" "$WORK/partial.cfg" -seed 8 -clear "$WORK/trunk.w"
check "dontload=1 on the new head and a trunk-only file give the same probe" "$WDIFF" "$WORK/a.w" "$WORK/b.w" --exact --floats 0:999999
check "the probe's trunk is the pre-trained trunk" "$WDIFF" "$WORK/pre.w" "$WORK/a.w" --exact --floats "0:$trunk"
check_not "the new head trained" "$WDIFF" "$WORK/pre.w" "$WORK/a.w" --exact --floats "$trunk:999999"
finish
