#!/usr/bin/python3
"""`make bench SUITE=tier` (bench/run.py calls suite()): the disk tier against the disk.

Every pion-server here has --tier-dir in a directory under the bench's temp dir, and
every anchor's file lies in the same directory, so both use one file system and disk.
Each repetition measures pion and its anchor one after the other.

1. GET of a tiered 16 MiB value with a cold page cache, vs `dd if=<file> of=/dev/null
   bs=16M iflag=direct` of a 16 MiB file. The server holds 12 values of 16 MiB under
   --maxmemory 40mb, then RAM is filled with 32 KiB values (below tier-min-value:
   evicted, never tiered), so every 16 MiB value is in the tier and a GET cannot
   promote it (that would move colder values out; a promotion's write-out is not part
   of a read row). Each repetition GETs two tiered keys (INFO tier_reads must grow by
   one per GET, tier_promotions stay 0), each after dropping the page cache (as root;
   else noted), and dd reads its file twice the same way. The client reads the reply
   into a preallocated buffer (pion.integrations._conn get_into). Target >= 80 %.
2. 64 KiB random reads of tiered values, 8 clients: redis-benchmark -t get -r N -c 8
   over N keys of 64 KiB (tier-min-value 64kb, --maxmemory 4mb), RAM then filled with
   32 KiB values as in 1 so that no read promotes (INFO tier_promotions must stay 0),
   vs `fio --rw=randread --bs=64k --direct=1 --iodepth=8 --ioengine=libaio` over a file
   of the same N x 64 KiB. One row with the default tier-io-threads (2) and one with 8,
   as many reads in flight as fio keeps.
   Target >= 70 %.
3. Evictions written to the tier vs dropped: redis-benchmark -t set -d 1048576 -c 8
   (random keys) against --maxmemory 64mb with --appendonly yes (so the automatic
   snapshots the load triggers are in it; a snapshot copies tiered values), once with
   the tier on (every value pushed out is written to it) and once without (pushed out
   = evicted). String values only (namespaces tier too, not measured here). The tier's writes are
   queued (tier-write-queue, 256 MiB): the row is redis-benchmark's rate; what was
   still queued at its end and the time to drain it are in the details. Target >= 0.8x.
4. Time to first token from the disk tier vs cold prefill, with the reference model
   (python/pion/reference_model.py, random weights, CPU): a 2,048-token prefix's K/V
   stored as fp16 blocks of 256 tokens (1 MiB strings) with KV.BLOCK.CHAIN, then 32 KiB
   values push every block to the tier (the RAM budget is then full of values that
   cannot move: no block is promoted); warm = GET of every block (page cache dropped first) + conversion + the
   16-token suffix's forward pass to its first token; cold = the forward pass of prefix
   + suffix. Target: warm <= 30 % of cold.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

KIB = 1024
MIB = 1024 * 1024


def _start(ctx, m, tag, args):
    port = m.free_port()
    d = tempfile.mkdtemp(prefix='tier-%s-' % tag, dir=ctx.tmp)
    cmd = [ctx.tool('pion-server'), '--kvcache', '--port', str(port), '--bind', '127.0.0.1',
           '--dir', d] + args
    if ctx.pion_workers:
        cmd += ['--workers', str(ctx.pion_workers)]
    p = m.PROCS.start(cmd, core=ctx.server_core, log_path=os.path.join(d, 'log'),
                      name='pion-server (%s)' % tag)
    m.wait_ready(port, p, timeout=60)
    return m.Server('pion', port, p), d


def _stop(m, srv, d):
    m.PROCS.stop(srv.proc)
    shutil.rmtree(d, ignore_errors=True)


def _tier_args(d, maxmemory, tier_bytes, extra=()):
    return ['--maxmemory', maxmemory, '--tier-dir', os.path.join(d, 'tier'), '--tier-maxbytes',
            tier_bytes, '--appendonly', 'no'] + list(extra)


def _info(m, port, section='pion'):
    c = m.Resp(port)
    try:
        kind, body = c.call('INFO', section)
    finally:
        c.close()
    if kind != 'bulk':
        raise m.BenchError('INFO %s: %r' % (section, body))
    out = {}
    for line in body.decode().splitlines():
        if ':' in line and not line.startswith('#'):
            k, v = line.split(':', 1)
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    return out


def _settle(m, srv, timeout=120):
    """Waits until every queued tier write is on disk."""
    deadline = time.time() + timeout
    while _info(m, srv.port)['tier_write_backlog_bytes'] != 0:
        srv.check_alive()
        if time.time() > deadline:
            raise m.BenchError('tier writes still queued after %d s' % timeout)
        time.sleep(0.02)


def _drop_caches(ctx):
    """Drops the page cache (root only); False where it cannot (noted once)."""
    os.sync()
    try:
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
        return True
    except OSError as e:
        note = 'tier: could not drop the page cache (%s): the cold rows ran warm' % e.strerror
        if note not in ctx.notes:
            ctx.notes.append(note)
        return False


def _write_file(path, nbytes):
    block = os.urandom(min(nbytes, 16 * MIB))
    with open(path, 'wb') as f:
        left = nbytes
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


def _dd_read(path):
    """Seconds dd takes to read `path` with one direct 16 MiB read (its own report)."""
    r = subprocess.run(['dd', 'if=' + path, 'of=/dev/null', 'bs=16M', 'iflag=direct'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    txt = r.stderr.decode()
    mt = re.search(r'copied, ([0-9.,e-]+) s', txt)
    if r.returncode != 0 or not mt:
        raise RuntimeError('dd: %s' % txt.strip()[-300:])
    return float(mt.group(1).replace(',', '.'))


def _fill_ram(m, c, budget):
    """Fills RAM with values below tier-min-value (32 KiB). They are evicted, never
    tiered, so once they hold the budget nothing in RAM can move to the tier and a
    read of a tiered value is served from disk without promoting it (a promotion
    needs colder values to move out; its write-out is not part of the read rows)."""
    v = b'f' * (32 * KIB)
    n = budget // len(v) + 16
    for i in range(0, n, 64):
        r = c.run_pipelined([('SET', 'fill:%d' % j, v) for j in range(i, min(n, i + 64))])
        if any(x != b'OK' for x in r):
            raise m.BenchError('SET fill: %r' % [x for x in r if x != b'OK'][:2])


def _connect(port):
    from pion.integrations._conn import connect
    return connect('redis://127.0.0.1:%d' % port)


# ---------------------------------------------------------------- 1. cold 16 MiB GET

def _row_cold_get(ctx, m):
    size = 16 * MIB
    per_rep = 2
    nkeys = per_rep * ctx.reps + 2
    row = m.Row('tier', 'GET of a tiered 16 MiB value, cold page cache, 1 client', 'B/s',
                'dd bs=16M iflag=direct', '≥ 80% of dd')
    d = tempfile.mkdtemp(dir=ctx.tmp)
    srv, sd = _start(ctx, m, 'cold', _tier_args(d, '40mb', '2gb'))
    try:
        c = _connect(srv.port)
        vals = {}
        for i in range(nkeys):
            v = os.urandom(MIB) * 16
            vals[i] = v[:64]  # checked by prefix and length; the server's CRC checks the rest
            c.call('SET', b'big%d' % i, v)
        _fill_ram(m, c, 40 * MIB)
        _settle(m, srv)
        if _info(m, srv.port)['tier_entries'] != nkeys:
            raise m.BenchError('%d of %d values in the tier' % (
                _info(m, srv.port)['tier_entries'], nkeys))
        ddfile = os.path.join(d, 'dd-16m.bin')
        _write_file(ddfile, size)
        buf = bytearray(size)
        pion_bps, dd_bps, dropped = [], [], True
        nxt = 0
        for _ in range(ctx.reps):
            t_pion = 0.0
            for _ in range(per_rep):
                key = b'big%d' % nxt
                before = _info(m, srv.port)['tier_reads']
                dropped &= _drop_caches(ctx)
                t0 = time.perf_counter()
                got = c.get_into([key], [buf])
                t_pion += time.perf_counter() - t0
                if got != [size] or bytes(buf[:64]) != vals[nxt]:
                    raise m.BenchError('GET %s: %r' % (key, got))
                if _info(m, srv.port)['tier_reads'] != before + 1:
                    raise m.BenchError('GET %s was not read from the tier' % key)
                nxt += 1
            t_dd = 0.0
            for _ in range(per_rep):
                dropped &= _drop_caches(ctx)
                t_dd += _dd_read(ddfile)
            pion_bps.append(per_rep * size / t_pion)
            dd_bps.append(per_rep * size / t_dd)
        row.pion, row.peer = pion_bps, dd_bps
        info = _info(m, srv.port)
        if info['tier_promotions']:
            raise m.BenchError('%d GETs promoted their value' % info['tier_promotions'])
        row.extra = {'page_cache_dropped': dropped, 'tier_direct_io': info.get('tier_direct_io'),
                     'tier_read_latency_p50_us': info.get('tier_read_latency_p50_us'),
                     'tier_promotions': info.get('tier_promotions')}
        med = m.mmm(row.ratios())[1]
        row.met = med >= 0.8
        row.met_note = '%.0f%%' % (100 * med)
    finally:
        _stop(m, srv, sd)
        shutil.rmtree(d, ignore_errors=True)
    return row


# ---------------------------------------------------------------- 2. 64 KiB random reads

def _fio_randread(ctx, path, nbytes, seconds):
    r = subprocess.run([ctx.tool('fio'), '--name=tier-anchor', '--filename=' + path,
                        '--size=%d' % nbytes, '--rw=randread', '--bs=64k', '--direct=1',
                        '--iodepth=8', '--ioengine=libaio', '--runtime=%g' % seconds,
                        '--time_based', '--output-format=json'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 120)
    if r.returncode != 0:
        raise RuntimeError('fio: %s' % r.stderr.decode()[-400:])
    out = r.stdout.decode()
    return json.loads(out[out.index('{'):])['jobs'][0]['read']['bw_bytes']


def _rows_random_reads(ctx, m):
    size = 64 * KIB
    nkeys = 512 if ctx.smoke else 4096
    nreq = 2000 if ctx.smoke else 20000
    fio_s = 1 if ctx.smoke else 4
    maxmemory = 4 * MIB
    rows = []
    for io_threads in (2, 8):
        row = m.Row('tier', 'GET 64 KiB random tiered values ×8 clients (tier-io-threads %d)'
                    % io_threads, 'B/s', 'fio randread 64k direct iodepth 8 libaio',
                    '≥ 70% of fio')
        d = tempfile.mkdtemp(dir=ctx.tmp)
        srv, sd = _start(ctx, m, 'rand', _tier_args(d, str(maxmemory), '2gb', [
            '--tier-min-value', '64kb', '--tier-io-threads', str(io_threads)]))
        try:
            c = _connect(srv.port)
            v = os.urandom(size)
            for i in range(0, nkeys, 64):
                r = c.run_pipelined([('SET', 'key:%012d' % j, v)
                                     for j in range(i, min(nkeys, i + 64))])
                if any(x != b'OK' for x in r):
                    raise m.BenchError('SET: %r' % [x for x in r if x != b'OK'][:2])
            _fill_ram(m, c, maxmemory)
            _settle(m, srv)
            info0 = _info(m, srv.port)
            if info0['tier_entries'] < nkeys * 0.99:
                raise m.BenchError('only %d of %d keys in the tier' % (info0['tier_entries'],
                                                                       nkeys))
            fiofile = os.path.join(d, 'fio-randread.bin')
            _write_file(fiofile, nkeys * size)
            pion_bps, fio_bps = [], []
            for _ in range(ctx.reps):
                _drop_caches(ctx)
                x = m.redis_benchmark(ctx, srv, nreq, 1, 8, ['-t', 'get', '-r', str(nkeys)])
                pion_bps.append(x['ops_per_s'] * size)
                _drop_caches(ctx)
                fio_bps.append(_fio_randread(ctx, fiofile, nkeys * size, fio_s))
            info1 = _info(m, srv.port)
            if info1['tier_promotions'] != info0['tier_promotions']:
                raise m.BenchError('reads promoted %d values (the row is of reads from disk)'
                                   % (info1['tier_promotions'] - info0['tier_promotions']))
            row.pion, row.peer = pion_bps, fio_bps
            row.extra = {'tier_reads': info1['tier_reads'] - info0['tier_reads'],
                         'requests': nreq * ctx.reps, 'keys': nkeys, 'maxmemory': maxmemory,
                         'tier_read_latency_p50_us': info1.get('tier_read_latency_p50_us'),
                         'tier_read_latency_p99_us': info1.get('tier_read_latency_p99_us')}
            if row.extra['tier_reads'] < 0.95 * nreq * ctx.reps:
                raise m.BenchError('only %d of %d GETs read the tier' % (
                    row.extra['tier_reads'], nreq * ctx.reps))
            med = m.mmm(row.ratios())[1]
            row.met = med >= 0.7
            row.met_note = '%.0f%%' % (100 * med)
        except (m.BenchError, RuntimeError) as e:
            row.error = str(e)
        finally:
            _stop(m, srv, sd)
            shutil.rmtree(d, ignore_errors=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- 3. evictions to the tier

def _row_evictions(ctx, m):
    size = MIB
    nreq = 128 if ctx.smoke else 1024
    row = m.Row('tier', 'SET 1 MiB ×8 clients under maxmemory 64mb, appendonly yes: '
                'evictions to the tier (string values)', 'ops/s',
                'the same load, tier off (evictions dropped)', '≥ 0.8×')
    on, off, extra = [], [], {'tier_writes': [], 'tier_backlog_at_end_mb': [],
                              'tier_drain_s': [], 'rdb_saves_tier': [],
                              'rdb_saves_no_tier': [], 'evicted_keys_no_tier': []}
    for _ in range(ctx.reps):
        for tier in (True, False):
            d = tempfile.mkdtemp(dir=ctx.tmp)
            args = ['--maxmemory', '64mb', '--appendonly', 'yes']
            if tier:
                args += ['--tier-dir', os.path.join(d, 'tier'), '--tier-maxbytes', '8gb']
            srv, sd = _start(ctx, m, 'evict-%s' % ('tier' if tier else 'drop'), args)
            try:
                x = m.redis_benchmark(ctx, srv, nreq, 1, 8, [
                    '-t', 'set', '-d', str(size), '-r', '1000000000'])
                pers = _info(m, srv.port, 'persistence')
                if tier:
                    on.append(x['ops_per_s'])
                    extra['tier_backlog_at_end_mb'].append(
                        _info(m, srv.port)['tier_write_backlog_bytes'] / MIB)
                    t0 = time.time()
                    _settle(m, srv, timeout=300)
                    extra['tier_drain_s'].append(time.time() - t0)
                    extra['tier_writes'].append(_info(m, srv.port)['tier_writes'])
                    extra['rdb_saves_tier'].append(pers.get('rdb_saves'))
                else:
                    off.append(x['ops_per_s'])
                    extra['rdb_saves_no_tier'].append(pers.get('rdb_saves'))
                    extra['evicted_keys_no_tier'].append(
                        _info(m, srv.port, 'stats').get('evicted_keys'))
            finally:
                _stop(m, srv, sd)
                shutil.rmtree(d, ignore_errors=True)
    row.pion, row.peer, row.extra = on, off, extra
    med = m.mmm(row.ratios())[1]
    row.met = med >= 0.8
    row.met_note = '%.2f×' % med
    return row


# ---------------------------------------------------------------- 4. TTFT from the tier

def _row_ttft(ctx, m):
    import numpy as np
    import torch

    from pion.reference_model import ReferenceDecoder

    model = ReferenceDecoder()
    cfg = model.config
    prefix = 256 if ctx.smoke else 2048
    block = 64 if ctx.smoke else 256
    nblocks = prefix // block
    ids = [(7 * i + 3) % cfg.vocab_size for i in range(prefix + 16)]
    row = m.Row('tier', 'reference model TTFT, %d-token prefix from the disk tier (fp16 blocks '
                'of %d tokens, KV.BLOCK.CHAIN) + 16-token suffix' % (prefix, block), 's',
                'cold prefill of prefix + suffix', 'warm ≤ 30% of cold', higher_better=False)
    # The prefix's K/V as blocks: per block, every layer's K then V, fp16.
    _, past = model.prefill(ids[:prefix])
    shape = (cfg.n_layers, 2, 1, cfg.n_kv_heads, block, cfg.head_dim)
    blobs = []
    for b in range(nblocks):
        parts = [t[:, :, b * block:(b + 1) * block, :] for kv in past for t in kv]
        blobs.append(torch.stack(parts).to(torch.float16).contiguous().numpy().tobytes())
    d = tempfile.mkdtemp(dir=ctx.tmp)
    # The budget holds the chain while it is written (a CHAIN that extends a chain
    # filling the budget is refused: its AFTER block is the only leaf and is held, and
    # tiering goes leaves-first); then small values push the blocks out, a leaf at a
    # time (a parent moves once its child's write is done).
    budget = sum(len(x) for x in blobs) + 4 * MIB
    srv, sd = _start(ctx, m, 'ttft', _tier_args(d, str(budget), '1gb'))
    try:
        c = _connect(srv.port)
        keys = [b'ttft:%d' % b for b in range(nblocks)]
        r = c.chain(list(zip(keys, blobs)), tokens=block, per_command=1)
        if any(x != b'OK' for x in r):
            raise m.BenchError('KV.BLOCK.CHAIN: %r' % [x for x in r if x != b'OK'][:2])
        deadline = time.time() + 120
        step = 0
        while _info(m, srv.port)['tier_entries'] < nblocks:
            if time.time() > deadline:
                raise m.BenchError('%d of %d blocks in the tier' % (
                    _info(m, srv.port)['tier_entries'], nblocks))
            v = b'f' * (32 * KIB)
            c.run_pipelined([('SET', 'push:%d:%d' % (step, j), v) for j in range(8)])
            step += 1
            _settle(m, srv)
        _fill_ram(m, c, budget)  # no room left to promote a block into
        _settle(m, srv)
        info0 = _info(m, srv.port)
        bufs = [bytearray(len(x)) for x in blobs]
        warm, cold, same = [], [], []
        for _ in range(ctx.reps):
            _drop_caches(ctx)
            t0 = time.perf_counter()
            got = c.get_into(keys, bufs)
            if got != [len(x) for x in blobs]:
                raise m.BenchError('GET of the blocks: %r' % got)
            kv = torch.cat([torch.from_numpy(np.frombuffer(x, dtype=np.float16)).view(shape)
                            for x in bufs], dim=4)
            restored = tuple((kv[i, 0], kv[i, 1]) for i in range(cfg.n_layers))
            logits, _ = model.forward(ids[prefix:], restored, last_only=True)
            tok_warm = int(logits[0, -1].argmax())
            warm.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            logits, _ = model.forward(ids, None, last_only=True)
            tok_cold = int(logits[0, -1].argmax())
            cold.append(time.perf_counter() - t0)
            same.append(tok_warm == tok_cold)
        info1 = _info(m, srv.port)
        row.pion, row.peer = warm, cold
        row.extra = {'tier_reads': info1['tier_reads'] - info0['tier_reads'],
                     'tier_promotions': info1['tier_promotions'] - info0['tier_promotions'],
                     'block_bytes': len(blobs[0]), 'same_first_token': same}
        if row.extra['tier_reads'] < nblocks * ctx.reps:
            raise m.BenchError('only %d of %d block reads came from the tier' % (
                row.extra['tier_reads'], nblocks * ctx.reps))
        frac = m.mmm([w / c_ for w, c_ in zip(warm, cold)])[1]
        row.met = frac <= 0.3
        row.met_note = 'warm = %.0f%% of cold' % (100 * frac)
    finally:
        _stop(m, srv, sd)
        shutil.rmtree(d, ignore_errors=True)
    return row


def suite(ctx, m):
    rows = []
    for fn in (_row_cold_get, _rows_random_reads, _row_evictions, _row_ttft):
        try:
            r = fn(ctx, m)
            rows += r if isinstance(r, list) else [r]
        except (m.BenchError, RuntimeError, OSError) as e:
            r = m.Row('tier', fn.__name__.lstrip('_').replace('_', ' '), '', '', '—')
            r.error = str(e)
            rows.append(r)
        finally:
            m.PROCS.stop_all()
    ctx.notes.append('tier: tier and anchor files in one directory under %s (same file system)'
                     % ctx.tmp)
    return rows
