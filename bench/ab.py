#!/usr/bin/env python3
"""Before/after benchmark of two builds, alternated ABBA.

    /usr/bin/python3 bench/ab.py --a ../base/build/release --b build/release \\
        --suite small --rounds 4

Runs `bench/run.py --suite S` on build A and build B, `--rounds` times,
alternating the order (A B, then B A, ...): on a shared machine whichever
run goes first in a pair tends to be faster, and an ABAB order hands that to
one side. Every repetition of every round is kept; the table compares the
median of all of a side's values, and gives pion's ratio to its peer
(redis-server beside it in the same run) for each side, which shows how much
the machine itself moved. Results go under --out: one directory of run.py's
files per suite, side and round, and the table as a markdown file per suite
(also printed).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(dirs):
    rows = {}
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, '*.json'))):
            with open(f) as fh:
                doc = json.load(fh)
            for r in doc.get('rows', []):
                if r.get('error') or not r.get('pion'):
                    continue
                e = rows.setdefault(r['workload'], {'unit': r['unit'], 'pion': [], 'ratio': []})
                e['pion'] += r['pion']
                e['ratio'] += r.get('ratio') or []
    return rows


def lower_is_better(unit):
    return unit in ('s', 'ms', 'us', 'ns') or unit.endswith(' s') or unit.startswith('ms')


def table(suite, a_dirs, b_dirs, a_name, b_name):
    a, b = load(a_dirs), load(b_dirs)
    out = [f'## {suite}: {b_name} against {a_name}', '',
           f'| workload | unit | {a_name} (n) | {b_name} (n) | B/A | pion/peer A -> B |',
           '|---|---|---|---|---|---|']
    for w, ea in a.items():
        eb = b.get(w)
        if eb is None:
            continue
        ma, mb = statistics.median(ea['pion']), statistics.median(eb['pion'])
        rel = (ma / mb) if lower_is_better(ea['unit']) else (mb / ma)
        ra = statistics.median(ea['ratio']) if ea['ratio'] else float('nan')
        rb = statistics.median(eb['ratio']) if eb['ratio'] else float('nan')
        out.append(f"| {w} | {ea['unit']} | {ma:.4g} ({len(ea['pion'])}) | "
                   f"{mb:.4g} ({len(eb['pion'])}) | {rel:.3f}× | {ra:.2f}× -> {rb:.2f}× |")
    return '\n'.join(out) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--a', required=True, help='build dir of the before side (bin/ inside)')
    ap.add_argument('--b', required=True, help='build dir of the after side')
    ap.add_argument('--a-name', default='A')
    ap.add_argument('--b-name', default='B')
    ap.add_argument('--suite', action='append', required=True, help='run.py suite (repeatable)')
    ap.add_argument('--rounds', type=int, default=4, help='pairs of runs (default 4)')
    ap.add_argument('--reps', type=int, default=3, help='run.py --reps (default 3)')
    ap.add_argument('--wait-idle', type=int, default=5, help='run.py --wait-idle (default 5)')
    ap.add_argument('--out', default='/tmp/pion-ab', help='results dir (default /tmp/pion-ab)')
    ap.add_argument('--table-only', action='store_true', help='run nothing: redraw the tables')
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    os.makedirs(args.out, exist_ok=True)
    for suite in args.suite:
        dirs = {'a': [], 'b': []}
        for i in range(1, args.rounds + 1):
            order = ('a', 'b') if i % 2 == 1 else ('b', 'a')
            for side in order:
                d = os.path.join(args.out, f'{suite}-{side}-{i}')
                dirs[side].append(d)
                if args.table_only:
                    continue
                build = args.a if side == 'a' else args.b
                cmd = [sys.executable, os.path.join(HERE, 'run.py'), '--build', build,
                       '--suite', suite, '--reps', str(args.reps),
                       '--wait-idle', str(args.wait_idle), '--out', d]
                print(f'[ab] {suite} round {i}/{args.rounds}: {side} ({build})', flush=True)
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        md = table(suite, dirs['a'], dirs['b'], args.a_name, args.b_name)
        with open(os.path.join(args.out, f'ab-{suite}.md'), 'w') as fh:
            fh.write(md)
        print(md)


if __name__ == '__main__':
    main()
