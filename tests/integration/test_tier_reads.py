"""Reads of values in the disk tier that do not block the worker: GET, MGET, GETRANGE,
GETDEL and GETEX read a value on disk through the worker's own io_uring
(tier-ring-depth; INFO tier_ring_reads counts them) and reply when the read is done,
in request order, bit-exact; with tier-ring-depth 0 the same reads run on the tier
I/O threads; inside MULTI/EXEC they read on the worker; damage is never served."""
from __future__ import annotations

import hashlib

import pytest

from pion.testing import damage_tier_values, poll



def _value(i: int, n: int = 256 * 1024) -> bytes:
    seed = hashlib.sha256(b"r%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def _info(r) -> dict:
    return r.info("pion")


def _tier_server(server_factory, tmp, *extra):
    return server_factory(["--maxmemory", "4mb", "--tier-dir", str(tmp / "tier"),
                           "--tier-maxbytes", "64mb", "--appendonly", "yes", *extra])


def _fill(r, prefix: bytes, n: int):
    """n values of 256 KiB (16 MiB over a 4 MiB budget); their names once the
    tier's writes are done."""
    for i in range(n):
        r.set(prefix + b"%d" % i, _value(i))
    poll(lambda: _info(r)["tier_write_backlog_bytes"] == 0 or None, timeout=30)
    return [prefix + b"%d" % i for i in range(n)]


def _tiered(r, names):
    """Those of `names` whose value is on disk now (a GET of one is a tier read)."""
    out = []
    for k in names:
        before = _info(r)["tier_reads"]
        r.strlen(k)  # STRLEN reads it checked on the worker: counted, not promoted
        if _info(r)["tier_reads"] > before:
            out.append(k)
    return out


@pytest.mark.concurrency  # the worker's ring, deferred replies: also under TSan
def test_reads_go_through_the_workers_ring_in_order(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path, "--tier-ring-depth", "2")
    r = s.client()
    names = _fill(r, b"g", 40)
    disk = _tiered(r, names)
    assert len(disk) >= 8, disk
    ring0, reads0 = _info(r)["tier_ring_reads"], _info(r)["tier_reads"]
    # More GETs pipelined than the ring holds (2): the rest wait or go to the I/O
    # threads; the replies come back in request order, bit-exact.
    p = r.pipeline(transaction=False)
    for k in disk[:8]:
        p.get(k)
        p.getrange(k, 100, 199)
    got = p.execute()
    for j, k in enumerate(disk[:8]):
        i = int(k[1:])
        assert got[2 * j] == _value(i), k
        assert got[2 * j + 1] == _value(i)[100:200], k
    info = _info(r)
    assert info["tier_reads"] > reads0
    assert info["tier_ring_reads"] > ring0  # at least some through the ring
    assert info["tier_errors"] == 0


def test_getrange_getdel_getex_of_values_on_disk(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    names = _fill(r, b"x", 40)
    disk = _tiered(r, names)
    assert len(disk) >= 6, disk
    a, b, c, d = disk[0], disk[1], disk[2], disk[3]
    ia, ib, ic, idd = (int(k[1:]) for k in (a, b, c, d))
    ring0 = _info(r)["tier_ring_reads"]
    promotions0 = _info(r)["tier_promotions"]
    # GETRANGE: the range of the value on disk, not promoted.
    assert r.getrange(a, 0, 9) == _value(ia)[:10]
    assert r.getrange(a, -5, -1) == _value(ia)[-5:]
    assert r.getrange(a, 10, 5) == b""
    assert _info(r)["tier_promotions"] == promotions0
    # GETEX: the value, and the TTL set (or removed).
    assert r.getex(b, ex=1000) == _value(ib)
    assert 0 < r.ttl(b) <= 1000
    assert r.getex(b, persist=True) == _value(ib)
    assert r.ttl(b) == -1
    # GETDEL: the value, and the key is gone.
    assert r.getdel(c) == _value(ic)
    assert not r.exists(c)
    assert r.getdel(c) is None
    assert _info(r)["tier_ring_reads"] >= ring0 + 5
    # Inside MULTI/EXEC: read on the worker, the same answers.
    p = r.pipeline(transaction=True)
    p.getrange(d, 1, 3)
    p.getex(d, px=500000)
    p.getdel(d)
    assert p.execute() == [_value(idd)[1:4], _value(idd), _value(idd)]
    assert not r.exists(d)
    assert r.info("stats")["evicted_keys"] == 0


def test_without_the_ring_reads_run_on_the_io_threads(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path, "--tier-ring-depth", "0")
    r = s.client()
    names = _fill(r, b"n", 40)
    disk = _tiered(r, names)
    assert len(disk) >= 3, disk
    for k in disk[:3]:
        i = int(k[1:])
        assert r.getrange(k, 5, 8) == _value(i)[5:9]
        assert r.get(k) == _value(i)
    assert r.mget(disk[3:6]) == [_value(int(k[1:])) for k in disk[3:6]]
    assert _info(r)["tier_ring_reads"] == 0
    assert r.config_get("tier-ring-depth") == {"tier-ring-depth": "0"}


def test_damaged_values_are_never_served_by_the_async_reads(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    names = _fill(r, b"d", 40)
    disk = _tiered(r, names)
    assert len(disk) >= 6, disk
    # Flip bytes in the middle of every extent's value on disk.
    damage_tier_values(tmpdir_path / "tier" / "pion-tier.dat")
    errors0 = _info(r)["tier_errors"]
    k0, k1, k2 = disk[0], disk[1], disk[2]
    assert r.getrange(k0, 900, 1100) == b""   # damaged: the entry is dropped
    assert r.getex(k1, ex=100) is None
    assert r.getdel(k2) is None
    assert _info(r)["tier_errors"] >= errors0 + 3
    assert not r.exists(k0) and not r.exists(k1) and not r.exists(k2)
