"""Redis 7.0's counters, string edits, bit commands, COPY/TOUCH/OBJECT (docs/protocol.md "Keys").

End to end against the real server, through redis-py's own calls (r.incr, r.setbit,
r.bitfield ...): replies and error texts as Redis gives them, every edit kept across a
SIGKILL (the STRPATCH records of the WAL), APPEND growing a value in place within
proto-max-bulk-len, and a reply still being sent keeping the bytes it pinned.
"""
from __future__ import annotations

import os
import socket

import pytest
import redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def test_counters_through_redis_py(r):
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decr("n") == 41
    assert r.decrby("n", 50) == -9
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)
    assert r.get("f") == b"10.6"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.incr("s")
    with pytest.raises(redis.ResponseError, match="value is not a valid float"):
        r.incrbyfloat("s", 1)
    r.set("max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.incr("max")
    r.set("t", "1", ex=100)
    assert r.incr("t") == 2
    assert 0 < r.ttl("t") <= 100
    r.execute_command("KV.PREFIX.REGISTER", "ns", 8, "fp16")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.incr("ns")


def test_pipeline_incrby_and_bitfield(r):
    p = r.pipeline()
    p.incrby("c", 5)
    p.incrby("c", 7)
    p.setbit("bf", 0, 1)
    assert p.execute() == [5, 12, 0]
    assert r.bitfield("bf").set("u8", 0, 255).execute() == [128]
    assert r.bitfield("bf").get("u8", 0).get("u4", 4).execute() == [255, 15]


def test_getset_setrange_substr_lcs(r):
    assert r.getset("k", "a") is None
    assert r.getset("k", "b") == b"a"
    r.set("h", "Hello World")
    assert r.setrange("h", 6, "Redis") == 11
    assert r.get("h") == b"Hello Redis"
    assert r.setrange("z", 2, "x") == 3
    assert r.get("z") == b"\x00\x00x"
    assert r.substr("h", 0, 4) == b"Hello"
    with pytest.raises(redis.ResponseError, match="offset is out of range"):
        r.setrange("h", -1, "x")
    r.set("a", "ohmytext")
    r.set("b", "mynewtext")
    assert r.lcs("a", "b") == b"mytext"
    assert r.lcs("a", "b", len=True) == 6
    assert r.execute_command("LCS", "a", "b", "IDX", "MINMATCHLEN", 4, "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]


def test_bit_commands_through_redis_py(r):
    assert r.setbit("b", 7, 1) == 0
    assert r.setbit("b", 7, 1) == 1
    assert r.getbit("b", 7) == 1
    assert r.getbit("b", 6) == 0
    r.set("k", "foobar")
    assert r.bitcount("k") == 26
    assert r.bitcount("k", 1, 1) == 6
    assert r.bitcount("k", 5, 30, "bit") == 17
    r.set("p", b"\x00\xff\xf0")
    assert r.bitpos("p", 1, 0) == 8
    assert r.bitpos("p", 1, 2, -1) == 16
    assert r.bitpos("p", 1, 7, 15, "bit") == 8
    r.set("a", "foobar")
    r.set("c", "abcdef")
    assert r.bitop("AND", "d", "a", "c") == 6
    assert r.get("d") == b"`bc`ab"
    assert r.bitop("NOT", "d", "a") == 6
    assert r.get("d") == b"\x99\x90\x90\x9d\x9e\x8d"
    bf = r.bitfield("f")
    assert bf.incrby("u2", 100, 1, overflow="SAT").incrby("u2", 102, 1).execute() == [1, 1]
    assert r.bitfield("f").set("i8", "#0", 200).get("i8", 0).execute() == [0, -56]
    assert r.bitfield("f", default_overflow="FAIL").incrby("i8", 0, -100).execute() == [None]
    assert r.execute_command("BITFIELD_RO", "f", "GET", "i8", 0) == [-56]
    with pytest.raises(redis.ResponseError, match="bit offset is not an integer or out of range"):
        r.setbit("b", -1, 1)


def test_copy_touch_object(r):
    r.set("a", "v", ex=100)
    assert r.copy("a", "b") is True
    assert r.get("b") == b"v"
    assert r.ttl("b") > 0
    assert r.copy("a", "b") is False
    assert r.copy("a", "b", replace=True) is True
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.copy("a", "x", destination_db=1)
    assert r.touch("a", "b", "missing") == 2
    r.set("i", 123)
    assert r.object("encoding", "i") == b"int"
    r.set("e", "x" * 44)
    assert r.object("encoding", "e") == b"embstr"
    r.set("raw", "x" * 45)
    assert r.object("encoding", "raw") == b"raw"
    r.append("i", "4")
    assert r.object("encoding", "i") == b"raw"
    assert r.object("idletime", "i") == 0
    assert r.object("refcount", "raw") == 1
    assert r.object("encoding", "missing") is None
    with pytest.raises(redis.ResponseError, match="An LFU maxmemory policy is not selected"):
        r.object("freq", "i")


def raw_command(r, *args):
    """The reply as sent (redis-py's COMMAND callback would reshape it)."""
    conn = r.connection_pool.get_connection(args[0])
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def test_command_info_categories(r):
    info = raw_command(r, "COMMAND", "INFO", "INCR", "SETBIT", "COPY", "BITFIELD_RO")
    cats = {row[0]: set(row[6]) for row in info}
    assert {b"@write", b"@string", b"@fast"} <= cats[b"incr"]
    assert {b"@write", b"@bitmap", b"@slow"} <= cats[b"setbit"]
    assert {b"@write", b"@keyspace", b"@slow"} <= cats[b"copy"]
    assert {b"@read", b"@bitmap", b"@fast"} <= cats[b"bitfield_ro"]
    docs = raw_command(r, "COMMAND", "DOCS", "LCS")
    assert docs[0] == b"lcs"


def test_edits_survive_sigkill(server_factory):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    r.set("ctr", 10, ex=1000)
    r.incrby("ctr", 5)
    r.incrbyfloat("fl", "1.5")
    for i in range(50):
        r.append("log", f"line {i}\n")
    r.setrange("log", 0, "LINE")
    r.setbit("bits", 1000, 1)
    r.bitfield("bits").set("u8", 0, 0x5A).execute()
    r.copy("log", "log2")
    r.append("log2", "more")
    expected = {k: r.get(k) for k in ("ctr", "fl", "log", "bits", "log2")}
    s.kill()
    s.start()
    r = s.client()
    for k, v in expected.items():
        assert r.get(k) == v, k
    assert 990 <= r.ttl("ctr") <= 1000


def test_append_limit_and_in_place_growth(server_factory):
    s = server_factory(["--proto-max-bulk-len", "1mb"])
    r = s.client()
    chunk = b"x" * 4096
    p = r.pipeline(transaction=False)
    for _ in range(200):
        p.append("big", chunk)
    assert p.execute()[-1] == 200 * 4096
    r.set("edge", b"y" * (1024 * 1024 - 10))
    with pytest.raises(redis.ResponseError,
                       match=r"string exceeds maximum allowed size \(proto-max-bulk-len\)"):
        r.append("edge", b"z" * 11)
    assert r.strlen("edge") == 1024 * 1024 - 10
    assert r.append("edge", b"z" * 10) == 1024 * 1024


def test_reply_in_flight_keeps_its_bytes(server):
    # A GET of a big value is sent by reference; a client that does not read
    # keeps it pinned while another client appends and rewrites the key.
    r = server.client()
    val = os.urandom(4 << 20)
    r.set("v", val)
    slow = socket.create_connection(("127.0.0.1", server.port))
    # A 64 KiB window keeps most of the 4 MiB reply in the server while the
    # edits run (a 4 KiB one also does, but then drains it in about 100 s).
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    slow.sendall(b"*2\r\n$3\r\nGET\r\n$1\r\nv\r\n")
    slow.settimeout(60)
    got = bytearray()
    while len(got) < 64:  # the reply has started: the GET ran and pinned the value
        b = slow.recv(64 - len(got))
        assert b, "connection closed"
        got += b
    for _ in range(20):
        r.append("v", b"A" * 1000)
        r.setrange("v", 0, b"Z" * 100)
    head = f"${len(val)}\r\n".encode()
    want = len(head) + len(val) + 2
    while len(got) < want:
        b = slow.recv(1 << 20)
        assert b, "connection closed"
        got += b
    slow.close()
    assert bytes(got) == head + val + b"\r\n"
    assert r.get("v")[:100] == b"Z" * 100
