"""KV.PREFIX.* and PION.STATS against the real binary (docs/protocol.md "KV.PREFIX", "The value receipt")."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import redis

from conftest import RawConn, RawError

FORMATS = ["int8", "turbo4", "turbo3", "turbo2", "fp16", "fp8", "mlx4g32"]


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def stats(r) -> dict:
    flat = r.execute_command("PION.STATS")
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def kv_info(r) -> dict:
    body = r.execute_command("KV.PREFIX.INFO").decode()
    # Numbers as int; the Stage-2 words (attend_precision) as text.
    return {k: int(v) if v.lstrip("-").isdigit() else v
            for k, v in (l.split(":", 1) for l in body.split("\r\n") if l)}


def test_not_enabled_without_kvcache(server_factory):
    s = server_factory(kvcache=False)
    r = s.client()
    for args in (("KV.PREFIX.REGISTER", "ns", 64, "fp16"), ("KV.PREFIX.LOOKUP", "ns"),
                 ("V.FETCH", "ns_pk", 0, "RANGE", 0, 1), ("KV.PREFIX.INFO",)):
        assert err(r, *args) == "NOKVCACHE V-store not enabled (use --kvcache)"


def test_register_lookup_drop(r):
    assert r.execute_command("KV.PREFIX.LOOKUP", "app|v1|m|fp16|p") == b"MISS"
    assert r.execute_command("KV.PREFIX.REGISTER", "app|v1|m|fp16|p", 1024, "fp16") == b"OK"
    assert r.execute_command("KV.PREFIX.LOOKUP", "app|v1|m|fp16|p") == b"HIT"
    assert r.dbsize() == 1
    # Re-register with the same shape is fine; a different one is refused.
    assert r.execute_command("KV.PREFIX.REGISTER", "app|v1|m|fp16|p", 1024, "FP16") == b"OK"
    assert err(r, "KV.PREFIX.REGISTER", "app|v1|m|fp16|p", 512, "fp16") == (
        "namespace already registered with kv_dim 1024 vquant fp16")
    assert err(r, "KV.PREFIX.REGISTER", "app|v1|m|fp16|p", 1024, "int8") == (
        "namespace already registered with kv_dim 1024 vquant fp16")
    # The derived sessions exist.
    info = r.execute_command("V.INFO", "app|v1|m|fp16|p_pk").decode()
    assert "value_dim:1024" in info and "v_format:fp16" in info
    assert r.execute_command("KV.PREFIX.DROP", "app|v1|m|fp16|p", "never", "app|v1|m|fp16|p") == 1
    assert r.execute_command("KV.PREFIX.LOOKUP", "app|v1|m|fp16|p") == b"MISS"
    assert r.execute_command("KV.PREFIX.DROP", "app|v1|m|fp16|p") == 0
    assert err(r, "V.INFO", "app|v1|m|fp16|p_pk") == "NOSESSION session not found"


def test_register_validation_changes_nothing(r):
    cases = [
        (("KV.PREFIX.REGISTER", "", 64, "fp16"), "ns_key length must be 1..512"),
        (("KV.PREFIX.REGISTER", "x" * 513, 64, "fp16"), "ns_key length must be 1..512"),
        (("KV.PREFIX.REGISTER", "n", 0, "fp16"), "kv_dim out of range (1..16384)"),
        (("KV.PREFIX.REGISTER", "n", 16385, "fp16"), "kv_dim out of range (1..16384)"),
        (("KV.PREFIX.REGISTER", "n", "12a", "fp16"), "value is not an integer or out of range"),
        (("KV.PREFIX.REGISTER", "n", "+64", "fp16"), "value is not an integer or out of range"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp4"),
         "KV.PREFIX.REGISTER: unknown vquant 'fp4' (want int8|turbo4|turbo3|turbo2|fp16|fp8|mlx4g32)"),
        (("KV.PREFIX.REGISTER", "n", 100, "turbo4"), "vquant turbo4 needs kv_dim divisible by 32"),
        (("KV.PREFIX.REGISTER", "n", 100, "MLX4G32"), "vquant mlx4g32 needs kv_dim divisible by 32"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "BLOCKS", 16, 1),
         "BLOCKS requires: block_size hash_count hash_blob"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "BLOCKS", 0, 1, b"\0" * 8),
         "BLOCKS block_size out of range (1..65536)"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "BLOCKS", 16, 1048577, b""),
         "BLOCKS hash_count out of range (0..1048576)"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "BLOCKS", 16, 2, b"\0" * 15),
         "BLOCKS hash_blob length mismatch"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "PREFILL_MS", -5),
         "PREFILL_MS out of range (0..86400000)"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "PREFILL_MS", 86400001),
         "PREFILL_MS out of range (0..86400000)"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "PREFILL_MS"), "PREFILL_MS requires a value"),
        (("KV.PREFIX.REGISTER", "n", 64, "fp16", "TOKENS", 5),
         "KV.PREFIX.REGISTER unknown option 'TOKENS' (BLOCKS, PREFILL_MS, PARENT)"),
    ]
    for args, msg in cases:
        assert err(r, *args) == msg, args
    assert err(r, "KV.PREFIX.REGISTER", "n", 64) == (
        "wrong number of arguments for 'kv.prefix.register' command")
    assert r.dbsize() == 0
    assert r.execute_command("KV.PREFIX.LOOKUP", "n") == b"MISS"
    # Every format registers at a 32-multiple dim; int8/fp16 take any dim.
    for f in FORMATS:
        assert r.execute_command("KV.PREFIX.REGISTER", "ok_" + f, 96, f) == b"OK"
    assert r.execute_command("KV.PREFIX.REGISTER", "odd_int8", 100, "int8") == b"OK"
    assert r.execute_command("KV.PREFIX.REGISTER", "odd_fp16", 7, "fp16") == b"OK"
    # Options in any order, keywords case-insensitive.
    assert r.execute_command("KV.PREFIX.REGISTER", "opts", 64, "fp16", "prefill_ms", 10,
                             "blocks", 16, 1, struct.pack("<Q", 42)) == b"OK"
    assert r.execute_command("KV.PREFIX.MEMBERSHIP", "opts", 1, struct.pack("<Q", 42)) == b"\x01"


def test_blocks_and_membership_seed_example(r):
    # The seed page: hashes struct-packed as little-endian u64, block_size 64.
    hashes = [(0x9E3779B97F4A7C15 * (i + 1)) & (2**64 - 1) for i in range(156)]
    blob = struct.pack("<" + "Q" * len(hashes), *hashes)
    ns = "my_app|v1|llama|fp16|prompt_a"
    assert r.execute_command("KV.PREFIX.BLOCKS", ns) == b"UNKNOWN"
    assert r.execute_command("KV.PREFIX.REGISTER", ns, 256, "fp16") == b"OK"
    assert r.execute_command("KV.PREFIX.BLOCKS", ns) == b"UNKNOWN"
    assert r.execute_command("KV.PREFIX.MEMBERSHIP", ns, 1, blob[:8]) == b"UNKNOWN"
    assert r.execute_command("KV.PREFIX.REGISTER", ns, 256, "fp16",
                             "BLOCKS", 64, len(hashes), blob) == b"OK"
    body = r.execute_command("KV.PREFIX.BLOCKS", ns)
    assert len(body) == 8 + 8 * 156 == 1256
    bs, count = struct.unpack_from("<II", body)
    assert (bs, count) == (64, 156)
    assert list(struct.unpack_from("<156Q", body, 8)) == hashes
    # Mixed probe: half the stored hashes (reversed) plus four unknown ones.
    probe = hashes[::2][::-1] + [1, 2, 3, 4]
    reply = r.execute_command("KV.PREFIX.MEMBERSHIP", ns, len(probe),
                              struct.pack("<" + "Q" * len(probe), *probe))
    assert len(reply) == (len(probe) + 7) // 8
    bits = np.unpackbits(np.frombuffer(reply, np.uint8), bitorder="little")[: len(probe)]
    assert bits.tolist() == [1] * 78 + [0] * 4
    assert r.execute_command("KV.PREFIX.MEMBERSHIP", ns, 0, b"") == b""
    assert err(r, "KV.PREFIX.MEMBERSHIP", ns, 2, b"\0" * 8) == "hash_blob length mismatch"
    assert err(r, "KV.PREFIX.MEMBERSHIP", ns, -1, b"") == "hash_count out of range (0..1048576)"
    assert r.execute_command("KV.PREFIX.MEMBERSHIP", "unknown", 1, blob[:8]) == b"UNKNOWN"
    # Re-register without BLOCKS keeps the table; with a 0-hash table it reads UNKNOWN.
    assert r.execute_command("KV.PREFIX.REGISTER", ns, 256, "fp16") == b"OK"
    assert r.execute_command("KV.PREFIX.BLOCKS", ns) == body
    assert r.execute_command("KV.PREFIX.REGISTER", ns, 256, "fp16", "BLOCKS", 64, 0, b"") == b"OK"
    assert r.execute_command("KV.PREFIX.BLOCKS", ns) == b"UNKNOWN"


def test_membership_large_table(r):
    rng = np.random.default_rng(1)
    table = rng.integers(0, 2**63, size=1562, dtype=np.uint64)
    assert r.execute_command("KV.PREFIX.REGISTER", "big", 64, "fp16", "BLOCKS", 64, 1562,
                             table.tobytes()) == b"OK"
    probe = np.concatenate([table[:781], rng.integers(0, 2**63, size=781, dtype=np.uint64)])
    rng.shuffle(probe)
    reply = r.execute_command("KV.PREFIX.MEMBERSHIP", "big", 1562, probe.tobytes())
    bits = np.unpackbits(np.frombuffer(reply, np.uint8), bitorder="little")[:1562]
    expect = np.isin(probe, table).astype(np.uint8)
    assert (bits == expect).all()


def test_value_receipt_worked_example(r):
    s0 = stats(r)
    assert list(s0.keys()) == [
        "worker_id", "uptime_in_seconds", "kvprefix_hits", "kvprefix_misses",
        "kvprefix_hits_measured", "kvprefix_tokens_served", "kvprefix_bytes_served",
        "kvprefix_prefill_us_saved", "kvprefix_prefill_us_measured", "prefill_seconds_avoided",
        "prefill_seconds_avoided_measured", "semantic_hits", "semantic_misses", "moe_hits",
        "moe_misses", "vector_queries"]
    assert s0["prefill_seconds_avoided"] == b"0.000"
    assert r.execute_command("KV.PREFIX.LOOKUP", "nothing") == b"MISS"
    assert stats(r)["kvprefix_misses"] == 1
    assert r.execute_command("KV.PREFIX.REGISTER", "a", 32, "fp16", "PREFILL_MS", 1200) == b"OK"
    assert r.execute_command("KV.PREFIX.LOOKUP", "a") == b"HIT"
    s = stats(r)
    assert s["kvprefix_prefill_us_measured"] == 1200000
    assert s["prefill_seconds_avoided_measured"] == b"1.200"
    for _ in range(2):
        r.execute_command("KV.PREFIX.LOOKUP", "a")
    assert stats(r)["prefill_seconds_avoided"] == b"3.600"
    # A namespace without PREFILL_MS whose K layer 0 holds 100 tokens: estimate 100 x 555 us.
    assert r.execute_command("KV.PREFIX.REGISTER", "b", 32, "fp16") == b"OK"
    rows = np.ones((100, 32), np.float32)
    assert r.execute_command("V.STOREBATCH", "b_pk", 0, 0, 100, rows.tobytes()) == b"OK"
    assert r.execute_command("KV.PREFIX.LOOKUP", "b") == b"HIT"
    s = stats(r)
    assert s["kvprefix_hits"] == 4 and s["kvprefix_hits_measured"] == 3
    assert s["kvprefix_tokens_served"] == 100
    assert s["kvprefix_prefill_us_saved"] == 3600000 + 55500
    assert s["prefill_seconds_avoided"] == b"3.655"
    assert s["prefill_seconds_avoided_measured"] == b"3.600"
    # TOKENS credits the caller's count, with the lookup's own PREFILL_MS.
    assert r.execute_command("KV.PREFIX.LOOKUP", "a", "TOKENS", 2000, "PREFILL_MS", 900) == b"HIT"
    s = stats(r)
    assert s["kvprefix_tokens_served"] == 2100 and s["kvprefix_prefill_us_measured"] == 4500000
    assert r.execute_command("KV.PREFIX.LOOKUP", "b", "tokens", 10) == b"HIT"
    assert stats(r)["kvprefix_prefill_us_saved"] == 3600000 + 55500 + 900000 + 5550
    # A refused lookup records nothing; options never change the answer.
    before = stats(r)
    assert err(r, "KV.PREFIX.LOOKUP", "a", "TOKENS") == "KV.PREFIX.LOOKUP option needs a value"
    assert err(r, "KV.PREFIX.LOOKUP", "a", "BOGUS", 1) == (
        "KV.PREFIX.LOOKUP unknown option (TOKENS, PREFILL_MS, CHAIN)")
    assert err(r, "KV.PREFIX.LOOKUP", "a", "TOKENS", -1) == "TOKENS out of range (0..100000000)"
    assert r.execute_command("KV.PREFIX.LOOKUP", "zzz", "TOKENS", 5) == b"MISS"
    after = stats(r)
    assert after["kvprefix_hits"] == before["kvprefix_hits"]
    assert after["kvprefix_misses"] == before["kvprefix_misses"] + 1
    # V.FETCH adds exactly its payload to bytes_served.
    b0 = after["kvprefix_bytes_served"]
    payload = r.execute_command("V.FETCH", "b_pk", 0, "RANGE", 0, 10)
    assert stats(r)["kvprefix_bytes_served"] == b0 + len(payload) == b0 + 10 * 32 * 4
    # RESET zeroes the counters but not the uptime; other arguments are ignored.
    assert r.execute_command("PION.STATS", "RESET") == b"OK"
    s = stats(r)
    assert s["kvprefix_hits"] == 0 and s["prefill_seconds_avoided"] == b"0.000"
    assert len(r.execute_command("PION.STATS", "bogus")) == 32
    info = r.info("pion")
    assert info["kvprefix_hits"] == 0


def test_pion_stats_resp3_shape(server, raw_factory):
    c = raw_factory(server)
    assert isinstance(c.call("HELLO", "3"), dict)
    c.send(RawConn.encode("PION.STATS"))
    assert c.read_raw(5) == b"%16\r\n"
    pairs = [(c.read(), c.read()) for _ in range(16)]
    assert pairs[0] == (b"worker_id", 0)
    assert pairs[9] == (b"prefill_seconds_avoided", b"0.000")
    # Null replies are RESP3 nulls ...
    assert c.call("KV.PREFIX.REGISTER", "n3", 32, "fp16") == "OK"
    c.send(RawConn.encode("V.FETCH", "n3_pk", 0, "RANGE", 0, 4))
    assert c.read_raw(3) == b"_\r\n"
    # ... and RESP2 nulls after HELLO 2, where the receipt is a flat array.
    assert isinstance(c.call("HELLO", "2"), list)
    c.send(RawConn.encode("V.FETCH", "n3_pk", 0, "RANGE", 0, 4))
    assert c.read_raw(5) == b"$-1\r\n"
    flat = c.call("PION.STATS")
    assert isinstance(flat, list) and len(flat) == 32


def test_pipelined_option_name_is_not_consumed(server, raw_factory):
    c = raw_factory(server)
    c.send(RawConn.encode("KV.PREFIX.REGISTER", "p", 32, "fp16", "PREFILL_MS", 5)
           + RawConn.encode("PREFILL_MS", 7) + RawConn.encode("PING"))
    assert c.read() == "OK"
    e = c.read()
    assert isinstance(e, RawError) and e.startswith("ERR unknown command 'PREFILL_MS'")
    assert c.read() == "PONG"


def test_kv_info_fields(r):
    info = kv_info(r)
    for k in ["registered_prefixes", "total_prefix_tokens", "vstore_sessions",
              "vstore_max_sessions", "vstore_total_fetches", "vstore_evictions", "vstore_bytes",
              "maxmemory", "wal_enabled", "wal_bytes", "wal_appended", "wal_replayed",
              "last_save_unix", "sdpa_warm", "sdpa_cold", "sdpa_demotions", "sdpa_rehydrates"]:
        assert k in info, k
    assert info["vstore_max_sessions"] == 256
    r.execute_command("KV.PREFIX.REGISTER", "i", 1024, "turbo4")
    rows = np.random.default_rng(0).standard_normal((50, 1024)).astype(np.float32)
    r.execute_command("V.STOREBATCH", "i_pk", 0, 0, 50, rows.tobytes())
    r.execute_command("V.STOREBATCH", "i_pv", 3, 0, 20, rows[:20].tobytes())
    r.execute_command("V.FETCH", "i_pk", 0, "RANGE", 0, 50)
    info = kv_info(r)
    assert info["registered_prefixes"] == 1 and info["vstore_sessions"] == 2
    assert info["total_prefix_tokens"] == 50
    assert info["vstore_bytes"] == 70 * (4 + 18 * 1024 // 32)  # turbo4 bytes per row
    assert info["vstore_total_fetches"] == 50


def test_block_tables_count_against_maxmemory(server_factory):
    # 40 full tables used to take 1 GiB of RSS under --maxmemory 64mb
    # while vstore_bytes said 0. A table of n hashes holds 8n bytes of hashes plus an
    # index of the next power of two >= 2n slots of 8 bytes.
    n = 1048576
    table_bytes = 8 * n + 8 * 2 * n  # 24 MiB
    s = server_factory(["--maxmemory", "64mb"])
    r = s.client()
    rng = np.random.default_rng(7)
    for i in range(6):
        blob = rng.integers(1, 2**63, size=n, dtype=np.uint64).tobytes()
        assert r.execute_command("KV.PREFIX.REGISTER", f"t{i}", 64, "fp16", "BLOCKS", 16, n,
                                 blob) == b"OK"
        kept = min(i + 1, 2)  # two tables fit in 64 MiB; each new one evicts the oldest
        assert r.info("memory")["vstore_bytes"] == kept * table_bytes
        assert kv_info(r)["vstore_bytes"] == kept * table_bytes
        assert kv_info(r)["registered_prefixes"] == kept
    assert r.execute_command("KV.PREFIX.LOOKUP", "t0") == b"MISS"
    assert r.execute_command("KV.PREFIX.LOOKUP", "t5") == b"HIT"
    assert kv_info(r)["vstore_evictions"] == 2 * 4
    # Dropping gives the bytes back.
    assert r.execute_command("KV.PREFIX.DROP", "t4", "t5") == 2
    assert kv_info(r)["vstore_bytes"] == 0
    # A table larger than the whole budget is refused and changes nothing.
    r.config_set("maxmemory", "16mb")
    blob = rng.integers(1, 2**63, size=n, dtype=np.uint64).tobytes()
    assert err(r, "KV.PREFIX.REGISTER", "huge", 64, "fp16", "BLOCKS", 16, n, blob) == (
        "OOM command not allowed when used memory > 'maxmemory'.")
    assert r.execute_command("KV.PREFIX.LOOKUP", "huge") == b"MISS"
    assert kv_info(r)["vstore_bytes"] == 0
