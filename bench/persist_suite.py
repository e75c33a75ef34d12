#!/usr/bin/python3
"""`make bench SUITE=persist` (bench/run.py calls suite()): the cost of durability.

1. WAL throughput. pion-bench V.STOREBATCH (FMT F16 into fp16 sessions at kv_dim
   1024, so the wire bytes are the stored bytes) of 64 KiB and 1 MiB with 1 and 8
   clients against pion-server with --appendonly no, --appendfsync everysec and
   --appendfsync always, and pion-bench SET of the same bytes against redis-server
   with AOF off, appendfsync everysec and always. Every server is fresh, pinned to
   the server core, with its --dir on the work tree's disk; the load generator is
   pinned to the client core. The disk's sequential write bandwidth is measured in
   the same repetition with the same block size: dd of as many payload-sized blocks
   as pion wrote under everysec, into the same directory's filesystem, with one
   fdatasync at the end (`conv=fdatasync`).
   Beside each everysec row: the snapshots pion took during the run (INFO
   rdb_saves: the store holds one payload, so the default auto-save-wal-bytes of
   64 MiB compacts the log every 64 MiB written) and the same run with
   --auto-save-wal-bytes 64gb (no compaction), so that the cost of the
   compactions is visible; the row itself is the default configuration.
   Targets: everysec >= 90 % of min(no-persistence, disk) and >= redis
   everysec; always >= redis always.
2. Restart of a ~1 GiB snapshot (--persist-gib): the time from exec until the server
   answers PING and INFO persistence says loading:0, for a pion-server whose --dir holds the snapshot (mapped, the default, and
   --snapshot-mmap no), against `cat pion.vstore > /dev/null` of the same
   page-cached file (best of 3), with the server's RssAnon / RssFile after the load;
   and the snapshot load alone (the time the server logs for it) against the same cat.
"""

import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

KIB = 1024
MIB = 1024 * 1024


def _start(ctx, m, kind, args):
    port = m.free_port()
    d = tempfile.mkdtemp(prefix='persist-%s-' % kind, dir=ctx.tmp)
    if kind == 'pion':
        cmd = [ctx.tool('pion-server'), '--kvcache', '--port', str(port), '--bind', '127.0.0.1',
               '--dir', d] + args
        if ctx.pion_workers:
            cmd += ['--workers', str(ctx.pion_workers)]
    else:
        cmd = [ctx.tool('redis-server'), '--port', str(port), '--bind', '127.0.0.1', '--save', '',
               '--dir', d, '--protected-mode', 'no'] + args
    p = m.PROCS.start(cmd, core=ctx.server_core, log_path=os.path.join(d, 'log'), name=kind)
    m.wait_ready(port, p, timeout=60)
    if kind == 'pion':
        _wait_pong(m, port, p, 60)  # PING is answered before loading ends; data commands are not
    return m.Server(kind, port, p), d


def _one(ctx, m, kind, args, workload, size, clients, dur):
    srv, d = _start(ctx, m, kind, args)
    try:
        kw = dict(clients=clients, payload=size, duration=dur, ns='p%d' % size)
        if workload == 'storebatch':
            kw.update(kv_dim=1024, vquant='fp16', in_fmt='F16')
        res = m.pion_bench(ctx, srv, workload, **kw)
        if kind == 'pion':
            res['saves'] = _saves(m, srv.port)
        return res
    finally:
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        m.PROCS.stop(srv.proc)
        shutil.rmtree(d, ignore_errors=True)


def _saves(m, port):
    """Snapshots the server took so far (INFO persistence rdb_saves): under
    everysec and always the automatic compaction (auto-save-wal-bytes, default
    max(64 MiB, snapshot size)) fires every 64 MiB of WAL in these runs (the
    store holds one payload), so each run also rotates the WAL that often."""
    c = m.Resp(port, timeout=30)
    try:
        info = c.call('INFO', 'persistence')
    finally:
        c.close()
    if info[0] != 'bulk':
        return -1
    g = re.search(rb'\nrdb_saves:(\d+)\r', b'\n' + info[1])
    return int(g.group(1)) if g else -1


def disk_write_bw(ctx, size, total):
    """Sequential write bandwidth (B/s): dd of `total` bytes in `size` blocks, fdatasync."""
    d = tempfile.mkdtemp(prefix='persist-dd-', dir=ctx.tmp)
    f = os.path.join(d, 'dd.out')
    count = max(1, int(math.ceil(total / size)))
    try:
        t0 = time.monotonic()
        subprocess.run(['dd', 'if=/dev/zero', 'of=' + f, 'bs=%d' % size, 'count=%d' % count,
                        'conv=fdatasync', 'status=none'], check=True,
                       preexec_fn=ctx.client_pin())
        return count * size / (time.monotonic() - t0)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def wal_rows(ctx, m):
    rows = []
    sizes = [MIB] if ctx.smoke else [64 * KIB, MIB]
    clients_list = [8] if ctx.smoke else [1, 8]
    dur = 0.5 if ctx.smoke else 3.0
    for size in sizes:
        for clients in clients_list:
            name = '%s ×%d' % (m.size_name(size), clients)
            ev = m.Row('persist', 'V.STOREBATCH %s, appendfsync everysec' % name, 'B/s',
                       'redis SET everysec',
                       '≥ 1.0× redis; ≥ 90 % of min(no-persist, disk)')
            ev.ceiling_name = 'min(no-persist, disk)'
            al = m.Row('persist', 'V.STOREBATCH %s, appendfsync always' % name, 'B/s',
                       'redis SET always', '≥ 1.0×')
            ev_extra = {'pion_no_persist': [], 'disk_dd': [], 'redis_no_aof': [],
                        'pion_p99_us': [], 'redis_p99_us': [], 'pion_auto_saves': [],
                        'pion_no_auto_save': [], 'pion_no_auto_save_saves': []}
            al_extra = {'pion_p50_us': [], 'redis_p50_us': [], 'pion_auto_saves': []}
            try:
                for _ in range(ctx.reps):
                    nop = _one(ctx, m, 'pion', ['--appendonly', 'no'], 'storebatch', size,
                               clients, dur)
                    pev = _one(ctx, m, 'pion', ['--appendfsync', 'everysec'], 'storebatch', size,
                               clients, dur)
                    pal = _one(ctx, m, 'pion', ['--appendfsync', 'always'], 'storebatch', size,
                               clients, dur)
                    # The same everysec run with the automatic compaction out of
                    # reach (reported beside the row, not as it).
                    pna = _one(ctx, m, 'pion', ['--appendfsync', 'everysec',
                                                '--auto-save-wal-bytes', '64gb'],
                               'storebatch', size, clients, dur)
                    rno = _one(ctx, m, 'redis', ['--appendonly', 'no'], 'set', size, clients, dur)
                    rev = _one(ctx, m, 'redis', ['--appendonly', 'yes', '--appendfsync',
                                                 'everysec'], 'set', size, clients, dur)
                    ral = _one(ctx, m, 'redis', ['--appendonly', 'yes', '--appendfsync',
                                                 'always'], 'set', size, clients, dur)
                    disk = disk_write_bw(ctx, size, pev['bytes_per_s'] * dur)
                    ev.pion.append(pev['bytes_per_s'])
                    ev.peer.append(rev['bytes_per_s'])
                    ev.ceiling.append(min(nop['bytes_per_s'], disk))
                    ev_extra['pion_no_persist'].append(nop['bytes_per_s'])
                    ev_extra['disk_dd'].append(disk)
                    ev_extra['redis_no_aof'].append(rno['bytes_per_s'])
                    ev_extra['pion_p99_us'].append(pev['p99_us'])
                    ev_extra['redis_p99_us'].append(rev['p99_us'])
                    ev_extra['pion_auto_saves'].append(pev['saves'])
                    ev_extra['pion_no_auto_save'].append(pna['bytes_per_s'])
                    ev_extra['pion_no_auto_save_saves'].append(pna['saves'])
                    al_extra['pion_auto_saves'].append(pal['saves'])
                    al.pion.append(pal['bytes_per_s'])
                    al.peer.append(ral['bytes_per_s'])
                    al_extra['pion_p50_us'].append(pal['p50_us'])
                    al_extra['redis_p50_us'].append(ral['p50_us'])
                ev.extra, al.extra = ev_extra, al_extra
                r = m.mmm(ev.ratios())[1]
                pct = m.mmm(ev.pct_ceiling())[1]
                ev.met = r >= 1.0 and pct >= 90.0
                ev.met_note = '%.2f× redis, %.0f%% of ceiling' % (r, pct)
                r = m.mmm(al.ratios())[1]
                al.met = r >= 1.0
                al.met_note = '%.2f×' % r
            except m.BenchError as e:
                ev.error = al.error = str(e)
            rows += [ev, al]
    return rows


def _fill(m, port, gib):
    """~gib GiB of fp16 rows (kv_dim 1024) in namespaces of 32 layers x 2 sides."""
    c = m.Resp(port, timeout=120)
    try:
        rows_per, dim = 1024, 1024
        blob = os.urandom(rows_per * dim * 2)
        total = int(gib * (1 << 30))
        done, ns = 0, 0
        while done < total:
            name = 'r%d' % ns
            c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', name, dim, 'fp16')
            for layer in range(32):
                for side in ('_pk', '_pv'):
                    if done >= total:
                        break
                    r = c.call('V.STOREBATCH', name + side, layer, 0, rows_per, blob, 'FMT', 'F16')
                    if r[0] == 'error':
                        raise m.BenchError('V.STOREBATCH: %s' % r[1])
                    done += len(blob)
            ns += 1
        c.expect(('status', 'OK'), 'KV.PREFIX.SAVE')
    finally:
        c.close()


def _rss(pid):
    out = {}
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(('RssAnon:', 'RssFile:')):
                k, v = line.split(':')
                out[k] = int(v.split()[0]) * 1024
    return out


def _wait_pong(m, port, proc, timeout):
    """Polls (every 2 ms) until the server answers PING and INFO persistence says
    loading:0 (PING is answered while the snapshot loads; data commands are not)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise m.BenchError('pion-server exited with %s (log %s)' % (proc.returncode,
                                                                     proc.bench_log))
        try:
            c = m.Resp(port, timeout=5)
            try:
                if c.call('PING') == ('status', 'PONG'):
                    info = c.call('INFO', 'persistence')
                    if info[0] == 'bulk' and b'\nloading:0\r' in b'\n' + info[1]:
                        return
            finally:
                c.close()
        except (OSError, m.BenchError):
            pass
        time.sleep(0.002)
    raise m.BenchError('pion-server did not answer PING on port %d' % port)


def restart_rows(ctx, m):
    gib = 0.0625 if ctx.smoke else ctx.args.persist_gib
    srv, d = _start(ctx, m, 'pion', ['--appendfsync', 'no', '--auto-save-wal-bytes', '64gb'])
    row = m.Row('persist', 'restart, %.2g GiB snapshot (mapped): snapshot bytes / time to ready'
                % gib, 'B/s', 'cat snapshot > /dev/null', '≥ 1.0×')
    load = m.Row('persist', 'snapshot load alone (mapped, from the server log), %.2g GiB' % gib,
                 'B/s', 'cat snapshot > /dev/null', '≥ 1.0×')
    try:
        _fill(m, srv.port, gib)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        m.PROCS.stop(srv.proc)
        snap = os.path.join(d, 'pion.vstore')
        size = os.path.getsize(snap)
        # The WAL is covered by the snapshot; keep only the snapshot to load.
        for n in os.listdir(d):
            if n.startswith('pion.vstore.wal'):
                os.remove(os.path.join(d, n))
        extra = {'snapshot_bytes': size, 'rss_anon_mapped': [], 'rss_file_mapped': [],
                 'copy_restart_s': [], 'rss_anon_copy': [], 'mapped_restart_s': [],
                 'load_s_in_log': []}
        for _ in range(ctx.reps):
            cat = []
            for _ in range(3):
                t0 = time.monotonic()
                subprocess.run("cat '%s' > /dev/null" % snap, shell=True, check=True)
                cat.append(time.monotonic() - t0)
            for mode in ('yes', 'no'):
                port = m.free_port()
                cmd = [ctx.tool('pion-server'), '--kvcache', '--port', str(port), '--bind',
                       '127.0.0.1', '--dir', d, '--appendfsync', 'no', '--snapshot-mmap', mode]
                if ctx.pion_workers:
                    cmd += ['--workers', str(ctx.pion_workers)]
                log = os.path.join(d, 'log-%s' % mode)
                t0 = time.monotonic()
                # Not pinned: nothing else runs during a restart, `cat` is not pinned
                # either, and the load verifies its sections on one thread per core
                # (snapshot-verify-threads), which one pinned core would serialise.
                p = m.PROCS.start(cmd, core=None, log_path=log, name='pion-server')
                _wait_pong(m, port, p, 600)
                secs = time.monotonic() - t0
                rss = _rss(p.pid)
                m.PROCS.stop(p)
                for n in os.listdir(d):  # each start begins from the snapshot alone
                    if n.startswith('pion.vstore.wal'):
                        os.remove(os.path.join(d, n))
                if mode == 'yes':
                    row.pion.append(size / secs)
                    row.peer.append(size / min(cat))
                    extra['mapped_restart_s'].append(secs)
                    extra['rss_anon_mapped'].append(rss.get('RssAnon', 0))
                    extra['rss_file_mapped'].append(rss.get('RssFile', 0))
                    inner = re.findall(r'snapshot loaded[^:]*: .* in ([0-9.]+) s',
                                       open(log, errors='replace').read())
                    if inner:
                        extra['load_s_in_log'].append(float(inner[-1]))
                        load.pion.append(size / max(float(inner[-1]), 1e-4))
                        load.peer.append(size / min(cat))
                else:
                    extra['copy_restart_s'].append(secs)
                    extra['rss_anon_copy'].append(rss.get('RssAnon', 0))
        row.extra = extra
        for rw in (row, load):
            t = m.mmm(rw.ratios())
            if t:
                rw.met = t[1] >= 1.0
                rw.met_note = '%.2f×' % t[1]
    except m.BenchError as e:
        row.error = load.error = str(e)
    finally:
        if srv.proc.poll() is None:
            m.PROCS.stop(srv.proc)
        shutil.rmtree(d, ignore_errors=True)
    return [row, load]


def suite(ctx, m):
    """The rows of the persist suite (`m` is the harness module, bench/pionbench/harness.py)."""
    rows = []
    if not ctx.args.persist_skip_wal:
        rows += wal_rows(ctx, m)
    if not ctx.args.persist_skip_restart:
        rows += restart_rows(ctx, m)
    return rows
