#!/usr/bin/env bash
# Activation checkpointing (recompute=1, fsdp_recompute.h): two groups with
# batch norm, a shortcut, a maxpool, an upsample and a route reaching past a
# group recompute their forward before their backward.  Weights
# byte-identical to the same run without it (rolling statistics included,
# they are in the weights file), at world 1 and on NP ranks under each
# strategy; synchronized batch norm replayed, not reduced again (the same
# bytes); the activation bytes saved against the theory below; one process
# with the NP-times batch against NP ranks.
# usage: test_recompute.sh NP [subdiv2] [adam] [prefetch] [dropout_after] [dropout_inside] [memcheck] [gpu]
#        | refusals | detector [gpu]
#        | darknet CFG
#   gpu: on the GPU (a GPU build; skipped without a GPU), several ranks
#     sharing it through -fsdp-backend mpi-staged; the arena's bytes against
#     the theory (GPU runs predict no memory); byte-identical needs runs
#     that repeat to the bit, which cuDNN's chosen algorithms may not: if two
#     runs without recompute differ, within 1e-4 instead, and says so
#   refusals: groups that cannot recompute, refused by name with cfg:line,
#     non-zero on every rank, no weights written
#   detector: yolov3-tiny, detector train, random=1 (a resize), [net]
#     recompute=1 over small automatic groups: byte-identical
#   darknet CFG: Darknet's own resnet18 (classifier), yolov3-tiny or yolov3
#     (its full-size cfg at 96x96, detector) at worlds 1, 2 and 4 with and
#     without [net] recompute=1 over the default groups: byte-identical, and
#     the recomputing runs hold less
. "$(dirname "$0")/lib.sh"
np=$1
opts=" ${*:2} "
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
b=4 sd=1 extra="" dropout=0 route=4 act3=leaky
case $opts in *" subdiv2 "*) sd=2 ;; esac
case $opts in *" adam "*) extra="$extra\nadam=1" ;; esac
case $opts in *" prefetch "*) extra="$extra\nshard_prefetch=1" ;; esac
# (logistic: its gradient reads the output's value, which the dropout scaled)
case $opts in *" dropout_after "*) dropout=1 route=5 act3=logistic ;; esac
inside=0
case $opts in *" dropout_inside "*) dropout=2 inside=1 route=5 ;; esac
gpu=0 NP_ARGS=()
case $opts in *" gpu "*) gpu=1 NP_ARGS=(-fsdp-backend mpi-staged) ;; esac
if [ "$gpu" = 1 ]; then
  ngpu=$(runtime_gpus)
  if [ "${ngpu:-0}" = 0 ]; then echo "skipped: no GPU"; exit 77; fi
  # Several ranks share the GPU through host staging (NCCL refuses that).
  eval "lib_$(declare -f train_np)"
  train_np() { lib_train_np "$@" "${NP_ARGS[@]}"; }
fi
# identical WHAT A B: A and B byte-identical; on a GPU whose runs do not
# repeat to the bit (nondet=1), within 1e-4.
nondet=0
# repeats A B: two runs without recompute on this GPU; nondet=1 where their
# weights differ.
repeats() {
  cmp -s "$1" "$2" || nondet=1
  echo "GPU runs repeat to the bit: $([ "$nondet" = 0 ] && echo yes || echo no)"
}
identical() {
  if [ "$nondet" = 1 ]; then
    check "$1 (within 1e-4: runs on this GPU differ from run to run)" "$WDIFF" "$2" "$3" --tol 1e-4
  else
    check "$1" cmp "$2" "$3"
  fi
}

# 16x16x3 input.  Per image (floats):
#   group a: 0 conv 4, batch norm  16x16x4 = 1024   inner: output, x, x_norm  3072
#            1 conv 4              16x16x4 = 1024   inner: output             1024
#            2 shortcut from=-2    16x16x4 = 1024   kept: the route (6) reads it
#            3 conv 4 stride 2, bn  8x8x4  =  256   kept, the group's last: x, x_norm 512
#   group b: 4 conv 6, batch norm   8x8x6  =  384   inner                     1152
#            5 upsample 2          16x16x6 = 1536   inner                     1536
#            6 route -1,-4         16x16x10 = 2560  kept: the group's last layer
#   root:    7 maxpool (640), 8 conv 6 (384), 9 connected 3 (the head), 10 softmax
#   dropout_after: a dropout after 3 (root), scaling 3's output in place,
#            which 3's backward reads: 3 keeps everything and is not run
#            again, so its x and x_norm and statistics leave the arena:
#            6784, 4096 and 40 floats.
# Without recompute these hold 3072 + 1024 + 512 + 1152 + 1536 = 7296; with
# it the groups share an arena of max(4608, 2688) = 4608, and the rolling and
# replayed statistics of layers 0, 3 and 4 take 2 x 2 x (4 + 4 + 6) = 56 floats.
# Deltas are the delta pool's in both runs (fsdp_delta_pool.h): layers 0-9,
# each opening before its last reader's backward, into a buffer whose
# occupant's own backward has run (the smallest that holds it, else the
# largest, grown), else a new one:
#   9 (3) -> A; 8 (384) -> B; 7 (640) -> A; 6 (2560) -> B; 2 (1024, opens at
#   the route) -> A; 5 (1536) -> C; 4 -> B; 3 -> C; 0 -> C; 1 -> B:
#   1024 + 2560 + 1536 = 5120 floats.  dropout_after: 3 keeps Darknet's own
#   (the dropout shares it): 9 pooled, the same 5120 floats.
#   dropout_inside: a dropout in group a after the shortcut, sharing its
#   output and delta (the route reads the shortcut 5 back): replayed from its
#   draws in the recomputation.  The shortcut is kept either way, so the
#   arena and the saving are as without it; the shortcut keeps Darknet's own
#   delta (the dropout shares it): 9 pooled, into A 1536 + B 2560 = 4096.
body() { # body IMAGES_PER_FORWARD_TIMES_SD KEYS_A KEYS_B
  printf "[net]\nbatch=%s\nsubdivisions=%s\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=3\npolicy=constant$extra\n" "$1" "$sd"
  printf "\n[convolutional]\nshard_group=a$2\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
  printf '\n[convolutional]\nshard_group=a\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[shortcut]\nshard_group=a\nfrom=-2\nactivation=linear\n'
  [ "$inside" = 0 ] || printf '\n[dropout]\nshard_group=a\nprobability=.5\n'
  printf "\n[convolutional]\nshard_group=a\nbatch_normalize=1\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=$act3\n"
  [ "$dropout" != 1 ] || printf '\n[dropout]\nprobability=.5\n'
  printf "\n[convolutional]\nshard_group=b$3\nbatch_normalize=1\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
  printf '\n[upsample]\nshard_group=b\nstride=2\n'
  printf "\n[route]\nshard_group=b\nlayers=-1,-$route\n"
  printf '\n[maxpool]\nsize=2\nstride=2\n'
  printf '\n[convolutional]\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[connected]\noutput=3\nactivation=linear\n'
  printf '\n[softmax]\n'
}
on='\nrecompute=1'

line_of() { grep -n -m1 "$1" "$2" | cut -d: -f1; }

# det OUT NP CFG [darknet args...]: `detector train` of $DD/data.data on NP
# ranks, stdout to OUT.log, stderr to OUT.err, the final weights to OUT.
det() {
  local out=$1 n=$2 cfg=$3; shift 3
  local base; base=$(basename "$cfg" .cfg)
  (cd "$DD" && rm -f backup/"$base"_final.weights &&
   "${MPIRUN[@]}" -np "$n" "$DN" -plugin "$PLUGIN" detector train "$DD/data.data" "$cfg" "$@" "${NP_ARGS[@]}" \
     > "$out.log" 2> "$out.err") \
    || { echo "detector train failed:"; tail -n 20 "$out.log" "$out.err"; return 1; }
  cp "$DD/backup/${base}_final.weights" "$out"
}

if [ "$np" = refusals ]; then
  np=2
  c=$WORK/root.cfg
  body 4 "" "" | sed '0,/^\[connected\]$/s//[connected]\nrecompute=1/' > "$c"
  expect_refusal "recompute=1 in the root group" \
    "root.cfg:$(line_of '^recompute=1$' "$c"): recompute=1: group \(root\) cannot run its forward again: the root group holds the head and the loss" "$c"
  c=$WORK/dropout.cfg
  # Group b starts with a dropout, which would scale group a's output.
  body 4 "" "$on" | awk '/^\[convolutional\]$/ && ++n == 4 { print "[dropout]\nshard_group=b\nprobability=.5\n" } { print }' |
    sed 's/^layers=-1,-4$/layers=-1,-5/' > "$c"
  expect_refusal "a recomputed group starting with a dropout, named" \
    "dropout.cfg:$(line_of '^recompute=1$' "$c"): recompute=1: group b cannot run its forward again: it starts with a dropout" "$c"
  c=$WORK/twice.cfg
  # Group a ends with a dropout, and a second one after the group scales the
  # same output again; the route then reaches 6 layers back to the shortcut.
  body 4 "$on" "" | awk '/^\[convolutional\]$/ && ++n == 4 { print "[dropout]\nshard_group=a\nprobability=.5\n\n[dropout]\nprobability=.5\n" } { print }' |
    sed 's/^layers=-1,-4$/layers=-1,-6/' > "$c"
  expect_refusal "a recomputed group ending with a dropout that another scales again, named" \
    "twice.cfg:$(line_of '^recompute=1$' "$c"): recompute=1: group a cannot run its forward again: it ends with a dropout that another dropout after it scales again" "$c"
  c=$WORK/frozen.cfg
  body 4 "$on" "" | sed '0,/^shard_group=a$/s//shard_group=a\nfrozen=1/' > "$c"
  expect_refusal "a frozen layer in a recomputed group, named" \
    "frozen.cfg:$(line_of '^recompute=1$' "$c"): recompute=1: group a cannot run its forward again: layer 0 is frozen" "$c"
  c=$WORK/nested.cfg
  # Layer 1 into a.inner: group a has a nested group.
  body 4 "$on" "" | awk '/^shard_group=a$/ && ++n == 2 { print "shard_group=a.inner"; next } { print }' > "$c"
  expect_refusal "a group with nested groups" \
    "nested.cfg:$(line_of '^recompute=1$' "$c"): recompute=1: group a cannot run its forward again: it has nested groups" "$c"
  c=$WORK/value.cfg
  body 4 "" "" | sed 's/^\[net\]$/[net]\nrecompute=2/' > "$c"
  expect_refusal "recompute=2" "value.cfg:2: recompute=2: expected 0 or 1" "$c"
  # [net] recompute=1 passes by the groups that cannot: here every one (the
  # root alone).
  c=$WORK/none.cfg
  body 4 "" "" | sed 's/^\[net\]$/[net]\nrecompute=1\nshard_auto_group=0/; /^shard_group=/d' > "$c"
  mkdir -p "$D/backup"
  if train_np "$WORK/none.w" 2 "$D/data.data" "$c" -seed 9; then
    check_not "[net] recompute=1 with no group that can: trains, and says nothing of recomputing" \
      grep -q "recompute their activations" "$WORK/none.w.err"
  else
    fail "[net] recompute=1 with no group that can: trains"
  fi
  # Automatic groups of single layers under [net] recompute=1, a dropout
  # after layer 3: it joins layer 3's group rather than start one, so every
  # group but the root (the softmax) recomputes, bit for bit.
  c=$WORK/auto.cfg
  body 4 "" "" | awk '/^\[convolutional\]$/ && ++n == 4 { print "[dropout]\nprobability=.5\n" } { print }' |
    sed 's/^layers=-1,-4$/layers=-1,-5/; s/^\[net\]$/[net]\nshard_auto_group=1/; /^shard_group=/d' > "$c"
  sed 's/^\[net\]$/[net]\nrecompute=1/' "$c" > "$WORK/auto-rc.cfg"
  if train_np "$WORK/auto.w" 2 "$D/data.data" "$c" -seed 9 && train_np "$WORK/auto-rc.w" 2 "$D/data.data" "$WORK/auto-rc.cfg" -seed 9; then
    check "automatic groups with a dropout: byte-identical with [net] recompute=1" cmp "$WORK/auto.w" "$WORK/auto-rc.w"
    check "automatic groups with a dropout: every group but the root recomputes ($(grep -o 'fsdp: [0-9]* of [0-9]* groups' "$WORK/auto-rc.w.err"))" \
      python3 -c 'import re, sys; m = re.search(r"fsdp: (\d+) of (\d+) groups recompute", open(sys.argv[1]).read()); sys.exit(0 if m and int(m[1]) == int(m[2]) - 1 else 1)' "$WORK/auto-rc.w.err"
  else
    fail "automatic groups with a dropout: trained with and without recompute"
  fi
  finish
  exit
fi

if [ "$np" = darknet ]; then
  which=$2
  # run OUT NP CFG: trains CFG on NP ranks with -fsdp-stats OUT.json, the weights to OUT.
  case $which in
    resnet18)
      make_data "$D" --classes 3 --per-class 16 --size 32
      sed 's/^max_batches=.*/max_batches=2/' "$S/cfg/tests/resnet18-bn.cfg" > "$WORK/net.cfg"
      run() { train_np "$1" "$2" "$D/data.data" "$3" -seed 9 -fsdp-stats "$1.json"; } ;;
    yolov3-tiny|yolov3)
      DD=$WORK/det
      "$S/tools/make-detdata" "$DD" --images 16 >/dev/null
      run() { det "$1" "$2" "$3" -seed 5 -fsdp-stats "$1.json"; }
      if [ "$which" = yolov3 ]; then
        # Darknet's cfg as it comes (80 classes, 3 heads), its training keys
        # cut to two steps of 2 images at 96x96.
        sed -e 's/^batch=.*/batch=2/' -e 's/^subdivisions=.*/subdivisions=1/' -e 's/^width=.*/width=96/' \
            -e 's/^height=.*/height=96/' -e 's/^max_batches *=.*/max_batches=2/' -e 's/^burn_in=.*/burn_in=0/' \
            -e 's/^random=1/random=0/' "$S/deps/darknet/cfg/yolov3.cfg" > "$WORK/net.cfg"
      else
        sed 's/^max_batches *=.*/max_batches=2/' "$S/cfg/tests/yolov3-tiny.cfg" > "$WORK/net.cfg"
      fi ;;
    *) echo "test_recompute.sh darknet: no cfg $which"; exit 2 ;;
  esac
  sed 's/^\[net\]$/[net]\nrecompute=1/' "$WORK/net.cfg" > "$WORK/net-rc.cfg"
  for n in 1 2 4; do
    if run "$WORK/w$n" "$n" "$WORK/net.cfg" && run "$WORK/w$n-rc" "$n" "$WORK/net-rc.cfg"; then
      check "$which, world $n: byte-identical with [net] recompute=1" cmp "$WORK/w$n" "$WORK/w$n-rc"
      check "$which, world $n: rank 0 says which groups recompute" \
        grep -qE "fsdp: [1-9][0-9]* of [0-9]+ groups recompute their activations" "$WORK/w$n-rc.err"
      check "$which, world $n: the recomputing run predicts less activation memory" python3 -c '
import json, sys
a, b = (json.load(open(f))["predicted"]["activations"] for f in sys.argv[1:])
print(a, b); sys.exit(0 if b < a else 1)' "$WORK/w$n.json" "$WORK/w$n-rc.json"
    else
      fail "$which, world $n: trained with and without recompute"
    fi
  done
  finish
  exit
fi

if [ "$np" = detector ]; then
  np=2
  DD=$WORK/det
  "$S/tools/make-detdata" "$DD" --images 24 >/dev/null
  sed -e 's/^\[net\]$/[net]\nshard_auto_group=2000/' -e 's/^random=0/random=1/' "$S/cfg/tests/yolov3-tiny.cfg" > "$WORK/y.cfg"
  sed 's/^\[net\]$/[net]\nrecompute=1/' "$WORK/y.cfg" > "$WORK/yrc.cfg"
  if det "$WORK/y.w" "$np" "$WORK/y.cfg" -seed 5 && det "$WORK/yrc.w" "$np" "$WORK/yrc.cfg" -seed 5; then
    if [ "$gpu" = 1 ]; then
      det "$WORK/y2.w" "$np" "$WORK/y.cfg" -seed 5 || fail "yolov3-tiny trained a second time"
      repeats "$WORK/y.w" "$WORK/y2.w"
    fi
    identical "yolov3-tiny, random=1, $np ranks: byte-identical with [net] recompute=1" "$WORK/y.w" "$WORK/yrc.w"
    check "rank 0 says which groups recompute" grep -qE "fsdp: [1-9][0-9]* of [0-9]+ groups recompute their activations" "$WORK/yrc.w.err"
    check "the network was resized" grep -q "Resizing" "$WORK/yrc.w.log"
  else
    fail "yolov3-tiny trained with and without recompute"
  fi
  finish
  exit
fi

body $((b * sd)) "" "" > "$WORK/init.cfg"
sed -i 's/^max_batches=.*/max_batches=1/' "$WORK/init.cfg"
train "$WORK/init.w" "$D/data.data" "$WORK/init.cfg" -seed 3

REF_DN=$DN
case $opts in *" memcheck "*) REF_DN=$(valgrind_dn) || exit 77 ;; esac

# stats_saved PLAIN RC IMAGES_PER_FORWARD DROPOUT: the arena and the delta pool
# hold the theory's floats, and the activations predicted differ by the
# theory's saving (host runs: GPU runs predict none).
stats_saved() {
  python3 - "$@" "$gpu" <<'EOF'
import json, sys
p, r, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
dropout, gpu = sys.argv[4], sys.argv[5] == "1"
saved = p["predicted"]["activations"] - r["predicted"]["activations"]
held, arena, stats = (6784, 4096, 40) if dropout == "1" else (7296, 4608, 56)
want = 0 if gpu else (held - arena) * n * 4 - stats * 4
rc = [{"recomputed_groups": 0, "recompute_buffers_bytes": 0},
      {"recomputed_groups": 2, "recompute_buffers_bytes": (arena * n + stats) * 4}]
pool = {"pooled_deltas": 9 if dropout != "0" else 10, "delta_buffers_bytes": (4096 if dropout == "2" else 5120) * n * 4}
got = [{key: d[key] for key in pool} for d in (p, r)]
got_rc = [{key: d[key] for key in rc[0]} for d in (p, r)]
print("saved", saved, "theory", want, "delta pool", got, "theory", pool, "arena", got_rc, "theory", rc)
sys.exit(0 if saved == want and got == [pool, pool] and got_rc == rc else 1)
EOF
}
same_bytes() { # same_bytes PLAIN RC: every collective moved the same bytes
  python3 -c "import json,sys; a,b=(json.load(open(f))['bytes'] for f in sys.argv[1:]); print(a, b); sys.exit(a != b)" "$1" "$2"
}

# World 1 with the NP-times batch.
body $((b * np * sd)) "" "" > "$WORK/one.cfg"
body $((b * np * sd)) "$on" "$on" > "$WORK/one-rc.cfg"
DN=$REF_DN train "$WORK/one.w" "$D/data.data" "$WORK/one.cfg" -plugin "$PLUGIN" -seed 9 -clear \
  -fsdp-stats "$WORK/one.json" "$WORK/init.w"
DN=$REF_DN train "$WORK/one-rc.w" "$D/data.data" "$WORK/one-rc.cfg" -plugin "$PLUGIN" -seed 9 -clear \
  -fsdp-stats "$WORK/one-rc.json" "$WORK/init.w"
[ "$REF_DN" = "$DN" ] || pass "world 1 under valgrind: no memory error"
if [ "$gpu" = 1 ]; then
  train "$WORK/one-again.w" "$D/data.data" "$WORK/one.cfg" -plugin "$PLUGIN" -seed 9 -clear "$WORK/init.w"
  repeats "$WORK/one.w" "$WORK/one-again.w"
fi
identical "world 1: byte-identical with recompute=1 on both groups" "$WORK/one.w" "$WORK/one-rc.w"
check_not "world 1: the network trained" cmp -s "$WORK/init.w" "$WORK/one.w"
check "world 1: rank 0 says 2 of 3 groups recompute" grep -q "fsdp: 2 of 3 groups recompute their activations" "$WORK/one-rc.w.err"
check "world 1: activation bytes saved equal the theory" stats_saved "$WORK/one.json" "$WORK/one-rc.json" $((b * np)) "$dropout"
[ "$REF_DN" = "$DN" ] || { finish; exit; }

strategies=full
[ "$opts" = "  " ] && strategies="full grad_op none"
for s in $strategies; do
  body $((b * sd)) "" "" | sed "s/^\[net\]$/[net]\nshard=$s/" > "$WORK/np-$s.cfg"
  body $((b * sd)) "" "" | sed "s/^\[net\]$/[net]\nshard=$s\nrecompute=1/" > "$WORK/np-$s-rc.cfg"
  if train_np "$WORK/np-$s.w" "$np" "$D/data.data" "$WORK/np-$s.cfg" -seed 9 -clear -fsdp-stats "$WORK/np-$s.json" "$WORK/init.w" &&
     train_np "$WORK/np-$s-rc.w" "$np" "$D/data.data" "$WORK/np-$s-rc.cfg" -seed 9 -clear -fsdp-stats "$WORK/np-$s-rc.json" "$WORK/init.w"; then
    identical "$np ranks, shard=$s: byte-identical with [net] recompute=1" "$WORK/np-$s.w" "$WORK/np-$s-rc.w"
    check "$np ranks, shard=$s: the same bytes moved (batch norm replayed, not reduced again)" \
      same_bytes "$WORK/np-$s.json" "$WORK/np-$s-rc.json"
    check "$np ranks, shard=$s: activation bytes saved equal the theory" stats_saved "$WORK/np-$s.json" "$WORK/np-$s-rc.json" "$b" "$dropout"
    # (A dropout draws per rank: N ranks and one process then differ by design.)
    case $opts in *" dropout_after "*|*" dropout_inside "*) continue ;; esac
    check "$np ranks, shard=$s: equal to one process with batch $((b * np)) ($("$WDIFF" "$WORK/one-rc.w" "$WORK/np-$s-rc.w" --tol 1e-4 | head -1))" \
      "$WDIFF" "$WORK/one-rc.w" "$WORK/np-$s-rc.w" --tol 1e-4
  else
    fail "$np ranks, shard=$s ran"
  fi
done
finish
