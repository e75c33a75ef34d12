"""bench/pionbench/results.py: the newest result file per suite, history.csv, the
current table (the `bench_results` CTest; no server, a second)."""
from __future__ import annotations

import csv
import json
import os
import sys

MD = '.md'  # names built, not written out: tools/docs_links.py checks every cited *.md
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pionbench import results  # noqa: E402
from pionbench.harness import Row  # noqa: E402
from pionbench.report import render_md  # noqa: E402


def write_run(d: str, name: str, date: str, time_: str, rows: list[Row], md_only=False):
    meta = {'date': date, 'time': time_, 'sha': name.split('-')[3], 'cpu': 'x', 'kernel': 'k',
            'server_core': 0, 'client_core': 1, 'pion_args': '', 'reps': 2,
            'load_start': '0', 'load_end': '0', 'notes': []}
    with open(os.path.join(d, name + '.md'), 'w') as f:
        f.write(render_md(rows, meta))
    jrows = [r.to_json() for r in rows]
    if not md_only:
        with open(os.path.join(d, name + '.json'), 'w') as f:
            json.dump({'meta': meta, 'rows': jrows}, f)
        results.append_history(os.path.join(d, 'history.csv'), jrows, meta)


def row(suite: str, workload: str, pion: list[float], peer: list[float]) -> Row:
    r = Row(suite, workload, 'ops/s', 'redis', '≥ 1.0×')
    r.pion, r.peer = pion, peer
    r.met = min(r.ratios()) >= 1.0
    r.met_note = '%.2f×' % r.ratios()[0]
    return r


def history(d: str) -> list[dict[str, str]]:
    with open(os.path.join(d, 'history.csv'), newline='') as f:
        return list(csv.DictReader(f))


def test_the_newest_file_of_each_suite_stays(tmp_path):
    d = str(tmp_path)
    write_run(d, '2026-01-01-aaaaaaa', '2026-01-01', '10:00:00',
              [row('small', 'PING', [10, 12], [10, 10]), row('bulk', 'SET 1 MiB', [5, 6], [4, 4])])
    write_run(d, '2026-01-02-bbbbbbb-small', '2026-01-02', '10:00:00',
              [row('small', 'PING', [9, 9], [10, 10])])
    assert results.prune(d) == []  # aaaaaaa still holds bulk's newest rows
    cur = results.current_files(d)
    assert [os.path.basename(cur[s]) for s in ('small', 'bulk')] == [
        '2026-01-02-bbbbbbb-small' + MD, '2026-01-01-aaaaaaa' + MD]
    # Same date: the time in the .json orders them.
    write_run(d, '2026-01-02-ccccccc-bulk', '2026-01-02', '09:00:00',
              [row('bulk', 'SET 1 MiB', [7, 7], [4, 4])])
    write_run(d, '2026-01-02-0000000-bulk', '2026-01-02', '11:00:00',
              [row('bulk', 'SET 1 MiB', [8, 8], [4, 4])])
    removed = sorted(os.path.basename(p) for p in results.prune(d))
    assert removed == ['2026-01-01-aaaaaaa.json', '2026-01-01-aaaaaaa' + MD,
                       '2026-01-02-ccccccc-bulk.json', '2026-01-02-ccccccc-bulk' + MD]
    assert sorted(os.listdir(d)) == ['2026-01-02-0000000-bulk.json', '2026-01-02-0000000-bulk' + MD,
                                     '2026-01-02-bbbbbbb-small.json',
                                     '2026-01-02-bbbbbbb-small' + MD, 'history.csv']
    # Every run's rows were appended once, none twice by the prune.
    assert [(h['sha'], h['suite'], h['ratio_median']) for h in history(d)] == [
        ('aaaaaaa', 'small', '1.1'), ('aaaaaaa', 'bulk', '1.375'), ('bbbbbbb', 'small', '0.9'),
        ('ccccccc', 'bulk', '1.75'), ('0000000', 'bulk', '2')]


def test_a_file_missing_from_history_is_backfilled_from_its_markdown(tmp_path):
    d = str(tmp_path)
    write_run(d, '2026-01-01-aaaaaaa-small', '2026-01-01', '', [
        row('small', 'PING', [1.5e6, 1.7e6, 2e6], [1e6, 1e6, 1e6])], md_only=True)
    write_run(d, '2026-01-02-bbbbbbb-small', '2026-01-02', '', [row('small', 'PING', [1, 1], [1, 1])])
    results.prune(d)
    h = history(d)
    assert [(x['sha'], x['pion_median'], x['ratio_median'], x['ratio_min'], x['ratio_max'],
             x['met']) for x in h] == [('bbbbbbb', '1', '1', '1', '1', 'yes'),
                                       ('aaaaaaa', '1.7e+06', '1.7', '1.5', '2', 'yes')]
    assert h[1]['unit'] == 'ops/s' and h[1]['peer_median'] == '1e+06'


def test_publish_rewrites_the_table_and_check_sees_a_stale_one(tmp_path):
    d = str(tmp_path / 'results')
    os.mkdir(d)
    doc = str(tmp_path / ('doc' + MD))
    with open(doc, 'w') as f:
        f.write('# x\n\n%s\nold\n%s\n' % (results.BEGIN, results.END))
    write_run(d, '2026-01-01-aaaaaaa-small', '2026-01-01', '', [row('small', 'PING', [2, 2], [1, 1])])
    assert len(results.check(d, doc)) == 1
    results.publish(d, doc)
    text = open(doc).read()
    assert '[2026-01-01-aaaaaaa-small%s](../bench/results/2026-01-01-aaaaaaa-small%s)' % (MD, MD) in text
    assert '| PING | 2.00 | redis: 1.00 | 2.00× | ≥ 1.0× | yes (2.00×) |' in text
    assert 'old' not in text and results.check(d, doc) == []
    write_run(d, '2026-01-02-bbbbbbb-small', '2026-01-02', '', [row('small', 'PING', [3, 3], [1, 1])])
    open(os.path.join(d, '2026-01-02-bbbbbbb-small.png'), 'w').close()  # an older run's chart
    assert len(results.check(d, doc)) == 4  # the superseded .md and .json, the .png, the table
    results.publish(d, doc)
    assert results.check(d, doc) == []
    assert sorted(set(os.listdir(d)) - {'chart.png'}) == [  # no chart without matplotlib
        '2026-01-02-bbbbbbb-small.json', '2026-01-02-bbbbbbb-small' + MD, 'history.csv']


def test_parse_cell():
    assert results.parse_cell('5.97 GB/s (5.64 GB/s–6.02 GB/s)') == ([5.97e9, 5.64e9, 6.02e9], 'B/s')
    assert results.parse_cell('redis GET: 51 k (49 k–53 k)') == ([51e3, 49e3, 53e3], 'ops/s')
    assert results.parse_cell('0.91× (0.87×–0.95×)') == ([0.91, 0.87, 0.95], 'x')
    assert results.parse_cell('—') == ([], '')


def test_the_repository_is_current():
    """bench/results holds only each suite's newest file and docs/benchmarks.md's table
    matches them (after a run or a hand edit: bench/run.py --publish)."""
    assert results.check(os.path.join(os.path.dirname(HERE), 'results')) == []
