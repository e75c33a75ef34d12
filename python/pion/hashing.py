"""The block hashes the engines and routers name KV by, computed here so that a client of
pion can name (and find) what an engine stored, or tell a router about it.

Each function follows the algorithm as the engine's own source defines it; the
golden vectors in the tests were computed independently from that definition.

* **vLLM** (``vllm/v1/core/kv_cache_utils.py`` ``hash_block_tokens`` and
  ``init_none_hash``, ``vllm/utils/hashing.py`` ``sha256_cbor``), prefix caching with
  ``--prefix-caching-hash-algo sha256_cbor``: block ``i`` of ``block_size`` tokens
  hashes to ``sha256(cbor(parent, tuple(tokens), extra_keys))`` with CBOR in canonical
  form (a 3-element array: the parent digest as a byte string, the tokens as an array of
  unsigned integers, ``extra_keys`` as null or an array). The first block's parent is
  ``NONE_HASH = sha256(cbor(seed))``, ``seed`` being the engine's ``PYTHONHASHSEED``
  string (without it vLLM draws a random NONE_HASH, and no other process can reproduce
  the hashes). Only full blocks are hashed. vLLM's default ``sha256`` algorithm pickles
  the tuple, so it is Python-specific and is not offered here.
  :func:`vllm_event_hash` is the u64 vLLM's KV events carry for a digest
  (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, the default): its last 8 bytes, big-endian.
  The vLLM offloading tiers key a block by this digest plus a 4-byte big-endian KV-cache
  group index (:func:`vllm_offload_key`).
* **Dynamo** (``lib/llm/src/kv_router/indexer.rs`` ``compute_block_hash_for_seq`` and
  ``compute_seq_hash_for_block``): a block's "local" hash is
  ``XXH3_64(le_u32(t0) .. le_u32(tB-1), seed)``, unchained, with seed 1337
  (:data:`DYNAMO_SEED`); a LoRA adapter name mixes into the seed as
  ``1337 + XXH3_64(name)`` (wrapping, as ``lib/kv-router/src/protocols.rs`` does). The
  chained "sequence" hash of block 0 is its local hash, of block ``i`` it is
  ``XXH3_64(le_u64(seq[i-1]) || le_u64(local[i]), 1337)``.
* **SGLang** (``python/sglang/srt/mem_cache/hicache_storage.py`` ``get_hash_str``): page
  ``i`` of ``page_size`` tokens is named by the hex SHA-256 of the previous page's digest
  (raw bytes, absent for the first page) followed by each token as ``le_u32``.

pion's own namespace hash (``KV.PREFIX.REGISTER ... BLOCKS``) is :func:`pion.blocks.block_hashes`,
a different chained XXH3 scheme (seed 0, the parent hash first); it is not repeated here.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Any, Iterable, Sequence

__all__ = [
    "DYNAMO_SEED",
    "dynamo_block_hashes",
    "dynamo_salt_seed",
    "dynamo_sequence_hashes",
    "sglang_page_keys",
    "vllm_block_hashes",
    "vllm_event_hash",
    "vllm_none_hash",
    "vllm_offload_key",
]

DYNAMO_SEED = 1337
_U64_MASK = (1 << 64) - 1


def _xxh3():
    try:
        import xxhash  # python3-xxhash
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("Dynamo hashes need the 'xxhash' package (Debian: python3-xxhash)") from e
    return xxhash.xxh3_64_intdigest


def _cbor_canonical(obj: Any) -> bytes:
    try:
        import cbor2  # python3-cbor2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("vLLM hashes need the 'cbor2' package (Debian: python3-cbor2)") from e
    return cbor2.dumps(obj, canonical=True)


def _tokens(token_ids: Iterable[Any]) -> list[int]:
    out = [int(t) for t in token_ids]
    for t in out:
        if not 0 <= t <= 0xFFFFFFFF:
            raise ValueError(f"token id {t} is not 0..2**32-1")
    return out


def _check_block_size(n: int, what: str = "block_size") -> int:
    n = int(n)
    if n < 1:
        raise ValueError(f"{what} must be at least 1")
    return n


# ---- vLLM

def vllm_none_hash(hash_seed: str | int) -> bytes:
    """vLLM's ``NONE_HASH`` for ``sha256_cbor``: the digest of the CBOR text string
    ``str(hash_seed)`` (the value of ``PYTHONHASHSEED`` in the engine's environment)."""
    return hashlib.sha256(_cbor_canonical(str(hash_seed))).digest()


def vllm_block_hashes(token_ids: Iterable[Any], block_size: int, hash_seed: str | int,
                      extra_keys: Sequence[Any] | None = None) -> list[bytes]:
    """The 32-byte ``sha256_cbor`` hashes of the full blocks of ``token_ids``.

    Args:
        token_ids: the request's token ids.
        block_size: tokens per block (vLLM's ``--block-size``; for an offloading tier the
            hash block, ``tokens_per_hash``).
        hash_seed: the engine's ``PYTHONHASHSEED`` (a string such as ``"0"``; an int is
            converted with ``str``).
        extra_keys: None (plain text requests), or one entry per block, each None or the
            tuple vLLM builds for it (LoRA name, multimodal hashes, cache salt on block 0,
            ...), hashed as a CBOR array.

    Returns:
        One ``bytes`` digest per full block, in order.
    """
    bs = _check_block_size(block_size)
    ids = _tokens(token_ids)
    n = len(ids) // bs
    if extra_keys is not None and len(extra_keys) < n:
        raise ValueError(f"extra_keys has {len(extra_keys)} entries for {n} blocks")
    parent = vllm_none_hash(hash_seed)
    out: list[bytes] = []
    for i in range(n):
        extra = None if extra_keys is None else extra_keys[i]
        if extra is not None:
            extra = tuple(extra)
        parent = hashlib.sha256(_cbor_canonical((parent, tuple(ids[i * bs:(i + 1) * bs]), extra))).digest()
        out.append(parent)
    return out


def vllm_event_hash(digest: bytes) -> int:
    """The unsigned 64-bit hash vLLM's KV events carry for a block digest: the digest's
    last 8 bytes read big-endian (``int.from_bytes(digest, "big") & (2**64 - 1)``)."""
    if len(digest) < 8:
        raise ValueError("a block digest has at least 8 bytes")
    return int.from_bytes(bytes(digest[-8:]), "big")


def vllm_offload_key(digest: bytes, group_idx: int = 0) -> bytes:
    """The key vLLM's offloading tiers use for a block: the digest, then the KV-cache
    group index as 4 big-endian bytes."""
    return bytes(digest) + int(group_idx).to_bytes(4, "big", signed=False)


# ---- Dynamo

def dynamo_salt_seed(salt: str | int | None = None) -> int:
    """The XXH3 seed of Dynamo's block hashes: 1337 unsalted; for a LoRA adapter name,
    ``1337 + XXH3_64(name)`` modulo 2**64 (an empty name counts as none); an int is taken
    as the seed itself."""
    if salt is None or salt == "":
        return DYNAMO_SEED
    if isinstance(salt, int):
        if not 0 <= salt <= _U64_MASK:
            raise ValueError("a seed is 0..2**64-1")
        return salt
    return (DYNAMO_SEED + _xxh3()(str(salt).encode())) & _U64_MASK


def dynamo_block_hashes(token_ids: Iterable[Any], block_size: int,
                        salt: str | int | None = None) -> list[int]:
    """Dynamo's local block hashes (``tokens_hash``): one unchained u64 per full block,
    ``XXH3_64`` of the block's tokens as little-endian u32 with the seed
    :func:`dynamo_salt_seed` gives."""
    bs = _check_block_size(block_size)
    ids = _tokens(token_ids)
    n = len(ids) // bs
    raw = struct.pack(f"<{n * bs}I", *ids[:n * bs])
    step = 4 * bs
    h3 = _xxh3()
    seed = dynamo_salt_seed(salt)
    return [h3(raw[i * step:(i + 1) * step], seed=seed) for i in range(n)]


def dynamo_sequence_hashes(block_hashes: Iterable[int]) -> list[int]:
    """Dynamo's chained sequence hashes of local block hashes: the first equals its block
    hash, each next one is ``XXH3_64(le_u64(previous) || le_u64(block), 1337)``."""
    h3 = _xxh3()
    out: list[int] = []
    for b in block_hashes:
        b = int(b) & _U64_MASK
        out.append(b if not out else h3(struct.pack("<QQ", out[-1], b), seed=DYNAMO_SEED))
    return out


# ---- SGLang

def sglang_page_keys(token_ids: Iterable[Any], page_size: int,
                     prior: str | None = None) -> list[str]:
    """SGLang HiCache's page keys: one 64-character hex SHA-256 per full page, each over
    the previous page's digest (``prior`` for the first page, when given) and the page's
    tokens as little-endian u32. A tuple token (EAGLE bigram mode) hashes each element."""
    ps = _check_block_size(page_size, "page_size")
    ids: list[Any] = list(token_ids)
    out: list[str] = []
    for i in range(len(ids) // ps):
        h = hashlib.sha256()
        if prior:
            h.update(bytes.fromhex(prior))
        for t in ids[i * ps:(i + 1) * ps]:
            for e in (t if isinstance(t, tuple) else (t,)):
                h.update(int(e).to_bytes(4, "little", signed=False))
        prior = h.hexdigest()
        out.append(prior)
    return out
