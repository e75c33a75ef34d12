"""A run's Markdown table and the machine facts it records (results.py keeps the
results directory: history, the current table, the chart)."""

import os
import subprocess
import time

from .harness import BENCH_DIR, SUITES, fmt_mmm, fmt_num, fmt_pct, fmt_ratio, mmm


def unit_fmt(unit):
    if unit == 'B/s':
        return lambda x: '%.2f GB/s' % (x / 1e9) if x >= 1e8 else '%.0f MB/s' % (x / 1e6)
    if unit == 'ops/s':
        return lambda x: fmt_num(x)
    if unit == 'µs':
        return lambda x: '%.1f µs' % x
    if unit == 'ms':
        return lambda x: '%.2f ms' % x
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


def git_sha():
    try:
        return subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                              text=True, cwd=BENCH_DIR,
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


def cpu_jiffies(core=None):
    """(busy, total) jiffies so far of all cores, or of CPU `core` (/proc/stat; busy
    leaves out idle and iowait); None when that core is not listed."""
    name = 'cpu' if core is None else 'cpu%d' % core
    with open('/proc/stat') as f:
        for line in f:
            f0 = line.split()
            if f0 and f0[0] == name:
                v = [int(x) for x in f0[1:9]]
                return sum(v) - v[3] - v[4], sum(v)
    return None


def cpu_busy(interval=1.0):
    """Fraction of all cores busy over `interval` seconds (/proc/stat)."""
    b0, t0 = cpu_jiffies()
    time.sleep(interval)
    b1, t1 = cpu_jiffies()
    return (b1 - b0) / max(1, t1 - t0)


def wait_idle(max_wait, threshold=0.15):
    """Waits up to max_wait s for the machine to be mostly idle; returns the
    last busy fraction seen (other jobs' load makes every number noisier)."""
    deadline = time.time() + max_wait
    busy = cpu_busy(0.5)
    while busy > threshold and time.time() < deadline:
        busy = cpu_busy(1.0)
    return busy
