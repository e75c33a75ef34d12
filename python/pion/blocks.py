"""Chained block hashes of a token prefix, for ``KV.PREFIX.REGISTER ... BLOCKS`` and
``KV.PREFIX.MEMBERSHIP``.

The server never computes hashes; it stores and compares opaque u64 values. Any
client that wants to probe another client's registration must use the same
scheme, so it is fixed here and documented in docs/python.md:

* Token ids are unsigned 32-bit integers (0 .. 2**32-1), encoded little-endian.
* The prefix is cut into blocks of ``block_size`` tokens (default 16); a final
  partial block is dropped (it is not a reusable unit).
* ``h[-1] = seed`` (default 0), and for block ``i`` (tokens ``i*B .. i*B+B-1``)::

      h[i] = XXH3_64( le_u64(h[i-1]) || le_u32(t[i*B]) || ... || le_u32(t[i*B+B-1]) )

  with XXH3-64 at its default seed 0 (``xxhash.xxh3_64_intdigest``). Chaining
  makes ``h[i]`` name the whole prefix up to the end of block ``i``, not just the
  block's own tokens, so equal hashes mean equal prefixes (as vLLM's prefix
  caching does).
* The wire form is ``hash_count × u64`` little-endian, in token order
  (:func:`pack_hashes`).

Example: ``block_hashes(range(40))`` gives 2 hashes (tokens 0..15 and 16..31;
the 8 tail tokens are dropped).
"""
from __future__ import annotations

import struct
from typing import Iterable, Sequence, Union

import numpy as np

__all__ = ["DEFAULT_BLOCK_SIZE", "block_hashes", "pack_hashes", "unpack_hashes", "unpack_bitmap"]

DEFAULT_BLOCK_SIZE = 16

TokenIds = Union[Sequence[int], np.ndarray, Iterable[int]]

_U64 = struct.Struct("<Q")


def _xxh3_64():
    try:
        import xxhash  # python3-xxhash
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("block hashes need the 'xxhash' package (Debian: python3-xxhash)") from e
    return xxhash.xxh3_64_intdigest


def block_hashes(token_ids: TokenIds, block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0) -> np.ndarray:
    """Returns the chained XXH3-64 hashes of the full blocks of ``token_ids``.

    Args:
        token_ids: the prefix's token ids (any integer sequence, each 0..2**32-1).
        block_size: tokens per block (1..65536); the tail partial block is dropped.
        seed: the chain's initial value ``h[-1]`` (0..2**64-1); use it to separate
            models or tokenizers that share token ids.

    Returns:
        ``np.ndarray`` of dtype ``uint64`` and length ``len(token_ids) // block_size``.
    """
    if not 1 <= block_size <= 65536:
        raise ValueError("block_size must be 1..65536")
    if not 0 <= seed < 2**64:
        raise ValueError("seed must be 0..2**64-1")
    ids = np.asarray(list(token_ids) if not isinstance(token_ids, np.ndarray) else token_ids)
    if ids.size and (ids.min() < 0 or ids.max() > 0xFFFFFFFF):
        raise ValueError("token ids must be 0..2**32-1")
    ids = ids.astype("<u4", copy=False).ravel()
    n = ids.size // block_size
    raw = ids[: n * block_size].tobytes()
    step = 4 * block_size
    h3 = _xxh3_64()
    out = np.empty(n, dtype=np.uint64)
    h = seed
    for i in range(n):
        h = h3(_U64.pack(h) + raw[i * step:(i + 1) * step])
        out[i] = h
    return out


def pack_hashes(hashes: Sequence[int] | np.ndarray) -> bytes:
    """Packs hashes as little-endian u64 (the BLOCKS / MEMBERSHIP blob)."""
    return np.asarray(hashes, dtype=np.uint64).astype("<u8", copy=False).tobytes()


def unpack_hashes(blob: bytes) -> np.ndarray:
    """Parses a little-endian u64 blob into a ``uint64`` array (zero-copy, read-only)."""
    if len(blob) % 8:
        raise ValueError("hash blob length must be a multiple of 8")
    return np.frombuffer(blob, dtype="<u8")


def unpack_bitmap(bitmap: bytes, count: int) -> np.ndarray:
    """Parses a MEMBERSHIP bitmap (bit i = byte i>>3, bit i&7, LSB first) into ``count`` bools."""
    if len(bitmap) != (count + 7) // 8:
        raise ValueError(f"bitmap has {len(bitmap)} bytes, expected {(count + 7) // 8}")
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[:count].astype(bool)
