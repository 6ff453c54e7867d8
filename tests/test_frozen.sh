#!/usr/bin/env bash
# Frozen layers and nested frozen groups (the linear probe), one case per run:
# N ranks against one process with an N-times batch; frozen floats
# bit-identical to the start; stats: no reduce-scatter and no backward gather
# for groups that need no backward.
# usage: test_frozen.sh CASE NP [STEPS] [prefetch] [grad_op|none] [node] [memcheck]
#   node: shard_node_shared=1
. "$(dirname "$0")/lib.sh"
case_name=$1 np=$2 steps=${3:-3}
opts=" ${*:4} "
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
b=4 sd=1 strategy=full node=0
case $opts in *" node "*) node=1 ;; esac
case $opts in *" grad_op "*) strategy=grad_op ;; *" none "*) strategy=none ;; esac

net() { # net BATCH EXTRA...: the [net] section
  local batch=$1; shift
  printf '[net]\nbatch=%s\nsubdivisions=1\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=%s\npolicy=constant\n' "$batch" "$steps"
  printf '%s\n' "$@"
}
conv() { # conv FILTERS SIZE KEYS...
  local f=$1 s=$2; shift 2
  printf '\n[convolutional]\nfilters=%s\nsize=%s\nstride=1\npad=1\nactivation=leaky\n' "$f" "$s"
  printf '%s\n' "$@"
}
pool() { printf '\n[maxpool]\nsize=2\nstride=2\n'; printf '%s\n' "$@"; }
drop() { printf '\n[dropout]\nprobability=.5\n'; printf '%s\n' "$@"; }
rnn() { printf '\n[rnn]\noutput=6\nactivation=leaky\n'; printf '%s\n' "$@"; }
fc() { local o=$1; shift; printf '\n[connected]\noutput=%s\nactivation=linear\n' "$o"; printf '%s\n' "$@"; }
soft() { printf '\n[softmax]\n'; }

# Each case writes the cfg body for a batch ($1), sets the frozen float range
# [lo, hi) of the weights file, the group table for check_stats.py, and
# whether stock Darknet with learning_rate=0 on the frozen layers is an
# extra reference (stock_lr0: the cfg with frozen=1 -> learning_rate=0).
# Float counts: conv 3x3 c->f: f (biases) + 9*c*f; with batch norm 3 more f
# (scales, rolling mean and variance); connected i->o: o + i*o.
stock_lr0=0 stock_nodrop=0
case $case_name in
  nested) # root -> trunk -> {block1, block2}, head: the linear probe
    body() { net "$1"; conv 4 3 frozen=1 shard_group=trunk.block1; pool shard_group=trunk.block1
             conv 5 3 frozen=1 shard_group=trunk.block2; fc 3 shard_group=head; soft; }
    lo=0 hi=$((112 + 185))
    groups=("(root)=0,0,1,0" "trunk=0,0,0,0" "trunk.block1=0,112,0,0" "trunk.block2=0,185,0,0" "head=963,0,1,0")
    stock_lr0=1 ;;
  one_group) # the trunk as one group
    body() { net "$1"; conv 4 3 frozen=1 shard_group=trunk; pool shard_group=trunk
             conv 5 3 frozen=1 shard_group=trunk; fc 3 shard_group=head; soft; }
    lo=0 hi=297
    groups=("(root)=0,0,1,0" "trunk=0,297,0,0" "head=963,0,1,0") ;;
  root_trunk) # the trunk's layers in the root group
    body() { net "$1"; conv 4 3 frozen=1; pool; conv 5 3 frozen=1; fc 3 shard_group=head; soft; }
    lo=0 hi=297
    groups=("(root)=0,297,1,0" "head=963,0,1,0") ;;
  between) # a frozen group between trainable ones: deltas must reach the first
    body() { net "$1"; conv 4 3 shard_group=first; pool shard_group=first
             conv 5 3 frozen=1 shard_group=mid; fc 3 shard_group=head; soft; }
    lo=112 hi=297
    groups=("(root)=0,0,1,0" "first=112,0,1,0" "mid=0,185,1,1" "head=963,0,1,0") ;;
  mixed) # one group with a frozen and a trainable layer
    body() { net "$1"; conv 4 3 frozen=1 shard_group=mix; pool shard_group=mix
             conv 5 3 shard_group=mix; fc 3 shard_group=head; soft; }
    lo=0 hi=112
    groups=("(root)=0,0,1,0" "mix=185,112,1,0" "head=963,0,1,0") ;;
  all_frozen) # nothing trains: nothing may change or be reduce-scattered
    body() { net "$1"; conv 4 3 frozen=1 shard_group=trunk.block1; pool shard_group=trunk.block1
             conv 5 3 frozen=1 shard_group=trunk.block2; fc 3 frozen=1 shard_group=head; soft; }
    lo=0 hi=$((297 + 963))
    groups=("(root)=0,0,0,0" "trunk=0,0,0,0" "trunk.block1=0,112,0,0" "trunk.block2=0,185,0,0" "head=0,963,0,0") ;;
  batchnorm) # frozen batch norm: rolling statistics stay, results equal across world sizes
    body() { net "$1"; conv 4 3 frozen=1 batch_normalize=1 shard_group=trunk.block1; pool shard_group=trunk.block1
             conv 5 3 frozen=1 batch_normalize=1 shard_group=trunk.block2; fc 3 shard_group=head; soft; }
    lo=0 hi=$((112 + 12 + 185 + 15))
    groups=("(root)=0,0,1,0" "trunk=0,0,0,0" "trunk.block1=0,116,0,0" "trunk.block2=0,190,0,0" "head=963,0,1,0") ;;
  batchnorm_between) # a frozen batch-norm layer that must pass deltas back (inference-mode backward)
    body() { net "$1"; conv 4 3 shard_group=first; pool shard_group=first
             conv 5 3 frozen=1 batch_normalize=1 shard_group=mid; fc 3 shard_group=head; soft; }
    lo=112 hi=$((112 + 185 + 15))
    groups=("(root)=0,0,1,0" "first=112,0,1,0" "mid=0,190,1,1" "head=963,0,1,0") ;;
  subdiv2) # subdivisions=2 with a frozen trunk
    body() { net "$1" ; conv 4 3 frozen=1 shard_group=trunk.block1; pool shard_group=trunk.block1
             conv 5 3 frozen=1 shard_group=trunk.block2; fc 3 shard_group=head; soft; }
    sd=2 lo=0 hi=297
    groups=("(root)=0,0,1,0" "trunk=0,0,0,0" "trunk.block1=0,112,0,0" "trunk.block2=0,185,0,0" "head=963,0,1,0") ;;
  stopbackward) # Darknet's stopbackward above a frozen trunk, learning_rate=0 on a head layer
    body() { net "$1"; conv 4 3 frozen=1 shard_group=trunk.block1; pool shard_group=trunk.block1
             conv 5 3 frozen=1 stopbackward=1 shard_group=trunk.block2; fc 6 learning_rate=0 shard_group=head
             fc 3 shard_group=head; soft; }
    lo=0 hi=$((297 + 6 + 320 * 6))
    groups=("(root)=0,0,1,0" "trunk=0,0,0,0" "trunk.block1=0,112,0,0" "trunk.block2=0,185,0,0" "head=$((6 + 1920 + 21)),0,1,0") ;;
  dropout_between) # a frozen dropout between trainable layers: the identity, both ways
    body() { net "$1"; conv 4 3 shard_group=first; pool shard_group=first; drop frozen=1
             conv 5 3 shard_group=head; fc 3 shard_group=head; soft; }
    lo=0 hi=0
    groups=("(root)=0,0,1,0" "first=112,0,1,0" "head=$((185 + 963)),0,1,0")
    stock_nodrop=1 ;;
  rnn_trunk) # a frozen recurrent trunk (rnn: 768 -> 6 -> 6 in three connected sub-layers)
    body() { net "$1"; rnn frozen=1 shard_group=trunk; fc 3 shard_group=head; soft; }
    lo=0 hi=4698
    # No stock reference: stock Darknet's per-layer learning_rate=0 does not
    # reach an rnn's sub-layers (they still move).
    groups=("(root)=0,0,1,0" "trunk=0,4698,0,0" "head=21,0,1,0") ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac

make_cfg() { # make_cfg OUT BATCH
  body "$2" > "$1"
  if [ "$sd" = 2 ]; then sed -i "s/^subdivisions=1/subdivisions=2/; s/^batch=.*/batch=$(($2 * 2))/" "$1"; fi
  sed -i "s/^\[net\]$/[net]\nshard=$strategy/" "$1"
  case $opts in *" prefetch "*) sed -i 's/^\[net\]$/[net]\nshard_prefetch=1/' "$1" ;; esac
  if [ "$node" = 1 ]; then sed -i 's/^\[net\]$/[net]\nshard_node_shared=1/' "$1"; fi
}

# The starting point: weights from one stock step of the cfg without plugin keys.
make_cfg "$WORK/init.cfg" "$b"
sed -i '/^frozen=\|^shard_group=\|^shard=\|^shard_node_shared=\|^stopbackward=/d; s/^max_batches=.*/max_batches=1/' "$WORK/init.cfg"
train "$WORK/init.w" "$D/data.data" "$WORK/init.cfg" -seed 3

make_cfg "$WORK/probe.cfg" $((b * np))
# memcheck: the world-1 run under valgrind (memory errors exit 9: a
# use-after-free of a dropped buffer, say, which trains the same weights).
REF_DN=$DN
case $opts in *" memcheck "*) REF_DN=$(valgrind_dn) || exit 77 ;; esac
DN=$REF_DN train "$WORK/ref.w" "$D/data.data" "$WORK/probe.cfg" -plugin "$PLUGIN" -seed 9 -clear "$WORK/init.w"
[ "$REF_DN" = "$DN" ] || pass "world 1 under valgrind: no memory error"
check "world 1: frozen floats [$lo,$hi) bit-identical to the start" "$WDIFF" "$WORK/init.w" "$WORK/ref.w" --exact --floats "$lo:$hi"
if [ "$case_name" = all_frozen ]; then
  check "world 1: nothing trainable, every float unchanged" "$WDIFF" "$WORK/init.w" "$WORK/ref.w" --exact --floats 0:999999
else
  check_not "world 1: the trainable layers did train" "$WDIFF" "$WORK/init.w" "$WORK/ref.w" --exact --floats "$hi:999999"
fi
if [ "$stock_lr0" = 1 ]; then
  # Stock Darknet with learning_rate=0 (and no decay-driven drift: lr 0 moves
  # nothing) on the trunk trains the same head.
  sed 's/^frozen=1$/learning_rate=0/; /^shard/d' "$WORK/probe.cfg" > "$WORK/stock.cfg"
  train "$WORK/stock.w" "$D/data.data" "$WORK/stock.cfg" -seed 9 -clear "$WORK/init.w"
  check "world 1 equals stock Darknet with learning_rate=0 on the trunk ($("$WDIFF" "$WORK/stock.w" "$WORK/ref.w" --tol 1e-5 | tail -2 | tr "\n" " "))" "$WDIFF" "$WORK/stock.w" "$WORK/ref.w" --tol 1e-5
fi

if [ "$stock_nodrop" = 1 ]; then
  # Stock Darknet without the dropout layer (no parameters, and no random
  # draws when it is the identity) trains the same weights.
  awk '/^\[/ { skip = ($0 == "[dropout]") } !skip' "$WORK/probe.cfg" | sed '/^frozen=\|^shard/d' > "$WORK/stock.cfg"
  train "$WORK/stock.w" "$D/data.data" "$WORK/stock.cfg" -seed 9 -clear "$WORK/init.w"
  check "world 1 equals stock Darknet without the frozen dropout layer" "$WDIFF" "$WORK/stock.w" "$WORK/ref.w" --tol 1e-5
fi

make_cfg "$WORK/probe.cfg" "$b"
if train_np "$WORK/np.w" "$np" "$D/data.data" "$WORK/probe.cfg" -seed 9 -clear -fsdp-stats "$WORK/stats.json" "$WORK/init.w"; then
  check "$np ranks: equal to one process with batch $((b * np)) ($("$WDIFF" "$WORK/ref.w" "$WORK/np.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/np.w" --tol 1e-4
  check "$np ranks: frozen floats bit-identical to the start" "$WDIFF" "$WORK/init.w" "$WORK/np.w" --exact --floats "$lo:$hi"
  check "$np ranks: stats bytes equal the theory (no reduce-scatter, no backward gather where no backward)" \
    python3 "$S/tests/check_stats.py" "$WORK/stats.json" --world "$np" --strategy "$strategy" --steps "$steps" \
      --subdivisions "$sd" --node-shared "$([ "$node" = 1 ] && echo 1 || echo -1)" "${groups[@]}"
else
  fail "$np ranks ran"
fi
finish
