"""Helpers for tests and benchmarks that drive a real pion-server.

* :func:`free_port`, :func:`poll` (a deadline loop, never a sleep to synchronise);
* :class:`PionServer`: one ``pion-server`` process on a free port with its own data
  directory, its log, start / stop / kill / restart, and readiness (PING answered
  and recovery finished);
* :class:`RawConn`: a raw RESP connection (exact bytes on the wire, RESP2 and RESP3
  replies parsed by :mod:`pion._resp`, errors returned as :class:`RawError`);
* :class:`FastLaneConn`: a raw fast-lane connection (frames of :mod:`pion.fastlane`).

The binary comes from ``bin_dir``, else ``$PION_BIN_DIR``, else ``build/release/bin``
of the source tree this package sits in (or of the working directory).
Standard library plus redis-py (readiness and :meth:`PionServer.client`).
"""
from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from . import _resp
from . import fastlane as _lane

__all__ = ["free_port", "poll", "default_bin_dir", "SANITIZER_REPORT", "ServerLog", "PionServer",
           "RawSocket", "RawConn", "RawError", "Verbatim", "FastLaneConn"]

T = TypeVar("T")


# Ports this process has handed out, each with its lock file held open (flock) until
# the process exits, so that test processes running side by side never hand out the
# same port: a server that restarts on its port (PionServer.restart) leaves it unbound
# for a moment, and without the lock another process's free_port could take it, and
# its clients would then talk to the other process's server.
_PORT_LOCKS: dict[int, Any] = {}
_PORT_LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "pion-test-ports"


def _reserve(port: int) -> bool:
    import fcntl

    if port in _PORT_LOCKS:
        return False  # this process's already
    _PORT_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    f = open(_PORT_LOCK_DIR / f"{port}.lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return False  # another process's
    _PORT_LOCKS[port] = f
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago, reserved for this
    process (no other test process using this function gets it while this one lives)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if _reserve(port):
            return port
    raise RuntimeError("no free port could be reserved after 1000 tries")


def poll(fn: Callable[[], T], timeout: float = 15.0, interval: float = 0.01) -> T:
    """Calls fn until it returns a truthy value or the deadline passes; returns the value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)  # polling interval of a deadline loop, not synchronisation


def damage_tier_values(tier_file: Path) -> int:
    """Flips three bytes inside the value of every extent of a disk-tier file (each
    extent starts with a 4 KiB header beginning with b"PIONTIER"; the bytes flipped are
    1,000 bytes into its value), syncs, and returns how many extents it damaged."""
    damaged = 0
    with open(tier_file, "r+b") as f:
        data = f.read()
        at = 0
        while True:
            at = data.find(b"PIONTIER", at)
            if at < 0:
                break
            f.seek(at + 4096 + 1000)
            f.write(b"\xff\xfe\xfd")
            damaged += 1
            at += 4096
    os.sync()
    return damaged


def default_bin_dir() -> Path:
    """``$PION_BIN_DIR``, else build/release/bin of the source tree (or of the cwd)."""
    env = os.environ.get("PION_BIN_DIR")
    if env:
        return Path(env)
    tree = Path(__file__).resolve().parents[2]
    if (tree / "CMakeLists.txt").exists():
        return tree / "build" / "release" / "bin"
    return Path.cwd() / "build" / "release" / "bin"


# First line of an ASan / LSan / TSan / UBSan report in a server's stderr.
SANITIZER_REPORT = re.compile(
    r"^(==\d+==ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|\S+:\d+:\d+: runtime error: )",
    re.M)


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
    """One pion-server process. `args` are extra command-line flags.

    With ``kvcache`` the fast lane is off unless ``args`` names ``--fastlane-port``
    (its default port + 1 may be another server's free port).
    """

    def __init__(self, data_dir: Path | str, args: list[str] | None = None, kvcache: bool = True,
                 *, bin_dir: Path | str | None = None, port: int | None = None,
                 prefix: list[str] | None = None) -> None:
        self.dir = Path(data_dir)
        self.args = list(args or [])
        self.kvcache = kvcache
        self.bin_dir = Path(bin_dir) if bin_dir is not None else default_bin_dir()
        self.port = port or free_port()
        self.prefix = list(prefix or [])  # e.g. ["taskset", "-c", "0"]
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"
        # With --requirepass, readiness checks and client() authenticate.
        self.password: str | None = None
        if "--requirepass" in self.args:
            self.password = self.args[self.args.index("--requirepass") + 1]

    @property
    def binary(self) -> str:
        return str(self.bin_dir / "pion-server")

    def cmdline(self) -> list[str]:
        c = [self.binary, "--port", str(self.port), "--dir", str(self.dir)]
        if self.kvcache:
            c.append("--kvcache")
            if "--fastlane-port" not in self.args:
                c += ["--fastlane-port", "0"]
        return self.prefix + c + self.args

    def start(self, wait: bool = True, timeout: float = 60.0) -> "PionServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmdline(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"pion-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = redis.Redis(port=self.port, socket_timeout=2, password=self.password)
                r.ping()
                # Wait for recovery to finish: data commands answer -LOADING meanwhile.
                info = r.info("persistence") if self.kvcache else {}
                pid = r.info("server").get("process_id") if not self.prefix else None
                r.close()
                r.connection_pool.disconnect()  # redis-py 4.3's close() keeps the socket
                if pid is not None and self.proc is not None and int(pid) != self.proc.pid:
                    # Another process's server holds the port: this one cannot bind it.
                    raise RuntimeError(f"port {self.port} is served by process {pid}, not by "
                                       f"this pion-server ({self.proc.pid}):\n{self.log()}")
                if info.get("loading", 0) in (0, "0"):
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                last = e
            time.sleep(0.01)  # polling interval of a deadline loop, not synchronisation
        raise TimeoutError(f"pion-server not ready on port {self.port}: {last}\n{self.log()}")

    def client(self, **kw: Any) -> Any:
        """A ``redis.Redis`` on this server (authenticated with its password)."""
        import redis

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
    """A raw client socket: exact bytes on the wire, a receive buffer (``buf``, bytes)
    and EOF detection. RawConn (RESP) and FastLaneConn (frames) build on it."""

    def __init__(self, port: int, timeout: float = 30.0, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
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

    def read_raw(self, n: int) -> bytes:
        """Exactly n bytes as they arrived."""
        self._need(n)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

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


class RawError(str):
    """An error reply: the text after '-'."""


class Verbatim(bytes):
    """A RESP3 verbatim string's body (without the 'txt:' prefix)."""


def _key(k: Any) -> Any:
    return k.decode() if isinstance(k, bytes) else k


class RawConn(RawSocket, _resp.Parser):
    """A raw socket speaking RESP: exact bytes on the wire, RESP2 and RESP3 replies
    parsed into Python values: ``+`` as str, errors as :class:`RawError` (returned,
    not raised), bulks as bytes, ``=`` as :class:`Verbatim`, ``~`` as a set (of
    scalars), ``%`` as a dict with str keys."""

    encode = staticmethod(_resp.encode)

    def call(self, *args: Any) -> Any:
        self.send(self.encode(*args))
        return self.read()

    # _resp.Parser's source, over RawSocket's buffer
    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bulk_body(self, n: int) -> bytes:
        self._need(n + 2)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    _exact = _bulk_body  # n bytes and the CRLF after them (the name older tests use)

    # value hooks
    def simple(self, data: bytes) -> str:
        return data.decode()

    def error(self, text: str) -> RawError:
        return RawError(text)

    def verbatim(self, data: bytes) -> Verbatim:
        return Verbatim(data[4:])

    def make_set(self, items: list[Any]) -> Any:
        return set(items) if all(isinstance(i, (str, bytes, int)) for i in items) else items

    def make_map(self, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        return {_key(k): v for k, v in pairs}


class FastLaneConn(RawSocket):
    """A raw fast-lane connection: exact frames on the wire (:func:`pion.fastlane.frame`)."""

    def read(self) -> tuple[int, bytes]:
        """One response frame: (status, body)."""
        self._need(_lane.HEADER_SIZE)
        magic, status, n = struct.unpack_from("<HBI", self.buf)
        assert magic == _lane.MAGIC, self.buf[:16]
        self._need(_lane.HEADER_SIZE + n)
        body = self.buf[_lane.HEADER_SIZE:_lane.HEADER_SIZE + n]
        self.buf = self.buf[_lane.HEADER_SIZE + n:]
        return status, body

    def call(self, op: int, body: bytes = b"") -> tuple[int, bytes]:
        self.send(_lane.frame(op, body))
        return self.read()
