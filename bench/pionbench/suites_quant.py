"""Suites quant (bench_quant kernels) and formats (stored bytes and fetch per vquant)."""

import json
import statistics

from .harness import BenchError, Resp, Row, VQUANTS, memcpy_probe, pion_bench
from .suites_core import pion_info


def suite_quant(ctx):
    """bench_quant (Google Benchmark) kernels vs memcpy of the same bytes."""
    exe = ctx.tool('bench_quant', required=False)
    rows = []
    if exe is None:
        ctx.notes.append('quant suite skipped: bench_quant not built in %s' % ctx.bin)
        return []
    args = [exe, '--benchmark_format=json',
            '--benchmark_min_time=%s' % ('0.01' if ctx.smoke else '0.2')]
    if not ctx.smoke:
        args.append('--benchmark_repetitions=%d' % ctx.reps)
    if ctx.args.quant_filter:
        args.append('--benchmark_filter=%s' % ctx.args.quant_filter)
    elif ctx.smoke:
        args.append('--benchmark_filter=/1024$')
    out = ctx.run_client(args, timeout=120 if ctx.smoke else 900)
    j = json.loads(out)
    rows = quant_rows(j, ctx)
    if not rows:
        row = Row('quant', 'bench_quant', 'Gelem/s', 'memcpy', '—')
        row.error = 'bench_quant reported no recognisable kernels'
        rows = [row]
    return rows


def quant_rows(j, ctx):
    """Rows per (op, format, dim): Gelem/s vs memcpy of the same f32 bytes (what
    an encode reads and a decode writes), bench_quant's memcpy_f32/<dim> of the
    same run; without it, pion-bench's memcpy probe of the same bytes."""
    runs = {}
    for b in j.get('benchmarks', []):
        if b.get('run_type') == 'aggregate' or b.get('error_occurred'):
            continue
        name = b.get('run_name') or b['name']
        if b.get('items_per_second'):
            runs.setdefault(name, []).append(b['items_per_second'] / 1e9)
    memcpy = {}
    for name, vals in runs.items():
        parts = name.split('/')
        if parts[0].startswith('memcpy') and len(parts) > 1 and parts[1].isdigit():
            memcpy[int(parts[1])] = vals
    rows = []
    order = {f: i for i, f in enumerate(VQUANTS)}
    keys = []
    for name in runs:
        parts = name.split('/')
        if len(parts) >= 3 and parts[0] in ('decode', 'encode') and parts[2].isdigit():
            keys.append((parts[0], order.get(parts[1], 99), int(parts[2]), parts[1], name))
    for op, _, dim, fmt, name in sorted(keys):
        if op == 'decode':
            target = 1.5 if fmt.startswith('turbo') else 4.0
            ttext = 'decode ≥ %.1f Gelem/s' % target
        else:
            target = None
            ttext = '— (encode: no target)'
        row = Row('quant', '%s %s dim %d' % (op, fmt, dim), 'Gelem/s',
                  'memcpy of the f32 bytes', ttext)
        row.pion = runs[name]
        mem = memcpy.get(dim)
        if mem is None:
            nbytes = 131072 * 4
            key = ('probe', nbytes)
            if key not in ctx.tools:
                ctx.tools[key] = memcpy_probe(ctx, nbytes, 0.05 if ctx.smoke else 0.3)
            mem = [ctx.tools[key] / 4 / 1e9]
        row.peer = [mem[min(i, len(mem) - 1)] for i in range(len(row.pion))]
        med = statistics.median(row.pion)
        if target:
            row.met = med >= target
            row.met_note = '%.2f Gelem/s vs %.1f' % (med, target)
        else:
            row.met_note = 'info'
        rows.append(row)
    return rows


# Stored bytes per row at D (docs/quant_formats.md §3).
def expected_row_bytes(fmt, d):
    return {'fp16': 2 * d, 'fp8': 4 + d + d // 16, 'int8': d + 4, 'mlx4g32': d * 5 // 8,
            'turbo4': 4 + d * 9 // 16, 'turbo3': 4 + d * 7 // 16,
            'turbo2': 4 + d * 5 // 16}[fmt]


def suite_formats(ctx):
    """Bytes per token and fetch bandwidth per vquant at kv_dim 1024."""
    d = 1024
    tokens = 64 if ctx.smoke else 1024
    dur = 0.2 if ctx.smoke else 1.5
    rows = []
    pion = ctx.start_pion()
    try:
        fetch_bps = {}
        for fmt in VQUANTS:
            row = Row('formats', '%s: stored bytes/token, kv_dim %d' % (fmt, d), 'B',
                      'docs/quant_formats.md §3', 'equals the table (≤ +1%)', higher_better=False)
            rf = Row('formats', '%s: V.FETCH %d rows FMT F16, 1 client' % (fmt, tokens), 'B/s',
                     'fp16 session, same request', '— (info)')
            try:
                c = Resp(pion.port)
                ns = 'fmt_' + fmt
                c.expect(('status', 'OK'), 'KV.PREFIX.REGISTER', ns, d, fmt)
                blob = bytes(make_f16_rows(tokens, d))
                c.expect(('status', 'OK'), 'V.STOREBATCH', ns + '_pk', 0, 0, tokens, blob,
                         'FMT', 'F16')
                info = pion_info(pion, 'V.INFO', ns + '_pk')
                c.close()
                stored = None
                for key in ('bytes', 'vstore_bytes', 'stored_bytes'):
                    if key in info:
                        stored = int(info[key])
                        break
                want = expected_row_bytes(fmt, d)
                row.peer = [float(want)]
                if stored is not None:
                    per_tok = stored / tokens
                    row.pion = [per_tok]
                    row.met = per_tok <= want * 1.01
                    row.met_note = '%.1f B vs %d B (%.2f× smaller than fp16)' % (
                        per_tok, want, 2.0 * d / per_tok)
                else:
                    row.met_note = 'V.INFO has no bytes field: %s' % sorted(info)[:8]
                res = [pion_bench(ctx, pion, 'fetch', clients=1, payload=tokens * d * 2,
                                  duration=dur, kv_dim=d, vquant=fmt, in_fmt='F16',
                                  out_fmt='F16', ns='ff_' + fmt)
                       for _ in range(ctx.reps)]
                fetch_bps[fmt] = [x['bytes_per_s'] for x in res]
                rf.pion = fetch_bps[fmt]
                rf.extra = {'tokens_per_s': [x['ops_per_s'] * tokens for x in res],
                            'p50_us': [x['p50_us'] for x in res]}
                rf.met_note = 'info'
            except BenchError as e:
                row.error = rf.error = str(e)
            rows += [row, rf]
        for rf in rows:
            if rf.unit == 'B/s' and 'fp16' in fetch_bps:
                rf.peer = list(fetch_bps['fp16'])
    finally:
        pion.stop()
    return rows


def make_f16_rows(rows, d):
    """Deterministic finite fp16 values (|v| < 1), little-endian."""
    out = bytearray(rows * d * 2)
    x = 12345
    for i in range(rows * d):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        h = ((x >> 5) & 0x8000) | ((1 + (x >> 11) % 14) << 10) | (x & 0x3ff)
        out[2 * i] = h & 0xff
        out[2 * i + 1] = h >> 8
    return out
