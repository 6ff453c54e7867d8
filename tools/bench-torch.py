#!/usr/bin/env python3
"""tools/bench-torch.py [--steps N] [--worlds 1,2,4] [--nets big,probe]
                        [--impls fsdp1,fsdp2,ddp] [--repeats R]

PyTorch's FSDP1 (FULL_SHARD), FSDP2 (fully_shard) and DDP training on CPU over
gloo, on equivalents of cfg/bench/big.cfg and cfg/bench/probe.cfg: a markdown
table of step time (median of steps 2..N on rank 0, medians over repeats),
global samples/s, the largest rank's peak RSS and how much of that torch held
before the network existed.  Defaults: 30 steps, worlds 1,2,4, both nets, all
impls, 1 repeat.  Run it through tools/bench-torch, which provides the torch.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
sys.dont_write_bytecode = True  # no __pycache__ in tools/
import fsdp_args  # noqa: E402  (tools/fsdp_args.py)

NETS = {"big": 8, "probe": 16}  # batch per rank, as in the cfgs
IMPLS = ("fsdp1", "fsdp2", "ddp")


def build(net):
    """The network, its input shape and its SGD settings, as the cfg has them."""
    import torch.nn as nn
    act = lambda: nn.LeakyReLU(0.1)
    if net == "big":
        # Each Sequential is one of the cfg's shard groups; the last Linear is
        # in none, so it stays with the root unit.
        model = nn.Sequential(
            nn.Flatten(),
            nn.Sequential(nn.Linear(3072, 4096), act()),
            nn.Sequential(nn.Linear(4096, 2048), act()),
            nn.Linear(2048, 6))
        return model, (3, 32, 32), [1, 2], dict(lr=0.001, momentum=0.9, weight_decay=0.0005)
    block = lambda i, o: nn.Sequential(nn.Conv2d(i, o, 3, 1, 1), act(), nn.MaxPool2d(2, 2))
    model = nn.Sequential(block(3, 16), block(16, 32), block(32, 64),
                          nn.Sequential(nn.Flatten(), nn.Linear(64 * 8 * 8, 6)))
    for p in model[:3].parameters():
        p.requires_grad_(False)
    return model, (3, 64, 64), [0, 1, 2, 3], dict(lr=0.01, momentum=0.9, weight_decay=0.0005)


def wrap(impl, model, groups):
    """One sharded unit per shard group, plus the root.  Each group is all
    frozen or all trainable, as FSDP1's flat parameters require."""
    import torch
    if impl == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model)
    if impl == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        # Without device_id, FSDP1 refuses a machine with no accelerator.
        kw = dict(sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
        for g in groups:
            model[g] = FSDP(model[g], **kw)
        return FSDP(model, **kw)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    for g in groups:
        fully_shard(model[g])
    return fully_shard(model)


def worker(impl, net, steps):
    import resource
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # What torch and gloo hold before any model: PyPI's torch maps its CUDA
    # libraries even on CPU, hundreds of MB that Darknet doesn't have.
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(0)  # same initial weights on every rank
    model, shape, groups, sgd = build(net)
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(NETS[net], *shape, generator=gen)
    y = torch.randint(0, 6, (NETS[net],), generator=gen)
    model = wrap(impl, model, groups)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], **sgd)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t)
    rss = [None] * world
    dist.all_gather_object(rss, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rss0))
    if rank == 0:
        print(json.dumps({"step": statistics.median(times[1:]), "rss_kb": max(rss)[0],
                          "rss0_kb": max(rss)[1], "torch": torch.__version__}), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # gloo's threads can abort the interpreter's own teardown ("terminate
    # called without an active exception") once the work is done.
    sys.stdout.flush()
    os._exit(0)


def missing(impl):
    """Why the installed torch can't run impl, or None."""
    code = {"fsdp1": "from torch.distributed.fsdp import FullyShardedDataParallel",
            "fsdp2": "try:\n from torch.distributed.fsdp import fully_shard\n"
                     "except ImportError:\n from torch.distributed._composable.fsdp import fully_shard",
            "ddp": "from torch.nn.parallel import DistributedDataParallel"}[impl]
    code = "import torch.distributed as d\nassert d.is_gloo_available(), 'no gloo'\n" + code
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def launch(impl, net, world, steps, timeout):
    """One run of world ranks: rank 0's result, or an error line."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    # gloo binds to whatever the host name resolves to unless told otherwise.
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as d:
        logs = [open(os.path.join(d, str(r)), "w+") for r in range(world)]
        # Fresh processes from a launcher that never imports torch, so that
        # each rank's peak RSS is its own.
        ps = [subprocess.Popen([sys.executable, __file__, "--worker", impl, net, str(steps)],
                               env=dict(env, RANK=str(r)), stdout=logs[r],
                               stderr=subprocess.STDOUT) for r in range(world)]
        # A rank that dies leaves the others waiting in a collective for
        # gloo's 30 minutes: end them all at the first failure.
        deadline, killed = time.time() + timeout, set()
        while any(p.poll() is None for p in ps):
            if any(p.returncode for p in ps) or time.time() > deadline:
                for r, p in enumerate(ps):
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                        killed.add(r)
                break
            time.sleep(0.1)
        out = []
        for f in logs:
            f.seek(0)
            out.append([l.rstrip() for l in f if l.strip()])
            f.close()
    failed = [r for r, p in enumerate(ps) if p.returncode and r not in killed]
    if killed and not failed:
        return {"error": "timed out after %d s" % timeout}
    if failed:
        lines = out[failed[0]] or ["exit %d" % ps[failed[0]].returncode]
        sys.stderr.write("".join("  rank %d | %s\n" % (failed[0], l) for l in lines[-8:]))
        return {"error": "rank %d: %s" % (failed[0], lines[-1][:120])}
    return json.loads([l for l in out[0] if l.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--nets", default="big,probe")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=int, help="seconds per run (default 300 + 5 per step)")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = fsdp_args.parse(ap)
    if a.worker:
        return worker(a.worker[0], a.worker[1], int(a.worker[2]))
    worlds = [int(w) for w in a.worlds.split(",")]
    nets, impls = a.nets.split(","), a.impls.split(",")
    for n in nets:
        assert n in NETS, "unknown net " + n
    for i in impls:
        assert i in IMPLS, "unknown impl " + i
    assert a.steps >= 2, "--steps must be at least 2: the first step is left out"
    assert a.repeats >= 1, "--repeats must be at least 1"

    skip = {i: missing(i) for i in impls}
    configs = [(i, n, w) for n in nets for i in impls for w in worlds if not skip[i]]
    results = {c: [] for c in configs}
    version = "?"
    # Repeats interleave, so that a slow spell of the machine spreads over
    # every configuration instead of landing on one.
    for r in range(a.repeats):
        for c in configs:
            res = launch(*c, a.steps, a.timeout or 300 + 5 * a.steps)
            print("repeat %d/%d %s %s world %d: %s" % (r + 1, a.repeats, c[0], c[1], c[2],
                  res.get("error") or "%.4f s" % res["step"]), file=sys.stderr, flush=True)
            results[c].append(res)
            version = res.get("torch", version)

    print("| impl | net | world | step (s) | samples/s (global) | peak RSS per rank (MB) "
          "| of which at start (MB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failures = 0
    for n in nets:
        for i in impls:
            for w in worlds:
                runs = results.get((i, n, w), [])
                ok = [x for x in runs if "error" not in x]
                failures += len(runs) - len(ok)
                if not ok:
                    why = skip[i] or runs[0]["error"]
                    print("| %s | %s | %d | n/a | n/a | n/a: %s | |" % (i, n, w, why.replace("|", "/")))
                    continue
                step = statistics.median(x["step"] for x in ok)
                mb = lambda k: statistics.median(x[k] for x in ok) * 1024 / 1e6
                print("| %s | %s | %d | %.4f | %.0f | %.0f | %.0f |" % (
                    i, n, w, step, NETS[n] * w / step, mb("rss_kb"), mb("rss0_kb")))
    print("\ntorch %s, CPU, gloo, 1 thread per rank; %d steps, median of steps 2..%d on rank 0, "
          "median of %d repeat(s); peak RSS: the largest rank's ru_maxrss (MB = 1e6 bytes); "
          "at start: that rank's peak after torch's import and the process group's start, "
          "before the network.%s"
          % (version, a.steps, a.steps, a.repeats,
             " %d failed run(s) left out: see stderr." % failures if failures else ""))


if __name__ == "__main__":
    main()
