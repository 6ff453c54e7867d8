#!/usr/bin/env bash
# `detector train` on N ranks (YOLO): N ranks with batch b against stock
# Darknet, one process with batch N*b, on a generated detection set (96x96,
# 2 classes, boxes); two runs with one -seed byte-identical; the iteration
# lines count the global batch.  One case per run:
#   yolov3 NP   cfg/tests/yolov3-tiny.cfg (yolo layers, route, upsample)
#   yolov2 NP   cfg/tests/yolov2-tiny.cfg (region layer), also subdivisions=2
# Each comparison also checks that training moved the weights (from the
# first step to the last) by over 20 times its tolerance.
#   random NP   yolov3-tiny with random=1: resized at steps 0 and 10
#   frozen NP [random]
#               yolov3-tiny's backbone (darknet partial ... 15) frozen in nested
#               groups under a trained head: backbone bytes unchanged, no
#               gradient traffic or backward gather for it, the head equal to
#               one process with the N-times batch; with random=1 too (the
#               deltas of the backbone, dropped, come back at each resize and
#               are dropped again)
#   regressor NP  `regressor train` (a small conv net regressing the first box's
#               5 label values) on the same set, with synchronized batch norm
#   refuse NP   a training command that does not split the global batch is
#               refused on every rank, naming it
# usage: test_detector.sh CASE NP [random|node]   (node: shard_node_shared=1)
. "$(dirname "$0")/lib.sh"
case_name=$1 np=$2 variant=${3:-}
D=$WORK/det
"$S/tools/make-detdata" "$D" --images 24 >/dev/null
b=2

# det OUT NP CFG [darknet args...]: `$command train` (NP = 0: stock Darknet,
# one process, no plugin); stdout to OUT.log, stderr to OUT.err, the final
# weights (backup/CFG$final.weights) copied to OUT.
command=detector final=_final
det() {
  local out=$1 n=$2 cfg=$3; shift 3
  local base; base=$(basename "$cfg" .cfg)
  local cmd=("$DN")
  [ "$n" = 0 ] || cmd=("${MPIRUN[@]}" -np "$n" "$DN" -plugin "$PLUGIN")
  (cd "$D" && rm -f backup/"$base$final".weights &&
   "${cmd[@]}" "$command" train "$D/data.data" "$cfg" "$@" > "$out.log" 2> "$out.err") \
    || { echo "$command train ($n) failed, log:"; tail -n 20 "$out.log" "$out.err"; return 1; }
  cp "$D/backup/$base$final.weights" "$out"
}
# mk OUT SRC BATCH [sed script]: a copy of cfg/tests/SRC.cfg with batch BATCH
# (trainable batch norm as in Darknet's cfgs: synchronized across ranks).
mk() {
  sed -e "s/^batch=.*/batch=$3/" -e "${4:-}" "$S/cfg/tests/$2.cfg" > "$1"
  if [ "$variant" = node ]; then sed -i 's/^\[net\]$/[net]\nshard_node_shared=1/' "$1"; fi
}
images() { grep -o '[0-9]* images$' "$1" | tail -1; }
# equal_runs NAME CFG_STOCK CFG_RANKS [darknet args...]: the core checks.
equal_runs() {
  local name=$1 cs=$2 cr=$3; shift 3
  det "$WORK/stock.w" 0 "$cs" -seed 5 "$@"
  if [ "$stock_twice" = 1 ]; then
    det "$WORK/stock2.w" 0 "$cs" -seed 5 "$@"
    check "$name: two stock runs with -seed 5 byte-identical" cmp -s "$WORK/stock.w" "$WORK/stock2.w"
  fi
  det "$WORK/np.w" "$np" "$cr" -seed 5 "$@"
  det "$WORK/np2.w" "$np" "$cr" -seed 5 "$@"
  check "$name: two $np-rank runs with -seed 5 byte-identical" cmp -s "$WORK/np.w" "$WORK/np2.w"
  check "$name: $np ranks of batch $b equal one process of batch $((b * np)) to $tol ($("$WDIFF" "$WORK/stock.w" "$WORK/np.w" --tol "$tol" | head -1))" \
    "$WDIFF" "$WORK/stock.w" "$WORK/np.w" --tol "$tol"
  check "$name: iteration lines count the global batch ($(images "$WORK/np.w.log") = $(images "$WORK/stock.w.log"))" \
    test "$(images "$WORK/np.w.log")" = "$(images "$WORK/stock.w.log")"
  # The comparison means something only if training moved the weights
  # well beyond the tolerance: after the first step (max_batches=0 would
  # mean "forever" to regressor train) to the last.
  sed 's/^max_batches.*/max_batches=1/' "$cs" > "$WORK/first.cfg"
  det "$WORK/first.w" 0 "$WORK/first.cfg" -seed 5 "$@"
  local moved; moved=$({ "$WDIFF" "$WORK/first.w" "$WORK/stock.w" --floats 0:999999 || true; } | grep -o 'max |diff| [^,]*' | cut -d' ' -f3)
  check "$name: training moved the weights by $moved after the first step, over 20 x $tol" \
    awk -v m="$moved" -v t="$tol" 'BEGIN { exit !(m > 20 * t) }'
}
NOBN='s/^batch_normalize=1/batch_normalize=0/'
stock_twice=1 tol=1e-4

case $case_name in
  yolov3)
    # Without batch norm: equal to float rounding.
    mk "$WORK/s.cfg" yolov3-tiny $((b * np)) "$NOBN"
    mk "$WORK/r.cfg" yolov3-tiny $b "$NOBN"
    det "$WORK/w1.w" 1 "$WORK/s.cfg" -seed 5
    det "$WORK/w1b.w" 1 "$WORK/s.cfg" -seed 5
    check "yolov3-tiny: two 1-rank plugin runs with -seed 5 byte-identical" cmp -s "$WORK/w1.w" "$WORK/w1b.w"
    equal_runs "yolov3-tiny, no batch norm" "$WORK/s.cfg" "$WORK/r.cfg"
    check "yolov3-tiny: the plugin on 1 rank equals stock Darknet ($("$WDIFF" "$WORK/stock.w" "$WORK/w1.w" --tol 1e-5 | head -1))" \
      "$WDIFF" "$WORK/stock.w" "$WORK/w1.w" --tol 1e-5
    # Trainable batch norm, synchronized across ranks (the cfg as Darknet
    # has it).  Training this net is sensitive to the last bits of the batch
    # statistics: stock Darknet alone, with only its batch mean summed in
    # double instead of float, moves by up to 3e-4 in 6 steps at rate 1e-4
    # (2e-3 at 1e-3), and N ranks sum in another order too (measured: 6e-5 to
    # 1e-3).  Per-rank statistics (sync_bn=0) move it by 2e-2: the tolerance
    # lies between.
    mk "$WORK/s.cfg" yolov3-tiny $((b * np)) 's/^learning_rate=.*/learning_rate=0.0001/'
    mk "$WORK/r.cfg" yolov3-tiny $b 's/^learning_rate=.*/learning_rate=0.0001/'
    stock_twice=0 tol=2e-3
    equal_runs "yolov3-tiny, batch norm" "$WORK/s.cfg" "$WORK/r.cfg" ;;
  yolov2)
    # With trainable, synchronized batch norm as Darknet's cfg has it (this
    # net is not sensitive to the statistics' last bits: measured 2e-6).
    # Without batch norm the region head barely trains in 6 steps (5e-6).
    mk "$WORK/s.cfg" yolov2-tiny $((b * np)) 's/^learning_rate=.*/learning_rate=0.0001/'
    mk "$WORK/r.cfg" yolov2-tiny $b 's/^learning_rate=.*/learning_rate=0.0001/'
    det "$WORK/w1.w" 1 "$WORK/s.cfg" -seed 5
    det "$WORK/w1b.w" 1 "$WORK/s.cfg" -seed 5
    check "yolov2-tiny: two 1-rank plugin runs with -seed 5 byte-identical" cmp -s "$WORK/w1.w" "$WORK/w1b.w"
    equal_runs "yolov2-tiny, batch norm" "$WORK/s.cfg" "$WORK/r.cfg"
    check "yolov2-tiny: the plugin on 1 rank equals stock Darknet ($("$WDIFF" "$WORK/stock.w" "$WORK/w1.w" --tol 1e-5 | head -1))" \
      "$WDIFF" "$WORK/stock.w" "$WORK/w1.w" --tol 1e-5
    # subdivisions=2: the ranks' micro-batch i together is one process's
    # micro-batch i (patch 0023's layout), batch norm included.
    sed -i "s/^subdivisions=.*/subdivisions=2/; s/^batch=.*/batch=$((2 * b * np))/" "$WORK/s.cfg"
    sed -i "s/^subdivisions=.*/subdivisions=2/; s/^batch=.*/batch=$((2 * b))/" "$WORK/r.cfg"
    det "$WORK/stock.w" 0 "$WORK/s.cfg" -seed 5
    det "$WORK/np.w" "$np" "$WORK/r.cfg" -seed 5
    check "yolov2-tiny, batch norm, subdivisions=2: equal to one process to $tol ($("$WDIFF" "$WORK/stock.w" "$WORK/np.w" --tol "$tol" | head -1))" \
      "$WDIFF" "$WORK/stock.w" "$WORK/np.w" --tol "$tol" ;;
  random)
    # Darknet resizes every 10 batches to 320..608, and to 608 in the last
    # 200 batches: here resized at steps 0 and 10, to 608 (the draw itself
    # is not exercised; the engine's survival of resize_network is).  A small
    # rate keeps the net finite at 608x608.
    b=1 stock_twice=0
    # Batch norm off: at 608x608 its sensitivity (see yolov3) is larger.
    R='s/^random=0/random=1/; s/^max_batches.*/max_batches=11/; s/^learning_rate=.*/learning_rate=0.00002/; s/^batch_normalize=1/batch_normalize=0/'
    mk "$WORK/s.cfg" yolov3-tiny $((b * np)) "$R"
    mk "$WORK/r.cfg" yolov3-tiny $b "$R"
    equal_runs "random=1" "$WORK/s.cfg" "$WORK/r.cfg"
    check "random=1: resized twice ($(grep -c '^Resizing' "$WORK/np.w.log"))" test "$(grep -c '^Resizing' "$WORK/np.w.log")" = 2
    check "random=1: the same sizes as stock" test "$(grep -A1 '^Resizing' "$WORK/np.w.log")" = "$(grep -A1 '^Resizing' "$WORK/stock.w.log")" ;;
  frozen)
    # Pre-train everything (stock), cut the backbone (layers 0-14) out as
    # Darknet's yolov3-tiny.conv.15 is made, and train a fresh head on it.
    # 200 steps: rolling statistics start at 0 and move 1% a step, and the
    # frozen backbone normalizes with them.
    mk "$WORK/pre.cfg" yolov3-tiny 4 's/^max_batches.*/max_batches=200/'
    det "$WORK/pre.w" 0 "$WORK/pre.cfg" -seed 3
    "$DN" partial "$WORK/pre.cfg" "$WORK/pre.w" "$WORK/conv15.w" 15 > /dev/null 2>&1
    lo=0 hi=$((($(stat -c %s "$WORK/conv15.w") - 20) / 4))
    # Layers 0-7 in backbone.low, 8-14 in backbone.high (frozen), 15- in head
    # (with trainable, synchronized batch norm in layers 18 and 21).
    probe() {
      mk "$1" yolov3-tiny "$2"
      awk '/^\[/ && $0 != "[net]" { n++; print; if (n <= 8) print "frozen=1\nshard_group=backbone.low";
             else if (n <= 15) print "frozen=1\nshard_group=backbone.high"; else print "shard_group=head"; next }
           { print }' "$1" > "$1.tmp"
      mv "$1.tmp" "$1"
    }
    probe "$WORK/s.cfg" $((b * np)); probe "$WORK/r.cfg" $b
    steps=6
    if [ "$variant" = random ]; then
      steps=11   # resized (to 608) at steps 0 and 10
      sed -i 's/^random=0/random=1/; s/^max_batches.*/max_batches=11/' "$WORK/s.cfg" "$WORK/r.cfg"
    fi
    # max_batches=0: no step, the fresh head as saved (to see that it trains).
    sed 's/^max_batches.*/max_batches=0/' "$WORK/s.cfg" > "$WORK/s0.cfg"
    det "$WORK/start.w" 1 "$WORK/s0.cfg" -seed 9 -clear "$WORK/conv15.w"
    det "$WORK/ref.w" 1 "$WORK/s.cfg" -seed 9 -clear "$WORK/conv15.w"
    check "world 1: backbone floats [0,$hi) bit-identical to the start (weights and rolling statistics)" \
      "$WDIFF" "$WORK/conv15.w" "$WORK/ref.w" --exact --floats "$lo:$hi"
    check_not "world 1: the head did train" "$WDIFF" "$WORK/start.w" "$WORK/ref.w" --exact --floats "$hi:999999"
    [ "$variant" != random ] || check "world 1: resized twice" test "$(grep -c '^Resizing' "$WORK/ref.w.log")" = 2
    det "$WORK/np.w" "$np" "$WORK/r.cfg" -seed 9 -clear -fsdp-stats "$WORK/stats.json" "$WORK/conv15.w"
    check "$np ranks: equal to one process with batch $((b * np)) ($("$WDIFF" "$WORK/ref.w" "$WORK/np.w" --tol 1e-4 | head -1))" \
      "$WDIFF" "$WORK/ref.w" "$WORK/np.w" --tol 1e-4
    check "$np ranks: backbone floats bit-identical to the start" "$WDIFF" "$WORK/conv15.w" "$WORK/np.w" --exact --floats "$lo:$hi"
    check "$np ranks: no probe cache for detector train, and rank 0 says so once" \
      test "$(grep -c "probe cache: not used: only classifier train is served from it, not detector train" "$WORK/np.w.err")" = 1
    # Parameters (weights, biases, batch-norm scales; rolling statistics are
    # not sharded): conv k*k*c*f + 2f with batch norm, + f without.  The
    # head's batch norm: 8 + 16 channels synchronized.
    check "$np ranks: stats bytes equal the theory (backbone: no reduce-scatter, no backward gather)" \
      python3 "$S/tests/check_stats.py" "$WORK/stats.json" --world "$np" --strategy full --steps "$steps" --bn head=24 \
        --node-shared "$([ "$variant" = node ] && echo 1 || echo -1)" \
        "(root)=0,0,1,0" "backbone=0,0,0,0" "backbone.low=0,2196,0,0" "backbone.high=0,21504,0,0" "head=4682,0,1,0" ;;
  regressor)
    # data.data's classes=2 would read 2 values: regress all 5 of the first
    # box's line (class x y w h).
    command=regressor final=
    sed -i 's/^classes=.*/classes=5/' "$D/data.data"
    reg() {
      printf '[net]\nbatch=%s\nsubdivisions=1\nwidth=32\nheight=32\nchannels=3\nlearning_rate=0.01\n' "$1"
      printf 'momentum=0.9\ndecay=0.0005\nmax_batches=6\npolicy=constant\nhue=.1\nsaturation=1.5\nexposure=1.5\n'
      printf '\n[convolutional]\nbatch_normalize=1\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
      printf '\n[maxpool]\nsize=2\nstride=2\n'
      printf '\n[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
      printf '\n[maxpool]\nsize=2\nstride=2\n'
      printf '\n[connected]\noutput=5\nactivation=linear\n\n[cost]\ntype=sse\n'
    }
    reg $((b * np)) > "$WORK/s.cfg"; reg $b > "$WORK/r.cfg"
    images() { grep -o '[0-9]* images$' "$1" | tail -1; }
    equal_runs "regressor train" "$WORK/s.cfg" "$WORK/r.cfg"
    # [net] recompute=1: groups by activations (the model is small), all but
    # the root's (the head and the cost) run again; the same bytes.
    sed 's/^\[net\]$/[net]\nrecompute=1/' "$WORK/r.cfg" > "$WORK/rc.cfg"
    if det "$WORK/np-rc.w" "$np" "$WORK/rc.cfg" -seed 5; then
      check "regressor train, $np ranks: byte-identical with [net] recompute=1" cmp -s "$WORK/np.w" "$WORK/np-rc.w"
      check "regressor train, $np ranks: rank 0 says which groups recompute" \
        grep -qE "fsdp: [1-9][0-9]* of [0-9]+ groups recompute their activations" "$WORK/np-rc.w.err"
    else
      fail "regressor train, $np ranks, [net] recompute=1 ran"
    fi ;;
  refuse)
    for c in "segmenter train" "cifar train" "yolo train" "tag train"; do
      set -- $c
      rc=0
      (cd "$D" && "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" $c "$D/data.data" "$S/cfg/tests/tiny.cfg" \
         > "$WORK/refuse.log" 2>&1) || rc=$?
      check "'$c' on $np ranks refused (exit $rc), naming the command" \
        eval "[ $rc != 0 ] && [ \$(grep -c \"'$c' cannot train exactly on $np ranks\" \"$WORK/refuse.log\") = $np ]"
    done ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
finish
