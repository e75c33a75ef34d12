"""PrefixChain on the reference torch model, against the real pion-server.

A conversation is stored as a chain of segments, one per turn, each prefilled
once. A second client restores the 5 stored turns bit-exact (the fp16 values
the writer stored) in one pipeline and prefills only the new sixth turn; its
logits are bit-identical to those of the same turn run on a locally held copy
of the stored past, and agree with a cold prefill of the whole conversation up
to the fp16 rounding of the stored K/V (same next token; the difference is
printed). With a segment dropped, the longest cached ancestor is restored and
the rest prefilled in one call.
"""
from __future__ import annotations

from typing import List

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pion import PionPromptCache, PrefixChain  # noqa: E402
from pion.reference_model import ReferenceDecoder  # noqa: E402
from pion.torch_adapters import from_past_key_values, to_past_key_values  # noqa: E402

LENGTHS = [40, 18, 22, 14, 20, 16]  # system prompt, then five turns; the sixth is new


@pytest.fixture(scope="module")
def model() -> ReferenceDecoder:
    return ReferenceDecoder(num_threads=1)


def conversation(seed: int) -> List[List[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 32000, n).tolist() for n in LENGTHS]


class Prefill:
    """prefill_fn for PrefixChain.get_or_prefill: records each call and its last logits."""

    def __init__(self, model: ReferenceDecoder) -> None:
        self.model = model
        self.calls: List[List[int]] = []
        self.logits = None
        self.suffix_kv = None

    def __call__(self, ids: np.ndarray, past):
        self.calls.append(ids.tolist())
        pkv = to_past_key_values(past[0], past[1]) if past is not None else None
        logits, full = self.model.forward(ids.tolist(), pkv, last_only=True)
        self.logits = logits[0, -1].clone()
        k, v = from_past_key_values(full)
        n = len(ids)
        self.suffix_kv = (k[:, :, -n:], v[:, :, -n:])
        return full


def test_five_turns_restored_bit_exact_only_the_new_turn_prefilled(server, model):
    turns = conversation(16)
    writer = PrefixChain(PionPromptCache(model, vquant="fp16", port=server.port, block_size=None))
    pf = Prefill(model)
    stored = []  # what each segment's prefill computed (float32), in order
    for t in range(1, 6):
        writer.get_or_prefill(turns[:t], pf)
        assert pf.calls[-1] == turns[t - 1], "only the new turn is prefilled"
        assert writer.last_restored_segments == t - 1
        stored.append(pf.suffix_kv)
    assert len(pf.calls) == 5
    k16 = np.concatenate([k for k, _ in stored], axis=2).astype(np.float16)
    v16 = np.concatenate([v for _, v in stored], axis=2).astype(np.float16)
    r = server.client()
    info = r.execute_command("KV.PREFIX.INFO", writer.leaf).decode()
    assert "chain_length:5\r\n" in info and f"chain_tokens:{sum(LENGTHS[:5])}\r\n" in info

    # Another client: the five stored turns are restored, the sixth is prefilled alone.
    r.execute_command("PION.STATS", "RESET")
    reader = PrefixChain(PionPromptCache(model, vquant="fp16", port=server.port, block_size=None))
    rf = Prefill(model)
    k, v = reader.get_or_prefill(turns, rf)
    assert rf.calls == [turns[5]]
    assert reader.last_restored_segments == 5 and reader.last_prefilled_tokens == LENGTHS[5]
    assert k.shape == (8, 2, sum(LENGTHS), 64)
    n5 = sum(LENGTHS[:5])
    assert np.array_equal(k[:, :, :n5].astype(np.float16), k16)  # bit-exact restore
    assert np.array_equal(v[:, :, :n5].astype(np.float16), v16)
    flat = r.execute_command("PION.STATS")
    st = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
    assert st["kvprefix_hits"] == 1 and st["kvprefix_tokens_served"] == n5  # the chain, once
    # The new turn's logits: bit-identical to the same turn on the stored past held locally...
    local, _ = model.forward(turns[5], to_pav(k16, v16), last_only=True)
    assert torch.equal(rf.logits, local[0, -1])
    # ...and, up to the fp16 rounding of the stored K/V, those of a cold prefill of it all.
    cold, _ = model.prefill([x for t in turns for x in t])
    diff = float((cold[0] - rf.logits).abs().max())
    cos = float(torch.nn.functional.cosine_similarity(cold[0], rf.logits, dim=0))
    print(f"\nchain restore + new turn vs cold prefill of {sum(LENGTHS)} tokens: "
          f"max |logit diff| {diff:.2e}, cosine {cos:.7f}, argmax equal {int(cold[0].argmax()) == int(rf.logits.argmax())}")
    assert int(cold[0].argmax()) == int(rf.logits.argmax())
    assert cos > 0.9999
    # The sixth turn is now a segment too: a third client restores all six.
    third = PrefixChain(PionPromptCache(model, vquant="fp16", port=server.port, block_size=None))
    k6, v6 = third.restore(reader.leaf)
    assert third.namespaces == reader.namespaces and k6.shape[2] == sum(LENGTHS)
    assert np.array_equal(k6[:, :, :n5], k16)


def to_pav(k, v):
    return to_past_key_values(k, v)


def test_longest_cached_ancestor_restored_rest_prefilled_once(server, model):
    turns = conversation(17)
    cache = PionPromptCache(model, vquant="fp16", port=server.port, block_size=None)
    chain = PrefixChain(cache)
    pf = Prefill(model)
    chain.get_or_prefill(turns[:1], pf)
    for t in range(2, 6):
        chain.get_or_prefill(turns[:t], pf)
    # Segment 3 (the fourth turn) goes, with segment 4 below it.
    assert cache.client.kv_prefix_drop(chain.namespaces[3]) == 2
    again = PrefixChain(PionPromptCache(model, vquant="fp16", port=server.port, block_size=None))
    rf = Prefill(model)
    k, _ = again.get_or_prefill(turns, rf)
    assert again.last_restored_segments == 3
    assert rf.calls == [turns[3] + turns[4] + turns[5]]  # one call for the missing suffix
    assert k.shape[2] == sum(LENGTHS)
    # The three new segments were appended under the restored ones.
    d = cache.client.kv_prefix_info(again.leaf)
    assert d["chain_length"] == 6 and d["chain_tokens"] == sum(LENGTHS)
    assert d["parent"] == again.namespaces[4]
    # A conversation sharing the first two turns shares their segments (a tree).
    other = turns[:2] + [[7, 8, 9]]
    branch = PrefixChain(PionPromptCache(model, vquant="fp16", port=server.port, block_size=None))
    bf = Prefill(model)
    branch.get_or_prefill(other, bf)
    assert bf.calls == [[7, 8, 9]] and branch.namespaces[:2] == again.namespaces[:2]
    assert cache.client.kv_prefix_info(again.namespaces[1])["children"] == 2


def test_append_and_restore(server, model):
    turns = conversation(18)[:3]
    cache = PionPromptCache(model, vquant="fp16", port=server.port, block_size=None)
    chain = PrefixChain(cache)
    k, v = from_past_key_values(model.prefill_kv([x for t in turns for x in t]))
    off = 0
    for t in turns:
        chain.append(t, k[:, :, off:off + len(t)], v[:, :, off:off + len(t)])
        off += len(t)
    assert chain.n_tokens == off
    with pytest.raises(ValueError):
        chain.append([1, 2], k[:, :, :3], v[:, :, :3])
    rk, rv = PrefixChain(cache).restore(chain.leaf)
    assert np.array_equal(rk, k.astype(np.float16)) and np.array_equal(rv, v.astype(np.float16))
