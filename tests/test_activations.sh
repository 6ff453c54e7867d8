#!/usr/bin/env bash
# Layers that need no backward keep no activations for it (fsdp_acts.h): a
# frozen trunk with batch norm, a shortcut, a dropout, an upsample and a
# route under a trained head.  Weights byte-identical to the same run with
# every activation kept (FSDP_ACTS=0), at world 1 and on NP ranks; NP ranks
# equal to one process with the NP-times batch; the trunk without batch norm
# and dropout equal to stock Darknet with learning_rate=0 on it; the
# activation bytes against the theory below.
# usage: test_activations.sh NP [subdiv2] [memcheck] [route_into_dropout]
#   route_into_dropout: a trunk whose frozen dropout a route needing backward
#     reads: the delta the route writes into, given back while building, is
#     made again, and the output it shares is kept (no transient output).
. "$(dirname "$0")/lib.sh"
np=$1
opts=" ${*:2} "
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
b=4 sd=1
case $opts in *" subdiv2 "*) sd=2 ;; esac

# 16x16x3 input.  Per image, the layers' outputs (floats):
#   0 conv 4, batch norm     16x16x4 = 1024   read by 1 and 2 (the shortcut)
#   1 conv 4                 16x16x4 = 1024   read by 2
#   2 shortcut from=-2       16x16x4 = 1024   read by 3 and 7 (the route)
#   3 maxpool                 8x8x4  =  256   read by 4 (dropout, sharing it) and 5
#   4 dropout                 (layer 3's)
#   5 conv 6, batch norm      8x8x6  =  384   read by 6
#   6 upsample 2             16x16x6 = 1536   read by 7
#   7 route -1,-5            16x16x10 = 2560  read by 8
#   8 maxpool                 8x8x10 =  640   read by 9
#   9 conv 6                  8x8x6  =  384   read by 10, which trains: kept
#  10 connected 3 (the head), 11 softmax
body() {
  printf '[net]\nbatch=%s\nsubdivisions=%s\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=3\npolicy=constant\n' "$1" "$sd"
  printf '\n[convolutional]\nfrozen=1\nshard_group=trunk.a\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[convolutional]\nfrozen=1\nshard_group=trunk.a\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[shortcut]\nfrom=-2\nactivation=linear\n'
  printf '\n[maxpool]\nsize=2\nstride=2\n'
  printf '\n[dropout]\nfrozen=1\nprobability=.5\n'
  printf '\n[convolutional]\nfrozen=1\nshard_group=trunk.b\nbatch_normalize=1\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[upsample]\nstride=2\n'
  printf '\n[route]\nlayers=-1,-5\n'
  printf '\n[maxpool]\nsize=2\nstride=2\n'
  printf '\n[convolutional]\nfrozen=1\nshard_group=trunk.b\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[connected]\nshard_group=head\noutput=3\nactivation=linear\n'
  printf '\n[softmax]\n'
}
# route_into_dropout's network: 0 conv 4 (frozen), 1 dropout (frozen, sharing
# 0's output and delta), 2 conv 4 (trains), 3 route -1,-2 (needs backward:
# writes into 1's delta), 4 maxpool, 5 connected 3, 6 softmax.  Nothing is
# transient: layer 0's output is read by layer 2, which trains.
body_route() {
  printf '[net]\nbatch=%s\nsubdivisions=%s\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=3\npolicy=constant\n' "$1" "$sd"
  printf '\n[convolutional]\nfrozen=1\nshard_group=trunk\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[dropout]\nfrozen=1\nprobability=.5\n'
  printf '\n[convolutional]\nshard_group=head\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n'
  printf '\n[route]\nlayers=-1,-2\n'
  printf '\n[maxpool]\nsize=2\nstride=2\n'
  printf '\n[connected]\nshard_group=head\noutput=3\nactivation=linear\n'
  printf '\n[softmax]\n'
}
case $opts in *" route_into_dropout "*) route=1 ;; *) route=0 ;; esac
# The theory.  Transient: layers 0-3 and 5-8, eight outputs, each living from
# its forward to its last reader's.  Taken in order, each into a free buffer
# (the smallest that holds it, else the largest, grown), else a new one:
#   0 -> A (1024); 1 -> B (1024); 2 -> C (1024, busy to 7); 3 -> A;
#   5 -> B; 6 -> A, grown to 1536; 7 -> B, grown to 2560; 8 -> C.
# Buffers: 1536 + 2560 + 1024 = 5120 floats per image of the forward's batch.
# Given back: those eight outputs (8448) and the frozen batch norms' x and
# x_norm (2 * (1024 + 384) = 2816).  Deltas: as without (fsdp_deltas.h);
# the head's (3 floats, read by the softmax) in the delta pool
# (fsdp_delta_pool.h), one buffer of 3 floats, which saves nothing.
# route_into_dropout: layers 2 (1024, read by the route), 3 (the route,
# 2048), 4 (maxpool, 512) and 5 (connected, 3) are pooled, 3587 floats.
# Opening in backward order, each into a buffer whose occupant's own
# backward has run (the smallest that holds it, else the largest, grown):
#   5 (opens at 6) -> A (3); 4 (at 5) -> B (512); 3 (at 4) -> A, grown to
#   2048; 2 (at 3) -> B, grown to 1024.  Buffers 3072: 515 floats saved.

cfg_for() { # cfg_for OUT IMAGES_PER_RANK
  if [ "$route" = 1 ]; then body_route $(($2 * sd)) > "$1"; else body $(($2 * sd)) > "$1"; fi
}
# Per image: transient outputs, shared buffer floats, floats saved; pooled
# deltas, their buffers' floats; trunk floats.
if [ "$route" = 1 ]; then theory="0 0 515 4 3072" trunk=112; else theory="8 5120 6144 1 3" trunk=1058; fi

cfg_for "$WORK/init.cfg" "$b"
sed -i '/^frozen=\|^shard_group=/d; s/^max_batches=.*/max_batches=1/' "$WORK/init.cfg"
train "$WORK/init.w" "$D/data.data" "$WORK/init.cfg" -seed 3

REF_DN=$DN
case $opts in *" memcheck "*) REF_DN=$(valgrind_dn) || exit 77 ;; esac

# World 1 with the NP-times batch, with and without.
cfg_for "$WORK/one.cfg" $((b * np))
DN=$REF_DN train "$WORK/one.w" "$D/data.data" "$WORK/one.cfg" -plugin "$PLUGIN" -seed 9 -clear \
  -fsdp-stats "$WORK/one.json" "$WORK/init.w"
[ "$REF_DN" = "$DN" ] || pass "world 1 under valgrind: no memory error"
# (Under valgrind both: its emulation rounds some floats otherwise.)
FSDP_ACTS=0 DN=$REF_DN train "$WORK/one-kept.w" "$D/data.data" "$WORK/one.cfg" -plugin "$PLUGIN" -seed 9 -clear \
  -fsdp-stats "$WORK/one-kept.json" "$WORK/init.w"
check "world 1: byte-identical to keeping every activation" cmp "$WORK/one.w" "$WORK/one-kept.w"
check "world 1: the trunk bit-identical to the start" "$WDIFF" "$WORK/init.w" "$WORK/one.w" --exact --floats 0:$trunk
check_not "world 1: the head trained" "$WDIFF" "$WORK/init.w" "$WORK/one.w" --exact --floats $trunk:999999

# The stats against the theory, for the images one forward holds (the
# cfg's batch over subdivisions): b*np at world 1, b on each of NP ranks.
stats_check() { # stats_check STATS KEPT_STATS IMAGES_PER_FORWARD
  python3 - "$@" $theory <<'EOF'
import json, sys
d, k, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
transient, buffers, saved_floats, pooled, dbuffers = (int(x) for x in sys.argv[4:9])
want = {"transient_outputs": transient, "activation_buffers_bytes": buffers * n * 4,
        "pooled_deltas": pooled, "delta_buffers_bytes": dbuffers * n * 4}
got = {key: d[key] for key in want}
saved = k["predicted"]["activations"] - d["predicted"]["activations"]
ok = got == want and all(k[key] == 0 for key in want) and saved == saved_floats * n * 4
print("got", got, "saved", saved, "want", want, "saved", saved_floats * n * 4)
sys.exit(0 if ok else 1)
EOF
}
check "world 1: transient outputs, shared buffer bytes and the bytes saved equal the theory" \
  stats_check "$WORK/one.json" "$WORK/one-kept.json" $((b * np))

# NP ranks of b images (per forward), against world 1 and against keeping everything.
cfg_for "$WORK/np.cfg" "$b"
if train_np "$WORK/np.w" "$np" "$D/data.data" "$WORK/np.cfg" -seed 9 -clear -fsdp-stats "$WORK/np.json" "$WORK/init.w" &&
   FSDP_ACTS=0 train_np "$WORK/np-kept.w" "$np" "$D/data.data" "$WORK/np.cfg" -seed 9 -clear \
     -fsdp-stats "$WORK/np-kept.json" "$WORK/init.w"; then
  check "$np ranks: byte-identical to keeping every activation" cmp "$WORK/np.w" "$WORK/np-kept.w"
  check "$np ranks: equal to one process with batch $((b * np)) ($("$WDIFF" "$WORK/one.w" "$WORK/np.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/one.w" "$WORK/np.w" --tol 1e-4
  check "$np ranks: transient outputs and bytes equal the theory" stats_check "$WORK/np.json" "$WORK/np-kept.json" "$b"
else
  fail "$np ranks ran"
fi

[ "$route" = 1 ] && { finish; exit; }
# Stock Darknet, on the trunk without batch norm and dropout (which run in
# training mode there), learning_rate=0 on it: the same head.
# (Without the dropout layer the route's second source is 4 layers back.)
strip() { awk '/^\[/ { skip = ($0 == "[dropout]") } !skip' "$1" | sed '/^batch_normalize=/d; s/^layers=-1,-5$/layers=-1,-4/'; }
strip "$WORK/init.cfg" > "$WORK/init-plain.cfg"
train "$WORK/init-plain.w" "$D/data.data" "$WORK/init-plain.cfg" -seed 3
strip "$WORK/one.cfg" > "$WORK/plain.cfg"
sed 's/^frozen=1$/learning_rate=0/; /^shard_group/d' "$WORK/plain.cfg" > "$WORK/stock.cfg"
train "$WORK/stock.w" "$D/data.data" "$WORK/stock.cfg" -seed 9 -clear "$WORK/init-plain.w"
train "$WORK/plain.w" "$D/data.data" "$WORK/plain.cfg" -plugin "$PLUGIN" -seed 9 -clear "$WORK/init-plain.w"
check "world 1 equals stock Darknet with learning_rate=0 on the trunk ($("$WDIFF" "$WORK/stock.w" "$WORK/plain.w" --tol 1e-5 | tail -1))" \
  "$WDIFF" "$WORK/stock.w" "$WORK/plain.w" --tol 1e-5
finish
