#!/usr/bin/env python3
"""Checks an -fsdp-trace file (docs/DESIGN.md, "Trace file").

usage: check_trace.py TRACE --world N --steps K [--stats STATS] [--hosts H0,H1,...]

Prints one line per check ("ok   - ..." or "FAIL - ...") and exits 1 if any
failed: the file is JSON in the Trace Event Format (an object with
traceEvents); every event has a rank (pid, and args.rank alike) and a
track (tid, named by a thread_name); with --checkpoints, every rank's
checkpoint writer track has each snapshot's write, with bytes; on each track the complete events
nest or follow one another, never overlap in part; every rank's steps
1..K appear; each rank has a process named with its host (--hosts: rank
r's) and resident-memory counters; the stated clock error is there; with
--stats (a window holding the whole run), rank 0's all-gather and
reduce-scatter bytes add up to the stats file's.
"""
import argparse
import json
import sys
from collections import defaultdict

FAILS = []


def check(what, ok):
    print(("ok   - " if ok else "FAIL - ") + what)
    if not ok:
        FAILS.append(what)


def nests_or_follows(events):
    """Sorted by start (longer first): each starts after the last open one
    ended, or ends within it."""
    stack = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        a, b = e["ts"], e["ts"] + e["dur"]
        while stack and stack[-1] <= a + 1e-6:
            stack.pop()
        if stack and b > stack[-1] + 1e-6:
            return "%s at %.3f us (ends %.3f) overlaps one ending at %.3f" % (e["name"], a, b, stack[-1])
        stack.append(b)
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--stats")
    p.add_argument("--hosts")
    p.add_argument("--checkpoints", action="store_true", help="checkpoints on the clock ran in the window")
    a = p.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    check("a JSON object with a traceEvents list", isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list))
    evs = doc["traceEvents"]
    meta = [e for e in evs if e.get("ph") == "M"]
    data = [e for e in evs if e.get("ph") != "M"]
    check("every event has a phase, a name, a rank and a track",
          all(e.get("ph") in ("X", "C") and "name" in e and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)
              and e.get("args", {}).get("rank") == e["pid"] and 0 <= e["pid"] < a.world for e in data))
    check("every complete event has a start and a duration >= 0",
          all(e["ph"] != "X" or (e["ts"] >= 0 and e["dur"] >= 0) for e in data))
    threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    check("every event's track is named", all((e["pid"], e["tid"]) in threads for e in data))
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    hosts = a.hosts.split(",") if a.hosts else None
    check("one process per rank, named with its host: %s" % sorted(procs.items()),
          sorted(procs) == list(range(a.world)) and
          all(procs[r].startswith("rank %d (" % r) and (not hosts or procs[r] == "rank %d (%s)" % (r, hosts[r]))
              for r in procs))
    tracks = defaultdict(list)
    for e in data:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    bad = [(k, nests_or_follows(v)) for k, v in tracks.items()]
    bad = [b for b in bad if b[1]]
    check("events on each track nest or follow (%d tracks)%s" % (len(tracks), ": %s" % bad[:3] if bad else ""), not bad)
    for r in range(a.world):
        steps = {e["args"]["step"] for e in data if e["pid"] == r and e["ph"] == "X"}
        check("rank %d's steps 1..%d appear" % (r, a.steps), set(range(1, a.steps + 1)) <= steps)
        cats = {e["cat"] for e in data if e["pid"] == r}
        check("rank %d has compute, step plan, collectives and memory: %s" % (r, sorted(cats)),
              {"compute", "step plan", "collectives", "memory"} <= cats)
        if a.checkpoints:
            ck = [e for e in data if e["pid"] == r and e["cat"] == "checkpoint writer"]
            names = {e["name"] for e in ck}
            check("rank %d's checkpoint writer track has snapshots and writes with their bytes: %d events" % (r, len(ck)),
                  names == {"snapshot", "write"} and all(e["args"]["bytes"] > 0 for e in ck) and
                  sum(e["name"] == "write" for e in ck) == sum(e["name"] == "snapshot" for e in ck))
    other = doc.get("otherData", {})
    check("the clocks' alignment error is stated: %s s" % other.get("clock_error_s"),
          isinstance(other.get("clock_error_s"), float) and (a.world == 1 or other["clock_error_s"] > 0))
    if a.stats:
        with open(a.stats) as f:
            stats = json.load(f)
        # The window holds every step and the weights files' saves after
        # the set-up: the training's gathers and the saves' (checkpoint_all_gather).
        for kind, keys in (("all-gather", ("all_gather", "checkpoint_all_gather")), ("reduce-scatter", ("reduce_scatter",))):
            got = sum(e["args"]["bytes"] for e in data if e["pid"] == 0 and e["cat"] == "collectives" and e["name"] == kind)
            want = sum(stats["bytes"][k] for k in keys)
            check("rank 0's %s bytes in the trace, %d, are the stats file's %s, %d" % (kind, got, " + ".join(keys), want),
                  got == want and want > 0)
    sys.exit(1 if FAILS else 0)


main()
