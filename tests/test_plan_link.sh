#!/usr/bin/env bash
# -fsdp-plan N CFG -fsdp-link MxL,MBIT[,MS]: a step's time across machines
# (docs/DESIGN.md, "Planning a step across machines").  On
# cfg/bench/link.cfg (three connected layers in groups a, b and the root),
# 2 machines of 2 ranks: each row's bytes equal the byte theory worked out
# here from the layers' sizes (full: each part of 2 forward gathers of a,
# one of b and the root, the backward gather of a, and the three
# reduce-scatters, to the one other machine; hybrid: each rank's sums and
# updated part; int8 and bf16 each part encoded), the link time is those
# bytes at the rate with the headers' 4% and the latency's round trips,
# the overlapped step is at least the link time, and the last line names
# the fastest setting within -fsdp-budget.  Bad uses are refused by name,
# as is -fsdp-log-events without -fsdp-log.
#
# test_plan_link.sh --check PLAN SPEC: that check alone, on a plan printed
# for the machines SPEC describes (tests/test_machines.sh plan, with what
# -fsdp-link probe measured).
theory() { # theory PLAN SPEC
  python3 - "$1" "$2" <<'PY'
import math, re, sys
out, spec = open(sys.argv[1]).read(), sys.argv[2]
m, l, rate, lat = re.match(r"(\d+)x(\d+),([\d.]+)(?:,([\d.]+))?$", spec).groups()
m, l, rate, lat = int(m), int(l), float(rate), float(lat or 0)
n = m * l
a, b, root = 3072 * 768 + 768, 768 * 768 + 768, 768 * 6 + 6
pad = lambda x: -(-x // n) * n
parts = [pad(x) // n for x in (a, b, root)]
coded = {"fp32": lambda k: 4 * k, "bf16": lambda k: 2 * k, "int8": lambda k: k + 4 * -(-k // 256)}
rows = re.findall(r"^\| (shard=full[^|]*) \| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", out, re.M)
bad = []
for name, wire, mb, link, plain, over in rows:
    hybrid = "hybrid" in name
    enc = coded[wire]
    if hybrid:   # sums and updated part, to the other machine
        per_rank = 2 * (m - 1) * sum(enc(p) for p in parts)
        exchanges = 2 * 3
    else:        # a gathered twice, b and the root once; each reduce-scattered once
        per_rank = (m - 1) * sum(k * enc(p) for k, p in zip((3, 2, 2), parts))
        exchanges = 3 + 3
    want = per_rank * l
    want_link = want * 8 * 1.04 / (rate * 1e6) + exchanges * 2 * lat / 1e3
    if abs(float(mb) - want / 1e6) > 0.006 or abs(float(link) - want_link) > 0.0011 + 0.001 * want_link:
        bad.append("%s %s: %s MB, %s s (theory %.3f MB, %.4f s)" % (name, wire, mb, link, want / 1e6, want_link))
    if float(over) < float(link) - 0.001 or float(plain) < float(over) - 0.001:
        bad.append("%s %s: overlapped %s, link %s, plain %s" % (name, wire, over, link, plain))
print(len(rows), "rows;", "; ".join(bad) or "all as the theory")
sys.exit(len(rows) != 6 or bool(bad))
PY
}
if [ "${1:-}" = --check ]; then theory "$2" "$3"; exit; fi
. "$(dirname "$0")/lib.sh"
cfg=$S/cfg/bench/link.cfg
for spec in 2x2,20 2x2,1000,0.5; do
  "$DN" -plugin "$PLUGIN" -fsdp-plan 4 "$cfg" -fsdp-link "$spec" > "$WORK/plan.md" 2> "$WORK/plan.err" ||
    fail "-fsdp-plan 4 -fsdp-link $spec ran"
  check "-fsdp-link $spec: every row's bytes, link time and step follow the theory" theory "$WORK/plan.md" "$spec"
done
check "-fsdp-link without a budget: the fastest is hybrid with int8" \
  grep -q "^Fastest: shard=full, shard_node_shared=1 (hybrid) with shard_wire=int8" "$WORK/plan.md"
# A budget between full's peak and hybrid's (hybrid keeps the whole model
# once per machine): the fastest that fits is full with int8.
budget=$(python3 -c 'import re, sys
rows = re.findall(r"^\| (shard=full[^|]*) \| \w+ \|.*\| ([\d.]+) \|$", open(sys.argv[1]).read(), re.M)
full = max(float(p) for n, p in rows if "hybrid" not in n); hyb = min(float(p) for n, p in rows if "hybrid" in n)
print("%.1f" % ((full + hyb) / 2) if full < hyb else "none")' "$WORK/plan.md")
if [ "$budget" != none ]; then
  "$DN" -plugin "$PLUGIN" -fsdp-plan 4 "$cfg" -fsdp-link 2x2,20 -fsdp-budget "$budget" > "$WORK/budget.md" 2>&1
  check "-fsdp-budget $budget: the fastest that fits is full with int8, and hybrid is over it" \
    bash -c "grep -q '^Fastest within $budget MB per rank: shard=full with shard_wire=int8' '$WORK/budget.md' &&
             grep -q 'hybrid.*(over the budget)' '$WORK/budget.md'"
else
  fail "hybrid's peak is above full's (the budget check needs it)"
fi
refused() { # refused WHAT PATTERN ARGS...: exit non-zero, PATTERN on stderr
  local what=$1 pattern=$2; shift 2
  if "$DN" -plugin "$PLUGIN" "$@" > "$WORK/r.out" 2> "$WORK/r.err"; then fail "$what: exit 0"
  else check "$what: refused, naming it" grep -qF -- "$pattern" "$WORK/r.err"; fi
}
refused "-fsdp-link alone" "-fsdp-link 2x2,20: it describes the machines -fsdp-plan plans a step for" \
  -fsdp-link 2x2,20 classifier train x.data "$cfg"
refused "-fsdp-link 2x2" "-fsdp-link 2x2: expected MACHINESxRANKS,MBIT[,MS]" -fsdp-plan 4 "$cfg" -fsdp-link 2x2
refused "-fsdp-link 2x2,fast" "-fsdp-link 2x2,fast: expected" -fsdp-plan 4 "$cfg" -fsdp-link 2x2,fast
refused "-fsdp-link 0x2,20" "-fsdp-link 0x2,20: expected" -fsdp-plan 4 "$cfg" -fsdp-link 0x2,20
refused "-fsdp-log-events without -fsdp-log" "-fsdp-log-events: it adds the step's events to the lines of -fsdp-log" \
  -fsdp-log-events classifier train x.data "$cfg"
finish
