"""Real redis-server processes with pion.so loaded (tests of src/module).

RedisNode is one /usr/bin/redis-server on 127.0.0.1 with a free port (and, in a
cluster, a free cluster-bus port set with cluster-port) and its own directory;
readiness and cluster convergence are polled with a deadline, never slept for. The
module comes from $PION_BIN_DIR/../lib/pion.so (the build tree CTest points at).
Under the ASan+UBSan build the module needs the sanitizer runtime loaded first:
the node preloads it (LD_PRELOAD) when pion.so links it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import redis

from conftest import BIN_DIR, ServerLog, free_port

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
MODULE = (BIN_DIR.parent / "lib" / "pion.so").resolve()
FORMATS = ["int8", "turbo4", "turbo3", "turbo2", "fp16", "fp8", "mlx4g32"]


def _sanitizer_env() -> dict:
    env = dict(os.environ)
    try:
        needed = subprocess.run(["readelf", "-d", str(MODULE)], capture_output=True,
                                text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return env
    if "libasan" in needed:
        lib = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True).stdout.strip()
        env["LD_PRELOAD"] = lib
        # Redis itself is not built for LeakSanitizer; the nodes are SIGKILLed anyway.
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
    return env


class RedisNode(ServerLog):
    def __init__(self, root: Path, name: str, cluster: bool = False, args: list[str] | None = None):
        self.dir = Path(root) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.port = free_port()
        self.bus_port = free_port() if cluster else None
        self.args = list(args or [])
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "redis.log"

    def cmdline(self) -> list[str]:
        c = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--loadmodule", str(MODULE),
             "--enable-debug-command", "yes", "--save", "", "--appendonly", "no",
             "--protected-mode", "yes"]
        if self.cluster:
            c += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                  "--cluster-port", str(self.bus_port), "--cluster-node-timeout", "2000",
                  "--cluster-replica-validity-factor", "0"]
        return c + self.args

    def start(self, timeout: float = 30.0) -> "RedisNode":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmdline(), stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.dir, env=_sanitizer_env())
        log.close()
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {self.proc.returncode}:\n{self.log()}")
            try:
                c = self.client(socket_timeout=2)
                if c.info("persistence").get("loading", 0) in (0, "0"):
                    c.close()
                    return self
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                last = e
            time.sleep(0.01)  # polling interval of a deadline loop, not synchronisation
        raise TimeoutError(f"redis-server not ready on {self.port}: {last}\n{self.log()}")

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 60)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def check_logs(nodes) -> None:
    reports = [f"{n.log_path}:\n{n.sanitizer_report()}" for n in nodes if n.sanitizer_report()]
    assert not reports, "sanitizer report in a redis-server log:\n" + "\n".join(reports)


# --- namespaces: deterministic contents, written and checked the same way everywhere ---

def rows(seed: int, n: int, dim: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def hashes_blob(seed: int, n: int) -> tuple[list[int], bytes]:
    hs = [int(x) for x in np.random.default_rng(seed).integers(1, 2**63, n, dtype=np.int64)]
    return hs, np.array(hs, dtype="<u8").tobytes()


class Spec:
    """One namespace: name, format, dim, layers x tokens of rows per side."""

    def __init__(self, ns: str, i: int, dim: int = 64, layers: int = 2, tokens: int = 24):
        self.ns, self.i = ns, i
        self.fmt = FORMATS[i % len(FORMATS)]
        self.dim, self.layers, self.tokens = dim, layers, tokens
        self.hashes, self.blob = hashes_blob(1000 + i, 4)

    def sid(self, side: str) -> str:
        return f"{self.ns}_p{side}"

    def data(self, side: str, layer: int) -> np.ndarray:
        return rows(self.i * 1000 + (side == "v") * 100 + layer, self.tokens, self.dim)

    def write(self, call) -> None:
        """call(*args) sends one command (any client: RedisCluster, Redis, pion-server)."""
        assert call("KV.PREFIX.REGISTER", self.ns, self.dim, self.fmt,
                    "BLOCKS", 16, len(self.hashes), self.blob, "PREFILL_MS", 7 + self.i) == b"OK"
        for side in "kv":
            for layer in range(self.layers):
                assert call("V.STOREBATCH", self.sid(side), layer, 0, self.tokens,
                            self.data(side, layer).tobytes()) == b"OK"

    def read(self, call) -> list:
        """Every row of the namespace in every output format, plus its block table."""
        out = []
        for side in "kv":
            for fmt in ("F32", "F16", "NATIVE"):
                out.append(call("V.FETCH", self.sid(side), "BATCH", 0, self.tokens, "FMT", fmt))
            out.append(call("V.FETCH", self.sid(side), 1, 3, 0, 23, "FMT", "F16"))
        out.append(call("KV.PREFIX.BLOCKS", self.ns))
        return out


def exercise_pion_client(c, n: int = 12) -> None:
    """The same PionClient cluster code against a Redis Cluster of pion.so and against
    pion-server --cluster-emulated: namespaces given WITHOUT a hash tag (the client adds
    it), stores, fetches (also a pipeline over several nodes), lookups, receipts."""
    c.pion_stats_reset()
    before = c.kv_prefix_info()["registered_prefixes"]
    names = [f"py|v1|model{i}|p" for i in range(n)]
    data = {}
    for i, ns in enumerate(names):
        c.kv_prefix_register(ns, 64, FORMATS[i % len(FORMATS)], block_size=16,
                             hashes=[i + 1, i + 2], prefill_ms=3)
        data[ns] = rows(500 + i, 10, 64)
        c.v_storebatch(ns + "_pk", 0, 0, data[ns])
        c.v_storebatch(ns + "_pv", 0, 0, data[ns].astype(np.float16))
    for i, ns in enumerate(names):
        assert c.kv_prefix_lookup(ns)
        got = c.v_fetch_range(ns + "_pv", 0, 0, 10, fmt="F16")
        if FORMATS[i % len(FORMATS)] == "fp16":
            assert got.tobytes() == data[ns].astype(np.float16).tobytes()
        assert got.shape == (10, 64)
        assert list(c.kv_prefix_membership(ns, [i + 2, 999, i + 1])) == [True, False, True]
        assert list(c.kv_prefix_blocks(ns).hashes) == [i + 1, i + 2]
    fetched = c.fetch_pipeline([("V.FETCH", ns + "_pk", 0, "RANGE", 0, 10) for ns in names])
    singles = [c.execute("V.FETCH", ns + "_pk", 0, "RANGE", 0, 10) for ns in names]
    assert [bytes(f) for f in fetched] == singles
    st = c.pion_stats()
    assert st["kvprefix_hits"] == n and st["kvprefix_prefill_us_measured"] == n * 3000
    assert c.kv_prefix_info()["registered_prefixes"] == before + n
    assert c.kv_prefix_drop(*names) == n
    assert not c.kv_prefix_lookup(names[0])


def exercise_prompt_cache(cluster_nodes) -> None:
    """PionPromptCache(cluster=...): a whole prefix stored in one pipeline, fetched back."""
    from pion import PionPromptCache

    cache = PionPromptCache(vquant="fp16", cluster=cluster_nodes)
    rng = np.random.default_rng(5)
    k = rng.standard_normal((4, 2, 50, 16)).astype(np.float32)
    v = rng.standard_normal((4, 2, 50, 16)).astype(np.float32)
    for name in ("cache|a", "cache|b", "cache|c"):
        cache.store(name, k, v, prefix_ids=list(range(50)))
        assert cache.lookup(name)
        k2, v2 = cache.fetch(name, 50)
        assert np.array_equal(k2, k.astype(np.float16)) and np.array_equal(v2, v.astype(np.float16))
        assert cache.blocks(name).hashes.size == 3
    assert cache.drop("cache|a", "cache|b", "cache|c") == 3
    cache.close()
