#!/usr/bin/env bash
# -fsdp-log and tools/plot (docs/DESIGN.md, "Log file"): on 2 ranks, 20
# steps give 20 JSON lines from rank 0 whose losses are the ones Darknet
# prints, whose bytes add up to the stats file's, with progress lines and
# the time left on stderr; tools/plot draws a PNG from two such logs and
# refuses a file that is not one.  With -fsdp-log-events the same run
# trains the same bytes, and each line lists the step's operations, in
# order, within the step, with no bytes to other machines on one machine;
# tools/plot --timeline draws one step, and refuses a log without events.
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
train_np "$WORK/c.w" 2 "$D/data.data" "$WORK/tiny.cfg" -seed 6 -fsdp-log "$WORK/c.jsonl" -fsdp-log-events
check "-fsdp-log-events: the same weights, byte for byte" "$WDIFF" "$WORK/a.w" "$WORK/c.w" --exact
check "-fsdp-log-events: each step's operations in order, within the step, no bytes between machines" \
  python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = {"gather", "prefetch", "reduce", "settle", "step", "parts", "loss"}
bad = []
for l in lines:
    ev = l["events"]
    starts = [e[2] for e in ev]
    if not ev or starts != sorted(starts) or l["events_dropped"]: bad.append("step %d: %s" % (l["step"], ev))
    if abs(l["step_seconds"] - l["seconds"]) > 0.05 * l["seconds"] + 1e-3: bad.append("step %d: %s" % (l["step"], l["step_seconds"]))
    for e in ev:
        if e[0] not in kinds or e[3] is None or not (0 <= e[2] <= e[3] <= l["step_seconds"] + 1e-6) or e[4] or e[5]:
            bad.append("step %d: %s" % (l["step"], e))
    if not any(e[0] == "reduce" for e in ev): bad.append("step %d: no reduce" % l["step"])
print(len(lines), "lines;", "; ".join(bad[:5]))
sys.exit(len(lines) != 20 or bool(bad))' "$WORK/c.jsonl"
"$S/tools/plot" --timeline "$WORK/c.jsonl" -o "$WORK/timeline.png" > "$WORK/tl.out" 2>&1 && rc=0 || rc=$?
check "tools/plot --timeline draws one step (exit $rc)" \
  [ "$rc" = 0 -a "$(head -c 8 "$WORK/timeline.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
out=$("$S/tools/plot" --timeline "$WORK/a.jsonl" -o "$WORK/t2.png" 2>&1) && rc=0 || rc=$?
check "tools/plot --timeline refuses a log without events (exit $rc)" \
  [ "$rc" = 1 -a ! -e "$WORK/t2.png" -a -n "$(grep "a.jsonl:1: no events (run with -fsdp-log-events)" <<< "$out")" ]
echo '{"step": 1}' > "$WORK/bad.jsonl"
out=$("$S/tools/plot" "$WORK/bad.jsonl" -o "$WORK/bad.png" 2>&1) && rc=0 || rc=$?
check "tools/plot refuses a file that is not a log (exit $rc)" \
  [ "$rc" = 1 -a ! -e "$WORK/bad.png" -a -n "$(grep "bad.jsonl:1: not an -fsdp-log line" <<< "$out")" ]
finish
