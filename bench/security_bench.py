#!/usr/bin/env python3
"""TLS and ACL costs (bench/results/LOG.md "security").

  /usr/bin/python3 bench/security_bench.py --build build/release [--redis redis-server] [-n 40]

1. Bulk fetch over TLS vs plaintext, one client (redis-benchmark -c 1 -P 1): pion's
   16 MiB V.FETCH (8192 fp16 rows of 1024) and redis-server's GET of a 16 MiB string,
   each over plaintext and over TLS with the same certificate, protocol (TLS 1.3) and
   client (redis-benchmark --tls). Reports ms per request and GB/s.
2. The permission check: PING and KV.PREFIX.LOOKUP throughput as the default user
   (+@all ~*, the unrestricted fast path) and as a tenant (~t|* +@all -@dangerous),
   redis-benchmark -c 4 -P 16.
Certificates are generated in a temp dir with the openssl tool. Figures are noisy on a
shared machine: the script prints the median of --reps runs.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pion.testing import free_port  # noqa: E402


def certs(d: Path):
    def ossl(*a):
        subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", "2", "-subj", "/CN=bench-ca")
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "s.key", "-out", "s.csr", "-subj",
         "/CN=localhost")
    ossl("x509", "-req", "-in", "s.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "s.crt", "-days", "2", "-extfile", "ext")


def wait(port, **kw):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, socket_timeout=2, **kw).ping()
            return
        except (redis.ConnectionError, redis.TimeoutError):
            time.sleep(0.05)
    raise TimeoutError(port)


def bench(port, tls, cmd, n, c=1, p=1, d=None, user=None):
    a = ["redis-benchmark", "-p", str(port), "-n", str(n), "-c", str(c), "-P", str(p), "-q"]
    if tls:
        a += ["--tls", "--cacert", str(d / "ca.crt")]
    if user:
        a += ["--user", user[0], "-a", user[1]]
    out = subprocess.run(a + cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.findall(r"([\d.]+) requests per second", out)
    if not m:
        raise RuntimeError(out)
    return float(m[-1])


def med(v):
    return sorted(v)[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("-n", type=int, default=40, help="16 MiB requests per run")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pion-secbench-"))
    certs(tmp)
    tls = ["--tls-cert-file", str(tmp / "s.crt"), "--tls-key-file", str(tmp / "s.key"),
           "--tls-ca-cert-file", str(tmp / "ca.crt"), "--tls-auth-clients", "no",
           "--tls-protocols", "TLSv1.3"]
    procs = []
    try:
        pp, pt = free_port(), free_port()
        procs.append(subprocess.Popen(
            [f"{args.build}/bin/pion-server", "--port", str(pp), "--tls-port", str(pt), "--dir",
             str(tmp), "--kvcache", "--appendonly", "no", "--workers", "1", *tls],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        rp, rt = free_port(), free_port()
        procs.append(subprocess.Popen(
            [args.redis, "--port", str(rp), "--tls-port", str(rt), "--save", "", "--appendonly",
             "no", "--dir", str(tmp), *tls],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait(pp)
        wait(rp)
        pion = redis.Redis(port=pp)
        x = np.random.default_rng(0).random((8192, 1024), dtype=np.float32).astype(np.float16)
        pion.execute_command("KV.PREFIX.REGISTER", "b", 1024, "fp16")
        pion.execute_command("V.STOREBATCH", "b_pk", 0, 0, 8192, x.tobytes(), "FMT", "F16")
        assert len(pion.execute_command("V.FETCH", "b_pk", 0, "RANGE", 0, 8192, "FMT", "NATIVE")) == 16 << 20
        redis.Redis(port=rp).set("b", x.tobytes())
        fetch = ["V.FETCH", "b_pk", "0", "RANGE", "0", "8192", "FMT", "NATIVE"]
        print("16 MiB bulk fetch, one client, ms/request (median of %d runs of %d)" %
              (args.reps, args.n))
        rows = {}
        for name, port, tport, cmd in (("pion V.FETCH", pp, pt, fetch),
                                       ("redis GET", rp, rt, ["GET", "b"])):
            for t, prt in (("plain", port), ("tls", tport)):
                rps = med([bench(prt, t == "tls", cmd, args.n, d=tmp) for _ in range(args.reps)])
                rows[(name, t)] = 1000.0 / rps
                print(f"  {name:14s} {t:5s} {1000.0 / rps:8.2f} ms  {rps * 16 / 1024:6.2f} GiB/s")
        for name in ("pion V.FETCH", "redis GET"):
            print(f"  {name}: TLS costs x{rows[(name, 'tls')] / rows[(name, 'plain')]:.2f}")
        print(f"  pion/redis over TLS: x{rows[('pion V.FETCH', 'tls')] / rows[('redis GET', 'tls')]:.2f}"
              " (time ratio, lower is faster)")
        # The permission check.
        pion.execute_command("ACL", "SETUSER", "t", "on", ">p", "~t|*", "+@all", "-@dangerous")
        pion.execute_command("KV.PREFIX.REGISTER", "t|x", 64, "fp16")
        print("permission check: requests/s (redis-benchmark -c 4 -P 16, median of %d)" % args.reps)
        for label, cmd in (("PING", ["PING"]), ("LOOKUP", ["KV.PREFIX.LOOKUP", "t|x"])):
            d_ = med([bench(pp, False, cmd, 400000, c=4, p=16) for _ in range(args.reps)])
            t_ = med([bench(pp, False, cmd, 400000, c=4, p=16, user=("t", "p"))
                      for _ in range(args.reps)])
            print(f"  {label:7s} default {d_:10.0f}  tenant {t_:10.0f}  ratio {t_ / d_:.3f}")
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
