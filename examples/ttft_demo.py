#!/usr/bin/python3
"""Time to first token, cold vs warm, across two processes sharing one pion-server.

Start a server first (README: `make run`, i.e. `pion-server --kvcache --port 1974`), then:

    PYTHONPATH=python /usr/bin/python3 examples/ttft_demo.py [--prefix-len 2048] [--vquant fp16]

* Process A (a fresh interpreter) builds the reference model and serves a request
  whose prompt is a long shared prefix (a "system prompt", --prefix-len tokens)
  plus a short user suffix: ``PionPromptCache.get_or_prefill`` misses, prefills the
  prefix (timed: that time goes to the server as PREFILL_MS), stores its K/V, then
  the suffix runs and the first token comes out. Cold TTFT = lookup + prefill +
  first token (the store, which a serving system does off the critical path, is
  reported on its own).
* Process B (another interpreter, as another machine or replica would be) serves
  the same request: ``get_or_prefill`` hits, fetches the K/V (one round trip for K
  and V), the suffix runs and the first token comes out. Warm TTFT = lookup +
  fetch + first token, for B's first request and for a second identical one.
* Stage 2 (same process B): the prefix stays on the server (A stored it with
  ``server_attention=True``: attention slots ``<ns>_attn`` too); B looks it up (V-store hit and
  slot warm) and runs the suffix with every layer's attention over the prefix computed
  by the server (``ServerAttentionDecoder``: one ``attend_query_fused`` per layer, over
  the binary fast lane when the server has one). Stage-2 TTFT = lookup + those calls +
  first token; nothing of the prefix crosses the wire.

Both must produce the same first token (bit-identical for fp16 up to the
fp16 rounding of the cached K/V; see the printout). The script then prints the
server's value receipt (PION.STATS): the prefill time it credits is exactly the
prefill A measured. Model loading is not part of either TTFT.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "python"))  # run from a checkout without installing

import numpy as np  # noqa: E402

from pion import PionClient, PionPromptCache  # noqa: E402


def _prompt(seed: int, n: int) -> list:
    return np.random.default_rng(seed).integers(0, 32000, n).tolist()


def role_main(args: argparse.Namespace) -> dict:
    """One process of the demo: role 'writer' (A) or 'reader' (B)."""
    import torch

    from pion.reference_model import ReferenceDecoder

    model = ReferenceDecoder(num_threads=args.threads)
    ids = _prompt(args.seed, args.prefix_len + args.suffix_len)
    prefix, suffix = ids[: args.prefix_len], ids[args.prefix_len:]
    cache = PionPromptCache(model, vquant=args.vquant, host=args.host, port=args.port,
                            server_attention=args.role == "writer")
    ns = args.namespace
    # warm up torch kernels on a tiny input so one-time initialisation is not timed
    model.forward(prefix[:8], None, last_only=True)

    def refuse(_ids):
        raise RuntimeError("process B expected a hit: is the server the one process A used?")

    def request() -> tuple:
        t0 = time.perf_counter()
        past = cache.get_or_prefill(prefix, ns, model.prefill_kv if args.role == "writer" else refuse,
                                    output="torch")
        logits, past2 = model.forward(suffix, past, last_only=True)
        first = int(logits[0, -1].argmax())
        ms = (time.perf_counter() - t0) * 1000.0
        return ms, logits, past2, first

    ttft_ms, logits, past2, first = request()
    if args.role == "writer":
        ttft_ms -= cache.store_ms_total  # the store is off the critical path
        again_ms = None
    else:
        # A serving process answers many requests: time a second one too (connection
        # already open), so a one-off first-request cost would show.
        again_ms = request()[0]
    s2_ms = s2_first = None
    if args.role == "reader":
        from pion.server_decode import ServerAttentionDecoder

        c2 = PionPromptCache(model, vquant=args.vquant, host=args.host, port=args.port, server_attention=True)
        c2.client.ping()  # connection set-up is not part of either TTFT
        t0 = time.perf_counter()
        if not c2.lookup(ns):
            raise RuntimeError("Stage 2: the prefix is not on the server")
        s2_first = int(ServerAttentionDecoder(model, c2, ns, len(prefix)).forward(suffix)[0, -1].argmax())
        s2_ms = (time.perf_counter() - t0) * 1000.0
    rest = model.generate([first], past2, args.gen - 1)[0].tolist() if args.gen > 1 else []
    st = cache.stats()
    return {
        "role": args.role,
        "hit": cache.last_hit,
        "ttft_ms": ttft_ms,
        "ttft_again_ms": again_ms,
        "stage2_ttft_ms": s2_ms,
        "stage2_first_token": s2_first,
        "prefill_ms": st["last_prefill_ms"],
        "store_ms": st["store_ms_total"],
        "fetch_ms": st["fetch_ms_total"],
        "bytes_stored": st["bytes_stored"],
        "bytes_fetched": st["bytes_fetched"],
        "first_token": first,
        "tokens": [first] + rest,
        "logits_head": logits[0, -1, :4].tolist(),
        "threads": torch.get_num_threads(),
    }


def run_role(role: str, args: argparse.Namespace, ns: str) -> dict:
    cmd = [sys.executable, str(HERE), "--role", role, "--namespace", ns, "--host", args.host,
           "--port", str(args.port), "--prefix-len", str(args.prefix_len), "--suffix-len",
           str(args.suffix_len), "--vquant", args.vquant, "--threads", str(args.threads),
           "--seed", str(args.seed), "--gen", str(args.gen)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parents[1] / "python"), env.get("PYTHONPATH")) if p)
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE).stdout.decode()
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=1974)
    ap.add_argument("--prefix-len", type=int, default=2048, help="shared prefix tokens (default 2048)")
    ap.add_argument("--suffix-len", type=int, default=16, help="per-request suffix tokens (default 16)")
    ap.add_argument("--vquant", default="fp16", help="storage format (fp16, fp8, int8, mlx4g32, turbo4/3/2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads in each process")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random prompt")
    ap.add_argument("--gen", type=int, default=16, help="tokens to generate after the first")
    ap.add_argument("--keep", action="store_true", help="keep the namespace on the server afterwards")
    ap.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    ap.add_argument("--namespace", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        print(json.dumps(role_main(args)))
        return 0

    client = PionClient(args.host, args.port)
    try:
        client.ping()
    except Exception as e:  # noqa: BLE001 - a friendly message for the common mistake
        print(f"cannot reach pion-server at {args.host}:{args.port} ({e}); start it with `make run`",
              file=sys.stderr)
        return 2
    from pion.reference_model import ModelConfig

    ns = PionPromptCache.make_namespace("ttft_demo", ModelConfig().model_id, args.vquant,
                                        args.prefix_len, args.seed)
    client.kv_prefix_drop(ns)  # start cold
    before = client.pion_stats()
    print(f"prefix {args.prefix_len} tokens + suffix {args.suffix_len}, vquant {args.vquant}, "
          f"torch threads {args.threads}, server {args.host}:{args.port}")
    a = run_role("writer", args, ns)
    b = run_role("reader", args, ns)
    after = client.pion_stats()
    assert not a["hit"] and b["hit"], (a["hit"], b["hit"])
    mb = 1024 * 1024
    print(f"process A (cold): TTFT {a['ttft_ms']:8.1f} ms  (prefill {a['prefill_ms']:.1f} ms, "
          f"then stored {a['bytes_stored'] / mb:.2f} MiB in {a['store_ms']:.1f} ms)")
    print(f"process B (warm): TTFT {b['ttft_ms']:8.1f} ms  (its first request; fetched "
          f"{b['bytes_fetched'] / 2 / mb:.2f} MiB per request, {b['fetch_ms'] / 2:.1f} ms on average)")
    print(f"                  TTFT {b['ttft_again_ms']:8.1f} ms  (a second identical request in the same process)")
    print(f"warm / cold: {100.0 * b['ttft_ms'] / a['ttft_ms']:.1f}% first request, "
          f"{100.0 * b['ttft_again_ms'] / a['ttft_ms']:.1f}% second request "
          f"(speed-up {a['ttft_ms'] / b['ttft_ms']:.1f}x / {a['ttft_ms'] / b['ttft_again_ms']:.1f}x)")
    print(f"process B (Stage 2): TTFT {b['stage2_ttft_ms']:7.1f} ms  (lookup + server-side attention per "
          f"layer, no fetch; first token {b['stage2_first_token']}; Stage 2 / Stage 1 "
          f"{b['stage2_ttft_ms'] / b['ttft_ms']:.2f})")
    same = sum(x == y for x, y in zip(a["tokens"], b["tokens"]))
    print(f"first token: A {a['first_token']}  B {b['first_token']}  "
          f"({same}/{len(a['tokens'])} greedy tokens identical)")
    print("PION.STATS after the run (delta over the run in brackets):")
    for key, val in after.items():
        d = val - before.get(key, 0) if isinstance(val, (int, float)) else ""
        if key in ("worker_id", "uptime_in_seconds"):
            print(f"  {key:34} {val}")
        elif isinstance(val, float):
            print(f"  {key:34} {val:.3f}  [+{d:.3f}]")
        else:
            print(f"  {key:34} {val}  [+{d}]")
    if not args.keep:
        client.kv_prefix_drop(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
