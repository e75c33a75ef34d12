#!/usr/bin/python3
"""QUERY_FUSED over the binary fast lane vs over RESP (docs/protocol.md "Binary fast lane"), part of
`make bench SUITE=attend` (bench/run.py calls suite()).

One pion-server (--kvcache, persistence off, one worker, pinned to the server core),
one slot ATTEND.PREFIX.STORE'd with H_kv = 8, N = 2048, D = 128 (f32), and one client
(pinned to the client core) sending the same ATTEND.PREFIX.QUERY_FUSED (H_q = 32,
S_suf = 1, M = 1, head_map h -> h / 4) alternately as a lane frame and as a RESP
command (which goes first alternates), one request in flight, reading exactly the reply's bytes. The replies are
checked equal first. Reported per repetition: p50 and p99 of the request latency
(send to last reply byte) for each protocol; the ratio RESP / lane is the lane's
advantage (target ≥ 1.2 at p50).

By hand: /usr/bin/python3 bench/fastlane_bench.py --build build/release [--iters N]
"""

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from pion import _resp, fastlane  # noqa: E402
from pion.testing import free_port  # noqa: E402

HQ, HKV, D, N, S_SUF, M = 32, 8, 128, 2048, 1, 1
SID = b'lanebench_attn'


def read_exact(sock, buf, n):
    """Exactly n reply bytes into the preallocated buffer (the timed loop parses nothing)."""
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n])
        if k == 0:
            raise RuntimeError('server closed the connection')
        got += k
    return bytes(view[:n])


def measure(port, lane_port, iters, warmup, n=N):
    """The client side (run pinned): returns the latency lists and a correctness flag."""
    import random

    import numpy as np
    rnd = random.Random(7)

    def floats(*shape):
        count = 1
        for x in shape:
            count *= x
        return np.array([rnd.uniform(-1, 1) for _ in range(count)], '<f4').reshape(shape)

    r = socket.create_connection(('127.0.0.1', port))
    r.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    k = floats(HKV, n, D)
    v = floats(HKV, n, D)
    r.sendall(_resp.encode('ATTEND.PREFIX.STORE', SID, 0, HKV, n, D, k, v))
    reply = _resp.SocketReader(r).read()
    if reply != b'OK':
        raise RuntimeError('ATTEND.PREFIX.STORE: %r' % (reply,))
    q = floats(HQ, M, D)
    ks = floats(HKV, S_SUF, D)
    vs = floats(HKV, S_SUF, D)
    head_map = np.array([h * HKV // HQ for h in range(HQ)], np.uint8)
    resp_req = _resp.encode('ATTEND.PREFIX.QUERY_FUSED', SID, 0, HQ, D, S_SUF, HKV, q, ks, vs,
                            head_map)
    lane_req = fastlane.frame(fastlane.OP_QUERY_FUSED,
                              fastlane.query_fused_body(SID, 0, q, ks, vs, head_map))
    out_bytes = HQ * M * D * 4
    resp_len = len(b'$%d\r\n' % out_bytes) + out_bytes + 2
    lane_len = 7 + out_bytes

    lane = socket.create_connection(('127.0.0.1', lane_port))
    lane.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(max(resp_len, lane_len) + 64)

    r.sendall(resp_req)
    got_resp = read_exact(r, buf, resp_len)
    lane.sendall(lane_req)
    got_lane = read_exact(lane, buf, lane_len)
    if got_resp[:1] != b'$' or got_lane[:3] != struct.pack('<HB', fastlane.MAGIC, fastlane.ST_OK):
        raise RuntimeError('unexpected replies: %r / %r' % (got_resp[:80], got_lane[:80]))
    same = got_resp[len(b'$%d\r\n' % out_bytes):-2] == got_lane[7:]

    lat = {'lane': [], 'resp': []}
    pair = (('lane', lane, lane_req, lane_len), ('resp', r, resp_req, resp_len))
    for i in range(warmup + iters):
        # Which protocol goes first alternates, so neither always follows the other.
        for name, sock, req, n in (pair if i % 2 == 0 else pair[::-1]):
            t0 = time.perf_counter_ns()
            sock.sendall(req)
            read_exact(sock, buf, n)
            t1 = time.perf_counter_ns()
            if i >= warmup:
                lat[name].append((t1 - t0) / 1000.0)
    r.close()
    lane.close()
    return {'lane_us': lat['lane'], 'resp_us': lat['resp'], 'same_bytes': same}


def pct(vals, p):
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def start_server(exe, d, start_proc, core=None):
    port, lane_port = free_port(), free_port()
    args = [exe, '--kvcache', '--port', str(port), '--bind', '127.0.0.1', '--dir', d,
            '--appendonly', 'no', '--workers', '1', '--fastlane-port', str(lane_port)]
    p = start_proc(args, core, os.path.join(d, 'log'))
    deadline = time.time() + 30
    while time.time() < deadline:
        if p.poll() is not None:
            raise RuntimeError('pion-server exited (log %s)' % os.path.join(d, 'log'))
        try:
            s = socket.create_connection(('127.0.0.1', lane_port), timeout=2)
            s.sendall(fastlane.frame(fastlane.OP_PING))
            if s.recv(7) == struct.pack('<HBI', fastlane.MAGIC, fastlane.ST_OK, 0):
                s.close()
                return p, port, lane_port
            s.close()
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError('pion-server did not answer on the fast lane')


def suite(ctx, run):
    """Rows for the attend suite (`run` is the harness module, bench/pionbench/harness.py)."""
    Row = run.Row
    p50 = Row('attend', 'QUERY_FUSED p50, lane vs RESP (H_q=32 H_kv=8 D=128 N=2048 S=1)', 'µs',
              'RESP', '≥ 1.2× (lane p50 ≥ 20% faster)', higher_better=False)
    p99 = Row('attend', 'QUERY_FUSED p99, lane vs RESP (same)', 'µs', 'RESP', 'info',
              higher_better=False)
    exe = ctx.tool('pion-server')
    d = tempfile.mkdtemp(prefix='pion-lane-', dir=ctx.tmp)

    def start_proc(args, core, log):
        return run.PROCS.start(args, core=ctx.server_core, log_path=log, name='pion-server')

    try:
        proc, port, lane_port = start_server(exe, d, start_proc)
    except RuntimeError as e:
        p50.error = str(e)
        return [p50]
    # The same request against a 16-token prefix: the kernel is then a few µs, so the
    # row shows what the transport alone saves.
    small = Row('attend', 'QUERY_FUSED p50, lane vs RESP, N=16 (transport cost only)', 'µs',
                'RESP', 'info', higher_better=False)
    iters = 30 if ctx.smoke else 400
    same = True
    for _ in range(ctx.reps):
        for n, rows in ((N, (p50, p99)), (16, (small,))):
            out = ctx.run_client([sys.executable, os.path.abspath(__file__), '--measure',
                                  '--port', str(port), '--lane-port', str(lane_port),
                                  '--iters', str(iters), '--n', str(n)], timeout=900)
            m = json.loads(out)
            same = same and m['same_bytes']
            rows[0].pion.append(pct(m['lane_us'], 50))
            rows[0].peer.append(pct(m['resp_us'], 50))
            if len(rows) > 1:
                rows[1].pion.append(pct(m['lane_us'], 99))
                rows[1].peer.append(pct(m['resp_us'], 99))
    run.PROCS.stop(proc)
    ratio = run.mmm(p50.ratios())
    if not same:
        p50.error = 'lane and RESP replies differ'
    elif ratio:
        p50.met = ratio[1] >= 1.2
        p50.met_note = '%.2f× at p50' % ratio[1]
    ctx.notes.append('QUERY_FUSED lane vs RESP: %d requests per protocol per repetition, '
                     'alternating, one in flight; replies byte-identical: %s' % (iters, same))
    return [p50, p99, small]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--measure', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--port', type=int)
    ap.add_argument('--lane-port', type=int)
    ap.add_argument('--iters', type=int, default=400)
    ap.add_argument('--warmup', type=int, default=20)
    ap.add_argument('--n', type=int, default=N, help='prefix tokens (default 2048)')
    ap.add_argument('--build', default='build/release')
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.port, args.lane_port, args.iters, args.warmup, args.n)))
        return 0
    exe = os.path.join(args.build, 'bin', 'pion-server')
    d = tempfile.mkdtemp(prefix='pion-lane-')
    procs = []

    def start_proc(a, core, log):
        p = subprocess.Popen(a, stdout=open(log, 'wb'), stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    try:
        _, port, lane_port = start_server(exe, d, start_proc)
        m = measure(port, lane_port, args.iters, args.warmup, args.n)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for name in ('lane', 'resp'):
        v = m[name + '_us']
        print('%-5s p50 %8.1f µs  p99 %8.1f µs' % (name, pct(v, 50), pct(v, 99)))
    print('RESP/lane at p50: %.3f×, replies identical: %s' % (
        pct(m['resp_us'], 50) / pct(m['lane_us'], 50), m['same_bytes']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
