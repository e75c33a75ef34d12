"""src/attend against an independent implementation: numpy in float64.

pion-attend-check runs one attention call from raw f32 files (GQA, a causal suffix
and a window, as QUERY_FUSED uses it); numpy computes softmax(Q K^T / sqrt(D)) V over
the positions docs/attention.md §1 makes visible. f32 slots must agree to ~1e-5; f16 and
int8 to their storage error (docs/attention.md).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("PION_BIN_DIR", ROOT / "build" / "release" / "bin"))
TOOL = BIN_DIR / "pion-attend-check"


def numpy_attention(k, v, q, ksuf, vsuf, window):
    """Float64 reference: k, v [H_kv, N, D]; q [H_q, M, D]; ksuf, vsuf [H_kv, S, D]."""
    h_kv, n, d = k.shape
    h_q, m, _ = q.shape
    s = ksuf.shape[1]
    group = h_q // h_kv
    out = np.zeros((h_q, m, d))
    lse = np.zeros((h_q, m))
    for hq in range(h_q):
        g = hq // group
        keys = np.concatenate([k[g], ksuf[g]]).astype(np.float64)
        vals = np.concatenate([v[g], vsuf[g]]).astype(np.float64)
        for row in range(m):
            pos = np.arange(n + s)
            if s > 0:
                qpos = n + s - m + row
                vis = pos <= qpos
                if window > 0:
                    vis &= pos > qpos - window
            else:
                vis = pos < n
                if window > 0:
                    vis &= pos >= n - window
            scores = keys[vis] @ q[hq, row].astype(np.float64) / np.sqrt(d)
            mx = scores.max()
            w = np.exp(scores - mx)
            out[hq, row] = (w[:, None] * vals[vis]).sum(0) / w.sum()
            lse[hq, row] = mx + np.log(w.sum())
    return out, lse


def run_tool(tmp: Path, precision, k, v, q, ksuf, vsuf, window):
    h_kv, n, d = k.shape
    h_q, m, _ = q.shape
    s = ksuf.shape[1]
    for name, a in (("k", k), ("v", v), ("q", q), ("ksuf", ksuf), ("vsuf", vsuf)):
        a.astype("<f4").tofile(tmp / f"{name}.f32")
    r = subprocess.run([str(TOOL), str(tmp), precision, str(h_kv), str(h_q), str(n), str(d),
                        str(m), str(s), str(window)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = np.fromfile(tmp / "out.f32", dtype="<f4").reshape(h_q, m, d)
    lse = np.fromfile(tmp / "lse.f32", dtype="<f4").reshape(h_q, m)
    return out, lse


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(9)
    h_kv, group, n, d, m, s = 2, 4, 700, 128, 3, 5
    k = rng.uniform(-1, 1, (h_kv, n, d)).astype(np.float32)
    v = rng.uniform(-1, 1, (h_kv, n, d)).astype(np.float32)
    q = rng.uniform(-3, 3, (h_kv * group, m, d)).astype(np.float32)
    ksuf = rng.uniform(-1, 1, (h_kv, s, d)).astype(np.float32)
    vsuf = rng.uniform(-1, 1, (h_kv, s, d)).astype(np.float32)
    return k, v, q, ksuf, vsuf


@pytest.mark.parametrize("precision,tol", [("f32", 2e-5), ("f16", 2e-3), ("int8", 2e-2)])
@pytest.mark.parametrize("window", [0, 300])
def test_fused_gqa_matches_numpy(tmp_path, case, precision, tol, window):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} not built")
    k, v, q, ksuf, vsuf = case
    out, lse = run_tool(tmp_path, precision, k, v, q, ksuf, vsuf, window)
    ref, ref_lse = numpy_attention(k, v, q, ksuf, vsuf, window)
    assert np.abs(out - ref).max() <= tol
    assert np.abs(lse - ref_lse).max() <= 10 * tol
    if precision == "f32":
        # Guard against a vacuous comparison: the outputs are not all near zero.
        assert np.abs(ref).max() > 0.01


def test_plain_query_matches_numpy(tmp_path):
    rng = np.random.default_rng(10)
    k = rng.uniform(-1, 1, (8, 2048, 64)).astype(np.float32)
    v = rng.uniform(-1, 1, (8, 2048, 64)).astype(np.float32)
    q = rng.uniform(-3, 3, (8, 1, 64)).astype(np.float32)
    empty = np.zeros((8, 0, 64), dtype=np.float32)
    out, lse = run_tool(tmp_path, "f32", k, v, q, empty, empty, 0)
    ref, ref_lse = numpy_attention(k, v, q, empty, empty, 0)
    assert np.abs(out - ref).max() <= 2e-5
    assert np.abs(lse - ref_lse).max() <= 1e-4
