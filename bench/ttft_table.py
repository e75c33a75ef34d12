#!/usr/bin/python3
"""Cold vs warm time to first token per prefix length and storage format, and fetch
bandwidth through the Python client vs raw redis-py GET from redis-server.

    PYTHONPATH=python /usr/bin/python3 bench/ttft_table.py --bin build/release/bin

Starts its own pion-server (--kvcache, temp dir, free port) and redis-server
(--save '' --appendonly no). The writer (this process) measures the cold TTFT
of a prompt = prefix + 16-token suffix (lookup miss + prefill of the prefix +
the suffix's forward pass -> first token), then stores the prefix in every
format. A reader in a separate interpreter measures the warm TTFT (lookup hit
+ fetch of K and V + torch conversion + the suffix's forward pass -> first
token). Medians of --reps runs. Target (docs/benchmarks.md "Suites and targets"): warm <= 15% of
cold at 2,048 tokens, fp16.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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
import redis  # noqa: E402

from pion import VQUANTS, PionClient, PionPromptCache  # noqa: E402
from pion.testing import PionServer, free_port  # noqa: E402

MB = 1e6


def prompt(seed: int, n: int) -> list:
    return np.random.default_rng(seed).integers(0, 32000, n).tolist()


def wait_ping(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return
        except redis.RedisError:
            time.sleep(0.02)
    raise TimeoutError(f"no server on port {port}")


def ns_of(length: int, fmt: str) -> str:
    return f"ttft|{length}|{fmt}"


# ----------------------------------------------------------------- reader process

def reader(args: argparse.Namespace) -> None:
    from pion.reference_model import ReferenceDecoder

    model = ReferenceDecoder(num_threads=args.threads)
    model.forward([1, 2, 3], None, last_only=True)
    out = {}
    for length in args.lengths:
        ids = prompt(length, length + args.suffix_len)
        prefix, suffix = ids[:length], ids[length:]
        for fmt in args.formats:
            cache = PionPromptCache(model, vquant=fmt, port=args.port, block_size=None)
            times, fetch_ms, first = [], [], None
            for _ in range(args.reps):
                f0 = cache.fetch_ms_total
                t0 = time.perf_counter()
                past = cache.get_or_prefill(prefix, ns_of(length, fmt), _refuse, output="torch")
                logits, _ = model.forward(suffix, past, last_only=True)
                first = int(logits[0, -1].argmax())
                times.append((time.perf_counter() - t0) * 1000)
                fetch_ms.append(cache.fetch_ms_total - f0)
            assert cache.stats()["hits"] == args.reps
            out[f"{length}|{fmt}"] = {
                "warm_ms": statistics.median(times),
                "fetch_ms": statistics.median(fetch_ms),
                "bytes": cache.bytes_fetched // args.reps,
                "first": first,
            }
            cache.close()
    print(json.dumps(out))


def _refuse(_ids):
    raise RuntimeError("reader expected a hit")


# ----------------------------------------------------------------- writer / driver

def ttft(args: argparse.Namespace, port: int) -> dict:
    from pion.reference_model import ReferenceDecoder

    model = ReferenceDecoder(num_threads=args.threads)
    model.forward([1, 2, 3], None, last_only=True)
    client = PionClient(port=port)
    res: dict = {}
    for length in args.lengths:
        ids = prompt(length, length + args.suffix_len)
        prefix, suffix = ids[:length], ids[length:]
        colds, prefill_ms, first = [], [], None
        past = None
        for rep in range(args.reps):
            t0 = time.perf_counter()
            assert client.kv_prefix_lookup(f"cold|{length}|{rep}") is False
            t1 = time.perf_counter()
            past = model.prefill_kv(prefix)
            t2 = time.perf_counter()
            logits, _ = model.forward(suffix, past, last_only=True)
            first = int(logits[0, -1].argmax())
            colds.append((time.perf_counter() - t0) * 1000)
            prefill_ms.append((t2 - t1) * 1000)
        res[length] = {"cold_ms": statistics.median(colds), "prefill_ms": statistics.median(prefill_ms),
                       "first": first, "formats": {}}
        for fmt in args.formats:
            cache = PionPromptCache(model, vquant=fmt, port=port)
            cache.store(ns_of(length, fmt), past, prefix_ids=prefix, prefill_ms=res[length]["prefill_ms"])
            res[length]["formats"][fmt] = {"store_ms": cache.store_ms_total, "stored_bytes": cache.bytes_stored}
            cache.close()
        print(f"  cold {length}: {res[length]['cold_ms']:.1f} ms", file=sys.stderr)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, str(HERE), "--reader", "--port", str(port), "--threads", str(args.threads),
           "--reps", str(args.reps), "--suffix-len", str(args.suffix_len),
           "--lengths", ",".join(map(str, args.lengths)), "--formats", ",".join(args.formats)]
    warm = json.loads(subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE).stdout.decode()
                      .strip().splitlines()[-1])
    for length in args.lengths:
        for fmt in args.formats:
            res[length]["formats"][fmt].update(warm[f"{length}|{fmt}"])
    res["stats"] = client.pion_stats()
    return res


def bandwidth(args: argparse.Namespace, pion_port: int, redis_port: int) -> list:
    pc = PionClient(port=pion_port)
    raw = redis.Redis(port=redis_port)  # redis-py defaults, as an application would use it
    pcr = PionClient(port=redis_port)  # the pion client's pool settings against redis-server
    rows = []
    dim = 1024  # fp16 rows of 2 KiB
    for size_mb in args.bw_sizes:
        n = int(size_mb * (1 << 20)) // (2 * dim)
        data = np.random.default_rng(1).standard_normal((n, dim)).astype(np.float16)
        ns = f"bw{size_mb}"
        pc.kv_prefix_register(ns, dim, "fp16")
        pc.v_storebatch(ns + "_pk", 0, 0, data)
        raw.set(ns, data.tobytes())
        nbytes = data.nbytes
        reps = max(5, min(50, int(200 / size_mb)))
        variants = {
            "pion_client_fetch": (lambda: pc.v_fetch_range(ns + "_pk", 0, 0, n, fmt="NATIVE", dim=dim), 1),
            "pion_client_fetch_f32": (lambda: pc.v_fetch_range(ns + "_pk", 0, 0, n, fmt="F32"), 2),
            "redis_py_get_redis": (lambda: raw.get(ns), 1),
            "pion_client_get_redis": (lambda: pcr.execute("GET", ns), 1),
        }
        got = pc.v_fetch_range(ns + "_pk", 0, 0, n, fmt="NATIVE", dim=dim)
        assert np.array_equal(got, data) and raw.get(ns) == data.tobytes()
        wall = {k: [] for k in variants}
        cpu = {k: [] for k in variants}
        # Round-robin over the variants so each sees the same machine load.
        for _ in range(reps):
            for name, (fn, _mult) in variants.items():
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        row = {"MiB": size_mb}
        for name, (_fn, mult) in variants.items():
            row[name] = mult * nbytes / statistics.median(wall[name]) / MB
            row[name + "_cpu_ms"] = statistics.median(cpu[name]) * 1000
        rows.append(row)
        print(f"  bw {size_mb} MiB done", file=sys.stderr)
        pc.kv_prefix_drop(ns)
        raw.delete(ns)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin"), help="directory of pion-server")
    ap.add_argument("--lengths", default="256,1024,2048")
    ap.add_argument("--formats", default=",".join(VQUANTS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--suffix-len", type=int, default=16)
    ap.add_argument("--bw-sizes", default="1,16,64", help="fetch sizes in MiB")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    args.formats = [x for x in args.formats.split(",") if x]
    args.bw_sizes = [float(x) if "." in x else int(x) for x in args.bw_sizes.split(",") if x]
    if args.reader:
        reader(args)
        return 0

    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    tmp = Path(tempfile.mkdtemp(prefix="pion-ttft-"))
    rport = free_port()
    pion = PionServer(tmp, bin_dir=args.bin).start(wait=False)
    pport = pion.port
    rs = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(rport), "--save", "",
                           "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    try:
        pion.wait_ready()
        wait_ping(rport, rs)
        res = ttft(args, pport)
        bw = bandwidth(args, pport, rport) if args.bw_sizes else []
    finally:
        pion.stop()
        for p in (rs,):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nload average before/after: {load0} / {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print(f"\nTTFT, reference decoder (8 layers, kv_dim 128), torch threads {args.threads}, "
          f"suffix {args.suffix_len} tokens, median of {args.reps}")
    print("| prefix | format | cold TTFT ms | warm TTFT ms | warm/cold | fetch ms | bytes fetched | same 1st token |")
    print("|---:|---|---:|---:|---:|---:|---:|:---:|")
    for length in args.lengths:
        r = res[length]
        for fmt in args.formats:
            f = r["formats"][fmt]
            print(f"| {length} | {fmt} | {r['cold_ms']:.1f} | {f['warm_ms']:.1f} | "
                  f"{100 * f['warm_ms'] / r['cold_ms']:.1f}% | {f['fetch_ms']:.1f} | {f['bytes']:,} | "
                  f"{'yes' if f['first'] == r['first'] else 'no'} |")
    if bw:
        print("\nFetch bandwidth, MB/s of payload (1 MB = 10^6 bytes; median, variants interleaved), "
              "[client CPU ms per fetch]")
        print("| MiB | pion client V.FETCH NATIVE | pion client V.FETCH F32 (same rows, 2x bytes) | "
              "redis-py GET from redis-server | pion client GET from redis-server |")
        print("|---:|---:|---:|---:|---:|")
        for row in bw:
            cells = [f"{row[k]:.0f} [{row[k + '_cpu_ms']:.1f}]" for k in
                     ("pion_client_fetch", "pion_client_fetch_f32", "redis_py_get_redis", "pion_client_get_redis")]
            print(f"| {row['MiB']} | " + " | ".join(cells) + " |")
    st = res.pop("stats")
    print("\nPION.STATS at the end:", json.dumps(st))
    if args.json:
        Path(args.json).write_text(json.dumps({"ttft": res, "bandwidth": bw, "stats": st}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
