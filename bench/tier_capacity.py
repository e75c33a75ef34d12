#!/usr/bin/python3
"""The disk tier's capacity case: more data than RAM, every byte back, before and after kill -9.

A pion-server with a RAM budget (--ram) and a disk tier (--tier) receives namespaces of
fp16 rows (--ns-gib) and 2 MiB string blocks written as KV.BLOCK.CHAIN chains
(--str-gib): several times what RAM holds. Every byte is then read back and compared
(each payload is generated from its name, so nothing is kept client-side), the server is
killed with SIGKILL, restarted on the same data directory (WAL replay, then what exceeds
the budget moves to the fresh tier), and everything is read and compared again.

Reported: write and read throughput, RAM used / budget, tier bytes and entries, restart
time, and the count of wrong or missing values (must be 0). The default is the full case
(1 GiB RAM, 16 GiB tier, 12 GiB of data); `--small` is a minute-long version.

    /usr/bin/python3 bench/tier_capacity.py --build build/release [--dir /path/on/ssd] [--small]

With --save, a snapshot (KV.PREFIX.SAVE) is taken before the kill: it references the
string values already in the tier, and the restart adopts them instead of loading them
(docs/operations.md "Disk tier", Restart). Without it (or for namespaces, which a snapshot
still copies) recovery loads the data into RAM before moving the overflow to the tier, so
the machine needs RAM for it at restart. The restart's peak RSS (VmHWM) is reported.
"""
import argparse
import hashlib
import os
import signal
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pion.errors import PionError  # noqa: E402
from pion.integrations import _conn  # noqa: E402
from pion.testing import PionServer, poll  # noqa: E402

MIB = 1 << 20
DIM = 1024      # fp16 rows of 2 KiB
ROWS = 1024     # per layer and side: 2 MiB
LAYERS = 4      # a namespace: 2 sides x 4 layers x 2 MiB = 16 MiB
BLOCK = 2 * MIB
CHAIN = 32      # blocks per KV.BLOCK.CHAIN


def payload(name: str, n: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).integers(0, 65535, n // 2, dtype=np.uint16).view(np.uint8)


def info(c) -> dict:
    raw = bytes(c.call("INFO", "pion")).decode() + bytes(c.call("INFO", "memory")).decode()
    out = {}
    for line in raw.splitlines():
        k, _, v = line.partition(":")
        if v.isdigit():
            out[k] = int(v)
    return out


def vm_hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def write_all(c, namespaces: int, chains: int) -> float:
    t0 = time.perf_counter()
    for i in range(namespaces):
        ns = f"ns{i}"
        c.call("KV.PREFIX.REGISTER", ns, DIM, "fp16")
        for side in ("pk", "pv"):
            for layer in range(LAYERS):
                rows = payload(f"{ns}_{side}_{layer}", ROWS * DIM * 2)
                c.call("V.STOREBATCH", f"{ns}_{side}", layer, 0, ROWS, rows, "FMT", "F16")
    for j in range(chains):
        pairs = [(f"c{j}|{k}", payload(f"c{j}|{k}", BLOCK)) for k in range(CHAIN)]
        for r in c.chain(pairs, per_command=4):
            if r != b"OK":
                raise RuntimeError(f"CHAIN: {r}")
    return time.perf_counter() - t0


def check_all(c, namespaces: int, chains: int) -> tuple[int, float]:
    bad = 0
    t0 = time.perf_counter()
    buf = np.empty(BLOCK, np.uint8)
    for i in range(namespaces):
        ns = f"ns{i}"
        for side in ("pk", "pv"):
            for layer in range(LAYERS):
                try:
                    got = c.call("V.FETCH", f"{ns}_{side}", layer, "RANGE", 0, ROWS, "FMT",
                                 "NATIVE")
                except PionError:  # not found: counted as missing
                    got = None
                want = payload(f"{ns}_{side}_{layer}", ROWS * DIM * 2)
                if got is None or not np.array_equal(np.frombuffer(got, np.uint8), want):
                    bad += 1
    for j in range(chains):
        keys = [f"c{j}|{k}" for k in range(CHAIN)]
        for k in keys:
            n = c.get_into([k], [buf])[0]
            if n != BLOCK or not np.array_equal(buf, payload(k, BLOCK)):
                bad += 1
    return bad, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--dir", help="where the data and tier go (default: a temp dir)")
    ap.add_argument("--ram", default="1gb")
    ap.add_argument("--tier", default="16gb")
    ap.add_argument("--ns-gib", type=float, default=6.0)
    ap.add_argument("--str-gib", type=float, default=6.0)
    ap.add_argument("--small", action="store_true", help="256mb RAM, 2gb tier, 1 GiB data")
    ap.add_argument("--save", action="store_true",
                    help="KV.PREFIX.SAVE before the kill (the restart adopts the tier)")
    a = ap.parse_args()
    if a.small:
        a.ram, a.tier, a.ns_gib, a.str_gib = "256mb", "2gb", 0.5, 0.5
    namespaces = int(a.ns_gib * 1024 / (2 * LAYERS * 2))
    chains = int(a.str_gib * 1024 / (CHAIN * 2))
    base = a.dir or tempfile.mkdtemp(prefix="pion-tier-capacity-")
    os.environ.setdefault("PION_BIN_DIR", os.path.join(a.build, "bin"))
    srv = PionServer(os.path.join(base, "data"), ["--maxmemory", a.ram, "--tier-dir",
                                                  os.path.join(base, "tier"), "--tier-maxbytes",
                                                  a.tier, "--appendonly", "yes",
                                                  "--appendfsync", "no",
                                                  # two sessions per namespace, with room
                                                  "--max-sessions", str(max(256, 4 * namespaces))])
    srv.start()
    try:
        total = (namespaces * 2 * LAYERS * ROWS * DIM * 2 + chains * CHAIN * BLOCK) / 2**30
        print(f"# tier capacity: RAM {a.ram}, tier {a.tier}, {namespaces} namespaces of 16 MiB and "
              f"{chains} chains of {CHAIN} x 2 MiB ({total:.2f} GiB)")
        c = _conn.connect(f"redis://127.0.0.1:{srv.port}/0", socket_timeout=600)
        wt = write_all(c, namespaces, chains)
        poll(lambda: info(c)["tier_write_backlog_bytes"] == 0 or None, timeout=600)
        st = info(c)
        print(f"written: {total / wt:.2f} GiB/s; used_memory {st['used_memory'] / MIB:.0f} MiB; "
              f"tier_bytes {st['tier_bytes'] / 2**30:.2f} GiB, tier_entries {st['tier_entries']}, "
              f"tier evictions {st.get('tier_evictions', 0)}, vstore evictions "
              f"{st.get('vstore_evictions', 0)}")
        bad, rt = check_all(c, namespaces, chains)
        print(f"read back: {bad} wrong or missing; {total / rt:.2f} GiB/s")
        if a.save:
            t0 = time.perf_counter()
            c.call("KV.PREFIX.SAVE")
            snap = os.path.getsize(os.path.join(base, "data", "pion.vstore"))
            print(f"snapshot: {time.perf_counter() - t0:.1f} s, {snap / MIB:.1f} MiB")
        c.close()
        srv.stop(signal.SIGKILL)
        t0 = time.perf_counter()
        srv.start()
        c = _conn.connect(f"redis://127.0.0.1:{srv.port}/0", socket_timeout=600)
        poll(lambda: info(c)["tier_write_backlog_bytes"] == 0 or None, timeout=600)
        restart = time.perf_counter() - t0
        hwm = vm_hwm(srv.proc.pid)
        print(f"restart peak RSS (VmHWM): {hwm / MIB:.0f} MiB")
        st = info(c)
        bad2, rt2 = check_all(c, namespaces, chains)
        print(f"after kill -9: restart {restart:.1f} s; used_memory {st['used_memory'] / MIB:.0f} MiB; "
              f"tier_entries {st['tier_entries']}; {bad2} wrong or missing; {total / rt2:.2f} GiB/s")
        c.close()
    finally:
        srv.stop()  # also when a step fails: never leave a server behind
    return 0 if bad == 0 and bad2 == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
