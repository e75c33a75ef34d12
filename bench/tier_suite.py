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
2. 64 KiB random reads of tiered values, 8 clients: pion-bench --workload get --keys N
   (each request a random key of N keys of 64 KiB, key:<12 digits> as redis-benchmark -r
   names them; tier-min-value 64kb, --maxmemory 4mb), RAM then filled with 32 KiB values
   as in 1 so that no read promotes (INFO tier_promotions must stay 0), vs `fio
   --rw=randread --bs=64k --direct=1 --iodepth=8 --ioengine=libaio` over a file of the
   same N x 64 KiB. One row per read path: the worker's own io_uring (the default,
   tier-ring-depth 32: as many reads in flight as clients ask for), and the tier I/O
   threads with one blocking pread each (tier-ring-depth 0, tier-io-threads 8). The
   ceiling column is the same GETs of the same keys from RAM (a server without a
   budget): what the load generator and loopback allow. Target >= 70 % of fio. The
   details add the server core's busy share during pion's run (near 100 %: bound by
   the server's CPU; well below: bound by each request's wait) and fio's rate when
   it runs on the server's core alone, as a percentage of the unpinned anchor.
3. Evictions written to the tier vs dropped, 8 clients, --maxmemory 64mb --appendonly
   yes (so the automatic snapshots the load triggers are in it; a snapshot copies
   tiered values), once with the tier on (every entry pushed out is written to it) and
   once without (pushed out = evicted): V.STOREBATCH of 1 MiB (512 fp16 rows of kv_dim
   1024) into a new namespace per request (pion-bench --workload storebatch --fresh:
   KV.PREFIX.REGISTER then V.STOREBATCH), and SET of 1 MiB values to random keys
   (redis-benchmark -t set -d 1048576 -r 1000000000); 128 requests per client (1 GiB).
   The tier's writes are queued (tier-write-queue, 256 MiB): the row is the load's
   rate; what was still queued at its end and the time to drain it are in the details.
   With the tier on every request's 1 MiB is written twice (the WAL, fsynced every
   second, and the tier's extent; the snapshots add a little), so the ceiling column
   is the rate this disk sustains for that mix of writes (fio, same file system, each
   repetition: a buffered writer fsyncing every 256 MiB beside two direct 1 MiB
   writers sharing one file) divided by the device bytes each request wrote in the
   tier-on run (/sys/block counters). Target >= 0.8x.
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

from pionbench.report import cpu_jiffies

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
        # Touched once before the timed GETs, as an engine's preallocated buffers
        # are: a fresh page's first touch (~1 GB/s here) is the client's cost.
        for i in range(0, size, 4096):
            buf[i] = 1
        # One untimed GET of a spare tiered value first, as a running server has
        # served before: its read buffers are recycled, and the process's first
        # read of a size maps a fresh one (that cost is the allocator's, paid once).
        if c.get_into([b'big%d' % (nkeys - 1)], [buf]) != [size]:
            raise m.BenchError('warm-up GET failed')
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

def _fio_randread(ctx, path, nbytes, seconds, core=None):
    """fio's 64 KiB random direct reads at iodepth 8, bytes/s; on CPU `core` only
    when it is given (as the server is)."""
    pin = ['taskset', '-c', str(core)] if core is not None else []
    r = subprocess.run(pin + [ctx.tool('fio'), '--name=tier-anchor', '--filename=' + path,
                        '--size=%d' % nbytes, '--rw=randread', '--bs=64k', '--direct=1',
                        '--iodepth=8', '--ioengine=libaio', '--runtime=%g' % seconds,
                        '--time_based', '--output-format=json'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 120)
    if r.returncode != 0:
        raise RuntimeError('fio: %s' % r.stderr.decode()[-400:])
    out = r.stdout.decode()
    return json.loads(out[out.index('{'):])['jobs'][0]['read']['bw_bytes']


def _core_busy(core):
    """(busy, total) jiffies of CPU `core` so far, or None (no core given)."""
    return None if core is None else cpu_jiffies(core)


def _load_keys(m, c, nkeys, v):
    for i in range(0, nkeys, 64):
        r = c.run_pipelined([('SET', 'key:%012d' % j, v) for j in range(i, min(nkeys, i + 64))])
        if any(x != b'OK' for x in r):
            raise m.BenchError('SET: %r' % [x for x in r if x != b'OK'][:2])


def _random_gets(ctx, m, srv, nkeys, size, seconds):
    """8 clients GETting random keys key:<12 digits> below nkeys (pion-bench --keys:
    the reply's length checked), bytes/s."""
    x = m.pion_bench(ctx, srv, 'get', clients=8, payload=size, duration=seconds, keys=nkeys,
                     warmup=1)
    return x['bytes_per_s'], x


# Each read path as its own row: the worker's io_uring (the default), and the
# tier I/O threads doing one blocking pread each (tier-ring-depth 0).
_READ_PATHS: tuple[tuple[str, list[str]], ...] = (
    ("worker's io_uring, tier-ring-depth 32", []),
    ('tier-ring-depth 0: 8 tier I/O threads, one pread each',
     ['--tier-ring-depth', '0', '--tier-io-threads', '8']),
)


def _rows_random_reads(ctx, m):
    size = 64 * KIB
    nkeys = 512 if ctx.smoke else 4096
    seconds = 0.5 if ctx.smoke else 3
    fio_s = 1 if ctx.smoke else 3
    maxmemory = 4 * MIB
    rows = []
    v = os.urandom(size)
    # The ceiling: the same GETs of the same keys from RAM (no maxmemory, no tier),
    # what this load generator and loopback allow on this machine.
    ram, ram_d = _start(ctx, m, 'rand-ram', ['--appendonly', 'no'])
    try:
        _load_keys(m, _connect(ram.port), nkeys, v)
        for name, args in _READ_PATHS:
            row = m.Row('tier', 'GET 64 KiB random tiered values ×8 clients (%s)' % name, 'B/s',
                        'fio randread 64k direct iodepth 8 libaio', '≥ 70% of fio')
            row.ceiling_name = 'the same GETs from RAM'
            d = tempfile.mkdtemp(dir=ctx.tmp)
            srv, sd = _start(ctx, m, 'rand', _tier_args(d, str(maxmemory), '2gb', [
                '--tier-min-value', '64kb'] + args))
            try:
                c = _connect(srv.port)
                _load_keys(m, c, nkeys, v)
                _fill_ram(m, c, maxmemory)
                _settle(m, srv)
                info0 = _info(m, srv.port)
                if info0['tier_entries'] < nkeys * 0.99:
                    raise m.BenchError('only %d of %d keys in the tier' % (
                        info0['tier_entries'], nkeys))
                fiofile = os.path.join(d, 'fio-randread.bin')
                _write_file(fiofile, nkeys * size)
                pion_bps, fio_bps, ram_bps, p50 = [], [], [], []
                busy, fio_pinned = [], []  # the server core's busy %; fio on that core
                gets = 0
                for _ in range(ctx.reps):
                    _drop_caches(ctx)
                    b0 = _core_busy(ctx.server_core)
                    bps, x = _random_gets(ctx, m, srv, nkeys, size, seconds)
                    b1 = _core_busy(ctx.server_core)
                    if b0 and b1 and b1[1] > b0[1]:
                        busy.append(100.0 * (b1[0] - b0[0]) / (b1[1] - b0[1]))
                    pion_bps.append(bps)
                    p50.append(x['p50_us'])
                    gets += x['ops'] + 8  # and one warm-up GET per client
                    _drop_caches(ctx)
                    fio_bps.append(_fio_randread(ctx, fiofile, nkeys * size, fio_s))
                    if ctx.server_core is not None:
                        _drop_caches(ctx)
                        fio_pinned.append(_fio_randread(ctx, fiofile, nkeys * size, fio_s,
                                                        core=ctx.server_core))
                    ram_bps.append(_random_gets(ctx, m, ram, nkeys, size, seconds)[0])
                info1 = _info(m, srv.port)
                if info1['tier_promotions'] != info0['tier_promotions']:
                    raise m.BenchError('reads promoted %d values (the row is of reads from disk)'
                                       % (info1['tier_promotions'] - info0['tier_promotions']))
                row.pion, row.peer, row.ceiling = pion_bps, fio_bps, ram_bps
                row.extra = {'tier_reads': info1['tier_reads'] - info0['tier_reads'],
                             'tier_ring_reads': info1.get('tier_ring_reads', 0) -
                             info0.get('tier_ring_reads', 0),
                             'gets': gets, 'keys': nkeys, 'maxmemory': maxmemory,
                             'client_p50_us': p50,
                             'tier_read_latency_p50_us': info1.get('tier_read_latency_p50_us'),
                             'tier_read_latency_p99_us': info1.get('tier_read_latency_p99_us'),
                             'fio_pct_of_ram_gets': [100.0 * f / r_ for f, r_ in
                                                     zip(fio_bps, ram_bps) if r_],
                             # Whether the row is bound by the server's CPU (near 100)
                             # or by latency (the core idles while reads wait), and
                             # what fio reads when it is held to the server's core
                             # (the disk's completions interrupt the other one).
                             'server_core_busy_pct': busy,
                             'fio_on_server_core_pct_of_fio': [
                                 100.0 * p / f for p, f in zip(fio_pinned, fio_bps) if f]}
                if row.extra['tier_reads'] < 0.95 * gets:
                    raise m.BenchError('only %d of %d GETs read the tier' % (
                        row.extra['tier_reads'], gets))
                med = m.mmm(row.ratios())[1]
                row.met = med >= 0.7
                row.met_note = '%.0f%%' % (100 * med)
            except (m.BenchError, RuntimeError) as e:
                row.error = str(e)
            finally:
                _stop(m, srv, sd)
                shutil.rmtree(d, ignore_errors=True)
            rows.append(row)
    finally:
        _stop(m, ram, ram_d)
    return rows


# ---------------------------------------------------------------- 3. evictions to the tier

def _fio_mixed_write(ctx, d, seconds=6):
    """The disk's write rate, bytes/s, for what this load asks of it with the tier on:
    a buffered sequential writer that fdatasyncs every 256 MiB (the WAL's pattern:
    write(2) into the page cache, fsynced every second) beside two direct 1 MiB
    writers into one shared file (the tier's I/O threads), all in the same file
    system, for `seconds`. The sum of the three jobs' bytes/s."""
    r = subprocess.run([ctx.tool('fio'), '--output-format=json', '--bs=1m',
                        '--runtime=%d' % seconds, '--time_based',
                        '--name=wal', '--filename=' + os.path.join(d, 'wal.bin'), '--size=3g',
                        '--rw=write', '--direct=0', '--ioengine=psync', '--fdatasync=256',
                        '--name=tier', '--filename=' + os.path.join(d, 'tier.bin'), '--size=4g',
                        '--offset_increment=2g', '--rw=write', '--direct=1', '--ioengine=psync',
                        '--numjobs=2'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120 + seconds)
    if r.returncode != 0:
        raise RuntimeError('fio: %s' % r.stderr.decode()[-400:])
    out = r.stdout.decode()
    jobs = json.loads(out[out.index('{'):])['jobs']
    return float(sum(j['write']['bw_bytes'] for j in jobs))


def _device_stat(path):
    """/sys/block's stat file of the device holding `path`, or None (no block
    device behind it: tmpfs, overlay)."""
    st = os.stat(path)
    f = '/sys/dev/block/%d:%d/stat' % (os.major(st.st_dev), os.minor(st.st_dev))
    return f if os.path.exists(f) else None


def _sectors_written(stat_file):
    with open(stat_file) as f:
        return int(f.read().split()[6])  # field 7: sectors written (512 bytes each)


def _eviction_load(ctx, m, kind, tier, nreq, extra=()):
    """One run of the load (kind 'set' or 'storebatch') on a fresh server under
    --maxmemory 64mb --appendonly yes, the tier on or off: (ops/s, details)."""
    d = tempfile.mkdtemp(dir=ctx.tmp)
    # max-sessions far above the load's 2 x 1,024 sessions: what pushes entries out
    # is the RAM budget alone.
    args = ['--maxmemory', '64mb', '--appendonly', 'yes', '--max-sessions', '1000000']
    if tier:
        args += ['--tier-dir', os.path.join(d, 'tier'), '--tier-maxbytes', '8gb'] + list(extra)
    srv, sd = _start(ctx, m, 'evict-%s-%s' % (kind, 'tier' if tier else 'drop'), args)
    out = {}
    dev = _device_stat(d)
    try:
        os.sync()  # what earlier runs left dirty is not counted in this one
        w0 = _sectors_written(dev) if dev else 0
        t0 = time.time()
        if kind == 'set':
            x = m.redis_benchmark(ctx, srv, nreq * 8, 1, 8, [
                '-t', 'set', '-d', str(MIB), '-r', '1000000000'])
            ops = x['ops_per_s']
        else:
            # Every request registers a new namespace and stores 1 MiB of fp16 rows
            # (512 rows of kv_dim 1024) into it: RAM holds 64 MiB of them.
            x = m.pion_bench(ctx, srv, 'storebatch', clients=8, payload=MIB, kv_dim=1024,
                             vquant='fp16', in_fmt='F16', requests=nreq, warmup=0,
                             ns='ev', fresh=True)
            ops = x['ops_per_s']
            out['retries'] = x.get('retries', 0)  # stores whose new namespace was evicted first
        load_s = time.time() - t0
        if dev:
            # What the load wrote to the device while it ran (the WAL, the tier's
            # extents, the snapshots; and whatever else the machine wrote meanwhile).
            written_mb = (_sectors_written(dev) - w0) * 512 / MIB
            out['device_MB_per_request'] = written_mb / (nreq * 8)
            out['device_write_MBps'] = written_mb / load_s
        info = _info(m, srv.port)
        pers = _info(m, srv.port, 'persistence')
        out['rdb_saves'] = pers.get('rdb_saves')
        if tier:
            out['tier_backlog_at_end_mb'] = info['tier_write_backlog_bytes'] / MIB
            t1 = time.time()
            _settle(m, srv, timeout=300)
            out['tier_drain_s'] = time.time() - t1
            info = _info(m, srv.port)
            out['tier_writes'] = info['tier_writes']
            out['tier_write_MBps'] = info['tier_write_bytes'] / MIB / load_s
        else:
            out['evicted_keys'] = _info(m, srv.port, 'stats').get('evicted_keys')
        return ops, out
    finally:
        _stop(m, srv, sd)
        shutil.rmtree(d, ignore_errors=True)


def _rows_evictions(ctx, m):
    nreq = 16 if ctx.smoke else 128  # per client: 8 x 128 x 1 MiB = 1 GiB, 16x the budget
    rows = []
    for kind, what in (('storebatch', 'V.STOREBATCH 1 MiB into a new namespace per request'),
                       ('set', 'SET 1 MiB random keys')):
        row = m.Row('tier', '%s ×8 clients under maxmemory 64mb, appendonly yes: evictions '
                    'to the tier' % what, 'ops/s', 'the same load, tier off (evictions dropped)',
                    '≥ 0.8×')
        # The disk's own ceiling, in requests/s of this load with the tier on: the
        # rate the disk sustains for the same mix of writes (fio, each repetition),
        # divided by the bytes each request made the device write in that run (the
        # WAL's copy, the tier's, the snapshots': measured; 2 MiB where the device's
        # counters are not readable).
        row.ceiling_name = ('disk write rate for the WAL + tier mix (fio: buffered writer '
                            'fdatasync every 256 MiB + 2 direct 1 MiB writers) / device bytes '
                            'written per request with the tier on')
        on, off, ceil, extra = [], [], [], {}
        try:
            for _ in range(ctx.reps):
                fd = tempfile.mkdtemp(dir=ctx.tmp)
                try:
                    bw = _fio_mixed_write(ctx, fd, 2 if ctx.smoke else 6)
                finally:
                    shutil.rmtree(fd, ignore_errors=True)
                extra.setdefault('disk_mixed_write_MBps', []).append(bw / MIB)
                for tier in (True, False):
                    ops, det = _eviction_load(ctx, m, kind, tier, nreq)
                    (on if tier else off).append(ops)
                    if tier:
                        per = det.get('device_MB_per_request') or 2.0
                        ceil.append(bw / MIB / per)
                    for k, v in det.items():
                        extra.setdefault('%s_%s' % (k, 'tier' if tier else 'no_tier'),
                                         []).append(v)
            row.pion, row.peer, row.ceiling, row.extra = on, off, ceil, extra
            med = m.mmm(row.ratios())[1]
            row.met = med >= 0.8
            row.met_note = '%.2f×; %.0f%% of the disk\'s ceiling, which is %.2f× of the tier-off ' \
                'rate' % (med, m.mmm(row.pct_ceiling())[1],
                          m.mmm([c / o for c, o in zip(ceil, off)])[1])
        except (m.BenchError, RuntimeError) as e:
            row.error = str(e)
        rows.append(row)
    return rows


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


_ROWS = {'cold': _row_cold_get, 'random': _rows_random_reads, 'evict': _rows_evictions,
         'ttft': _row_ttft}


def suite(ctx, m):
    rows = []
    want = getattr(ctx.args, 'tier_rows', None) or ','.join(_ROWS)
    names = [w.strip() for w in want.split(',') if w.strip()]
    bad = [w for w in names if w not in _ROWS]
    if bad:
        raise m.BenchError('unknown tier rows %s (known: %s)' % (bad, ', '.join(_ROWS)))
    for fn in (_ROWS[w] for w in names):
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
