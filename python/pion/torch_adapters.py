"""Adapters between torch ``past_key_values`` and the numpy prefix arrays of PionPromptCache.

``past_key_values`` here is the Hugging Face "legacy" layout: a tuple with one
``(K, V)`` pair per layer, each tensor shaped ``[batch, kv_heads, tokens, head_dim]``,
any floating dtype (float32, float16, bfloat16...). pion stores one prefix per
namespace, so ``batch`` must be 1 when converting to arrays.

The prefix arrays are ``K, V`` numpy arrays shaped ``[layers, kv_heads, tokens, head_dim]``.
numpy has no bfloat16: bfloat16 tensors become float32 (exact); float16 stays
float16 (so it is uploaded with ``FMT F16``); float32 stays float32.

torch is imported lazily: ``import pion`` works without it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["from_past_key_values", "to_past_key_values", "is_past_key_values"]


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the torch adapters need torch installed") from e
    return torch


def is_past_key_values(obj: Any) -> bool:
    """True when ``obj`` looks like a tuple/list of (K, V) torch tensor pairs."""
    if not isinstance(obj, (tuple, list)) or not obj:
        return False
    first = obj[0]
    if not isinstance(first, (tuple, list)) or len(first) != 2:
        return False
    return type(first[0]).__module__.startswith("torch")


def _np_from_tensor(t: Any) -> np.ndarray:
    torch = _torch()
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype in (torch.float16, torch.float32):
        return t.numpy()
    if t.is_floating_point():
        return t.to(torch.float32).numpy()
    raise TypeError(f"past_key_values tensors must be floating point, got {t.dtype}")


def from_past_key_values(past_key_values: Sequence[tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Stacks ``past_key_values`` into ``(K, V)`` numpy arrays ``[layers, kv_heads, tokens, head_dim]``.

    Args:
        past_key_values: one ``(K, V)`` pair per layer, tensors ``[1, H, N, D]``.

    Returns:
        ``(K, V)``; dtype float16 for float16 tensors, else float32.
    """
    if not past_key_values:
        raise ValueError("past_key_values is empty")
    ks, vs = [], []
    for i, (k, v) in enumerate(past_key_values):
        if k.dim() != 4 or v.dim() != 4:
            raise ValueError(f"layer {i}: tensors must be 4-D [batch, kv_heads, tokens, head_dim]")
        if k.shape[0] != 1 or v.shape[0] != 1:
            raise ValueError(f"layer {i}: batch must be 1 (one prefix per namespace), got {k.shape[0]}")
        if tuple(k.shape) != tuple(v.shape):
            raise ValueError(f"layer {i}: K {tuple(k.shape)} and V {tuple(v.shape)} differ")
        ks.append(_np_from_tensor(k[0]))
        vs.append(_np_from_tensor(v[0]))
    dt = np.float16 if all(a.dtype == np.float16 for a in ks + vs) else np.float32
    return np.stack([a.astype(dt, copy=False) for a in ks]), np.stack([a.astype(dt, copy=False) for a in vs])


def to_past_key_values(k: np.ndarray, v: np.ndarray, dtype: Any | None = None,
                       device: Any | None = None) -> tuple[tuple[Any, Any], ...]:
    """Builds torch ``past_key_values`` from ``(K, V)`` arrays ``[layers, kv_heads, tokens, head_dim]``.

    Args:
        k, v: prefix arrays (any float dtype numpy supports).
        dtype: torch dtype of the result (default: float16 arrays -> torch.float16,
            else torch.float32). Conversion happens in torch, so e.g. bfloat16 works.
        device: torch device (default CPU).

    Returns:
        A tuple with one ``(K, V)`` pair per layer, each ``[1, kv_heads, tokens, head_dim]``,
        contiguous (a fresh copy: the arrays may be read-only views of reply bytes).
    """
    torch = _torch()
    if k.shape != v.shape or k.ndim != 4:
        raise ValueError(f"K {k.shape} and V {v.shape} must be equal 4-D shapes [L, H, N, D]")
    out = []
    for layer in range(k.shape[0]):
        pair = []
        for a in (k[layer], v[layer]):
            t = torch.from_numpy(np.array(a, copy=True, order="C"))  # owning, writable copy
            if dtype is not None and t.dtype != dtype:
                t = t.to(dtype)
            if device is not None:
                t = t.to(device)
            pair.append(t.unsqueeze(0))
        out.append((pair[0], pair[1]))
    return tuple(out)
