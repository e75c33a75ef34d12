"""Restart by mapping the snapshot (docs/snapshot_format.md §5): rows
stay in the page cache and become chunks by reference; writes copy the chunk
they touch; a corrupt snapshot is still refused before anything is served.

Uses the real binary (conftest.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import poll

DIM = 1024  # fp16: 2 KiB rows, 128 rows per chunk


def register(c, ns, dim=DIM, fmt="fp16"):
    assert c.execute_command("KV.PREFIX.REGISTER", ns, dim, fmt) in (b"OK", "OK", True)


def rows(seed, count, dim=DIM):
    return np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float16)


def store(c, sid, layer, start, arr):
    c.execute_command("V.STOREBATCH", sid, layer, start, arr.shape[0], arr.tobytes(), "FMT", "F16")


def fetch(c, sid, layer, start, end):
    return c.execute_command("V.FETCH", sid, layer, "RANGE", start, end, "FMT", "NATIVE")


def fill(c):
    """Returns {(sid, layer): bytes of rows 0..300}."""
    want = {}
    register(c, "m")
    for layer in range(2):
        for side in ("_pk", "_pv"):
            a = rows(layer * 2 + len(side) + (side == "_pv"), 300)
            store(c, "m" + side, layer, 0, a)
            want[("m" + side, layer)] = a.tobytes()
    register(c, "small", dim=64, fmt="int8")
    x = np.random.default_rng(9).standard_normal((37, 64)).astype(np.float32)
    c.execute_command("V.STOREBATCH", "small_pk", 0, 0, 37, x.tobytes())
    return want


def check(c, want, end=300):
    for (sid, layer), data in want.items():
        assert fetch(c, sid, layer, 0, len(data) // (2 * DIM)) == data, (sid, layer)


def mapped_files(pid):
    with open(f"/proc/{pid}/maps") as f:
        return [line.split()[-1] for line in f if line.rstrip().endswith("pion.vstore")]


def save(c):
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)


def test_mapped_restart_is_bit_exact_and_maps_the_snapshot(server_factory):
    s = server_factory()
    c = s.client()
    want = fill(c)
    small = fetch(c, "small_pk", 0, 0, 37)
    save(c)
    c.close()
    s.kill()
    s.start()
    c = s.client()
    assert "snapshot loaded (mapped)" in s.log()
    assert int(c.info("persistence")["loading_snapshot_mapped"]) == 1
    assert mapped_files(s.proc.pid) == [str(s.dir / "pion.vstore")]
    check(c, want)
    assert fetch(c, "small_pk", 0, 0, 37) == small
    c.close()
    # The same file read and copied (--snapshot-mmap no) gives the same bytes.
    s.stop()
    s.args += ["--snapshot-mmap", "no"]
    s.start()
    c = s.client()
    assert int(c.info("persistence")["loading_snapshot_mapped"]) == 0
    assert mapped_files(s.proc.pid) == []
    check(c, want)
    assert fetch(c, "small_pk", 0, 0, 37) == small
    c.close()


def test_writes_after_mapped_restart_copy_on_write_and_survive(server_factory):
    s = server_factory()
    c = s.client()
    want = fill(c)
    save(c)
    c.close()
    s.kill()
    s.start()
    c = s.client()
    # Overwrite inside a mapped chunk, append past the end, then save while
    # other chunks still point into the mapping of the file being replaced.
    key = ("m_pk", 0)
    base = np.frombuffer(want[key], np.float16).reshape(300, DIM).copy()
    patch = rows(100, 10)
    store(c, "m_pk", 0, 10, patch)
    tail = rows(101, 12)
    store(c, "m_pk", 0, 300, tail)
    base[10:20] = patch
    want[key] = np.concatenate([base, tail]).tobytes()
    check(c, want)
    save(c)
    more = rows(102, 5)
    store(c, "m_pv", 1, 50, more)
    pv1 = np.frombuffer(want[("m_pv", 1)], np.float16).reshape(300, DIM).copy()
    pv1[50:55] = more
    want[("m_pv", 1)] = pv1.tobytes()
    check(c, want)
    c.close()
    s.kill()  # snapshot (written while mapped) + WAL
    s.start()
    c = s.client()
    check(c, want)
    assert mapped_files(s.proc.pid) == [str(s.dir / "pion.vstore")]
    # Once no chunk points into it, the mapping goes away.
    c.execute_command("KV.PREFIX.DROP", "m", "small")
    assert poll(lambda: mapped_files(s.proc.pid) == [], timeout=10)
    c.close()


def test_corrupt_mapped_snapshot_refuses_start(server_factory):
    s = server_factory()
    c = s.client()
    fill(c)
    save(c)
    c.close()
    s.stop()
    snap = s.dir / "pion.vstore"
    raw = bytearray(snap.read_bytes())
    raw[len(raw) - 4096] ^= 0x40  # inside the last rows, far from any header
    snap.write_bytes(bytes(raw))
    with pytest.raises(RuntimeError) as e:
        s.start(timeout=20)
    assert "snapshot" in str(e.value) and "corrupt at offset" in str(e.value)
