"""Golden vectors for pion.hashing, computed from the engines' algorithms as their source
defines them:

* vLLM: ``vllm/v1/core/kv_cache_utils.py`` (``init_none_hash``, ``hash_block_tokens``,
  ``maybe_convert_block_hash``) and ``vllm/utils/hashing.py`` (``sha256_cbor``) of
  vllm-project/vllm at commit 001cabc1be16a59a70d720ed61a13b678c060a18;
* Dynamo: ``lib/llm/src/kv_router/indexer.rs`` (``compute_block_hash_for_seq``,
  ``compute_seq_hash_for_block``, ``XXH3_SEED = 1337``) of ai-dynamo/dynamo at commit
  322fb3afc36e8427a5df6b871a00ecb679404050; the LoRA seed mixing from
  ``lib/kv-router/src/protocols.rs`` (``1337 wrapping_add xxh3_64(lora_name)``);
* SGLang: ``python/sglang/srt/mem_cache/hicache_storage.py`` (``get_hash_str``) of
  sgl-project/sglang at commit bb424de23a4659f89cfd97dcad3aa1935a1e1d3e.

How the vectors were made: the small functions below re-derive each scheme the plain way
(a hand-written canonical CBOR encoder of the few types involved instead of cbor2;
token bytes packed one at a time), and the hard-coded hex/int values are what they
printed for the inputs named in each test. The tests check pion.hashing against both,
so a change in either the library or the derivation fails here.
"""
from __future__ import annotations

import hashlib
import struct

import pytest

from pion import hashing as H

xxhash = pytest.importorskip("xxhash")
pytest.importorskip("cbor2")

TOKENS = list(range(1, 41))  # 2 blocks of 16 and an 8-token tail that is not hashed
EDGE = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 7] * 4  # every CBOR int width


# ---- independent derivations

def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | extra]) + struct.pack(fmt, n)
    raise ValueError(n)


def _cbor(x) -> bytes:
    if x is None:
        return b"\xf6"
    if isinstance(x, bytes):
        return _head(2, len(x)) + x
    if isinstance(x, str):
        return _head(3, len(x.encode())) + x.encode()
    if isinstance(x, int):
        return _head(0, x)
    return _head(4, len(x)) + b"".join(_cbor(e) for e in x)


def _vllm(tokens, bs, seed, extra=None):
    parent = hashlib.sha256(_cbor(str(seed))).digest()
    out = []
    for i in range(len(tokens) // bs):
        e = None if extra is None else extra[i]
        parent = hashlib.sha256(_cbor((parent, tuple(tokens[i * bs:(i + 1) * bs]), e))).digest()
        out.append(parent)
    return out


def _dynamo(tokens, bs, seed=1337):
    return [xxhash.xxh3_64_intdigest(b"".join(struct.pack("<I", t) for t in tokens[i * bs:(i + 1) * bs]),
                                     seed=seed) for i in range(len(tokens) // bs)]


def _dynamo_seq(blocks):
    out = []
    for b in blocks:
        out.append(b if not out else
                   xxhash.xxh3_64_intdigest(struct.pack("<Q", out[-1]) + struct.pack("<Q", b), seed=1337))
    return out


def _sglang(tokens, ps, prior=None):
    out = []
    for i in range(len(tokens) // ps):
        h = hashlib.sha256()
        if prior:
            h.update(bytes.fromhex(prior))
        for t in tokens[i * ps:(i + 1) * ps]:
            h.update(struct.pack("<I", t))
        prior = h.hexdigest()
        out.append(prior)
    return out


# ---- vLLM

def test_vllm_none_hash_is_sha256_of_the_cbor_seed_string():
    # CBOR text string "0" is 0x61 0x30.
    assert H.vllm_none_hash("0") == hashlib.sha256(b"\x61\x30").digest()
    assert H.vllm_none_hash("0").hex() == "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
    assert H.vllm_none_hash(0) == H.vllm_none_hash("0")


def test_vllm_block_hashes_golden():
    got = H.vllm_block_hashes(TOKENS, 16, "0")
    assert [h.hex() for h in got] == [
        "202da172482d928bbc42ab25b0151e2b895f13f41002e27b2ceabcfae6d332ea",
        "4a0a393805c6d2f0ed831000d41bb65980336c4c04895d5e26470bbec927f5bf",
    ]
    assert got == _vllm(TOKENS, 16, "0")
    # The first block's CBOR, spelled out: array(3), bytes(32) NONE_HASH, array(16) 1..16, null.
    first = (b"\x83" + b"\x58\x20" + H.vllm_none_hash("0") + b"\x90" + bytes(range(1, 17)) + b"\xf6")
    assert got[0] == hashlib.sha256(first).digest()
    assert [H.vllm_event_hash(h) for h in got] == [3236607068019569386, 2758186210834249151]
    assert H.vllm_event_hash(got[0]) == int.from_bytes(got[0], "big") & (2**64 - 1)


def test_vllm_block_hashes_edges_and_extra_keys():
    assert H.vllm_block_hashes(EDGE, 16, "0") == _vllm(EDGE, 16, "0")
    extra = [("my-lora", "salt")] + [None] * 9
    assert H.vllm_block_hashes(EDGE, 4, 1234, extra) == _vllm(EDGE, 4, "1234", extra)
    assert H.vllm_block_hashes(EDGE, 4, 1234, extra) != H.vllm_block_hashes(EDGE, 4, 1234)
    assert H.vllm_block_hashes(TOKENS[:15], 16, "0") == []
    with pytest.raises(ValueError):
        H.vllm_block_hashes([-1] * 16, 16, "0")
    with pytest.raises(ValueError):
        H.vllm_block_hashes(TOKENS, 0, "0")
    key = H.vllm_offload_key(b"\x01" * 32, 2)
    assert key == b"\x01" * 32 + b"\x00\x00\x00\x02"


# ---- Dynamo

def test_dynamo_hashes_golden():
    blocks = H.dynamo_block_hashes(TOKENS, 16)
    assert blocks == [16863443419780771464, 2287610619914608821] == _dynamo(TOKENS, 16)
    seq = H.dynamo_sequence_hashes(blocks)
    assert seq == [16863443419780771464, 12466389667045779788] == _dynamo_seq(blocks)
    lora = H.dynamo_block_hashes(TOKENS, 16, salt="my-lora")
    assert lora == [4148081000444450790, 2866551892415683476]
    assert lora == _dynamo(TOKENS, 16, (1337 + xxhash.xxh3_64_intdigest(b"my-lora")) % 2**64)
    assert H.dynamo_block_hashes(TOKENS, 16, salt="") == blocks
    assert H.dynamo_block_hashes(TOKENS, 16, salt=1337) == blocks
    assert H.dynamo_block_hashes(EDGE, 4) == _dynamo(EDGE, 4)
    assert H.dynamo_sequence_hashes(_dynamo(EDGE, 4)) == _dynamo_seq(_dynamo(EDGE, 4))
    assert H.dynamo_sequence_hashes([]) == []


# ---- SGLang

def test_sglang_page_keys_golden():
    keys = H.sglang_page_keys(TOKENS, 16)
    assert keys == [
        "77d735ce838418aa151bd96b5b1e78ee63860892e0a95c00fe34178442be9b07",
        "1170426cf2449cebf4d17f087ce5bb43b6a910ce91b3f40922868e913e8ee91d",
    ]
    assert keys == _sglang(TOKENS, 16)
    assert keys[0] == hashlib.sha256(b"".join(struct.pack("<I", t) for t in range(1, 17))).hexdigest()
    # Chaining from a prior: the second page alone, after the first page's key.
    assert H.sglang_page_keys(TOKENS[16:32], 16, prior=keys[0]) == keys[1:]
    assert H.sglang_page_keys(EDGE, 8) == _sglang(EDGE, 8)
    # EAGLE bigram tokens hash each element.
    assert H.sglang_page_keys([(1, 2), (3, 4)], 2) == _sglang([1, 2, 3, 4], 4)
