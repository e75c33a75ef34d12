"""ATTEND.PREFIX.* and KV.PREFIX.WARM against the real binary (docs/attention.md §1,
docs/protocol.md "ATTEND.PREFIX").

Every result is compared with a numpy float64 reference computed from what was stored
(the rows sent, or for KV.PREFIX.WARM the V-store's dequantized rows fetched back with
V.FETCH). Servers run with --attend-precision f32 unless a test is about f16, so the
slot holds exactly what was sent and the tolerance is the kernels' f32 accumulation.
"""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
import redis

from conftest import poll

F32 = ["--attend-precision", "f32"]
TOL = 2e-5  # max |server - numpy| / max(1, max|V|), f32 slots


def f32(a) -> bytes:
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def rand(shape, seed, amp=1.0):
    return np.random.default_rng(seed).uniform(-amp, amp, shape).astype(np.float32)


def reference(k, v, q, ksuf=None, vsuf=None, window=0, head_map=None, positions=None):
    """softmax(Q K^T / sqrt(D)) V over the visible positions of docs/attention.md §1, float64.

    k, v [H_kv, N, D]; q [H_q, M, D]; ksuf, vsuf [H_kv, S, D]; positions: per query head
    a set of prefix positions (sparse) or None (all). Returns out [H_q, M, D], lse [H_q, M].
    """
    h_kv, n, d = k.shape
    h_q, m, _ = q.shape
    s = 0 if ksuf is None else ksuf.shape[1]
    if head_map is None:
        head_map = [hq // (h_q // h_kv) for hq in range(h_q)]
    out = np.zeros((h_q, m, d))
    lse = np.full((h_q, m), -np.inf)
    for hq in range(h_q):
        g = head_map[hq]
        keys = k[g].astype(np.float64)
        vals = v[g].astype(np.float64)
        if s:
            keys = np.concatenate([keys, ksuf[g].astype(np.float64)])
            vals = np.concatenate([vals, vsuf[g].astype(np.float64)])
        pos = np.arange(n + s)
        for row in range(m):
            if s > 0:
                qp = n + s - m + row
                vis = pos <= qp
                if window > 0:
                    vis &= pos > qp - window
            else:
                vis = pos < n
                if window > 0:
                    vis &= pos >= n - window
            if positions is not None:
                sel = np.zeros(n + s, bool)
                sel[sorted(positions[hq])] = True
                sel[n:] = True  # the suffix is dense
                vis &= sel
            if not vis.any():
                continue
            sc = keys[vis] @ q[hq, row].astype(np.float64) / np.sqrt(d)
            mx = sc.max()
            w = np.exp(sc - mx)
            out[hq, row] = (w[:, None] * vals[vis]).sum(0) / w.sum()
            lse[hq, row] = mx + np.log(w.sum())
    return out, lse


def select_blocks(k, q, block, k_top, selector, head_map=None):
    """The prefix blocks sparse auto attends (docs/attention.md §1), float64."""
    h_kv, n, d = k.shape
    h_q = q.shape[0]
    if head_map is None:
        head_map = [hq // (h_q // h_kv) for hq in range(h_q)]
    nb = -(-n // block)
    k_top = min(k_top, nb)
    if k_top * block >= n:
        return list(range(nb))
    scores = np.zeros(nb)
    for b in range(nb):
        for hq in range(h_q):
            kb = k[head_map[hq], b * block:(b + 1) * block].astype(np.float64)
            qv = q[hq, 0].astype(np.float64)
            if selector == 0:
                scores[b] += qv @ kb.mean(0) / np.sqrt(d)
            else:
                scores[b] += np.maximum(qv * kb.min(0), qv * kb.max(0)).sum() / np.sqrt(d)
    order = sorted(range(nb), key=lambda b: (-scores[b], b))
    return sorted(order[:k_top])


def close(got, want, v, tol=TOL):
    scale = max(1.0, float(np.abs(v).max()))
    err = float(np.abs(got - want).max()) / scale
    assert err <= tol, err


def store(r, sid, layer, k, v, *extra):
    h, n, d = k.shape
    assert r.execute_command("ATTEND.PREFIX.STORE", sid, layer, h, n, d, f32(k), f32(v),
                             *extra) == b"OK"


def out_of(reply, h, m, d, lse=False):
    a = np.frombuffer(reply, "<f4")
    o = a[:h * m * d].reshape(h, m, d)
    if lse:
        assert a.size == h * m * d + h * m
        return o, a[h * m * d:].reshape(h, m)
    assert a.size == h * m * d
    return o


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def info(r) -> dict:
    body = r.execute_command("KV.PREFIX.INFO").decode()
    return dict(line.split(":", 1) for line in body.splitlines() if ":" in line)


# ----------------------------------------------------------------- results


@pytest.fixture
def s32(server_factory):
    return server_factory(F32)


@pytest.fixture
def r32(s32):
    c = s32.client()
    yield c
    c.close()


def test_store_lookup_dense_query(r32):
    h, n, d = 4, 37, 16
    k, v, q = rand((h, n, d), 1), rand((h, n, d), 2), rand((h, 1, d), 3)
    assert r32.execute_command("ATTEND.PREFIX.LOOKUP", "s", 0) == b"MISS"
    store(r32, "s", 0, k, v)
    assert r32.execute_command("ATTEND.PREFIX.LOOKUP", "s", 0) == b"HIT"
    assert r32.execute_command("ATTEND.PREFIX.LOOKUP", "s", 1) == b"MISS"
    got = out_of(r32.execute_command("ATTEND.PREFIX.QUERY", "s", 0, h, d, 5, f32(q)), h, 1, d)
    want, _ = reference(k, v, q)
    close(got, want, v)
    i = info(r32)
    assert i["sdpa_warm"] == "1" and int(i["sdpa_bytes"]) >= 2 * h * n * d * 4
    assert i["sdpa_queries"] == "1" and i["attend_precision"] == "f32"
    assert int(i["attend_threads"]) >= 1
    # INFO's # Pion section carries the same fields.
    pion = r32.info("pion")
    assert (pion["sdpa_warm"], pion["sdpa_cold"], pion["sdpa_demotions"]) == (1, 0, 0)
    assert (pion["sdpa_rehydrates"], pion["sdpa_queries"]) == (0, 1)
    assert pion["attend_precision"] == "f32" and pion["sdpa_bytes"] == int(i["sdpa_bytes"])


def test_query_multi_row_lse_and_window(r32):
    h, n, d, m = 2, 50, 8, 3
    k, v, q = rand((h, n, d), 4), rand((h, n, d), 5), rand((h, m, d), 6)
    store(r32, "s", 3, k, v)
    for window in (None, 0, 7, 500):
        args = [] if window is None else [window]
        rep = r32.execute_command("ATTEND.PREFIX.QUERY", "s", 3, h, d, 1, f32(q), *args)
        got, lse = out_of(rep, h, m, d, lse=True)
        want, wl = reference(k, v, q, window=window or 0)
        close(got, want, v)
        close(lse, wl, wl)
    # -1 is the "no window" placeholder.
    rep = r32.execute_command("ATTEND.PREFIX.QUERY", "s", 3, h, d, 1, f32(q), -1)
    close(out_of(rep, h, m, d, lse=True)[0], reference(k, v, q)[0], v)


def test_store_f16_blobs_and_f16_precision(server_factory):
    s = server_factory(["--attend-precision", "f16"])
    r = s.client()
    h, n, d = 2, 40, 16
    k16 = rand((h, n, d), 7).astype(np.float16)
    v16 = rand((h, n, d), 8).astype(np.float16)
    q = rand((h, 1, d), 9)
    assert r.execute_command("ATTEND.PREFIX.STORE", "s", 0, h, n, d, k16.tobytes(),
                             v16.tobytes(), "fmt", "f16") == b"OK"
    got = out_of(r.execute_command("ATTEND.PREFIX.QUERY", "s", 0, h, d, 1, f32(q)), h, 1, d)
    close(got, reference(k16.astype(np.float32), v16.astype(np.float32), q)[0], v16)
    # f32 blobs into an f16 slot: the reference on the rounded values.
    k, v = rand((h, n, d), 10), rand((h, n, d), 11)
    store(r, "t", 0, k, v)
    got = out_of(r.execute_command("ATTEND.PREFIX.QUERY", "t", 0, h, d, 1, f32(q)), h, 1, d)
    kr, vr = (x.astype(np.float16).astype(np.float32) for x in (k, v))
    close(got, reference(kr, vr, q)[0], v)
    assert info(r)["attend_precision"] == "f16"


@pytest.mark.parametrize("window", [0, 5])
def test_fused_gqa_causal_suffix(r32, window):
    h_kv, h_q, n, d, s, m = 2, 8, 33, 16, 6, 4
    k, v = rand((h_kv, n, d), 12), rand((h_kv, n, d), 13)
    ks, vs = rand((h_kv, s, d), 14), rand((h_kv, s, d), 15)
    q = rand((h_q, m, d), 16)
    store(r32, "f", 1, k, v)
    hm = bytes(hq // 4 for hq in range(h_q))
    args = ["ATTEND.PREFIX.QUERY_FUSED", "f", 1, h_q, d, s, h_kv, f32(q), f32(ks), f32(vs), hm]
    want, wl = reference(k, v, q, ks, vs, window=window)
    got = out_of(r32.execute_command(*args, window), h_q, m, d)
    close(got, want, v)
    got, lse = out_of(r32.execute_command(*args, window, "LSE"), h_q, m, d, lse=True)
    close(got, want, v)
    close(lse, wl, wl)
    if window == 0:
        # No window argument, LSE alone; an empty head_map is the default GQA map.
        args[-1] = b""
        got, lse = out_of(r32.execute_command(*args, "lse"), h_q, m, d, lse=True)
        close(got, want, v)
    # A custom head map (not the default grouping).
    hm2 = bytes([1, 0, 1, 0, 0, 1, 1, 0])
    args[-1] = hm2
    got = out_of(r32.execute_command(*args, window), h_q, m, d)
    close(got, reference(k, v, q, ks, vs, window=window, head_map=list(hm2))[0], v)


def test_fused_empty_suffix_equals_query(r32):
    h, n, d = 4, 20, 8
    k, v, q = rand((h, n, d), 17), rand((h, n, d), 18), rand((h, 1, d), 19)
    store(r32, "e", 0, k, v)
    a = r32.execute_command("ATTEND.PREFIX.QUERY_FUSED", "e", 0, h, d, 0, h, f32(q), b"", b"",
                            bytes(range(h)))
    b = r32.execute_command("ATTEND.PREFIX.QUERY", "e", 0, h, d, 1, f32(q))
    close(out_of(a, h, 1, d), reference(k, v, q)[0], v)
    assert np.allclose(np.frombuffer(a, "<f4"), np.frombuffer(b, "<f4"), atol=1e-6)


def test_sparse_explicit(r32):
    h, n, d, ksm = 3, 64, 16, 5
    k, v, q = rand((h, n, d), 20), rand((h, n, d), 21), rand((h, 1, d), 22)
    store(r32, "sp", 0, k, v)
    idx = np.array([[3, 60, 3, 10, 0], [1, 2, 63, 0, 0], [7, 7, 7, 7, 7]], "<i4")
    counts = np.array([4, 3, 1], "<u4")  # duplicates count once
    rep = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE", "sp", 0, h, d, ksm, f32(q),
                              idx.tobytes(), counts.tobytes())
    pos = [set(idx[i, :counts[i]].tolist()) for i in range(h)]
    close(out_of(rep, h, 1, d), reference(k, v, q, positions=pos)[0], v)
    # Window: intersected with the last W positions.
    rep = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE", "sp", 0, h, d, ksm, f32(q),
                              idx.tobytes(), counts.tobytes(), 10)
    close(out_of(rep, h, 1, d), reference(k, v, q, window=10, positions=pos)[0], v)
    # Out-of-range index -> the failed text, nothing else changes.
    bad = idx.copy()
    bad[0, 0] = n
    e = err(r32, "ATTEND.PREFIX.QUERY_SPARSE", "sp", 0, h, d, ksm, f32(q), bad.tobytes(),
            counts.tobytes())
    assert e.startswith("ATTEND.PREFIX.QUERY_SPARSE failed")


@pytest.mark.parametrize("selector", [0, 1])
def test_sparse_auto_both_selectors(r32, selector):
    h_kv, h_q, n, d, blk, k_top = 2, 4, 200, 16, 16, 3
    k, v = rand((h_kv, n, d), 30 + selector), rand((h_kv, n, d), 40)
    q = rand((h_q, 1, d), 50 + selector, amp=2.0)
    store(r32, "au", 0, k, v)
    blocks = select_blocks(k, q, blk, k_top, selector)
    pos = set()
    for b in blocks:
        pos |= set(range(b * blk, min(n, (b + 1) * blk)))
    want = reference(k, v, q, positions=[pos] * h_q)[0]
    rep = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE_AUTO", "au", 0, h_q, d, blk, k_top,
                              h_kv, f32(q), b"", -1, selector)
    close(out_of(rep, h_q, 1, d), want, v)
    # Fused: the same blocks plus a dense causal suffix (the query is its last position).
    s = 3
    ks, vs = rand((h_kv, s, d), 60), rand((h_kv, s, d), 61)
    rep = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED", "au", 0, h_q, d, blk, k_top,
                              h_kv, s, f32(q), f32(ks), f32(vs), bytes([0, 0, 1, 1]), -1,
                              selector)
    close(out_of(rep, h_q, 1, d), reference(k, v, q, ks, vs, positions=[pos] * h_q)[0], v)
    # K_top * B >= N: dense.
    rep = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE_AUTO", "au", 0, h_q, d, blk, 1000,
                              h_kv, f32(q), b"")
    close(out_of(rep, h_q, 1, d), reference(k, v, q)[0], v)
    # S_suf = 0 degenerates to SPARSE_AUTO.
    a = r32.execute_command("ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED", "au", 0, h_q, d, blk, k_top,
                            h_kv, 0, f32(q), b"", b"", b"", 0, selector)
    close(out_of(a, h_q, 1, d), want, v)


# ------------------------------------------------------------------ errors


def test_every_error_text(r32):
    h, n, d = 2, 8, 4
    k, v = rand((h, n, d), 70), rand((h, n, d), 71)
    q = f32(rand((h, 1, d), 72))
    st = "ATTEND.PREFIX.STORE"
    assert err(r32, st, "s", 0, h, n, d, f32(k)) == \
        "ATTEND.PREFIX.STORE requires: session_id layer_id H N D K_blob V_blob"
    assert err(r32, st, "s", -1, h, n, d, f32(k), f32(v)) == "invalid layer_id (must be >= 0)"
    assert err(r32, st, "s", 0, 0, n, d, f32(k), f32(v)) == "invalid H/N/D (must be > 0)"
    assert err(r32, st, "s", 0, h, n, d, f32(k)[:-4], f32(v)) == \
        "K/V blob size mismatch (expected H*N*D*4 each)"
    assert err(r32, st, "s", 0, h, n, d, f32(k), f32(v), "FMT", "F8").startswith(
        "ATTEND.PREFIX.STORE: unknown option")
    assert err(r32, st, "s", 0, h, n, 2000, b"\0" * (h * n * 2000 * 4),
               b"\0" * (h * n * 2000 * 4)).startswith("ATTEND.PREFIX.STORE failed (unsupported D")
    assert err(r32, st, "s", 0, 1, 1, 1, f32([np.nan]), f32([0])).startswith(
        "ATTEND.PREFIX.STORE failed (")
    assert err(r32, st, "s", "x", h, n, d, f32(k), f32(v)) == \
        "value is not an integer or out of range"
    assert r32.execute_command("ATTEND.PREFIX.LOOKUP", "s", 0) == b"MISS"  # nothing stored
    assert err(r32, "ATTEND.PREFIX.LOOKUP", "s") == \
        "ATTEND.PREFIX.LOOKUP requires: session_id layer_id"
    assert err(r32, "ATTEND.PREFIX.LOOKUP", "s", -2) == "invalid layer_id (must be >= 0)"
    store(r32, "s", 0, k, v)

    qy = "ATTEND.PREFIX.QUERY"
    assert err(r32, qy, "s", 0, h, d, 1) == \
        "ATTEND.PREFIX.QUERY requires: session_id layer_id H D top_k Q_blob [fa_window]"
    assert err(r32, qy, "s", 0, h, d, 0, q) == "invalid H/D/top_k (must be > 0)"
    assert err(r32, qy, "s", 0, h, d, 1, q[:-4]) == \
        "Q blob size must be a positive multiple of H*D*4"
    assert err(r32, qy, "s", 0, h, d, 1, b"") == "Q blob size must be a positive multiple of H*D*4"
    assert err(r32, qy, "nope", 0, h, d, 1, q) == \
        "ATTEND.PREFIX.QUERY failed (session not found, or unsupported D)"
    assert err(r32, qy, "s", 0, 1, 2 * d, 1, q) == \
        "ATTEND.PREFIX.QUERY failed (session not found, or unsupported D)"
    assert err(r32, qy, "s", 0, h, d, 1, q, -5).startswith("invalid fa_window")

    fu = "ATTEND.PREFIX.QUERY_FUSED"
    hm = bytes([0, 1])
    assert err(r32, fu, "s", 0, h, d, 0, h, q, b"", b"") == (
        "ATTEND.PREFIX.QUERY_FUSED requires: session_id layer_id H_q D S_suf H_kv Q K_suf V_suf "
        "head_map [fa_window]")
    assert err(r32, fu, "s", 0, h, d, -1, h, q, b"", b"", hm) == \
        "invalid H_q/D/H_kv (must be > 0) or S_suf (>= 0)"
    assert err(r32, fu, "s", 0, 3, d, 0, 2, q, b"", b"", hm) == \
        "H_q must be a multiple of H_kv (GQA)"
    assert err(r32, fu, "s", 0, h, d, 0, h, q[:-4], b"", b"", hm) == \
        "Q blob size must be a positive multiple of H_q*D*4"
    assert err(r32, fu, "s", 0, h, d, 1, h, q, b"", b"", hm) == \
        "K_suf / V_suf size mismatch (expected H_kv*S_suf*D*4 each)"
    assert err(r32, fu, "s", 0, h, d, 0, h, q, b"", b"", b"\0") == \
        "head_map size mismatch (expected H_q bytes)"
    assert err(r32, fu, "s", 0, h, d, 0, h, q, b"", b"", bytes([0, 9])) == \
        "ATTEND.PREFIX.QUERY_FUSED failed (session not found, GQA mismatch, or unsupported D)"
    assert err(r32, fu, "zz", 0, h, d, 0, h, q, b"", b"", hm) == \
        "ATTEND.PREFIX.QUERY_FUSED failed (session not found, GQA mismatch, or unsupported D)"
    q2 = f32(rand((h, 2, d), 73))
    ks1 = f32(rand((h, 1, d), 74))
    assert err(r32, fu, "s", 0, h, d, 1, h, q2, ks1, ks1, hm).startswith(
        "Q has more rows than the suffix")

    sp = "ATTEND.PREFIX.QUERY_SPARSE"
    idx, cnt = np.zeros(h * 2, "<i4").tobytes(), np.ones(h, "<u4").tobytes()
    assert err(r32, sp, "s", 0, h, d, 2, q, idx) == (
        "ATTEND.PREFIX.QUERY_SPARSE requires: session_id layer_id H D K_sparse_max Q indices "
        "counts [fa_window]")
    assert err(r32, sp, "s", 0, h, d, 0, q, idx, cnt) == "invalid H/D/K_sparse_max (must be > 0)"
    assert err(r32, sp, "s", 0, h, d, 2, q + q, idx, cnt) == "Q blob size must be H*D*4"
    assert err(r32, sp, "s", 0, h, d, 2, q, idx[:-1], cnt) == \
        "indices blob size must be H*K_sparse_max*4"
    assert err(r32, sp, "s", 0, h, d, 2, q, idx, cnt + b"x") == "counts blob size must be H*4"
    assert err(r32, sp, "zz", 0, h, d, 2, q, idx, cnt) == \
        "ATTEND.PREFIX.QUERY_SPARSE failed (session not found, K_sparse_max=0, or unsupported D)"

    au = "ATTEND.PREFIX.QUERY_SPARSE_AUTO"
    assert err(r32, au, "s", 0, h, d, 4, 1, h, q) == (
        "ATTEND.PREFIX.QUERY_SPARSE_AUTO requires: session_id layer_id H_q D B K_top H_kv Q "
        "head_map [fa_window]")
    assert err(r32, au, "s", 0, h, d, 0, 1, h, q, b"") == \
        "invalid H_q/D/B/K_top/H_kv (must be > 0)"
    assert err(r32, au, "s", 0, 3, d, 4, 1, 2, q, b"") == "H_q must be a multiple of H_kv (GQA)"
    assert err(r32, au, "s", 0, h, d, 4, 1, h, q + q, b"") == "Q blob size must be H_q*D*4"
    assert err(r32, au, "s", 0, h, d, 4, 1, h, q, b"\0") == \
        "head_map size must be 0 (identity) or H_q bytes"
    assert err(r32, au, "zz", 0, h, d, 4, 1, h, q, b"") == (
        "ATTEND.PREFIX.QUERY_SPARSE_AUTO failed (session not found, B=0, K_top=0, or "
        "unsupported D)")

    af = "ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED"
    assert err(r32, af, "s", 0, h, d, 4, 1, h, 0, q, b"", b"") == (
        "ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED requires: sid layer H_q D B K_top H_kv S_suf Q "
        "K_suf V_suf head_map [fa_window]")
    assert err(r32, af, "s", 0, h, d, 4, 1, h, -1, q, b"", b"", b"") == "S_suf must be >= 0"
    assert err(r32, af, "s", 0, h, d, 4, 1, h, 1, q, b"", b"", b"") == \
        "K_suf / V_suf size mismatch (expected H_kv*S_suf*D*4 each)"
    assert err(r32, af, "zz", 0, h, d, 4, 1, h, 0, q, b"", b"", b"") == (
        "ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED failed (session not found, invalid params, or "
        "unsupported D)")

    assert err(r32, "ATTEND.PREFIX.DROP") == "ATTEND.PREFIX.DROP requires: session_id [layer_id]"
    assert err(r32, "ATTEND.PREFIX.DROP", "s", -1) == "invalid layer_id (must be >= 0)"
    wm = "KV.PREFIX.WARM"
    assert err(r32, wm, "ns", 2) == "KV.PREFIX.WARM requires: ns_key H D"
    assert err(r32, wm, "ns", 0, 4) == "invalid H/D (1..256 / 1..512)"
    assert err(r32, wm, "ns", 2, 513) == "invalid H/D (1..256 / 1..512)"
    assert err(r32, wm, "", 2, 4) == "ns_key length must be 1..512"
    assert r32.execute_command(wm, "unknown", 2, 4) == b"0"
    # None of the failures changed the slot.
    got = out_of(r32.execute_command(qy, "s", 0, h, d, 1, q), h, 1, d)
    close(got, reference(k, v, rand((h, 1, d), 72))[0], v)


def test_failed_store_leaves_old_slot(r32):
    h, n, d = 2, 10, 8
    k, v, q = rand((h, n, d), 80), rand((h, n, d), 81), rand((h, 1, d), 82)
    store(r32, "keep", 0, k, v)
    bad = k.copy()
    bad[1, 3, 2] = np.inf
    with pytest.raises(redis.ResponseError):
        store(r32, "keep", 0, bad, v)
    with pytest.raises(redis.ResponseError):
        r32.execute_command("ATTEND.PREFIX.STORE", "keep", 0, h, n + 1, d, f32(k), f32(v))
    got = out_of(r32.execute_command("ATTEND.PREFIX.QUERY", "keep", 0, h, d, 1, f32(q)), h, 1, d)
    close(got, reference(k, v, q)[0], v)


def test_without_kvcache(server_factory):
    s = server_factory(kvcache=False)
    r = s.client()
    assert err(r, "ATTEND.PREFIX.LOOKUP", "s", 0) == "NOKVCACHE V-store not enabled (use --kvcache)"
    assert err(r, "KV.PREFIX.WARM", "s", 1, 1) == "NOKVCACHE V-store not enabled (use --kvcache)"


def test_command_entries(s32, raw_factory):
    c = raw_factory(s32)
    for name, arity in (("attend.prefix.store", -8), ("attend.prefix.lookup", 3),
                        ("attend.prefix.query", -7), ("attend.prefix.query_fused", -11),
                        ("attend.prefix.query_sparse", -9),
                        ("attend.prefix.query_sparse_auto", -10),
                        ("attend.prefix.query_sparse_auto_fused", -13),
                        ("attend.prefix.drop", -2), ("kv.prefix.warm", -4)):
        got = c.call("COMMAND", "INFO", name)
        assert got and got[0], name
        entry = got[0]
        assert entry[0].decode().lower() == name and entry[1] == arity
        # KV.PREFIX.WARM ns H D [attend_sid]: keys 1 and 4 (ACL checks both).
        want = [1, 4, 3] if name == "kv.prefix.warm" else [1, 1, 1]
        assert entry[3:6] == want, (name, entry)


# ------------------------------------------------- warm/cold tier, WARM


def put_rows(r, ns, layer, rows_k, rows_v, start=0):
    n = rows_k.shape[0]
    assert r.execute_command("V.STOREBATCH", ns + "_pk", layer, start, n, f32(rows_k)) == b"OK"
    assert r.execute_command("V.STOREBATCH", ns + "_pv", layer, start, n, f32(rows_v)) == b"OK"


def fetched(r, sid, layer, n, h, d):
    """The V-store's dequantized rows [N, H*D] as [H, N, D] (what WARM stores)."""
    a = np.frombuffer(r.execute_command("V.FETCH", sid, layer, "RANGE", 0, n), "<f4")
    return a.reshape(n, h, d).transpose(1, 0, 2).copy()


def query(r, sid, layer, q):
    h, m, d = q.shape
    rep = r.execute_command("ATTEND.PREFIX.QUERY", sid, layer, h, d, 1, f32(q))
    return out_of(rep, h, m, d, lse=True)[0] if m > 1 else out_of(rep, h, m, d)


def test_state_machine_demote_coldmiss_warm(server_factory):
    s = server_factory(F32 + ["--attend-max-slots", "2"])
    r = s.client()
    h, d, n = 2, 32, 24
    assert r.execute_command("KV.PREFIX.REGISTER", "ns", h * d, "fp16") == b"OK"
    rk, rv = rand((n, h * d), 90), rand((n, h * d), 91)
    put_rows(r, "ns", 0, rk, rv)
    k, v = fetched(r, "ns_pk", 0, n, h, d), fetched(r, "ns_pv", 0, n, h, d)
    q = rand((h, 1, d), 92)
    store(r, "ns_attn", 0, k, v)
    store(r, "ns_attn", 1, rand((h, 5, d), 93), rand((h, 5, d), 94))
    store(r, "ns_attn", 2, rand((h, 5, d), 95), rand((h, 5, d), 96))  # demotes layer 0
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ns_attn", 0) == b"COLD"
    i = info(r)
    assert (i["sdpa_warm"], i["sdpa_cold"], i["sdpa_demotions"]) == ("2", "1", "1")
    cold = "COLDMISS session evicted to cold tier (call KV.PREFIX.WARM)"
    assert err(r, "ATTEND.PREFIX.QUERY", "ns_attn", 0, h, d, 1, f32(q)) == cold
    # COLDMISS comes before blob validation everywhere but QUERY (the order existing clients see).
    assert err(r, "ATTEND.PREFIX.QUERY", "ns_attn", 0, h, d, 1, b"xx").startswith("Q blob size")
    assert err(r, "ATTEND.PREFIX.QUERY_FUSED", "ns_attn", 0, h, d, 0, h, b"xx", b"", b"",
               b"") == cold
    assert err(r, "ATTEND.PREFIX.QUERY_SPARSE", "ns_attn", 0, h, d, 1, b"", b"", b"") == cold
    assert err(r, "ATTEND.PREFIX.QUERY_SPARSE_AUTO", "ns_attn", 0, h, d, 4, 1, h, b"",
               b"") == cold
    assert err(r, "ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED", "ns_attn", 0, h, d, 4, 1, h, 0, b"",
               b"", b"", b"") == cold
    # The raw reply carries the COLDMISS code word (not ERR).
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"*7\r\n$19\r\nATTEND.PREFIX.QUERY\r\n$7\r\nns_attn\r\n$1\r\n0\r\n$1\r\n2\r\n"
              b"$2\r\n32\r\n$1\r\n1\r\n$256\r\n" + f32(q) + b"\r\n")
    got = b""
    while not got.endswith(b"\r\n"):
        chunk = c.recv(4096)
        assert chunk
        got += chunk
    c.close()
    assert got == b"-" + cold.encode() + b"\r\n"
    assert r.execute_command("KV.PREFIX.WARM", "ns", h, d, "ns_attn") == b"1"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ns_attn", 0) == b"HIT"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ns_attn", 1) == b"COLD"  # LRU went
    close(query(r, "ns_attn", 0, q), reference(k, v, q)[0], v)
    i = info(r)
    assert i["sdpa_rehydrates"] == "1" and i["sdpa_demotions"] == "2"
    # Cold-registry overflow forgets the oldest: COLD -> MISSING.
    assert r.execute_command("CONFIG", "SET", "attend-cold-slots", "0") == b"OK"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ns_attn", 1) == b"MISS"
    assert err(r, "ATTEND.PREFIX.QUERY", "ns_attn", 1, h, d, 1, f32(q)).startswith(
        "ATTEND.PREFIX.QUERY failed")
    # A re-STORE of a cold key also rehydrates.
    r.execute_command("CONFIG", "SET", "attend-cold-slots", "10")
    store(r, "x", 0, k, v)  # demotes ns_attn/2
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ns_attn", 2) == b"COLD"
    store(r, "ns_attn", 2, k, v)
    assert info(r)["sdpa_rehydrates"] == "2"


@pytest.mark.parametrize("fmt", ["fp16", "int8", "fp8", "mlx4g32", "turbo4"])
def test_warm_from_every_vquant(server_factory, fmt):
    s = server_factory(F32)
    r = s.client()
    h, d = 4, 64
    ns = "w_" + fmt
    assert r.execute_command("KV.PREFIX.REGISTER", ns, h * d, fmt) == b"OK"
    put_rows(r, ns, 0, rand((50, h * d), 100), rand((50, h * d), 101))
    # Layer 2 starts at row 5 (rows 0..4 never written read as zeros); layer 1 is empty.
    put_rows(r, ns, 2, rand((20, h * d), 102), rand((20, h * d), 103), start=5)
    # Layer 3: K longer than V -> N = min.
    assert r.execute_command("V.STOREBATCH", ns + "_pk", 3, 0, 9, f32(rand((9, h * d), 1))) \
        == b"OK"
    assert r.execute_command("V.STOREBATCH", ns + "_pv", 3, 0, 7, f32(rand((7, h * d), 2))) \
        == b"OK"
    assert r.execute_command("KV.PREFIX.WARM", ns, 2, 64) == b"0 skipped_dim=3"
    assert r.execute_command("KV.PREFIX.WARM", ns, h, d) == b"3"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", ns, 1) == b"MISS"
    q = rand((h, 2, d), 104)
    for layer, n in ((0, 50), (2, 25), (3, 7)):
        k, v = fetched(r, ns + "_pk", layer, n, h, d), fetched(r, ns + "_pv", layer, n, h, d)
        close(query(r, ns, layer, q), reference(k, v, q)[0], v)


def test_warm_after_restart(server_factory):
    s = server_factory(F32)
    r = s.client()
    h, d, n = 2, 32, 30
    r.execute_command("KV.PREFIX.REGISTER", "p", h * d, "int8")
    put_rows(r, "p", 0, rand((n, h * d), 110), rand((n, h * d), 111))
    assert r.execute_command("KV.PREFIX.WARM", "p", h, d, "p_attn") == b"1"
    q = rand((h, 1, d), 112)
    before = query(r, "p_attn", 0, q)
    r.close()
    s.restart()
    r = s.client()
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "p_attn", 0) == b"MISS"  # memory only
    assert info(r)["sdpa_warm"] == "0"
    assert r.execute_command("KV.PREFIX.WARM", "p", h, d, "p_attn") == b"1"
    assert np.array_equal(query(r, "p_attn", 0, q), before)


def test_warm_leaves_the_coldmiss_layer_warm(server_factory):
    # Fewer slots than layers: WARM installs the layers in last-access order, and the
    # query that met COLDMISS stamped its layer, so that layer is the one left warm.
    s = server_factory(F32 + ["--attend-max-slots", "2"])
    r = s.client()
    h, d, n, layers = 2, 32, 16, 5
    r.execute_command("KV.PREFIX.REGISTER", "lw", h * d, "fp16")
    for layer in range(layers):
        put_rows(r, "lw", layer, rand((n, h * d), 200 + layer), rand((n, h * d), 300 + layer))
    kv = [(fetched(r, "lw_pk", l, n, h, d), fetched(r, "lw_pv", l, n, h, d)) for l in range(layers)]
    assert r.execute_command("KV.PREFIX.WARM", "lw", h, d, "lw_attn") == str(layers).encode()
    # Nothing was accessed before: layer order, the last two stay.
    state = [r.execute_command("ATTEND.PREFIX.LOOKUP", "lw_attn", l) for l in range(layers)]
    assert state == [b"COLD"] * 3 + [b"HIT"] * 2
    q = rand((h, 1, d), 210)
    cold = "COLDMISS session evicted to cold tier (call KV.PREFIX.WARM)"
    for layer in (0, 2, 1, 0):  # each one cold at the time it is asked for
        assert r.execute_command("ATTEND.PREFIX.LOOKUP", "lw_attn", layer) == b"COLD"
        assert err(r, "ATTEND.PREFIX.QUERY", "lw_attn", layer, h, d, 1, f32(q)) == cold
        assert r.execute_command("KV.PREFIX.WARM", "lw", h, d, "lw_attn") == str(layers).encode()
        assert r.execute_command("ATTEND.PREFIX.LOOKUP", "lw_attn", layer) == b"HIT"
        k, v = kv[layer]
        close(query(r, "lw_attn", layer, q), reference(k, v, q)[0], v)
        # The next layer asked for is demoted by a store of another session.
        store(r, "other", layer, rand((h, 3, d), 220), rand((h, 3, d), 221))
        store(r, "other", layer + 10, rand((h, 3, d), 222), rand((h, 3, d), 223))
    # A WARM with no COLDMISS before it keeps the session's own LRU order: the last
    # queried layer (0) and the one installed just before it stay warm.
    assert r.execute_command("KV.PREFIX.WARM", "lw", h, d, "lw_attn") == str(layers).encode()
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "lw_attn", 0) == b"HIT"
    assert info(r)["sdpa_warm"] == "2"


def test_warm_reuses_freed_slot_memory(server_factory):
    # 2 MiB f32 slots: freed slot memory (DROP, demotion) is kept and the next slots of
    # the same size are built in it; results stay exact and the accounting consistent.
    s = server_factory(F32)
    r = s.client()
    h, d, n, layers = 8, 128, 256, 4
    r.execute_command("KV.PREFIX.REGISTER", "ar", h * d, "int8")
    for layer in range(layers):
        put_rows(r, "ar", layer, rand((n, h * d), 400 + layer), rand((n, h * d), 500 + layer))
    assert r.execute_command("KV.PREFIX.WARM", "ar", h, d) == str(layers).encode()
    i = info(r)
    slot_bytes = int(i["sdpa_bytes"])
    assert slot_bytes >= layers * 2 * h * n * d * 4 and int(i["sdpa_arena_reused"]) == 0
    q = rand((h, 1, d), 410)
    before = [query(r, "ar", l, q) for l in range(layers)]
    assert r.execute_command("ATTEND.PREFIX.DROP", "ar") == layers
    # The last query's job may still hold its slot for a moment after its reply.
    assert poll(lambda: int(info(r)["sdpa_arena_bytes"]) == slot_bytes)
    assert info(r)["sdpa_bytes"] == "0"
    assert r.execute_command("KV.PREFIX.WARM", "ar", h, d) == str(layers).encode()
    i = info(r)
    assert int(i["sdpa_arena_reused"]) == layers and i["sdpa_arena_bytes"] == "0"
    assert int(i["sdpa_bytes"]) == slot_bytes
    for l in range(layers):
        assert np.array_equal(query(r, "ar", l, q), before[l])
    # Demotion frees into the arena too; a STORE of the same size reuses it.
    r.config_set("attend-max-slots", "2")
    assert poll(lambda: int(info(r)["sdpa_arena_bytes"]) == slot_bytes // 2)
    k, v = rand((h, n, d), 420), rand((h, n, d), 421)
    store(r, "st", 0, k, v)
    assert int(info(r)["sdpa_arena_reused"]) == layers + 1
    close(query(r, "st", 0, q), reference(k, v, q)[0], v)
    # Within attend-maxmemory, warm + kept never pass the bound.
    r.config_set("attend-max-slots", "100")
    assert r.execute_command("ATTEND.PREFIX.DROP", "st") == 1
    r.config_set("attend-maxmemory", str(slot_bytes))
    i = info(r)
    assert int(i["sdpa_bytes"]) + int(i["sdpa_arena_bytes"]) <= slot_bytes
    assert r.execute_command("KV.PREFIX.WARM", "ar", h, d) == str(layers).encode()
    i = info(r)
    assert int(i["sdpa_bytes"]) + int(i["sdpa_arena_bytes"]) <= slot_bytes
    for l in range(layers):
        assert np.array_equal(query(r, "ar", l, q), before[l])
    assert r.execute_command("FLUSHALL")
    i = info(r)
    assert (i["sdpa_bytes"], i["sdpa_arena_bytes"]) == ("0", "0")


def test_drop_flushall_and_eviction(server_factory):
    s = server_factory(F32 + ["--max-sessions", "2"])
    r = s.client()
    k, v = rand((1, 4, 8), 120), rand((1, 4, 8), 121)
    for sid in ("a", "a_attn", "ab"):
        for layer in (0, 1):
            store(r, sid, layer, k, v)
    assert r.execute_command("ATTEND.PREFIX.DROP", "ab", 1) == 1
    assert r.execute_command("ATTEND.PREFIX.DROP", "ab", 1) == 0
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ab", 0) == b"HIT"
    # KV.PREFIX.DROP <ns> drops the slots of <ns> and <ns>_attn (not of "ab").
    r.execute_command("KV.PREFIX.REGISTER", "a", 8, "fp16")
    assert r.execute_command("KV.PREFIX.DROP", "a") == 1
    for sid in ("a", "a_attn"):
        assert r.execute_command("ATTEND.PREFIX.LOOKUP", sid, 0) == b"MISS"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "ab", 0) == b"HIT"
    # Eviction of a namespace (the session cap holds one) drops its slots too.
    r.execute_command("KV.PREFIX.REGISTER", "e1", 8, "fp16")
    store(r, "e1_attn", 0, k, v)
    store(r, "e1", 3, k, v)
    r.execute_command("KV.PREFIX.REGISTER", "e2", 8, "fp16")  # evicts e1
    assert r.execute_command("KV.PREFIX.LOOKUP", "e1") == b"MISS"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "e1_attn", 0) == b"MISS"
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "e1", 3) == b"MISS"
    # DROP of a whole sid counts warm and cold entries.
    r.execute_command("CONFIG", "SET", "attend-max-slots", "1")
    store(r, "z", 0, k, v)
    store(r, "z", 1, k, v)  # z/0 cold, ab/0 cold
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "z", 0) == b"COLD"
    assert r.execute_command("ATTEND.PREFIX.DROP", "z") == 2
    # FLUSHALL drops every slot, warm and cold.
    r.execute_command("CONFIG", "SET", "attend-max-slots", "100")
    store(r, "f", 0, k, v)
    assert r.execute_command("FLUSHALL")
    i = info(r)
    assert (i["sdpa_warm"], i["sdpa_cold"], i["sdpa_bytes"]) == ("0", "0", "0")


def test_config_get_set(server_factory):
    s = server_factory(["--attend-max-slots", "3", "--attend-maxmemory", "1mb"])
    r = s.client()
    assert r.config_get("attend-*") == {
        "attend-max-slots": "3", "attend-maxmemory": str(1 << 20), "attend-cold-slots": "65536",
        "attend-precision": "f16", "attend-threads": "0", "attend-pool-min-bytes": str(1 << 20)}
    h, n, d = 4, 64, 64  # 4*64*64*2 bytes per f16 region: 2 slots fit in 1 MiB... 3 do not
    k, v = rand((h, n, d), 130), rand((h, n, d), 131)
    for layer in range(4):
        store(r, "m", layer, k, v)
    i = info(r)
    assert int(i["sdpa_bytes"]) <= 1 << 20 and i["sdpa_warm"] == "3"
    big = rand((h, 1024, d), 132)
    e = err(r, "ATTEND.PREFIX.STORE", "m", 0, h, 1024, d, f32(big), f32(big))
    assert e.startswith("OOM ATTEND.PREFIX.STORE")
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", "m", 0) == b"COLD"
    r.config_set("attend-max-slots", "1")
    assert info(r)["sdpa_warm"] == "1"
    r.config_set("attend-precision", "INT8")
    assert r.config_get("attend-precision") == {"attend-precision": "int8"}
    store(r, "i8", 0, k, v)
    q = rand((h, 1, d), 133)
    close(query(r, "i8", 0, q), reference(k, v, q)[0], v, tol=3e-2)
    assert info(r)["attend_precision"] == "int8"
    with pytest.raises(redis.ResponseError):
        r.config_set("attend-precision", "f8")
    with pytest.raises(redis.ResponseError):
        r.config_set("attend-threads", "2")  # fixed at start


# --------------------------------------------- threads, deferral, ordering


def test_pipelined_queries_answered_in_order(server_factory, raw_factory):
    # Every query on the pool (pool-min-bytes 0): replies completed later keep their place.
    s = server_factory(F32 + ["-w", "1", "--attend-pool-min-bytes", "0"])
    r = s.client()
    h, n, d = 2, 300, 16
    data = []
    for i in range(6):
        k, v = rand((h, n, d), 140 + i), rand((h, n, d), 150 + i)
        store(r, "o", i, k, v)
        data.append((k, v))
    q = rand((h, 1, d), 160)
    c = raw_factory(s)
    cmds = b""
    for rep in range(3):
        for i in range(6):
            cmds += c.encode("ATTEND.PREFIX.QUERY", "o", i, h, d, 1, f32(q))
            cmds += c.encode("PING")
    c.send(cmds)
    for rep in range(3):
        for i in range(6):
            got = out_of(c.read(), h, 1, d)
            close(got, reference(*data[i], q)[0], data[i][1])
            assert c.read() == "PONG"


def test_ping_answered_before_long_query_finishes(server_factory, raw_factory):
    # One worker, one compute thread. Client A's query (M = 512 rows over 8192 tokens,
    # ~8.6 GFLOP) runs on the pool; the worker keeps serving client B meanwhile.
    # Ordering, not timing: B sees A's query in flight (CLIENT LIST) and gets its PONG
    # while A still has no reply. Run inline on the worker instead, B's commands would
    # wait behind the query and A would have its reply before B's CLIENT LIST answer.
    s = server_factory(["-w", "1", "--attend-threads", "1"])
    r = s.client()
    h, n, d, m = 8, 8192, 128, 512
    k16 = rand((h, n, d), 170).astype(np.float16)
    assert r.execute_command("ATTEND.PREFIX.STORE", "long", 0, h, n, d, k16.tobytes(),
                             k16.tobytes(), "FMT", "F16") == b"OK"
    r.close()
    a, b = raw_factory(s), raw_factory(s)
    a_id = a.call("CLIENT", "ID")
    a.send(a.encode("ATTEND.PREFIX.QUERY", "long", 0, h, d, 1, f32(rand((h, m, d), 171))))

    def a_in_query():
        for line in b.call("CLIENT", "LIST").decode().splitlines():
            if f"id={a_id} " in line:
                return "cmd=attend.prefix.query" in line.lower()
        return False

    assert poll(a_in_query, timeout=60)
    assert b.call("PING") == "PONG"
    a.sock.setblocking(False)
    try:
        early = a.sock.recv(1 << 20)
    except BlockingIOError:
        early = None
    a.sock.setblocking(True)
    assert early is None, "A's reply came before B's PONG"
    assert len(a.read()) == h * m * d * 4 + h * m * 4


@pytest.mark.concurrency
def test_concurrent_queries_and_restores(server_factory):
    # 8 clients on 4 workers: 4 query slot c, 2 re-store it with A or B, 2 store other
    # slots so c is demoted now and then (max 3 slots). Every answer is A's or B's
    # result, or COLDMISS; nothing crashes.
    s = server_factory(F32 + ["-w", "4", "--attend-threads", "2", "--attend-max-slots", "3",
                              "--attend-pool-min-bytes", "64kb"])
    h, n, d = 4, 512, 32
    ka, va, kb, vb = (rand((h, n, d), 180 + i) for i in range(4))
    q = rand((h, 1, d), 190)
    want = [reference(ka, va, q)[0], reference(kb, vb, q)[0]]
    r0 = s.client()
    store(r0, "c", 0, ka, va)
    errors, results = [], {"A": 0, "B": 0, "cold": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def querier():
        r = s.client()
        try:
            for _ in range(60):
                try:
                    got = query(r, "c", 0, q)
                except redis.ResponseError as e:
                    ok = str(e).startswith(("COLDMISS", "ATTEND.PREFIX.QUERY failed"))
                    with lock:
                        results["cold"] += 1
                        if not ok:
                            errors.append(str(e))
                    continue
                da = np.abs(got - want[0]).max()
                db = np.abs(got - want[1]).max()
                with lock:
                    if min(da, db) > 1e-4:
                        errors.append(f"answer matches neither slot ({da}, {db})")
                    results["A" if da <= db else "B"] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def restorer(i):
        r = s.client()
        j = 0
        while not stop.is_set() and j < 200:
            k, v = (ka, va) if (i + j) % 2 == 0 else (kb, vb)
            store(r, "c", 0, k, v)
            j += 1

    def other(i):
        r = s.client()
        j = 0
        while not stop.is_set() and j < 200:
            store(r, f"o{i}", j % 3, ka[:, :8], va[:, :8])
            j += 1

    qs = [threading.Thread(target=querier) for _ in range(4)]
    bg = [threading.Thread(target=restorer, args=(i,)) for i in range(2)]
    bg += [threading.Thread(target=other, args=(i,)) for i in range(2)]
    for t in qs + bg:
        t.start()
    for t in qs:
        t.join(120)
    stop.set()
    for t in bg:
        t.join(120)
    assert not errors, errors[:5]
    assert results["A"] + results["B"] > 0
    assert r0.ping()
