"""Suite adapters: the time to find and load a 32-block prefix of 2 MiB blocks through each
engine adapter against pion, beside LMCache's generic Redis connector pattern against
redis-server, in the same run.

The anchor is what LMCache's Redis remote connector sends, through redis-py: two keys per
chunk (`<key>kv_bytes`, `<key>metadata`, each its own SET when stored), lookup by EXISTS of
each metadata key in sequence until the first miss, then GET of the metadata and of the
bytes for each chunk, copied into the engine's buffer. The pion rows: the block commands
themselves (one KV.BLOCK.MATCH ... PIN, pipelined GETs received into preallocated buffers,
UNPIN), and each adapter driven as its engine drives it (adapter_glue.py). Per row: the
find + load time (median over a few iterations per repetition), the round trips to find it
(KV.BLOCK.MATCH calls per find, from INFO commandstats deltas; all commands per find + load
beside it) and the longest single adapter call made while finding (an engine's lookup must
never block its scheduler)."""

import os
import statistics
import struct
import time

from .adapter_glue import DRIVERS, NotAvailable, digests
from .harness import MIB, BenchError, Row, mmm
from .suites_blocks import aligned, info_fields, on_client_core

LOOKUP_LIMIT_US = 1000.0


def command_calls(port):
    """{command: calls} from INFO commandstats."""
    out = {}
    for k, v in info_fields(port, 'commandstats').items():
        if k.startswith('cmdstat_'):
            f = dict(x.split('=', 1) for x in v.split(',') if '=' in x)
            out[k[len('cmdstat_'):]] = int(f.get('calls', 0))
    return out


class LMCacheTwoKey:
    """LMCache's Redis connector's requests through redis-py against redis-server."""

    name = 'LMCache two-key pattern (redis-py)'

    def __init__(self, port, n, size, src):
        import redis
        self.r = redis.Redis(host='127.0.0.1', port=port)
        self.n, self.size, self.src = n, size, src
        # CacheEngineKey.to_string(): fmt@model@world_size@worker_id@chunk_hash.
        self.keys = ['vllm@bench/model@1@0@%s' % d.hex() for d in digests(n, 'two-key')]
        # RemoteMetadata: length, shape (4 ints), dtype, fmt: packed ints.
        self.meta = struct.pack('<iiiiiii', size, 2, 32, 64, size // (2 * 32 * 64 * 2), 0, 1)
        self.dest = [aligned(size) for _ in range(n)]

    def store(self):
        for k, v in zip(self.keys, self.src):
            self.r.set(k + 'kv_bytes', bytes(v))
            self.r.set(k + 'metadata', self.meta)

    def find_and_load(self):
        clock = time.perf_counter
        calls = []
        t0 = clock()
        hits = 0
        for k in self.keys:
            a = clock()
            e = self.r.exists(k + 'metadata')
            calls.append(clock() - a)
            if not e:
                break
            hits += 1
        t1 = clock()
        for i in range(hits):
            m = self.r.get(self.keys[i] + 'metadata')
            length = struct.unpack_from('<i', m)[0]
            data = self.r.get(self.keys[i] + 'kv_bytes')
            if data is None:
                # LMCache deletes the orphan metadata key here; nothing is left to load.
                break
            self.dest[i][:length] = data
        t2 = clock()
        return {'found': hits, 'find_s': t1 - t0, 'load_s': t2 - t1,
                'call_us': [1e6 * c for c in calls]}

    def check(self):
        for i in range(self.n):
            if self.dest[i] != self.src[i]:
                return 'buffer %d differs from block %d' % (i, i)
        return None

    def close(self):
        self.r.close()


class RawBlocks:
    """pion's block commands without an adapter: one MATCH ... PIN, GETs received into
    the buffers (pion.integrations._conn.BlockConnection.get_into), UNPIN."""

    name = 'pion block commands (MATCH + GETs into buffers)'

    def __init__(self, url, n, size, src):
        from pion.integrations import _conn
        self.conn = _conn.connect(url)
        self.n, self.size, self.src = n, size, src
        self.keys = [b'raw|' + d.hex().encode() for d in digests(n, 'raw')]
        self.hashes = b''.join(d[-8:] for d in digests(n, 'raw'))
        self.dest = [aligned(size) for _ in range(n)]

    def store(self):
        for r in self.conn.chain(list(zip(self.keys, self.src)), hashes=self.hashes, tokens=16):
            if r != b'OK':
                raise RuntimeError('KV.BLOCK.CHAIN: %r' % (r,))

    def find_and_load(self):
        clock = time.perf_counter
        t0 = clock()
        found, lease = self.conn.match(self.keys, pin_ms=10000)
        t1 = clock()
        got = self.conn.get_into(self.keys[:found], self.dest[:found])
        self.conn.unpin([lease])
        t2 = clock()
        if any(g != self.size for g in got):
            raise RuntimeError('get_into: %r' % (got,))
        return {'found': found, 'find_s': t1 - t0, 'load_s': t2 - t1,
                'call_us': [1e6 * (t1 - t0)]}

    def check(self):
        for i in range(self.n):
            if self.dest[i] != self.src[i]:
                return 'buffer %d differs from block %d' % (i, i)
        return None

    def close(self):
        self.conn.close()


def run_driver(d, port, iters):
    """`iters` finds + loads of `d` (after one untimed warm-up); medians, the longest call
    and the commands the server counted per find + load."""
    d.find_and_load()
    c0 = command_calls(port)
    res = [d.find_and_load() for _ in range(iters)]
    c1 = command_calls(port)
    for r in res:
        if r['found'] != d.n:
            raise BenchError('found %d of %d blocks' % (r['found'], d.n))
    bad = d.check()
    if bad:
        raise BenchError('loaded bytes wrong: %s' % bad)
    delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    delta['info'] = delta.get('info', 0) - 1  # the INFO that read c1
    return {
        'total_ms': statistics.median(1e3 * (r['find_s'] + r['load_s']) for r in res),
        'find_ms': statistics.median(1e3 * r['find_s'] for r in res),
        'load_ms': statistics.median(1e3 * r['load_s'] for r in res),
        'max_call_us': max(max(r['call_us']) for r in res if r['call_us']),
        'calls_per_find': statistics.median(len(r['call_us']) for r in res),
        'match_per_find': delta.get('kv.block.match', 0) / iters,
        'exists_per_find': delta.get('exists', 0) / iters,
        'commands_per_find': sum(v for v in delta.values() if v > 0) / iters,
    }


def suite_adapters(ctx):
    n = 4 if ctx.smoke else 32
    size = 256 * 1024 if ctx.smoke else 2 * MIB
    iters = 2 if ctx.smoke else 5
    label = '%d × %s' % (n, '256 KiB' if ctx.smoke else '2 MiB')
    src = []
    for _ in range(n):
        b = aligned(size)
        b[:] = os.urandom(size)
        src.append(b)
    pion, redis = ctx.start_pion(), ctx.start_redis()
    url = 'redis://127.0.0.1:%d' % pion.port
    rows, drivers = [], []
    base = None
    try:
        base = LMCacheTwoKey(redis.port, n, size, src)
        base.store()
        for cls in [RawBlocks] + DRIVERS:
            row = Row('adapters', '%s: find + load %s' % (cls.name, label), 'ms',
                      'LMCache two-key on redis-server', '≥ 2× faster; 1 MATCH per find; '
                      'every lookup call ≤ 1 ms', higher_better=False)
            rows.append(row)
            d = None
            try:
                d = cls(url, n, size, src)
                d.store()
                drivers.append((row, d))
            except NotAvailable as e:
                row.error = 'not available: %s' % e
                row.unavailable = True
            except Exception as e:  # an adapter's failure is its row's, not the suite's
                row.error = 'failed to set up: %s: %s' % (type(e).__name__, e)
                if d is not None:
                    try:
                        d.close()
                    except Exception:
                        pass
        peer = []
        per = {id(d): [] for _, d in drivers}
        with on_client_core(ctx):
            for _ in range(ctx.reps):
                peer.append(run_driver(base, redis.port, iters))
                for row, d in drivers:
                    if row.error:
                        continue
                    try:
                        per[id(d)].append(run_driver(d, pion.port, iters))
                    except Exception as e:
                        row.error = '%s: %s' % (type(e).__name__, e)
        pion.check_alive()
        for row, d in drivers:
            if row.error:
                continue
            res = per[id(d)]
            row.pion = [x['total_ms'] for x in res]
            row.peer = [x['total_ms'] for x in peer]
            row.extra = {
                'find_ms': [x['find_ms'] for x in res], 'load_ms': [x['load_ms'] for x in res],
                'peer_find_ms': [x['find_ms'] for x in peer],
                'peer_load_ms': [x['load_ms'] for x in peer],
                'match_per_find': [x['match_per_find'] for x in res],
                'commands_per_find_and_load': [x['commands_per_find'] for x in res],
                'peer_exists_per_find': [x['exists_per_find'] for x in peer],
                'peer_commands_per_find_and_load': [x['commands_per_find'] for x in peer],
                'max_lookup_call_us': [x['max_call_us'] for x in res],
                'lookup_calls_per_find': [x['calls_per_find'] for x in res],
            }
            ratio = mmm(row.ratios())[1]
            matches = max(x['match_per_find'] for x in res)
            longest = max(x['max_call_us'] for x in res)
            row.met = ratio >= 2.0 and matches <= 1.0 and longest <= LOOKUP_LIMIT_US
            row.met_note = '%.2f× faster, %.3g MATCH per find, longest lookup call %.0f µs' % (
                ratio, matches, longest)
    except BenchError as e:
        for row in rows:
            row.error = row.error or str(e)
        if not rows:
            row = Row('adapters', '(suite)', '', '', '—')
            row.error = str(e)
            rows.append(row)
    finally:
        for _, d in drivers:
            try:
                d.close()
            except Exception:
                pass
        if base is not None:
            base.close()
        pion.stop()
        redis.stop()
    ctx.notes.append('adapters: each pion row is the find + load time of %s through it (median '
                     'of %d per repetition) against LMCache\'s two-key Redis pattern through '
                     'redis-py on redis-server in the same repetition' % (label, iters))
    return rows
