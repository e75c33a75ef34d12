"""KV.PREFIX.SAVE runs in the background and completes its reply later
(docs/ARCHITECTURE.md "Life of a request", step 6): while a large snapshot is
written, other clients on the same worker (-w 1) are still served, the SAVE client
gets +OK afterwards, and replies pipelined behind a SAVE keep request order.
"""
from __future__ import annotations

import select
import time

import numpy as np
import pytest

from conftest import RawConn, RawError

DIM = 1024                # fp16 rows of 2 KiB
ROWS_PER_BATCH = 4096     # 8 MiB per V.STOREBATCH
TOTAL_MB = 320


def fill(c: RawConn, ns: str, mb: int) -> np.ndarray:
    assert c.call("KV.PREFIX.REGISTER", ns, DIM, "fp16") == "OK"
    rng = np.random.default_rng(7)
    arr = rng.standard_normal((ROWS_PER_BATCH, DIM)).astype(np.float16)
    batches = mb * (1 << 20) // arr.nbytes
    payload = arr.tobytes()
    # Pipelined in groups (the replies are small), then checked.
    for g in range(0, batches, 8):
        n = min(8, batches - g)
        for i in range(g, g + n):
            c.send(RawConn.encode("V.STOREBATCH", f"{ns}_pk", i % 4, (i // 4) * ROWS_PER_BATCH,
                                  ROWS_PER_BATCH, payload, "FMT", "F16"))
        for _ in range(n):
            r = c.read()
            assert not isinstance(r, RawError), r
    return arr


def info(c: RawConn) -> str:
    return bytes(c.call("INFO", "persistence")).decode()


def readable(c: RawConn) -> bool:
    if c.buf:
        return True
    r, _, _ = select.select([c.sock], [], [], 0)
    return bool(r)


def test_save_does_not_block_its_worker(server_factory, raw_factory):
    s = server_factory(args=["-w", "1", "--appendfsync", "everysec"])
    a = raw_factory(s, timeout=60)
    arr = fill(a, "big", TOTAL_MB)
    b = raw_factory(s, timeout=60)
    c = raw_factory(s, timeout=60)

    t0 = time.monotonic()
    a.send(RawConn.encode("KV.PREFIX.SAVE"))
    # Same worker (-w 1): B is answered while A's SAVE is still running.
    assert b.call("PING") == "PONG"
    got = b.call("V.FETCH", "big_pk", 0, "RANGE", 0, 4, "FMT", "NATIVE")
    assert got == arr[:4].tobytes()
    saving = not readable(a)  # A's reply has not come yet
    persistence = info(b)
    if saving:
        # The SAVE counts as in progress from the moment it was accepted, and a
        # second one is refused meanwhile (unless the first just finished).
        assert "rdb_bgsave_in_progress:1" in persistence or readable(a)
        second = c.call("KV.PREFIX.SAVE")
        assert second == "OK" or second == "ERR Background save already in progress", second
    assert a.read() == "OK"
    elapsed = time.monotonic() - t0
    assert saving, f"SAVE answered before PING on another client ({elapsed:.2f} s)"
    assert "rdb_bgsave_in_progress:0" in info(b)

    # Pipelined on one connection: the SAVE's reply first, then PING's.
    a.send(RawConn.encode("KV.PREFIX.SAVE") + RawConn.encode("PING") + RawConn.encode("ECHO", "x"))
    assert a.read() == "OK"
    assert a.read() == "PONG"
    assert a.read() == b"x"


def wait_info(c: RawConn, want: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while want not in info(c):
        assert time.monotonic() < deadline, f"INFO never showed {want}"
        time.sleep(0.01)  # polling interval of a deadline loop


@pytest.mark.concurrency
def test_save_then_disconnect_and_shutdown(server_factory, raw_factory):
    s = server_factory(args=["-w", "1"])
    a = raw_factory(s, timeout=60)
    arr = fill(a, "mid", 64)
    # A client that leaves before its SAVE completes does not disturb the server.
    a.send(RawConn.encode("KV.PREFIX.SAVE"))
    a.close()
    b = raw_factory(s, timeout=60)
    assert b.call("PING") == "PONG"
    wait_info(b, "rdb_bgsave_in_progress:0")
    # A SAVE accepted before SIGTERM completes, and is answered, before exit.
    c = raw_factory(s, timeout=60)
    b.send(RawConn.encode("KV.PREFIX.SAVE"))
    deadline = time.monotonic() + 30
    while "rdb_bgsave_in_progress:1" not in info(c) and not readable(b):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert s.stop() == 0
    assert b.read() == "OK"
    assert "SAVE " in s.log()
    s.start()
    r = s.client()
    assert r.execute_command("V.FETCH", "mid_pk", 0, "RANGE", 0, 4, "FMT", "NATIVE") == \
        arr[:4].tobytes()
    r.close()
