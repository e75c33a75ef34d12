"""V.STOREBATCH / V.FETCH / V.INFO against the real binary (docs/protocol.md "V-store")."""
from __future__ import annotations

import shutil
import subprocess
import threading

import numpy as np
import pytest
import redis


# Gaussian nMSE at D=1024 from docs/quant_formats.md §4.1; budget = 1.15x.
NMSE = {"fp16": 4.3e-8, "fp8": 5.7e-4, "int8": 6.1e-5, "mlx4g32": 6.1e-3,
        "turbo4": 8.3e-3, "turbo3": 3.2e-2, "turbo2": 1.2e-1}
ROW_BYTES = {"fp16": lambda d: 2 * d, "fp8": lambda d: 4 + 34 * d // 32, "int8": lambda d: d + 4,
             "mlx4g32": lambda d: d // 2 + d // 8, "turbo4": lambda d: 4 + 18 * d // 32,
             "turbo3": lambda d: 4 + 14 * d // 32, "turbo2": lambda d: 4 + 10 * d // 32}


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def gaussian(rows: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def int8_reference(x: np.ndarray) -> np.ndarray:
    """docs/quant_formats.md §2.3, in float32 arithmetic exactly as specified."""
    out = np.zeros_like(x)
    for i, row in enumerate(x):
        a = np.float32(np.max(np.abs(row)))
        if a == 0:
            continue
        inv = np.float32(127.0) / a
        s = a / np.float32(127.0)
        q = np.clip(np.rint(row * inv), -127, 127).astype(np.float32)
        out[i] = q * s
    return out


@pytest.mark.parametrize("fmt", list(NMSE))
def test_round_trip_within_budget(r, fmt):
    d, n = 1024, 256
    x = gaussian(n, d, 7)
    ns = "rt_" + fmt
    assert r.execute_command("KV.PREFIX.REGISTER", ns, d, fmt) == b"OK"
    assert r.execute_command("V.STOREBATCH", ns + "_pk", 0, 0, n, x.tobytes()) == b"OK"
    y = np.frombuffer(r.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, n), np.float32)
    y = y.reshape(n, d)
    nmse = float(np.sum((x - y) ** 2) / np.sum(x ** 2))
    assert nmse <= 1.15 * NMSE[fmt], (fmt, nmse)
    if fmt != "fp16":
        assert nmse >= 0.5 * NMSE[fmt], ("suspiciously exact", fmt, nmse)
    # Deterministic: a second store of the same rows fetches identical bytes.
    assert r.execute_command("V.STOREBATCH", ns + "_pv", 0, 0, n, x.tobytes()) == b"OK"
    y2 = r.execute_command("V.FETCH", ns + "_pv", 0, "RANGE", 0, n)
    assert y2 == y.tobytes()
    # F16 output is the f32 decode rounded to nearest even.
    h = np.frombuffer(r.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, n, "FMT", "F16"),
                      np.float16)
    assert np.array_equal(h, y.reshape(-1).astype(np.float16))
    # Byte accounting per format.
    info = r.execute_command("V.INFO", ns + "_pk").decode()
    assert f"bytes:{n * ROW_BYTES[fmt](d)}" in info


def test_int8_matches_reference_exactly(r):
    d = 100  # int8 takes any dim
    x = gaussian(33, d, 3) * 5
    x[4] = 0  # an all-zero row
    r.execute_command("KV.PREFIX.REGISTER", "i8", d, "int8")
    r.execute_command("V.STOREBATCH", "i8_pk", 0, 0, 33, x.tobytes())
    y = np.frombuffer(r.execute_command("V.FETCH", "i8_pk", 0, "RANGE", 0, 33), np.float32)
    assert np.array_equal(y.reshape(33, d), int8_reference(x))


def test_fp16_bit_exact(r):
    d = 96
    x = gaussian(40, d, 5) * 1000
    x[0, :4] = [np.inf, -np.inf, 70000.0, 1e-8]  # overflow to inf is the point
    r.execute_command("KV.PREFIX.REGISTER", "h", d, "fp16")
    r.execute_command("V.STOREBATCH", "h_pk", 0, 0, 40, x.tobytes())
    native = r.execute_command("V.FETCH", "h_pk", 0, "RANGE", 0, 40, "FMT", "NATIVE")
    assert native == x.astype(np.float16).tobytes()
    f32 = r.execute_command("V.FETCH", "h_pk", 0, "RANGE", 0, 40)
    assert f32 == x.astype(np.float16).astype(np.float32).tobytes()
    # F16 input is stored and returned bit for bit.
    h = (gaussian(40, d, 6)).astype(np.float16)
    r.execute_command("V.STOREBATCH", "h_pv", 2, 0, 40, h.tobytes(), "FMT", "F16")
    assert r.execute_command("V.FETCH", "h_pv", 2, "RANGE", 0, 40, "fmt", "native") == h.tobytes()
    assert r.execute_command("V.FETCH", "h_pv", 2, "RANGE", 0, 40, "FMT", "F16") == h.tobytes()


def test_gaps_overwrite_null_and_zero_fill(r):
    d = 32
    r.execute_command("KV.PREFIX.REGISTER", "g", d, "int8")
    a = gaussian(10, d, 1)
    r.execute_command("V.STOREBATCH", "g_pk", 1, 5, 10, a.tobytes())
    # Nothing stored in the requested rows -> null; beyond stored -> zeros.
    assert r.execute_command("V.FETCH", "g_pk", 1, "RANGE", 20, 30) is None
    assert r.execute_command("V.FETCH", "g_pk", 0, "RANGE", 0, 5) is None
    assert r.execute_command("V.FETCH", "g_pk", 7, "RANGE", 0, 5) is None
    y = np.frombuffer(r.execute_command("V.FETCH", "g_pk", 1, "RANGE", 0, 20), np.float32)
    y = y.reshape(20, d)
    assert not y[:5].any() and not y[15:].any()
    assert np.array_equal(y[5:15], int8_reference(a))
    # Overwrite part of it.
    b = gaussian(4, d, 2)
    r.execute_command("V.STOREBATCH", "g_pk", 1, 7, 4, b.tobytes())
    y = np.frombuffer(r.execute_command("V.FETCH", "g_pk", 1, "RANGE", 5, 15), np.float32)
    y = y.reshape(10, d)
    assert np.array_equal(y[2:6], int8_reference(b))
    assert np.array_equal(y[:2], int8_reference(a[:2]))
    # Id list in request order, unstored ids zero.
    ids = np.frombuffer(r.execute_command("V.FETCH", "g_pk", 1, 14, 5, 1000), np.float32)
    ids = ids.reshape(3, d)
    assert np.array_equal(ids[0], int8_reference(a[9:10])[0])
    assert np.array_equal(ids[1], int8_reference(a[0:1])[0])
    assert not ids[2].any()
    assert r.execute_command("V.FETCH", "g_pk", 1, 900, 901) is None
    info = r.execute_command("V.INFO", "g_pk").decode()
    assert "layer_1_tokens:15" in info and "num_layers:2" in info


def test_batch_form(r):
    d = 64
    r.execute_command("KV.PREFIX.REGISTER", "b", d, "fp16")
    x = gaussian(8, d, 4).astype(np.float16)
    for layer in (0, 2):
        r.execute_command("V.STOREBATCH", "b_pv", layer, 0, 8, x.tobytes(), "FMT", "F16")
    out = r.execute_command("V.FETCH", "b_pv", "BATCH", 0, 8, "FMT", "NATIVE")
    assert out == [x.tobytes(), None, x.tobytes()]
    out = r.execute_command("V.FETCH", "b_pv", "batch", 2, 10, 4)
    assert len(out) == 4 and out[1] is None and out[3] is None
    f = np.frombuffer(out[0], np.float32).reshape(8, d)
    assert np.array_equal(f[:6], x[2:].astype(np.float32)) and not f[6:].any()
    assert err(r, "V.FETCH", "b_pk", "BATCH", 0, 8) == "V.FETCH BATCH: session has no stored layers"
    assert err(r, "V.FETCH", "b_pv", "BATCH", 8, 8) == (
        "V.FETCH BATCH invalid range: end must exceed start (>=0)")


def test_errors(r):
    r.execute_command("KV.PREFIX.REGISTER", "e", 32, "turbo3")
    one = gaussian(1, 32, 0).tobytes()
    assert err(r, "V.STOREBATCH", "nope_pk", 0, 0, 1, one) == "NOSESSION session not found"
    assert err(r, "V.STOREBATCH", "e", 0, 0, 1, one) == "NOSESSION session not found"
    assert err(r, "V.STOREBATCH", "e_pk", 256, 0, 1, one) == "layer out of range (0..255)"
    assert err(r, "V.STOREBATCH", "e_pk", "x", 0, 1, one) == "value is not an integer or out of range"
    assert err(r, "V.STOREBATCH", "e_pk", 0, -1, 1, one) == "invalid start (0..16777216)"
    assert err(r, "V.STOREBATCH", "e_pk", 0, 0, 0, one) == "invalid count (1..16777216)"
    assert err(r, "V.STOREBATCH", "e_pk", 0, 16777215, 2, one * 2) == (
        "start + count exceeds 16777216 tokens")
    assert err(r, "V.STOREBATCH", "e_pk", 0, 0, 2, one) == (
        "V.STOREBATCH: blob size 128 != expected 256 (count=2 x kv_dim=32 x 4)")
    assert err(r, "V.STOREBATCH", "e_pk", 0, 0, 1, one, "FMT", "BF16") == (
        "V.STOREBATCH: unknown option (expected FMT F32|F16)")
    bad = np.ones((2, 32), np.float32)
    bad[1, 3] = np.nan
    assert err(r, "V.STOREBATCH", "e_pk", 0, 0, 2, bad.tobytes()) == "non-finite value in row 1"
    assert r.execute_command("V.FETCH", "e_pk", 0, "RANGE", 0, 2) is None  # nothing changed
    assert err(r, "V.FETCH", "e_pk", 0, "RANGE", 5, 5) == "invalid RANGE: end must exceed start (>=0)"
    assert err(r, "V.FETCH", "e_pk", 0, "RANGE", 0) == (
        "V.FETCH RANGE requires: session_id layer_id RANGE start end")
    assert err(r, "V.FETCH", "e_pk", 0, 1, "FMT", "NATIVE") == (
        "FMT NATIVE requires the RANGE or BATCH form")
    assert err(r, "V.FETCH", "e_pk", 0, "RANGE", 0, 1, "FMT", "X") == (
        "V.FETCH: unknown FMT 'X' (want NATIVE|F32|F16)")
    assert err(r, "V.FETCH", "e_pk", 0, *range(4097)) == (
        "too many token IDs (at most 4096; use RANGE)")
    assert err(r, "V.FETCH", "zz_pv", 0, "RANGE", 0, 1) == "NOSESSION session not found"
    assert err(r, "V.INFO", "zz_pv") == "NOSESSION session not found"
    # fp16 keeps IEEE semantics: inf is stored.
    r.execute_command("KV.PREFIX.REGISTER", "f", 32, "fp16")
    assert r.execute_command("V.STOREBATCH", "f_pk", 0, 0, 2, bad.tobytes()) == b"OK"


def test_lru_eviction_by_sessions(server_factory):
    s = server_factory(["--max-sessions", "8"])
    r = s.client()
    for n in "abcd":
        assert r.execute_command("KV.PREFIX.REGISTER", n, 32, "fp16") == b"OK"
    r.execute_command("V.STOREBATCH", "a_pv", 0, 0, 1, gaussian(1, 32, 0).tobytes())  # touch a
    r.execute_command("V.FETCH", "b_pk", 0, "RANGE", 0, 1)                           # touch b
    assert r.execute_command("KV.PREFIX.LOOKUP", "d") == b"HIT"                     # touch d
    assert r.execute_command("KV.PREFIX.REGISTER", "e", 32, "fp16") == b"OK"         # evicts c
    assert [r.execute_command("KV.PREFIX.LOOKUP", n) for n in "abcde"] == [
        b"HIT", b"HIT", b"MISS", b"HIT", b"HIT"]
    info = r.execute_command("KV.PREFIX.INFO").decode()
    assert "vstore_evictions:2" in info and "vstore_sessions:8" in info
    # Both sides of c are gone.
    assert err(r, "V.INFO", "c_pk") == "NOSESSION session not found"
    assert err(r, "V.INFO", "c_pv") == "NOSESSION session not found"


def test_lru_eviction_by_bytes_and_oom(server_factory):
    d = 256  # 512 bytes per fp16 row
    s = server_factory(["--maxmemory", str(512 * 100)])
    r = s.client()
    for n in ("a", "b"):
        r.execute_command("KV.PREFIX.REGISTER", n, d, "fp16")
        r.execute_command("V.STOREBATCH", n + "_pk", 0, 0, 40, gaussian(40, d, 1).tobytes())
    r.execute_command("V.STOREBATCH", "b_pv", 0, 0, 40, gaussian(40, d, 2).tobytes())  # evicts a
    assert r.execute_command("KV.PREFIX.LOOKUP", "a") == b"MISS"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("V.STOREBATCH", "b_pv", 1, 0, 30, gaussian(30, d, 3).tobytes())
    assert str(e.value) == "OOM command not allowed when used memory > 'maxmemory'."
    info = r.execute_command("KV.PREFIX.INFO").decode()
    assert f"vstore_bytes:{80 * 512}" in info and "maxmemory:51200" in info
    # CONFIG SET maxmemory lowers the budget and evicts.
    r.execute_command("KV.PREFIX.REGISTER", "c", d, "fp16")
    r.config_set("maxmemory", 512 * 10)
    assert r.execute_command("KV.PREFIX.LOOKUP", "b") == b"MISS"
    assert r.execute_command("KV.PREFIX.LOOKUP", "c") == b"HIT"


@pytest.mark.concurrency
def test_many_clients_many_workers_no_wrong_byte(server_factory):
    s = server_factory(["-w", "4", "--max-sessions", "1024"])
    d = 128
    setup = s.client()
    setup.execute_command("KV.PREFIX.REGISTER", "shared", d, "fp16")
    shared = gaussian(64, d, 99).astype(np.float16)
    setup.execute_command("V.STOREBATCH", "shared_pk", 0, 0, 64, shared.tobytes(), "FMT", "F16")
    errors: list[str] = []

    def client(i: int) -> None:
        try:
            c = redis.Redis(port=s.port, socket_timeout=120)
            ns = f"c{i}"
            c.execute_command("KV.PREFIX.REGISTER", ns, d, "fp16")
            mine = gaussian(32, d, i).astype(np.float16)
            for layer in range(3):
                c.execute_command("V.STOREBATCH", ns + "_pv", layer, 0, 32, mine.tobytes(),
                                  "FMT", "F16")
            for layer in range(3):
                got = c.execute_command("V.FETCH", ns + "_pv", layer, "RANGE", 0, 32, "FMT", "NATIVE")
                if got != mine.tobytes():
                    errors.append(f"client {i} layer {layer}: wrong bytes")
            if c.execute_command("KV.PREFIX.LOOKUP", "shared") != b"HIT":
                errors.append(f"client {i}: shared namespace not visible")
            got = c.execute_command("V.FETCH", "shared_pk", 0, "RANGE", 0, 64, "FMT", "NATIVE")
            if got != shared.tobytes():
                errors.append(f"client {i}: wrong shared bytes")
            c.close()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(f"client {i}: {e!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert setup.dbsize() == 201


def test_large_fetch_native_and_f32(r):
    d, n = 1024, 4096  # 8 MiB of fp16, 16 MiB of f32
    x = gaussian(n, d, 11).astype(np.float16)
    r.execute_command("KV.PREFIX.REGISTER", "big", d, "fp16")
    r.execute_command("V.STOREBATCH", "big_pk", 0, 0, n, x.tobytes(), "FMT", "F16")
    assert r.execute_command("V.FETCH", "big_pk", 0, "RANGE", 0, n, "FMT", "NATIVE") == x.tobytes()
    assert r.execute_command("V.FETCH", "big_pk", 0, "RANGE", 0, n) == x.astype(np.float32).tobytes()


def test_redis_cli_session(server, tmp_path):
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli not installed")
    base = [cli, "-p", str(server.port)]

    def run(*args, stdin: bytes | None = None) -> bytes:
        return subprocess.run(base + list(args), input=stdin, capture_output=True, check=True,
                              timeout=30).stdout

    assert run("KV.PREFIX.REGISTER", "cli|ns", "8", "fp16").strip() == b"OK"
    rows = np.arange(16, dtype=np.float16).reshape(2, 8)
    # -x appends stdin as the last argument, so the FMT option cannot follow it: send f32 rows.
    assert run("-x", "V.STOREBATCH", "cli|ns_pk", "0", "0", "2",
               stdin=rows.astype(np.float32).tobytes()).strip() == b"OK"
    assert run("KV.PREFIX.LOOKUP", "cli|ns").strip() == b"HIT"
    out = run("--raw", "V.FETCH", "cli|ns_pk", "0", "RANGE", "0", "2", "FMT", "NATIVE")
    assert out[:32] == rows.tobytes()
    assert b"registered_prefixes:1" in run("KV.PREFIX.INFO")
    assert b"kvprefix_hits" in run("PION.STATS")
