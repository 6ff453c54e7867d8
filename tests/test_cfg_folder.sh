#!/usr/bin/env bash
# Darknet's own cfg/ folder (deps/darknet/cfg): each classifier and detector
# cfg on NP ranks against stock Darknet with the NP-times batch, with -seed,
# at a small input, within a tolerance calibrated on the oracle itself; or
# refused by name, for the reason docs/limits.md gives.
#
# Each cfg is made to train here: batch 2 per rank, one subdivision, 2
# steps, a constant learning rate, no burn-in, random=0, the input 64 x 64
# (classifiers, 6 classes, on a generated image set) or 128 x 128
# (detectors: [region] and [yolo] and the convolution before each made
# 2-class, on a generated detection set), crops the input less 8.  Every run
# starts from the same weights file (stock Darknet's build of the cfg after
# one step at learning rate 0).  The tolerance: twice the most stock Darknet
# itself moves when its start is nudged by one float ulp, when
# batch norm sums in double (DN_BN_DOUBLE=1, patch 0048), or with 2 BLAS
# threads instead of 1 -- the oracle's own rounding -- and at least 1e-4.
# Every run but that one has one BLAS thread (the ranks fill the cores).
# usage: test_cfg_folder.sh NP NAME[@SIZE]...
#        test_cfg_folder.sh NP all: every cfg of the folder, each run, or
#        refused or left out by name with its reason
# FSDP_CFG_TIMES=FILE: each run's seconds appended to FILE ("CFG RUN SECONDS").
. "$(dirname "$0")/lib.sh"
np=$1
shift
export OPENBLAS_NUM_THREADS=1

kind() {
  case $(grep -o '^\[[a-z]*\]' "$S/deps/darknet/cfg/$1.cfg" | tail -n 1) in
    '[region]'|'[yolo]') echo detector ;;
    '[detection]') echo yolov1 ;;
    *) echo classifier ;;
  esac
}

data() { # data KIND SIZE: a generated set for KIND (made once); prints its .data
  local d=$WORK/$1-$2
  if [ ! -d "$d" ]; then
    if [ "$1" = classifier ]; then make_data "$d" --classes 6 --per-class 8 --size "$2"
    else "$S/tools/make-detdata" "$d" --images 16 --size "$2" > /dev/null; fi
  fi
  echo "$d/data.data"
}

# prep NAME BATCH SIZE OUT [LR]: the cfg, made to train here.
prep() {
  python3 - "$S/deps/darknet/cfg/$1.cfg" "$2" "$3" "${5:-}" > "$4" <<'PY'
import re, sys
src, batch, size, lr = sys.argv[1:5]
net, rest = open(src).read().split("\n[", 1)
keys = [("batch", batch), ("subdivisions", "1"), ("height", size), ("width", size), ("max_batches", "2"),
        ("policy", "constant"), ("burn_in", "0"), ("min_crop", size), ("max_crop", size)]
if lr:
    keys.append(("learning_rate", lr))
for k, v in keys:
    net, n = re.subn(r"(?m)^\s*%s\s*=.*$" % k, "%s=%s" % (k, v), net)
    if not n:
        net += "\n%s=%s" % (k, v)
sections = [x if x.startswith("[") else "[" + x for x in ("[" + rest).split("\n[")]
def setkey(sec, key, val):
    return re.sub(r"(?m)^\s*%s\s*=.*$" % key, "%s=%s" % (key, val), sec)
crop = str(int(size) - 8)
sections = [setkey(setkey(setkey(x, "crop_height", crop), "crop_width", crop), "random", 0) for x in sections]
heads = [i for i, x in enumerate(sections) if re.match(r"\[(region|yolo)\]", x)]
for i in heads:
    sec = sections[i] = setkey(sections[i], "classes", 2)
    num = int(re.search(r"(?m)^\s*num\s*=\s*(\d+)", sec).group(1))
    mask = re.search(r"(?m)^\s*mask\s*=\s*([\d,\s]+)$", sec)
    coords = re.search(r"(?m)^\s*coords\s*=\s*(\d+)", sec)
    j = i - 1
    while not sections[j].startswith("[convolutional]"):
        j -= 1
    per = len(mask.group(1).split(",")) if mask else num
    sections[j] = setkey(sections[j], "filters", per * ((int(coords.group(1)) if coords else 4) + 3))
if not heads:
    for i in range(len(sections) - 1, -1, -1):
        if re.match(r"\[(connected|convolutional)\]", sections[i]):
            sections[i] = re.sub(r"(?m)^\s*(output|filters)\s*=\s*\d+\s*$", r"\1=6", sections[i])
            break
print(net + "\n" + "\n".join(sections))
PY
}

# run KIND OUT NP DATA CFG [darknet args...]: stock Darknet (NP = 0) or NP
# ranks, -seed 7; the weights to OUT; on failure prints the end of stderr.
run() {
  local kind=$1 out=$2 n=$3 data=$4 cfg=$5 base final="" cmd=("$DN") t0=$SECONDS
  shift 5
  base=$(basename "$cfg"); base=${base%%.*}   # Darknet's basecfg: up to the first dot
  [ "$kind" = classifier ] || final=_final
  [ "$n" = 0 ] || cmd=("${MPIRUN[@]}" -np "$n" -x OPENBLAS_NUM_THREADS "$DN" -plugin "$PLUGIN")
  mkdir -p "$(dirname "$data")/backup"
  (cd "$(dirname "$data")" && rm -f "backup/$base$final.weights" &&
   timeout 300 "${cmd[@]}" "$([ "$kind" = classifier ] && echo classifier || echo detector)" train "$data" "$cfg" \
     -seed 7 "$@" > "$out.log" 2> "$out.err") || { tail -n 2 "$out.err" | tr '\n' ' '; return 1; }
  cp "$(dirname "$data")/backup/$base$final.weights" "$out" || return 1
  [ -z "${FSDP_CFG_TIMES:-}" ] || echo "$(basename "$cfg" .cfg) $(basename "$out") $((SECONDS - t0))" >> "$FSDP_CFG_TIMES"
}

# nudge IN OUT STEP: every finite non-zero float of a weights file STEP ulps
# (1: away from zero, -1: toward it), with Debian's numpy (the one
# tools/plot's matplotlib brings).
nudge() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
major, minor = struct.unpack("ii", b[:8])
head = 20 if major * 10 + minor >= 2 else 16
a = np.frombuffer(b[head:], dtype=np.int32).copy()
finite = ((a & 0x7fffffff) != 0) & ((a & 0x7f800000) != 0x7f800000)
a[finite] += int(sys.argv[3])
open(sys.argv[2], "wb").write(b[:head] + a.tobytes())
PY
}

maxdiff() { { "$WDIFF" "$1" "$2" --tol 0 || true; } | grep -o 'max |diff| [^,]*' | cut -d' ' -f3; }

# all: the folder's every cfg; a size where the default does not suit.
if [ "${1:-}" = all ]; then
  set --
  for f in "$S"/deps/darknet/cfg/*.cfg; do
    n=$(basename "$f" .cfg)
    case $n in
      cifar|cifar.test) set -- "$@" "$n@32" ;;   # CIFAR-10's own 32 x 32
      tiny) set -- "$@" "$n@128" ;;              # at 64 px its last layers normalise over too few values
      *) set -- "$@" "$n" ;;
    esac
  done
fi

for spec in "$@"; do
  name=${spec%@*}
  k=$(kind "$name")
  case $name in
    yolo9000) echo "skipped: yolo9000: its [region] reads a softmax tree (data/9k.tree) over 9418 classes of ImageNet and COCO; stock Darknet cannot build it on a generated set"; continue ;;
    darknet9000) echo "skipped: darknet9000: its [softmax] reads a tree (data/9k.tree) over ImageNet's 9418 classes; stock Darknet cannot build it on a generated set"; continue ;;
    extraction.conv) echo "skipped: extraction.conv: extraction's convolutional trunk alone, for darknet partial; no classifier to train"; continue ;;
    jnet-conv|vgg-conv) echo "skipped: $name: a convolutional trunk without a loss layer, for darknet nightmare; nothing to train"; continue ;;
    go|go.test) echo "skipped: $name: darknet go's move network (19 x 19 boards), trained by 'go train', which runs on one rank only (refused on more, docs/DESIGN.md)"; continue ;;
    writing) echo "skipped: $name: darknet writing's network, trained by 'writing train', which runs on one rank only (refused on more)"; continue ;;
    rnn|rnn.train|gru) echo "skipped: $name: a recurrent network for 'rnn train' on text, not classifier or detector train (rnn train on N ranks: tests/test_rnn.sh)"; continue ;;
  esac
  if [ "$k" = yolov1 ]; then
    pass "$name: YOLOv1 [detection]: refused by detector train, checked by tests/test_yolov1.sh"
    continue
  fi
  size=${spec#*@}
  [ "$size" != "$spec" ] || size=$([ "$k" = classifier ] && echo 64 || echo 128)
  dd=$(data "$k" "$size")
  cfg=$WORK/$name.cfg w=$WORK/$name
  prep "$name" $((2 * np)) "$size" "$cfg" 0
  sed -i 's/^max_batches=2$/max_batches=1/' "$cfg"
  if ! why=$(run "$k" "$w-w0" 0 "$dd" "$cfg"); then fail "$name: stock Darknet built and ran it: $why"; continue; fi
  nudge "$w-w0" "$w-w0u" 1
  prep "$name" $((2 * np)) "$size" "$cfg"
  ok=1
  why=$(run "$k" "$w-ref" 0 "$dd" "$cfg" "$w-w0" -clear) &&
    why=$(run "$k" "$w-up" 0 "$dd" "$cfg" "$w-w0u" -clear) &&
    why=$(DN_BN_DOUBLE=1 run "$k" "$w-bnd" 0 "$dd" "$cfg" "$w-w0" -clear) &&
    why=$(OPENBLAS_NUM_THREADS=2 run "$k" "$w-blas2" 0 "$dd" "$cfg" "$w-w0" -clear) || ok=0
  if [ $ok = 0 ]; then fail "$name: stock Darknet ran: $why"; continue; fi
  noise=$(for v in up bnd blas2; do maxdiff "$w-ref" "$w-$v"; done | sort -g | tail -n 1)
  tol=$(awk -v n="${noise:-0}" 'BEGIN { t = 2 * n; if (t < 1e-4) t = 1e-4; printf "%.2g", t }')
  prep "$name" 2 "$size" "$cfg"
  if why=$(run "$k" "$w-np" "$np" "$dd" "$cfg" "$w-w0" -clear); then
    check "$name ($k), $np ranks: stock Darknet's with batch $((2 * np)) within $tol (its own rounding moves it $noise): $("$WDIFF" "$w-ref" "$w-np" --tol "$tol" | tail -n 1)" \
      "$WDIFF" "$w-ref" "$w-np" --tol "$tol"
  else
    fail "$name: $np ranks ran: $why"
  fi
  rm -f "$w"-*
done
finish
