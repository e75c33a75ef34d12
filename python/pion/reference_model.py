"""A small Llama-style decoder in plain torch: the test and demo model of the pion client.

Architecture: token embedding, ``n_layers`` pre-norm blocks of RMSNorm ->
grouped-query attention with rotary position embeddings (RoPE, rotate-half
convention) -> residual, RMSNorm -> SwiGLU feed-forward -> residual; a final
RMSNorm and an untied LM head. Defaults: 8 layers, d_model 512, 8 query heads,
2 KV heads, head_dim 64 (kv_dim 128), SwiGLU width 1408, vocabulary 32,000
(about 43 M parameters).

**The weights are random** (drawn from a fixed seed, see :class:`ModelConfig`):
no model hub is reachable from the machines this project is built and tested
on, and the client's claims (a restored prefix gives bit-identical logits
across processes, quantized formats rank by fidelity, time to first token
drops) do not depend on what the weights mean. The initialisation is chosen so
that the model behaves like a trained one in the ways that matter for a KV
cache: attention is peaked rather than uniform (query/key scale), K has
per-channel outliers (log-normal gains on the key projection), the residual
stream stays bounded (scaled output projections) and the next-token
distribution is peaked (LM-head scale), so K/V quantization error shows up in
the logits and the greedy continuation.

Attention is plain ``matmul`` + causal mask + softmax (torch 1.13 has no
``scaled_dot_product_attention``), computed in query blocks of 256 rows to bound
memory. Everything is float32 on the CPU.

Determinism: weights come from ``torch.Generator().manual_seed(config.seed)``;
the forward pass uses no randomness. Two processes with the same torch/BLAS
build and the same thread count (``num_threads``) produce bit-identical logits
from identical inputs and K/V.

``past_key_values`` is the Hugging Face legacy layout: a tuple with one ``(K, V)``
pair per layer, each ``[batch, n_kv_heads, tokens, head_dim]``; K is stored after
RoPE (as Llama implementations do), so a restored prefix is used as is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Tuple, Union

import numpy as np
import torch

__all__ = ["ModelConfig", "ReferenceDecoder", "PastKeyValues"]

PastKeyValues = Tuple[Tuple[torch.Tensor, torch.Tensor], ...]
TokenIds = Union[torch.Tensor, Sequence[int]]

_Q_BLOCK = 256


@dataclass(frozen=True)
class ModelConfig:
    """Shape and seed of :class:`ReferenceDecoder`."""

    vocab_size: int = 32000
    d_model: int = 512
    n_layers: int = 8
    n_heads: int = 8
    n_kv_heads: int = 2
    head_dim: int = 64
    ffn_dim: int = 1408
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    seed: int = 1974

    @property
    def kv_dim(self) -> int:
        """Values per K (or V) row: ``n_kv_heads * head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def model_id(self) -> str:
        """A string naming these exact weights (use it in namespace keys)."""
        return (f"pion-ref-decoder-v1-L{self.n_layers}-d{self.d_model}-h{self.n_heads}"
                f"-kv{self.n_kv_heads}-hd{self.head_dim}-f{self.ffn_dim}-v{self.vocab_size}-s{self.seed}")


def _softmax_(x: torch.Tensor) -> None:
    """In-place softmax over the last dim of a contiguous float32 CPU tensor.

    The exponential runs in numpy: Debian's torch 1.13 evaluates ``exp`` with
    scalar code (~45 M/s), numpy's SIMD float32 ``exp`` is ~10x faster, and
    attention is dominated by it. Deterministic (no threading in numpy's exp).
    """
    x.sub_(x.amax(-1, keepdim=True))
    a = x.numpy()
    np.exp(a, out=a)
    x.div_(x.sum(-1, keepdim=True))


def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class ReferenceDecoder:
    """Random-weight Llama-style decoder (see the module docstring).

    Args:
        config: shapes and seed (default: 8 layers, 8 heads, 2 KV heads, head_dim 64, vocab 32k).
        num_threads: if given, ``torch.set_num_threads(num_threads)`` (process-wide).
            Keep it equal across processes whose logits must match bit for bit.
    """

    def __init__(self, config: ModelConfig = ModelConfig(), num_threads: int | None = None) -> None:
        c = config
        if c.n_heads % c.n_kv_heads:
            raise ValueError("n_heads must be a multiple of n_kv_heads")
        if c.head_dim % 2:
            raise ValueError("head_dim must be even (RoPE)")
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.config = c
        g = torch.Generator().manual_seed(c.seed)

        def normal(*shape: int, std: float) -> torch.Tensor:
            return torch.randn(*shape, generator=g, dtype=torch.float32) * std

        d, hd = c.d_model, c.head_dim
        resid = 1.0 / math.sqrt(2 * c.n_layers)
        self.embed = normal(c.vocab_size, d, std=1.0)
        self.layers = []
        for _ in range(c.n_layers):
            k_gain = torch.exp(normal(c.n_kv_heads * hd, 1, std=0.5))  # per-channel K outliers
            self.layers.append({
                "attn_norm": 1.0 + normal(d, std=0.1),
                "wq": normal(c.n_heads * hd, d, std=1.5 / math.sqrt(d)),
                "wk": normal(c.n_kv_heads * hd, d, std=1.5 / math.sqrt(d)) * k_gain,
                "wv": normal(c.n_kv_heads * hd, d, std=1.0 / math.sqrt(d)),
                "wo": normal(d, c.n_heads * hd, std=resid / math.sqrt(c.n_heads * hd)),
                "ffn_norm": 1.0 + normal(d, std=0.1),
                "w_gate": normal(c.ffn_dim, d, std=1.0 / math.sqrt(d)),
                "w_up": normal(c.ffn_dim, d, std=1.0 / math.sqrt(d)),
                "w_down": normal(d, c.ffn_dim, std=resid / math.sqrt(c.ffn_dim)),
            })
        self.final_norm = 1.0 + normal(d, std=0.1)
        self.lm_head = normal(c.vocab_size, d, std=3.0 / math.sqrt(d))
        self.inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))

    # -- layout, for PionPromptCache(model=...) ---------------------------------
    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    @property
    def n_kv_heads(self) -> int:
        return self.config.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    @property
    def model_id(self) -> str:
        return self.config.model_id

    # -- building blocks --------------------------------------------------------
    def _rope(self, x: torch.Tensor, offset: int) -> torch.Tensor:
        """Rotate-half RoPE on ``x`` [B, H, T, D] for absolute positions offset..offset+T-1."""
        t = x.shape[2]
        pos = torch.arange(offset, offset + t, dtype=torch.float64)
        ang = torch.outer(pos, self.inv_freq)
        cos = torch.cat([ang.cos(), ang.cos()], dim=-1).to(torch.float32)
        sin = torch.cat([ang.sin(), ang.sin()], dim=-1).to(torch.float32)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int) -> torch.Tensor:
        """Causal GQA: q [B, H, T, D], k/v [B, Hkv, S, D] (S = offset + T) -> [B, H, T, D].

        Query heads of one KV group share one GEMM; each block of queries only
        multiplies the keys it can see, and only the diagonal tile is masked.
        """
        b, h, t, dh = q.shape
        hkv = k.shape[1]
        grp = h // hkv
        qg = q.reshape(b, hkv, grp, t, dh)
        # OpenBLAS (Debian) is ~4x faster with a transposed K view for a few query
        # rows (decode, short suffix) and ~3x faster with a contiguous K^T for many.
        kt = k.transpose(-1, -2)  # [B, Hkv, D, S]
        if grp * min(t, _Q_BLOCK) > 128:
            kt = kt.contiguous()
        scale = 1.0 / math.sqrt(dh)
        out = torch.empty(b, hkv, grp, t, dh, dtype=torch.float32)
        for i0 in range(0, t, _Q_BLOCK):
            i1 = min(t, i0 + _Q_BLOCK)
            blk, s_eff = i1 - i0, offset + i1
            qb = qg[:, :, :, i0:i1].reshape(b, hkv, grp * blk, dh)
            scores = torch.matmul(qb, kt[..., :s_eff])  # [B, Hkv, g*blk, s_eff]
            scores.mul_(scale)
            tile = scores.view(b, hkv, grp, blk, s_eff)[..., offset + i0:]
            if blk > 1:  # key j (in the tile) is visible to query i iff j <= i
                tile.masked_fill_(torch.ones(blk, blk, dtype=torch.bool).triu_(1), float("-inf"))
            _softmax_(scores)
            out[:, :, :, i0:i1] = torch.matmul(scores, v[:, :, :s_eff]).view(b, hkv, grp, blk, dh)
        return out.reshape(b, h, t, dh)

    # -- public API -------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, ids: TokenIds, past_key_values: PastKeyValues | None = None,
                last_only: bool = False) -> tuple[torch.Tensor, PastKeyValues]:
        """Runs ``ids`` [B, T] after an optional cached prefix.

        Args:
            ids: token ids, ``[B, T]`` or ``[T]`` (treated as B = 1), T >= 1.
            past_key_values: cached prefix (K after RoPE), any float dtype; converted to float32.
            last_only: compute logits for the last position only (what prefill and
                generation need; skips T-1 LM-head products).

        Returns:
            ``(logits, past_key_values)``: logits ``[B, T or 1, vocab]`` float32, and the
            extended cache (float32).
        """
        c = self.config
        x_ids = torch.as_tensor(ids, dtype=torch.long)
        if x_ids.dim() == 1:
            x_ids = x_ids.unsqueeze(0)
        b, t = x_ids.shape
        if t < 1:
            raise ValueError("ids must hold at least one token")
        offset = 0 if not past_key_values else int(past_key_values[0][0].shape[2])
        if past_key_values and len(past_key_values) != c.n_layers:
            raise ValueError(f"past_key_values has {len(past_key_values)} layers, model has {c.n_layers}")
        x = self.embed[x_ids]
        new_past = []
        for li, w in enumerate(self.layers):
            hnorm = _rms_norm(x, w["attn_norm"], c.norm_eps)
            q = torch.nn.functional.linear(hnorm, w["wq"]).view(b, t, c.n_heads, c.head_dim).transpose(1, 2)
            k = torch.nn.functional.linear(hnorm, w["wk"]).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
            v = torch.nn.functional.linear(hnorm, w["wv"]).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
            q = self._rope(q, offset)
            k = self._rope(k, offset)
            if past_key_values:
                pk, pv = past_key_values[li]
                k = torch.cat([pk.to(torch.float32), k], dim=2)
                v = torch.cat([pv.to(torch.float32), v], dim=2)
            new_past.append((k, v))
            a = self._attention(q, k, v, offset)
            x = x + torch.nn.functional.linear(a.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim), w["wo"])
            hnorm = _rms_norm(x, w["ffn_norm"], c.norm_eps)
            gate = torch.nn.functional.linear(hnorm, w["w_gate"])
            up = torch.nn.functional.linear(hnorm, w["w_up"])
            x = x + torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, w["w_down"])
        if last_only:
            x = x[:, -1:]
        logits = torch.nn.functional.linear(_rms_norm(x, self.final_norm, c.norm_eps), self.lm_head)
        return logits, tuple(new_past)

    def prefill(self, ids: TokenIds) -> tuple[torch.Tensor, PastKeyValues]:
        """Prefills a prompt: returns ``(last-position logits [B, vocab], past_key_values)``."""
        logits, past = self.forward(ids, None, last_only=True)
        return logits[:, -1], past

    def prefill_kv(self, ids: TokenIds) -> PastKeyValues:
        """Prefills and returns only ``past_key_values`` (a ``prefill_fn`` for ``get_or_prefill``)."""
        return self.prefill(ids)[1]

    @torch.inference_mode()
    def generate(self, ids: TokenIds, past_key_values: PastKeyValues | None = None,
                 n: int = 32) -> torch.Tensor:
        """Greedy decoding: feeds ``ids`` after the cached prefix, then ``n`` argmax steps.

        Args:
            ids: the tokens not yet in ``past_key_values`` (at least one), ``[T]`` or ``[B, T]``.
            past_key_values: cached prefix or None.
            n: tokens to generate.

        Returns:
            LongTensor ``[B, n]`` of generated token ids (the first one is the
            "first token" whose latency is time to first token).
        """
        logits, past = self.forward(ids, past_key_values, last_only=True)
        out = []
        for step in range(n):
            nxt = logits[:, -1].argmax(-1)
            out.append(nxt)
            if step + 1 < n:
                logits, past = self.forward(nxt.unsqueeze(1), past, last_only=True)
        return torch.stack(out, dim=1) if out else torch.empty(logits.shape[0], 0, dtype=torch.long)
