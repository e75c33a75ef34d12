"""The Python client's command layer (python/pion/client.py) against the real pion-server:
every command wrapper (docs/protocol.md), and the mapping of error replies to exceptions.

Run: PION_BIN_DIR=build/<preset>/bin PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/integration/test_client_commands.py
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import redis.exceptions as rex

import pion
from pion import (
    CommandError,
    NoAuthError,
    NoProtoError,
    NotEnabledError,
    OutOfMemoryError,
    PersistenceNotEnabledError,
    PionClient,
    PionConnectionError,
    PionError,
    PionPromptCache,
    SessionNotFoundError,
    UnknownCommandError,
    WrongArityError,
    WrongPassError,
)
from pion.errors import ColdMissError, LoadingError, translate


@pytest.fixture
def pc(server):
    c = PionClient(port=server.port)
    yield c
    c.close()


def rows(n: int, dim: int, seed: int = 0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(dtype)


# ------------------------------------------------------------------- admin


def test_admin_commands(pc):
    assert pc.ping() is True
    assert pc.ping("hello") == b"hello"
    assert pc.echo(b"\x00bin\xff") == b"\x00bin\xff"
    sec, usec = pc.time()
    assert sec > 1_600_000_000 and 0 <= usec < 1_000_000
    assert pc.dbsize() == 0
    pc.select(0)
    assert isinstance(pc.client_id(), int)
    assert pc.command_count() > 20
    info = pc.info()
    assert "kvprefix_hits" in info  # the "# Pion" section
    assert isinstance(pc.info("server"), dict)
    assert "maxmemory" in pc.config_get("maxmemory")
    pc.config_set("maxmemory", 0)
    hello = pc.hello(2)
    assert hello["server"] == "pion" and hello["proto"] == 2
    with pytest.raises(NoProtoError) as ei:
        pc.hello(4)
    assert ei.value.code == "NOPROTO"


def test_client_subcommands_use_one_connection(server):
    # CLIENT SETNAME/GETNAME name the connection that sends them: pool of one.
    c = PionClient(port=server.port, max_connections=1)
    c.client_setname("pion-py")
    assert c.client_getname() == "pion-py"
    assert any(e.get("name") == "pion-py" for e in c.client_list())
    assert c.client_info().get("name") == "pion-py"
    c.close()


def test_resp3_needs_a_capable_redis_py(server):
    if PionClient.resp3_supported():
        c = PionClient(port=server.port, protocol=3)
        assert c.hello(3)["proto"] == 3
    else:
        with pytest.raises(ValueError, match="RESP3 needs redis-py"):
            PionClient(port=server.port, protocol=3)
        with pytest.raises(ValueError):
            PionClient(port=server.port).hello(3)


def test_unknown_command_and_arity(pc):
    with pytest.raises(UnknownCommandError):
        pc.execute("NO.SUCH.COMMAND", "x")
    with pytest.raises(WrongArityError):
        pc.execute("KV.PREFIX.LOOKUP")
    with pytest.raises(CommandError, match="not an integer"):
        pc.execute("KV.PREFIX.REGISTER", "ns", "12x", "fp16")


def _start_with_password(server_factory, password: str):
    """Starts a --requirepass server and waits for it with an authenticated PING."""
    s = server_factory(args=["--requirepass", password], start=False)
    s.start(wait=False)
    deadline = time.monotonic() + 60
    c = PionClient(port=s.port, password=password, retries=0, socket_connect_timeout=1)
    while True:
        assert s.proc.poll() is None, s.log()
        try:
            # PING is answered while recovery runs; data commands only after it.
            if c.ping() and int(c.info("persistence").get("loading", 1)) == 0:
                break
        except (PionConnectionError, LoadingError):
            assert time.monotonic() < deadline, s.log()
            time.sleep(0.01)  # polling interval of a deadline loop
    c.close()
    return s


def test_auth_errors(server_factory):
    s = _start_with_password(server_factory, "s3cret")
    anon = PionClient(port=s.port)
    with pytest.raises(NoAuthError) as ei:
        anon.kv_prefix_info()
    assert ei.value.code == "NOAUTH"
    with pytest.raises(WrongPassError) as ei:
        anon.auth("wrong")
    assert ei.value.code == "WRONGPASS"
    anon.close()
    good = PionClient(port=s.port, password="s3cret")
    assert good.kv_prefix_info()["registered_prefixes"] == 0
    good.close()


def test_auth_without_password_configured(pc):
    with pytest.raises(CommandError) as ei:
        pc.auth("whatever")
    assert ei.value.code == "ERR"


def test_not_enabled(server_factory):
    s = server_factory(kvcache=False)
    c = PionClient(port=s.port)
    with pytest.raises(NotEnabledError):
        c.kv_prefix_info()
    with pytest.raises(NotEnabledError):
        c.kv_prefix_lookup("ns")
    c.close()


def test_connection_error_is_mapped():
    from conftest import free_port

    c = PionClient(port=free_port(), socket_connect_timeout=1, retries=0)
    with pytest.raises(PionConnectionError) as ei:
        c.ping()
    assert isinstance(ei.value, ConnectionError)


def test_translate_table():
    # Replies that need a particular server state (loading, Stage 2) are checked on the mapping.
    assert isinstance(translate(rex.BusyLoadingError("pion is loading the dataset in memory")), LoadingError)
    assert isinstance(translate(rex.ResponseError("COLDMISS session evicted to cold tier")), ColdMissError)
    assert isinstance(translate(rex.ResponseError("OOM command not allowed")), OutOfMemoryError)
    assert isinstance(translate(rex.ResponseError("WRONGPASS invalid")), WrongPassError)
    assert isinstance(translate(rex.ResponseError("NOPROTO unsupported")), NoProtoError)
    assert isinstance(translate(rex.AuthenticationError("Authentication required.")), NoAuthError)
    e = translate(rex.ResponseError("NOSESSION session not found"))
    assert isinstance(e, SessionNotFoundError) and e.code == "NOSESSION"
    assert e.message == "session not found"
    assert isinstance(translate(rex.ConnectionError("x")), PionConnectionError)
    for cls in (LoadingError, ColdMissError, OutOfMemoryError, CommandError, PionConnectionError):
        assert issubclass(cls, PionError)


# --------------------------------------------------------------- KV.PREFIX


def test_register_lookup_drop(pc):
    assert pc.kv_prefix_lookup("a|v1|m|fp16|p") is False
    pc.kv_prefix_register("a|v1|m|fp16|p", 128, "fp16")
    assert pc.kv_prefix_lookup("a|v1|m|fp16|p") is True
    assert pc.kv_prefix_lookup("a|v1|m|fp16|p", tokens=10, prefill_ms=5) is True
    pc.kv_prefix_register("a|v1|m|fp16|p", 128, "FP16")  # same dim/format: +OK
    assert pc.dbsize() == 1
    assert pc.kv_prefix_drop("a|v1|m|fp16|p", "never") == 1
    assert pc.kv_prefix_drop("a|v1|m|fp16|p") == 0
    assert pc.kv_prefix_lookup("a|v1|m|fp16|p") is False
    with pytest.raises(ValueError):
        pc.kv_prefix_drop()


def test_register_errors(pc):
    with pytest.raises(CommandError, match="unknown vquant"):
        pc.kv_prefix_register("ns", 128, "fp4")
    with pytest.raises(CommandError, match="divisible by 32"):
        pc.kv_prefix_register("ns", 100, "turbo4")
    with pytest.raises(CommandError, match="kv_dim"):
        pc.kv_prefix_register("ns", 0, "fp16")
    pc.kv_prefix_register("ns", 128, "fp16")
    with pytest.raises(CommandError, match="already registered"):
        pc.kv_prefix_register("ns", 64, "fp16")
    with pytest.raises(CommandError, match="PREFILL_MS"):
        pc.kv_prefix_register("ns", 128, "fp16", prefill_ms=86_400_001)
    with pytest.raises(CommandError):
        pc.kv_prefix_lookup("ns", tokens=-1)


def test_blocks_and_membership(pc):
    ids = list(range(1000, 1000 + 16 * 6 + 5))
    hashes = pion.block_hashes(ids, 16)
    assert hashes.size == 6
    pc.kv_prefix_register("b", 64, "fp16", block_size=16, hashes=hashes)
    table = pc.kv_prefix_blocks("b")
    assert table is not None and table.block_size == 16 and len(table) == 6
    assert np.array_equal(table.hashes, hashes)
    other = pion.block_hashes(ids[:48] + [7] * 48, 16)  # shares the first 3 blocks
    bits = pc.kv_prefix_membership("b", other)
    assert bits.tolist() == [True, True, True, False, False, False]
    probe = np.concatenate([hashes[::-1], [np.uint64(12345)]])
    assert pc.kv_prefix_membership("b", probe).tolist() == [True] * 6 + [False]
    assert pc.kv_prefix_membership("b", []).size == 0
    assert pc.kv_prefix_blocks("nope") is None
    assert pc.kv_prefix_membership("nope", hashes) is None
    pc.kv_prefix_register("noblocks", 64, "fp16")
    assert pc.kv_prefix_blocks("noblocks") is None
    assert pc.kv_prefix_membership("noblocks", hashes) is None


def test_block_hash_scheme_is_documented_one():
    import struct

    import xxhash

    ids = list(range(40))
    h, expect = 0, []
    for b in range(2):
        blk = struct.pack("<16I", *ids[16 * b:16 * b + 16])
        h = xxhash.xxh3_64_intdigest(struct.pack("<Q", h) + blk)
        expect.append(h)
    assert pion.block_hashes(ids, 16).tolist() == expect
    assert pion.block_hashes(ids, 16, seed=7).tolist() != expect
    with pytest.raises(ValueError):
        pion.block_hashes([-1] * 16)


def test_kv_prefix_info(pc):
    info = pc.kv_prefix_info()
    for key in ("registered_prefixes", "total_prefix_tokens", "vstore_sessions", "vstore_max_sessions",
                "vstore_total_fetches", "vstore_evictions", "vstore_bytes", "maxmemory", "wal_enabled"):
        assert key in info, key
    pc.kv_prefix_register("i", 64, "int8")
    pc.v_storebatch("i_pk", 0, 0, rows(10, 64))
    info = pc.kv_prefix_info()
    assert info["registered_prefixes"] == 1 and info["vstore_sessions"] == 2
    assert info["total_prefix_tokens"] == 10 and info["vstore_bytes"] > 0


def test_save_and_commit(pc, server):
    pc.kv_prefix_register("d", 8, "fp16")
    pc.v_storebatch("d_pk", 0, 0, rows(4, 8))
    pc.kv_prefix_commit()
    pc.kv_prefix_save()
    assert (server.dir / "pion.vstore").exists()
    with pytest.raises(CommandError):
        pc.kv_prefix_save("/abs/path")
    with pytest.raises(CommandError):
        pc.kv_prefix_save("../outside")


def test_loading_error_while_recovering(server):
    """A client that connects while the server loads its snapshot gets LoadingError (never
    another error), then the data, bit for bit. Whether the window is caught depends on
    the machine's speed, so it is reported, not required."""
    c = PionClient(port=server.port, socket_connect_timeout=1)
    d = rows(16384, 1024, 7, np.float16)  # 32 MiB snapshot
    c.kv_prefix_register("big", 1024, "fp16")
    c.v_storebatch("big_pk", 0, 0, d)
    c.kv_prefix_save()
    server.stop()
    server.start(wait=False)
    seen = {"LOADING": 0, "connect": 0}
    deadline = time.monotonic() + 60
    while True:
        try:
            info = c.kv_prefix_info()
            break
        except LoadingError as e:
            assert e.code == "LOADING"
            seen["LOADING"] += 1
        except PionConnectionError:
            seen["connect"] += 1
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.002)  # polling interval of a deadline loop
    print(f"\nreplies before ready: {seen}")
    assert info["registered_prefixes"] == 1
    assert np.array_equal(c.v_fetch_range("big_pk", 0, 0, 16384, fmt="NATIVE", dim=1024), d)
    c.close()


def test_save_and_commit_without_persistence(server_factory):
    s = server_factory(args=["--appendonly", "no"])
    c = PionClient(port=s.port)
    for call in (c.kv_prefix_save, c.kv_prefix_commit):
        with pytest.raises(PersistenceNotEnabledError) as ei:
            call()
        assert ei.value.code == "NOPERSIST"
    c.close()


# ----------------------------------------------------------------- V-store


def test_storebatch_fetch_fp16(pc):
    pc.kv_prefix_register("f", 64, "fp16")
    x = rows(20, 64, 1)
    pc.v_storebatch("f_pk", 0, 0, x)
    exp16 = x.astype(np.float16)
    got = pc.v_fetch_range("f_pk", 0, 0, 20)  # F32 default
    assert got.dtype == np.float32 and got.shape == (20, 64)
    assert np.array_equal(got, exp16.astype(np.float32))
    nat = pc.v_fetch_range("f_pk", 0, 0, 20, fmt="NATIVE", dim=64)
    assert nat.dtype == np.float16 and np.array_equal(nat, exp16)
    assert nat.flags.writeable  # a view of the buffer the reply was received into
    nat2 = pc.v_fetch_range("f_pk", 0, 0, 20, fmt="NATIVE")  # dim read with V.INFO
    assert np.array_equal(nat2, exp16)
    f16 = pc.v_fetch_range("f_pk", 0, 5, 8, fmt="f16")
    assert f16.dtype == np.float16 and np.array_equal(f16, exp16[5:8])
    # rows beyond the stored count are zeros; a range with no stored row is None
    tail = pc.v_fetch_range("f_pk", 0, 18, 24)
    assert np.array_equal(tail[:2], exp16[18:].astype(np.float32)) and not tail[2:].any()
    assert pc.v_fetch_range("f_pk", 0, 30, 40) is None
    assert pc.v_fetch_range("f_pk", 3, 0, 5) is None
    # f16 input goes as FMT F16
    pc.v_storebatch("f_pv", 2, 4, exp16[:3])
    assert np.array_equal(pc.v_fetch_range("f_pv", 2, 4, 7, fmt="F16"), exp16[:3])
    got = pc.v_fetch_ids("f_pk", 0, [7, 2, 7])
    assert np.array_equal(got, exp16[[7, 2, 7]].astype(np.float32))


def test_fetch_batch(pc):
    pc.kv_prefix_register("g", 32, "fp16")
    a, b = rows(8, 32, 2), rows(8, 32, 3)
    pc.v_storebatch("g_pk", 0, 0, a)
    pc.v_storebatch("g_pk", 2, 0, b)
    out = pc.v_fetch_batch("g_pk", 0, 8, fmt="NATIVE", dim=32)
    assert len(out) == 3 and out[1] is None
    assert np.array_equal(out[0], a.astype(np.float16)) and np.array_equal(out[2], b.astype(np.float16))
    out = pc.v_fetch_batch("g_pk", 0, 8, 1)
    assert len(out) == 1 and out[0].dtype == np.float32


def test_fetch_pipeline_large_replies_and_errors(pc):
    pc.kv_prefix_register("L", 1024, "fp16")
    x = rows(10240, 1024, 6, np.float16)  # 20 MiB: far beyond any socket buffer
    pc.v_storebatch("L_pk", 0, 0, x)
    r = pc.fetch_pipeline([
        ["V.FETCH", "L_pk", "0", "RANGE", "0", "10240", "FMT", "NATIVE"],
        ["V.FETCH", "nope_pk", "0", "RANGE", "0", "1"],
        ["V.FETCH", "L_pk", "BATCH", "0", "2", "FMT", "F32"],
        ["V.FETCH", "L_pk", "0", "RANGE", "20000", "20001"],
        ["PING"],
    ])
    assert np.array_equal(PionClient.decode_rows(r[0], 10240, 1024, "NATIVE"), x)
    assert isinstance(r[1], SessionNotFoundError)
    assert isinstance(r[2], list) and np.array_equal(PionClient.decode_rows(r[2][0], 2, 1024, "F32"),
                                                     x[:2].astype(np.float32))
    assert r[3] is None and r[4] == b"PONG"
    assert pc.ping() is True and pc.dbsize() == 1  # the pooled connection is clean afterwards
    with pytest.raises(SessionNotFoundError):
        pc.v_fetch_batch("nope_pk", 0, 1)


def test_quantized_formats_round_trip(pc):
    x = rows(16, 128, 4)
    for fmt in pion.VQUANTS:
        pc.kv_prefix_register("q" + fmt, 128, fmt)
        pc.v_storebatch("q" + fmt + "_pv", 0, 0, x)
        y = pc.v_fetch_range("q" + fmt + "_pv", 0, 0, 16)
        rel = np.linalg.norm(y - x) / np.linalg.norm(x)
        assert rel < 0.5, (fmt, rel)
        info = pc.v_info("q" + fmt + "_pv")
        assert info["value_dim"] == 128 and str(info["v_format"]).lower() == fmt
        assert info["layer_0_tokens"] == 16


def test_v_info_and_session_errors(pc):
    g = pc.v_info()
    assert "sessions" in g and "total_tokens" in g
    with pytest.raises(SessionNotFoundError):
        pc.v_info("nope_pk")
    with pytest.raises(SessionNotFoundError):
        pc.v_storebatch("nope_pk", 0, 0, rows(1, 8))
    with pytest.raises(SessionNotFoundError):
        pc.v_fetch_range("nope_pk", 0, 0, 1)
    pc.kv_prefix_register("e", 8, "fp16")
    with pytest.raises(CommandError):  # blob size does not match count x dim
        pc.execute("V.STOREBATCH", "e_pk", "0", "0", "2", b"\x00" * 12)
    with pytest.raises(CommandError):
        pc.v_storebatch("e_pk", 256, 0, rows(1, 8))
    with pytest.raises(ValueError):
        pc.v_storebatch("e_pk", 0, 0, np.zeros(8, np.float32))


def test_non_finite_rejected_by_quantized_format(pc):
    pc.kv_prefix_register("nf", 32, "int8")
    x = rows(2, 32)
    x[1, 3] = np.inf
    with pytest.raises(CommandError, match="non-finite"):
        pc.v_storebatch("nf_pk", 0, 0, x)


def test_oom(server_factory):
    s = server_factory(args=["--maxmemory", "1mb"])
    c = PionClient(port=s.port)
    c.kv_prefix_register("big", 1024, "fp16")
    with pytest.raises(OutOfMemoryError) as ei:
        c.v_storebatch("big_pk", 0, 0, np.zeros((1024, 1024), np.float32))  # 2 MiB stored
    assert ei.value.code == "OOM"
    assert c.v_fetch_range("big_pk", 0, 0, 1) is None  # nothing changed
    c.close()


# ----------------------------------------------------------------- receipt


def test_pion_stats(pc):
    st = pc.pion_stats()
    assert tuple(st) == pion.STATS_FIELDS
    assert isinstance(st["prefill_seconds_avoided"], float)
    pc.kv_prefix_register("s", 16, "fp16", prefill_ms=1200)
    for _ in range(3):
        assert pc.kv_prefix_lookup("s")
    pc.kv_prefix_lookup("missing")
    pc.kv_prefix_register("t", 16, "fp16")
    pc.v_storebatch("t_pk", 0, 0, rows(100, 16))
    pc.kv_prefix_lookup("t")
    pc.v_fetch_range("t_pk", 0, 0, 100)
    st = pc.pion_stats()
    assert st["kvprefix_hits"] == 4 and st["kvprefix_misses"] == 1
    assert st["kvprefix_hits_measured"] == 3
    assert st["kvprefix_prefill_us_measured"] == 3_600_000
    assert st["kvprefix_prefill_us_saved"] == 3_600_000 + 100 * 555
    assert st["prefill_seconds_avoided"] == pytest.approx(3.655)
    assert st["prefill_seconds_avoided_measured"] == pytest.approx(3.6)
    assert st["kvprefix_tokens_served"] == 100
    assert st["kvprefix_bytes_served"] == 100 * 16 * 4
    pc.pion_stats_reset()
    st = pc.pion_stats()
    assert st["kvprefix_hits"] == 0 and st["kvprefix_prefill_us_saved"] == 0


def test_info_parsers():
    assert pion.parse_info(b"# Pion\r\na:1\r\nb:x\r\nc:1.5\r\n\r\n") == {"a": 1, "b": "x", "c": 1.5}
    flat = [b"worker_id", 0, b"prefill_seconds_avoided", b"3.655"]
    assert pion.parse_stats(flat) == {"worker_id": 0, "prefill_seconds_avoided": 3.655}
    assert pion.parse_stats({b"worker_id": 0}) == {"worker_id": 0}


# ---------------------------------------------------------------- pipelining / reconnect


def test_store_is_one_pipeline_and_fetch_one_round_trip(server, monkeypatch):
    cache = PionPromptCache(port=server.port, vquant="fp16")
    calls = {"pipeline": 0, "fetch_pipeline": 0, "execute": 0}

    def counting(name):
        orig = getattr(cache.client, name)

        def wrapper(*a):
            calls[name] += 1
            return orig(*a)
        return wrapper

    for name in calls:
        monkeypatch.setattr(cache.client, name, counting(name))
    rng = np.random.default_rng(5)
    k = rng.standard_normal((4, 2, 50, 16)).astype(np.float32)
    v = rng.standard_normal((4, 2, 50, 16)).astype(np.float32)
    sent = cache.store("ns", k, v, prefix_ids=list(range(50)))
    assert calls == {"pipeline": 1, "fetch_pipeline": 0, "execute": 0}
    assert sent == 2 * 4 * 50 * 32 * 2  # fp16 namespace: rows sent as F16
    k2, v2 = cache.fetch("ns", 50)
    assert calls == {"pipeline": 1, "fetch_pipeline": 1, "execute": 0}  # K and V: one round trip
    assert k2.dtype == np.float16 and k2.shape == k.shape
    assert np.array_equal(k2, k.astype(np.float16)) and np.array_equal(v2, v.astype(np.float16))
    assert cache.blocks("ns").hashes.size == 3


def test_reconnects_after_restart(server):
    c = PionClient(port=server.port)
    c.kv_prefix_register("r", 8, "fp16")
    x = rows(5, 8, 9)
    c.v_storebatch("r_pk", 0, 0, x)
    before = c.v_fetch_range("r_pk", 0, 0, 5, fmt="NATIVE", dim=8).copy()
    durable = c.kv_prefix_info()["wal_enabled"] == 1
    server.restart()
    assert c.ping() is True  # stale pooled connection replaced transparently
    if durable:  # the WAL brings the rows back, bit for bit
        assert np.array_equal(c.v_fetch_range("r_pk", 0, 0, 5, fmt="NATIVE", dim=8), before)
    c.kv_prefix_register("r2", 8, "fp16")
    assert c.kv_prefix_lookup("r2") is True
    c.close()
