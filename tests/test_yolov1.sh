#!/usr/bin/env bash
# Darknet's yolov1-tiny.cfg under `detector train` (patch 0047): its
# [detection] layer takes one truth per grid cell where the detector's
# loader gives 90 boxes, which stock Darknet copied past the network's truth
# array ("double free or corruption").  Refused by both sizes, with the
# command it trains with, exit 1, no weights written: in one process and on
# NP ranks.
# usage: test_yolov1.sh NP
. "$(dirname "$0")/lib.sh"
np=$1
D=$WORK/det
"$S/tools/make-detdata" "$D" --images 8 --size 96 > /dev/null
# 2 classes: output 7 x 7 x (2 + 2 x 5) = 588; truth 7 x 7 x (1 + 4 + 2) = 343.
sed -e 's/^batch=.*/batch=2/; s/^height=.*/height=96/; s/^width=.*/width=96/; s/^max_batches *=.*/max_batches=2/' \
    -e 's/^output= *1470/output=588/; s/^classes=20/classes=2/' "$S/deps/darknet/cfg/yolov1-tiny.cfg" > "$WORK/y1.cfg"
want="darknet: the training data has 27648 input and 450 truth values per image, and the network takes 27648 and 343: its last layer is \[detection\] \(YOLOv1\)"
rc=0
out=$(cd "$D" && timeout 120 "$DN" detector train "$D/data.data" "$WORK/y1.cfg" -seed 1 2>&1) || rc=$?
check "yolov1-tiny, detector train: refused by both sizes (exit $rc), no weights written" \
  [ "$rc" = 1 -a "$(grep -cE "$want" <<< "$out")" = 1 -a -z "$(ls "$D/backup")" ]
rc=0
out=$(cd "$D" && timeout 120 "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" detector train "$D/data.data" "$WORK/y1.cfg" -seed 1 2>&1) || rc=$?
check "yolov1-tiny on $np ranks: refused the same way (exit $rc), no weights written" \
  [ "$rc" != 0 -a "$rc" != 124 -a "$(grep -cE "$want" <<< "$out")" -ge 1 -a -z "$(ls "$D/backup")" ]
finish
