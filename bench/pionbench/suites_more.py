"""Suites strings (the plain keyspace), cluster (pion.so on redis-server),
persist (bench/persist_suite.py) and tier (bench/tier_suite.py)."""

import json
import subprocess
import sys

from .harness import (BENCH_DIR, BenchError, KIB, MIB, Row, interleaved, iperf3_ceiling,
                      iperf3_send_cost, mmm, pion_bench, pion_bench_cpu, redis_benchmark,
                      size_name)
from . import harness


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
    sys.path.insert(0, BENCH_DIR)
    import persist_suite
    return persist_suite.suite(ctx, harness)


def suite_tier(ctx):
    """The disk tier against the disk it is on: a cold 16 MiB GET vs dd, 64 KiB random
    reads vs fio, evictions written to the tier vs dropped (bench/tier_suite.py)."""
    sys.path.insert(0, BENCH_DIR)
    import tier_suite
    return tier_suite.suite(ctx, harness)
