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
# itself moves when its start is nudged by one float ulp either way, or
# when batch norm sums in double (DN_BN_DOUBLE=1, patch 0048) -- the
# oracle's own rounding -- and at least 1e-4.
# usage: test_cfg_folder.sh NP NAME[@SIZE]...
. "$(dirname "$0")/lib.sh"
np=$1
shift

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
  local kind=$1 out=$2 n=$3 data=$4 cfg=$5 base final="" cmd=("$DN")
  shift 5
  base=$(basename "$cfg" .cfg)
  [ "$kind" = classifier ] || final=_final
  [ "$n" = 0 ] || cmd=("${MPIRUN[@]}" -np "$n" "$DN" -plugin "$PLUGIN")
  mkdir -p "$(dirname "$data")/backup"
  (cd "$(dirname "$data")" && rm -f "backup/$base$final.weights" &&
   timeout 300 "${cmd[@]}" "$([ "$kind" = classifier ] && echo classifier || echo detector)" train "$data" "$cfg" \
     -seed 7 "$@" > "$out.log" 2> "$out.err") || { tail -n 2 "$out.err" | tr '\n' ' '; return 1; }
  cp "$(dirname "$data")/backup/$base$final.weights" "$out"
}

# nudge IN OUT STEP: every finite non-zero float of a weights file STEP ulps
# (1: away from zero, -1: toward it).
nudge() {
  python3 - "$1" "$2" "$3" <<'PY'
import array, struct, sys
b = open(sys.argv[1], "rb").read()
step = int(sys.argv[3])
major, minor = struct.unpack("ii", b[:8])
head = 20 if major * 10 + minor >= 2 else 16
a = array.array("i"); a.frombytes(b[head:])
for i, x in enumerate(a):
    if x & 0x7fffffff and (x & 0x7f800000) != 0x7f800000:
        a[i] = x + step
open(sys.argv[2], "wb").write(b[:head] + a.tobytes())
PY
}

maxdiff() { { "$WDIFF" "$1" "$2" --tol 0 || true; } | grep -o 'max |diff| [^,]*' | cut -d' ' -f3; }

for spec in "$@"; do
  name=${spec%@*}
  k=$(kind "$name")
  case $name in
    yolo9000) echo "skipped: yolo9000: its [region] reads a softmax tree (data/9k.tree) over 9418 classes of ImageNet and COCO; stock Darknet cannot build it on a generated set"; continue ;;
    extraction.conv) echo "skipped: extraction.conv: extraction's convolutional trunk alone, for darknet partial; no classifier to train"; continue ;;
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
  nudge "$w-w0" "$w-w0d" -1
  prep "$name" $((2 * np)) "$size" "$cfg"
  ok=1
  why=$(run "$k" "$w-ref" 0 "$dd" "$cfg" "$w-w0" -clear) &&
    why=$(run "$k" "$w-up" 0 "$dd" "$cfg" "$w-w0u" -clear) &&
    why=$(run "$k" "$w-down" 0 "$dd" "$cfg" "$w-w0d" -clear) &&
    why=$(DN_BN_DOUBLE=1 run "$k" "$w-bnd" 0 "$dd" "$cfg" "$w-w0" -clear) || ok=0
  if [ $ok = 0 ]; then fail "$name: stock Darknet ran: $why"; continue; fi
  noise=$(for v in up down bnd; do maxdiff "$w-ref" "$w-$v"; done | sort -g | tail -n 1)
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
