"""Shared by every suite: processes and pinning, the RESP client, the run context,
result rows and their formatting, and the load generators' drivers."""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time

from pion import _resp
from pion.testing import free_port

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/

SUITES = ['small', 'bulk', 'membership', 'quant', 'formats', 'attend', 'strings', 'cluster',
          'persist', 'blocks', 'adapters', 'tier']
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

    def run_client(self, args, timeout=600, core='client', check=True):
        """Runs a load generator pinned to the client core (or `core`, a core
        number or None); returns stdout (with `check`, a failure is a BenchError)."""
        if core == 'client':
            pin = self.client_pin()
        else:
            pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
        try:
            r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=pin, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError('%s timed out after %d s' % (os.path.basename(args[0]), timeout))
        if check and r.returncode != 0:
            raise BenchError('%s failed (rc %d): %s' % (
                ' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(args[:12])),
                r.returncode, (r.stderr or r.stdout).decode(errors='replace').strip()[-800:]))
        return r.stdout.decode()

    def start_redis(self, core='server'):
        port = free_port()
        d = tempfile.mkdtemp(prefix='redis-', dir=self.tmp)
        p = PROCS.start([self.tool('redis-server'), '--port', str(port),
                         '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                         '--dir', d, '--protected-mode', 'no'],
                        core=self.server_core if core == 'server' else None,
                        log_path=os.path.join(d, 'log'),
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

    def start_pion(self, extra=(), workers='ctx', core='server'):
        """pion-server with persistence off. `extra`: more flags; `workers`: 'ctx'
        (--pion-workers, or 1 when pinned), None (pion's default: one per core) or a
        count; `core`: 'server' (the server core) or None (not pinned)."""
        port = free_port()
        d = tempfile.mkdtemp(prefix='pion-', dir=self.tmp)
        args = [self.tool('pion-server'), '--kvcache', '--port', str(port),
                '--bind', '127.0.0.1', '--dir', d, '--appendonly', 'no']
        if workers == 'ctx':
            workers = self.pion_workers
        if workers:
            args += ['--workers', str(workers)]
        args += list(extra) + self.args.pion_arg
        p = PROCS.start(args, core=self.server_core if core == 'server' else None,
                        log_path=os.path.join(d, 'log'), name='pion-server')
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
        self.unavailable = False  # error is "not available" (an optional part missing): not a failure
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
        if v is True:  # a flag (--fresh)
            args.append('--' + k.replace('_', '-'))
        elif v is not False and v is not None:
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


def _listening(port):
    """Whether a socket listens on 127.0.0.1:`port` (/proc/net/tcp; no connection
    is made, which a one-off iperf3 server would take for its one client)."""
    want = ':%04X' % port
    with open('/proc/net/tcp') as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(want) and fields[3] == '0A':  # 0A: LISTEN
                return True
    return False


def iperf3_run(ctx, seconds, length, streams, sender_on_server_core=False):
    """One iperf3 run on loopback; its JSON report, or None without iperf3. By
    default the receiver (iperf3 -s) is on the server core and the sender on the
    client core; `sender_on_server_core` swaps them. A run iperf3 reports as
    failed (its JSON has "error") is tried once more, on a fresh server."""
    exe = ctx.tool('iperf3', required=False)
    if exe is None:
        return None
    recv_core, send_core = ctx.server_core, ctx.client_core
    if sender_on_server_core:
        recv_core, send_core = send_core, recv_core
    error = None
    for _ in range(2):
        port = free_port()
        srv = PROCS.start([exe, '-s', '-1', '-B', '127.0.0.1', '-p', str(port)],
                          core=recv_core, name='iperf3-server',
                          log_path=os.path.join(ctx.tmp, 'iperf3-server.log'))
        try:
            deadline = time.time() + 5
            while not _listening(port):
                if time.time() > deadline or srv.poll() is not None:
                    raise BenchError('iperf3 server did not start')
                time.sleep(0.02)
            cmd = [exe, '-c', '127.0.0.1', '-p', str(port), '-t', str(seconds), '-P',
                   str(streams), '-J']
            if length:
                cmd += ['-l', str(length)]
            j = json.loads(ctx.run_client(cmd, timeout=seconds + 30, core=send_core,
                                          check=False))
        finally:
            PROCS.stop(srv)
        if 'error' not in j and 'sum_received' in j.get('end', {}):
            return j
        error = j.get('error', 'no end.sum_received in its report')
    raise BenchError('iperf3: %s' % error)


def redis_benchmark(ctx, server, n, pipeline, clients, cmd, core='client'):
    args = [ctx.tool('redis-benchmark'), '-h', '127.0.0.1', '-p', str(server.port),
            '-c', str(clients), '-n', str(n), '-P', str(pipeline), '--csv'] + cmd
    out = ctx.run_client(args, core=core)
    server.check_alive()
    lines = [ln for ln in out.splitlines() if ln.startswith('"') and not ln.startswith('"test"')]
    if not lines:
        raise BenchError('redis-benchmark printed no result: %r' % out[-400:])
    f = [x.strip('"') for x in lines[-1].split('","')]
    return {'ops_per_s': float(f[1]), 'p50_ms': float(f[4]), 'p99_ms': float(f[6])}



def size_name(n):
    if n >= MIB and n % MIB == 0:
        return '%d MiB' % (n // MIB)
    if n >= KIB and n % KIB == 0:
        return '%d KiB' % (n // KIB)
    return '%d B' % n


def pct(vals, p):
    v = sorted(vals)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]
