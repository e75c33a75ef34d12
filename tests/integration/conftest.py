"""Shared fixtures: start the real pion-server on a free port with its own data dir.

Every test gets a fresh server unless it asks for the module-scoped one. Readiness is
polled with a deadline (no fixed sleeps). The binary comes from $PION_BIN_DIR (set by
CTest) or build/release/bin.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("PION_BIN_DIR", ROOT / "build" / "release" / "bin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PionServer:
    """One pion-server process. `args` are extra command-line flags."""

    def __init__(self, data_dir: Path, args: list[str] | None = None, kvcache: bool = True):
        self.dir = Path(data_dir)
        self.args = list(args or [])
        self.kvcache = kvcache
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"

    @property
    def binary(self) -> str:
        return str(BIN_DIR / "pion-server")

    def cmdline(self) -> list[str]:
        c = [self.binary, "--port", str(self.port), "--dir", str(self.dir)]
        if self.kvcache:
            c.append("--kvcache")
        return c + self.args

    def start(self, wait: bool = True, timeout: float = 60.0) -> "PionServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmdline(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"pion-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = redis.Redis(port=self.port, socket_timeout=2)
                r.ping()
                # Wait for recovery to finish: data commands answer -LOADING meanwhile.
                info = r.info("persistence") if self.kvcache else {}
                r.close()
                if info.get("loading", 0) in (0, "0"):
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                last = e
            time.sleep(0.01)  # polling interval of a deadline loop, not synchronisation
        raise TimeoutError(f"pion-server not ready on port {self.port}: {last}\n{self.log()}")

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 60)
        return redis.Redis(port=self.port, **kw)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self, sig: int = signal.SIGTERM) -> "PionServer":
        self.stop(sig)
        return self.start()


@pytest.fixture
def tmpdir_path():
    with tempfile.TemporaryDirectory(prefix="pion-test-") as d:
        yield Path(d)


@pytest.fixture
def server_factory(tmpdir_path):
    """Returns a function that starts a server with extra args; all are stopped at the end."""
    started: list[PionServer] = []

    def make(args: list[str] | None = None, kvcache: bool = True, sub: str = "data",
             start: bool = True) -> PionServer:
        s = PionServer(tmpdir_path / sub, args, kvcache)
        started.append(s)
        return s.start() if start else s

    yield make
    for s in started:
        s.stop(signal.SIGKILL)


@pytest.fixture
def server(server_factory) -> PionServer:
    return server_factory()


@pytest.fixture
def r(server) -> redis.Redis:
    c = server.client()
    yield c
    c.close()
