#!/usr/bin/python3
"""Durability benchmarks (product.md §14 "WAL" and "restart" rows), run side by side:

  1. V.STOREBATCH throughput with --appendonly no / appendfsync everysec / always,
     and redis-server SET of the same payloads with AOF off / everysec / always;
  2. SAVE throughput (MB/s) and restart time of a ~1 GiB snapshot against
     `cat pion.vstore > /dev/null` on the same file.

    /usr/bin/python3 bench/persist_bench.py --build build/persist [--quick]

Servers use a temp dir on the work tree's filesystem (the disk under test).
Prints a Markdown table; needs pion-server and pion-bench in <build>/bin.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import numpy as np
import redis

MIB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            r = redis.Redis(port=port)
            r.ping()
            info = r.info("persistence")
            if info.get("loading", 0) in (0, "0"):
                return
        except (redis.ConnectionError, redis.BusyLoadingError):
            pass
        time.sleep(0.02)
    raise TimeoutError("server not ready")


class Server:
    def __init__(self, args, d, kind="pion", build=None):
        self.port = free_port()
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.log = os.path.join(d, "server.log")
        if kind == "pion":
            cmd = [os.path.join(build, "bin", "pion-server"), "--port", str(self.port), "--dir", d,
                   "--kvcache"] + args
        else:
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--dir", d] + args
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(120)


def bench(build, port, workload, payload, clients, duration, ns):
    args = [os.path.join(build, "bin", "pion-bench"), "--port", str(port), "--workload", workload,
            "--clients", str(clients), "--payload", str(payload), "--duration", str(duration),
            "--ns", ns]
    if workload == "storebatch":
        args += ["--kv-dim", "1024", "--vquant", "fp16", "--in-fmt", "F16"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def throughput(build, root, quick):
    rows = []
    sizes = [MIB] if quick else [64 * 1024, MIB]
    dur = 2 if quick else 4
    for size in sizes:
        for clients in ([8] if quick else [1, 8]):
            res = {}
            for name, kind, args in [
                ("pion no-persist", "pion", ["--appendonly", "no"]),
                ("pion everysec", "pion", ["--appendfsync", "everysec"]),
                ("pion always", "pion", ["--appendfsync", "always"]),
                ("redis no-aof", "redis", ["--appendonly", "no"]),
                ("redis everysec", "redis", ["--appendonly", "yes", "--appendfsync", "everysec"]),
                ("redis always", "redis", ["--appendonly", "yes", "--appendfsync", "always"]),
            ]:
                d = tempfile.mkdtemp(dir=root)
                s = Server(args, d, kind, build)
                try:
                    wl = "storebatch" if kind == "pion" else "set"
                    r = bench(build, s.port, wl, size, clients, dur, "p%d" % size)
                    res[name] = r
                finally:
                    s.stop(signal.SIGKILL)
                    shutil.rmtree(d, ignore_errors=True)
            rows.append((size, clients, res))
    return rows


def restart(build, root, gib):
    d = tempfile.mkdtemp(dir=root)
    s = Server(["--appendfsync", "no", "--auto-save-wal-bytes", "64gb"], d, "pion", build)
    c = redis.Redis(port=s.port)
    total = int(gib * (1 << 30))
    rows_per = 512
    dim = 1024
    blob = np.random.default_rng(1).standard_normal((rows_per, dim)).astype(np.float16).tobytes()
    n = 0
    ns = 0
    while n * len(blob) < total:
        name = "r%d" % ns
        c.execute_command("KV.PREFIX.REGISTER", name, dim, "fp16")
        for layer in range(32):
            for side in ("_pk", "_pv"):
                c.execute_command("V.STOREBATCH", name + side, layer, 0, rows_per, blob, "FMT", "F16")
                n += 1
                if n * len(blob) >= total:
                    break
            if n * len(blob) >= total:
                break
        ns += 1
    t0 = time.monotonic()
    c.execute_command("KV.PREFIX.SAVE")
    save_s = time.monotonic() - t0
    snap = os.path.join(d, "pion.vstore")
    size = os.path.getsize(snap)
    c.close()
    s.stop(signal.SIGKILL)
    os.remove(os.path.join(d, "pion.vstore.wal")) if False else None
    # cat of the same (page-cached) file, best of 3
    cat = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run("cat '%s' > /dev/null" % snap, shell=True, check=True)
        cat.append(time.monotonic() - t0)
    loads = []
    for _ in range(2):
        t0 = time.monotonic()
        s2 = Server(["--appendfsync", "no"], d, "pion", build)
        loads.append(time.monotonic() - t0)
        s2.stop(signal.SIGKILL)
    log = open(os.path.join(d, "server.log")).read()
    inner = [float(x) for x in re.findall(r"snapshot loaded: .* in ([0-9.]+) s", log)]
    shutil.rmtree(d, ignore_errors=True)
    return size, save_s, min(cat), min(loads), min(inner) if inner else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/persist")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--skip-restart", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pion-persist-bench-", dir=os.path.abspath(a.build))
    try:
        if not a.skip_throughput:
            print("| payload | clients | config | MB/s | ops/s | p50 ms | p99 ms |")
            print("|---|---|---|---|---|---|---|")
            for size, clients, res in throughput(a.build, root, a.quick):
                for name, r in res.items():
                    print("| %d KiB | %d | %s | %.0f | %.0f | %.2f | %.2f |" % (
                        size // 1024, clients, name, r["bytes_per_s"] / 1e6, r["ops_per_s"],
                        r["p50_us"] / 1e3, r["p99_us"] / 1e3))
                base = res["pion no-persist"]["bytes_per_s"]
                print("| | | everysec / no-persist = %.2f; pion always / redis always = %.2f | | | | |"
                      % (res["pion everysec"]["bytes_per_s"] / base,
                         res["pion always"]["bytes_per_s"] / res["redis always"]["bytes_per_s"]))
        if not a.skip_restart:
            size, save_s, cat_s, load_s, inner = restart(a.build, root, a.gib)
            mb = size / 1e6
            print()
            print("snapshot %.0f MB: SAVE %.2f s (%.0f MB/s); cat %.2f s (%.0f MB/s); "
                  "restart to ready %.2f s (%.0f MB/s), snapshot load %.2f s (%.0f MB/s); "
                  "load/cat bandwidth = %.2f" % (
                      mb, save_s, mb / save_s, cat_s, mb / cat_s, load_s, mb / load_s,
                      inner or 0, mb / inner if inner else 0,
                      (mb / load_s) / (mb / cat_s)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
