"""Stage 2 on the reference model: decode through server-side attention, across processes.

* Process A (a fresh interpreter) prefills a 2,048-token prefix once and stores it with
  ``PionPromptCache(stage2=True)`` on every server of the module (V-store rows plus
  attention slots ``<ns>_attn``).
* Process B (another fresh interpreter, one per check) looks the prefix up (Stage-2 hit),
  runs a 16-token question and 32 greedy tokens with every layer's attention over the
  prefix computed by the server (``ServerAttentionDecoder``: ``attend_query_fused`` with
  the new tokens' K/V as the suffix), and, where asked, the same decode locally over the
  fetched cache (Stage 1).
  - ``--attend-precision f32``: logits within 1e-4 of the local decode, the 32 tokens
    identical; the one-call-per-row variant agrees with the batched one;
  - default f16: the 32 tokens of the local decode (agreement printed);
  - ``--attend-max-slots 4`` (< 8 layers): every decode step meets COLDMISS, the client
    rehydrates (``cold_rehydrates_observed > 0``) and the results are the f32 ones, over
    the binary lane (status 3) and with ``PION_PROMPT_CACHE_NO_BINARY=1`` (RESP);
  - after a restart the lookup rebuilds the slots with KV.PREFIX.WARM (no prefill).
* Sparse auto at 8K tokens (1-layer reference model, in this process): with a planted
  needle block, next-token logits with ``K_top*B = N/8`` have the dense top-1.

This file is also the worker: ``python test_stage2_model.py writer|reader ...`` prints JSON.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "python"))

from pion import PionPromptCache  # noqa: E402
from pion.reference_model import ModelConfig, ReferenceDecoder  # noqa: E402

THREADS = 1
PREFIX, QUESTION, NTOK, SEED = 2048, 16, 32, 77


def prompt(seed: int, n: int) -> List[int]:
    return np.random.default_rng(seed).integers(0, 32000, n).tolist()


# ---------------------------------------------------------------- workers (separate processes)


def writer_main(ports: List[int]) -> dict:
    m = ReferenceDecoder(num_threads=THREADS)
    ids = prompt(SEED, PREFIX)
    past = m.prefill_kv(ids)
    out = {}
    for port in ports:
        cache = PionPromptCache(m, port=port, stage2=True, lane_port=0)
        ns = cache.namespace_for(ids)
        cache.store(ns, past, prefix_ids=ids)
        out[str(port)] = ns
        cache.close()
    return out


def reader_main(port: int, ns: str, local: bool, single_steps: int) -> dict:
    from pion.server_decode import ServerAttentionDecoder
    from pion.torch_adapters import to_past_key_values

    m = ReferenceDecoder(num_threads=THREADS)
    question = prompt(SEED + 1, QUESTION)
    cache = PionPromptCache(m, port=port, stage2=True)
    hit = cache.lookup(ns)
    res: Dict[str, object] = {"hit": hit, "warm_rebuilds_at_lookup": cache.warm_rebuilds}
    if not hit:
        return res
    dec = ServerAttentionDecoder(m, cache, ns, PREFIX, batched=True)
    logits: List[np.ndarray] = []
    res["tokens"] = dec.generate(question, NTOK, logits_out=logits)
    if single_steps:
        one = ServerAttentionDecoder(m, cache, ns, PREFIX, batched=False)
        lg1: List[np.ndarray] = []
        one.generate(question, single_steps, logits_out=lg1)
        res["single_vs_batched_max_abs"] = float(max(np.abs(a - b).max() for a, b in zip(lg1, logits)))
    res["stats"] = cache.stats()
    res["logits_head"] = [lg[:64].tolist() for lg in logits]
    if local:
        k, v = cache.fetch(ns, PREFIX)
        past = to_past_key_values(k, v)
        lg, past = m.forward(question, past, last_only=True)
        toks, diffs = [], []
        for step in range(NTOK):
            row = lg[0, -1].numpy()
            diffs.append(float(np.abs(row - logits[step]).max()) if step < len(logits) else 0.0)
            toks.append(int(row.argmax()))
            if step + 1 < NTOK:
                lg, past = m.forward([toks[-1]], past, last_only=True)
        res["local_tokens"] = toks
        res["max_abs_vs_local"] = float(max(diffs))
    return res


def _run(args: List[str], env_extra: Dict[str, str] | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), env.get("PYTHONPATH")) if p)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, str(HERE), *args], env=env, capture_output=True, timeout=900)
    assert p.returncode == 0, p.stderr.decode()[-4000:]
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


# ---------------------------------------------------------------- servers of this module


@pytest.fixture(scope="module")
def stage2_env():
    from conftest import PionServer, free_port

    with tempfile.TemporaryDirectory(prefix="pion-s2model-") as d:
        servers = {
            "f32": PionServer(Path(d) / "f32", ["--attend-precision", "f32"]),
            "f16": PionServer(Path(d) / "f16", []),
            "cold": PionServer(Path(d) / "cold", ["--attend-precision", "f32", "--attend-max-slots", "4",
                                                  "--fastlane-port", str(free_port())]),
        }
        try:
            for s in servers.values():
                s.start()
            nss = _run(["writer", *[str(s.port) for s in servers.values()]])
            env = {"servers": servers, "ns": {k: nss[str(s.port)] for k, s in servers.items()}, "results": {}}
            yield env
        finally:
            reports = []
            for s in servers.values():
                s.stop(signal.SIGKILL)
                rep = s.sanitizer_report()
                if rep:
                    reports.append(f"{s.log_path}:\n{rep}")
            if reports:
                pytest.fail("sanitizer report in the server log:\n" + "\n".join(reports), pytrace=False)


def _reader(env, name: str, local: bool = False, single_steps: int = 0, env_extra=None) -> dict:
    s = env["servers"][name]
    return _run(["reader", str(s.port), env["ns"][name], "1" if local else "0", str(single_steps)], env_extra)


def _f32_result(env) -> dict:
    if "f32" not in env["results"]:
        env["results"]["f32"] = _reader(env, "f32", local=True, single_steps=2)
    return env["results"]["f32"]


# ---------------------------------------------------------------- tests


def test_decode_f32_matches_local_decode(stage2_env):
    r = _f32_result(stage2_env)
    assert r["hit"] and r["warm_rebuilds_at_lookup"] == 0
    print(f"\nf32 Stage-2 decode vs local decode over the same cache: max |dlogit| = {r['max_abs_vs_local']:.3g}"
          f" over {NTOK} steps; one-row-per-call vs batched: {r['single_vs_batched_max_abs']:.3g}")
    assert len(r["tokens"]) == NTOK
    assert r["tokens"] == r["local_tokens"]
    assert r["max_abs_vs_local"] <= 1e-4
    assert r["single_vs_batched_max_abs"] <= 1e-4
    st = r["stats"]
    assert st["attend_query_calls"] > 0 and st["cold_rehydrates_observed"] == 0
    assert st["lane_queries"] == 0  # conftest's servers run without a lane: RESP fallback


def test_decode_f16_same_tokens(stage2_env):
    r = _reader(stage2_env, "f16", local=True)
    same = sum(a == b for a, b in zip(r["tokens"], r["local_tokens"]))
    print(f"\nf16 slots: {same}/{NTOK} greedy tokens equal to the local decode, "
          f"max |dlogit| = {r['max_abs_vs_local']:.3g}")
    assert r["hit"]
    assert r["tokens"] == r["local_tokens"]


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "resp"])
def test_cold_path_decode_unchanged(stage2_env, lane):
    ref = _f32_result(stage2_env)
    r = _reader(stage2_env, "cold", env_extra=None if lane else {"PION_PROMPT_CACHE_NO_BINARY": "1"})
    st = r["stats"]
    print(f"\ncold path ({'lane' if lane else 'RESP'}): {st['cold_rehydrates_observed']} rehydrations, "
          f"{st['lane_queries']} lane queries, "
          f"{st['attend_query_calls']} queries")
    assert r["hit"]
    assert st["cold_rehydrates_observed"] > 0
    assert (st["lane_queries"] > 0) is lane
    assert r["tokens"] == ref["tokens"]
    diff = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(r["logits_head"], ref["logits_head"]))
    assert diff <= 1e-5


def test_restart_lookup_rebuilds_with_warm(stage2_env):
    ref = _f32_result(stage2_env)
    s = stage2_env["servers"]["f32"]
    s.restart()  # the warm cache is memory only: every slot is MISSING now
    c = PionPromptCache(port=s.port, n_layers=8, n_kv_heads=2, head_dim=64)
    assert c.attend_lookup(stage2_env["ns"]["f32"], 0) == "MISS"
    c.close()
    r = _reader(stage2_env, "f32")
    assert r["hit"] and r["warm_rebuilds_at_lookup"] == 1
    assert r["stats"]["cold_rehydrates_observed"] == 0
    assert r["tokens"] == ref["tokens"]


def _layer0_kv(m: ReferenceDecoder, ids: List[int], offset: int = 0):
    """Layer-0 Q/K/V of ``ids`` at absolute positions offset.. (K, Q after RoPE), as the model's
    forward computes them: layer 0's K/V depend on no attention, so for a 1-layer model this is
    its whole prefill cache without the O(N^2) attention (checked against prefill_kv below)."""
    from pion.reference_model import _rms_norm

    c, w = m.config, m.layers[0]
    x = m.embed[torch.as_tensor(ids).reshape(1, -1)]
    h = _rms_norm(x, w["attn_norm"], c.norm_eps)
    t = x.shape[1]

    def proj(name, heads):
        return torch.nn.functional.linear(h, w[name]).view(1, t, heads, c.head_dim).transpose(1, 2)

    return m._rope(proj("wq", c.n_heads), offset), m._rope(proj("wk", c.n_kv_heads), offset), proj("wv", c.n_kv_heads)


@torch.inference_mode()
def test_sparse_auto_needle_8k_top1_equals_dense(server_factory):
    """1-layer reference model, 8,192-token prefix, one planted needle block (64 positions whose
    keys align with the next token's query, docs/attention.md §7): next-token logits through sparse auto
    (B = 64, K_top = 16, K_top*B = N/8) have the dense top-1, for both selectors."""
    from pion.server_decode import ServerAttentionDecoder

    s = server_factory(["--attend-precision", "f32"])
    m = ReferenceDecoder(ModelConfig(n_layers=1), num_threads=THREADS)
    c = m.config
    n, b = 8192, 64
    k_top = n // 8 // b
    ids = prompt(5, n + 1)
    small = m.prefill_kv(ids[:64])[0]
    q0, k0, v0 = _layer0_kv(m, ids[:64])
    assert torch.equal(small[0], k0) and torch.equal(small[1], v0)
    _, k, v = _layer0_kv(m, ids[:n])
    q, _, _ = _layer0_kv(m, ids[n:], n)  # [1, H, 1, D] of the next token
    grp = c.n_heads // c.n_kv_heads
    pos = 3000 // b * b + 17  # a needle block that straddles two selector blocks
    for g in range(c.n_kv_heads):
        qd = q[0, g * grp:(g + 1) * grp, 0].mean(0)
        # score of the needle ~ 24 above 0 per head: it dominates the softmax over 8K positions
        k[0, g, pos:pos + b] = qd * (24.0 * math.sqrt(c.head_dim) / float(qd @ qd))
    past = ((k, v),)
    cache = PionPromptCache(m, port=s.port, stage2=True, lane_port=0, block_size=None, vquant="fp16")
    cache.store("needle", past)
    kv16 = ((k.half().float(), v.half().float()),)  # what the fp16 V-store and the slots hold
    local, _ = m.forward(ids[n:], kv16, last_only=True)
    local = local[0, -1].numpy()
    dense = ServerAttentionDecoder(m, cache, "needle", n).forward(ids[n:])[0, -1].numpy()
    assert np.abs(dense - local).max() <= 1e-4
    no_needle, _ = m.forward(ids[n:], ((_layer0_kv(m, ids[:n])[1].half().float(), kv16[0][1]),), last_only=True)
    print(f"\n8K needle: dense top-1 {int(dense.argmax())} (without the needle: {int(no_needle[0, -1].argmax())})")

    class SparseCache:
        """Routes the decoder's fused call to sparse-auto fused (M = 1)."""

        def __init__(self, selector: str) -> None:
            self.selector = selector

        def attend_query_fused(self, ns, layer, qq, k_suf, v_suf, head_map):
            return cache.attend_query_sparse_auto_fused(ns, layer, qq[:, 0], k_suf, v_suf, b, k_top,
                                                        head_map=head_map, selector=self.selector)[:, None]

    for sel in ("block_mean", "quest"):
        sparse = ServerAttentionDecoder(m, SparseCache(sel), "needle", n).forward(ids[n:])[0, -1].numpy()
        cos = float(sparse @ dense / (np.linalg.norm(sparse) * np.linalg.norm(dense)))
        print(f"sparse auto {sel}: top-1 {int(sparse.argmax())} vs dense {int(dense.argmax())}, "
              f"cos(logits) {cos:.6f}, max |dlogit| {np.abs(sparse - dense).max():.3g}")
        assert int(sparse.argmax()) == int(dense.argmax())


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "writer":
        print(json.dumps(writer_main([int(p) for p in sys.argv[2:]])))
    elif role == "reader":
        print(json.dumps(reader_main(int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", int(sys.argv[5]))))
    else:
        raise SystemExit(f"unknown role {role}")
