"""pion.so in one redis-server: the same replies and errors as pion-server, and
Redis's persistence (RDB, AOF rewrite), DUMP/RESTORE/COPY and maxmemory eviction
of whole namespaces. The cluster tests are in test_cluster_module.py."""
from __future__ import annotations

import numpy as np
import pytest
import redis

from conftest import poll
from redis_module import MODULE, RedisNode, Spec, check_logs, rows

pytestmark = pytest.mark.skipif(not MODULE.exists(), reason=f"{MODULE} not built")


@pytest.fixture
def node_factory(tmpdir_path):
    nodes: list[RedisNode] = []

    def make(name: str = "node", args: list[str] | None = None) -> RedisNode:
        n = RedisNode(tmpdir_path, name, args=args)
        nodes.append(n)
        return n.start()

    yield make
    for n in nodes:
        n.kill()
    check_logs(nodes)


def call_of(client):
    def call(*args):
        try:
            return client.execute_command(*args)
        except redis.ResponseError as e:
            return ("error", str(e))
    return call


def digests(c: redis.Redis, keys) -> dict:
    return {k: c.execute_command("DEBUG", "DIGEST-VALUE", k)[0] for k in keys}


def parity_script():
    """Commands whose replies must be identical on pion-server and on the module."""
    x = rows(1, 8, 64)
    h = np.array([5, 9, 11], dtype="<u8").tobytes()
    return [
        ("KV.PREFIX.REGISTER", "a", 64, "int8", "BLOCKS", 16, 3, h, "PREFILL_MS", 5),
        ("KV.PREFIX.REGISTER", "a", 32, "int8"),
        ("KV.PREFIX.REGISTER", "b", 0, "int8"),
        ("KV.PREFIX.REGISTER", "b", 20000, "int8"),
        ("KV.PREFIX.REGISTER", "b", "x", "int8"),
        ("KV.PREFIX.REGISTER", "b", 48, "turbo4"),
        ("KV.PREFIX.REGISTER", "b", 64, "nope"),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "BLOCKS", 16),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "BLOCKS", 0, 0, b""),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "BLOCKS", 16, 2, b"123"),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "PREFILL_MS"),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "PREFILL_MS", -1),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "PREFILL_MS", 1, "PREFILL_MS", 2),
        ("KV.PREFIX.REGISTER", "b", 64, "int8", "WHAT"),
        ("KV.PREFIX.REGISTER", "b", 64),
        ("KV.PREFIX.REGISTER", "x" * 513, 64, "int8"),
        ("KV.PREFIX.REGISTER", "t", 64, "turbo3"),
        ("V.STOREBATCH", "a_pk", 0, 0, 8, x.tobytes()),
        ("V.STOREBATCH", "a_pv", 2, 4, 8, x.astype(np.float16).tobytes(), "FMT", "F16"),
        ("V.STOREBATCH", "t_pk", 0, 0, 8, x.tobytes()),
        ("V.STOREBATCH", "a_pk", 0, 0, 8, b"short"),
        ("V.STOREBATCH", "a_pk", 256, 0, 8, x.tobytes()),
        ("V.STOREBATCH", "a_pk", 0, -1, 8, x.tobytes()),
        ("V.STOREBATCH", "a_pk", 0, 0, 0, x.tobytes()),
        ("V.STOREBATCH", "a_pk", 0, 16777215, 8, x.tobytes()),
        ("V.STOREBATCH", "a_pk", 0, 0, 8, x.tobytes(), "FMT", "F64"),
        ("V.STOREBATCH", "a_pq", 0, 0, 8, x.tobytes()),
        ("V.STOREBATCH", "zz_pk", 0, 0, 8, x.tobytes()),
        ("V.FETCH", "a_pk", 0, "RANGE", 0, 8),
        ("V.FETCH", "a_pk", 0, "RANGE", 2, 12, "FMT", "F16"),
        ("V.FETCH", "a_pk", 0, "RANGE", 0, 8, "FMT", "NATIVE"),
        ("V.FETCH", "t_pk", 0, "RANGE", 0, 8, "FMT", "NATIVE"),
        ("V.FETCH", "a_pv", 2, "RANGE", 0, 12),
        ("V.FETCH", "a_pk", 5, "RANGE", 0, 8),
        ("V.FETCH", "a_pk", 0, "RANGE", 8, 8),
        ("V.FETCH", "a_pk", 0, "RANGE", 0),
        ("V.FETCH", "a_pk", 0, "RANGE", 0, 8, "FMT", "F8"),
        ("V.FETCH", "a_pv", "BATCH", 0, 12),
        ("V.FETCH", "a_pv", "BATCH", 0, 12, 2, "FMT", "F16"),
        ("V.FETCH", "a_pv", "BATCH", 0, 12, 0),
        ("V.FETCH", "a_pv", "BATCH", 5, 1),
        ("V.FETCH", "t_pv", "BATCH", 0, 4),
        ("V.FETCH", "a_pk", 0, 1, 3, 7, 100),
        ("V.FETCH", "a_pk", 0, 1, "FMT", "NATIVE"),
        ("V.FETCH", "a_pk", 0, 16777216),
        ("V.FETCH", "a_pk", 0, *range(4097)),
        ("V.FETCH", "a_pk", 0),
        ("V.FETCH", "zz_pk", 0, 1),
        ("V.INFO", "a_pv"),
        ("V.INFO", "t_pk"),
        ("V.INFO", "zz_pk"),
        ("KV.PREFIX.LOOKUP", "a"),
        ("KV.PREFIX.LOOKUP", "a", "TOKENS", 100, "PREFILL_MS", 30),
        ("KV.PREFIX.LOOKUP", "a", "TOKENS"),
        ("KV.PREFIX.LOOKUP", "a", "WHAT", 1),
        ("KV.PREFIX.LOOKUP", "zz"),
        ("KV.PREFIX.BLOCKS", "a"),
        ("KV.PREFIX.BLOCKS", "t"),
        ("KV.PREFIX.BLOCKS", "zz"),
        ("KV.PREFIX.MEMBERSHIP", "a", 4, np.array([9, 1, 5, 11], dtype="<u8").tobytes()),
        ("KV.PREFIX.MEMBERSHIP", "a", 2, b"1234"),
        ("KV.PREFIX.MEMBERSHIP", "zz", 0, b""),
        ("KV.PREFIX.MEMBERSHIP", "a", 1),
        ("KV.PREFIX.DROP", "t", "zz"),
        ("KV.PREFIX.LOOKUP", "t"),
        ("KV.PREFIX.INFO", "extra"),
        ("KV.PREFIX.INFO", "a"),
        # A name with CR/LF and a backslash: INFO <ns> escapes it on both.
        ("KV.PREFIX.REGISTER", "odd\r\nname\\", 64, "int8"),
        ("KV.PREFIX.INFO", "odd\r\nname\\"),
    ]


def test_replies_match_pion_server(node_factory, server):
    node = node_factory()
    m, p = call_of(node.client()), call_of(server.client())
    for cmd in parity_script():
        assert m(*cmd) == p(*cmd), f"{cmd[:6]}"
    assert p("KV.PREFIX.INFO", "odd\r\nname\\").startswith(b"namespace:odd\\r\\nname\\\\\r\n")
    # The receipts of that script match too (uptime aside).
    ms, ps = m("PION.STATS"), p("PION.STATS")
    assert ms[2:] == ps[2:] and ms[:2] == ps[:2] and len(ms) == 32


def test_module_specific_errors(node_factory):
    c = node_factory().client()
    c.set("plain", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        c.execute_command("KV.PREFIX.LOOKUP", "plain")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        c.execute_command("KV.PREFIX.REGISTER", "plain", 8, "fp16")
    # DROP leaves keys of other types alone.
    assert c.execute_command("KV.PREFIX.DROP", "plain") == 0 and c.get("plain") == b"x"
    assert c.execute_command("KV.PREFIX.REGISTER", "n", 64, "int8") == b"OK"
    with pytest.raises(redis.ResponseError, match="multiple of the stored row size"):
        c.execute_command("PION.LOADROWS", "n", "K", 0, 0, b"x" * 67)
    with pytest.raises(redis.ResponseError, match="side must be K or V"):
        c.execute_command("PION.LOADROWS", "n", "Q", 0, 0, b"x" * 68)
    assert c.type("n") == b"pion-kvns"
    assert c.memory_usage("n") > 0


def test_block_match_over_redis_strings_as_pion_server(node_factory, server):
    node = node_factory()
    m, p = call_of(node.client()), call_of(server.client())
    keys = [f"{{b}}k{i}" for i in range(10)]
    for call in (m, p):
        for i in (0, 1, 2, 4, 9):
            assert call("SET", keys[i], b"x" * 100) is True
    script = [("KV.BLOCK.MATCH", 10, *keys), ("KV.BLOCK.MATCH", 10, *keys, "BITMAP"),
              ("KV.BLOCK.MATCH", 3, *keys[:3]), ("KV.BLOCK.MATCH", 1, keys[3], "bitmap"),
              ("KV.BLOCK.MATCH", 0, "a"), ("KV.BLOCK.MATCH", "x", "a"),
              ("KV.BLOCK.MATCH", 2000000, "a"), ("KV.BLOCK.MATCH", 3, "a"),
              ("KV.BLOCK.MATCH", 1, "a", "NOPE"), ("KV.BLOCK.MATCH", 1, "a", "BITMAP", "BITMAP"),
              ("KV.BLOCK.MATCH", 1, "a", "PIN"), ("KV.BLOCK.MATCH", 1)]
    for cmd in script:
        assert m(*cmd) == p(*cmd), cmd
    assert m(*script[0]) == 3 and m(*script[1]) == bytes([0b00010111, 0b10])
    # PIN is pion-server's (Redis evicts and expires the module's keys itself).
    assert m("KV.BLOCK.MATCH", 1, keys[0], "PIN", 100)[1].startswith(
        "PIN is not supported in the module")
    assert p("KV.BLOCK.MATCH", 1, keys[0], "PIN", 100) == [1, p("KV.BLOCK.MATCH", 1, keys[0],
                                                                "PIN", 100)[1] - 1]
    # Only strings are blocks; an expired key is gone; Redis is told the keys.
    c = node.client()
    c.rpush("{b}list", "x")
    assert m("KV.BLOCK.MATCH", 2, keys[0], "{b}list", "BITMAP") == bytes([1])
    c.set("{b}short", "v", px=1)
    assert poll(lambda: m("KV.BLOCK.MATCH", 1, "{b}short") == 0 or None, timeout=5)
    assert c.command_getkeys("KV.BLOCK.MATCH", 2, "x", "y", "BITMAP") == ["x", "y"]


def write_edges(c: redis.Redis) -> None:
    """Namespaces at the edges of the encoding: an empty block table, no table and no
    PREFILL_MS, sparse rows far into a high layer, one side empty."""
    assert c.execute_command("KV.PREFIX.REGISTER", "{edge1}", 32, "turbo2", "BLOCKS", 16, 0,
                             b"") == b"OK"
    assert c.execute_command("V.STOREBATCH", "{edge1}_pv", 200, 5000, 3,
                             rows(9, 3, 32).tobytes()) == b"OK"
    assert c.execute_command("KV.PREFIX.REGISTER", "{edge2}", 7, "int8") == b"OK"


def read_edges(c: redis.Redis) -> list:
    return [c.execute_command("V.FETCH", "{edge1}_pv", 200, "RANGE", 4990, 5003),
            c.execute_command("V.INFO", "{edge1}_pv"), c.execute_command("V.INFO", "{edge1}_pk"),
            c.execute_command("KV.PREFIX.BLOCKS", "{edge1}"),
            c.execute_command("KV.PREFIX.LOOKUP", "{edge2}"),
            c.execute_command("V.INFO", "{edge2}_pk")]


def write_all(c: redis.Redis, specs) -> dict:
    for s in specs:
        s.write(c.execute_command)
    return {s.ns: s.read(c.execute_command) for s in specs}


def test_rdb_restart_keeps_every_namespace(node_factory):
    node = node_factory()
    c = node.client()
    specs = [Spec(f"{{r{i}}}", i) for i in range(7)]
    before = write_all(c, specs)
    write_edges(c)
    edges = read_edges(c)
    d0 = digests(c, list(before) + ["{edge1}", "{edge2}"])
    assert c.save()
    node.kill()
    node.start()
    c = node.client()
    assert {s.ns: s.read(c.execute_command) for s in specs} == before
    assert read_edges(c) == edges
    assert digests(c, list(before) + ["{edge1}", "{edge2}"]) == d0
    info = c.execute_command("KV.PREFIX.INFO").decode()
    assert "registered_prefixes:9\r\n" in info


def test_aof_rewrite_and_replay_keep_every_namespace(node_factory):
    # No RDB preamble: the rewrite writes KV.PREFIX.REGISTER + PION.LOADROWS (stored form).
    node = node_factory(args=["--appendonly", "yes", "--appendfsync", "always",
                              "--aof-use-rdb-preamble", "no"])
    c = node.client()
    specs = [Spec(f"{{a{i}}}", i) for i in range(7)]
    write_all(c, specs[:4])
    write_edges(c)
    edges = read_edges(c)
    c.bgrewriteaof()
    assert poll(lambda: c.info("persistence")["aof_rewrite_in_progress"] == 0
                and c.info("persistence")["aof_rewrite_scheduled"] == 0, timeout=60)
    assert c.info("persistence")["aof_last_bgrewrite_status"] == "ok"
    write_all(c, specs[4:])                         # in the incremental AOF after the rewrite
    assert c.execute_command("V.STOREBATCH", specs[0].sid("k"), 5, 3, 2,
                             rows(77, 2, 64).tobytes()) == b"OK"
    before = {s.ns: s.read(c.execute_command) for s in specs}
    before["extra"] = c.execute_command("V.FETCH", specs[0].sid("k"), 5, "RANGE", 0, 5)
    d0 = digests(c, [s.ns for s in specs])
    node.kill()
    node.start()
    c = node.client()
    after = {s.ns: s.read(c.execute_command) for s in specs}
    after["extra"] = c.execute_command("V.FETCH", specs[0].sid("k"), 5, "RANGE", 0, 5)
    assert after == before
    assert read_edges(c) == edges
    assert digests(c, [s.ns for s in specs]) == d0


def test_dump_restore_copy_rename_move_the_namespace(node_factory):
    c = node_factory().client()
    s = Spec("{src}", 3)
    s.write(c.execute_command)
    ref = s.read(c.execute_command)
    d = c.execute_command("DEBUG", "DIGEST-VALUE", s.ns)
    dumped = c.dump(s.ns)
    c.restore("{restored}", 0, dumped)
    assert c.execute_command("COPY", s.ns, "{copied}") == 1
    assert c.rename(s.ns, "{renamed}")
    for name in ("{restored}", "{copied}", "{renamed}"):
        assert c.execute_command("DEBUG", "DIGEST-VALUE", name) == d
        moved = Spec(name, 3)
        assert moved.read(c.execute_command) == ref
    assert c.execute_command("KV.PREFIX.LOOKUP", s.ns) == b"MISS"
    # A corrupted payload is refused by Redis's checksum, a wrong-version one by ours.
    with pytest.raises(redis.ResponseError):
        c.restore("{bad}", 0, dumped[:-12] + b"\0" * 12)


def test_maxmemory_evicts_whole_namespaces(node_factory):
    node = node_factory(args=["--maxmemory", "24mb", "--maxmemory-policy", "allkeys-lru"])
    c = node.client()
    # 12 namespaces of ~4 MiB each (fp16 rows, K and V): only some fit in 24 MiB.
    # Redis's LRU clock ticks once a second, so within this test every key looks as
    # old as the one being written: the namespace being written may be the one
    # evicted, and its next store then finds no session (never half a namespace).
    names = [f"{{m{i}}}" for i in range(12)]
    data = rows(5, 4096, 256)
    for ns in names:
        assert c.execute_command("KV.PREFIX.REGISTER", ns, 256, "fp16") == b"OK"
        for side in "kv":
            try:
                assert c.execute_command("V.STOREBATCH", f"{ns}_p{side}", 0, 0, 4096,
                                         data.tobytes()) == b"OK"
            except redis.ResponseError as e:
                assert str(e) == "NOSESSION session not found"
                break
    info = c.info()
    assert info["evicted_keys"] > 0
    assert info["used_memory"] <= 32 * 2**20
    present = [ns for ns in names if c.execute_command("KV.PREFIX.LOOKUP", ns) == b"HIT"]
    assert 0 < len(present) < len(names)
    want = data.astype(np.float16).tobytes()
    for ns in present:                            # what survives is whole, both sides
        for side in "kv":
            assert c.execute_command("V.FETCH", f"{ns}_p{side}", 0, "RANGE", 0, 4096,
                                     "FMT", "F16") == want
    gone = [ns for ns in names if ns not in present]
    for ns in gone:
        with pytest.raises(redis.ResponseError, match="session not found"):
            c.execute_command("V.FETCH", f"{ns}_pv", 0, "RANGE", 0, 1)
    assert f"registered_prefixes:{len(present)}\r\n" in c.execute_command(
        "KV.PREFIX.INFO").decode()


def test_golden_v1_rdb_still_loads(node_factory, tmpdir_path):
    # tests/testdata/module_v1.rdb: written by redis-server 7.0 with pion.so encoding
    # version 1 (docs/module_format.md): {golden0}..{golden6} (one per vquant, as Spec
    # writes them) and the edge namespaces. Loading it must give exactly what the
    # current code stores for the same input.
    import shutil
    from pathlib import Path
    golden = Path(__file__).resolve().parents[1] / "testdata" / "module_v1.rdb"
    d = tmpdir_path / "golden"
    d.mkdir()
    shutil.copy(golden, d / "dump.rdb")
    old = node_factory("golden").client()
    fresh = node_factory("fresh").client()
    specs = [Spec(f"{{golden{i}}}", i) for i in range(7)]
    for s in specs:
        s.write(fresh.execute_command)
    write_edges(fresh)
    assert old.dbsize() == 9
    for s in specs:
        assert s.read(old.execute_command) == s.read(fresh.execute_command), s.ns
        assert old.type(s.ns) == b"pion-kvns"
    assert read_edges(old) == read_edges(fresh)
    names = [s.ns for s in specs] + ["{edge1}", "{edge2}"]
    assert digests(old, names) == digests(fresh, names)


def test_unlink_frees_a_big_namespace_in_the_background(node_factory):
    c = node_factory().client()
    data = rows(3, 4096, 256)
    assert c.execute_command("KV.PREFIX.REGISTER", "{big}", 256, "fp16") == b"OK"
    # 5 layers x 2 sides x 2 MiB: 80 chunks of 256 KiB, past Redis's lazy-free
    # threshold (an effort of 64).
    for layer in range(5):
        for side in "kv":
            assert c.execute_command("V.STOREBATCH", f"{{big}}_p{side}", layer, 0, 4096,
                                     data.tobytes()) == b"OK"
    assert c.memory_usage("{big}") >= 10 * 4096 * 512
    used = c.info("memory")["used_memory"]
    lazy0 = c.info("memory")["lazyfreed_objects"]
    assert c.unlink("{big}") == 1
    # Freed by Redis's lazy-free thread (free_effort > 64 chunks), rows and all.
    assert poll(lambda: c.info("memory")["lazyfreed_objects"] == lazy0 + 1, timeout=30)
    assert poll(lambda: c.info("memory")["used_memory"] < used - 16 * 2**20, timeout=30)
    assert c.execute_command("KV.PREFIX.LOOKUP", "{big}") == b"MISS"
    assert "registered_prefixes:0\r\n" in c.execute_command("KV.PREFIX.INFO").decode()
