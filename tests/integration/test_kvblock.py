"""KV.BLOCK.* against the real binary (docs/protocol.md "Blocks"): pins under memory
pressure (a leased run survives a fill of the budget, released by UNPIN and by its
deadline, -OOM when everything is pinned), chains under a budget (roots survive, leaves
go), and a restart that keeps links, hashes and tokens (WAL and snapshot)."""
import struct
import time

import pytest
import redis

from conftest import poll

VALUE = 8 * 1024
CHARGE = VALUE + 96 + 16  # value capacity + entry overhead + key (approximate)


def block(i: int) -> bytes:
    return bytes([i % 251]) * VALUE


def fill(r, prefix: str, n: int) -> None:
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"{prefix}{i}", block(i))
    p.execute()


def pinfo(r) -> dict:
    return r.info("pion")


def binfo(r, key: str) -> dict | None:
    v = r.execute_command("KV.BLOCK.INFO", key)
    if v is None:
        return None
    d = dict(zip([x.decode() for x in v[0::2]], v[1::2]))
    return d


def test_leased_run_survives_a_fill_and_is_released_by_unpin(server_factory):
    s = server_factory(["--maxmemory", str(64 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"run:{i}" for i in range(16)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 600000)
    assert count == 16 and lease > 0
    info = pinfo(r)
    assert info["pinned_keys"] == 16 and info["leases"] == 1
    assert info["pinned_bytes"] >= 16 * VALUE
    # Fill the whole budget several times over: the pinned run stays.
    fill(r, "fill:", 4 * 64)
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) == 16
    assert r.get(keys[3]) == block(3)
    # Released: the next fill evicts the run (it is now the least recently used).
    assert r.execute_command("KV.BLOCK.UNPIN", lease, 12345) == 1
    assert pinfo(r)["pinned_keys"] == 0
    fill(r, "more:", 2 * 64)
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) < 16


def test_pins_end_at_their_deadline(server_factory):
    s = server_factory(["--maxmemory", str(64 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"d:{i}" for i in range(8)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 300)
    assert count == 8
    # The active expiry cycle ends the lease by itself (no UNPIN, no client needed).
    r2 = s.client()
    assert poll(lambda: pinfo(r2)["leases"] == 0, timeout=10)
    assert pinfo(r2)["pinned_keys"] == 0
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 0


def test_a_client_that_dies_leaks_no_lease(server_factory):
    s = server_factory(["--appendonly", "no"])
    r = s.client()
    r.set("k", "v")
    c = s.client()
    c.execute_command("KV.BLOCK.MATCH", 1, "k", "PIN", 200)
    c.close()
    assert poll(lambda: pinfo(r)["leases"] == 0, timeout=10)


def test_oom_when_everything_is_pinned(server_factory):
    s = server_factory(["--maxmemory", str(16 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"p:{i}" for i in range(14)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 600000)
    assert count == 14
    # Other keys are evicted for new ones; once every evictable byte is pinned
    # (a budget of the pinned bytes and half a block), a write that needs room is -OOM.
    for i in range(8):
        r.set(f"new:{i}", block(i))
    r.config_set("maxmemory", pinfo(r)["pinned_bytes"] + CHARGE // 2)
    with pytest.raises(redis.exceptions.ResponseError, match="^OOM"):
        r.set("new:x", block(1))
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) == 14
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 1
    r.set("new:x", block(1))  # room again


def test_pinned_key_outlives_its_ttl(server_factory):
    s = server_factory(["--appendonly", "no"])
    r = s.client()
    r.set("t", "v", px=50)
    _, lease = r.execute_command("KV.BLOCK.MATCH", 1, "t", "PIN", 600000)
    time.sleep(0.1)  # let the TTL pass (not a synchronisation: the clock must move on)
    assert r.get("t") == b"v"
    assert r.pttl("t") == 0
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 1
    assert r.get("t") is None


def chain(r, prefix: str, n: int, after: str | None = None, hashes=None, tokens=None):
    args = ["KV.BLOCK.CHAIN"]
    if after is not None:
        args += ["AFTER", after]
    if hashes is not None:
        args += ["HASHES", struct.pack(f"<{len(hashes)}Q", *hashes)]
    if tokens is not None:
        args += ["TOKENS", tokens]
    for i in range(n):
        args += [f"{prefix}{i}", block(i)]
    assert r.execute_command(*args) == b"OK"


def test_chains_under_a_budget_keep_roots_and_lose_leaves(server_factory):
    # 12 chains of 6 blocks in a budget of about 40 blocks.
    s = server_factory(["--maxmemory", str(40 * CHARGE), "--appendonly", "no"])
    r = s.client()
    for c in range(12):
        chain(r, f"c{c}:", 6)
    held = {c: [r.exists(f"c{c}:{i}") for i in range(6)] for c in range(12)}
    # Within every chain what is left is a prefix: leaves went first, roots last.
    for c, h in held.items():
        n = sum(h)
        assert h == [1] * n + [0] * (6 - n), (c, h)
    # The most recent chains are whole, the oldest were taken first.
    assert all(held[11]) and not any(held[0])
    # A chain that is read is refreshed as a unit: reading the last block left of
    # the oldest surviving chain keeps its root over the chains written after.
    victim = min(c for c in range(12) if held[c][0])
    leaf = max(i for i in range(6) if held[victim][i])
    assert r.get(f"c{victim}:{leaf}") == block(leaf)
    for c in range(12, 16):
        chain(r, f"c{c}:", 6)
    assert r.exists(f"c{victim}:0") == 1
    assert not any(r.exists(f"c{c}:0") for c in range(victim + 1, victim + 2) if c < 12)


@pytest.mark.parametrize("how", ["wal", "snapshot"])
def test_restart_keeps_links_hashes_and_tokens(server_factory, how):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    r.set("root", "r")
    chain(r, "b", 4, after="root", hashes=[2**64 - 1, 2, 3, 4], tokens=16)
    r.delete("b2")  # b3 becomes a root
    r.rename("b1", "b1x")  # the links move
    if how == "snapshot":
        assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    r.close()
    s.restart()
    r = s.client()
    b0 = binfo(r, "b0")
    assert b0["parent"] == b"root" and b0["children"] == 1
    assert b0["hash"] == str(2**64 - 1).encode() and b0["tokens"] == 16
    assert binfo(r, "b1x")["parent"] == b"b0"
    assert binfo(r, "b3")["parent"] is None and binfo(r, "b3")["hash"] == b"4"
    assert binfo(r, "root")["children"] == 1
    assert binfo(r, "nope") is None
    assert r.get("b0") == block(0)


# ---- Quantized blocks: KV.BLOCK.CHAIN ... FORMAT f DTYPE d ROW n (docs/protocol.md
# "Block formats"). Budgets: docs/quant_formats.md §4.1, Gaussian rows (nMSE).
QROW = 256
QBUDGET = {"fp16": 4.3e-8, "fp8": 5.7e-4, "int8": 6.1e-5, "mlx4g32": 6.1e-3,
           "turbo4": 8.3e-3, "turbo3": 3.2e-2, "turbo2": 1.2e-1}
# What the output's own rounding adds (relative precision of the dtype, squared / 3).
QFLOOR = {"f32": 0.0, "f16": 2.0 ** -22 / 3, "bf16": 2.0 ** -16 / 3}


def qencode(x, dtype: str) -> bytes:
    import numpy as np
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x.tobytes()
    if dtype == "f16":
        return x.astype(np.float16).tobytes()
    b = x.view(np.uint32).astype(np.uint64)
    h = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)  # bf16, round to nearest even
    return h.tobytes()


def qdecode(raw: bytes, dtype: str):
    import numpy as np
    if dtype == "f32":
        return np.frombuffer(raw, dtype=np.float32).astype(np.float64)
    if dtype == "f16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float64)
    w = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
    return w.view(np.float32).astype(np.float64)


def qrows(dtype: str, rows: int = 64, seed: int = 7) -> bytes:
    import numpy as np
    return qencode(np.random.default_rng(seed).standard_normal(rows * QROW), dtype)


def nmse(x, y) -> float:
    return float(((x - y) ** 2).sum() / (x ** 2).sum())


def qchain(r, fmt: str, dtype: str, *kv, row: int = QROW):
    return r.execute_command("KV.BLOCK.CHAIN", "FORMAT", fmt, "DTYPE", dtype, "ROW", row, *kv)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_quantized_blocks_round_trip_within_their_budgets(r, dtype):
    value = qrows(dtype)
    x = qdecode(value, dtype)
    for fmt, budget in QBUDGET.items():
        key = f"q:{fmt}:{dtype}"
        assert qchain(r, fmt, dtype, key, value) == b"OK"
        got = r.get(key)
        assert len(got) == len(value) and r.strlen(key) == len(value)
        e = nmse(x, qdecode(got, dtype))
        if fmt == "fp16" and dtype != "f32":
            assert got == value  # fp16 holds every f16 and (normal-range) bf16 value exactly
            continue
        assert e <= 1.3 * budget + 2 * QFLOOR[dtype], (fmt, dtype, e)
        if fmt != "fp16":
            assert e >= 0.7 * budget, (fmt, dtype, e)
        # Every read command answers the dequantized value.
        assert r.mget(key, "absent") == [got, None]
        assert r.getex(key, px=600000) == got
        assert r.set(key + ":copy", b"x") and r.getdel(key) == got
        assert r.exists(key) == 0
    # The charge is the stored (quantized) bytes: turbo4 keeps ~1/7 of f32 rows.
    assert qchain(r, "turbo4", dtype, "q:mem", value) == b"OK"
    assert r.set("q:plain", value)
    assert r.memory_usage("q:mem") < r.memory_usage("q:plain") * (0.6 if dtype == "f32" else 0.8)


def test_quantized_block_errors_store_nothing(r):
    v = qrows("f32", rows=2)
    bad = [
        (["FORMAT", "turbo4", "k", v], "FORMAT requires DTYPE and ROW"),
        (["FORMAT", "turbo4", "DTYPE", "f32", "k", v], "FORMAT requires DTYPE and ROW"),
        (["DTYPE", "f32", "ROW", "256", "k", v], "require FORMAT"),
        (["FORMAT", "int4", "DTYPE", "f32", "ROW", "256", "k", v], "FORMAT must be one of"),
        (["FORMAT", "int8", "DTYPE", "f64", "ROW", "256", "k", v], "DTYPE must be one of"),
        (["FORMAT", "turbo4", "DTYPE", "f32", "ROW", "48", "k", v], "multiple of 32"),
        (["FORMAT", "mlx4g32", "DTYPE", "f32", "ROW", "33", "k", v], "multiple of 32"),
        (["FORMAT", "int8", "DTYPE", "f32", "ROW", "0", "k", v], "ROW must be"),
        (["FORMAT", "int8", "DTYPE", "f32", "ROW", "x", "k", v], "ROW must be"),
        (["FORMAT", "int8", "DTYPE", "f32", "ROW", "16385", "k", v], "ROW must be"),
        (["FORMAT", "int8", "FORMAT", "int8", "DTYPE", "f32", "ROW", "8", "k", v], "syntax"),
        (["FORMAT", "int8", "DTYPE", "f32", "ROW", "256", "k", v + b"\0\0\0\0"], "whole number"),
        (["FORMAT", "int8", "DTYPE", "f16", "ROW", "256", "ok", qrows("f16", 1), "k", b"\0"],
         "value 1 is not a whole number of rows"),
    ]
    for args, text in bad:
        with pytest.raises(redis.ResponseError, match=text):
            r.execute_command("KV.BLOCK.CHAIN", *args)
        assert r.exists("k", "ok") == 0
    import numpy as np
    for special in (np.inf, -np.inf, np.nan):
        x = np.ones(2 * QROW, dtype=np.float32)
        x[QROW + 3] = special
        for dtype in ("f32", "f16", "bf16"):
            raw = qencode(x, dtype)
            for fmt in QBUDGET:
                if fmt == "fp16":
                    assert qchain(r, fmt, dtype, "nf", raw) == b"OK"
                    y = qdecode(r.get("nf"), dtype)
                    assert (np.isnan(y[QROW + 3]) if np.isnan(special) else y[QROW + 3] == special)
                    continue
                with pytest.raises(redis.ResponseError, match="non-finite value in row 1"):
                    qchain(r, fmt, dtype, "k", raw)
                assert r.exists("k") == 0


def test_quantized_block_is_no_editable_string(r):
    v = qrows("bf16", rows=4)
    assert qchain(r, "fp8", "bf16", "q", v) == b"OK"
    assert r.strlen("q") == len(v)
    for cmd in (["GETRANGE", "q", 0, 3], ["SETRANGE", "q", 0, "x"], ["APPEND", "q", "x"],
                ["INCR", "q"], ["SETBIT", "q", 0, 1], ["COPY", "q", "q2"], ["DUMP", "q"]):
        with pytest.raises(redis.ResponseError, match="quantized block"):
            r.execute_command(*cmd)
    assert r.exists("q2") == 0 and r.strlen("q") == len(v)
    assert r.rename("q", "q3") and r.strlen("q3") == len(v)  # the format moves with the value
    assert r.set("q3", b"plain bytes") and r.getrange("q3", 0, 4) == b"plain"
    assert r.append("q3", "!") == 12 and r.get("q3") == b"plain bytes!"
    # SET ... GET and GETSET answer the old value dequantized.
    assert qchain(r, "int8", "f32", "q4", qrows("f32", rows=1)) == b"OK"
    old = r.get("q4")
    assert len(old) == QROW * 4 and r.set("q4", "new", get=True) == old


@pytest.mark.parametrize("how", ["wal", "snapshot"])
def test_restart_keeps_quantized_blocks(server_factory, how):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    want = {}
    for i, (fmt, dtype) in enumerate([("turbo4", "bf16"), ("int8", "f32"), ("fp8", "f16"),
                                      ("mlx4g32", "bf16"), ("turbo2", "f32"), ("fp16", "f32")]):
        key = f"r:{fmt}:{dtype}"
        assert qchain(r, fmt, dtype, key, qrows(dtype, rows=8, seed=i), row=128) == b"OK"
        want[key] = (r.get(key), r.memory_usage(key))
    assert qchain(r, "turbo3", "f16", "r:gone", qrows("f16", rows=1), row=128) == b"OK"
    r.set("r:gone", b"plain")  # SET over a quantized block: plain bytes after the restart too
    if how == "snapshot":
        assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    r.close()
    s.restart()
    r = s.client()
    for key, (value, mem) in want.items():
        assert r.get(key) == value, key  # the stored bytes, never re-quantized
        assert r.strlen(key) == len(value) and r.memory_usage(key) == mem
    assert r.get("r:gone") == b"plain" and r.getrange("r:gone", 0, 1) == b"pl"


def test_quantized_blocks_keep_their_format_in_the_disk_tier(server_factory, tmpdir_path):
    import numpy as np
    s = server_factory(["--maxmemory", "8mb", "--tier-dir", str(tmpdir_path / "tier"),
                        "--tier-maxbytes", "64mb", "--appendonly", "yes"])
    r = s.client()
    want = {}
    for i in range(6):  # 2 MiB of f32 each, ~0.5 MiB stored (int8)
        raw = qencode(np.random.default_rng(i).standard_normal(512 * 1024), "f32")
        assert qchain(r, "int8", "f32", f"t{i}", raw, row=1024) == b"OK"
        want[f"t{i}"] = r.get(f"t{i}")
        assert len(want[f"t{i}"]) == len(raw)
    for j in range(12):  # newer plain values push the (older) blocks to the tier
        r.set(f"p{j}", bytes([j]) * (1 << 20))
    poll(lambda: pinfo(r)["tier_write_backlog_bytes"] == 0 or None, timeout=30)
    assert pinfo(r)["tier_entries"] >= 6
    for key, v in want.items():  # from the tier: still quantized blocks, answered dequantized
        assert r.strlen(key) == len(v)
        assert r.mget(key) == [v]
        assert r.get(key) == v
        with pytest.raises(redis.ResponseError, match="quantized block"):
            r.getrange(key, 0, 1)


def test_block_connection_chains_quantized_blocks(server, r):
    """The engines' connection (pion.integrations._conn): chain(fmt=(f, dtype, row))
    stores quantized blocks that get_into reads back at their original size."""
    from pion.integrations import _conn
    conn = _conn.connect(f"redis://127.0.0.1:{server.port}/0")
    try:
        values = [qrows("bf16", rows=4, seed=s) for s in range(10)]
        pairs = [(f"e{i}", v) for i, v in enumerate(values)]
        replies = conn.chain(pairs, fmt=("turbo4", "bf16", QROW), per_command=4)
        assert replies == [b"OK"] * 3
        bufs = [bytearray(len(v)) for v in values]
        assert conn.get_into([k for k, _ in pairs], bufs) == [len(v) for v in values]
        for v, b in zip(values, bufs):
            e = nmse(qdecode(v, "bf16"), qdecode(bytes(b), "bf16"))
            assert 0.7 * QBUDGET["turbo4"] <= e <= 1.3 * QBUDGET["turbo4"] + 2 * QFLOOR["bf16"]
        assert binfo(r, "e5")["parent"] == b"e4"
        bad = conn.chain([("x", b"\0" * 3)], fmt=("int8", "f32", 8))
        assert len(bad) == 1 and "whole number of rows" in str(bad[0])
        assert r.exists("x") == 0
    finally:
        conn.close()
