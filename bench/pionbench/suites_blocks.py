"""Suite blocks: the block commands the engine adapters use (KV.BLOCK.MATCH, KV.BLOCK.CHAIN,
MGET), the KV-event publisher's cost, and PUBLISH with a pattern subscriber, each against
redis-server (or against pion itself without the feature) in the same run.

The clients here are Python over raw sockets with every request encoded once before the
timed loop (pion._resp), and every reply received whole into a preallocated buffer and
compared byte for byte outside the timed part: the loop costs a few microseconds per
request for either server, and parses nothing (1,562 EXISTS replies are 6,248 bytes
compared at once, not 1,562 parsed replies)."""

import hashlib
import os
import socket
import threading
import time
from contextlib import contextmanager

from pion import _resp
from pion.testing import free_port

from .harness import MIB, BenchError, Resp, Row, interleaved, mmm, pct, redis_benchmark

MATCH_KEYS = 1562          # the membership probe's size: one 25k-token prompt in 16-token blocks
CHAIN_BLOCKS = 32
CHAIN_BLOCK = 2 * MIB


def block_names(n, tag):
    """n distinct 64-byte key names (sha256 hex), as an engine's hash-named blocks."""
    return [hashlib.sha256(b'%s:%d' % (tag.encode(), i)).hexdigest().encode() for i in range(n)]


def aligned(n, offset=2048):
    """A writable n-byte buffer starting `offset` bytes into a page (as pion-bench's
    buffers: away from the kernel copy's slow case for a source and destination a few
    bytes apart modulo 4 KiB)."""
    import numpy as np
    a = np.empty(n + 8192, dtype=np.uint8)
    start = (offset - a.ctypes.data) % 4096
    return memoryview(a[start:start + n]).cast('B')


@contextmanager
def on_client_core(ctx):
    """Pins the calling thread to the load generator's core while the block runs."""
    if ctx.client_core is None:
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {ctx.client_core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def raw_connect(port, timeout=10.0):
    s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock, mv):
    got = 0
    n = len(mv)
    while got < n:
        try:
            k = sock.recv_into(mv[got:])
        except socket.timeout:
            raise BenchError('reply incomplete after the timeout: %r' % bytes(mv[:min(got, 200)]))
        if not k:
            raise BenchError('server closed the connection: %r' % bytes(mv[:min(got, 200)]))
        got += k


def latency_loop(port, request, reply, duration, min_iters=50):
    """Sends `request` and receives exactly len(reply) bytes, over and over for
    `duration` seconds (at least `min_iters` times); each reply must equal `reply`.
    Per-request latency in µs: p50, p99, and the count."""
    s = raw_connect(port)
    buf = bytearray(len(reply))
    mv = memoryview(buf)
    samples = []
    try:
        for _ in range(20):  # warm-up
            s.sendall(request)
            recv_exact(s, mv)
        if buf != reply:
            raise BenchError('unexpected reply %r (want %r)' % (bytes(buf[:120]), reply[:120]))
        end = time.perf_counter() + duration
        clock = time.perf_counter_ns
        while time.perf_counter() < end or len(samples) < min_iters:
            t0 = clock()
            s.sendall(request)
            recv_exact(s, mv)
            t1 = clock()
            samples.append((t1 - t0) / 1000.0)
            if buf != reply:
                raise BenchError('unexpected reply %r' % bytes(buf[:120]))
    finally:
        s.close()
    return {'p50_us': pct(samples, 50), 'p99_us': pct(samples, 99), 'n': len(samples)}


def pipelined_set(port, pairs):
    """SETs every (key, value) in one pipeline; every reply must be +OK."""
    c = Resp(port)
    try:
        c.sock.sendall(_resp.encode_many([('SET', k, v) for k, v in pairs]))
        for k, _ in pairs:
            r = c.read()
            if r != ('status', 'OK'):
                raise BenchError('SET %r: %r' % (k[:40], r))
    finally:
        c.close()


class _IntoBuffers(_resp.SocketReader):
    """Bulks go, in order, into the buffers of `self.bufs` (each must have the size)."""

    bufs = ()
    i = 0

    def alloc(self, n):
        b = self.bufs[self.i]
        self.i += 1
        if len(b) != n:
            raise BenchError('a value of %d bytes, expected %d' % (n, len(b)))
        return b


def write_read_loop(port, write_parts, keys, values, iters):
    """Per iteration: one write command (pre-encoded `write_parts`, answered +OK) and
    one MGET of `keys` received into preallocated buffers; the seconds of each."""
    s = raw_connect(port, timeout=60)
    rd = _IntoBuffers(s)
    rd.bufs = [aligned(len(v)) for v in values]
    mget = _resp.encode('MGET', *keys)
    wt, rt = [], []
    try:
        for it in range(iters + 1):  # the first one warms up
            t0 = time.perf_counter()
            for p in write_parts:
                s.sendall(p)
            r = rd.read()
            t1 = time.perf_counter()
            if r != b'OK':
                raise BenchError('write: %r' % (r,))
            rd.i = 0
            s.sendall(mget)
            r = rd.read()
            t2 = time.perf_counter()
            if not isinstance(r, list) or len(r) != len(keys):
                raise BenchError('MGET: %r' % (r,)[:200])
            if it in (0, iters):
                for j, v in enumerate(values):
                    if rd.bufs[j] != v:
                        raise BenchError('MGET: value %d differs from what was written' % j)
            if it:
                wt.append(t1 - t0)
                rt.append(t2 - t1)
    finally:
        s.close()
    return {'write_s': sorted(wt)[len(wt) // 2], 'read_s': sorted(rt)[len(rt) // 2]}


class ZmqDrain:
    """A pyzmq SUB that binds `endpoint` (pion connects to it, as to llm-d's indexer) and
    a thread that receives and counts every message until close().

    `core`: the core its threads run on (the drain thread and ZeroMQ's I/O thread, which
    inherit the creating thread's affinity). The subscriber stands for a consumer on
    another machine, so it goes with the load generator: left to the scheduler, its
    receive work (a Python call per batch, about a seventh of the worker's CPU time in
    the CHAIN row) lands on the server's core in the events-on runs only."""

    def __init__(self, endpoint, core=None):
        import zmq
        self.zmq = zmq
        old = os.sched_getaffinity(0) if core is not None else None
        if core is not None:
            os.sched_setaffinity(0, {core})
        try:
            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.SUB)
            self.sock.setsockopt(zmq.SUBSCRIBE, b'')
            self.sock.bind(endpoint)
            self.messages = 0
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name='kv-events-drain',
                                            daemon=True)
            self._thread.start()
        finally:
            if old is not None:
                os.sched_setaffinity(0, old)

    def _run(self):
        zmq = self.zmq
        while not self._stop.is_set():
            if not self.sock.poll(100):
                continue
            while True:
                try:
                    self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.messages += 1

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close(linger=0)
        self.ctx.term()


class PatternDrain:
    """A raw RESP connection subscribed with PSUBSCRIBE `pattern` and a thread that reads
    and counts every byte it is sent until close(). With `lowat` (bytes), the socket's
    SO_RCVLOWAT: the kernel wakes the reader once that much has arrived (or its 0.2 s
    timeout passes), as a consumer reading in chunks does, instead of once per write."""

    def __init__(self, port, pattern, lowat=None):
        self.sock = raw_connect(port)
        self.sock.sendall(_resp.encode('PSUBSCRIBE', pattern))
        want = b'*3\r\n$10\r\npsubscribe\r\n$%d\r\n%s\r\n:1\r\n' % (len(pattern), pattern)
        got = bytearray(len(want))
        recv_exact(self.sock, memoryview(got))
        if got != want:
            raise BenchError('PSUBSCRIBE: %r' % bytes(got))
        self.lowat = lowat
        if lowat:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
        self.sock.settimeout(0.2)
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='psub-drain', daemon=True)
        self._thread.start()

    def _run(self):
        buf = bytearray(1 << 20)
        while not self._stop.is_set():
            try:
                k = self.sock.recv_into(buf)
            except socket.timeout:
                if not self.lowat:
                    continue
                # Less than the low-water mark arrived in 0.2 s: take that tail.
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
                    k = self.sock.recv_into(buf)
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, self.lowat)
                except socket.timeout:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, self.lowat)
                    continue
                except OSError:
                    return
            except OSError:
                return
            if not k:
                return
            self.bytes += k

    def wait_for(self, total, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.bytes < total and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.bytes

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def server_threads(server):
    """(tid, name) of every thread of `server`'s process (one that ends meanwhile is
    left out)."""
    pid = server.proc.pid
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/comm' % (pid, tid)) as f:
                yield int(tid), f.read().strip()
        except OSError:
            continue


def worker_cpu_ns(server):
    """CPU nanoseconds so far of `server`'s first worker thread (pion-w0), from
    /proc/<pid>/task/<tid>/schedstat."""
    pid = server.proc.pid
    for tid, name in server_threads(server):
        if name != 'pion-w0':
            continue
        try:
            with open('/proc/%d/task/%d/schedstat' % (pid, tid)) as f:
                return int(f.read().split()[0])
        except OSError:
            break
    raise BenchError('no pion-w0 thread in pion-server %d' % pid)


def info_fields(port, section='all'):
    c = Resp(port)
    try:
        r = c.call('INFO', section)
    finally:
        c.close()
    out = {}
    if r[0] == 'bulk':
        for line in r[1].decode(errors='replace').splitlines():
            if ':' in line and not line.startswith('#'):
                k, v = line.split(':', 1)
                out[k.strip()] = v.strip()
    return out


def judge(row, ok, note):
    row.met = ok
    row.met_note = note


# ------------------------------------------------------------------ the suite

def suite_blocks(ctx):
    """MATCH latency, CHAIN/MGET bandwidth, the KV-event publisher's cost, PUBLISH."""
    rows = []
    rows += match_rows(ctx)
    rows += chain_rows(ctx)
    rows += events_rows(ctx)
    rows += event_latency_rows(ctx)
    rows.append(publish_row(ctx))
    rows.append(notify_row(ctx))
    return rows


def match_rows(ctx):
    dur = 0.3 if ctx.smoke else 3.0
    keys = block_names(MATCH_KEYS, 'match')
    match_req = _resp.encode('KV.BLOCK.MATCH', len(keys), *keys)
    exists_req = _resp.encode_many([('EXISTS', k) for k in keys])
    set_req = _resp.encode('SET', 'match-sized', b'v' * len(match_req))
    r_pipe = Row('blocks', 'KV.BLOCK.MATCH of 1,562 keys (64 B names), 1 client: p50', 'µs',
                 'redis 1,562 EXISTS, one pipeline, p50', '≤ 1/4 of the pipeline (≥ 4×)',
                 higher_better=False)
    r_set = Row('blocks', 'KV.BLOCK.MATCH of 1,562 keys vs a SET as long as the request: p50',
                'µs', 'pion SET of %s B p50' % format(len(match_req), ','),
                'within 50 µs of the SET', higher_better=False)
    pion, redis = ctx.start_pion(), ctx.start_redis()
    try:
        pairs = [(k, b'x' * 16) for k in keys]
        pipelined_set(pion.port, pairs)
        pipelined_set(redis.port, pairs)
        with on_client_core(ctx):
            res = interleaved(ctx, [
                lambda: latency_loop(pion.port, match_req, b':%d\r\n' % len(keys), dur),
                lambda: latency_loop(redis.port, exists_req, b':1\r\n' * len(keys), dur),
                lambda: latency_loop(pion.port, set_req, b'+OK\r\n', dur)])
        pion.check_alive()
        r_pipe.pion = r_set.pion = [x['p50_us'] for x in res[0]]
        r_pipe.peer = [x['p50_us'] for x in res[1]]
        r_set.peer = [x['p50_us'] for x in res[2]]
        r_pipe.extra = {'pion_p99_us': [x['p99_us'] for x in res[0]],
                        'peer_p99_us': [x['p99_us'] for x in res[1]],
                        'match_request_bytes': len(match_req),
                        'exists_pipeline_bytes': len(exists_req)}
        diffs = [a - b for a, b in zip(r_set.pion, r_set.peer)]
        r_set.extra = {'p50_diff_us': diffs, 'set_p99_us': [x['p99_us'] for x in res[2]]}
        ratio = mmm(r_pipe.ratios())[1]
        judge(r_pipe, ratio >= 4.0, '%.2f× (MATCH at %.0f%% of the pipeline)' % (ratio, 100 / ratio))
        d = mmm(diffs)[1]
        judge(r_set, d <= 50.0, 'p50 %+.1f µs vs the SET' % d)
    except BenchError as e:
        r_pipe.error = r_set.error = str(e)
    finally:
        pion.stop()
        redis.stop()
    return [r_pipe, r_set]


def chain_rows(ctx):
    n = 4 if ctx.smoke else CHAIN_BLOCKS
    size = 256 * 1024 if ctx.smoke else CHAIN_BLOCK
    iters = 2 if ctx.smoke else 8
    label = '%d × %s' % (n, '256 KiB' if ctx.smoke else '2 MiB')
    keys = block_names(n, 'chain')
    values = []
    for i in range(n):
        v = aligned(size)
        v[:] = os.urandom(size)
        values.append(v)
    hashes = b''.join((0x1000 + i).to_bytes(8, 'little') for i in range(n))
    pairs = [x for kv in zip(keys, values) for x in kv]
    chain_parts = _resp.encode_parts('KV.BLOCK.CHAIN', 'HASHES', hashes, 'TOKENS', 16, *pairs)
    mset_parts = _resp.encode_parts('MSET', *pairs)
    total = n * size
    rw = Row('blocks', 'KV.BLOCK.CHAIN of %s (one command), 1 client' % label, 'B/s',
             'redis MSET', '≥ 1.0×')
    rr = Row('blocks', 'MGET of the %s chain, 1 client' % label, 'B/s', 'redis MGET', '≥ 1.0×')
    pion, redis = ctx.start_pion(), ctx.start_redis()
    try:
        with on_client_core(ctx):
            res = interleaved(ctx, [
                lambda: write_read_loop(pion.port, chain_parts, keys, values, iters),
                lambda: write_read_loop(redis.port, mset_parts, keys, values, iters)])
        pion.check_alive()
        rw.pion = [total / x['write_s'] for x in res[0]]
        rw.peer = [total / x['write_s'] for x in res[1]]
        rr.pion = [total / x['read_s'] for x in res[0]]
        rr.peer = [total / x['read_s'] for x in res[1]]
        rw.extra = {'pion_ms': [1e3 * x['write_s'] for x in res[0]],
                    'peer_ms': [1e3 * x['write_s'] for x in res[1]]}
        rr.extra = {'pion_ms': [1e3 * x['read_s'] for x in res[0]],
                    'peer_ms': [1e3 * x['read_s'] for x in res[1]]}
        for r in (rw, rr):
            ratio = mmm(r.ratios())[1]
            judge(r, ratio >= 1.0, '%.2f×' % ratio)
    except BenchError as e:
        rw.error = rr.error = str(e)
    finally:
        pion.stop()
        redis.stop()
    return [rw, rr]


def chain_bench_cmd(pairs=4, value=1024):
    """redis-benchmark's command line for KV.BLOCK.CHAIN of `pairs` random keys of
    `value` bytes with HASHES (bytes without a NUL, as argv needs) and TOKENS."""
    cmd = ['-r', '10000', 'KV.BLOCK.CHAIN', 'HASHES', 'A' * 8 * pairs, 'TOKENS', '16']
    for i in range(pairs):
        cmd += ['ev%d:__rand_int__' % i, 'x' * value]
    return cmd


def wait_subscribed(port, drain, timeout=15.0):
    """Returns once the subscriber receives pion's KV events (ZeroMQ's slow joiner: what
    is published before the connection is up is lost): re-registers a namespace with a
    one-hash BLOCKS table (each one a BlockRemoved and a BlockStored) until a batch
    arrives."""
    c = Resp(port)
    try:
        deadline = time.monotonic() + timeout
        i = 0
        while drain.messages == 0:
            if time.monotonic() > deadline:
                raise BenchError('the KV-event subscriber received nothing in %.0f s' % timeout)
            i += 1
            c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', 'events-sync', 8, 'fp16',
                     'BLOCKS', 16, 1, (0x5000 + i).to_bytes(8, 'little'))
            time.sleep(0.05)
    finally:
        c.close()


def register_bench_cmd(hashes=16):
    """redis-benchmark's command line re-registering one of 10,000 namespaces with a
    BLOCKS table of `hashes` hashes (each one a BlockRemoved and a BlockStored once the
    namespace exists): the KV events pion publishes today under load."""
    return ['-r', '10000', 'KV.PREFIX.REGISTER', 'evns:__rand_int__', '8', 'fp16', 'BLOCKS',
            '16', str(hashes), 'B' * 8 * hashes]


def move_side_threads(server, core):
    """Moves every thread of `server` but its workers (pion-w*) to `core`: the KV-event
    publisher, ZeroMQ's I/O thread and the background pool then share the load
    generator's core instead of the worker's. Returns the names moved."""
    moved = []
    for tid, name in server_threads(server):
        if name.startswith('pion-w'):
            continue
        try:
            os.sched_setaffinity(tid, {core})
        except OSError:  # the thread ended in between
            continue
        moved.append(name)
    return sorted(moved)


def events_rows(ctx):
    """Events on vs off: KV.BLOCK.CHAIN with HASHES (the contract's row), and
    KV.PREFIX.REGISTER with BLOCKS (what publishes events in every build); each with the
    whole server on the server core, then with only its worker there (the publisher's
    and ZeroMQ's threads on the other core, as a server with a core to spare has them)."""
    n = 2000 if ctx.smoke else 100000
    work = [
        ('KV.BLOCK.CHAIN 4 × 1 KiB with HASHES', 'KV.BLOCK.CHAIN', chain_bench_cmd()),
        ('KV.PREFIX.REGISTER with 16 BLOCKS hashes', 'KV.PREFIX.REGISTER',
         register_bench_cmd()),
    ]
    rows = [Row('blocks', '%s, redis-benchmark 50 clients: KV events on, 1 SUB draining' % w[0],
                'ops/s', 'events off (same pion)', '≥ 0.95×') for w in work]
    split = ctx.server_core is not None and ctx.client_core is not None
    if split:
        rows += [Row('blocks', '%s, redis-benchmark 50 clients: KV events on, 1 SUB draining; '
                     'worker alone on its core' % w[0], 'ops/s', 'events off (same pion)',
                     '≥ 0.95×') for w in work]
    zport = free_port()
    try:
        drain = ZmqDrain('tcp://127.0.0.1:%d' % zport, core=ctx.client_core)
    except ImportError as e:  # pyzmq (python3-zmq) missing
        for row in rows:
            row.error = 'no ZeroMQ subscriber: %s' % e
        return rows
    on = off = None
    try:
        on = ctx.start_pion(extra=['--kv-events-endpoint', 'tcp://127.0.0.1:%d' % zport])
        off = ctx.start_pion()
        wait_subscribed(on.port, drain)
        for row, (_, name, cmd) in zip(rows, work):
            try:
                events_row(ctx, row, name, cmd, n, on, off, drain)
            except BenchError as e:
                row.error = str(e)
        if split:
            moved = {'on': move_side_threads(on, ctx.client_core),
                     'off': move_side_threads(off, ctx.client_core)}
            for row, (_, name, cmd) in zip(rows[len(work):], work):
                try:
                    events_row(ctx, row, name, cmd, n, on, off, drain)
                    row.extra['threads_moved_events_on'] = ' '.join(moved['on'])
                except BenchError as e:
                    row.error = str(e)
    except BenchError as e:
        for row in rows:
            row.error = row.error or str(e)
    finally:
        for s in (on, off):
            if s is not None:
                s.stop()
        drain.close()
    return rows


def event_latency_rows(ctx):
    """The time from a KV.PREFIX.REGISTER's reply to its BlockStored reaching a subscriber:
    one client registers a fresh namespace with a one-hash BLOCKS table, reads the reply,
    then reads the subscriber's socket (bound here, pion connects) until the batch holding
    that hash arrives. Sequential and idle otherwise, so it measures the publisher's
    batching (`kv-events-batch-us`) and hand-offs, not a queue."""
    row = Row('blocks', 'KV event latency: KV.PREFIX.REGISTER reply to its BlockStored at a '
              'ZeroMQ subscriber, 1 client: p50', 'µs', '—', 'reported (p50, p99)',
              higher_better=False)
    try:
        import msgpack
        import zmq
    except ImportError as e:
        row.error = 'no ZeroMQ subscriber: %s' % e
        return [row]
    n = 50 if ctx.smoke else 1000
    zport = free_port()
    old = os.sched_getaffinity(0)
    if ctx.client_core is not None:
        os.sched_setaffinity(0, {ctx.client_core})
    zctx = zmq.Context()
    sub = zctx.socket(zmq.SUB)
    server = c = None
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b'')
        sub.bind('tcp://127.0.0.1:%d' % zport)
        server = ctx.start_pion(extra=['--kv-events-endpoint', 'tcp://127.0.0.1:%d' % zport])
        c = Resp(server.port)

        def stored_hashes(timeout_ms):
            if not sub.poll(timeout_ms):
                return None
            frames = sub.recv_multipart()
            out = set()
            for ev in msgpack.unpackb(frames[2], raw=False)[1]:
                if ev.get('type') == 'BlockStored':
                    out.update(ev.get('block_hashes') or [])
            return out

        # ZeroMQ's slow joiner: register until a batch arrives, then drain.
        deadline = time.monotonic() + 15
        i = 0
        while stored_hashes(50) is None:
            if time.monotonic() > deadline:
                raise BenchError('the KV-event subscriber received nothing in 15 s')
            i += 1
            c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', 'lat-sync', 8, 'fp16', 'BLOCKS',
                     16, 1, (0x7000 + i).to_bytes(8, 'little'))
        while stored_hashes(20) is not None:
            pass
        for rep in range(ctx.reps):
            lat = []
            for j in range(n):
                h = (rep << 32) | (j + 1) | (1 << 62)
                c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', 'lat:%d:%d' % (rep, j), 8,
                         'fp16', 'BLOCKS', 16, 1, h.to_bytes(8, 'little'))
                t0 = time.perf_counter()
                while True:
                    got = stored_hashes(2000)
                    if got is None:
                        raise BenchError('no BlockStored for hash %#x within 2 s' % h)
                    if h in got:
                        break
                lat.append((time.perf_counter() - t0) * 1e6)
            lat.sort()
            row.pion.append(lat[len(lat) // 2])
            row.peer.append(None)
            row.extra.setdefault('p99_us', []).append(lat[min(len(lat) - 1, int(len(lat) * 0.99))])
        row.extra['registrations_per_rep'] = float(n)
        conf = c.call('CONFIG', 'GET', 'kv-events-batch-us')
        if conf[0] == 'array' and len(conf[1]) == 2:
            row.extra['kv_events_batch_us'] = float(conf[1][1][1])
        p50 = mmm(row.pion)[1]
        p99 = mmm(row.extra['p99_us'])[1]
        judge(row, None, 'p50 %.0f µs, p99 %.0f µs' % (p50, p99))
    except BenchError as e:
        row.error = str(e)
    finally:
        if c is not None:
            c.close()
        if server is not None:
            server.stop()
        sub.close(linger=0)
        zctx.term()
        os.sched_setaffinity(0, old)
    return [row]


def events_row(ctx, row, name, cmd, n, on, off, drain):
    before = drain.messages
    published0 = int(info_fields(on.port).get('kv_events_published', 0) or 0)
    res = interleaved(ctx, [lambda: redis_benchmark(ctx, on, n, 1, 50, cmd),
                            lambda: redis_benchmark(ctx, off, n, 1, 50, cmd)])
    row.pion = [x['ops_per_s'] for x in res[0]]
    row.peer = [x['ops_per_s'] for x in res[1]]
    info = info_fields(on.port)
    # Every batch published by now reaches the drain within a few ms (1 ms batching).
    deadline = time.monotonic() + 5
    want = int(info.get('kv_events_batches', 0) or 0) - int(info.get('kv_events_dropped', 0) or 0)
    while drain.messages < want and time.monotonic() < deadline:
        time.sleep(0.01)
    published = int(info.get('kv_events_published', 0) or 0) - published0
    row.extra = {'events_on_p99_ms': [x['p99_ms'] for x in res[0]],
                 'events_off_p99_ms': [x['p99_ms'] for x in res[1]],
                 'messages_received': drain.messages - before,
                 'events_published_during_the_runs': float(published)}
    for k in ('kv_events_batches', 'kv_events_dropped'):
        if k in info:
            row.extra[k] = float(info[k])
    ratio = mmm(row.ratios())[1]
    if published <= 0:
        # Nothing was published: the ratio measures no publisher at all.
        judge(row, False, '%.3f×, but %s published no KV event (kv_events_published '
              'unchanged): nothing measured' % (ratio, name))
    else:
        judge(row, ratio >= 0.95, '%.3f×, %d events, %s batches dropped' % (
            ratio, published, info.get('kv_events_dropped', '?')))


def drained_runs(ctx, servers, drains, n, cmd, frame, core='client', cpu=False):
    """redis-benchmark `cmd` (n requests, 50 clients) on each of `servers` in turn, once
    per repetition. After each run, waits for drains[port] to receive frame[port] bytes
    per request (0: nothing expected) and records the share it got; with `cpu`, the
    server's worker CPU µs per request. Returns each server's results (in `servers`'
    order), and by port the delivered shares and CPU figures."""
    delivered = {s.port: [] for s in servers}
    cpu_us = {s.port: [] for s in servers}

    def run(server):
        d = drains[server.port]
        before = d.bytes
        c0 = worker_cpu_ns(server) if cpu else 0
        x = redis_benchmark(ctx, server, n, 1, 50, cmd, core=core)
        if cpu:
            cpu_us[server.port].append((worker_cpu_ns(server) - c0) / 1000.0 / n)
        want = n * frame[server.port]
        if want:
            delivered[server.port].append((d.wait_for(before + want) - before) / float(want))
        return x

    res = interleaved(ctx, [lambda s=s: run(s) for s in servers])
    return res, delivered, cpu_us


def publish_row(ctx):
    n = 2000 if ctx.smoke else 200000
    payload = 'p' * 64
    channel, pattern = b'news.1', b'news.*'
    frame = len(_resp.encode('pmessage', pattern, channel, payload))  # *4 of 4 bulks
    row = Row('blocks', 'PUBLISH 64 B, redis-benchmark 50 clients, 1 PSUBSCRIBE draining '
              '(pion default workers, nothing pinned)', 'ops/s', 'redis PUBLISH', '≥ 1.0×')
    pion = ctx.start_pion(workers=None, core=None)
    redis = ctx.start_redis(core=None)
    drains = {}
    try:
        drains = {s.port: PatternDrain(s.port, pattern) for s in (pion, redis)}
        res, delivered, _ = drained_runs(
            ctx, (pion, redis), drains, n, ['PUBLISH', channel.decode(), payload],
            {pion.port: frame, redis.port: frame}, core=None)
        row.pion = [x['ops_per_s'] for x in res[0]]
        row.peer = [x['ops_per_s'] for x in res[1]]
        row.extra = {'pion_p99_ms': [x['p99_ms'] for x in res[0]],
                     'peer_p99_ms': [x['p99_ms'] for x in res[1]],
                     'pion_delivered_fraction': delivered[pion.port],
                     'peer_delivered_fraction': delivered[redis.port]}
        ratio = mmm(row.ratios())[1]
        full = min(delivered[pion.port]) >= 1.0
        judge(row, ratio >= 1.0 and full, '%.3f×%s' % (
            ratio, '' if full else ', NOT every message reached the subscriber'))
    except BenchError as e:
        row.error = str(e)
    finally:
        for d in drains.values():
            d.close()
        pion.stop()
        redis.stop()
    return row


def notify_row(ctx):
    """SET throughput with keyspace notifications on (notify-keyspace-events KEA: two
    messages per SET) and one PSUBSCRIBE __key* connection receiving all of them, against
    the same pion with notifications off (an idle subscriber on the same pattern). The
    subscriber reads in chunks (SO_RCVLOWAT 64 KiB) on the load generator's core, where a
    consumer on another machine would not take CPU from either side; the worker's CPU time
    per SET is reported beside the rate, since here the load generator bounds the rate."""
    n = 2000 if ctx.smoke else 200000
    pattern = b'__key*'
    key = 'key:%012d' % 0  # redis-benchmark's __rand_int__: 12 digits
    per_set = (len(_resp.encode('pmessage', pattern, '__keyspace@0__:' + key, 'set')) +
               len(_resp.encode('pmessage', pattern, '__keyevent@0__:set', key)))
    cmd = ['-r', '100000', 'SET', 'key:__rand_int__', 'v' * 64]
    row = Row('blocks', 'SET 64 B, redis-benchmark 50 clients: keyspace notifications on '
              '(KEA, 1 PSUBSCRIBE __key* receiving every message)', 'ops/s',
              'notifications off (same pion)', '≥ 0.95×')
    on = ctx.start_pion(extra=['--notify-keyspace-events', 'KEA'])
    off = ctx.start_pion()
    drains = {}
    try:
        with on_client_core(ctx):  # the drain threads inherit the client core
            drains = {s.port: PatternDrain(s.port, pattern, lowat=64 * 1024) for s in (on, off)}
        res, delivered, cpu = drained_runs(ctx, (on, off), drains, n, cmd,
                                           {on.port: per_set, off.port: 0}, cpu=True)
        row.pion = [x['ops_per_s'] for x in res[0]]
        row.peer = [x['ops_per_s'] for x in res[1]]
        row.extra = {'on_p99_ms': [x['p99_ms'] for x in res[0]],
                     'off_p99_ms': [x['p99_ms'] for x in res[1]],
                     'on_worker_cpu_us_per_set': cpu[on.port],
                     'off_worker_cpu_us_per_set': cpu[off.port],
                     'delivered_fraction': delivered[on.port],
                     'off_subscriber_bytes': float(drains[off.port].bytes)}
        ratio = mmm(row.ratios())[1]
        cpu_ratio = mmm(cpu[on.port])[1] / mmm(cpu[off.port])[1]
        full = min(delivered[on.port]) >= 1.0 and drains[off.port].bytes == 0
        judge(row, ratio >= 0.95 and full, '%.3f×, worker CPU per SET %.2f× of off%s' % (
            ratio, cpu_ratio, '' if full else ', NOT every notification reached the subscriber'))
    except BenchError as e:
        row.error = str(e)
    finally:
        for d in drains.values():
            d.close()
        on.stop()
        off.stop()
    return row
