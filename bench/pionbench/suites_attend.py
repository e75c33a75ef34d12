"""Suite attend: bench_attend kernel rows, the end-to-end rows over loopback and
the fast lane (bench/fastlane_bench.py)."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from pion import _resp

from .harness import (BENCH_DIR, BenchError, PROCS, Resp, Row, Server, free_port, pct, proc_cpu_s,
                      wait_ready)
from . import harness


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

    # PING p99 on the worker that runs another client's 32K-token queries, with
    # attend-threads at its default (the core count: the compute threads and the
    # workers share every core, and the workers must come first).
    n = 4096 if ctx.smoke else 32768
    srv = start_pion_attend(ctx, [])
    try:
        c = Resp(srv.port, timeout=120)
        blob = f16_blob(h * n * d, 7)
        c.expect(('status', 'OK'), 'ATTEND.PREFIX.STORE', 'long', 0, h, n, d, blob, blob,
                 'FMT', 'F16')
        ping = _resp.encode('PING')
        count = 500 if ctx.smoke else 5000
        row = Row('attend', 'PING p99 while another client runs N=%d queries (same worker, '
                  'default attend-threads)' % n,
                  'µs', 'PING p99 idle', '< 2 ms', higher_better=False)
        loader = subprocess.Popen(
            [sys.executable, os.path.join(BENCH_DIR,
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
                lat = Row('attend', 'dense f16 N=2048 latency', 'µs', 'earlier GPU kernel',
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
    sys.path.insert(0, BENCH_DIR)
    import fastlane_bench
    return fastlane_bench.suite(ctx, harness)


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
