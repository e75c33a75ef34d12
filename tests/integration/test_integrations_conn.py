"""The adapters' shared block connection against a live server: MATCH with and without
pins, pipelined CHAIN from memoryview slices, GETs straight into caller buffers,
notification setup and the removal listener."""
from __future__ import annotations

import queue

import numpy as np

from pion.integrations import _conn


def _url(server) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def test_chain_match_get_into_unpin(server):
    c = _conn.connect(_url(server), depth=4)
    try:
        blocks = np.arange(20 * 4096, dtype=np.uint8).reshape(20, 4096) ^ 0x5A
        flat = memoryview(blocks).cast("B")
        keys = [b"t|%d" % i for i in range(20)]
        pairs = [(k, flat[i * 4096:(i + 1) * 4096]) for i, k in enumerate(keys)]
        replies = c.chain(pairs, per_command=3)
        assert replies == [b"OK"] * 7
        assert c.match(keys + [b"t|missing"]) == (20, 0)
        count, lease = c.match(keys, pin_ms=60000)
        assert count == 20 and lease > 0
        info = c.call("KV.BLOCK.INFO", keys[5])
        assert info[1] == keys[4]  # the pipelined commands form one chain
        bm, _ = c.match([keys[0], b"nope", keys[2]], bitmap=True)
        assert [c.bit(bm, i) for i in range(3)] == [True, False, True]
        out = np.zeros((21, 4096), dtype=np.uint8)
        small = bytearray(10)
        got = c.get_into(keys + [b"t|missing", keys[0]], list(out[:21]) + [small])
        assert got[:20] == [4096] * 20 and got[20] == -1 and got[21] == -2
        assert np.array_equal(out[:20], blocks)
        assert c.unpin([lease]) == 1
        assert c.unpin([lease]) == 0
        assert c.delete(keys[:2]) == 2
    finally:
        c.close()


def test_keyspace_events_and_removal_listener(server):
    c = _conn.connect(_url(server))
    try:
        assert c.call("CONFIG", "GET", "notify-keyspace-events")[1] == b""
        assert _conn.ensure_keyspace_events(c)
        flags = c.call("CONFIG", "GET", "notify-keyspace-events")[1].decode()
        assert set("Egxe") <= set(flags)
        heard: queue.Queue = queue.Queue()
        lis = _conn.RemovalListener(_url(server), lambda k, ev: heard.put((k, ev)),
                                    prefix=b"p|")
        try:
            c.call("SET", "other", "1")
            c.call("SET", "p|a", "1")
            c.call("DEL", "other", "p|a")
            assert heard.get(timeout=10) == (b"p|a", "del")
            assert heard.empty()
        finally:
            lis.close()
    finally:
        c.close()


def test_keyspace_events_refused_is_logged_once(server, caplog):
    c = _conn.connect(_url(server))
    try:
        c.call("ACL", "SETUSER", "eng", "on", ">pw", "~*", "+@all", "-config|set")
        e = _conn.connect(f"redis://eng:pw@127.0.0.1:{server.port}/0")
        try:
            assert not _conn.ensure_keyspace_events(e)
            assert not _conn.ensure_keyspace_events(e)
            warnings = [r for r in caplog.records if "evictions will not be reported" in r.message]
            assert len(warnings) == 1
        finally:
            e.close()
    finally:
        c.close()


def test_concat_value_and_parts_reads(server):
    c = _conn.connect(_url(server), depth=3)
    try:
        k = np.arange(100_000, dtype=np.uint8)  # above the join threshold: sent as is
        v = (np.arange(300, dtype=np.uint8) * 7)  # small: still its own buffer
        big = _conn.Concat(k, v)
        assert big.nbytes == 100_300
        assert c.call("SET", "cc|1", big) == b"OK"
        pairs = [(b"cc|%d" % i, _conn.Concat(k[:i + 1], v[:i + 2])) for i in range(2, 7)]
        assert c.chain(pairs, per_command=2) == [b"OK"] * 3
        whole = bytes(c.call("GET", "cc|1"))
        assert whole == k.tobytes() + v.tobytes()
        ka, va = np.zeros(100_000, np.uint8), np.zeros(300, np.uint8)
        wrong = (bytearray(5), bytearray(5))
        got = c.get_into([b"cc|1", b"cc|none", b"cc|1", b"cc|3"],
                         [(ka, va), (bytearray(1), bytearray(1)), wrong, (bytearray(4), bytearray(5))])
        assert got == [100_300, -1, -2, 9]
        assert np.array_equal(ka, k) and np.array_equal(va, v)
        assert c.call("SET", "other|x", "1") == b"OK"
        assert c.delete_matching(b"cc|*", count=2) == 6
        assert c.call("EXISTS", "other|x") == 1
        assert c.call("DBSIZE") == 1
    finally:
        c.close()


def test_get_split_header_then_recv_into(server):
    c = _conn.connect(_url(server), depth=2)
    try:
        vals = [b"H%03d" % i + bytes([i]) * (1000 + i) for i in range(5)]
        c.run_pipelined([("SET", b"s|%d" % i, v) for i, v in enumerate(vals)])
        c.call("SET", "s|short", "ab")
        bufs = [bytearray(2000) for _ in range(5)]
        seen = []

        def place(i, head, rest):
            seen.append((i, head, rest))
            return None if i == 3 else bufs[i]
        keys = [b"s|%d" % i for i in range(5)] + [b"s|missing", b"s|short"]
        got = c.get_split(keys, 4, place)
        assert got == [1000, 1001, 1002, -2, 1004, -1, -2]
        assert [s[1] for s in seen] == [b"H%03d" % i for i in range(5)]
        for i in (0, 1, 2, 4):
            assert bufs[i][:1000 + i] == bytes([i]) * (1000 + i)
        assert c.call("PING") == b"PONG"  # the stream stays in step
    finally:
        c.close()


def test_set_many_joins_parts_on_the_wire(server):
    c = _conn.connect(_url(server), depth=2)
    try:
        body = np.arange(100000, dtype=np.uint8)
        items = [(b"m|%d" % i, [b"HEAD%d" % i, memoryview(body)]) for i in range(3)]
        items.append((b"m|plain", b"xyz"))
        assert c.set_many(items) == [b"OK"] * 4
        assert c.call("GET", "m|1") == b"HEAD1" + body.tobytes()
        assert c.call("GET", "m|plain") == b"xyz"
        assert c.set_many([(b"m|ttl", [b"a", b"b"])], px=50000) == [b"OK"]
        assert 0 < c.call("PTTL", "m|ttl") <= 50000
        assert c.call("GET", "m|ttl") == b"ab"
    finally:
        c.close()
