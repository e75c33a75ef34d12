"""Large string values kept in the buffer they were received into (docs/ARCHITECTURE.md
"Big values"): SET/SETEX/PSETEX/SETNX/MSET/APPEND of a value of kBigArgBytes (32 KiB) or
more adopt the big-argument buffer as the stored value instead of copying it. These tests
check the edges of that: the exact threshold, pipelined big SETs, an overwrite while an
older value is still being written to a slow reader, eviction, restart, and the counters.
"""
from __future__ import annotations

import hashlib
import os
import re
import socket
import threading
import urllib.request

import pytest

from conftest import RawConn, free_port, poll

BIG = 32 * 1024  # net::kBigArgBytes


def value_for(key: bytes, size: int, salt: bytes = b"") -> bytes:
    pat = hashlib.blake2b(key + salt, digest_size=64).digest()
    return pat * (size // 64) + pat[: size % 64]


def adopted(r) -> int:
    return int(r.info("stats")["string_values_adopted"])


def test_threshold_and_every_setter(server_factory):
    s = server_factory([])
    r = s.client()
    n0 = adopted(r)
    # Just below the threshold: copied; at and above it: adopted.
    r.set("below", value_for(b"below", BIG - 1))
    assert adopted(r) == n0
    sizes = {"exact": BIG, "plus1": BIG + 1, "mib": 1 << 20, "grown": (5 << 20) + 3}
    for k, n in sizes.items():
        assert r.set(k, value_for(k.encode(), n))
    assert adopted(r) == n0 + len(sizes)
    for k, n in sizes.items():
        assert r.get(k) == value_for(k.encode(), n), k
        assert r.strlen(k) == n
    assert r.get("below") == value_for(b"below", BIG - 1)
    # The other setters.
    n1 = adopted(r)
    assert r.setex("ex", 1000, value_for(b"ex", BIG))
    assert r.psetex("px", 1000000, value_for(b"px", BIG + 7))
    assert r.setnx("nx", value_for(b"nx", 2 * BIG)) is True
    assert r.setnx("nx", value_for(b"nx2", 2 * BIG)) is False  # taken, then dropped
    assert r.mset({"m1": value_for(b"m1", BIG), "m2": b"small", "m3": value_for(b"m3", 3 * BIG)})
    assert r.append("a_new", value_for(b"a_new", BIG)) == BIG  # a new key adopts the tail
    assert r.append("a_new", value_for(b"tail", BIG)) == 2 * BIG  # an existing one copies
    assert adopted(r) >= n1 + 7
    assert r.get("ex") == value_for(b"ex", BIG) and 990 <= r.ttl("ex") <= 1000
    assert r.get("px") == value_for(b"px", BIG + 7)
    assert r.get("nx") == value_for(b"nx", 2 * BIG)
    assert r.mget("m1", "m2", "m3") == [value_for(b"m1", BIG), b"small", value_for(b"m3", 3 * BIG)]
    assert r.get("a_new") == value_for(b"a_new", BIG) + value_for(b"tail", BIG)
    # SET ... GET of a big value returns the old one and stores the new.
    assert r.set("exact", value_for(b"exact2", BIG), get=True) == value_for(b"exact", BIG)
    assert r.get("exact") == value_for(b"exact2", BIG)
    # A big SET refused (WRONGTYPE) leaves nothing behind and the server serving.
    r.execute_command("KV.PREFIX.REGISTER", "nsk", 64, "int8")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.set("nsk", value_for(b"nsk", BIG))
    assert r.type("nsk") == b"pion-kvprefix"
    # MEMORY USAGE counts the adopted buffer's capacity (at least the value).
    assert r.memory_usage("mib") >= 1 << 20


def test_pipelined_big_sets(server_factory, raw_factory):
    s = server_factory([])
    c = raw_factory(s)
    sizes = [BIG, 200000, 1 << 20, (4 << 20) + 1, BIG + 1, 6 << 20]
    req = b"".join(RawConn.encode("SET", f"p{i}", value_for(b"p%d" % i, n))
                   for i, n in enumerate(sizes))
    req += b"".join(RawConn.encode("GET", f"p{i}") for i in range(len(sizes)))
    sender = threading.Thread(target=c.send, args=(req,))
    sender.start()
    replies = [c.read() for _ in range(2 * len(sizes))]
    sender.join(timeout=60)
    assert replies[: len(sizes)] == ["OK"] * len(sizes)
    for i, n in enumerate(sizes):
        assert replies[len(sizes) + i] == value_for(b"p%d" % i, n), i


def test_overwrite_while_old_value_is_being_sent(server_factory):
    """A GET of a big value pins it; an overwrite, a DEL and new big SETs that reuse freed
    blocks must not change the bytes still being written to the slow reader."""
    s = server_factory([])
    r = s.client()
    n = 24 << 20
    old = value_for(b"k", n, b"old")
    r.set("k", old)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(60)
    slow.connect(("127.0.0.1", s.port))
    try:
        slow.sendall(RawConn.encode("GET", "k"))
        assert poll(lambda: int(r.info("commandstats").get("cmdstat_get", {}).get("calls", 0)) >= 1)
        r.set("k", value_for(b"k", n, b"new"))
        r.delete("k")
        for i in range(4):  # churn: blocks freed above would be reused here
            r.set(f"churn{i}", value_for(b"c%d" % i, n, b"churn"))
        want = b"$%d\r\n" % n + old + b"\r\n"
        got = bytearray()
        while len(got) < len(want):
            chunk = slow.recv(1 << 20)
            assert chunk, "server closed the slow reader"
            got += chunk
        assert bytes(got) == want
    finally:
        slow.close()
    assert r.get("k") is None


def test_eviction_of_adopted_values(server_factory):
    s = server_factory(["--maxmemory", "16mb"])
    r = s.client()
    n = 2 << 20
    for i in range(20):
        assert r.set(f"e{i}", value_for(b"e%d" % i, n))
    st = r.info("stats")
    assert int(st["evicted_keys"]) > 0
    assert int(st["string_values_adopted"]) >= 20
    kept = 0
    for i in range(20):
        v = r.get(f"e{i}")
        assert v is None or v == value_for(b"e%d" % i, n), i
        kept += v is not None
    assert 1 <= kept < 20
    assert r.get("e19") == value_for(b"e19", n)  # the newest survives
    # The budget holds the adopted buffers' real capacity.
    assert int(r.info("pion")["vstore_max_bytes"]) == 16 << 20


def test_restart_keeps_adopted_values_bit_exact(server_factory):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    vals = {f"r{i}".encode(): os.urandom(n)
            for i, n in enumerate([BIG, BIG + 1, 1 << 20, (4 << 20) + 5])}
    for k, v in vals.items():
        r.set(k, v)
    r.mset({b"rm1": vals[b"r0"], b"rm2": vals[b"r2"]})
    vals[b"rm1"], vals[b"rm2"] = vals[b"r0"], vals[b"r2"]
    s.kill()  # SIGKILL: every acknowledged value is in the WAL
    s.start()
    r = s.client()
    for k, v in vals.items():
        assert r.get(k) == v, k
    assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    s.restart()
    r = s.client()
    for k, v in vals.items():
        assert r.get(k) == v, k


def test_recycler_reuses_blocks_and_config(server_factory):
    mport = free_port()
    s = server_factory(["--metrics-port", str(mport)])
    r = s.client()
    assert r.config_get("buffer-recycle-bytes") == {"buffer-recycle-bytes": str(256 << 20)}
    n = 3 << 20
    for i in range(6):  # each overwrite frees the previous block, the next SET reuses it
        r.set("same", value_for(b"same", n, b"%d" % i))
    assert r.get("same") == value_for(b"same", n, b"5")
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=30).read().decode()
    m = dict(re.findall(r"^(pion_buffer_recycle_\w+) (\d+)$", body, re.M))
    assert int(m["pion_buffer_recycle_hits_total"]) >= 1
    assert int(m["pion_buffer_recycle_cached_bytes"]) <= 256 << 20
    assert r.config_set("buffer-recycle-bytes", "0")
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=30).read().decode()
    assert re.search(r"^pion_buffer_recycle_cached_bytes 0$", body, re.M)
    r.set("same", value_for(b"same", n, b"x"))
    assert r.get("same") == value_for(b"same", n, b"x")


def test_client_disconnecting_mid_value(server_factory):
    """A client that closes while a big value (past the first admitted step) is still
    arriving: the server drops its buffer (client memory back down), stores nothing, and
    serves the next client; a value of the same size then arrives whole."""
    s = server_factory([])
    r = s.client()
    n = (9 << 20) + 17
    before = int(r.info("memory")["mem_clients_normal"])
    c = socket.create_connection(("127.0.0.1", s.port), timeout=60)
    c.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\ncut!\r\n$%d\r\n" % n + value_for(b"cut", 6 << 20))
    # The server has read past the first step (4 MiB) once it holds more than that.
    assert poll(lambda: int(r.info("memory")["mem_clients_normal"]) > before + (4 << 20))
    c.close()
    assert poll(lambda: int(r.info("memory")["mem_clients_normal"]) < before + (1 << 20))
    assert r.exists("cut!") == 0
    v = value_for(b"whole", n)
    assert r.set("cut!", v)
    assert r.get("cut!") == v
