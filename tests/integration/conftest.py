"""Shared fixtures: start the real pion-server on a free port with its own data dir.

Every test gets a fresh server unless it asks for the module-scoped one. Readiness is
polled with a deadline (no fixed sleeps). The binary comes from $PION_BIN_DIR (set by
CTest to its build tree: build/dev/bin under ASan+UBSan, build/tsan/bin under TSan) or
build/release/bin. A sanitizer report in a server's log fails the test that started it.
"""
from __future__ import annotations

import os
import re
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


def poll(fn, timeout=15.0, interval=0.01):
    """Calls fn until it returns a truthy value or the deadline passes; returns the value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)  # polling interval of a deadline loop, not synchronisation


# First line of an ASan / LSan / TSan / UBSan report in a server's stderr.
SANITIZER_REPORT = re.compile(
    r"^(==\d+==ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|\S+:\d+:\d+: runtime error: )",
    re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerLog:
    """The log of a server process this test started (`log_path`), and the first
    sanitizer report in it."""

    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def sanitizer_report(self) -> str | None:
        """The log from the first sanitizer report on (None without one)."""
        text = self.log()
        m = SANITIZER_REPORT.search(text)
        return text[m.start():m.start() + 8000] if m else None


class PionServer(ServerLog):
    """One pion-server process. `args` are extra command-line flags."""

    def __init__(self, data_dir: Path, args: list[str] | None = None, kvcache: bool = True):
        self.dir = Path(data_dir)
        self.args = list(args or [])
        self.kvcache = kvcache
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"
        # With --requirepass, readiness checks and client() authenticate.
        self.password: str | None = None
        if "--requirepass" in self.args:
            self.password = self.args[self.args.index("--requirepass") + 1]

    @property
    def binary(self) -> str:
        return str(BIN_DIR / "pion-server")

    def cmdline(self) -> list[str]:
        c = [self.binary, "--port", str(self.port), "--dir", str(self.dir)]
        if self.kvcache:
            c.append("--kvcache")
            # The fast lane's default port (port + 1) may be another test's free port:
            # off unless the test asks for it (test_fastlane.py picks a free one).
            if "--fastlane-port" not in self.args:
                c += ["--fastlane-port", "0"]
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
                r = redis.Redis(port=self.port, socket_timeout=2, password=self.password)
                r.ping()
                # Wait for recovery to finish: data commands answer -LOADING meanwhile.
                info = r.info("persistence") if self.kvcache else {}
                r.close()
                r.connection_pool.disconnect()  # redis-py 4.3's close() keeps the socket
                if info.get("loading", 0) in (0, "0"):
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                last = e
            time.sleep(0.01)  # polling interval of a deadline loop, not synchronisation
        raise TimeoutError(f"pion-server not ready on port {self.port}: {last}\n{self.log()}")

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 60)
        kw.setdefault("password", self.password)
        return redis.Redis(port=self.port, **kw)

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


class RawSocket:
    """A raw client socket: exact bytes on the wire, a receive buffer, and EOF
    detection. RawConn (RESP) and the fast-lane tests' frame client build on it."""

    def __init__(self, port: int, timeout: float = 30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed by server")
        self.buf += chunk

    def _need(self, n: int) -> None:
        while len(self.buf) < n:
            self._fill()

    def at_eof(self, timeout: float = 10.0) -> bool:
        """True once the server closed the connection (within `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk
        return False


class RawConn(RawSocket):
    """A raw socket speaking RESP: exact bytes on the wire, RESP2 and RESP3 replies
    parsed into Python values (errors come back as RawError, not raised)."""

    @staticmethod
    def encode(*args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def call(self, *args):
        self.send(self.encode(*args))
        return self.read()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read_raw(self, n: int) -> bytes:
        """Exactly n bytes as they arrived."""
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RawError(rest.decode())
        if t == b":":
            return int(rest)
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n)
            return Verbatim(data[4:]) if t == b"=" else data
        if t in (b"*", b"~", b">"):  # '>': a RESP3 push (Pub/Sub), read as a list
            n = int(rest)
            if n < 0:
                return None
            items = [self.read() for _ in range(n)]
            return set(items) if t == b"~" and all(
                isinstance(i, (str, bytes, int)) for i in items) else items
        if t == b"%":
            return {_key(self.read()): self.read() for _ in range(int(rest))}
        if t == b"_":
            return None
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest)
        raise AssertionError(f"bad reply type {line!r}")


class RawError(str):
    """An error reply: the text after '-'."""


class Verbatim(bytes):
    """A RESP3 verbatim string's body (without the 'txt:' prefix)."""


def _key(k):
    return k.decode() if isinstance(k, bytes) else k


@pytest.fixture
def raw_factory():
    """raw_factory(server) -> RawConn; all are closed at the end."""
    conns: list[RawConn] = []

    def make(server: "PionServer", timeout: float = 30.0) -> RawConn:
        c = RawConn(server.port, timeout)
        conns.append(c)
        return c

    yield make
    for c in conns:
        try:
            c.close()
        except OSError:
            pass


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
    reports = []
    for s in started:
        s.stop(signal.SIGKILL)
        rep = s.sanitizer_report()
        if rep:
            reports.append(f"{s.log_path}:\n{rep}")
    if reports:
        pytest.fail("sanitizer report in the server log:\n" + "\n".join(reports), pytrace=False)


@pytest.fixture
def server(server_factory) -> PionServer:
    return server_factory()


@pytest.fixture
def r(server) -> redis.Redis:
    c = server.client()
    yield c
    c.close()
