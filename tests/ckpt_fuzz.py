#!/usr/bin/env python3
"""Checkpoint fuzzer (tests/test_ckpt_fuzz.sh drives it).

Crafts checkpoints, manifests, step folders and weights files that carry
VALID checksums (the checksum is not cryptographic: anyone can make a file
pass it), each field set to its edge values, files truncated, symlinks,
FIFOs and sparse files in their place, and resumes each on 2 ranks.  Every
case must end every rank within LIMIT seconds, name the file it refuses (or
skips), stay under 100 MB above the genuine resume's peak, and change
nothing outside the backup folder.

usage: ckpt_fuzz.py WORK DN PLUGIN JOBS MPIRUN...
  WORK holds data/ (tools/make-testdata) and the genuine checkpoints made by
  the script: beside2/ (a.weights and 2 ranks' shard files, shard=full,
  Adam, a frozen layer), beside3/ (the same on 3 ranks), none2/ (shard=none,
  SGD), clock/ (a.fsdp/step-IIIIIIII: checkpoints on the clock, 2 ranks).
Prints one line per failing case and the counts; exits 1 on any failure.
"""
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

M64 = (1 << 64) - 1
LIMIT = 10
EDGES = [0, 1, 2, 3, -1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 63, M64, (1 << 62) + 9]
TABLE_EDGES = [0, 1, -1, (1 << 32) - 1, 1 << 63, M64]
FEW_EDGES = [0, 1, -1, (1 << 31) - 1, 1 << 63]
IDENTITY = ('plan_hash', 'layout_hash', 'run_id', 'weights_size', 'weights_hash')   # any change: another file
HEADER = '<8sIIQQiIIIIIQQQQQ'   # plugin/io/fsdp_ckpt.c, ckpt_header
HFIELDS = ['magic', 'world', 'rank', 'plan_hash', 'seen', 't', 'ngroups', 'strategy', 'adam', 'align', 'flags',
           'floats', 'layout_hash', 'run_id', 'weights_size', 'weights_hash']
FLAT = '<QQQII'                 # ckpt_flat: count, lo, n, nbuf, pad
FFIELDS = ['count', 'lo', 'n', 'nbuf', 'pad']


def fsdp_hash(b):
    """plugin/base/fsdp_hash.h's checksum."""
    h = 0x243f6a8885a308d3

    def word(h, w):
        return ((((h << 27) | (h >> 37)) & M64) ^ w) * 0x9e3779b97f4a7c15 & M64
    n8 = len(b) // 8
    for (w,) in struct.iter_unpack('<Q', b[:n8 * 8]):
        h = word(h, w)
    tail = b[n8 * 8:] + bytes(8 - (len(b) - n8 * 8))
    return word(word(h, struct.unpack('<Q', tail)[0]), len(b))


def sealed(body):
    return body + struct.pack('<Q', fsdp_hash(body))


class Ckpt:
    """A format-3 checkpoint file, parsed into fields and buffers."""

    def __init__(self, data):
        self.h = dict(zip(HFIELDS, struct.unpack_from(HEADER, data, 0)))
        at = struct.calcsize(HEADER)
        self.flats = []
        for _ in range(2 * self.h['ngroups']):
            self.flats.append(dict(zip(FFIELDS, struct.unpack_from(FLAT, data, at))))
            at += 32
        self.bufs = []
        for f in self.flats:
            k = f['n'] * f['nbuf'] * 4
            self.bufs.append(data[at:at + k])
            at += k
        self.extras = None
        if self.h['flags'] & 1:
            (n,) = struct.unpack_from('<Q', data, at)
            self.extras_n = n
            self.extras = data[at + 8:at + 8 + 4 * n]

    def body(self, floats=None, extras_n=None):
        h = dict(self.h)
        if floats is None:
            h['floats'] = sum(f['n'] * f['nbuf'] for f in self.flats) & M64
        out = [struct.pack(HEADER, *[h[k] for k in HFIELDS])]
        out += [struct.pack(FLAT, *[f[k] for k in FFIELDS]) for f in self.flats]
        out += self.bufs
        if self.extras is not None:
            out.append(struct.pack('<Q', self.extras_n if extras_n is None else extras_n))
            out.append(self.extras)
        return b''.join(out)


def clip(v, width):
    return v & ((1 << (8 * width)) - 1)


def signed32(v):
    v = clip(v, 4)
    return v - (1 << 32) if v >= 1 << 31 else v


HWIDTH = {'world': 4, 'rank': 4, 'plan_hash': 8, 'seen': 8, 't': 4, 'ngroups': 4, 'strategy': 4, 'adam': 4,
          'align': 4, 'flags': 4, 'floats': 8, 'layout_hash': 8, 'run_id': 8, 'weights_size': 8, 'weights_hash': 8}


def manifest_text(run, step, seen, world, files, extra=''):
    t = 'darknet-fsdp checkpoint 1\nrun %016x\nstep %s\nseen %s\nworld %s\n' % (run, step, seen, world)
    for name, size, s in files:
        t += 'file %s %d %016x\n' % (name, size, s)
    t += extra
    return (t + 'sum %016x\n' % fsdp_hash(t.encode())).encode()


class Case:
    def __init__(self, name, family, prep, expect, flags=(), names=(), steps=3):
        self.name, self.family, self.prep, self.expect = name, family, prep, expect
        self.flags, self.names, self.steps = list(flags), list(names), steps


def snapshot(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for f in files + dirs:
            p = os.path.join(d, f)
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


class Fuzz:
    def __init__(self, work, dn, plugin, mpirun):
        self.work, self.dn, self.plugin, self.mpirun = work, dn, plugin, mpirun
        self.cases = []
        self.peak = {}
        self.valgrind = []   # run_valgrind: each rank under valgrind
        self.limit = LIMIT

    # ---- a case's folder -----------------------------------------------
    def case_dir(self, k):
        c = os.path.join(self.work, 'cases', 'c%04d' % k)
        shutil.rmtree(c, ignore_errors=True)
        os.makedirs(os.path.join(c, 'outside', 'sub'))
        for i in range(3):
            with open(os.path.join(c, 'outside', 'keep%d.weights' % i), 'wb') as f:
                f.write(b'outside the backup folder %d\n' % i)
        with open(os.path.join(c, 'outside', 'a.fsdp-0-of-2'), 'wb') as f:
            f.write(b'not ours\n')
        with open(os.path.join(c, 'data.data'), 'w') as f:
            src = open(os.path.join(self.work, 'data', 'data.data')).read()
            f.write(''.join(l if not l.startswith('backup=') else 'backup=%s/backup\n' % c
                            for l in src.splitlines(True)))
        os.makedirs(os.path.join(c, 'backup'))
        return c

    def cfg(self, c, family, steps):
        src = open(os.path.join(self.work, family.split('-')[0] + '.cfg')).read()
        out = os.path.join(c, 'a.cfg')
        with open(out, 'w') as f:
            f.write(src.replace('max_batches=2', 'max_batches=%d' % steps))
        return out

    def prepare(self, k, case):
        """The case's folder, its files crafted; the resume's arguments."""
        c = self.case_dir(k)
        base = case.family.split('-')[0]
        if base == 'clock':
            shutil.copytree(os.path.join(self.work, 'clock'), os.path.join(c, 'backup'), dirs_exist_ok=True,
                            symlinks=True)
        else:
            shutil.copytree(os.path.join(self.work, base), os.path.join(c, 'ck'), symlinks=True)
        return c, case.prep(c) or []

    def run_case(self, k, case, limit=None):
        limit = limit or self.limit
        c, args = self.prepare(k, case)
        base = case.family.split('-')[0]
        cfg = self.cfg(c, base, case.steps)
        before = snapshot(os.path.join(c, 'outside'))
        wrap = ['/usr/bin/time', '-f', 'FUZZ_MAXRSS %M'] + self.valgrind + [self.dn]
        cmd = ['timeout', '-k', '2', str(limit)] + self.mpirun + ['-np', '2'] + wrap + [
            '-plugin', self.plugin, 'classifier', 'train', os.path.join(c, 'data.data'), cfg, '-seed', '3'] + \
            case.flags + args
        t0 = time.time()
        p = subprocess.run(['bash', '-c', 'ulimit -v 4000000; exec "$@"', 'x'] + cmd, cwd=c,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        secs = time.time() - t0
        out = p.stdout.decode(errors='replace')
        after = snapshot(os.path.join(c, 'outside'))
        rss = [int(k) for k in re.findall(r'FUZZ_MAXRSS (\d+)', out)]
        return self.judge(case, p.returncode, out, secs, rss, before, after, c, limit)

    def guarded(self, k, case):
        """run_case, a failure of the driver itself a failing case."""
        try:
            r = self.run_case(k, case)
            if 'hang' in r[0] and not self.valgrind:
                # Over LIMIT on a busy machine: again, with 6 times the time. A
                # real hang (a loop, a blocked open) stays one; a case merely
                # slowed by others' load ends, and is judged by the rest.
                r2 = self.run_case(k, case, LIMIT * 6)
                if 'hang' not in r2[0] and r2[2] < LIMIT * 6:
                    r = ([w for w in r2[0]], r2[1], r2[2], r2[3], r2[4] + ['(over %d s once, under load)' % LIMIT])
            return r
        except Exception as e:   # noqa: BLE001 (any error of a case's making fails that case)
            return ['driver'], -1, 0.0, 0, [repr(e)]

    def judge(self, case, rc, out, secs, rss, before, after, c, limit):
        lines = [re.sub(r'FUZZ_MAXRSS \d+', '', l) for l in out.splitlines()]
        text = '\n'.join(lines)
        named = any(n in text for n in case.names)
        peak = self.peak.get(case.family.split('-')[0], 0)
        why = []
        if self.valgrind and (rc == 9 or re.search(r'==\d+== (Invalid|Conditional|Syscall param|Source and)', text)):
            why.append('sanitizer')
        if rc in (124, 137) or secs >= limit:
            why.append('hang')
        elif rc >= 128 or any(s in text for s in ('signal', 'Segmentation fault', 'core dumped',
                                                   'Floating point exception', 'Aborted')):
            why.append('crash')
        if not self.valgrind and ((rss and max(rss) > peak + 100 * 1024) or 'out of memory' in text):
            why.append('blowup')
        if before != after:
            why.append('outside')
        if case.expect == 'ok':
            if rc != 0:
                why.append('refused a genuine checkpoint')
        elif case.expect == 'alias' and not why:
            # Not a step folder's name: the genuine newest resumed, nothing
            # skipped in its name, the folder left as it is.
            if rc != 0 or 'resuming from %s/step-00000002 ' % os.path.join(c, 'backup', 'a.fsdp') not in text \
                    or 'skipped' in text or not os.path.isdir(os.path.join(c, 'backup', 'a.fsdp', case.names[0])):
                why.append('aliased')
        elif case.expect == 'named' and not why:
            if not named:   # ends well or not, a message names what it left or refused
                why.append('unnamed' if rc else 'silent')
        elif not why:
            skipped = rc == 0 and named and 'skipped' in text
            if rc == 0 and not skipped:
                why.append('silent')
            elif not named:
                why.append('unnamed')
        if not why:
            shutil.rmtree(c, ignore_errors=True)
        msg = [l for l in lines if 'fsdp' in l and ('rank' in l or ':' in l)][:2]
        return why, rc, secs, max(rss) if rss else 0, msg

    # ---- driving ------------------------------------------------------------
    def baseline(self):
        """The genuine resumes: their peaks, and that they succeed."""
        # Under valgrind: the families that read across files (fill) and the extras (load_extras).
        for fam in ('beside3', 'clock') if self.valgrind else ('beside2', 'beside3', 'none2', 'clock'):
            flags = ['-fsdp-resume', 'auto', '-fsdp-checkpoint-every', '0.00001', '-fsdp-checkpoint-keep', '1'] \
                if fam == 'clock' else []
            case = Case('genuine ' + fam, fam, self.resume_arg(fam), 'ok', flags)
            why, rc, secs, rss, msg = self.run_case(9000 + len(self.peak), case)
            self.peak[fam] = max(self.peak.get(fam, 0), rss)
            if why:
                print('FAIL genuine %s: %s exit %d %s' % (fam, why, rc, msg))
                sys.exit(1)
            print('genuine %s: exit 0 in %.1f s, peak %d kB a rank' % (fam, secs, rss))

    def resume_arg(self, fam):
        if fam == 'clock':
            return lambda c: []
        return lambda c: ['-fsdp-resume', os.path.join(c, 'ck', 'a.weights')]

    def run(self, jobs):
        self.baseline()
        counts = {}
        fails = 0
        with ThreadPoolExecutor(jobs) as ex:
            results = list(ex.map(lambda kc: self.guarded(*kc), enumerate(self.cases)))
        for case, (why, rc, secs, rss, msg) in zip(self.cases, results):
            for w in why:
                counts[w] = counts.get(w, 0) + 1
            if why:
                fails += 1
                print('FAIL %-9s %s: %s (exit %d, %.1f s, %d kB) %s' % (case.family, case.name, ','.join(why), rc,
                                                                        secs, rss, ' | '.join(msg)[:300]))
        n = len(self.cases)
        print('%d cases on 2 ranks: %d passed; crashes %d, hangs %d, memory blow-ups %d, silent acceptances %d, '
              'refusals not naming the file %d, changes outside the backup folder %d, step folders aliased %d, '
              'driver errors %d' %
              (n, n - fails, counts.get('crash', 0), counts.get('hang', 0), counts.get('blowup', 0),
               counts.get('silent', 0), counts.get('unnamed', 0), counts.get('outside', 0), counts.get('aliased', 0),
               counts.get('driver', 0)) +
              (', valgrind reports %d' % counts.get('sanitizer', 0) if self.valgrind else ''))
        return fails == 0


# ---- the cases ---------------------------------------------------------------

def rewrite(path, data):
    if os.path.islink(path) or os.path.exists(path):
        os.remove(path)
    with open(path, 'wb') as f:
        f.write(data)


def table_make(i, field, nv, v):
    """A file with flat i's entry field set to nv (buffers resized to match
    where n or nbuf change and the size is sane: a consistent file)."""
    def make(g):
        c = Ckpt(g)
        f = c.flats[i]
        f[field] = nv
        if field in ('n', 'nbuf') and v != 'grow':
            new = f['n'] * f['nbuf']
            if new <= 1 << 20:
                c.bufs[i] = (c.bufs[i] + bytes(4 * new))[:4 * new]
        return sealed(c.body())
    return make


class Beside:
    """Cases of one family's shard files beside a.weights, rank by rank in turn."""

    def __init__(self, fz, fam, world):
        self.fz, self.fam, self.world, self.k = fz, fam, world, 0
        self.genuine = {r: open(os.path.join(fz.work, fam, 'a.weights.fsdp-%d-of-%d' % (r, world)), 'rb').read()
                        for r in range(world)}

    def next_rank(self):
        self.k += 1
        return (self.k - 1) % self.world

    def add(self, name, r, make):
        fn = 'a.weights.fsdp-%d-of-%d' % (r, self.world)
        g = self.genuine[r]

        def prep(c):
            rewrite(os.path.join(c, 'ck', fn), make(g))
            return ['-fsdp-resume', os.path.join(c, 'ck', 'a.weights')]
        self.fz.cases.append(Case(name, self.fam, prep, 'refuse', names=[fn]))

    def header(self, fields, edges):
        for field in fields:
            for v in ([0, M64] if field in IDENTITY else edges):
                r = self.next_rank()
                nv = signed32(v) if field == 't' else clip(v, HWIDTH[field])
                if nv == Ckpt(self.genuine[r]).h[field]:
                    continue

                def make(g, field=field, nv=nv):
                    c = Ckpt(g)
                    c.h[field] = nv
                    return sealed(c.body(floats=c.h['floats'] if field == 'floats' else None))
                self.add('rank %d header %s=%d' % (r, field, nv), r, make)

    def table(self, entries, edges):
        for i in entries:
            for field in FFIELDS:
                for v in edges + ['grow']:
                    r = self.next_rank()
                    was = Ckpt(self.genuine[r]).flats[i]
                    if v == 'grow' and field != 'n':
                        continue
                    # grow: n + 2^62, whose n*nbuf*4 wraps back to the same bytes
                    nv = (was['n'] + (1 << 62)) & M64 if v == 'grow' else \
                        clip(v, 8 if field in ('count', 'lo', 'n') else 4)
                    if nv != was[field]:
                        self.add('rank %d flat %d %s=%d' % (r, i, field, nv), r, table_make(i, field, nv, v))

    def cuts(self):
        """Truncations of rank 0's file, with and without a checksum made to fit."""
        n = len(self.genuine[0])
        for cut in sorted({0, 8, 95, 96, 97, 96 + 32, n // 3, n // 2, n - 9, n - 8, n - 1}):
            self.add('rank 0 truncated to %d bytes' % cut, 0, lambda g, cut=cut: g[:cut])
            if cut > 8:
                self.add('rank 0 truncated to %d bytes, checksum refitted' % cut, 0,
                         lambda g, cut=cut: sealed(g[:cut - 8]))
        self.add('rank 0 with bytes after its checksum', 0, lambda g: g + b'\0' * 16)
        self.add('rank 0 with floats appended, checksum refitted', 0, lambda g: sealed(g[:-8] + bytes(64)))


def ck_cases(fz, fam, world, fields, table_entries, cuts=True, edges=EDGES, table_edges=TABLE_EDGES):
    """Header and table fields of one rank's shard file beside a.weights."""
    b = Beside(fz, fam, world)
    b.header(fields, edges)
    b.table(table_entries, table_edges)
    if cuts:
        b.cuts()


def special_files(fz, fam, world):
    """Shard files that are not regular files of the folder."""
    fn = 'a.weights.fsdp-1-of-%d' % world
    res = lambda c: ['-fsdp-resume', os.path.join(c, 'ck', 'a.weights')]

    def replaced(make):
        def prep(c):
            p = os.path.join(c, 'ck', fn)
            os.remove(p)
            make(p)
            return res(c)
        return prep

    def link(absolute):
        def prep(c):
            p = os.path.join(c, 'ck', fn)
            shutil.copy(p, os.path.join(c, 'outside', fn))
            os.remove(p)
            os.symlink(os.path.join(c, 'outside', fn) if absolute else os.path.join('..', 'outside', fn), p)
            return res(c)
        return prep

    def sparse(c):
        p = os.path.join(c, 'ck', fn)
        with open(p, 'r+b') as f:
            f.truncate(1 << 30)
        return res(c)
    for name, prep in (('a FIFO', replaced(os.mkfifo)), ('a relative symlink to a copy outside', link(False)),
                       ('an absolute symlink to a copy outside', link(True)), ('a folder', replaced(os.mkdir)),
                       ('a 1 GiB sparse file', sparse),
                       ('a symlink to /dev/zero', replaced(lambda p: os.symlink('/dev/zero', p)))):
        fz.cases.append(Case('%s in place of %s' % (name, fn), fam, prep, 'refuse', names=[fn]))


def world_names(fz):
    """The world size read from a file name beside a.weights, no file of this world there."""
    for w in ('0', '3', '10000000', '2147483647', '4294967297', '99999999999999999999', '-1', '+3', '0x10', '3 '):
        fn = 'a.weights.fsdp-0-of-%s' % w

        def prep(c, fn=fn):
            for r in range(2):
                os.remove(os.path.join(c, 'ck', 'a.weights.fsdp-%d-of-2' % r))
            open(os.path.join(c, 'ck', fn), 'wb').close()
            return ['-fsdp-resume', os.path.join(c, 'ck', 'a.weights')]
        fz.cases.append(Case('only an empty %s beside a.weights' % fn, 'beside2', prep, 'refuse',
                             names=[fn, 'a.weights']))


def weights_cases(fz):
    """The weights file a checkpoint was saved with, changed (its checksum in the shard files refitted)."""
    g = open(os.path.join(fz.work, 'beside2', 'a.weights'), 'rb').read()

    def refit(c, data):
        rewrite(os.path.join(c, 'ck', 'a.weights'), data)
        size, s = len(data), fsdp_hash(data)
        for r in range(2):
            p = os.path.join(c, 'ck', 'a.weights.fsdp-%d-of-2' % r)
            ck = Ckpt(open(p, 'rb').read())
            ck.h['weights_size'], ck.h['weights_hash'] = size, s
            rewrite(p, sealed(ck.body()))
    muts = []
    for off, width, what in ((0, 4, 'major'), (4, 4, 'minor'), (12, 8, 'seen')):
        for v in sorted({clip(x, width) for x in ((1 << 31) - 1, (1 << 32) - 1, M64)}):
            muts.append(('weights %s=%d' % (what, clip(v, width)),
                         lambda d, off=off, width=width, v=v: d[:off] + clip(v, width).to_bytes(width, 'little') +
                         d[off + width:]))
    # (Cut at 20 bytes, the header alone, ends at a layer's boundary: Darknet
    # loads no layer, which the contract allows, and the checkpoint has them.)
    for cut in (0, 4, 12, 19, len(g) // 2, len(g) - 4, len(g) - 1):
        muts.append(('weights truncated to %d bytes' % cut, lambda d, cut=cut: d[:cut]))
    for name, m in muts:
        def prep(c, m=m):
            refit(c, m(g))
            return ['-fsdp-resume', os.path.join(c, 'ck', 'a.weights')]
        fz.cases.append(Case(name, 'beside2', prep, 'refuse', names=['a.weights']))


# ---- checkpoints on the clock ---------------------------------------------------

CLOCK_FLAGS = ['-fsdp-resume', 'auto', '-fsdp-checkpoint-every', '0.00001', '-fsdp-checkpoint-keep', '1']


def clock_newest(work):
    steps = sorted(d for d in os.listdir(os.path.join(work, 'clock', 'a.fsdp')) if d.startswith('step-'))
    return steps[-1]


def read_manifest(p):
    lines = open(p).read().splitlines()
    v = dict(l.split(' ', 1) for l in lines[1:5])
    files = [l.split()[1:] for l in lines if l.startswith('file ')]
    return int(v['run'], 16), v['step'], v['seen'], v['world'], [(f[0], int(f[1]), int(f[2], 16)) for f in files]


class Clock:
    """Cases of checkpoints on the clock: the newest genuine one crafted."""

    def __init__(self, fz):
        self.fz = fz
        self.step = clock_newest(fz.work)
        self.man0 = read_manifest(os.path.join(fz.work, 'clock', 'a.fsdp', self.step, 'MANIFEST'))
        self.genuine = {r: open(os.path.join(fz.work, 'clock', 'a.fsdp', self.step, 'a.fsdp-%d-of-2' % r),
                                'rb').read() for r in range(2)}

    def sdir(self, c):
        return os.path.join(c, 'backup', 'a.fsdp', self.step)

    def only_newest(self, c):
        for d in os.listdir(os.path.join(c, 'backup', 'a.fsdp')):
            if d != self.step:
                shutil.rmtree(os.path.join(c, 'backup', 'a.fsdp', d))

    def add(self, name, prep, names, flags=CLOCK_FLAGS, steps=3, expect='refuse'):
        self.fz.cases.append(Case(name, 'clock', prep, expect, flags, names, steps))

    def refit(self, c, r, data):
        """Rank r's file replaced by data, the MANIFEST refitted to its size and checksum."""
        run, mstep, seen, world, files = self.man0
        rewrite(os.path.join(self.sdir(c), 'a.fsdp-%d-of-2' % r), data)
        fl = list(files)
        fl[r] = (fl[r][0], len(data), struct.unpack('<Q', data[-8:])[0] if len(data) >= 8 else 0)
        rewrite(os.path.join(self.sdir(c), 'MANIFEST'), manifest_text(run, mstep, seen, world, fl))

    def manifest_fields(self):
        """The MANIFEST's step, seen and world, its checksum refitted."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        edge = ['0', '1', '-1', '-5', '2147483647', '4294967295', '9223372036854775808', '18446744073709551615',
                '99999999999999999999', '+2', '2x', '']
        for field in ('step', 'seen', 'world'):
            for v in edge:
                vals = {'step': mstep, 'seen': seen, 'world': world}
                if vals[field] == v:
                    continue
                vals[field] = v
                text = manifest_text(run, vals['step'], vals['seen'], vals['world'], files)
                for kb in ((False, True) if field != 'world' else (False,)):
                    def prep(c, text=text):
                        only_newest(c)
                        rewrite(os.path.join(sdir(c), 'MANIFEST'), text)
                    add('MANIFEST %s=%s%s' % (field, v, ' with -fsdp-keep-batch' if kb else ''), prep,
                        ['MANIFEST', step], CLOCK_FLAGS + (['-fsdp-keep-batch'] if kb else []))

    def manifest_lines(self):
        """The MANIFEST's file lines, and special files in its place."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        for name, text in (('one file line missing', manifest_text(run, mstep, seen, world, files[:1])),
                           ('a file named twice', manifest_text(run, mstep, seen, world, [files[0], files[0]])),
                           ('a file of another size', manifest_text(run, mstep, seen, world,
                                                                   [files[0], (files[1][0], files[1][1] + 4, files[1][2])])),
                           ('a path for a file', manifest_text(run, mstep, seen, world,
                                                              [files[0], ('../../outside/a.fsdp-0-of-2',) + files[1][1:]])),
                           ('lines after the files', manifest_text(run, mstep, seen, world, files, 'file x 1 0\n'))):
            def prep(c, text=text):
                only_newest(c)
                rewrite(os.path.join(sdir(c), 'MANIFEST'), text)
            add('MANIFEST with ' + name, prep, ['MANIFEST', step])

        def man_fifo(c):
            only_newest(c)
            os.remove(os.path.join(sdir(c), 'MANIFEST'))
            os.mkfifo(os.path.join(sdir(c), 'MANIFEST'))

        def man_sparse(c):
            only_newest(c)
            p = os.path.join(sdir(c), 'MANIFEST')
            data = open(p, 'rb').read()
            with open(p, 'r+b') as f:
                f.truncate(1 << 30)
                f.seek((1 << 30) - len(data))
                f.write(data)

        def man_link(c):
            only_newest(c)
            p = os.path.join(sdir(c), 'MANIFEST')
            shutil.copy(p, os.path.join(c, 'outside', 'MANIFEST'))
            os.remove(p)
            os.symlink('../../../outside/MANIFEST', p)
        for name, prep in (('a FIFO', man_fifo), ('a 1 GiB sparse file', man_sparse), ('a symlink', man_link)):
            add('MANIFEST is %s' % name, prep, ['MANIFEST', step])

    def file_fields(self):
        """A shard file's header and table, the MANIFEST refitted."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        k = 0
        for field in ('seen', 't', 'strategy', 'flags', 'world', 'rank', 'floats', 'run_id'):
            for v in EDGES:
                r = k % 2
                k += 1
                ck = Ckpt(genuine[r])
                nv = signed32(v) if field == 't' else clip(v, HWIDTH[field])
                if nv == ck.h[field]:
                    continue

                def prep(c, r=r, field=field, nv=nv):
                    only_newest(c)
                    x = Ckpt(genuine[r])
                    x.h[field] = nv
                    refit(c, r, sealed(x.body(floats=x.h['floats'] if field == 'floats' else None)))
                add('rank %d file header %s=%d' % (r, field, nv), prep, ['a.fsdp-%d-of-2' % r])
        for i, field, v in [(3, 'nbuf', 0), (3, 'nbuf', 2), (0, 'lo', 1), (0, 'n', 1), (0, 'pad', 1), (6, 'lo', M64),
                            (6, 'n', (1 << 62) + 74)]:
            for r in range(2):
                if Ckpt(genuine[r]).flats[i][field] == v:
                    continue
                def prep(c, r=r, i=i, field=field, v=v):
                    only_newest(c)
                    x = Ckpt(genuine[r])
                    x.flats[i][field] = v
                    if field == 'nbuf' or (field == 'n' and v < 1 << 20):
                        x.bufs[i] = (x.bufs[i] + bytes(4 * x.flats[i]['n'] * x.flats[i]['nbuf']))[
                            :4 * x.flats[i]['n'] * x.flats[i]['nbuf']]
                    refit(c, r, sealed(x.body()))
                add('rank %d flat %d %s=%d' % (r, i, field, v), prep, ['a.fsdp-%d-of-2' % r])

    def extras(self):
        """The extras' count, and Adam's v negative."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        # The extras: their count, and their values (Adam's v negative).
        for r in range(2):
            for v in (0, 1, -1, 1 << 40, M64, 'more', 'fewer'):
                if (v == 'fewer' and Ckpt(genuine[r]).extras_n < 2) or Ckpt(genuine[r]).extras_n == v:
                    continue
                def prep(c, r=r, v=v):
                    only_newest(c)
                    x = Ckpt(genuine[r])
                    if v == 'more':
                        x.extras += bytes(8)
                        x.extras_n += 2
                    elif v == 'fewer' and x.extras_n >= 2:
                        x.extras = x.extras[:-8]
                        x.extras_n -= 2
                    else:
                        x.extras_n = clip(v, 8)
                    refit(c, r, sealed(x.body()))
                add('rank %d extras count %s' % (r, v), prep, ['a.fsdp-%d-of-2' % r])

            def neg_v(c, r=r):
                only_newest(c)
                x = Ckpt(genuine[r])
                f = x.flats[0]
                vb = bytearray(x.bufs[0])
                vb[4 * 2 * f['n']:4 * 2 * f['n'] + 4] = struct.pack('<f', -1.0)
                x.bufs[0] = bytes(vb)
                refit(c, r, sealed(x.body()))
            add("rank %d Adam's v negative" % r, neg_v, ['a.fsdp-%d-of-2' % r])

    def folders(self):
        """Special files for a shard file; symlinked step folders."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        # Special files in place of a shard file.
        for name in ('fifo', 'link', 'sparse'):
            def prep(c, name=name):
                only_newest(c)
                p = os.path.join(sdir(c), 'a.fsdp-1-of-2')
                if name == 'fifo':
                    os.remove(p)
                    os.mkfifo(p)
                elif name == 'link':
                    shutil.copy(p, os.path.join(c, 'outside', 'copy'))
                    os.remove(p)
                    os.symlink(os.path.join(c, 'outside', 'copy'), p)
                else:
                    with open(p, 'r+b') as f:
                        f.truncate(1 << 30)
            add('a.fsdp-1-of-2 is a %s' % name, prep, ['a.fsdp-1-of-2', step])
        # Step folders: symlinks out of the folder, names that alias steps.
        for how in ('relative', 'absolute'):
            for target in ('outside', 'outside/sub'):
                def prep(c, how=how, target=target):
                    t = os.path.join(c, target)
                    for d in os.listdir(sdir(c)):
                        shutil.copy(os.path.join(sdir(c), d), os.path.join(t, d))
                    rel = os.path.relpath(t, os.path.join(c, 'backup', 'a.fsdp'))
                    shutil.rmtree(os.path.join(c, 'backup', 'a.fsdp', 'step-00000001'), ignore_errors=True)
                    os.symlink(t if how == 'absolute' else rel, os.path.join(c, 'backup', 'a.fsdp', 'step-00000001'))
                fz.cases.append(Case('step-00000001 a %s symlink to %s' % (how, target), 'clock', prep, 'named',
                                     CLOCK_FLAGS, ['step-00000001']))

    def names(self):
        """The next checkpoint's folder and files; names that alias steps; many folders."""
        fz, step, sdir, only_newest, add, genuine, refit = (self.fz, self.step, self.sdir, self.only_newest,
                                                            self.add, self.genuine, self.refit)
        run, mstep, seen, world, files = self.man0
        def next_link(c):
            # the folder the resumed run's next checkpoint (step 3) goes to
            os.symlink(os.path.join(c, 'outside'), os.path.join(c, 'backup', 'a.fsdp', 'step-00000003'))
        add('step-00000003 (the next checkpoint) a symlink to outside', next_link, ['step-00000003'])

        def tmp_link(c):
            d = os.path.join(c, 'backup', 'a.fsdp', 'step-00000003')
            os.mkdir(d)
            os.symlink(os.path.join(c, 'outside', 'keep0.weights'), os.path.join(d, 'a.fsdp-0-of-2.tmp'))
        add('the next checkpoint\'s a.fsdp-0-of-2.tmp a symlink to outside', tmp_link, ['a.fsdp-0-of-2.tmp'])

        def old_link(c):
            # a symlinked step folder older than the newest: pruned by -fsdp-checkpoint-keep
            os.symlink('../../outside', os.path.join(c, 'backup', 'a.fsdp', 'step-00000000'))
        fz.cases.append(Case('step-00000000 a symlink to outside (pruned)', 'clock', old_link, 'named', CLOCK_FLAGS,
                             ['step-00000000']))
        for alias in ('step-+0000040', 'step-00000040x', 'step-0000040', 'step-000000040',
                      'step-99999999999999999999', 'step- 0000040', 'step-0x000028'):
            def prep(c, alias=alias):
                shutil.copytree(sdir(c), os.path.join(c, 'backup', 'a.fsdp', alias))
                rewrite(os.path.join(c, 'outside', 'marker'), b'x')
            fz.cases.append(Case('a step folder named %s' % alias, 'clock', prep, 'alias', CLOCK_FLAGS,
                                 [alias], 3))

        def many(c):
            d = os.path.join(c, 'backup', 'a.fsdp')
            for i in range(20000):
                os.mkdir(os.path.join(d, 'step-%08d' % (100000 + i)))
        add('20,000 empty step folders', many, ['step-'])


def clock_cases(fz):
    cc = Clock(fz)
    for part in (cc.manifest_fields, cc.manifest_lines, cc.file_fields, cc.extras, cc.folders, cc.names):
        part()


def main():
    work, dn, plugin, jobs = sys.argv[1:5]
    fz = Fuzz(work, dn, plugin, sys.argv[5:])
    ck_cases(fz, 'beside2', 2, [f for f in HFIELDS if f != 'magic'], [0, 3])
    ck_cases(fz, 'beside3', 3, ['world', 'rank', 'seen', 't', 'run_id'], [0, 3], cuts=False, edges=FEW_EDGES,
             table_edges=FEW_EDGES)
    ck_cases(fz, 'none2', 2, ['strategy', 't'], [0], cuts=False, edges=FEW_EDGES, table_edges=FEW_EDGES)
    special_files(fz, 'beside2', 2)
    special_files(fz, 'beside3', 3)
    world_names(fz)
    weights_cases(fz)
    clock_cases(fz)
    if os.environ.get('FUZZ_COUNT'):
        print(len(fz.cases), 'cases')
        sys.exit(0)
    if os.environ.get('FUZZ_VALGRIND'):
        # The cases whose files pass every check up to the loader's reads
        # (fill, load_extras): consistent tables and extras, under valgrind.
        # The genuine resumes (the baseline) read every part and the extras;
        # of the crafted files, those that pass every check up to the reads.
        supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ckpt_fuzz.supp')
        fz.valgrind = ['valgrind', '-q', '--error-exitcode=9', '--suppressions=' + supp]
        fz.limit = 300
        keep = [c for c in fz.cases if c.name in ("rank 0 Adam's v negative", 'rank 0 extras count more')]
        keep += [c for c in fz.cases if c.family == 'beside3' and ' flat ' in c.name]
        fz.cases = keep[:int(os.environ['FUZZ_VALGRIND'])]
    if os.environ.get('FUZZ_PREP_ONLY'):   # the driver's own check: every case's files can be made
        bad = 0
        for k, case in enumerate(fz.cases):
            try:
                c, _ = fz.prepare(k, case)
                shutil.rmtree(c)
            except Exception as e:   # noqa: BLE001
                bad += 1
                print('cannot prepare %s: %r' % (case.name, e))
        print(len(fz.cases), 'cases prepared,', bad, 'failed')
        sys.exit(1 if bad else 0)
    only = os.environ.get('FUZZ_ONLY')
    if only:
        fz.cases = [c for c in fz.cases if only in c.name or only in c.family]
    sys.exit(0 if fz.run(int(jobs)) else 1)


if __name__ == '__main__':
    main()
