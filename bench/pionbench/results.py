"""bench/results: the newest result file of each suite, history.csv, the chart.

A run writes `<date>-<sha>[-<suites>].md` (and `.json`); then `publish()` removes every
older result file that is no longer any suite's newest (its rows are in history.csv: each
run appends them, and a file whose rows are missing there is back-filled before it goes),
redraws chart.png and rewrites the current table in docs/benchmarks.md. The table and
the chart are built from the kept `.md` files, so they always match them.
"""
from __future__ import annotations

import csv
import json
import os
import re
import statistics

from .harness import BENCH_DIR, SUITES

HISTORY_FIELDS = ['date', 'sha', 'suite', 'workload', 'unit', 'pion_median', 'peer',
                  'peer_median', 'ratio_median', 'ratio_min', 'ratio_max', 'met', 'error']
RESULT_NAME = re.compile(r'^(\d{4}-\d{2}-\d{2})-.+\.md$')
DOC = os.path.join(os.path.dirname(BENCH_DIR), 'docs', 'benchmarks.md')
BEGIN = '<!-- the current table: written by bench/run.py, do not edit by hand -->'
END = '<!-- end of the current table -->'
# Cell suffix -> (scale, unit) when a figure is read back from a Markdown table.
UNITS = {'GB/s': (1e9, 'B/s'), 'MB/s': (1e6, 'B/s'), 'µs': (1, 'µs'), 'ms': (1, 'ms'),
         'B': (1, 'B'), '×': (1, 'x'), '%': (1, '%'), 'k': (1e3, 'ops/s'),
         'M': (1e6, 'ops/s'), 'G': (1e9, 'ops/s'), '': (1, '')}


def history_row(r: dict, meta: dict) -> list[str]:
    """One history.csv line from a row as a result .json stores it."""
    def med(v: list) -> str:
        v = [x for x in v if x is not None]
        return '%.6g' % statistics.median(v) if v else ''
    ratios = r.get('ratio') or []
    return [meta['date'], meta['sha'], r['suite'], r['workload'], r.get('unit', ''),
            med(r.get('pion') or []), r.get('peer', ''), med(r.get('peer_values') or []),
            med(ratios), '%.4g' % min(ratios) if ratios else '',
            '%.4g' % max(ratios) if ratios else '',
            '' if r.get('met') is None else ('yes' if r['met'] else 'no'), r.get('error') or '']


def append_history(path: str, rows: list[dict], meta: dict) -> None:
    """Appends one CSV line per row to `path` (the header first when the file is new)."""
    new = not os.path.exists(path)
    with open(path, 'a', newline='') as f:
        w = csv.writer(f)
        if new:
            w.writerow(HISTORY_FIELDS)
        w.writerows(history_row(r, meta) for r in rows)


def md_tables(path: str) -> dict[str, list[list[str]]]:
    """Each suite's table in a result .md: the 8 cells of every row (workload, pion, peer,
    ratio, ceiling, % of ceiling, target, met), in the file's order."""
    out: dict[str, list[list[str]]] = {}
    suite = None
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = re.match(r'## (\S+)\s*$', line)
            if m:
                suite = m.group(1) if m.group(1) in SUITES else None
            elif suite and line.startswith('| ') and not line.startswith('| workload'):
                cells = [c.strip() for c in line.strip()[1:-1].split('|')]
                if len(cells) == 8:
                    out.setdefault(suite, []).append(cells)
    return out


def parse_cell(cell: str) -> tuple[list[float], str]:
    """The numbers of a 'median (min–max)' cell, median first, and their unit."""
    vals, unit = [], ''
    for num, suffix in re.findall(r'(-?\d+(?:\.\d+)?)\s?(GB/s|MB/s|µs|ms|×|%|B|k|M|G)?',
                                  cell.rsplit(': ', 1)[-1]):
        scale, unit = UNITS[suffix or '']
        vals.append(float(num) * scale)
    return vals, unit


def md_row(suite: str, cells: list[str]) -> dict:
    """A result .md row in the .json row's form (medians and the ratio's range only)."""
    pion, unit = parse_cell(cells[1])
    peer, _ = parse_cell(cells[2])
    ratio, _ = parse_cell(cells[3])
    met = cells[7]
    return {'suite': suite, 'workload': cells[0], 'unit': unit, 'pion': pion[:1],
            'peer': cells[2].rsplit(': ', 1)[0], 'peer_values': peer[:1], 'ratio': ratio,
            'met': None if met.startswith('—') else met.startswith('yes'),
            'error': met.split(': ', 1)[-1] if met.startswith('**error**') else None}


def file_facts(md: str) -> tuple[dict, list[dict]]:
    """The meta and rows of a result file: its .json, or read back from the .md."""
    js = md[:-3] + '.json'
    if os.path.exists(js):
        with open(js) as f:
            d = json.load(f)
        return d['meta'], d['rows']
    with open(md, encoding='utf-8') as f:
        m = re.match(r'# pion bench: (\S+) \((\w+)', f.readline())
    meta = {'date': m.group(1), 'sha': m.group(2)} if m else {
        'date': os.path.basename(md)[:10], 'sha': ''}
    return meta, [md_row(s, c) for s, rows in md_tables(md).items() for c in rows]


def result_files(results_dir: str) -> list[str]:
    """Every result .md, oldest first (by date, then the time in its .json, then name)."""
    def key(p: str) -> tuple[str, str, str]:
        name = os.path.basename(p)
        meta = file_facts(p)[0] if os.path.exists(p[:-3] + '.json') else {}
        return name[:10], meta.get('time', ''), name[:-3]
    files = [os.path.join(results_dir, n) for n in os.listdir(results_dir)
             if RESULT_NAME.match(n)]
    return sorted(files, key=key)


def current_files(results_dir: str) -> dict[str, str]:
    """suite -> the newest result .md holding it, in SUITES order."""
    newest = {}
    for p in result_files(results_dir):
        for s in md_tables(p):
            newest[s] = p
    return {s: newest[s] for s in SUITES if s in newest}


def prune(results_dir: str, keep: set[str] | None = None) -> list[str]:
    """Removes each result file that is no suite's newest (or not in `keep`), after
    back-filling its rows into history.csv if they are not there yet; returns the removed
    paths."""
    hist = os.path.join(results_dir, 'history.csv')
    seen: set[tuple[str, ...]] = set()
    if os.path.exists(hist):
        with open(hist, newline='') as f:
            seen = {tuple(line) for line in csv.reader(f)}
    if keep is None:
        keep = set(current_files(results_dir).values())
    removed = []
    for md in result_files(results_dir):
        if md in keep:  # the one chart is chart.png: a run's own .png (older runs) goes
            if os.path.exists(md[:-3] + '.png'):
                os.remove(md[:-3] + '.png')
                removed.append(md[:-3] + '.png')
            continue
        meta, rows = file_facts(md)
        missing = [r for r in rows if tuple(history_row(r, meta)) not in seen]
        append_history(hist, missing, meta)
        for ext in ('.md', '.json', '.png'):
            if os.path.exists(md[:-3] + ext):
                os.remove(md[:-3] + ext)
                removed.append(md[:-3] + ext)
    return removed


def render_current(results_dir: str) -> str:
    """The current table of docs/benchmarks.md: each suite's rows from its newest file."""
    L = [BEGIN, '']
    for suite, md in current_files(results_dir).items():
        name = os.path.basename(md)
        L += ['**%s** ([%s](../bench/results/%s)):' % (suite, name, name), '',
              '| workload | pion | peer | ratio | target | met |', '|---|---|---|---|---|---|']
        for c in md_tables(md)[suite]:
            L.append('| %s |' % ' | '.join(c[:4] + c[6:]))
        L.append('')
    return '\n'.join(L + [END])


def render_chart(results_dir: str, path: str) -> str | None:
    """chart.png: each current row's ratio (median, min–max) and, where the target is a
    ratio, the target; returns why there is no chart, or None."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib not installed (scripts/deps.sh --bench): no chart'
    items = []
    for suite, md in current_files(results_dir).items():
        for c in md_tables(md)[suite]:
            ratio, _ = parse_cell(c[3])
            if not ratio or c[1].endswith(' B') or (suite == 'quant' and 'dim 1024' not in c[0]):
                continue
            target = re.search(r'[≥≤]\s*(\d+(?:\.\d+)?)×', c[6])
            color = '#3a7' if c[7].startswith('yes') else '#c44' if 'NO' in c[7] else '#999'
            items.append(('%s: %s' % (suite, c[0][:70]), ratio, target, color))
    if not items:
        return 'no ratios to chart'
    items.reverse()
    fig, ax = plt.subplots(figsize=(11, 0.22 * len(items) + 1.2))
    for y, (_, r, target, color) in enumerate(items):
        ax.barh(y, r[0] - 1.0, left=1.0, color=color, height=0.7)
        if len(r) == 3:
            ax.plot([r[1], r[2]], [y, y], color='#333', lw=0.8)
        if target:
            ax.plot(float(target.group(1)), y, marker='|', color='k', markersize=9)
    ax.axvline(1.0, color='k', lw=0.8)
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([i[0] for i in items], fontsize=6)
    ax.set_xscale('log')
    ax.set_xlabel("pion's advantage over the peer (median bar, min–max line; | the target; "
                  'green met, red missed, grey no target)', fontsize=8)
    ax.set_title('pion vs peers: the newest result of each suite (bench/results)', fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return None


def publish(results_dir: str, doc: str = DOC) -> list[str]:
    """After a run into bench/results: prune, redraw the chart, rewrite the doc's table.
    Returns what it did, one line each."""
    out = ['removed %s (rows in history.csv)' % os.path.basename(p) for p in prune(results_dir)]
    err = render_chart(results_dir, os.path.join(results_dir, 'chart.png'))
    out.append(err or 'wrote chart.png')
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    a, b = text.index(BEGIN), text.index(END) + len(END)
    with open(doc, 'w', encoding='utf-8') as f:
        f.write(text[:a] + render_current(results_dir) + text[b:])
    out.append('rewrote the current table in ' + os.path.relpath(doc))
    return out


def check(results_dir: str, doc: str = DOC) -> list[str]:
    """What is out of date: result files that are no suite's newest, and a doc table that
    differs from render_current(). Empty when all is current."""
    keep = set(current_files(results_dir).values())
    known = {'chart.png', 'history.csv', 'LOG.md'}
    known |= {os.path.basename(p)[:-3] + ext for p in keep for ext in ('.md', '.json')}
    out = ['%s: not a suite\'s newest result (run bench/run.py --publish)' % n
           for n in sorted(os.listdir(results_dir))
           if n not in known and not n.endswith('.tmp')]  # *.tmp: ignored by git
    with open(doc, encoding='utf-8') as f:
        if render_current(results_dir) not in f.read():
            out.append('%s: the current table differs from bench/results '
                       '(run bench/run.py --publish)' % os.path.relpath(doc))
    return out
