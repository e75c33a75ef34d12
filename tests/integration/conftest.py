"""Shared fixtures: start the real pion-server on a free port with its own data dir.

Every test gets a fresh server unless it asks for the module-scoped one. Readiness is
polled with a deadline (no fixed sleeps). The binary comes from $PION_BIN_DIR (set by
CTest to its build tree: build/dev/bin under ASan+UBSan, build/tsan/bin under TSan) or
build/release/bin. A sanitizer report in a server's log fails the test that started it.

The launcher, the raw connections and the RESP codec are the package's
(python/pion/testing.py, python/pion/_resp.py); this file re-exports them so that
tests import them from here: BIN_DIR, ROOT, poll, free_port, ServerLog, PionServer,
RawSocket, RawConn, RawError, Verbatim, FastLaneConn.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

from pion import testing as _testing  # noqa: E402
from pion.testing import (SANITIZER_REPORT, FastLaneConn, RawConn, RawError,  # noqa: E402
                          RawSocket, ServerLog, Verbatim, free_port, poll)

BIN_DIR = Path(os.environ.get("PION_BIN_DIR", ROOT / "build" / "release" / "bin"))

__all__ = ["ROOT", "BIN_DIR", "poll", "free_port", "SANITIZER_REPORT", "ServerLog", "PionServer",
           "RawSocket", "RawConn", "RawError", "Verbatim", "FastLaneConn"]


class PionServer(_testing.PionServer):
    """One pion-server process from BIN_DIR. `args` are extra command-line flags."""

    def __init__(self, data_dir: Path, args: list[str] | None = None, kvcache: bool = True,
                 **kw):
        kw.setdefault("bin_dir", BIN_DIR)
        super().__init__(data_dir, args, kvcache, **kw)


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
