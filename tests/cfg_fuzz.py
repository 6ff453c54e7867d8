#!/usr/bin/env python3
"""Writes mutants of Darknet cfgs for tests/test_cfg_fuzz.sh.

Each mutant is one of the given cfgs with one to three mutations: a line
deleted, a section duplicated, a value replaced by a random or odd one, a
value or its '=' removed, an odd or deeply nested group name, a stray line,
the plugin's keys added with random values.  Deterministic for a seed.

usage: cfg_fuzz.py OUT_DIR COUNT SEED CFG...
Writes OUT_DIR/mNNN.cfg and prints one line per mutant: its file and what
was done to which base.
"""
import os
import random
import sys

ODD_VALUES = ["", "-1", "0", "1", "3", "0.5", "-0.001", "99999999", "1e30", "nan", "inf", "abc",
              "1,2,3", "0x10", " 7", "2 3", "=", "é", "-", "."]
GROUP_NAMES = ["", ".", "a..b", "a.", ".a", "a b", "ä", "a/b", "x" * 3000, "g-1_2.h", "trunk",
               "head", "trunk.block1", "body"]
NET_KEYS = ["shard", "reshard_after_forward", "shard_prefetch", "shard_auto_group", "sync_bn",
            "shard_bogus", "frozen", "batch", "subdivisions", "learning_rate", "max_batches",
            "width", "height", "channels", "momentum", "decay", "adam", "policy"]
LAYER_KEYS = ["frozen", "shard_group", "filters", "size", "stride", "pad", "output", "activation",
              "batch_normalize", "from", "layers", "groups", "dontload", "learning_rate", "probability"]


def sections(lines):
    """(start, end) line ranges of each [section], header included."""
    starts = [i for i, l in enumerate(lines) if l.strip().startswith("[")]
    return [(s, (starts[k + 1] if k + 1 < len(starts) else len(lines))) for k, s in enumerate(starts)]


def option_lines(lines):
    return [i for i, l in enumerate(lines) if "=" in l and not l.lstrip().startswith(("#", ";", "["))]


def group_name(rng):
    r = rng.random()
    if r < 0.15:
        return ".".join("g%d" % i for i in range(rng.choice([8, 64, 65, 200, 20000])))
    return rng.choice(GROUP_NAMES)


def mutate(lines, rng):
    secs = sections(lines)
    opts = option_lines(lines)
    kind = rng.choice(["delete", "duplicate", "value", "novalue", "noequals", "group", "stray",
                       "netkey", "layerkey", "frozen"])
    if kind == "delete" and lines:
        i = rng.randrange(len(lines))
        return lines[:i] + lines[i + 1:], "deleted line %d" % (i + 1)
    if kind == "duplicate" and len(secs) > 1:
        s, e = rng.choice(secs[1:])
        return lines[:e] + lines[s:e] + lines[e:], "duplicated the section at line %d" % (s + 1)
    if kind in ("value", "novalue", "noequals") and opts:
        i = rng.choice(opts)
        key = lines[i].split("=", 1)[0]
        new = {"value": "%s=%s" % (key, rng.choice(ODD_VALUES)), "novalue": key + "=", "noequals": key}[kind]
        return lines[:i] + [new] + lines[i + 1:], "line %d: %s" % (i + 1, new[:60])
    if kind == "group" and len(secs) > 1:
        s, e = rng.choice(secs[1:])
        new = "shard_group=" + group_name(rng)
        return lines[:s + 1] + [new] + lines[s + 1:], "line %d: %s" % (s + 2, new[:60])
    if kind == "stray":
        i = rng.randrange(len(lines) + 1)
        new = rng.choice(["[", "[]", "[bogus]", "=", "=1", "key", "[net]", "[convolutional]", "x" * 5000])
        return lines[:i] + [new] + lines[i:], "line %d: %s" % (i + 1, new[:60])
    if kind == "netkey" and secs:
        s = secs[0][0]
        new = "%s=%s" % (rng.choice(NET_KEYS), rng.choice(ODD_VALUES + ["full", "grad_op", "none"]))
        return lines[:s + 1] + [new] + lines[s + 1:], "line %d: %s" % (s + 2, new[:60])
    if kind in ("layerkey", "frozen") and len(secs) > 1:
        s, e = rng.choice(secs[1:])
        new = "frozen=1" if kind == "frozen" else "%s=%s" % (rng.choice(LAYER_KEYS), rng.choice(ODD_VALUES))
        return lines[:s + 1] + [new] + lines[s + 1:], "line %d: %s" % (s + 2, new[:60])
    return lines, "unchanged"


def main():
    out, count, seed, cfgs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    rng = random.Random(seed)
    bases = {c: open(c).read().splitlines() for c in cfgs}
    os.makedirs(out, exist_ok=True)
    for n in range(count):
        base = rng.choice(cfgs)
        lines = bases[base]
        what = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            lines, w = mutate(lines, rng)
            what.append(w)
        path = os.path.join(out, "m%03d.cfg" % n)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("%s\t%s\t%s" % (path, os.path.basename(base), "; ".join(what)))


if __name__ == "__main__":
    main()
