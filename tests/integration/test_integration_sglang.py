"""pion.integrations.sglang.PionHiCacheStorage against a live pion-server, with a fake
SGLang: the base class, config dataclasses and host memory pool below have the method
names, signatures and fields of SGLang's own, written here from their source:

* ``HiCacheStorage``, ``HiCacheStorageConfig``, ``HiCacheStorageExtraInfo``:
  python/sglang/srt/mem_cache/hicache_storage.py at upstream commit 001067ff;
* how a ``dynamic`` backend is built (required fields, import, ``issubclass`` check,
  ``cls(storage_config, {})``): python/sglang/srt/mem_cache/storage/backend_factory.py
  at 001067ff;
* the host pools' ``get_page_buffer_meta`` / ``get_data_page`` /
  ``get_dummy_flat_data_page`` / ``set_from_flat_data_page`` and their page_first
  buffer shapes (MHA ``(2, size, layer, head, dim)``, MLA ``(size, layer, 1, dim)``):
  python/sglang/srt/mem_cache/pool_host/mha.py (the stored version is at commit
  0047d999; the methods are those HiCache's zero-copy path uses at 001067ff).

Page keys are SGLang's sha256-hex page chain (``get_hash_str``: sha256 over the previous
page's digest bytes, then each token as a little-endian u32), computed by
:func:`page_keys` here. The last test is the proof: process A prefills a 2,048-token
prefix with the reference model and stores its KV as SGLang would (pages of 16 tokens,
page_first host layout); process B (a subprocess) finds it with batch_exists, loads it
with batch_get_v1 and decodes 16 greedy tokens identical to A's.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))


PAGE = 16


# ---------------------------------------------------------------- fake SGLang
@dataclass
class HiCacheStorageConfig:
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    attn_cp_rank: int
    attn_cp_size: int
    is_mla_model: bool
    enable_storage_metrics: bool
    is_page_first_layout: bool
    model_name: Optional[str]
    dp_rank: int = 0
    dp_size: int = 1
    tp_lcm_size: Optional[int] = None
    should_split_heads: bool = False
    extra_config: Optional[dict] = None


@dataclass
class HiCacheStorageExtraInfo:
    prefix_keys: Optional[List[str]] = None
    extra_info: Optional[dict] = None


class HiCacheStorage(ABC):
    """The fake base: SGLang's abstract and overridable methods, same signatures."""

    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        if not hasattr(self, "registered_pools"):
            self.registered_pools = {}
        self.registered_pools[host_pool_name] = host_pool

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None,
                        extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Any:
        raise NotImplementedError()

    def batch_get_v2(self, transfers: List[Any],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> dict:
        raise NotImplementedError()

    def batch_set_v2(self, transfers: List[Any],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> dict:
        raise NotImplementedError()

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        raise NotImplementedError()

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        raise NotImplementedError()

    @abstractmethod
    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> torch.Tensor | None:
        pass

    @abstractmethod
    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[torch.Tensor | None] | int:
        pass

    @abstractmethod
    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        pass

    @abstractmethod
    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        pass

    @abstractmethod
    def exists(self, key: str) -> bool:
        pass

    def batch_exists(self, keys: List[str],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        for i, k in enumerate(keys):
            if not self.exists(k):
                return i
        return len(keys)

    def clear(self) -> None:
        pass

    def get_stats(self):
        return None


def install_fake_sglang() -> None:
    """Makes ``sglang.srt.mem_cache.hicache_storage`` importable with the fakes above."""
    if "sglang.srt.mem_cache.hicache_storage" in sys.modules:
        return
    mod = types.ModuleType("sglang.srt.mem_cache.hicache_storage")
    mod.HiCacheStorage = HiCacheStorage
    mod.HiCacheStorageConfig = HiCacheStorageConfig
    mod.HiCacheStorageExtraInfo = HiCacheStorageExtraInfo
    for name in ("sglang", "sglang.srt", "sglang.srt.mem_cache"):
        pkg = types.ModuleType(name)
        pkg.__path__ = []
        sys.modules.setdefault(name, pkg)
    sys.modules[mod.__name__] = mod


def create_dynamic_backend(storage_config: HiCacheStorageConfig) -> Any:
    """What SGLang's StorageBackendFactory does for ``--hicache-storage-backend dynamic``."""
    cfg = storage_config.extra_config
    for f in ("backend_name", "module_path", "class_name"):
        if f not in cfg:
            raise ValueError(f"Missing required field '{f}' in backend config for 'dynamic' backend")
    module = importlib.import_module(cfg["module_path"])
    cls = getattr(module, cfg["class_name"])
    if not issubclass(cls, HiCacheStorage):
        raise TypeError(f"Backend class {cfg['class_name']} must inherit from HiCacheStorage")
    return cls(storage_config, {})


class FakeMHAHostPool:
    """An MHA host pool: ``kv_buffer`` [2, size, layer, head, dim] (page_first) or
    [2, layer, size, head, dim] (layer_first), with SGLang's page accessors."""

    def __init__(self, size: int, layer_num: int, head_num: int, head_dim: int,
                 dtype=torch.float32, page_size: int = PAGE, layout: str = "page_first"):
        self.size, self.layer_num, self.head_num, self.head_dim = size, layer_num, head_num, head_dim
        self.dtype, self.page_size, self.layout = dtype, page_size, layout
        self.page_num = size // page_size
        if layout == "page_first":
            dims = (2, size, layer_num, head_num, head_dim)
        else:
            dims = (2, layer_num, size, head_num, head_dim)
        self.kv_buffer = torch.zeros(dims, dtype=dtype)
        self.free_slots = list(range(size))

    @property
    def k_buffer(self):
        return self.kv_buffer[0]

    @property
    def v_buffer(self):
        return self.kv_buffer[1]

    def alloc(self, need_size: int) -> Optional[torch.Tensor]:
        if need_size > len(self.free_slots):
            return None
        out, self.free_slots = self.free_slots[:need_size], self.free_slots[need_size:]
        return torch.tensor(out, dtype=torch.int64)

    def get_page_buffer_meta(self, indices):
        assert len(indices) % self.page_size == 0
        itemsize = self.kv_buffer.element_size()
        row = self.layer_num * self.head_num * self.head_dim * itemsize
        v_offset = self.size * row
        base = self.kv_buffer.data_ptr()
        idx = indices.tolist()
        if self.layout != "page_first":
            raise ValueError(f"Unsupported layout: {self.layout}")
        ptrs = []
        for i in range(0, len(idx), self.page_size):
            ptrs += [base + idx[i] * row, base + idx[i] * row + v_offset]
        return ptrs, [row * self.page_size] * len(ptrs)

    def get_data_page(self, index, flat: bool = True) -> torch.Tensor:
        page = self.kv_buffer[:, index:index + self.page_size]
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        return torch.zeros((2, self.layer_num, self.page_size, self.head_num, self.head_dim),
                           dtype=self.dtype).flatten()

    def set_from_flat_data_page(self, index: int, data_page: torch.Tensor) -> None:
        self.kv_buffer[:, index:index + self.page_size] = data_page.reshape(
            2, self.page_size, self.layer_num, self.head_num, self.head_dim)


class FakeMLAHostPool(FakeMHAHostPool):
    """An MLA host pool: one latent buffer ``k_buffer`` [size, layer, 1, dim]."""

    def __init__(self, size: int, layer_num: int, head_dim: int, dtype=torch.float32,
                 page_size: int = PAGE):
        super().__init__(1, 1, 1, 1, dtype, page_size)
        self.size, self.layer_num, self.head_num, self.head_dim = size, layer_num, 1, head_dim
        self.kv_buffer = torch.zeros((size, layer_num, 1, head_dim), dtype=dtype)
        self.free_slots = list(range(size))

    @property
    def k_buffer(self):
        return self.kv_buffer

    def get_page_buffer_meta(self, indices):
        row = self.layer_num * self.head_dim * self.kv_buffer.element_size()
        idx = indices.tolist()
        ptrs = [self.kv_buffer.data_ptr() + idx[i] * row for i in range(0, len(idx), self.page_size)]
        return ptrs, [row * self.page_size] * len(ptrs)


def page_keys(token_ids: List[int], page_size: int = PAGE, prior: Optional[str] = None) -> List[str]:
    """SGLang's page keys: sha256-hex chain, one per full page (written for this test)."""
    out = []
    for i in range(0, len(token_ids) - page_size + 1, page_size):
        h = hashlib.sha256()
        if prior:
            h.update(bytes.fromhex(prior))
        h.update(np.asarray(token_ids[i:i + page_size], dtype="<u4").tobytes())
        prior = h.hexdigest()
        out.append(prior)
    return out


def test_page_keys_chain():
    """The local chain: golden values recomputed by hand from the definition, and, when
    pion.hashing is present, the same keys as pion.hashing.sglang_page_keys."""
    ids = list(range(40))
    first = hashlib.sha256(b"".join(t.to_bytes(4, "little") for t in range(16))).hexdigest()
    second = hashlib.sha256(bytes.fromhex(first) +
                            b"".join(t.to_bytes(4, "little") for t in range(16, 32))).hexdigest()
    assert page_keys(ids) == [first, second]  # the partial third page has no key
    assert page_keys(ids[16:32], prior=first) == [second]
    try:
        from pion.hashing import sglang_page_keys  # type: ignore
    except ImportError:
        return
    assert sglang_page_keys(ids, 16) == [first, second]
    assert sglang_page_keys(ids[16:32], 16, first) == [second]


def storage_config(extra: dict, *, tp_rank=0, tp_size=1, mla=False, page_first=True,
                   model="org/tiny") -> HiCacheStorageConfig:
    return HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1,
                                attn_cp_rank=0, attn_cp_size=1, is_mla_model=mla,
                                enable_storage_metrics=False, is_page_first_layout=page_first,
                                model_name=model, extra_config=dict(extra))


def extra_for(port: int, **over) -> dict:
    cfg = {"backend_name": "pion", "module_path": "pion.integrations.sglang",
           "class_name": "PionHiCacheStorage", "interface_v1": 1,
           "url": f"redis://127.0.0.1:{port}/0", "key_prefix": "test-f32"}
    cfg.update(over)
    return cfg


@pytest.fixture
def make_backend(server):
    install_fake_sglang()
    made = []

    def make(pool=None, **kw):
        extra_over = kw.pop("extra", {})
        b = create_dynamic_backend(storage_config(extra_for(server.port, **extra_over), **kw))
        if pool is not None:
            b.register_mem_pool_host(pool)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def fill_random(pool: FakeMHAHostPool, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2**31, 2**31 - 1, pool.kv_buffer.shape, generator=g, dtype=torch.int32)
    pool.kv_buffer.view(torch.int32).copy_(bits)  # every bit pattern, NaNs included


def tokens(n: int, seed: int = 0) -> List[int]:
    return np.random.default_rng(seed).integers(0, 50000, n).tolist()


# ---------------------------------------------------------------- tests
@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="SGLang is installed")
def test_module_imports_without_sglang():
    code = ("import pion.integrations.sglang as s\n"
            "try:\n    s.PionHiCacheStorage\nexcept ImportError as e:\n    print('lazy', e.name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("lazy sglang")


def test_round_trip_bit_exact_and_value_layout(server, make_backend):
    src = FakeMHAHostPool(8 * PAGE, layer_num=3, head_num=2, head_dim=8)
    fill_random(src, 1)
    a = make_backend(src, tp_rank=1, tp_size=2)
    keys = page_keys(tokens(8 * PAGE))
    assert a.batch_exists(keys) == 0
    assert a.batch_set_v1(keys, torch.arange(8 * PAGE)) == [True] * 8
    r = server.client()
    k0 = f"test-f32|org/tiny|1of2|{keys[0]}".encode()
    assert r.exists(k0) == 1
    # The value is K then V of the page: what SGLang's flat data page holds.
    assert r.get(k0) == src.get_data_page(0).numpy().tobytes()
    # Linked as one chain after the page before.
    assert r.execute_command("KV.BLOCK.INFO", f"test-f32|org/tiny|1of2|{keys[5]}")[1] == \
        f"test-f32|org/tiny|1of2|{keys[4]}".encode()

    dst = FakeMHAHostPool(10 * PAGE, layer_num=3, head_num=2, head_dim=8)
    b = make_backend(dst, tp_rank=1, tp_size=2)
    assert b.batch_exists(keys) == 8
    # Pages land at host slots 2..9 (shuffled page order in the pool is SGLang's business).
    idx = torch.arange(2 * PAGE, 10 * PAGE)
    assert b.batch_get_v1(keys, idx) == [True] * 8
    assert torch.equal(dst.kv_buffer[:, 2 * PAGE:].view(torch.int32),
                       src.kv_buffer.view(torch.int32))
    assert torch.all(dst.kv_buffer[:, :2 * PAGE].view(torch.int32) == 0)
    # The copying interface reads and writes the same values.
    flat = dst.get_dummy_flat_data_page()
    assert b.get(keys[3], flat) is flat
    assert flat.numpy().tobytes() == src.get_data_page(3 * PAGE).numpy().tobytes()
    assert b.set("extra-page", src.get_data_page(PAGE)) is True
    assert b.exists("extra-page") and not b.exists("nope")
    # Another TP rank does not see rank 1's pages.
    assert make_backend(dst, tp_rank=0, tp_size=2).batch_exists(keys) == 0
    stats = b.get_stats()
    assert stats.prefetch_pgs == [8] and stats.backup_pgs == []
    assert b.get_stats().prefetch_pgs == []
    r.close()


def test_partial_hits_and_deletions(server, make_backend):
    src = FakeMHAHostPool(10 * PAGE, layer_num=2, head_num=1, head_dim=16)
    fill_random(src, 2)
    a = make_backend(src)
    keys = page_keys(tokens(10 * PAGE, 3))
    assert a.batch_set_v1(keys[:6], torch.arange(6 * PAGE)) == [True] * 6
    assert a.batch_exists(keys) == 6  # the leading run only
    r = server.client()
    r.delete(f"test-f32|org/tiny|0of1|{keys[2]}")
    assert a.batch_exists(keys) == 2
    # The deletion is heard once, asynchronously (before the count below is read).
    deadline = time.monotonic() + 10
    while a.counters["pages_removed"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.counters["pages_removed"] == 1
    dst = FakeMHAHostPool(10 * PAGE, layer_num=2, head_num=1, head_dim=16)
    b = make_backend(dst)
    got = b.batch_get_v1(keys, torch.arange(10 * PAGE))
    assert got == [True, True, False, True, True, True, False, False, False, False]
    assert torch.equal(dst.kv_buffer[:, :2 * PAGE].view(torch.int32),
                       src.kv_buffer[:, :2 * PAGE].view(torch.int32))
    # Storing again writes only the missing pages (one MATCH BITMAP first).
    assert a.batch_set_v1(keys, torch.arange(10 * PAGE)) == [True] * 10
    assert a.counters["pages_skipped"] == 5
    assert a.batch_exists(keys) == 10
    # A store whose prefix is known chains after it.
    extra = HiCacheStorageExtraInfo(prefix_keys=keys[:3])
    more = page_keys(tokens(2 * PAGE, 4), prior=keys[2])
    assert a.batch_set_v1(more, torch.arange(2 * PAGE), extra) == [True, True]
    assert r.execute_command("KV.BLOCK.INFO", f"test-f32|org/tiny|0of1|{more[0]}")[1] == \
        f"test-f32|org/tiny|0of1|{keys[2]}".encode()
    # Deletions and expiries are heard (keyspace notifications were switched on at start).
    assert set("Egx") <= set(r.config_get("notify-keyspace-events")["notify-keyspace-events"])
    heard = a.counters["pages_removed"]
    r.delete(f"test-f32|org/tiny|0of1|{keys[0]}")
    deadline = time.monotonic() + 10
    while a.counters["pages_removed"] == heard and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.counters["pages_removed"] == heard + 1
    assert a.batch_exists(keys) == 0
    r.close()


def test_evictions_reflected(server, make_backend):
    src = FakeMHAHostPool(64 * PAGE, layer_num=4, head_num=2, head_dim=32)  # 32 KiB pages
    fill_random(src, 5)
    a = make_backend(src, extra={"pin_ms": 0})
    keys = page_keys(tokens(64 * PAGE, 6))
    assert all(a.batch_set_v1(keys[:32], torch.arange(32 * PAGE)))
    assert a.batch_exists(keys[:32]) == 32
    r = server.client()
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(used + 40 * 32768))
    others = page_keys(tokens(64 * PAGE, 7))
    # 64 more pages need room: older pages are evicted (the chain being written never is).
    assert all(a.batch_set_v1(others, torch.arange(64 * PAGE)))
    assert int(r.info("stats")["evicted_keys"]) > 0
    n = a.batch_exists(keys[:32])
    assert n < 32
    # A chain is evicted from its tail: what is left is a leading run.
    left = [r.exists(f"test-f32|org/tiny|0of1|{k}") for k in keys[:32]]
    assert left == [1] * n + [0] * (32 - n)
    deadline = time.monotonic() + 10
    while a.counters["pages_removed"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.counters["pages_removed"] > 0
    r.close()


def test_mla_pages_have_no_tp_part(server, make_backend):
    src = FakeMLAHostPool(4 * PAGE, layer_num=3, head_dim=24)
    fill_random(src, 8)
    a = make_backend(src, mla=True, tp_rank=3, tp_size=4)
    keys = page_keys(tokens(4 * PAGE, 9))
    assert a.batch_set_v1(keys, torch.arange(4 * PAGE)) == [True] * 4
    r = server.client()
    assert r.get(f"test-f32|org/tiny|{keys[1]}") == src.kv_buffer[PAGE:2 * PAGE].numpy().tobytes()
    dst = FakeMLAHostPool(4 * PAGE, layer_num=3, head_dim=24)
    b = make_backend(dst, mla=True, tp_rank=0, tp_size=4)
    assert b.batch_exists(keys) == 4
    assert b.batch_get_v1(keys, torch.arange(4 * PAGE)) == [True] * 4
    assert torch.equal(dst.kv_buffer.view(torch.int32), src.kv_buffer.view(torch.int32))
    r.close()


def test_layout_refusal(server, make_backend):
    with pytest.raises(ValueError, match="--hicache-mem-layout page_first"):
        make_backend(page_first=False)
    b = make_backend()
    lf = FakeMHAHostPool(2 * PAGE, 1, 1, 8, layout="layer_first")
    with pytest.raises(ValueError, match="needs the page_first host layout \\(got 'layer_first'\\)"):
        b.register_mem_pool_host(lf)
    with pytest.raises(ValueError, match="needs 'key_prefix'"):
        make_backend(extra={"key_prefix": ""})
    with pytest.raises(ValueError, match="may not contain '|'"):
        make_backend(extra={"key_prefix": "a|b"})
    with pytest.raises(ValueError, match="pin_ms must be in 0..600000"):
        make_backend(extra={"pin_ms": 600001})


def test_clear_removes_only_this_prefix(server, make_backend):
    src = FakeMHAHostPool(3 * PAGE, 1, 1, 8)
    a = make_backend(src)
    other = make_backend(src, extra={"key_prefix": "test-f3"})  # a prefix of ours, but not ours
    keys = page_keys(tokens(3 * PAGE, 10))
    assert all(a.batch_set_v1(keys, torch.arange(3 * PAGE)))
    assert all(other.batch_set_v1(keys, torch.arange(3 * PAGE)))
    r = server.client()
    r.set("unrelated", "1")
    a.clear()
    assert a.batch_exists(keys) == 0
    assert other.batch_exists(keys) == 3
    assert r.get("unrelated") == b"1"
    r.close()


def test_what_pion_shows(server, make_backend):
    """What docs/integrations/sglang.md says an operator sees in pion."""
    src = FakeMHAHostPool(4 * PAGE, 2, 2, 8)
    fill_random(src, 13)
    a = make_backend(src)
    keys = page_keys(tokens(4 * PAGE, 14))
    assert all(a.batch_set_v1(keys, torch.arange(4 * PAGE)))
    r = server.client()
    assert r.info("keyspace")["db0"]["keys"] == 4
    hits = int(r.info("stats")["keyspace_hits"])
    assert a.batch_exists(keys) == 4
    assert int(r.info("pion")["pinned_keys"]) == 4  # pinned until loaded
    assert a.batch_get_v1(keys, torch.arange(4 * PAGE)) == [True] * 4
    assert int(r.info("stats")["keyspace_hits"]) == hits + 4
    pion = r.info("pion")
    assert int(pion["pinned_keys"]) == 0 and int(pion["leases"]) == 0
    cmds = r.info("commandstats")
    for c in ("kv.block.match", "kv.block.chain", "get", "kv.block.unpin"):
        assert f"cmdstat_{c}" in cmds, c
    assert any(c["name"] == "sglang-hicache-tp0" for c in r.client_list())
    info = r.execute_command("KV.BLOCK.INFO", f"test-f32|org/tiny|0of1|{keys[1]}")
    assert info[0] == b"parent" and info[1] == f"test-f32|org/tiny|0of1|{keys[0]}".encode()
    assert info[6:8] == [b"tokens", PAGE]
    r.close()


def test_threads_and_a_lost_server(server, make_backend):
    """SGLang calls from three threads at once (prefetch query, prefetch IO, backup): each
    gets its own connection. A lost server reads as misses and failures, never raises."""
    src = FakeMHAHostPool(64 * PAGE, 2, 2, 16)  # pages 0..31 are stored, 32..63 loaded into
    fill_random(src, 15)
    src.kv_buffer[:, 32 * PAGE:] = 0
    a = make_backend(src)
    seqs = [page_keys(tokens(8 * PAGE, 100 + i)) for i in range(4)]
    errors: list = []

    def work(i: int) -> None:
        try:
            here = torch.arange(i * 8 * PAGE, (i + 1) * 8 * PAGE)
            there = here + 32 * PAGE
            for _ in range(5):
                assert all(a.batch_set_v1(seqs[i], here))
                assert a.batch_exists(seqs[i]) == 8
                assert a.batch_get_v1(seqs[i], there) == [True] * 8
            assert torch.equal(src.kv_buffer[:, there].view(torch.int32),
                               src.kv_buffer[:, here].view(torch.int32))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(a._conns) >= 4
    dst = FakeMHAHostPool(8 * PAGE, 2, 2, 16)
    b = make_backend(dst)
    assert b.batch_get_v1(seqs[2], torch.arange(8 * PAGE)) == [True] * 8
    assert torch.equal(dst.kv_buffer.view(torch.int32),
                       src.kv_buffer[:, 16 * PAGE:24 * PAGE].view(torch.int32))
    server.stop()
    assert b.batch_exists(seqs[0]) == 0
    assert b.batch_get_v1(seqs[0], torch.arange(8 * PAGE)) == [False] * 8
    assert b.batch_set_v1(seqs[0], torch.arange(8 * PAGE)) == [False] * 8
    assert not b.exists(seqs[0][0])
    assert b.counters["errors"] >= 3


DOC = ROOT / "docs" / "integrations" / "sglang.md"


def doc_extra_config() -> dict:
    text = DOC.read_text()
    m = re.search(r"--hicache-storage-backend-extra-config\s+'(\{.*?\})'", text, re.S)
    assert m, "the doc shows the extra config as a JSON string on the command line"
    return json.loads(m.group(1))


def test_doc_command_line_builds_the_backend(server, make_backend):
    text = DOC.read_text()
    for flag in ("--enable-hierarchical-cache", "--hicache-mem-layout page_first",
                 "--hicache-storage-backend dynamic"):
        assert flag in text
    cfg = doc_extra_config()
    assert cfg["module_path"] == "pion.integrations.sglang"
    assert cfg["class_name"] == "PionHiCacheStorage" and cfg["interface_v1"] == 1
    cfg["url"] = f"redis://127.0.0.1:{server.port}/0"  # the doc's host is not this test's
    install_fake_sglang()
    b = create_dynamic_backend(storage_config(cfg, model="meta-llama/Llama-3.1-8B-Instruct"))
    try:
        pool = FakeMHAHostPool(2 * PAGE, 2, 2, 8)
        fill_random(pool, 11)
        b.register_mem_pool_host(pool)
        keys = page_keys(tokens(2 * PAGE, 12))
        assert b.batch_set_v1(keys, torch.arange(2 * PAGE)) == [True, True]
        assert b.batch_exists(keys) == 2
        r = server.client()
        want = f"{cfg['key_prefix']}|meta-llama/Llama-3.1-8B-Instruct|0of1|{keys[0]}"
        assert r.exists(want) == 1
        r.close()
    finally:
        b.close()


# ---------------------------------------------------------------- the proof
PREFIX, SUFFIX, DECODE = 2048, 7, 16


def _model():
    from pion.reference_model import ModelConfig, ReferenceDecoder
    cfg = ModelConfig(vocab_size=1024, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2,
                      head_dim=32, ffn_dim=256)
    return ReferenceDecoder(cfg, num_threads=1)


def _prompt() -> List[int]:
    return np.random.default_rng(2048).integers(0, 1024, PREFIX + SUFFIX).tolist()


def _host_pool(model) -> FakeMHAHostPool:
    c = model.config
    return FakeMHAHostPool(PREFIX, c.n_layers, c.n_kv_heads, c.head_dim)


def _past_from_pool(pool: FakeMHAHostPool, idx: torch.Tensor):
    # kv_buffer[k|v, token, layer, head, dim] -> per layer [1, head, token, dim]
    kv = pool.kv_buffer[:, idx]
    return tuple((kv[0, :, li].permute(1, 0, 2).unsqueeze(0).contiguous(),
                  kv[1, :, li].permute(1, 0, 2).unsqueeze(0).contiguous())
                 for li in range(pool.layer_num))


def role_b(port: int) -> dict:
    """Process B: batch_exists -> batch_get_v1 -> decode; then a cold prefill to compare."""
    install_fake_sglang()
    model = _model()
    ids = _prompt()
    pool = _host_pool(model)
    t0 = time.perf_counter()
    b = create_dynamic_backend(storage_config(extra_for(port), model=model.model_id))
    b.register_mem_pool_host(pool)
    keys = page_keys(ids[:PREFIX])
    hit = b.batch_exists(keys)
    idx = pool.alloc(hit * PAGE)
    loaded = b.batch_get_v1(keys[:hit], idx)
    past = _past_from_pool(pool, idx)
    first = model.generate(ids[PREFIX:], past, n=1)
    ttft = time.perf_counter() - t0
    out = model.generate(ids[PREFIX:], past, n=DECODE)
    t1 = time.perf_counter()
    cold_past = model.prefill_kv(ids[:PREFIX])
    cold_first = model.generate(ids[PREFIX:], cold_past, n=1)
    cold = time.perf_counter() - t1
    b.close()
    return {"hit": hit, "loaded": sum(loaded), "tokens": out[0].tolist(),
            "first": int(first[0, 0]), "cold_first": int(cold_first[0, 0]),
            "ttft_s": ttft, "cold_ttft_s": cold}


def test_two_processes_share_a_prefix(server, make_backend):
    model = _model()
    ids = _prompt()
    past = model.prefill_kv(ids[:PREFIX])
    want = model.generate(ids[PREFIX:], past, n=DECODE)[0].tolist()
    # A's HiCache: device KV backed up into page_first host pages, then to pion.
    pool = _host_pool(model)
    idx = pool.alloc(PREFIX)
    for li, (k, v) in enumerate(past):
        pool.kv_buffer[0, idx, li] = k[0].permute(1, 0, 2)
        pool.kv_buffer[1, idx, li] = v[0].permute(1, 0, 2)
    keys = page_keys(ids[:PREFIX])
    assert len(keys) == PREFIX // PAGE
    a = make_backend(pool, model=model.model_id)
    assert all(a.batch_set_v1(keys, idx, HiCacheStorageExtraInfo()))

    out = subprocess.run([sys.executable, str(Path(__file__)), "--role-b", str(server.port)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["hit"] == PREFIX // PAGE and res["loaded"] == PREFIX // PAGE
    assert res["tokens"] == want
    assert res["first"] == res["cold_first"] == want[0]
    print(f"\nprocess B: time to first token {res['ttft_s'] * 1e3:.1f} ms through "
          f"PionHiCacheStorage ({PREFIX} tokens, {PREFIX // PAGE} pages) vs "
          f"{res['cold_ttft_s'] * 1e3:.1f} ms cold prefill")


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--role-b":
    print(json.dumps(role_b(int(sys.argv[2]))))
