"""pion: Python client for pion-server, a shared KV cache for LLM inference.

Quick use (a server started with ``pion-server --kvcache`` on 127.0.0.1:1974)::

    from pion import PionPromptCache
    cache = PionPromptCache(vquant="fp16", n_layers=8, n_kv_heads=2, head_dim=64)
    ns = cache.make_namespace("my-app", "v1", "my-model", "fp16", "system-prompt-1")
    k, v = cache.get_or_prefill(prefix_ids, ns, prefill_fn)   # [L, H, N, D] arrays

Modules: :mod:`pion.client` (``PionClient``, one method per server command),
:mod:`pion.prompt_cache` (``PionPromptCache``; conversations as chains of
segments in :mod:`pion.prefix_chain`, ``PrefixChain``; its Stage-2 methods in
:mod:`pion.attend`, the binary fast lane in :mod:`pion.fastlane`, decode through
server-side attention in :mod:`pion.server_decode`), :mod:`pion.blocks` (chained
block hashes), :mod:`pion.hashing` (the block hashes vLLM, Dynamo and SGLang name KV by), :mod:`pion.errors` (exceptions named after the error code words),
:mod:`pion.torch_adapters` and :mod:`pion.reference_model` (need torch; imported
lazily, so ``import pion`` works without torch).
"""
from __future__ import annotations

from typing import Any

from .blocks import DEFAULT_BLOCK_SIZE, block_hashes, pack_hashes, unpack_bitmap, unpack_hashes
from .client import STATS_FIELDS, VQUANTS, BlockTable, PionClient, parse_info, parse_stats
from .cluster_keys import hash_tagged, tagged_sid
from .errors import (
    ClientError,
    ColdMissError,
    CommandError,
    IncompletePrefixError,
    LoadingError,
    NoAuthError,
    NoProtoError,
    NotEnabledError,
    OutOfMemoryError,
    PersistenceNotEnabledError,
    PionConnectionError,
    PionError,
    SessionNotFoundError,
    UnexpectedReplyError,
    UnknownCommandError,
    WrongArityError,
    WrongPassError,
)
from .fastlane import FastLane
from .pipeline import Pipeline
from .prefix_chain import PrefixChain
from .prompt_cache import PionPromptCache

__version__ = "0.1.0"

__all__ = [
    "PionPromptCache",
    "PrefixChain",
    "PionClient",
    "hash_tagged",
    "tagged_sid",
    "FastLane",
    "Pipeline",
    "BlockTable",
    "VQUANTS",
    "STATS_FIELDS",
    "DEFAULT_BLOCK_SIZE",
    "block_hashes",
    "pack_hashes",
    "unpack_hashes",
    "unpack_bitmap",
    "parse_info",
    "parse_stats",
    "from_past_key_values",
    "to_past_key_values",
]
# Every exception class, named after the error code word (see pion.errors).
__all__ += [
    "ClientError",
    "ColdMissError",
    "CommandError",
    "IncompletePrefixError",
    "LoadingError",
    "NoAuthError",
    "NoProtoError",
    "NotEnabledError",
    "OutOfMemoryError",
    "PersistenceNotEnabledError",
    "PionConnectionError",
    "PionError",
    "SessionNotFoundError",
    "UnexpectedReplyError",
    "UnknownCommandError",
    "WrongArityError",
    "WrongPassError",
]


def __getattr__(name: str) -> Any:  # lazy torch adapters (PEP 562)
    if name in ("from_past_key_values", "to_past_key_values"):
        from . import torch_adapters

        return getattr(torch_adapters, name)
    raise AttributeError(f"module 'pion' has no attribute {name!r}")
