#!/usr/bin/python3
"""Time to first token and per-token decode: cold prefill vs Stage 1 (fetch) vs Stage 2
(server-side attention), on the reference model, every measurement in a fresh process.

    PYTHONPATH=python /usr/bin/python3 bench/stage2_ttft.py --bin build/release/bin \
        [--lens 256,1024,2048,8192] [--reps 5] [--cold-reps 5]

Starts its own pion-server (--kvcache, default --attend-precision f16, the fast lane on a
free port, temp dir). Per prefix length:

* cold (``--cold-reps`` writer processes): lookup miss + prefill of the prefix + the
  16-token question's forward pass -> first token; the first writer stores the prefix with
  ``PionPromptCache(server_attention=True)`` (V-store rows and attention slots), outside the timing;
* Stage 1 and Stage 2 (``--reps`` reader processes, each measuring both): Stage 1 =
  lookup + fetch of K and V + torch conversion + the question's forward -> first token;
  Stage 2 = lookup (V-store and slot) + the question through ``ServerAttentionDecoder``
  (one ``attend_query_fused`` per layer with all 16 rows, over the fast lane) -> first
  token. Then 8 greedy decode steps each way: the per-token latency.

Prints a Markdown table of medians (docs/python.md "Stage 2 measured here").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402

from pion.testing import PionServer, free_port  # noqa: E402

QUESTION, DECODE_STEPS = 16, 8


def prompt(seed: int, n: int) -> list:
    return np.random.default_rng(seed).integers(0, 32000, n).tolist()


def role_writer(port: int, n: int, store: bool) -> dict:
    from pion import PionPromptCache
    from pion.reference_model import ReferenceDecoder

    m = ReferenceDecoder(num_threads=1)
    ids = prompt(n, n)
    q = prompt(n + 1, QUESTION)
    cache = PionPromptCache(m, port=port, server_attention=True)
    ns = cache.namespace_for(ids)
    m.forward(ids[:8], None, last_only=True)  # one-time torch initialisation, untimed
    t0 = time.perf_counter()
    hit = cache.lookup(ns) if not store else False
    past = m.prefill_kv(ids)
    logits, _ = m.forward(q, past, last_only=True)
    first = int(logits[0, -1].argmax())
    cold_ms = (time.perf_counter() - t0) * 1000.0
    if store:
        cache.store(ns, past, prefix_ids=ids)
    return {"cold_ms": cold_ms, "first": first, "ns": ns, "hit": hit}


def role_reader(port: int, n: int, ns: str) -> dict:
    from pion import PionPromptCache
    from pion.reference_model import ReferenceDecoder
    from pion.server_decode import ServerAttentionDecoder

    m = ReferenceDecoder(num_threads=1)
    q = prompt(n + 1, QUESTION)
    m.forward(q[:8], None, last_only=True)
    c1 = PionPromptCache(m, port=port)
    c2 = PionPromptCache(m, port=port, server_attention=True)
    c2.client.ping()
    c1.client.ping()
    # Stage 1
    t0 = time.perf_counter()
    past = c1.get_or_prefill(prompt(n, n), ns, lambda _i: (_ for _ in ()).throw(RuntimeError("miss")),
                             output="torch")
    logits, past = m.forward(q, past, last_only=True)
    first1 = int(logits[0, -1].argmax())
    s1_ms = (time.perf_counter() - t0) * 1000.0
    assert c1.last_hit
    tok, dts = first1, []
    for _ in range(DECODE_STEPS):
        t = time.perf_counter()
        logits, past = m.forward([tok], past, last_only=True)
        tok = int(logits[0, -1].argmax())
        dts.append((time.perf_counter() - t) * 1000.0)
    s1_tok = statistics.median(dts)
    toks1 = tok
    # Stage 2
    t0 = time.perf_counter()
    assert c2.lookup(ns)
    dec = ServerAttentionDecoder(m, c2, ns, n)
    first2 = int(dec.forward(q)[0, -1].argmax())
    s2_ms = (time.perf_counter() - t0) * 1000.0
    tok, dts = first2, []
    for _ in range(DECODE_STEPS):
        t = time.perf_counter()
        tok = int(dec.forward([tok])[0, -1].argmax())
        dts.append((time.perf_counter() - t) * 1000.0)
    s2_tok = statistics.median(dts)
    return {"s1_ms": s1_ms, "s2_ms": s2_ms, "s1_tok_ms": s1_tok, "s2_tok_ms": s2_tok, "first1": first1,
            "first2": first2, "last1": toks1, "last2": tok, "lane_queries": c2.lane_queries,
            "bytes_fetched": c1.bytes_fetched}


def run(args: list) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, str(HERE), *args], env=env, check=True, stdout=subprocess.PIPE)
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin"))
    ap.add_argument("--lens", default="256,1024,2048,8192")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=5)
    ap.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ns", help=argparse.SUPPRESS)
    ap.add_argument("--store", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "writer":
        print(json.dumps(role_writer(a.port, a.n, a.store)))
        return 0
    if a.role == "reader":
        print(json.dumps(role_reader(a.port, a.n, a.ns)))
        return 0
    with tempfile.TemporaryDirectory(prefix="pion-s2bench-") as d:
        srv = PionServer(d, ["--fastlane-port", str(free_port()), "--appendonly", "no"],
                         bin_dir=a.bin).start()
        port = srv.port
        try:
            load = os.getloadavg()[0]
            rows = []
            for n in [int(x) for x in a.lens.split(",")]:
                w = run(["--role", "writer", "--port", str(port), "--n", str(n), "--store"])
                cold = [w["cold_ms"]] + [run(["--role", "writer", "--port", str(port), "--n", str(n)])["cold_ms"]
                                         for _ in range(a.cold_reps - 1)]
                rs = [run(["--role", "reader", "--port", str(port), "--n", str(n), "--ns", w["ns"]])
                      for _ in range(a.reps)]
                med = {k: statistics.median(r[k] for r in rs) for k in ("s1_ms", "s2_ms", "s1_tok_ms", "s2_tok_ms")}
                same = all(r["first1"] == w["first"] and r["first2"] == w["first"] for r in rs)
                rows.append((n, statistics.median(cold), med, same, rs[0]["lane_queries"], len(cold)))
                print(f"# {n}: cold {cold} s1 {[r['s1_ms'] for r in rs]} s2 {[r['s2_ms'] for r in rs]}",
                      file=sys.stderr, flush=True)
        finally:
            srv.stop()
    print(f"load average at start {load:.1f}; torch 1 thread; {QUESTION}-token question; medians of "
          f"{a.reps} reader processes (cold: writer processes, count in the table)")
    print()
    print("| prefix | cold TTFT | Stage 1 TTFT | Stage 2 TTFT | S2/S1 | decode/token S1 | decode/token S2 "
          "| same first token |")
    print("|---:|---:|---:|---:|---:|---:|---:|:---:|")
    for n, cold, med, same, lq, nc in rows:
        print(f"| {n:,} | {cold:,.0f} ms ({nc}) | {med['s1_ms']:.1f} ms | {med['s2_ms']:.1f} ms | "
              f"{med['s2_ms'] / med['s1_ms']:.2f} | {med['s1_tok_ms']:.1f} ms | {med['s2_tok_ms']:.1f} ms | "
              f"{'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
