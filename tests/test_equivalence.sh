#!/usr/bin/env bash
# N ranks with cfg batch b against one process with batch N*b, same seed:
# weights files equal to float tolerance (header included), for each
# strategy; and the stats file's bytes equal to the theory.
# usage: test_equivalence.sh CFG NP [adam] [subdiv2] [prefetch] [keep] [node]
#   prefetch: shard_prefetch=1; keep: reshard_after_forward=0;
#   node: shard_node_shared=1 (grad_op and none run with it off, as rank 0 says);
#   without it, full on ranks of one machine that share memory has it on by
#   default (rank 0 says so), and the node variant also runs
#   shard_node_shared=0, the copying path
. "$(dirname "$0")/lib.sh"
name=$1 np=$2
shift 2
variants="$*"
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
CFG=$S/cfg/tests/$name.cfg
b=4 sd=1
# Per-group parameter counts worked out by hand in each cfg's comments:
# NAME=TRAINABLE,FROZEN,NEEDS_BACKWARD,FROZEN_NEEDS_BACKWARD
case $name in
  tiny) groups=("(root)=2453,0,1,0" "body=475,0,1,0") ;;
  residual) groups=("(root)=1008,0,1,0" "stem=112,0,1,0" "res=0,0,1,0" "res.a=148,0,1,0" "res.b=20,0,1,0") ;;
  rnn) groups=("(root)=21,0,1,0" "recurrent=4698,0,1,0") ;;
  layers) groups=("(root)=15,0,1,0" "up=39,0,1,0" "rec=10476,0,1,0") ;;
  auto) CFG=$S/cfg/tests/tiny.cfg  # tiny with shard_auto_group=500: layer 3 (2435) is auto0, 4-5 auto1
        groups=("(root)=0,0,1,0" "body=475,0,1,0" "auto0=2435,0,1,0" "auto1=18,0,1,0") ;;
  *) echo "no group table for $name"; exit 2 ;;
esac
steps=$(sed -n 's/^max_batches=//p' "$CFG")

# variant_cfg OUT BATCH [STRATEGY]: the cfg with batch, optimizer and strategy set.
variant_cfg() {
  local out=$1 batch=$2 strategy=${3:-}
  sed -e "s/^batch=.*/batch=$batch/" "$CFG" > "$out"
  case " $variants " in *" adam "*) sed -i 's/^\[net\]$/[net]\nadam=1\nB1=0.9\nB2=0.999\neps=0.00001/' "$out" ;; esac
  case " $variants " in *" subdiv2 "*) sed -i "s/^subdivisions=.*/subdivisions=2/; s/^batch=.*/batch=$((batch * 2))/" "$out" ;; esac
  case " $variants " in *" prefetch "*) sed -i 's/^\[net\]$/[net]\nshard_prefetch=1/' "$out" ;; esac
  case " $variants " in *" keep "*) sed -i 's/^\[net\]$/[net]\nreshard_after_forward=0/' "$out" ;; esac
  case " $variants " in *" node "*) sed -i 's/^\[net\]$/[net]\nshard_node_shared=1/' "$out" ;; esac
  [ "$name" = auto ] && sed -i 's/^\[net\]$/[net]\nshard_auto_group=500/' "$out"
  [ -n "$strategy" ] && sed -i "s/^\[net\]$/[net]\nshard=$strategy/" "$out"
  return 0
}
case " $variants " in *" subdiv2 "*) sd=2 ;; esac
reshard=1 node=0
case " $variants " in *" keep "*) reshard=0 ;; esac
case " $variants " in *" node "*) node=1 ;; esac
# node_in_effect STRATEGY: 1 where node-shared parameters apply to the run:
# asked for, or by default on ranks of one machine that share memory.
node_in_effect() {
  [ "$node" = 1 ] && { echo 1; return; }
  [ "$1" = full ] && [ "$np" -gt 1 ] && [ "${FSDP_SHM:-1}" != 0 ] && echo 1 || echo 0
}

ref_cfg=$WORK/ref.cfg
variant_cfg "$ref_cfg" $((b * np))
cp "$ref_cfg" "$WORK/$(basename "$CFG")"
case " $variants " in
  *" adam "*)
    # Stock Darknet has no Adam on the CPU: the reference is the plugin's own world of one.
    train "$WORK/ref.w" "$D/data.data" "$WORK/$(basename "$CFG")" -plugin "$PLUGIN" -seed 5 ;;
  *)
    train "$WORK/ref.w" "$D/data.data" "$WORK/$(basename "$CFG")" -seed 5
    if [ "$np" = 1 ]; then
      train "$WORK/p1.w" "$D/data.data" "$WORK/$(basename "$CFG")" -plugin "$PLUGIN" -seed 5
      check "world 1 with the plugin equals stock Darknet" "$WDIFF" "$WORK/ref.w" "$WORK/p1.w" --tol 1e-5
    fi ;;
esac

for strategy in full grad_op none; do
  variant_cfg "$WORK/$(basename "$CFG")" "$b" "$strategy"
  if ! train_np "$WORK/$strategy.w" "$np" "$D/data.data" "$WORK/$(basename "$CFG")" -seed 5 -fsdp-stats "$WORK/$strategy.json"; then
    fail "$np ranks, shard=$strategy ran"
    continue
  fi
  check "$np ranks, shard=$strategy: weights equal one process with batch $((b * np)) ($("$WDIFF" "$WORK/ref.w" "$WORK/$strategy.w" --tol 1e-4 | head -1))" \
    "$WDIFF" "$WORK/ref.w" "$WORK/$strategy.w" --tol 1e-4
  check "$np ranks, shard=$strategy: bytes in the stats file equal the theory" \
    python3 "$S/tests/check_stats.py" "$WORK/$strategy.json" --world "$np" --strategy "$strategy" \
      --steps "$steps" --subdivisions "$sd" --reshard "$reshard" --node-shared "$(node_in_effect "$strategy")" "${groups[@]}"
  if [ "$node" = 1 ] && [ "$strategy" != full ] && [ "$np" -gt 1 ]; then
    check "$np ranks, shard=$strategy: rank 0 says shard_node_shared=1 is off" \
      grep -q "fsdp: shard_node_shared=1 is off: it applies to shard=full" "$WORK/$strategy.w.err"
  fi
  check "$np ranks, shard=$strategy: only rank 0 prints iteration lines" \
    [ "$(grep -c "avg, .* rate" "$WORK/$strategy.w.log")" = "$steps" ]
  # Ranks that share no memory (FSDP_SHM=0) exchange point to point and add
  # the terms in rank order, as the shared-memory path does: the same bytes.
  if [ "${FSDP_SHM:-1}" = 0 ] && [ "$np" -gt 1 ]; then
    if (unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include
        FSDP_SHM=1 train_np "$WORK/$strategy-shm.w" "$np" "$D/data.data" "$WORK/$(basename "$CFG")" -seed 5); then
      check "$np ranks, shard=$strategy: byte-identical to the same run through shared memory" \
        cmp "$WORK/$strategy.w" "$WORK/$strategy-shm.w"
      # (node-shared parameters, and rank 0's note on them, come only with shared memory)
      [ "$strategy" != full ] || check "  ... which did run through shared memory" \
        grep -q "fsdp: the parameters live once per machine in shared memory" "$WORK/$strategy-shm.w.err"
    else
      fail "$np ranks, shard=$strategy through shared memory ran"
    fi
  fi
  # On one machine with the cfg silent on the key, node-shared parameters
  # are the default: rank 0 says so once, with the memory the machine holds
  # (PSS); not when the ranks share no memory (FSDP_SHM=0).
  if [ "$strategy" = full ] && [ "$np" -gt 1 ]; then
    notes=$(grep -c "fsdp: the parameters live once per machine in shared memory (shard_node_shared=1, the default on one machine): its $np ranks need [0-9.]* MB in all, [0-9.]* MB each (PSS)" "$WORK/full.w.err" || true)
    if [ "$node" = 0 ] && [ "${FSDP_SHM:-1}" != 0 ]; then
      check "$np ranks, shard=full on one machine: rank 0 once says the parameters live once per machine, by default" [ "$notes" = 1 ]
    else
      check "$np ranks, shard=full: no note about the default" [ "$notes" = 0 ]
    fi
  fi
done
# Node-shared parameters compute the very floats of the copying path: the
# same sums in the same order, so the weights files are byte-identical.
if [ "$node" = 1 ] && [ "$np" -gt 1 ]; then
  variant_cfg "$WORK/$(basename "$CFG")" "$b" full
  sed -i 's/^shard_node_shared=1$/shard_node_shared=0/' "$WORK/$(basename "$CFG")"
  if train_np "$WORK/full-copy.w" "$np" "$D/data.data" "$WORK/$(basename "$CFG")" -seed 5; then
    check "$np ranks, shard=full: shard_node_shared=1 byte-identical to the copying path" cmp "$WORK/full.w" "$WORK/full-copy.w"
    check "$np ranks, shard=full, shard_node_shared=0: no note about node memory" \
      [ "$(grep -c "live once per machine" "$WORK/full-copy.w.err" || true)" = 0 ]
  else
    fail "$np ranks, shard=full without shard_node_shared ran"
  fi
  variant_cfg "$WORK/$(basename "$CFG")" "$b" full
fi
# Inference through the plugin (forward only: gather, free, no backward) scores
# the trained weights as stock Darknet does.  (Stock `classifier valid` divides
# by zero on recurrent layers after set_batch_network: not for rnn, layers.)
if [ "$name" != rnn ] && [ "$name" != layers ]; then
  top1() { grep -o "top 1: [0-9.]*" "$1" | tail -1; }
  scores() { grep -o "^[0-9]*: top 1: [0-9.]*" "$1"; }
  (cd "$D" && "$DN" classifier valid "$D/data.data" "$WORK/$(basename "$CFG")" "$WORK/full.w" \
    > "$WORK/valid-stock.out" 2> "$WORK/valid-stock.err")
  (cd "$D" && "${MPIRUN[@]}" -np "$np" "$DN" -plugin "$PLUGIN" classifier valid "$D/data.data" \
    "$WORK/$(basename "$CFG")" "$WORK/full.w" > "$WORK/valid-np.out" 2> "$WORK/valid-np.err")
  check "classifier valid on $np ranks scores every image as stock Darknet (final $(top1 "$WORK/valid-np.out"))" \
    [ "$(scores "$WORK/valid-stock.out" | wc -l)" -gt 10 -a "$(scores "$WORK/valid-np.out")" = "$(scores "$WORK/valid-stock.out")" ]
fi
finish
