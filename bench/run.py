#!/usr/bin/python3
"""`make bench`: pion-server side by side with redis-server and the machine's ceilings.

Every suite starts its own servers on free loopback ports with persistence off,
pins the servers to one core and the load generator to another (where the
machine has two), repeats each measurement (min/median/max), and stops
everything it started, also on Ctrl-C or an exception. The result is a Markdown
table (bench/results/<date>-<sha>[-<suites>].md) and a JSON file of the raw numbers.
Ratios are "pion's advantage": > 1 means pion is better (throughput pion/peer, latency
peer/pion).

    /usr/bin/python3 bench/run.py --build build/release [--suite NAME] [--smoke]
    /usr/bin/python3 bench/run.py --publish | --check

Suites: small, bulk, membership, quant, formats, attend, strings, cluster, persist, blocks,
adapters, tier (see docs/benchmarks.md, docs/attention.md and docs/cluster.md).
The harness is the package bench/pionbench (harness, one module per group of suites,
report, results); it uses the standard library, the Python package's pion._resp and
pion.testing (python/), and matplotlib for the chart. A run into bench/results appends
its rows to bench/results/history.csv, then keeps only the newest result file of each
suite, redraws bench/results/chart.png and rewrites the current table in
docs/benchmarks.md (pionbench/results.py; --publish does only that, --check fails when
any of it is out of date).
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from pionbench.harness import (BENCH_DIR, PROCS, SUITES, BenchError, Ctx, Row, fmt_mmm,
                               fmt_ratio, on_signal)
from pionbench.report import cpu_busy, cpu_name, git_sha, render_md, wait_idle
from pionbench.results import append_history, check, publish
from pionbench.suites_adapters import suite_adapters
from pionbench.suites_attend import suite_attend_all
from pionbench.suites_blocks import suite_blocks
from pionbench.suites_core import suite_bulk, suite_membership, suite_small
from pionbench.suites_more import suite_cluster, suite_persist, suite_strings, suite_tier
from pionbench.suites_quant import suite_formats, suite_quant


SUITE_FNS = {'small': suite_small, 'bulk': suite_bulk, 'membership': suite_membership,
             'quant': suite_quant, 'formats': suite_formats,
             'attend': suite_attend_all, 'strings': suite_strings,
             'cluster': suite_cluster, 'persist': suite_persist,
             'blocks': suite_blocks, 'adapters': suite_adapters, 'tier': suite_tier}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default='build/release', help='build dir (bin/ inside)')
    ap.add_argument('--suite', action='append', choices=SUITES,
                    help='run only this suite (repeatable)')
    ap.add_argument('--smoke', action='store_true',
                    help='tiny sizes, one repetition, results in a temp dir, < 60 s')
    ap.add_argument('--reps', type=int, default=3, help='repetitions (default 3)')
    ap.add_argument('--out', help='results dir (default bench/results; smoke: a temp dir)')
    ap.add_argument('--no-pin', action='store_true', help='do not pin to cores')
    ap.add_argument('--pion-workers', type=int,
                    help='pion-server --workers (default 1 when pinned to one core)')
    ap.add_argument('--pion-arg', action='append', default=[],
                    help='extra pion-server argument (repeatable)')
    ap.add_argument('--quant-filter', help='bench_quant --benchmark_filter')
    ap.add_argument('--persist-gib', type=float, default=1.0,
                    help='persist suite: snapshot size for the restart row (GiB)')
    ap.add_argument('--persist-skip-wal', action='store_true',
                    help='persist suite: only the restart row')
    ap.add_argument('--persist-skip-restart', action='store_true',
                    help='persist suite: only the WAL rows')
    ap.add_argument('--tier-rows', default='cold,random,evict,ttft',
                    help='tier suite: the rows to run, a comma-separated subset of '
                         'cold,random,evict,ttft (default all)')
    ap.add_argument('--wait-idle', type=float,
                    help='seconds to wait for an idle machine before each suite '
                         '(default 30; smoke 0)')
    ap.add_argument('--publish', action='store_true',
                    help='run nothing: prune bench/results, redraw the chart, rewrite the '
                         'current table of docs/benchmarks.md')
    ap.add_argument('--check', action='store_true',
                    help='run nothing: fail if bench/results or that table is out of date')
    args = ap.parse_args()
    results_dir = os.path.join(BENCH_DIR, 'results')
    if args.publish or args.check:
        lines = publish(results_dir) if args.publish else check(results_dir)
        for line in lines:
            print(line)
        return 1 if args.check and lines else 0
    if args.reps < 1:
        ap.error('--reps must be >= 1')
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    suites = args.suite or SUITES
    tmp = tempfile.mkdtemp(prefix='pion-bench-')
    ctx = Ctx(args, tmp)
    if args.out:
        out_dir = args.out
    elif args.smoke:
        out_dir = os.path.join(tmp, 'results')
    else:
        out_dir = results_dir
    os.makedirs(out_dir, exist_ok=True)
    load_start = '%.2f' % os.getloadavg()[0]
    t0 = time.time()
    rows = []
    failed = False
    try:
        for s in suites:
            ts = time.time()
            wait = args.wait_idle if args.wait_idle is not None else (0 if args.smoke else 30)
            busy = wait_idle(wait) if wait > 0 else cpu_busy(0.2)
            ctx.notes.append('suite %s started with the machine %.0f%% busy (other jobs)'
                             % (s, 100 * busy))
            print('== suite %s (machine %.0f%% busy before)' % (s, 100 * busy),
                  file=sys.stderr, flush=True)
            try:
                srows = SUITE_FNS[s](ctx)
            except BenchError as e:
                r = Row(s, '(suite)', '', '', '—')
                r.error = str(e)
                srows = [r]
            finally:
                PROCS.stop_all()
            for r in srows:
                line = '%-60s %s' % (r.workload, 'ERROR ' + r.error if r.error else
                                     'ratio %s met=%s %s' % (
                                         fmt_mmm(r.ratios(), fmt_ratio), r.met, r.met_note))
                print('   ' + line, file=sys.stderr, flush=True)
            print('   (%.1f s)' % (time.time() - ts), file=sys.stderr, flush=True)
            rows += srows
    except KeyboardInterrupt:
        print('interrupted: stopping servers', file=sys.stderr)
        PROCS.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        return 130
    finally:
        PROCS.stop_all()

    sha = git_sha()
    now = datetime.datetime.now(datetime.timezone.utc)
    date = now.date().isoformat()
    meta = {
        'date': date, 'time': now.strftime('%H:%M:%S'), 'sha': sha, 'cpu': cpu_name(), 'kernel': os.uname().release,
        'server_core': ctx.server_core, 'client_core': ctx.client_core,
        'pion_args': '--kvcache --appendonly no' + (
            ' --workers %d' % ctx.pion_workers if ctx.pion_workers else '') +
        (' ' + ' '.join(args.pion_arg) if args.pion_arg else ''),
        'reps': ctx.reps, 'load_start': load_start,
        'load_end': '%.2f' % os.getloadavg()[0], 'notes': list(ctx.notes),
        'seconds': round(time.time() - t0, 1), 'suites': suites, 'smoke': args.smoke,
    }
    name = '%s-%s' % (date, sha)
    if args.suite and not args.smoke:
        name += '-' + '-'.join(args.suite)
    base = os.path.join(out_dir, name)
    jrows = [r.to_json() for r in rows]
    with open(base + '.md', 'w') as f:
        f.write(render_md(rows, meta))
    with open(base + '.json', 'w') as f:
        json.dump({'meta': meta, 'rows': jrows}, f, indent=1)
    print('wrote %s.md (%.0f s)' % (base, time.time() - t0), file=sys.stderr)
    if out_dir == results_dir:
        append_history(os.path.join(out_dir, 'history.csv'), jrows, meta)
        print('\n'.join(publish(out_dir)), file=sys.stderr)
    failed = any(r.error and not r.unavailable for r in rows)
    if args.smoke:
        sys.stdout.write(render_md(rows, meta))
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    finally:
        PROCS.stop_all()
