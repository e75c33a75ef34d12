#!/usr/bin/python3
"""`make bench`: pion-server side by side with redis-server and the machine's ceilings.

Every suite starts its own servers on free loopback ports with persistence off,
pins the servers to one core and the load generator to another (where the
machine has two), repeats each measurement (min/median/max), and stops
everything it started, also on Ctrl-C or an exception. The result is a Markdown
table (bench/results/<date>-<sha>.md), a JSON file of the raw numbers and a PNG
chart of the ratios next to it. Ratios are "pion's advantage": > 1 means pion is
better (throughput pion/peer, latency peer/pion).

    /usr/bin/python3 bench/run.py --build build/release [--suite NAME] [--smoke]

Suites: small, bulk, membership, quant, formats, attend, strings, cluster, persist (see
docs/benchmarks.md, docs/attention.md and docs/cluster.md).
The standard library and the package's pion._resp / pion.testing (python/) are
needed, plus matplotlib for the chart.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from pion import _resp  # noqa: E402
from pion.testing import free_port  # noqa: E402,F401 (persist_suite uses it as m.free_port)

SUITES = ['small', 'bulk', 'membership', 'quant', 'formats', 'attend', 'strings', 'cluster',
          'persist']
KIB = 1024
MIB = 1024 * 1024
VQUANTS = ['fp16', 'fp8', 'int8', 'mlx4g32', 'turbo4', 'turbo3', 'turbo2']


class BenchError(Exception):
    """A workload failed (wrong reply, server died, tool error)."""


# ------------------------------------------------------------------ processes

class Procs:
    """Every process this run started; stop_all() ends them (idempotent)."""

    def __init__(self):
        self.procs = []

    def start(self, args, core=None, log_path=None, name=None):
        log = open(log_path, 'wb') if log_path else subprocess.DEVNULL
        preexec = None
        if core is not None:
            def preexec():
                os.sched_setaffinity(0, {core})
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=preexec, start_new_session=True)
        p.bench_name = name or os.path.basename(args[0])
        p.bench_log = log_path
        self.procs.append(p)
        return p

    def stop(self, p, timeout=10):
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            self.stop(p)


PROCS = Procs()


def on_signal(signum, _frame):
    raise KeyboardInterrupt('signal %d' % signum)


# ------------------------------------------------------------------ RESP

class Resp(_resp.SocketReader):
    """A blocking RESP client for setup and checks (pion._resp underneath): every
    reply is a (kind, value) pair, kind one of status, error, int, bulk, array, null."""

    def __init__(self, port, timeout=30):
        super().__init__(socket.create_connection(('127.0.0.1', port), timeout=timeout), 1 << 20)

    def close(self):
        self.sock.close()

    def simple(self, data):
        return ('status', data.decode())

    def error(self, text):
        return ('error', text)

    def integer(self, n):
        return ('int', n)

    def bulk(self, data):
        return ('bulk', bytes(data))

    def array(self, items):
        return ('array', items)

    def null(self):
        return ('null', None)

    def read(self):
        try:
            return super().read()
        except ConnectionError:
            raise BenchError('server closed the connection') from None
        except _resp.ProtocolError as e:
            raise BenchError('protocol: %s' % e) from None

    def call(self, *args):
        for part in _resp.encode_parts(*args):
            self.sock.sendall(part)
        return self.read()

    def expect(self, want, *args):
        r = self.call(*args)
        if r != want:
            raise BenchError('%s: got %r, want %r' % (
                ' '.join(str(a)[:40] for a in args[:4]), r, want))
        return r


def wait_ready(port, proc, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise BenchError('%s exited with %s before answering (log: %s)' % (
                proc.bench_name, proc.returncode, proc.bench_log))
        try:
            c = Resp(port, timeout=2)
            try:
                if c.call('PING') == ('status', 'PONG'):
                    return
            finally:
                c.close()
        except (OSError, BenchError):
            pass
        time.sleep(0.05)
    raise BenchError('%s did not answer PING on port %d' % (proc.bench_name, port))


# ------------------------------------------------------------------ context

class Ctx:
    """Paths, pinning, repetition counts and the servers of the current suite."""

    def __init__(self, args, tmp):
        self.args = args
        self.smoke = args.smoke
        self.reps = 1 if args.smoke else args.reps
        self.build = os.path.abspath(args.build)
        self.bin = os.path.join(self.build, 'bin')
        self.tmp = tmp
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) >= 2 and not args.no_pin:
            self.server_core, self.client_core = cores[0], cores[1]
        else:
            self.server_core = self.client_core = None
        self.pion_workers = args.pion_workers
        if self.pion_workers is None:
            self.pion_workers = 1 if self.server_core is not None else 0
        self.tools = {}
        self.notes = []

    def tool(self, name, required=True):
        if name in self.tools:
            return self.tools[name]
        path = None
        for cand in (os.path.join(self.bin, name), shutil.which(name)):
            if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
                path = cand
                break
        if path is None and required:
            raise BenchError('%s not found (in %s or on PATH)' % (name, self.bin))
        self.tools[name] = path
        return path

    def client_pin(self):
        if self.client_core is None:
            return None
        return lambda: os.sched_setaffinity(0, {self.client_core})

    def run_client(self, args, timeout=600, core='client'):
        """Runs a load generator pinned to the client core (or `core`, a core
        number or None); returns stdout."""
        if core == 'client':
            pin = self.client_pin()
        else:
            pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
        try:
            r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=pin, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError('%s timed out after %d s' % (os.path.basename(args[0]), timeout))
        if r.returncode != 0:
            raise BenchError('%s failed (rc %d): %s' % (
                ' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(args[:12])),
                r.returncode, (r.stderr or r.stdout).decode(errors='replace').strip()[-800:]))
        return r.stdout.decode()

    def start_redis(self):
        port = free_port()
        d = tempfile.mkdtemp(prefix='redis-', dir=self.tmp)
        p = PROCS.start([self.tool('redis-server'), '--port', str(port),
                         '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                         '--dir', d, '--protected-mode', 'no'],
                        core=self.server_core, log_path=os.path.join(d, 'log'),
                        name='redis-server')
        wait_ready(port, p)
        return Server('redis', port, p)

    def start_redis_module(self, core='server'):
        """redis-server with pion.so (build/<preset>/lib/pion.so) loaded."""
        module = os.path.join(self.build, 'lib', 'pion.so')
        if not os.path.isfile(module):
            raise BenchError('%s not built' % module)
        port = free_port()
        d = tempfile.mkdtemp(prefix='redis-pion-', dir=self.tmp)
        p = PROCS.start([self.tool('redis-server'), '--port', str(port),
                         '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                         '--dir', d, '--protected-mode', 'no', '--loadmodule', module],
                        core=self.server_core if core == 'server' else None,
                        log_path=os.path.join(d, 'log'), name='redis-server+pion.so')
        wait_ready(port, p)
        return Server('pion.so', port, p)

    def start_pion(self):
        port = free_port()
        d = tempfile.mkdtemp(prefix='pion-', dir=self.tmp)
        args = [self.tool('pion-server'), '--kvcache', '--port', str(port),
                '--bind', '127.0.0.1', '--dir', d, '--appendonly', 'no']
        if self.pion_workers:
            args += ['--workers', str(self.pion_workers)]
        args += self.args.pion_arg
        p = PROCS.start(args, core=self.server_core, log_path=os.path.join(d, 'log'),
                        name='pion-server')
        wait_ready(port, p)
        return Server('pion', port, p)


class Server:
    def __init__(self, kind, port, proc):
        self.kind, self.port, self.proc = kind, port, proc

    def check_alive(self):
        if self.proc.poll() is not None:
            raise BenchError('%s died (rc %s; log %s)' % (
                self.kind, self.proc.returncode, self.proc.bench_log))

    def stop(self):
        PROCS.stop(self.proc)


# ------------------------------------------------------------------ results

def mmm(vals):
    """(min, median, max) of the non-None values, or None."""
    v = [x for x in vals if x is not None]
    if not v:
        return None
    return (min(v), statistics.median(v), max(v))


class Row:
    """One table row: pion vs a peer, repetitions kept."""

    def __init__(self, suite, workload, unit, peer_name, target, higher_better=True):
        self.suite = suite
        self.workload = workload
        self.unit = unit
        self.peer_name = peer_name
        self.target = target
        self.higher_better = higher_better
        self.pion = []
        self.peer = []
        self.ceiling = []
        self.ceiling_name = ''
        self.extra = {}
        self.error = None
        self.met = None       # True/False/None (no target)
        self.met_note = ''

    def ratios(self):
        out = []
        for a, b in zip(self.pion, self.peer):
            if a is None or b is None or a == 0 or b == 0:
                continue
            out.append(a / b if self.higher_better else b / a)
        return out

    def pct_ceiling(self):
        out = []
        for a, c in zip(self.pion, self.ceiling):
            if a and c:
                out.append(100.0 * a / c)
        return out

    def to_json(self):
        return {
            'suite': self.suite, 'workload': self.workload, 'unit': self.unit,
            'peer': self.peer_name, 'target': self.target,
            'pion': self.pion, 'peer_values': self.peer, 'ratio': self.ratios(),
            'ceiling_name': self.ceiling_name, 'ceiling': self.ceiling,
            'pct_ceiling': self.pct_ceiling(), 'met': self.met, 'met_note': self.met_note,
            'error': self.error, 'extra': self.extra,
        }


def fmt_num(x):
    if x is None:
        return '—'
    a = abs(x)
    if a >= 1e6:
        return '%.3g M' % (x / 1e6) if a < 1e9 else '%.3g G' % (x / 1e9)
    if a >= 1e4:
        return '%.0f k' % (x / 1e3)
    if a >= 100:
        return '%.0f' % x
    if a >= 10:
        return '%.1f' % x
    return '%.2f' % x


def fmt_mmm(vals, fmt=fmt_num):
    t = mmm(vals)
    if t is None:
        return '—'
    if t[0] == t[2]:
        return '%s' % fmt(t[1])
    return '%s (%s–%s)' % (fmt(t[1]), fmt(t[0]), fmt(t[2]))


def fmt_ratio(x):
    return '%.2f×' % x


def fmt_pct(x):
    return '%.0f%%' % x


# ------------------------------------------------------------------ suites

def interleaved(ctx, fns):
    """Runs each callable once per repetition, interleaved across repetitions so
    slow drifts of machine load hit pion and the peer alike."""
    results = [[] for _ in fns]
    for _ in range(ctx.reps):
        for i, fn in enumerate(fns):
            results[i].append(fn())
    return results


def pion_bench(ctx, server, workload, **kw):
    args = [ctx.tool('pion-bench'), '--port', str(server.port), '--workload', workload]
    for k, v in kw.items():
        args += ['--' + k.replace('_', '-'), str(v)]
    out = ctx.run_client(args)
    server.check_alive()
    lines = [ln for ln in out.splitlines() if ln.startswith('{')]
    if not lines:
        raise BenchError('pion-bench printed no result: %r' % out[-400:])
    return json.loads(lines[-1])


def proc_cpu_s(pid):
    """User + system CPU seconds of process `pid` so far, all its threads (/proc/<pid>/stat)."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def pion_bench_cpu(ctx, server, workload, **kw):
    """pion_bench, plus the CPU-seconds per GB moved of the server process over the
    whole pion-bench run (setup and warm-up bytes counted: each client SETs once
    before a get, and runs 2 warm-up requests) and of the load generator over its
    timed phase (its own rusage, so generating the payloads is not counted), and
    from those each one's share of its core at the measured rate: the side near
    100 % is the one that bounds the row."""
    import resource
    c0 = proc_cpu_s(server.proc.pid)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    x = pion_bench(ctx, server, workload, **kw)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c1 = proc_cpu_s(server.proc.pid)
    extra_reqs = (3 if workload == 'get' else 2) * kw.get('clients', 1)
    gb = (x['ops'] + extra_reqs) * x['payload'] / 1e9
    x['server_cpu_s_per_gb'] = (c1 - c0) / gb
    if 'client_cpu_s' in x:
        # pion-bench's own rusage over the timed phase only: generating the
        # payloads (8 x 16 MiB) and the setup requests are not load.
        timed_gb = x['ops'] * x['payload'] / 1e9
        x['client_cpu_s_per_gb'] = x['client_cpu_s'] / timed_gb if timed_gb else 0.0
        x['client_faults_per_req'] = x['client_faults'] / x['ops'] if x['ops'] else 0.0
    else:
        x['client_cpu_s_per_gb'] = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / gb
    x['server_core_pct'] = 100.0 * x['server_cpu_s_per_gb'] * x['bytes_per_s'] / 1e9
    x['client_core_pct'] = 100.0 * x['client_cpu_s_per_gb'] * x['bytes_per_s'] / 1e9
    return x


def memcpy_probe(ctx, nbytes, duration):
    out = ctx.run_client([ctx.tool('pion-bench'), '--workload', 'memcpy', '--payload',
                          str(nbytes), '--duration', str(duration)])
    return json.loads(out.strip().splitlines()[-1])['bytes_per_s']


def iperf3_ceiling(ctx, seconds, length=None, streams=1):
    """Loopback TCP bytes/s of `streams` parallel streams (default one; server on
    the server core); `length` is iperf3's -l (write size; default 128 KiB)."""
    j = iperf3_run(ctx, seconds, length, streams)
    return None if j is None else j['end']['sum_received']['bits_per_second'] / 8.0


def iperf3_send_cost(ctx, seconds, length=None, streams=8):
    """The kernel's own cost of sending on the server core: iperf3 with its
    sender on the server core (where a server writes GET replies) and its
    receiver on the client core. Returns {'bytes_per_s', 'cpu_s_per_gb'} (the
    sender's CPU-seconds per GB, from iperf3's own accounting), or None."""
    j = iperf3_run(ctx, seconds, length, streams, sender_on_server_core=True)
    if j is None:
        return None
    bps = j['end']['sum_received']['bits_per_second'] / 8.0
    cpu = j['end']['cpu_utilization_percent']['host_total'] / 100.0
    return {'bytes_per_s': bps, 'cpu_s_per_gb': cpu / (bps / 1e9) if bps else None}


def iperf3_run(ctx, seconds, length, streams, sender_on_server_core=False):
    """One iperf3 run on loopback; its JSON report, or None without iperf3. By
    default the receiver (iperf3 -s) is on the server core and the sender on the
    client core; `sender_on_server_core` swaps them."""
    exe = ctx.tool('iperf3', required=False)
    if exe is None:
        return None
    recv_core, send_core = ctx.server_core, ctx.client_core
    if sender_on_server_core:
        recv_core, send_core = send_core, recv_core
    port = free_port()
    srv = PROCS.start([exe, '-s', '-1', '-B', '127.0.0.1', '-p', str(port)],
                      core=recv_core, name='iperf3-server',
                      log_path=os.path.join(ctx.tmp, 'iperf3-server.log'))
    try:
        deadline = time.time() + 5
        while True:
            try:
                socket.create_connection(('127.0.0.1', port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise BenchError('iperf3 server did not start')
                time.sleep(0.05)
        # The probe connection above counts as iperf3's one client on some
        # versions; restart it if it went away.
        time.sleep(0.1)
        if srv.poll() is not None:
            PROCS.stop(srv)
            srv = PROCS.start([exe, '-s', '-1', '-B', '127.0.0.1', '-p', str(port)],
                              core=recv_core, name='iperf3-server')
            time.sleep(0.3)
        cmd = [exe, '-c', '127.0.0.1', '-p', str(port), '-t', str(seconds), '-P', str(streams),
               '-J']
        if length:
            cmd += ['-l', str(length)]
        return json.loads(ctx.run_client(cmd, timeout=seconds + 30, core=send_core))
    finally:
        PROCS.stop(srv)


def redis_benchmark(ctx, server, n, pipeline, clients, cmd):
    args = [ctx.tool('redis-benchmark'), '-h', '127.0.0.1', '-p', str(server.port),
            '-c', str(clients), '-n', str(n), '-P', str(pipeline), '--csv'] + cmd
    out = ctx.run_client(args)
    server.check_alive()
    lines = [ln for ln in out.splitlines() if ln.startswith('"') and not ln.startswith('"test"')]
    if not lines:
        raise BenchError('redis-benchmark printed no result: %r' % out[-400:])
    f = [x.strip('"') for x in lines[-1].split('","')]
    return {'ops_per_s': float(f[1]), 'p50_ms': float(f[4]), 'p99_ms': float(f[6])}


def suite_small(ctx):
    """redis-benchmark, the same command line against both servers."""
    rows = []
    pion, redis = ctx.start_pion(), ctx.start_redis()
    try:
        member = b'ABCDEFGH'  # one 8-byte hash, NUL-free so it fits in argv
        c = Resp(pion.port)
        c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', 'smallns', 64, 'fp16',
                 'BLOCKS', 16, 1, member)
        row = b'\x00\x3c' * 64
        for side in ('_pk', '_pv'):
            c.expect(('status', 'OK'), 'V.STOREBATCH', 'smallns' + side, 0, 0, 1, row,
                     'FMT', 'F16')
        c.expect(('status', 'HIT'), 'KV.PREFIX.LOOKUP', 'smallns')
        c.expect(('bulk', b'\x01'), 'KV.PREFIX.MEMBERSHIP', 'smallns', 1, member)
        c.close()
        r = Resp(redis.port)
        r.expect(('status', 'OK'), 'SET', 'smallkey', 'abc')
        r.expect(('int', 1), 'SADD', 'smallset', member)
        r.expect(('int', 1), 'SISMEMBER', 'smallset', member)
        r.close()
        pairs = [
            ('PING_MBULK', ['-t', 'ping_mbulk'], 'redis PING_MBULK', ['-t', 'ping_mbulk']),
            ('KV.PREFIX.LOOKUP', ['KV.PREFIX.LOOKUP', 'smallns'], 'redis GET',
             ['GET', 'smallkey']),
            ('KV.PREFIX.MEMBERSHIP (1 hash)',
             ['KV.PREFIX.MEMBERSHIP', 'smallns', '1', member.decode()],
             'redis SISMEMBER', ['SISMEMBER', 'smallset', member.decode()]),
        ]
        for pipeline in (1, 16):
            if ctx.smoke:
                n = 2000
            else:
                n = 100000 if pipeline == 1 else 1000000
            for name, pcmd, peer_name, rcmd in pairs:
                rw = Row('small', '%s, 50 clients, -P %d' % (name, pipeline), 'ops/s',
                         peer_name, '≥ 1.0× (small commands)')
                try:
                    res = interleaved(ctx, [
                        lambda: redis_benchmark(ctx, pion, n, pipeline, 50, pcmd),
                        lambda: redis_benchmark(ctx, redis, n, pipeline, 50, rcmd)])
                    rw.pion = [x['ops_per_s'] for x in res[0]]
                    rw.peer = [x['ops_per_s'] for x in res[1]]
                    rw.extra = {'pion_p99_ms': [x['p99_ms'] for x in res[0]],
                                'peer_p99_ms': [x['p99_ms'] for x in res[1]]}
                    med = mmm(rw.ratios())[1]
                    rw.met = med >= 1.0
                    rw.met_note = '%.3f×' % med
                except BenchError as e:
                    rw.error = str(e)
                rows.append(rw)
        # The replies must still be right after the load.
        c = Resp(pion.port)
        c.expect(('bulk', b'\x01'), 'KV.PREFIX.MEMBERSHIP', 'smallns', 1, member)
        c.close()
    finally:
        pion.stop()
        redis.stop()
    return rows


def suite_bulk(ctx):
    """V.STOREBATCH/V.FETCH vs SET/GET of the same bytes; ceilings: loopback TCP, memcpy."""
    rows = []
    if ctx.smoke:
        sizes, client_counts, dur = [64 * KIB], [1], 0.3
    else:
        sizes, client_counts, dur = [64 * KIB, MIB, 16 * MIB], [1, 8], 2.0
    # The loopback ceiling is measured next to every repetition of every row
    # (interleaved with the pion and peer runs), so it sees the same machine load.
    # It is one TCP stream written in blocks of the payload size (at most 1 MiB):
    # iperf3's default 128 KiB writes reach only ~60 % of what one stream carries
    # with large writes here, and both servers exceed that (see docs).
    iperf_s = 1
    if ctx.tool('iperf3', required=False) is None:
        ctx.notes.append('iperf3 not installed: no loopback ceiling (scripts/deps.sh --bench)')
    memcpy = {s: memcpy_probe(ctx, s, 0.2 if ctx.smoke else 0.5) for s in sizes}
    pion, redis = ctx.start_pion(), ctx.start_redis()
    try:
        for size in sizes:
            for nc in client_counts:
                label = '%s ×%d client%s' % (size_name(size), nc, 's' if nc > 1 else '')
                for pw, rw_name, title in (('storebatch', 'set', 'V.STOREBATCH FMT F16'),
                                           ('fetch', 'get', 'V.FETCH FMT NATIVE')):
                    if size >= MIB:
                        target = '≥ 2× at 16 MiB; ≥ 80% of loopback' if size == 16 * MIB \
                            else '≥ 80% of loopback'
                    else:
                        target = '— (64 KiB: no target)'
                    row = Row('bulk', '%s %s' % (title, label), 'B/s',
                              'redis %s' % rw_name.upper(), target)
                    row.ceiling_name = 'iperf3 1-stream -l %s' % size_name(min(size, MIB))
                    kw = dict(clients=nc, payload=size, duration=dur, kv_dim=1024,
                              vquant='fp16', in_fmt='F16', out_fmt='NATIVE',
                              ns='b%d_%d' % (size, nc))
                    try:
                        res = interleaved(ctx, [
                            lambda: pion_bench(ctx, pion, pw, **kw),
                            lambda: pion_bench(ctx, redis, rw_name, clients=nc,
                                               payload=size, duration=dur,
                                               ns='b%d_%d' % (size, nc)),
                            lambda: iperf3_ceiling(ctx, iperf_s, length=min(size, MIB)),
                            lambda: (None if ctx.smoke else iperf3_ceiling(ctx, iperf_s))])
                        row.ceiling = [c for c in res[2] if c]
                        row.pion = [x['bytes_per_s'] for x in res[0]]
                        row.peer = [x['bytes_per_s'] for x in res[1]]
                        row.extra = {
                            'pion_p50_us': [x['p50_us'] for x in res[0]],
                            'pion_p99_us': [x['p99_us'] for x in res[0]],
                            'peer_p50_us': [x['p50_us'] for x in res[1]],
                            'peer_p99_us': [x['p99_us'] for x in res[1]],
                            # Mean request time and its write part: the rest is
                            # the wait for the reply after the last byte was sent.
                            'pion_mean_us': [x['mean_us'] for x in res[0]],
                            'pion_write_mean_us': [x.get('write_mean_us') for x in res[0]],
                            'memcpy_Bps': memcpy[size]}
                        dflt = [c for c in res[3] if c]
                        if dflt:
                            row.extra['iperf3_default_128K_writes_Bps'] = dflt
                        judge_bulk(row, size)
                    except BenchError as e:
                        row.error = str(e)
                    rows.append(row)
    finally:
        pion.stop()
        redis.stop()
    return rows


def judge_bulk(row, size):
    ratio = mmm(row.ratios())
    pct = mmm(row.pct_ceiling())
    if size < MIB:
        row.met = None
        row.met_note = 'info'
        return
    ok = True
    notes = []
    if size == 16 * MIB and ratio:
        ok = ok and ratio[1] >= 2.0
        notes.append('%.2f× vs 2×' % ratio[1])
    if pct:
        ok = ok and pct[1] >= 80.0
        notes.append('%.0f%% vs 80%%' % pct[1])
    row.met = ok
    row.met_note = ', '.join(notes)


def size_name(n):
    if n >= MIB and n % MIB == 0:
        return '%d MiB' % (n // MIB)
    if n >= KIB and n % KIB == 0:
        return '%d KiB' % (n // KIB)
    return '%d B' % n


def pion_info(server, *args):
    c = Resp(server.port)
    try:
        r = c.call(*args)
    finally:
        c.close()
    if r[0] not in ('bulk', 'status'):
        return {}
    text = r[1].decode(errors='replace') if isinstance(r[1], bytes) else r[1]
    out = {}
    for line in text.splitlines():
        if ':' in line and not line.startswith('#'):
            k, v = line.split(':', 1)
            out[k.strip()] = v.strip()
    return out


def command_usec(server, name):
    """(calls, usec) of one command from INFO commandstats, or None."""
    info = pion_info(server, 'INFO', 'commandstats')
    v = info.get('cmdstat_' + name.lower())
    if not v:
        return None
    f = dict(kv.split('=', 1) for kv in v.split(',') if '=' in kv)
    try:
        return int(f['calls']), float(f['usec'])
    except (KeyError, ValueError):
        return None


def suite_membership(ctx):
    """K = N = 1,562 probes, one client, vs a 12.5 KB SET round trip on redis."""
    k = n = 1562
    dur = 0.3 if ctx.smoke else 3.0
    pion, redis = ctx.start_pion(), ctx.start_redis()
    rows = []
    r50 = Row('membership', 'KV.PREFIX.MEMBERSHIP K=N=1,562, 1 client: p50', 'µs',
              'redis SET 12,496 B p50', 'p50 within 20 µs of peer', higher_better=False)
    r99 = Row('membership', 'KV.PREFIX.MEMBERSHIP K=N=1,562, 1 client: p99', 'µs',
              'redis SET 12,496 B p99', '— (p99 reported)', higher_better=False)
    rc = Row('membership', 'KV.PREFIX.MEMBERSHIP server compute per call', 'µs',
             '—', '≤ 10 µs', higher_better=False)
    try:
        res = interleaved(ctx, [
            lambda: pion_bench(ctx, pion, 'membership', clients=1, hashes=n, probes=k,
                               duration=dur, ns='mem'),
            lambda: pion_bench(ctx, redis, 'set', clients=1, payload=8 * k, duration=dur,
                               ns='mem'),
            lambda: pion_bench(ctx, pion, 'membership_miss', clients=1, hashes=n, probes=k,
                               duration=dur, ns='mem')])
        r50.pion = [x['p50_us'] for x in res[0]]
        r50.peer = [x['p50_us'] for x in res[1]]
        r99.pion = [x['p99_us'] for x in res[0]]
        r99.peer = [x['p99_us'] for x in res[1]]
        diffs = [a - b for a, b in zip(r50.pion, r50.peer)]
        r50.extra = {'p50_diff_us': diffs,
                     'pion_ops_per_s': [x['ops_per_s'] for x in res[0]],
                     'peer_ops_per_s': [x['ops_per_s'] for x in res[1]]}
        d = mmm(diffs)[1]
        r50.met = d <= 20.0
        r50.met_note = 'p50 %+.1f µs vs peer' % d
        r99.met = None
        r99.met_note = 'info'
        # Server compute: the server core saturated (4 clients, pipeline 16),
        # the same request against the registered namespace (search + bitmap)
        # and against an unknown one (+UNKNOWN: parsed, not searched). The
        # difference of the per-request server times is the search; the hit's
        # own per-request time (parse + search + reply + syscalls) bounds it.
        sat = dict(clients=4, pipeline=16, hashes=n, probes=k, duration=dur / 2, ns='sat')
        res2 = interleaved(ctx, [
            lambda: pion_bench(ctx, pion, 'membership', **sat),
            lambda: pion_bench(ctx, pion, 'membership_miss', **sat)])
        hit_us = [1e6 / x['ops_per_s'] for x in res2[0]]
        miss_us = [1e6 / x['ops_per_s'] for x in res2[1]]
        rc.peer_name = 'same request, unknown ns (+UNKNOWN)'
        rc.pion = [a - b for a, b in zip(hit_us, miss_us)]
        rc.extra = {'hit_server_us_per_req': hit_us, 'miss_server_us_per_req': miss_us}
        per_call = statistics.median(rc.pion)
        rc.met = per_call <= 10.0
        rc.met_note = ('%.1f µs/call search (server-bound: %.1f µs/req hit vs %.1f unknown ns)'
                       % (per_call, statistics.median(hit_us), statistics.median(miss_us)))
    except BenchError as e:
        r50.error = r99.error = rc.error = str(e)
    finally:
        pion.stop()
        redis.stop()
    rows += [r50, r99, rc]
    return rows


def suite_quant(ctx):
    """bench_quant (Google Benchmark) kernels vs memcpy of the same bytes."""
    exe = ctx.tool('bench_quant', required=False)
    rows = []
    if exe is None:
        ctx.notes.append('quant suite skipped: bench_quant not built in %s' % ctx.bin)
        return []
    args = [exe, '--benchmark_format=json',
            '--benchmark_min_time=%s' % ('0.01' if ctx.smoke else '0.2')]
    if not ctx.smoke:
        args.append('--benchmark_repetitions=%d' % ctx.reps)
    if ctx.args.quant_filter:
        args.append('--benchmark_filter=%s' % ctx.args.quant_filter)
    elif ctx.smoke:
        args.append('--benchmark_filter=/1024$')
    out = ctx.run_client(args, timeout=120 if ctx.smoke else 900)
    j = json.loads(out)
    rows = quant_rows(j, ctx)
    if not rows:
        row = Row('quant', 'bench_quant', 'Gelem/s', 'memcpy', '—')
        row.error = 'bench_quant reported no recognisable kernels'
        rows = [row]
    return rows


def quant_rows(j, ctx):
    """Rows per (op, format, dim): Gelem/s vs memcpy of the same f32 bytes (what
    an encode reads and a decode writes), bench_quant's memcpy_f32/<dim> of the
    same run; without it, pion-bench's memcpy probe of the same bytes."""
    runs = {}
    for b in j.get('benchmarks', []):
        if b.get('run_type') == 'aggregate' or b.get('error_occurred'):
            continue
        name = b.get('run_name') or b['name']
        if b.get('items_per_second'):
            runs.setdefault(name, []).append(b['items_per_second'] / 1e9)
    memcpy = {}
    for name, vals in runs.items():
        parts = name.split('/')
        if parts[0].startswith('memcpy') and len(parts) > 1 and parts[1].isdigit():
            memcpy[int(parts[1])] = vals
    rows = []
    order = {f: i for i, f in enumerate(VQUANTS)}
    keys = []
    for name in runs:
        parts = name.split('/')
        if len(parts) >= 3 and parts[0] in ('decode', 'encode') and parts[2].isdigit():
            keys.append((parts[0], order.get(parts[1], 99), int(parts[2]), parts[1], name))
    for op, _, dim, fmt, name in sorted(keys):
        if op == 'decode':
            target = 1.5 if fmt.startswith('turbo') else 4.0
            ttext = 'decode ≥ %.1f Gelem/s' % target
        else:
            target = None
            ttext = '— (encode: no target)'
        row = Row('quant', '%s %s dim %d' % (op, fmt, dim), 'Gelem/s',
                  'memcpy of the f32 bytes', ttext)
        row.pion = runs[name]
        mem = memcpy.get(dim)
        if mem is None:
            nbytes = 131072 * 4
            key = ('probe', nbytes)
            if key not in ctx.tools:
                ctx.tools[key] = memcpy_probe(ctx, nbytes, 0.05 if ctx.smoke else 0.3)
            mem = [ctx.tools[key] / 4 / 1e9]
        row.peer = [mem[min(i, len(mem) - 1)] for i in range(len(row.pion))]
        med = statistics.median(row.pion)
        if target:
            row.met = med >= target
            row.met_note = '%.2f Gelem/s vs %.1f' % (med, target)
        else:
            row.met_note = 'info'
        rows.append(row)
    return rows


# Stored bytes per row at D (docs/quant_formats.md §3).
def expected_row_bytes(fmt, d):
    return {'fp16': 2 * d, 'fp8': 4 + d + d // 16, 'int8': d + 4, 'mlx4g32': d * 5 // 8,
            'turbo4': 4 + d * 9 // 16, 'turbo3': 4 + d * 7 // 16,
            'turbo2': 4 + d * 5 // 16}[fmt]


def suite_formats(ctx):
    """Bytes per token and fetch bandwidth per vquant at kv_dim 1024."""
    d = 1024
    tokens = 64 if ctx.smoke else 1024
    dur = 0.2 if ctx.smoke else 1.5
    rows = []
    pion = ctx.start_pion()
    try:
        fetch_bps = {}
        for fmt in VQUANTS:
            row = Row('formats', '%s: stored bytes/token, kv_dim %d' % (fmt, d), 'B',
                      'docs/quant_formats.md §3', 'equals the table (≤ +1%)', higher_better=False)
            rf = Row('formats', '%s: V.FETCH %d rows FMT F16, 1 client' % (fmt, tokens), 'B/s',
                     'fp16 session, same request', '— (info)')
            try:
                c = Resp(pion.port)
                ns = 'fmt_' + fmt
                c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', ns, d, fmt)
                blob = bytes(make_f16_rows(tokens, d))
                c.expect(('status', 'OK'), 'V.STOREBATCH', ns + '_pk', 0, 0, tokens, blob,
                         'FMT', 'F16')
                info = pion_info(pion, 'V.INFO', ns + '_pk')
                c.close()
                stored = None
                for key in ('bytes', 'vstore_bytes', 'stored_bytes'):
                    if key in info:
                        stored = int(info[key])
                        break
                want = expected_row_bytes(fmt, d)
                row.peer = [float(want)]
                if stored is not None:
                    per_tok = stored / tokens
                    row.pion = [per_tok]
                    row.met = per_tok <= want * 1.01
                    row.met_note = '%.1f B vs %d B (%.2f× smaller than fp16)' % (
                        per_tok, want, 2.0 * d / per_tok)
                else:
                    row.met_note = 'V.INFO has no bytes field: %s' % sorted(info)[:8]
                res = [pion_bench(ctx, pion, 'fetch', clients=1, payload=tokens * d * 2,
                                  duration=dur, kv_dim=d, vquant=fmt, in_fmt='F16',
                                  out_fmt='F16', ns='ff_' + fmt)
                       for _ in range(ctx.reps)]
                fetch_bps[fmt] = [x['bytes_per_s'] for x in res]
                rf.pion = fetch_bps[fmt]
                rf.extra = {'tokens_per_s': [x['ops_per_s'] * tokens for x in res],
                            'p50_us': [x['p50_us'] for x in res]}
                rf.met_note = 'info'
            except BenchError as e:
                row.error = rf.error = str(e)
            rows += [row, rf]
        for rf in rows:
            if rf.unit == 'B/s' and 'fp16' in fetch_bps:
                rf.peer = list(fetch_bps['fp16'])
    finally:
        pion.stop()
    return rows


def make_f16_rows(rows, d):
    """Deterministic finite fp16 values (|v| < 1), little-endian."""
    out = bytearray(rows * d * 2)
    x = 12345
    for i in range(rows * d):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        h = ((x >> 5) & 0x8000) | ((1 + (x >> 11) % 14) << 10) | (x & 0x3ff)
        out[2 * i] = h & 0xff
        out[2 * i + 1] = h >> 8
    return out


def suite_attend(ctx):
    """bench_attend (Google Benchmark): the kernel rows of docs/attention.md §7 next to a
    read-only streaming pass over the same slot bytes in the same run."""
    exe = ctx.tool('bench_attend', required=False)
    if exe is None:
        ctx.notes.append('attend suite skipped: bench_attend not built in %s' % ctx.bin)
        return []
    args = [exe, '--benchmark_format=json',
            '--benchmark_min_time=%s' % ('0.01' if ctx.smoke else '0.3')]
    if not ctx.smoke:
        args.append('--benchmark_repetitions=%d' % ctx.reps)
    else:
        args.append('--benchmark_filter=/2048$')
    # Not pinned: the 2-thread row needs both cores.
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120 if ctx.smoke else 1800)
    except subprocess.TimeoutExpired:
        raise BenchError('bench_attend timed out')
    if r.returncode != 0:
        raise BenchError('bench_attend failed (rc %d): %s' % (
            r.returncode, r.stderr.decode(errors='replace')[-800:]))
    kernel = json.loads(r.stdout.decode())
    rows = attend_rows(kernel)
    if not rows:
        row = Row('attend', 'bench_attend', 'B/s', 'stream', '—')
        row.error = 'bench_attend reported no recognisable rows'
        rows = [row]
    rows += attend_e2e_rows(ctx, kernel)
    return rows


def kernel_us(j, name):
    """Median µs per query of one bench_attend benchmark (None if absent)."""
    vals = []
    for b in j.get('benchmarks', []):
        if b.get('run_type') == 'aggregate' or b.get('error_occurred'):
            continue
        run = (b.get('run_name') or b['name']).replace('/process_time', '')
        if run.replace('/real_time', '') != name:
            continue
        vals.append(b['real_time'] * {'ns': 1e-3, 'us': 1.0, 'ms': 1e3, 's': 1e6}[
            b.get('time_unit', 'ns')])
    return statistics.median(vals) if vals else None


def pct(vals, p):
    v = sorted(vals)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def timed_calls(c, payload, count, reply_len):
    """Sends `payload` (one encoded command) `count` times, one at a time; µs each."""
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        c.sock.sendall(payload)
        kind, body = c.read()
        out.append((time.perf_counter() - t0) * 1e6)
        if kind == 'error' or (reply_len is not None and len(body) != reply_len):
            raise BenchError('unexpected reply %r' % ((kind, str(body)[:80]),))
    return out


def start_pion_attend(ctx, extra):
    """pion-server for the end-to-end attend rows: not pinned (the compute pool needs a
    core of its own), one worker, f16 slots."""
    port = free_port()
    d = tempfile.mkdtemp(prefix='pion-attend-', dir=ctx.tmp)
    args = [ctx.tool('pion-server'), '--kvcache', '--port', str(port), '--bind', '127.0.0.1',
            '--dir', d, '--appendonly', 'no', '--workers', '1', '--attend-precision', 'f16']
    p = PROCS.start(args + extra, log_path=os.path.join(d, 'log'), name='pion-server')
    wait_ready(port, p)
    return Server('pion', port, p)


def f16_blob(n_elems, seed):
    """n_elems IEEE halves in (-1, 1), a 4096-element pattern repeated (values do not
    change the timing)."""
    import struct
    pat = [0x3800 | ((j * 40503 + seed * 977) & 0x3ff) | (0x8000 if j & 1 else 0)
           for j in range(4096)]
    one = struct.pack('<4096H', *pat)
    return (one * (n_elems // 4096 + 1))[:2 * n_elems]


def attend_e2e_rows(ctx, kernel):
    """The end-to-end rows of docs/attention.md §7 over loopback: QUERY p50/p99 vs the kernel time plus a
    same-size round trip (ECHO of the Q bytes), KV.PREFIX.WARM GB/s, and a client's PING
    p99 on the same worker while another client runs 32K-token queries."""
    rows = []
    h, d = 8, 128
    qbytes = struct_f32(h * d)
    srv = start_pion_attend(ctx, ['--attend-threads', '1'])
    try:
        c = Resp(srv.port, timeout=120)
        sizes = (2048,) if ctx.smoke else (2048, 32768)
        for n in sizes:
            blob = f16_blob(h * n * d, n)
            c.expect(('status', 'OK'), 'ATTEND.PREFIX.STORE', 'e2e', n, h, n, d, blob, blob,
                     'FMT', 'F16')
            count = 200 if ctx.smoke else (3000 if n == 2048 else 300)
            q = _resp.encode('ATTEND.PREFIX.QUERY', 'e2e', str(n), str(h), str(d), '1', qbytes)
            echo = _resp.encode('ECHO', qbytes)
            timed_calls(c, q, 20, h * d * 4)  # warm-up
            row = Row('attend', 'QUERY f16 N=%d H=8 D=128 over loopback (p50)' % n, 'µs',
                      'kernel + ECHO round trip', 'info', higher_better=False)
            for _ in range(ctx.reps):
                qs = timed_calls(c, q, count, h * d * 4)
                es = timed_calls(c, echo, count, len(qbytes))
                k = kernel_us(kernel, 'dense/f16/%d' % n)
                row.pion.append(pct(qs, 50))
                row.peer.append(pct(es, 50) + (k or 0.0))
                row.extra.setdefault('QUERY p99 µs', []).append(pct(qs, 99))
                row.extra.setdefault('ECHO p50 µs', []).append(pct(es, 50))
                row.extra.setdefault('kernel µs (1 thread)', []).append(k)
            rt = row.ratios()
            row.met_note = 'QUERY / (kernel + round trip) = %.2f' % (1 / statistics.median(rt)) \
                if rt else ''
            rows.append(row)
        c.close()
    finally:
        srv.stop()

    # WARM: 32 layers x 2048 tokens x kv_dim 1024 from the V-store into f16 slots.
    # The first WARM of the process writes fresh pages (every 4 KiB page faults, ~1 GB/s
    # per core here): reported on its own row. The target rows time a WARM after a DROP
    # of the previous one (the slot arena's memory, as after demotions or a re-warm).
    # Server CPU seconds per WARM (from /proc) are kept too: robust to other jobs' load.
    srv = start_pion_attend(ctx, [])
    try:
        c = Resp(srv.port, timeout=300)
        layers, n = (4, 512) if ctx.smoke else (32, 2048)
        rowblob = struct_f32(n * h * d)
        slot_bytes = layers * 2 * n * h * d * 2
        fmts = ('fp16', 'int8', 'turbo4', 'fp8', 'mlx4g32')
        for fmt in fmts:
            ns = 'warm_' + fmt
            c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', ns, h * d, fmt)
            for layer in range(layers):
                for side in ('_pk', '_pv'):
                    c.expect(('status', 'OK'), 'V.STOREBATCH', ns + side, layer, 0, n, rowblob)

        def one_warm(ns):
            c0 = proc_cpu_s(srv.proc.pid)
            t0 = time.perf_counter()
            got = c.call('KV.PREFIX.WARM', ns, h, d)
            dt = time.perf_counter() - t0
            cpu = proc_cpu_s(srv.proc.pid) - c0
            if got != ('status', str(layers)):
                raise BenchError('KV.PREFIX.WARM: %r' % (got,))
            c.call('ATTEND.PREFIX.DROP', ns)
            return dt, cpu

        first = Row('attend', 'KV.PREFIX.WARM from fp16, first of the process (fresh pages; '
                    '%d layers x %d tokens, kv_dim 1024, f16 slots)' % (layers, n), 'B/s',
                    'target 2 GB/s', 'info')
        dt, cpu = one_warm('warm_fp16')
        first.pion.append(slot_bytes / dt)
        first.peer.append(2e9)
        first.extra['ms'] = [dt * 1e3]
        first.extra['GB per server CPU-s'] = [slot_bytes / max(cpu, 1e-3) / 1e9]
        first.met_note = '%.2f GB/s of slot bytes into fresh memory' % (slot_bytes / dt / 1e9)
        rows.append(first)
        for fmt in fmts:
            ns = 'warm_' + fmt
            row = Row('attend', 'KV.PREFIX.WARM from %s (%d layers x %d tokens, kv_dim 1024, '
                      'f16 slots; after a DROP)' % (fmt, layers, n), 'B/s', 'target 2 GB/s',
                      '≥ 2 GB/s')
            for _ in range(max(3, ctx.reps)):
                dt, cpu = one_warm(ns)
                row.pion.append(slot_bytes / dt)
                row.peer.append(2e9)
                row.extra.setdefault('ms', []).append(dt * 1e3)
                row.extra.setdefault('GB per server CPU-s', []).append(
                    slot_bytes / max(cpu, 1e-3) / 1e9)
            med = statistics.median(row.pion)
            row.met = med >= 2e9
            row.met_note = '%.2f GB/s of slot bytes' % (med / 1e9)
            rows.append(row)
        c.close()
    finally:
        srv.stop()

    # PING p99 on the worker that runs another client's 32K-token queries.
    n = 4096 if ctx.smoke else 32768
    srv = start_pion_attend(ctx, ['--attend-threads', '1'])
    try:
        c = Resp(srv.port, timeout=120)
        blob = f16_blob(h * n * d, 7)
        c.expect(('status', 'OK'), 'ATTEND.PREFIX.STORE', 'long', 0, h, n, d, blob, blob,
                 'FMT', 'F16')
        ping = _resp.encode('PING')
        count = 500 if ctx.smoke else 5000
        row = Row('attend', 'PING p99 while another client runs N=%d queries (same worker)' % n,
                  'µs', 'PING p99 idle', '< 2 ms', higher_better=False)
        loader = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             'attend_query_loop.py'), str(srv.port), str(n)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = loader.stdout.readline()  # "ready" after its first query
            if not line.startswith(b'ready'):
                raise BenchError('attend loader: %r %r' % (line, loader.stderr.read()[-400:]))
            for _ in range(ctx.reps):
                busy = timed_calls(c, ping, count, None)
                row.pion.append(pct(busy, 99))
                row.extra.setdefault('PING p50 µs (busy)', []).append(pct(busy, 50))
        finally:
            loader.terminate()
            loader.wait(10)
        for _ in range(ctx.reps):
            row.peer.append(pct(timed_calls(c, ping, count, None), 99))
        med = statistics.median(row.pion)
        row.met = med < 2000
        row.met_note = 'p99 %.0f µs busy' % med
        rows.append(row)
        c.close()
    finally:
        srv.stop()
    return rows


def struct_f32(count):
    import struct
    vals = [((i * 2654435761) % 2001 - 1000) / 1000.0 for i in range(min(count, 4096))]
    one = struct.pack('<%df' % len(vals), *vals)
    return (one * (count // len(vals) + 1))[:4 * count]




def attend_rows(j):
    """Rows of the attend suite from bench_attend's JSON (per repetition)."""
    runs = {}
    for b in j.get('benchmarks', []):
        if b.get('run_type') == 'aggregate' or b.get('error_occurred'):
            continue
        name = (b.get('run_name') or b['name']).replace('/process_time', '')
        name = name.replace('/real_time', '')
        runs.setdefault(name, []).append(b)

    def col(name, key):
        return [b.get(key) for b in runs.get(name, [])]

    def us(name):  # µs per query, from the real time per iteration
        out = []
        for b in runs.get(name, []):
            t = b['real_time']
            unit = b.get('time_unit', 'ns')
            out.append(t * {'ns': 1e-3, 'us': 1.0, 'ms': 1e3, 's': 1e6}[unit])
        return out

    def gbs(name):  # K/V bytes per real second
        return [b['kv_bytes'] / (u * 1e-6) for b, u in zip(runs.get(name, []), us(name))]

    rows = []
    for prec in ('f32', 'f16', 'int8'):
        for n in (2048, 32768):
            name = 'dense/%s/%d' % (prec, n)
            if name not in runs:
                continue
            target = '≥ 70% of stream' if n == 32768 else '—'
            row = Row('attend', 'dense %s N=%d (H=8 D=128 M=1, 1 thread)' % (prec, n), 'B/s',
                      'stream (same bytes)', target)
            row.pion = gbs(name)
            row.peer = gbs('stream/%s/%d' % (prec, n))
            row.ceiling, row.ceiling_name = row.peer, 'stream'
            row.extra['µs/query'] = us(name)
            row.extra['stream µs'] = us('stream/%s/%d' % (prec, n))
            rt = row.ratios()
            if n == 32768 and rt:
                med = statistics.median(rt)
                row.met = med >= 0.70
                row.met_note = '%.0f%% of stream' % (100 * med)
            else:
                row.met_note = 'info (L3-resident)'
            rows.append(row)
            if prec == 'f16' and n == 2048:
                lat = Row('attend', 'dense f16 N=2048 latency', 'µs', 'Metal (original)',
                          '≤ 440 µs', higher_better=False)
                lat.pion = us(name)
                lat.peer = [440.0] * len(lat.pion)
                med = statistics.median(lat.pion) if lat.pion else None
                lat.met = med is not None and med <= 440.0
                lat.met_note = '%.0f µs' % med if med is not None else ''
                rows.append(lat)
    for n in (32768, 2048):
        if 'threads/1/%d' % n not in runs or 'threads/2/%d' % n not in runs:
            continue
        row = Row('attend', 'dense f16 N=%d: 2 threads vs 1 (split-KV pool)' % n, 'B/s',
                  '1 thread', '≥ 1.6×' if n == 32768 else 'info (L3-resident)')
        row.pion = gbs('threads/2/%d' % n)
        row.peer = gbs('threads/1/%d' % n)
        if n == 32768 and 'stream_threads/2/32768' in runs:
            s1, s2 = gbs('stream_threads/1/32768'), gbs('stream_threads/2/32768')
            row.ceiling, row.ceiling_name = s2, 'stream on 2 threads'
            row.extra['stream 2 vs 1 thread'] = [b / a for a, b in zip(s1, s2) if a]
        # Process CPU time per query (all threads): the split's own cost, which other
        # jobs' load does not change the way it changes the wall time.
        c1, c2 = col('threads/1/%d' % n, 'cpu_time'), col('threads/2/%d' % n, 'cpu_time')
        row.extra['CPU per query, 2 vs 1 thread'] = [b / a for a, b in zip(c1, c2) if a and b]
        rt = row.ratios()
        if rt and n == 32768:
            row.met = statistics.median(rt) >= 1.6
            row.met_note = '%.2f×' % statistics.median(rt)
        elif rt:
            row.met_note = '%.2f×' % statistics.median(rt)
        rows.append(row)
    for n in (2048, 32768):
        name = 'multi/%d' % n
        if name not in runs:
            continue
        row = Row('attend', 'M=16, GQA 32/8, f16, N=%d' % n, 'B/s', 'stream (f16 slot)', 'info')
        row.pion = gbs(name)
        row.peer = gbs('stream/f16/%d' % n)
        row.ceiling, row.ceiling_name = row.peer, 'stream'
        row.extra['GFLOP/s'] = [g / 1e9 if g > 1e6 else g for g in col(name, 'GFLOP/s')]
        row.extra['µs/query'] = us(name)
        row.met_note = 'bytes = one pass over the 8 KV heads'
        rows.append(row)
    dense = us('sparse_dense/32768')
    for sel in ('block_mean', 'quest'):
        name = 'sparse/%s/32768' % sel
        if name not in runs:
            continue
        row = Row('attend', 'sparse auto %s N=32768 B=64 K_top·B=N/8 (speed-up)' % sel, 'x',
                  'dense f16', '≥ 4×, recall 100%, mass ≥ 0.95')
        sp = us(name)
        row.pion = [d / s for d, s in zip(dense, sp) if s]
        row.peer = [1.0] * len(row.pion)
        recall = col(name, 'recall')
        mass = col(name, 'mass')
        row.extra['µs/query'] = sp
        row.extra['dense µs'] = dense
        row.extra['recall'] = recall
        row.extra['mass'] = mass
        if row.pion:
            med = statistics.median(row.pion)
            ok = med >= 4.0 and min(recall) >= 1.0 and min(mass) >= 0.95
            row.met = ok
            row.met_note = '%.1f×, recall %.0f%%, mass %.3f' % (med, 100 * min(recall), min(mass))
        rows.append(row)
    return rows


def suite_attend_lane(ctx):
    """QUERY_FUSED over the binary fast lane vs over RESP (bench/fastlane_bench.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fastlane_bench
    return fastlane_bench.suite(ctx, sys.modules[__name__])


def suite_attend_all(ctx):
    rows = []
    for fn in (suite_attend, suite_attend_lane):
        try:
            rows += fn(ctx)
        except BenchError as e:
            r = Row('attend', '(%s)' % fn.__name__, '', '', '—')
            r.error = str(e)
            rows.append(r)
        finally:
            PROCS.stop_all()
    return rows


def suite_strings(ctx):
    """The string keyspace (GET/SET, the LMCache remote tier) against redis-server:
    redis-benchmark -t set,get at -d 100 and -d 65536, then pion-bench GET/SET of
    256 KiB, 2 MiB and 16 MiB values with 8 clients. Same command lines for both. The
    pion-bench rows carry the loopback ceiling (iperf3, same run), each server's
    CPU-seconds per GB and the server's and load generator's core shares; the GET rows
    also the kernel's own CPU-seconds per GB for sending 8 streams from the server core
    (iperf3 -P 8 with its sender there), the floor under a GET server's cost."""
    rows = []
    pion, redis = ctx.start_pion(), ctx.start_redis()
    try:
        for d in (100, 65536):
            if ctx.smoke:
                n = 2000
            else:
                n = 100000 if d == 100 else 20000
            for t in ('set', 'get'):
                rw = Row('strings', 'redis-benchmark -t %s -d %d, 50 clients' % (t, d), 'ops/s',
                         'redis %s' % t.upper(), '≥ 1.0×')
                cmd = ['-t', t, '-d', str(d)]
                try:
                    res = interleaved(ctx, [
                        lambda: redis_benchmark(ctx, pion, n, 1, 50, cmd),
                        lambda: redis_benchmark(ctx, redis, n, 1, 50, cmd)])
                    rw.pion = [x['ops_per_s'] for x in res[0]]
                    rw.peer = [x['ops_per_s'] for x in res[1]]
                    rw.extra = {'pion_p99_ms': [x['p99_ms'] for x in res[0]],
                                'peer_p99_ms': [x['p99_ms'] for x in res[1]]}
                    med = mmm(rw.ratios())[1]
                    rw.met = med >= 1.0
                    rw.met_note = '%.3f×' % med
                except BenchError as e:
                    rw.error = str(e)
                rows.append(rw)
        sizes = [256 * KIB] if ctx.smoke else [256 * KIB, 2 * MIB, 16 * MIB]
        dur = 0.3 if ctx.smoke else 2.0
        # The physical ceiling next to every repetition (same load): one loopback
        # TCP stream written in blocks of the value size (at most 1 MiB), as in the
        # bulk suite. On loopback the sender's core also runs the receiver's TCP
        # processing, so the side that writes (the load generator for SET, the
        # server for GET) is the one that saturates: see the core shares.
        have_iperf = ctx.tool('iperf3', required=False) is not None
        if not have_iperf:
            ctx.notes.append('iperf3 not installed: no loopback ceiling (scripts/deps.sh --bench)')
        for size in sizes:
            for w in ('set', 'get'):
                target = '≥ 2×' if size >= 2 * MIB else '≥ 1.0×'
                row = Row('strings', '%s %s ×8 clients' % (w.upper(), size_name(size)), 'B/s',
                          'redis %s' % w.upper(), target)
                row.ceiling_name = 'iperf3 1-stream -l %s' % size_name(min(size, MIB))
                kw = dict(clients=8, payload=size, duration=dur, ns='s%d' % size)
                fns = [lambda: pion_bench_cpu(ctx, pion, w, **kw),
                       lambda: pion_bench_cpu(ctx, redis, w, **kw)]
                if have_iperf:
                    fns.append(lambda: iperf3_ceiling(ctx, 1, length=min(size, MIB)))
                    # 8 streams from one client core, as the 8 pion-bench clients.
                    fns.append(lambda: iperf3_ceiling(ctx, 1, length=min(size, MIB), streams=8))
                    if w == 'get':
                        # The kernel's cost of sending 8 streams from the server
                        # core: the floor under a GET row's server CPU-s/GB.
                        fns.append(lambda: iperf3_send_cost(ctx, 1, length=min(size, MIB)))
                try:
                    res = interleaved(ctx, fns)
                    row.pion = [x['bytes_per_s'] for x in res[0]]
                    row.peer = [x['bytes_per_s'] for x in res[1]]
                    if have_iperf:
                        row.ceiling = [c for c in res[2] if c]
                    row.extra = {'pion_p50_us': [x['p50_us'] for x in res[0]],
                                 'peer_p50_us': [x['p50_us'] for x in res[1]]}
                    if have_iperf:
                        row.extra['iperf3_8_streams_Bps'] = [c for c in res[3] if c]
                    if have_iperf and w == 'get':
                        row.extra['kernel_send_8_streams_cpu_s_per_gb'] = [
                            c['cpu_s_per_gb'] for c in res[4] if c and c['cpu_s_per_gb']]
                    if row.ceiling:
                        row.extra['peer_pct_ceiling'] = [
                            100.0 * a / c for a, c in zip(row.peer, row.ceiling) if a and c]
                    for side, r in (('pion', res[0]), ('peer', res[1])):
                        for k in ('server_cpu_s_per_gb', 'server_core_pct', 'client_cpu_s_per_gb',
                                  'client_core_pct', 'write_mean_us'):
                            row.extra['%s_%s' % (side, k)] = [x.get(k) for x in r]
                    med = mmm(row.ratios())[1]
                    row.met = med >= (2.0 if size >= 2 * MIB else 1.0)
                    row.met_note = '%.2f×' % med
                except BenchError as e:
                    row.error = str(e)
                rows.append(row)
    finally:
        pion.stop()
        redis.stop()
    return rows


def suite_cluster(ctx):
    """pion.so (the Redis module, docs/cluster.md) against pion-server and plain Redis.

    1 MiB and 16 MiB V.FETCH FMT NATIVE (fp16 rows) on one redis-server with pion.so vs
    the same on pion-server, and vs GET of the same bytes on plain redis-server; then the
    aggregate V.FETCH throughput of 8 clients spread over 3 module nodes (what a cluster
    client does with the keys of 3 primaries' slots: each connection talks to the node
    owning its key) vs the same 8 clients on 1 node. The nodes run standalone (slot
    routing is client-side); the 3-node row leaves the servers unpinned.
    """
    rows = []
    sizes, dur = ([MIB], 0.3) if ctx.smoke else ([MIB, 16 * MIB], 2.0)
    mod, pion, redis = ctx.start_redis_module(), ctx.start_pion(), ctx.start_redis()
    try:
        for size in sizes:
            kw = dict(clients=1, payload=size, duration=dur, kv_dim=1024, vquant='fp16',
                      in_fmt='F16', out_fmt='NATIVE', ns='c%d' % size)
            for peer, peer_name in ((pion, 'pion-server V.FETCH'), (redis, 'redis GET')):
                row = Row('cluster', 'pion.so V.FETCH FMT NATIVE %s ×1 client' % size_name(size),
                          'B/s', peer_name, '— (measured: the cost of the module)')
                try:
                    res = interleaved(ctx, [
                        lambda: pion_bench(ctx, mod, 'fetch', **kw),
                        lambda: (pion_bench(ctx, peer, 'fetch', **kw) if peer is pion else
                                 pion_bench(ctx, peer, 'get', clients=1, payload=size,
                                            duration=dur, ns='c%d' % size))])
                    row.pion = [x['bytes_per_s'] for x in res[0]]
                    row.peer = [x['bytes_per_s'] for x in res[1]]
                    row.extra = {'pion_so_p50_us': [x['p50_us'] for x in res[0]],
                                 'peer_p50_us': [x['p50_us'] for x in res[1]]}
                except BenchError as e:
                    row.error = str(e)
                rows.append(row)
    finally:
        mod.stop()
        pion.stop()
        redis.stop()
    # Aggregate: 8 clients over 3 module nodes vs 8 clients on 1.
    size = MIB
    nodes = [ctx.start_redis_module(core=None) for _ in range(3)]
    try:
        row = Row('cluster', 'pion.so V.FETCH 1 MiB, 8 clients: 3 nodes vs 1 node', 'B/s',
                  '1 node', '— (scale-out; 2-core machine: no spare cores)')
        kw = dict(payload=size, duration=dur, kv_dim=1024, vquant='fp16', in_fmt='F16',
                  out_fmt='NATIVE')

        def three():
            procs = []
            for i, (n, nc) in enumerate(zip(nodes, (3, 3, 2))):
                args = [ctx.tool('pion-bench'), '--port', str(n.port), '--workload', 'fetch',
                        '--clients', str(nc), '--ns', 'agg%d' % i]
                for k, v in kw.items():
                    args += ['--' + k.replace('_', '-'), str(v)]
                procs.append(subprocess.Popen(args, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE))
            total = 0.0
            for p in procs:
                out, err = p.communicate(timeout=600)
                if p.returncode != 0:
                    raise BenchError('pion-bench failed: %s' % err.decode()[-400:])
                line = [ln for ln in out.decode().splitlines() if ln.startswith('{')][-1]
                total += json.loads(line)['bytes_per_s']
            return {'bytes_per_s': total}

        try:
            res = interleaved(ctx, [
                three,
                lambda: pion_bench(ctx, nodes[0], 'fetch', clients=8, ns='one', **kw)])
            row.pion = [x['bytes_per_s'] for x in res[0]]
            row.peer = [x['bytes_per_s'] for x in res[1]]
        except BenchError as e:
            row.error = str(e)
        rows.append(row)
    finally:
        for n in nodes:
            n.stop()
    ctx.notes.append('cluster: pion.so rows compare the module (pion column) with the peer '
                     'named; the module copies each reply into Redis\'s output buffer')
    return rows


def suite_persist(ctx):
    """WAL throughput (everysec, always) vs redis AOF and the disk; restart of a
    mapped snapshot vs cat (bench/persist_suite.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import persist_suite
    return persist_suite.suite(ctx, sys.modules[__name__])


SUITE_FNS = {'small': suite_small, 'bulk': suite_bulk, 'membership': suite_membership,
             'quant': suite_quant, 'formats': suite_formats,
             'attend': suite_attend_all, 'strings': suite_strings,
             'cluster': suite_cluster, 'persist': suite_persist}


# ------------------------------------------------------------------ report

def unit_fmt(unit):
    if unit == 'B/s':
        return lambda x: '%.2f GB/s' % (x / 1e9) if x >= 1e8 else '%.0f MB/s' % (x / 1e6)
    if unit == 'ops/s':
        return lambda x: fmt_num(x)
    if unit == 'µs':
        return lambda x: '%.1f µs' % x
    if unit == 'Gelem/s':
        return lambda x: '%.2f' % x
    if unit == 'B':
        return lambda x: '%.1f B' % x
    if unit == 'x':
        return lambda x: '%.2f×' % x
    return fmt_num


def render_md(rows, meta):
    L = []
    L.append('# pion bench: %s (%s)' % (meta['date'], meta['sha']))
    L.append('')
    L.append('Machine: %s; %s. Server core %s, load-generator core %s; pion-server %s. '
             'Repetitions: %d (cells: median (min–max)). Ratio = pion\'s advantage '
             '(> 1 is better: throughput pion/peer, latency peer/pion). '
             'Noise on this shared machine is ±30%%, up to 2× with other jobs running; '
             'load average at start %s, at end %s.' % (
                 meta['cpu'], meta['kernel'], meta['server_core'], meta['client_core'],
                 meta['pion_args'], meta['reps'], meta['load_start'], meta['load_end']))
    L.append('')
    for suite in SUITES:
        srows = [r for r in rows if r.suite == suite]
        if not srows:
            continue
        L.append('## %s' % suite)
        L.append('')
        L.append('| workload | pion | peer | ratio | ceiling | % of ceiling | target '
                 '| met |')
        L.append('|---|---|---|---|---|---|---|---|')
        for r in srows:
            f = unit_fmt(r.unit)
            if r.error:
                L.append('| %s | ERROR | | | | | %s | **error**: %s |' % (
                    r.workload, r.target, r.error.replace('|', '/').replace('\n', ' ')[:300]))
                continue
            met = {True: 'yes', False: '**NO**', None: '—'}[r.met]
            if r.met_note:
                met += ' (%s)' % r.met_note
            ceiling = ('%s: %s' % (r.ceiling_name, fmt_mmm(r.ceiling, f))) if r.ceiling else '—'
            L.append('| %s | %s | %s: %s | %s | %s | %s | %s | %s |' % (
                r.workload, fmt_mmm(r.pion, f), r.peer_name, fmt_mmm(r.peer, f),
                fmt_mmm(r.ratios(), fmt_ratio), ceiling, fmt_mmm(r.pct_ceiling(), fmt_pct),
                r.target, met))
        L.append('')
        extra_lines = detail_lines(srows)
        if extra_lines:
            L += extra_lines + ['']
    below = [r for r in rows if r.met is False]
    errs = [r for r in rows if r.error]
    L.append('## Below target')
    L.append('')
    if not below and not errs:
        L.append('None.')
    for r in below:
        t = mmm(r.ratios())
        L.append('- %s / %s: ratio %s — %s (target %s)' % (
            r.suite, r.workload, fmt_ratio(t[1]) if t else '—', r.met_note, r.target))
    for r in errs:
        L.append('- %s / %s: ERROR %s' % (r.suite, r.workload, r.error[:300]))
    if meta['notes']:
        L.append('')
        L.append('## Notes')
        L.append('')
        for n in meta['notes']:
            L.append('- ' + n)
    L.append('')
    return '\n'.join(L)


def detail_lines(srows):
    out = []
    for r in srows:
        if not r.extra or r.error:
            continue
        parts = []
        for k, v in r.extra.items():
            if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
                parts.append('%s %s' % (k, fmt_mmm(v)))
            elif isinstance(v, (int, float)):
                parts.append('%s %s' % (k, fmt_num(v)))
        if parts:
            out.append('- %s: %s' % (r.workload, '; '.join(parts)))
    if out:
        out.insert(0, 'Latency and other details (median (min–max)):')
        out.insert(1, '')
    return out


def render_chart(rows, path, title):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return 'matplotlib not installed: no chart'

    def charted(r):
        if r.error or not r.ratios() or r.unit == 'B':
            return False
        return r.suite != 'quant' or r.workload.endswith('dim 1024')
    sel = [r for r in rows if charted(r)]
    if not sel:
        return 'no ratios to chart'
    items = [(r.suite + ': ' + r.workload, mmm(r.ratios()), r.met) for r in sel][::-1]
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(items) + 1.6))
    names = [i[0] for i in items]
    med = [i[1][1] for i in items]
    lo = [i[1][1] - i[1][0] for i in items]
    hi = [i[1][2] - i[1][1] for i in items]
    colors = [{True: '#3a7', False: '#c44', None: '#999'}[i[2]] for i in items]
    # Bars grow from 1.0 (parity) towards the ratio, on a log axis.
    ax.barh(range(len(items)), [m - 1.0 for m in med], left=1.0, color=colors,
            xerr=[lo, hi], ecolor='#333', capsize=2)
    ax.legend(handles=[Patch(color='#3a7', label='meets its target'),
                       Patch(color='#c44', label='below its target'),
                       Patch(color='#999', label='no target (info)')],
              loc='best', fontsize=7, framealpha=0.9)
    ax.axvline(1.0, color='k', lw=0.8)
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels(names, fontsize=7)
    ax.set_xscale('log')
    ax.set_xlabel("pion's advantage over the peer (median, min–max; > 1 is better)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def git_sha():
    try:
        return subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return 'nogit'


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return '%s × %d' % (line.split(':', 1)[1].strip(), os.cpu_count())
    except OSError:
        pass
    return '%d cores' % os.cpu_count()


def cpu_busy(interval=1.0):
    """Fraction of all cores busy over `interval` seconds (/proc/stat)."""
    def snap():
        with open('/proc/stat') as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        return sum(v[:8]) - idle, sum(v[:8])
    b0, t0 = snap()
    time.sleep(interval)
    b1, t1 = snap()
    return (b1 - b0) / max(1, t1 - t0)


def wait_idle(max_wait, threshold=0.15):
    """Waits up to max_wait s for the machine to be mostly idle; returns the
    last busy fraction seen (other jobs' load makes every number noisier)."""
    deadline = time.time() + max_wait
    busy = cpu_busy(0.5)
    while busy > threshold and time.time() < deadline:
        busy = cpu_busy(1.0)
    return busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default='build/release', help='build dir (bin/ inside)')
    ap.add_argument('--suite', action='append', choices=SUITES,
                    help='run only this suite (repeatable)')
    ap.add_argument('--smoke', action='store_true',
                    help='tiny sizes, one repetition, results in a temp dir, < 60 s')
    ap.add_argument('--reps', type=int, default=3, help='repetitions (default 3)')
    ap.add_argument('--out', help='results dir (default bench/results; smoke: a temp dir)')
    ap.add_argument('--no-pin', action='store_true', help='do not pin to cores')
    ap.add_argument('--pion-workers', type=int,
                    help='pion-server --workers (default 1 when pinned to one core)')
    ap.add_argument('--pion-arg', action='append', default=[],
                    help='extra pion-server argument (repeatable)')
    ap.add_argument('--quant-filter', help='bench_quant --benchmark_filter')
    ap.add_argument('--persist-gib', type=float, default=1.0,
                    help='persist suite: snapshot size for the restart row (GiB)')
    ap.add_argument('--persist-skip-wal', action='store_true',
                    help='persist suite: only the restart row')
    ap.add_argument('--persist-skip-restart', action='store_true',
                    help='persist suite: only the WAL rows')
    ap.add_argument('--wait-idle', type=float,
                    help='seconds to wait for an idle machine before each suite '
                         '(default 30; smoke 0)')
    args = ap.parse_args()
    if args.reps < 1:
        ap.error('--reps must be >= 1')
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    suites = args.suite or SUITES
    tmp = tempfile.mkdtemp(prefix='pion-bench-')
    ctx = Ctx(args, tmp)
    here = os.path.dirname(os.path.abspath(__file__))
    if args.out:
        out_dir = args.out
    elif args.smoke:
        out_dir = os.path.join(tmp, 'results')
    else:
        out_dir = os.path.join(here, 'results')
    os.makedirs(out_dir, exist_ok=True)
    load_start = '%.2f' % os.getloadavg()[0]
    t0 = time.time()
    rows = []
    failed = False
    try:
        for s in suites:
            ts = time.time()
            wait = args.wait_idle if args.wait_idle is not None else (0 if args.smoke else 30)
            busy = wait_idle(wait) if wait > 0 else cpu_busy(0.2)
            ctx.notes.append('suite %s started with the machine %.0f%% busy (other jobs)'
                             % (s, 100 * busy))
            print('== suite %s (machine %.0f%% busy before)' % (s, 100 * busy),
                  file=sys.stderr, flush=True)
            try:
                srows = SUITE_FNS[s](ctx)
            except BenchError as e:
                r = Row(s, '(suite)', '', '', '—')
                r.error = str(e)
                srows = [r]
            finally:
                PROCS.stop_all()
            for r in srows:
                line = '%-60s %s' % (r.workload, 'ERROR ' + r.error if r.error else
                                     'ratio %s met=%s %s' % (
                                         fmt_mmm(r.ratios(), fmt_ratio), r.met, r.met_note))
                print('   ' + line, file=sys.stderr, flush=True)
            print('   (%.1f s)' % (time.time() - ts), file=sys.stderr, flush=True)
            rows += srows
    except KeyboardInterrupt:
        print('interrupted: stopping servers', file=sys.stderr)
        PROCS.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        return 130
    finally:
        PROCS.stop_all()

    sha = git_sha()
    date = datetime.date.today().isoformat()
    meta = {
        'date': date, 'sha': sha, 'cpu': cpu_name(), 'kernel': os.uname().release,
        'server_core': ctx.server_core, 'client_core': ctx.client_core,
        'pion_args': '--kvcache --appendonly no' + (
            ' --workers %d' % ctx.pion_workers if ctx.pion_workers else '') +
        (' ' + ' '.join(args.pion_arg) if args.pion_arg else ''),
        'reps': ctx.reps, 'load_start': load_start,
        'load_end': '%.2f' % os.getloadavg()[0], 'notes': list(ctx.notes),
        'seconds': round(time.time() - t0, 1), 'suites': suites, 'smoke': args.smoke,
    }
    name = '%s-%s' % (date, sha)
    if args.suite and not args.smoke:
        name += '-' + '-'.join(args.suite)
    base = os.path.join(out_dir, name)
    chart_err = None
    if not args.smoke:
        chart_err = render_chart(rows, base + '.png', 'pion vs peers, %s %s' % (date, sha))
        if chart_err:
            meta['notes'].append(chart_err)
    with open(base + '.md', 'w') as f:
        f.write(render_md(rows, meta))
    with open(base + '.json', 'w') as f:
        json.dump({'meta': meta, 'rows': [r.to_json() for r in rows]}, f, indent=1)
    print('wrote %s.md%s (%.0f s)' % (base, '' if args.smoke or chart_err else ' and .png',
                                      time.time() - t0), file=sys.stderr)
    failed = any(r.error for r in rows)
    if args.smoke:
        sys.stdout.write(render_md(rows, meta))
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    finally:
        PROCS.stop_all()
