#!/usr/bin/env bash
# -fsdp-plan WORLDS CFG: a list of worlds gives the same rows as the range
# that holds them (the bracketed figures exactly; the peak within the run
# to run variation of the fixed cost, 0.5 MB), in ascending order, each
# once; N alone is 1..N; 1024 ranks of a small cfg plan in one process;
# machines MxL: 1xL is the world L's row, 2x2 under shard=full and with
# shard_node_shared=1 are what -fsdp-link 2x2 plans for them (less a fixed
# cost measured after its compute); malformed worlds are refused by name.
. "$(dirname "$0")/lib.sh"
cfg=$S/cfg/bench/scale.cfg
rows() { # rows OUT: "WORLD|CELL|CELL|CELL" per row of the table in OUT
  sed -n 's/^| \([0-9][0-9]*\) |\(.*\) |$/\1|\2/p' "$1"
}
plan() { # plan WORLDS CFG OUT
  "$DN" -plugin "$PLUGIN" -fsdp-plan "$1" "$2" > "$3" 2> "$3.err"
}
check "-fsdp-plan 1-40: exit 0" plan 1-40 "$cfg" "$WORK/range.md"
check "-fsdp-plan 40,3,17-18,1,3: exit 0" plan 40,3,17-18,1,3 "$cfg" "$WORK/list.md"
check "-fsdp-plan 40: exit 0" plan 40 "$cfg" "$WORK/n.md"
check "the range has a row for each world 1..40, in order" \
  test "$(rows "$WORK/range.md" | cut -d'|' -f1 | tr '\n' ' ')" = "$(seq 1 40 | tr '\n' ' ')"
check "the list has a row for each of its worlds, ascending, once" \
  test "$(rows "$WORK/list.md" | cut -d'|' -f1 | tr '\n' ' ')" = "1 3 17 18 40 "
check "N alone is 1..N" test "$(rows "$WORK/n.md" | cut -d'|' -f1 | tr '\n' ' ')" = "$(seq 1 40 | tr '\n' ' ')"
same_rows() { # same_rows A B: each row of A as B has it
  python3 - "$1" "$2" <<'PY'
import re, sys
def rows(path):
    out = {}
    for line in open(path):
        m = re.match(r"\| (\d+) \|(.*)\|\s*$", line)
        if m:
            out[int(m.group(1))] = [c.strip() for c in m.group(2).split("|")]
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
bad = []
for w, cells in a.items():
    for x, y in zip(cells, b.get(w, [])):
        # the peak (first figure) and PSS carry this process's fixed cost
        fx, fy = re.findall(r"[\d.]+", x), re.findall(r"[\d.]+", y)
        pss = "PSS" in x
        inner = slice(1, len(fx) - 1 if pss else len(fx))
        if fx[inner] != fy[inner] or len(fx) != len(fy) or \
           any(abs(float(p) - float(q)) > 0.5 for p, q in ((fx[0], fy[0]),) + (((fx[-1], fy[-1]),) if pss else ())):
            bad.append("world %d: %s against %s" % (w, x, y))
    if len(cells) != 3 or w not in b:
        bad.append("world %d: %s" % (w, cells))
print("; ".join(bad) if bad else "%d rows" % len(a))
sys.exit(1 if bad or not a else 0)
PY
}
check "the list's rows are the range's: $(same_rows "$WORK/list.md" "$WORK/range.md")" same_rows "$WORK/list.md" "$WORK/range.md"
check "N alone gives the range's rows" same_rows "$WORK/n.md" "$WORK/range.md"
check "the groups table and the line on recompute=1 are at the most ranks listed" \
  grep -q "^With recompute=1 in \[net\], 40 ranks under shard=full need" "$WORK/list.md"

# 1024 ranks of a small cfg: every row, in one process.
check "-fsdp-plan 1024 on tiny.cfg: exit 0" plan 1024 "$S/cfg/tests/tiny.cfg" "$WORK/1024.md"
check "-fsdp-plan 1024: a row for each of 1..1024" \
  test "$(rows "$WORK/1024.md" | cut -d'|' -f1 | tr '\n' ' ')" = "$(seq 1 1024 | tr '\n' ' ')"

# Machines, as -fsdp-link reads them.
check "-fsdp-plan 4,1x4,2x2,8x4: exit 0" plan 4,1x4,2x2,8x4 "$cfg" "$WORK/machines.md"
check "its rows: 4 (1x4 is it), 2x2, 8x4" \
  test "$(sed -n 's/^| \([0-9x]*\) |.*/\1/p' "$WORK/machines.md" | tr '\n' ' ')" = "4 2x2 8x4 "
check "1x4 is the world of 4's row: $(same_rows "$WORK/machines.md" "$WORK/range.md")" \
  same_rows "$WORK/machines.md" "$WORK/range.md"
check "on several machines the default keeps node memory off (the copying path)" \
  eval '! grep -q "^| 2x2 | [0-9.]* ([0-9.]* + [0-9.]* node-shared" "$WORK/machines.md"'
link=$S/cfg/bench/link.cfg
sed 's/^\[net\]$/[net]\nshard_node_shared=1/' "$link" > "$WORK/hybrid.cfg"
check "-fsdp-plan 2x2 on link.cfg: exit 0" plan 2x2 "$link" "$WORK/link22.md"
check "-fsdp-plan 2x2 with shard_node_shared=1: exit 0" plan 2x2 "$WORK/hybrid.cfg" "$WORK/hybrid22.md"
check "-fsdp-link 2x2,20: exit 0" eval '"$DN" -plugin "$PLUGIN" -fsdp-plan 1 "$link" -fsdp-link 2x2,20 > "$WORK/link.md" 2>&1'
out=$(python3 - "$WORK/link22.md" "$WORK/hybrid22.md" "$WORK/link.md" <<'PY'
import re, sys
def peak(path):
    return float(re.search(r"^\| 2x2 \| ([\d.]+) ", open(path).read(), re.M).group(1))
full, hybrid = peak(sys.argv[1]), peak(sys.argv[2])
link = {}
for line in open(sys.argv[3]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 8 and c[1] == "fp32":
        link["hybrid" in c[0]] = float(c[7])
d = [link[False] - full, link[True] - hybrid]
ok = len(link) == 2 and 0 <= d[0] < 5 and abs(d[0] - d[1]) <= 0.15
print("-fsdp-plan 2x2: %.1f and %.1f (hybrid) MB; -fsdp-link 2x2: %.1f and %.1f" % (full, hybrid, link.get(False, 0), link.get(True, 0)))
sys.exit(0 if ok else 1)
PY
) && pass "2x2 as -fsdp-link plans it, the same fixed cost apart: $out" || fail "2x2 against -fsdp-link: $out"
check "node memory on 2x2 under shard_node_shared=1 (hybrid sharding)" \
  grep -q "^| 2x2 | [0-9.]* ([0-9.]* + [0-9.]* node-shared" "$WORK/hybrid22.md"

for bad in 5-3 1,,2 0 4097 8x 0x4 2x2-4 65x64 3x; do
  rc=0
  "$DN" -plugin "$PLUGIN" -fsdp-plan "$bad" "$cfg" > "$WORK/bad.out" 2> "$WORK/bad.err" || rc=$?
  check "-fsdp-plan $bad refused by name, exit 1, no table" \
    eval '[ $rc = 1 ] && grep -q -- "-fsdp-plan $bad: expected a number of ranks from 1 to 4096" "$WORK/bad.err" && ! [ -s "$WORK/bad.out" ]'
done
finish
