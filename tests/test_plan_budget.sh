#!/usr/bin/env bash
# -fsdp-plan N CFG -fsdp-budget MB: for each world, the fewest subdivisions
# whose predicted peak per rank fits.  Checked against -fsdp-plan's own
# predictions for copies of the cfg at each subdivisions (Darknet's resnet18
# at 32x32, batch 16), without and with recompute=1 in [net]: the row
# chosen fits, the one with half the subdivisions does not, and its peak is
# the one the plan gives that copy; recompute needs no more subdivisions; a
# budget nothing fits says so; bad uses are refused by name.  And the
# groups table and the line on recompute=1 that come after the plan.
. "$(dirname "$0")/lib.sh"
base=$WORK/resnet18.cfg
# (The copying path: under node-shared parameters, the default on one
# machine, a rank's RSS maps every parameter, which -fsdp-budget counts.)
sed 's/^batch=.*/batch=16/; s/^subdivisions=.*/subdivisions=1/; s/^\[net\]$/[net]\nshard_node_shared=0/' "$S/cfg/tests/resnet18-bn.cfg" > "$base"

# The full column of -fsdp-plan 2 for each subdivisions, without and with
# recompute=1, as "RC S W PEAK" lines.
for rc in 0 1; do
  for s in 1 2 4 8 16; do
    sed "s/^subdivisions=.*/subdivisions=$s/; s/^\[net\]$/[net]\nrecompute=$rc/" "$base" > "$WORK/sub$s-$rc.cfg"
    "$DN" -plugin "$PLUGIN" -fsdp-plan 2 "$WORK/sub$s-$rc.cfg" 2> /dev/null |
      awk -v s="$s" -v rc="$rc" -F'|' '/^\| [0-9]+ \|/ { split($3, c, " "); print rc, s, $2 + 0, c[1] }'
  done
done > "$WORK/peaks"
check "-fsdp-plan gave a peak for every subdivisions, world and recompute" test "$(wc -l < "$WORK/peaks")" = 20
# A budget between subdivisions 2 and 4 at world 1 without recompute.
budget=$(awk '$1 == 0 && $3 == 1 && $2 == 2 { a = $4 } $1 == 0 && $3 == 1 && $2 == 4 { b = $4 } END { printf "%.1f", (a + b) / 2 }' "$WORK/peaks")

fits() { # fits OUT: the budget table in OUT against the peaks
  python3 - "$1" "$WORK/peaks" "$2" <<'EOF'
import re, sys
out, budget = open(sys.argv[1]).read(), float(sys.argv[3])
peaks = {}
for line in open(sys.argv[2]):
    rc, s, w, p = line.split()
    peaks[int(rc), int(s), int(w)] = float(p)
table = out.split("Settings that fit", 1)[1] if "Settings that fit" in out else ""
rows = re.findall(r"^\| (\d+) \| ([01]) \| (\d+) \| (\d+) \| ([\d.]+) \|$", table, re.M)
bad, chosen = [], {}
for w, rc, s, n, p in rows:
    w, rc, s, n, p = int(w), int(rc), int(s), int(n), float(p)
    chosen[w, rc] = s
    # The fixed cost is each process's own: the same cfg agrees to a megabyte.
    if abs(p - peaks[rc, s, w]) > 1 or p > budget or n != 16 // s:
        bad.append("world %d, recompute=%d: %d subdivisions, %d images, %.1f MB (plan %.1f)" % (w, rc, s, n, p, peaks[rc, s, w]))
    if s > 1 and peaks[rc, s // 2, w] <= budget - 1:
        bad.append("world %d, recompute=%d: %d subdivisions would fit (%.1f MB)" % (w, rc, s // 2, peaks[rc, s // 2, w]))
for w in (1, 2):
    if chosen.get((w, 1), 99) > chosen.get((w, 0), 0):
        bad.append("world %d: recompute=1 needs more subdivisions" % w)
print(rows, "; ".join(bad))
sys.exit(0 if len(rows) == 4 and not bad and chosen[1, 0] == 4 and chosen[1, 1] < 4 else 1)
EOF
}
"$DN" -plugin "$PLUGIN" -fsdp-plan 2 "$base" -fsdp-budget "$budget" > "$WORK/budget.md" 2> "$WORK/budget.err"
# The groups table at 2 ranks: every layer in one group's span once, the
# parameters summing to the cfg's 11004227; and the line on recompute=1,
# whose peaks are the plan's for the copies with and without it.
groups_check() {
  python3 - "$WORK/budget.md" "$WORK/peaks" <<'EOF'
import re, sys
out = open(sys.argv[1]).read()
peaks = {}
for line in open(sys.argv[2]):
    rc, s, w, p = line.split()
    peaks[int(rc), int(s), int(w)] = float(p)
table = out.split("Groups at 2 ranks", 1)[1].split("Shared by the groups", 1)[0] if "Groups at 2 ranks" in out else ""
rows = re.findall(r"^\| (\S+) \| ([\d-]+|none) \| (\d+) \| ([\d.]+) \| (no|yes.*) \|$", table, re.M)
layers = []
for name, span, params, held, rc in rows:
    if span != "none":
        a, _, b = span.partition("-")
        layers += range(int(a), int(b or a) + 1)
m = re.search(r"With recompute=1 in \[net\], 2 ranks under shard=full need ([\d.]+) MB each \(([\d.]+) as the cfg is\)", out)
ok = rows and sorted(layers) == list(range(len(layers))) and sum(int(r[2]) for r in rows) == 11004227 and m \
     and abs(float(m.group(1)) - peaks[1, 1, 2]) <= 1 and abs(float(m.group(2)) - peaks[0, 1, 2]) <= 1
print(len(rows), "groups,", len(layers), "layers,", m.groups() if m else None, peaks[1, 1, 2], peaks[0, 1, 2])
sys.exit(0 if ok else 1)
EOF
}
check "-fsdp-plan 2: a row per group covering every layer once, and what recompute=1 would need" groups_check
check "-fsdp-budget $budget: the fewest subdivisions that fit, world 1 at 4 (fewer with recompute=1), each as the plan predicts it" \
  fits "$WORK/budget.md" "$budget"
"$DN" -plugin "$PLUGIN" -fsdp-plan 1 "$base" -fsdp-budget 1 > "$WORK/none.md" 2>&1
check "-fsdp-budget 1: nothing fits, and the rows say so at 16 subdivisions" \
  test "$(grep -cE '^\| 1 \| [01] \| none fits \| at 16 subdivisions, 1 \| [0-9.]+ \|$' "$WORK/none.md")" = 2

refused() { # refused WHAT PATTERN ARGS...: a non-zero exit with PATTERN
  local what=$1 pat=$2 out rc=0; shift 2
  out=$("$DN" -plugin "$PLUGIN" "$@" 2>&1) || rc=$?
  if [ "$rc" != 0 ] && grep -qE -- "$pat" <<< "$out"; then pass "$what (exit $rc)"; else fail "$what: exit $rc: $out"; fi
}
refused "-fsdp-budget abc refused" "-fsdp-budget abc: expected megabytes per rank, more than 0" -fsdp-plan 1 "$base" -fsdp-budget abc
refused "-fsdp-budget without -fsdp-plan refused" "-fsdp-budget 100: it bounds the settings -fsdp-plan prints" \
  -fsdp-budget 100 classifier train "$WORK/none.data" "$base"
# A cfg the plugin refuses: -fsdp-plan says why (file and line), before any table.
{ cat "$base"; printf 'shard=none\n'; } > "$WORK/refused.cfg"
refused "-fsdp-plan with a cfg the plugin refuses: the reason by file and line" \
  "refused.cfg:$(( $(wc -l < "$base") + 1 )): unknown layer key shard" -fsdp-plan 2 "$WORK/refused.cfg"
{ sed -n '1,/^\[net\]/p' "$base"; printf 'subdivisions=999999\n'; sed '1,/^\[net\]/d' "$base"; } > "$WORK/nobatch.cfg"
refused "-fsdp-plan with a forward of no image: Darknet's refusal by its line" \
  "nobatch.cfg:[0-9]+: \[net\] batch=[0-9]+, subdivisions=999999: each forward takes" -fsdp-plan 2 "$WORK/nobatch.cfg"
check "-fsdp-plan with a refused cfg prints no table" \
  test -z "$("$DN" -plugin "$PLUGIN" -fsdp-plan 2 "$WORK/refused.cfg" 2>/dev/null)"
finish
