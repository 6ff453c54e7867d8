#!/usr/bin/env bash
# -fsdp-log and tools/plot (docs/DESIGN.md, "Log file"): on 2 ranks, 20
# steps give 20 JSON lines from rank 0 whose losses are the ones Darknet
# prints, whose bytes add up to the stats file's, with progress lines and
# the time left on stderr; tools/plot draws a PNG from two such logs and
# refuses a file that is not one.
. "$(dirname "$0")/lib.sh"
D=$WORK/data
make_data "$D" --classes 3 --per-class 16
# Batch norm on the first layer: its all-reduces count as bytes moved too.
sed 's/^max_batches=.*/max_batches=20/; 0,/^filters=7$/s//filters=7\nbatch_normalize=1/' "$S/cfg/tests/tiny.cfg" > "$WORK/tiny.cfg"
train_np "$WORK/a.w" 2 "$D/data.data" "$WORK/tiny.cfg" -seed 6 -fsdp-log "$WORK/a.jsonl" -fsdp-stats "$WORK/a.json"

python3 - "$WORK/a.jsonl" "$WORK/a.json" "$WORK/a.w.log" <<'PY' && pass "20 log lines: steps, losses as Darknet prints them, bytes as the stats file counts them" || fail "the log's lines (above)"
import json, re, sys
log, stats, out = sys.argv[1:]
lines = [json.loads(l) for l in open(log)]
st = json.load(open(stats))
bad = []
keys = {"step", "loss", "avg_loss", "lr", "seconds", "images_per_s", "images", "bytes", "rss_bytes", "world", "max_batches"}
for n, l in enumerate(lines, 1):
    if set(l) != keys: bad.append("line %d keys %s" % (n, sorted(l)))
    if l["step"] != n: bad.append("line %d is step %s" % (n, l["step"]))
    if l["images"] != n * 8 * 2: bad.append("line %d: images %s" % (n, l["images"]))
    if not (l["seconds"] > 0 and l["images_per_s"] > 0 and l["rss_bytes"] > 1 << 20 and l["world"] == 2):
        bad.append("line %d: seconds, images/s, RSS or world %s" % (n, l))
# Darknet's iteration line: "step, epoch: loss, avg avg, lr rate, ..."
printed = [tuple(map(float, m.groups())) for m in
           re.finditer(r"^(\d+), [0-9.]+: ([0-9.]+), ([0-9.]+) avg, ([0-9.]+) rate", open(out).read(), re.M)]
if len(lines) != 20 or len(printed) != 20: bad.append("%d lines, %d printed steps" % (len(lines), len(printed)))
for l, p in zip(lines, printed):
    if l["step"] != p[0] or max(abs(l["loss"] - p[1]), abs(l["avg_loss"] - p[2]), abs(l["lr"] - p[3])) > 2e-6:
        bad.append("step %s: logged %s, printed %s" % (l["step"], l, p))
total = sum(l["bytes"] for l in lines)
want = sum(st["bytes"][k] for k in ("all_gather", "reduce_scatter", "all_reduce", "bn_all_reduce"))
if total != want or st["bytes"]["bn_all_reduce"] == 0: bad.append("bytes: log %d, stats %d (%s)" % (total, want, st["bytes"]))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
progress=$(grep -c '^fsdp: step [0-9]*/20 ([0-9]*%), loss [0-9.]* (avg [0-9.]*), [0-9]* images/s, [0-9:]* left$' "$WORK/a.w.err" || true)
check "a progress line at the first step and every 2 steps, with the time left ($progress)" [ "$progress" = 11 ]

train_np "$WORK/b.w" 2 "$D/data.data" "$WORK/tiny.cfg" -seed 7 -fsdp-log "$WORK/b.jsonl"
"$S/tools/plot" "$WORK/a.jsonl" "$WORK/b.jsonl" -o "$WORK/chart.png" > "$WORK/plot.out" 2>&1 && rc=0 || rc=$?
check "tools/plot draws a PNG from two logs (exit $rc, $(stat -c %s "$WORK/chart.png" 2>/dev/null) bytes)" \
  [ "$rc" = 0 -a "$(head -c 8 "$WORK/chart.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a -a \
    "$(stat -c %s "$WORK/chart.png" 2>/dev/null || echo 0)" -gt 10000 ]
echo '{"step": 1}' > "$WORK/bad.jsonl"
out=$("$S/tools/plot" "$WORK/bad.jsonl" -o "$WORK/bad.png" 2>&1) && rc=0 || rc=$?
check "tools/plot refuses a file that is not a log (exit $rc)" \
  [ "$rc" = 1 -a ! -e "$WORK/bad.png" -a -n "$(grep "bad.jsonl:1: not an -fsdp-log line" <<< "$out")" ]
finish
