"""The Stage-2 methods of PionPromptCache on small shapes, against the real server and a numpy
reference: every query kind, both lanes, COLDMISS handled once per call, the lane's fallback,
torch in/out, argument errors. Model-level checks are in test_stage2_model.py."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import free_port
from pion import ColdMissError, CommandError, PionPromptCache

H_Q, H_KV, D, N = 4, 2, 32, 40


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ref_attend(k, v, q, hm, ks=None, vs=None):
    """q [H_q, M, D]; k/v [H_kv, N, D]; rows are the last M suffix positions (causal)."""
    h_q, m, d = q.shape
    s = 0 if ks is None else ks.shape[1]
    out = np.zeros((h_q, m, d))
    lse = np.zeros((h_q, m))
    for h in range(h_q):
        kk, vv = k[hm[h]].astype(np.float64), v[hm[h]].astype(np.float64)
        if s:
            kk = np.concatenate([kk, ks[hm[h]]])
            vv = np.concatenate([vv, vs[hm[h]]])
        for i in range(m):
            vis = k.shape[1] + (s - m + i + 1 if s else 0)
            sc = kk[:vis] @ q[h, i].astype(np.float64) / np.sqrt(d)
            mx = sc.max()
            p = np.exp(sc - mx)
            out[h, i] = p @ vv[:vis] / p.sum()
            lse[h, i] = mx + np.log(p.sum())
    return out, lse


def stored(server, ns="s2c", layers=2, max_slots=None, **kw):
    c = PionPromptCache(port=server.port, stage2=True, n_layers=layers, n_kv_heads=H_KV, head_dim=D, **kw)
    k = rand((layers, H_KV, N, D), 1).astype(np.float16)
    v = rand((layers, H_KV, N, D), 2).astype(np.float16)
    c.store(ns, k, v)
    return c, k.astype(np.float32), v.astype(np.float32)


def test_queries_match_reference_over_resp(server_factory):
    s = server_factory(["--attend-precision", "f32"])
    c, k, v = stored(s)
    hm = np.repeat(np.arange(H_KV), H_Q // H_KV)
    assert c.lookup("s2c") and c.attend_lookup("s2c", 1) == "HIT"
    q = rand((H_KV, 3, D), 3)
    out, lse = c.attend_query("s2c", 1, q, with_lse=True)
    ro, rl = ref_attend(k[1], v[1], q, np.arange(H_KV))
    assert np.abs(out - ro).max() < 1e-5 and np.abs(lse - rl).max() < 1e-5
    one = c.attend_query("s2c", 1, q[:, 0])
    assert one.shape == (H_KV, D) and np.abs(one - ro[:, 0]).max() < 1e-5
    with pytest.raises(ValueError):
        c.attend_query("s2c", 1, q[:, 0], with_lse=True)
    qf = rand((H_Q, 2, D), 4)
    ks, vs = rand((H_KV, 5, D), 5), rand((H_KV, 5, D), 6)
    out, lse = c.attend_query_fused("s2c", 0, qf, ks, vs, with_lse=True)
    ro, rl = ref_attend(k[0], v[0], qf, hm, ks, vs)
    assert np.abs(out - ro).max() < 1e-5 and np.abs(lse - rl).max() < 1e-5
    # empty suffix: every row at position N
    out = c.attend_query_fused("s2c", 0, qf[:, 0], np.zeros((H_KV, 0, D)), np.zeros((H_KV, 0, D)))
    assert np.abs(out - ref_attend(k[0], v[0], qf[:, :1], hm)[0][:, 0]).max() < 1e-5
    # sparse explicit: only the listed positions
    idx = [[0, 5, 5, 9], [39]]
    out = c.attend_query_sparse("s2c", 0, q[:, 0], idx)
    for h, ids in enumerate(idx):
        u = sorted(set(ids))
        ro, _ = ref_attend(k[0][:, u], v[0][:, u], q[h:h + 1, :1], [h])
        assert np.abs(out[h] - ro[0, 0]).max() < 1e-5
    # sparse auto with K_top*B >= N is dense; both selectors; the fused form too
    dense = c.attend_query_fused("s2c", 0, qf[:, 0], np.zeros((H_KV, 0, D)), np.zeros((H_KV, 0, D)))
    for sel in ("block_mean", "quest"):
        sa = c.attend_query_sparse_auto("s2c", 0, qf[:, 0], 8, 5, selector=sel)
        assert np.abs(sa - dense).max() < 1e-5
        saf = c.attend_query_sparse_auto_fused("s2c", 0, qf[:, 1], ks[:, :2], vs[:, :2], 8, 5, selector=sel)
        ro, _ = ref_attend(k[0], v[0], qf[:, 1:2], hm, ks[:, :2], vs[:, :2])
        assert np.abs(saf - ro[:, 0]).max() < 1e-5
    with pytest.raises(ValueError):
        c.attend_query_sparse_auto("s2c", 0, qf[:, 0], 8, 5, selector="nope")
    with pytest.raises(CommandError):  # the slot has H_kv = 2 heads
        c.attend_query("s2c", 0, rand((3, D), 7))
    st = c.stats()
    assert st["attend_query_calls"] >= 9 and st["attend_query_ms_total"] > 0
    assert st["lane_queries"] == 0 and st["cold_rehydrates_observed"] == 0
    assert c.attend_drop("s2c") == 2
    assert c.attend_lookup("s2c") == "MISS"


def test_torch_in_torch_out(server_factory):
    torch = pytest.importorskip("torch")
    s = server_factory(["--attend-precision", "f32"])
    c, k, v = stored(s)
    q = rand((H_Q, D), 8)
    a = c.attend_query_fused("s2c", 0, torch.from_numpy(q), torch.zeros(H_KV, 0, D), torch.zeros(H_KV, 0, D))
    b = c.attend_query_fused("s2c", 0, q, np.zeros((H_KV, 0, D)), np.zeros((H_KV, 0, D)))
    assert isinstance(a, torch.Tensor) and a.dtype == torch.float32 and np.array_equal(a.numpy(), b)


def test_lane_used_and_coldmiss_status3_once(server_factory, monkeypatch):
    monkeypatch.delenv("PION_PROMPT_CACHE_NO_BINARY", raising=False)
    s = server_factory(["--attend-precision", "f32", "--attend-max-slots", "1", "--fastlane-port", str(free_port())])
    c, k, v = stored(s)  # layer 0 was demoted by layer 1's store
    assert c.attend_lookup("s2c", 0) == "COLD"
    q = rand((H_KV, 1, D), 9)
    out = c.attend_query("s2c", 0, q)  # lane: status 3 -> WARM (+ layer rebuild) -> retry
    assert np.abs(out - ref_attend(k[0], v[0], q, np.arange(H_KV))[0]).max() < 1e-5
    st = c.stats()
    assert c.lane_active and st["lane_queries"] == 1 and st["cold_rehydrates_observed"] == 1
    qf = rand((H_Q, 1, D), 10)
    ks, vs = rand((H_KV, 1, D), 11), rand((H_KV, 1, D), 12)
    out = c.attend_query_fused("s2c", 1, qf, ks, vs)  # layer 1 is cold now
    ro, _ = ref_attend(k[1], v[1], qf, np.repeat(np.arange(H_KV), 2), ks, vs)
    assert np.abs(out - ro).max() < 1e-5
    assert c.stats()["cold_rehydrates_observed"] == 2 and c.stats()["lane_queries"] == 2
    # The V-store no longer has the namespace: the one retry meets COLDMISS again -> ColdMissError.
    c.attend_store_layer("other", 0, k[0], v[0])  # demotes s2c layer 1
    c.client.kv_prefix_drop("s2c")  # drops the V-store side and s2c_attn slots
    c.attend_store_layer("s2c", 0, k[0], v[0])
    c.attend_store_layer("s2c", 1, k[1], v[1])  # s2c layer 0 cold again, no V-store rows
    with pytest.raises(ColdMissError):
        c.attend_query("s2c", 0, q)
    assert c.stats()["cold_rehydrates_observed"] == 3


def test_coldmiss_retry_with_fewer_slots_than_layers(server_factory, monkeypatch):
    # attend-max-slots 2 < 4 layers: every query on a cold layer costs one WARM and one
    # retry, and the server leaves that layer warm (no client-side layer rebuild).
    monkeypatch.setenv("PION_PROMPT_CACHE_NO_BINARY", "1")
    s = server_factory(["--attend-precision", "f32", "--attend-max-slots", "2"])
    c, k, v = stored(s, ns="few", layers=4)
    assert [c.attend_lookup("few", l) for l in range(4)] == ["COLD", "COLD", "HIT", "HIT"]
    q = rand((H_KV, 1, D), 30)
    colds = 0
    for layer in (0, 1, 3, 2, 0, 1):
        colds += c.attend_lookup("few", layer) == "COLD"
        out = c.attend_query("few", layer, q)
        assert np.abs(out - ref_attend(k[layer], v[layer], q, np.arange(H_KV))[0]).max() < 1e-5
        assert c.attend_lookup("few", layer) == "HIT"
    st = c.stats()
    # One WARM per cold query, and the retry after it always hit.
    assert colds >= 3 and st["cold_rehydrates_observed"] == colds
    assert "layer_rebuilds" not in st
    assert not hasattr(c, "layer_rebuilds")


def test_lane_fallback_and_env_switch(server_factory, monkeypatch):
    s = server_factory(["--attend-precision", "f32", "--fastlane-port", str(free_port())])
    c, k, v = stored(s, lane_port=free_port())  # nothing listens there: RESP, lane disabled
    q = rand((H_KV, 1, D), 13)
    expect = ref_attend(k[0], v[0], q, np.arange(H_KV))[0]
    assert np.abs(c.attend_query("s2c", 0, q) - expect).max() < 1e-5
    assert not c.lane_active and c.stats()["lane_queries"] == 0
    monkeypatch.setenv("PION_PROMPT_CACHE_NO_BINARY", "1")
    c2 = PionPromptCache(port=s.port, n_kv_heads=H_KV, head_dim=D)
    assert np.abs(c2.attend_query("s2c", 0, q) - expect).max() < 1e-5
    assert c2.stats()["lane_queries"] == 0
    monkeypatch.delenv("PION_PROMPT_CACHE_NO_BINARY")
    c3 = PionPromptCache(port=s.port, n_kv_heads=H_KV, head_dim=D)
    assert np.abs(c3.attend_query("s2c", 0, q) - expect).max() < 1e-5
    assert c3.stats()["lane_queries"] == 1 and c3.lane_active
    with pytest.raises(CommandError):  # a command error over the lane raises, the lane stays
        c3.attend_query("nosuch", 0, q)
    assert c3.lane_active


def test_lookup_rebuilds_missing_slot_with_warm(server_factory):
    s = server_factory(["--attend-precision", "f32"])
    c, k, v = stored(s)
    assert c.attend_drop("s2c") == 2
    assert c.lookup("s2c") and c.stats()["warm_rebuilds"] == 1
    assert c.attend_lookup("s2c", 1) == "HIT"
    plain = PionPromptCache(port=s.port, n_kv_heads=H_KV, head_dim=D)
    assert plain.lookup("s2c") and not plain.lookup("absent")
    assert not c.lookup("absent")


def test_lane_authenticates_with_the_client_password(server_factory, monkeypatch):
    monkeypatch.delenv("PION_PROMPT_CACHE_NO_BINARY", raising=False)
    s = server_factory(["--attend-precision", "f32", "--requirepass", "s3cret", "--fastlane-port", str(free_port())])
    c, k, v = stored(s, password="s3cret")
    q = rand((H_KV, 2, D), 14)
    out, lse = c.attend_query("s2c", 0, q, with_lse=True)  # M > 1 over the lane: out then LSE
    ro, rl = ref_attend(k[0], v[0], q, np.arange(H_KV))
    assert np.abs(out - ro).max() < 1e-5 and np.abs(lse - rl).max() < 1e-5
    assert c.lane_active and c.stats()["lane_queries"] == 1


def test_lane_frame_refused_falls_back_to_resp(server_factory, monkeypatch):
    monkeypatch.delenv("PION_PROMPT_CACHE_NO_BINARY", raising=False)
    s = server_factory(["--attend-precision", "f32", "--fastlane-port", str(free_port()),
                        "--fastlane-max-frame-len", "1024"])
    c, k, v = stored(s)
    q = rand((H_KV, 8, D), 15)  # a 2 KiB Q: over the lane's frame limit, fine over RESP
    out, _ = c.attend_query("s2c", 0, q, with_lse=True)
    assert np.abs(out - ref_attend(k[0], v[0], q, np.arange(H_KV))[0]).max() < 1e-5
    assert not c.lane_active and c.stats()["lane_queries"] == 0
