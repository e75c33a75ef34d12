"""Decode the reference model with attention over the cached prefix running on the server.

:class:`ServerAttentionDecoder` runs :class:`pion.reference_model.ReferenceDecoder`
after a prefix that lives only on the server (as Stage-2 attention slots
``<ns>_attn``): every layer computes Q/K/V of the new tokens locally, sends
``attend_query_fused(ns, layer, Q, K_suf, V_suf, head_map)`` where the suffix is
every token after the prefix so far (the prompt's question, then the generated
tokens; K after RoPE), and runs the output projection, the feed-forward block
and the LM head locally. The client never holds the prefix's K/V.

Two ways to send the queries of a step with T new tokens:

* ``batched=True`` (default): one call per layer carrying all T query rows
  (``[H_q, T, D]``; the server applies the causal mask within the suffix);
* ``batched=False``: one call per layer and token (M = 1, the suffix cut at that token).

Both give the same numbers up to float rounding; decode (T = 1) is the same call.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from .attend import default_head_map
from .reference_model import ReferenceDecoder, _rms_norm

__all__ = ["ServerAttentionDecoder"]


class ServerAttentionDecoder:
    """Reference-model decode whose prefix attention is ``attend_query_fused`` on the server.

    Args:
        model: the reference model whose prefix K/V the server holds.
        cache: a :class:`pion.PionPromptCache` (any ``server_attention`` setting; the slots
            must exist, e.g. after ``store`` with ``server_attention=True`` or ``warm``).
        namespace: the prefix's namespace (slots ``<ns>_attn``, layers 0..L-1).
        prefix_len: N, the number of cached prefix tokens (RoPE positions of the
            new tokens start there).
        batched: send all new query rows of a layer in one call (see the module docstring).
    """

    def __init__(self, model: ReferenceDecoder, cache: Any, namespace: str, prefix_len: int,
                 batched: bool = True) -> None:
        c = model.config
        self.model, self.cache, self.namespace = model, cache, namespace
        self.prefix_len = int(prefix_len)
        self.batched = batched
        self.head_map = default_head_map(c.n_heads, c.n_kv_heads)
        empty = np.zeros((c.n_kv_heads, 0, c.head_dim), dtype=np.float32)
        self.suffix_k: list[np.ndarray] = [empty] * c.n_layers
        self.suffix_v: list[np.ndarray] = [empty] * c.n_layers

    @property
    def position(self) -> int:
        """Absolute position of the next token (prefix plus suffix so far)."""
        return self.prefix_len + self.suffix_k[0].shape[1]

    def _attend(self, li: int, q: np.ndarray) -> np.ndarray:
        """q ``[H, T, D]`` of the last T suffix tokens -> attention output ``[H, T, D]``."""
        ks, vs = self.suffix_k[li], self.suffix_v[li]
        if self.batched:
            return self.cache.attend_query_fused(self.namespace, li, q, ks, vs, self.head_map)
        t = q.shape[1]
        s = ks.shape[1]
        out = np.empty_like(q)
        for i in range(t):
            end = s - t + i + 1  # row i is the last position of the suffix cut here
            out[:, i] = self.cache.attend_query_fused(self.namespace, li, q[:, i], ks[:, :end], vs[:, :end],
                                                      self.head_map)
        return out

    @torch.inference_mode()
    def forward(self, ids: Sequence[int] | torch.Tensor, last_only: bool = True) -> torch.Tensor:
        """Runs ``ids`` (``[T]``, batch 1) after the prefix and the suffix so far; returns logits
        ``[1, T or 1, vocab]`` and appends the tokens' K/V to the local suffix."""
        m = self.model
        c = m.config
        x_ids = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
        t = x_ids.shape[1]
        if t < 1:
            raise ValueError("ids must hold at least one token")
        offset = self.position
        x = m.embed[x_ids]
        for li, w in enumerate(m.layers):
            hnorm = _rms_norm(x, w["attn_norm"], c.norm_eps)
            q = torch.nn.functional.linear(hnorm, w["wq"]).view(1, t, c.n_heads, c.head_dim).transpose(1, 2)
            k = torch.nn.functional.linear(hnorm, w["wk"]).view(1, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
            v = torch.nn.functional.linear(hnorm, w["wv"]).view(1, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
            q = m._rope(q, offset)
            k = m._rope(k, offset)
            self.suffix_k[li] = np.concatenate([self.suffix_k[li], k[0].numpy()], axis=1)
            self.suffix_v[li] = np.concatenate([self.suffix_v[li], v[0].numpy()], axis=1)
            a = torch.from_numpy(np.asarray(self._attend(li, np.ascontiguousarray(q[0].numpy()))))
            a = a.unsqueeze(0)  # [1, H, T, D]
            x = x + torch.nn.functional.linear(a.transpose(1, 2).reshape(1, t, c.n_heads * c.head_dim), w["wo"])
            hnorm = _rms_norm(x, w["ffn_norm"], c.norm_eps)
            gate = torch.nn.functional.linear(hnorm, w["w_gate"])
            up = torch.nn.functional.linear(hnorm, w["w_up"])
            x = x + torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, w["w_down"])
        if last_only:
            x = x[:, -1:]
        return torch.nn.functional.linear(_rms_norm(x, m.final_norm, c.norm_eps), m.lm_head)

    def generate(self, ids: Sequence[int] | torch.Tensor, n: int = 32,
                 logits_out: list[np.ndarray] | None = None) -> list[int]:
        """Greedy decoding: feeds ``ids`` then ``n`` argmax steps (as ``ReferenceDecoder.generate``).

        ``logits_out``, when given, receives each step's last-position logits (float32).
        """
        logits = self.forward(ids)
        out: list[int] = []
        for step in range(n):
            lg = logits[0, -1]
            if logits_out is not None:
                logits_out.append(lg.numpy().copy())
            nxt = int(lg.argmax())
            out.append(nxt)
            if step + 1 < n:
                logits = self.forward([nxt])
        return out
