"""pion.integrations.lmcache against a live server, with LMCache's interfaces faked.

LMCache is not installed here. The fakes below have the method names and signatures of
the real ones, read from LMCache/LMCache:

* ``RemoteConnector``: lmcache/v1/storage_backend/connector/base_connector.py at
  78f6e7eee2ce3cc0c03ece597a9a2ec1b5580d9d (the six abstract methods and the optional
  capability pairs of that commit).
* ``ConnectorAdapter``, ``ConnectorContext``, ``extract_plugin_type`` and the plugin
  loading of ``ConnectorManager._remote_adapters_plugin_launcher``:
  lmcache/v1/storage_backend/connector/__init__.py (the version whose ConnectorContext
  has ``plugin_name``; plugin URLs are ``plugin://<name>``, per
  docs/source/developer_guide/extending_lmcache/remote_storage_plugins.rst).
* ``MemoryFormat`` (an Enum with integer values), ``MemoryObj`` (``byte_array``,
  ``get_shape``, ``get_dtype``, ``get_memory_format``, ``get_size``, ``ref_count_down``):
  lmcache/v1/memory_management.py; ``CacheEngineKey.to_string``: lmcache/utils.py.
* The native plugin loader (``_create_native_plugin_l2_adapter``: import module, get the
  class, ``cls(**adapter_params)``, check the six required methods) and the way
  ``NativeConnectorL2Adapter`` uses the connector (poll the eventfd, never read it, call
  ``drain_completions``, completions ``(future_id, ok, error, result_bools)``):
  lmcache/v1/distributed/l2_adapters/native_plugin_l2_adapter.py and
  native_connector_l2_adapter.py at 99e466181702258557ff3ed81a252f169780864b.
"""
from __future__ import annotations

import abc
import asyncio
import enum
import importlib
import json
import re
import select
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest
import torch
import yaml

from pion.integrations import lmcache as L
from pion.testing import poll

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations" / "lmcache.md"


# ----------------------------------------------------------------------------- fakes

class MemoryFormat(enum.Enum):
    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_2TD = 3
    KV_MLA_FMT = 4


class MemoryObj:
    """A CPU memory object over a torch tensor, as LMCache's TensorMemoryObj exposes it."""

    def __init__(self, shape, dtype, fmt):
        self.tensor = torch.zeros(tuple(shape), dtype=dtype)
        self.fmt = fmt
        self.refs = 1

    @property
    def byte_array(self) -> memoryview:
        return memoryview(self.tensor.reshape(-1).view(torch.uint8).numpy())

    def get_shape(self) -> torch.Size:
        return self.tensor.shape

    def get_dtype(self) -> torch.dtype:
        return self.tensor.dtype

    def get_memory_format(self) -> MemoryFormat:
        return self.fmt

    def get_size(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    def ref_count_down(self) -> None:
        self.refs -= 1


class LocalCPUBackend:
    def __init__(self):
        self.allocated: list[MemoryObj] = []

    def allocate(self, shape, dtype, fmt):
        obj = MemoryObj(shape, dtype, fmt)
        self.allocated.append(obj)
        return obj


@dataclass(frozen=True)
class CacheEngineKey:
    fmt: str
    model_name: str
    world_size: int
    worker_id: int
    chunk_hash: int

    def to_string(self) -> str:
        return (f"{self.fmt}@{self.model_name}@{self.world_size}"
                f"@{self.worker_id}@{self.chunk_hash:x}")


class RemoteConnector(metaclass=abc.ABCMeta):
    """base_connector.py at 78f6e7ee: the abstract methods and the optional pairs."""

    @abc.abstractmethod
    async def exists(self, key: CacheEngineKey) -> bool: ...

    @abc.abstractmethod
    def exists_sync(self, key: CacheEngineKey) -> bool: ...

    @abc.abstractmethod
    async def get(self, key: CacheEngineKey) -> Optional[MemoryObj]: ...

    @abc.abstractmethod
    async def put(self, key: CacheEngineKey, memory_obj: MemoryObj): ...

    @abc.abstractmethod
    async def list(self) -> List[str]: ...

    @abc.abstractmethod
    async def close(self): ...

    def support_ping(self) -> bool:
        return False

    async def ping(self) -> int:
        raise NotImplementedError

    def support_batched_get(self) -> bool:
        return False

    async def batched_get(self, keys: List[CacheEngineKey]) -> List[Optional[MemoryObj]]:
        raise NotImplementedError

    def support_batched_put(self) -> bool:
        return False

    async def batched_put(self, keys: List[CacheEngineKey], memory_objs: List[MemoryObj]):
        raise NotImplementedError


class ConnectorAdapter(abc.ABC):
    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        return self.schema != "" and url.startswith(self.schema)

    @abc.abstractmethod
    def create_connector(self, context: "ConnectorContext") -> RemoteConnector: ...


class ConnectorContext:
    def __init__(self, url, loop, local_cpu_backend, config, metadata, plugin_name=None):
        self.url = url
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name


def extract_plugin_type(plugin_name: str) -> str:
    return plugin_name.split(".", 1)[0]


def load_remote_plugins(config) -> list:
    """What ConnectorManager._remote_adapters_plugin_launcher does with the config."""
    adapters = []
    for name in config.remote_storage_plugins or []:
        module = importlib.import_module(
            config.extra_config[f"remote_storage_plugin.{name}.module_path"])
        cls = getattr(module, config.extra_config[f"remote_storage_plugin.{name}.class_name"])
        adapter = cls()
        assert isinstance(adapter, ConnectorAdapter)
        adapters.append(adapter)
    return adapters


def load_native_plugin(d: dict):
    """What _create_native_plugin_l2_adapter does before wrapping the connector."""
    assert d["type"] == "native_plugin"
    module = importlib.import_module(d["module_path"])
    client = getattr(module, d["class_name"])(**d.get("adapter_params", {}))
    for m in ("event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists",
              "drain_completions", "close"):
        assert callable(getattr(client, m, None)), m
    assert callable(getattr(client, "submit_batch_delete", None))
    return client


@pytest.fixture
def fake_lmcache(monkeypatch):
    mods = {}
    for name in ("lmcache", "lmcache.v1", "lmcache.v1.storage_backend",
                 "lmcache.v1.storage_backend.connector",
                 "lmcache.v1.storage_backend.connector.base_connector",
                 "lmcache.v1.memory_management", "lmcache.utils"):
        mods[name] = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, mods[name])
    conn = mods["lmcache.v1.storage_backend.connector"]
    conn.ConnectorAdapter = ConnectorAdapter
    conn.ConnectorContext = ConnectorContext
    conn.extract_plugin_type = extract_plugin_type
    mods["lmcache.v1.storage_backend.connector.base_connector"].RemoteConnector = RemoteConnector
    mods["lmcache.v1.memory_management"].MemoryFormat = MemoryFormat
    mods["lmcache.v1.memory_management"].MemoryObj = MemoryObj
    mods["lmcache.utils"].CacheEngineKey = CacheEngineKey
    L._forget_engine_classes()
    yield mods
    L._forget_engine_classes()


# ----------------------------------------------------------------------------- helpers

def _url(server) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def wait_completions(conn, want: int, timeout: float = 20.0) -> dict:
    """Polls the eventfd as NativeConnectorL2Adapter's demux thread does (never reads it)
    and drains until ``want`` completions are in."""
    poller = select.poll()
    poller.register(conn.event_fd(), select.POLLIN)
    out: dict = {}
    deadline = time.monotonic() + timeout
    while len(out) < want:
        assert time.monotonic() < deadline, f"only {len(out)} of {want} completions"
        if poller.poll(500):
            for fid, ok, error, bools in conn.drain_completions():
                out[fid] = (ok, error, bools)
    return out


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def doc_snippets(lang: str) -> list[str]:
    return re.findall(r"```" + lang + r"\n(.*?)```", DOC.read_text(), re.S)


# ----------------------------------------------------------------------------- native plugin

def test_object_key_string_matches_lmcache():
    h = bytes(range(32))
    assert L.object_key_string("m/x", 3, h) == "m/x@00000003@" + h.hex()
    assert L.object_key_string("m", 0x1a, b"\xab", "salt") == "m@0000001a@ab@salt"


def test_native_round_trip_partial_batches_exists_delete(server, r):
    c = L.PionNativeConnector(url=_url(server), num_workers=3, depth=4)
    try:
        rng = np.random.default_rng(5)
        keys = [L.object_key_string("model", 0, bytes([i]) * 16) for i in range(10)]
        src = [rng.integers(0, 256, 4096 + 64 * i, dtype=np.uint8) for i in range(10)]
        fid = c.submit_batch_set(keys, [memoryview(a) for a in src])
        done = wait_completions(c, 1)
        assert done[fid] == (True, "", [True] * 10)
        assert r.get(keys[3]) == src[3].tobytes()

        ex = c.submit_batch_exists(keys[:4] + ["model@00000000@missing"] + keys[4:6])
        assert wait_completions(c, 1)[ex] == (True, "", [True] * 4 + [False, True, True])

        dst = [np.zeros_like(a) for a in src] + [np.zeros(100, dtype=np.uint8),
                                                 np.zeros(4096, dtype=np.uint8)]
        g = c.submit_batch_get(keys + ["model@00000000@missing", keys[1]],
                               [memoryview(a) for a in dst])
        ok, err, bools = wait_completions(c, 1)[g]
        # a missing key and a value of another size are per-key misses, not errors
        assert ok and err == "" and bools == [True] * 10 + [False, False]
        for a, b in zip(src, dst):
            assert np.array_equal(a, b)  # bit exact

        d = c.submit_batch_delete([keys[0], "model@00000000@missing", keys[9]])
        assert wait_completions(c, 1)[d] == (True, "", [True, False, True])
        assert r.exists(keys[0], keys[9]) == 0

        empty = c.submit_batch_exists([])
        assert wait_completions(c, 1)[empty] == (True, "", [])
        with pytest.raises(ValueError):
            c.submit_batch_get(keys[:2], [memoryview(dst[0])])
    finally:
        c.close()
        c.close()


def test_native_many_batches_in_flight(server):
    c = L.PionNativeConnector(url=_url(server), num_workers=4, key_prefix="t|")
    try:
        bufs = {}
        fids = []
        for b in range(20):
            ks = [f"m@00000000@{b:02x}{i:02x}" for i in range(8)]
            vals = [np.full(1024, b * 8 + i, dtype=np.uint8) for i in range(8)]
            bufs[b] = (ks, vals)
            fids.append(c.submit_batch_set(ks, vals))
        assert len(set(fids)) == 20
        done = wait_completions(c, 20)
        assert all(done[f][0] for f in fids)
        outs = {b: [np.zeros(1024, dtype=np.uint8) for _ in range(8)] for b in bufs}
        gets = {c.submit_batch_get(bufs[b][0], outs[b]): b for b in bufs}
        done = wait_completions(c, 20)
        for f, b in gets.items():
            assert done[f] == (True, "", [True] * 8)
            assert all(np.array_equal(x, y) for x, y in zip(outs[b], bufs[b][1]))
    finally:
        c.close()


def test_native_ctypes_byte_arrays(server):
    """LMCache hands MemoryObj.byte_array: a ctypes-backed memoryview, format '<B'."""
    import ctypes
    c = L.PionNativeConnector(url=_url(server), num_workers=2)
    try:
        src = (ctypes.c_ubyte * 3000)(*[i % 251 for i in range(3000)])
        dst = (ctypes.c_ubyte * 3000)()
        assert memoryview(src).format == "<B"
        f = c.submit_batch_set(["m@00000000@cc"], [memoryview(src)])
        assert wait_completions(c, 1)[f][0]
        f = c.submit_batch_get(["m@00000000@cc"], [memoryview(dst)])
        assert wait_completions(c, 1)[f][2] == [True]
        assert bytes(dst) == bytes(src)
    finally:
        c.close()


def test_native_eventfd_readable_until_drained(server):
    c = L.PionNativeConnector(url=_url(server), num_workers=2)
    try:
        fd = c.event_fd()
        assert not readable(fd)
        assert c.drain_completions() == []
        fid = c.submit_batch_exists(["nothing"])
        assert select.select([fd], [], [], 20)[0] == [fd]  # becomes readable on completion
        assert readable(fd)  # and stays so: LMCache polls, never reads
        got = c.drain_completions()
        assert got == [(fid, True, "", [False])]
        assert not readable(fd)  # cleared by drain_completions
        assert c.drain_completions() == []
    finally:
        c.close()


def test_native_server_gone_completes_with_error(server_factory):
    s = server_factory()
    c = L.PionNativeConnector(url=_url(s), num_workers=2, listen_removals=False,
                              socket_timeout=5)
    try:
        s.stop()
        fid = c.submit_batch_set(["a", "b", "c"], [b"1", b"2", b"3"])
        ok, err, bools = wait_completions(c, 1)[fid]
        assert not ok and err and bools == [False] * 3
    finally:
        c.close()


def test_native_hears_evictions(server_factory):
    s = server_factory(["--maxmemory", "8mb"])
    c = L.PionNativeConnector(url=_url(s), num_workers=2, key_prefix="ev|")
    try:
        assert c.removals is not None and c.removals.listener is not None
        val = np.ones(256 * 1024, dtype=np.uint8)
        keys = [f"m@00000000@{i:04x}" for i in range(80)]  # 20 MiB through 8 MiB
        fids = [c.submit_batch_set(keys[i:i + 8], [val] * 8) for i in range(0, 80, 8)]
        done = wait_completions(c, len(fids))
        assert all(done[f][0] for f in fids)
        heard: list = []

        def hear(what):
            heard.extend(c.take_removals())
            return what(heard)
        assert poll(lambda: hear(lambda h: any(ev == "evicted" for _, ev in h)), 20), \
            "no eviction heard"
        evicted = [k for k, ev in heard if ev == "evicted"]
        assert all(k in keys for k in evicted)  # the key as LMCache named it, no prefix
        d = c.submit_batch_delete([keys[-1]])
        assert wait_completions(c, 1)[d][2] == [True]
        assert poll(lambda: hear(lambda h: (keys[-1], "del") in h), 20), "deletion not heard"
    finally:
        c.close()


# ----------------------------------------------------------------------------- remote plugin

@dataclass
class EngineConfig:
    remote_storage_plugins: list
    extra_config: dict


def _remote(server, fake_lmcache, **settings):
    extra = {"remote_storage_plugin.pion.module_path": "pion.integrations.lmcache",
             "remote_storage_plugin.pion.class_name": "PionConnectorAdapter",
             "remote_storage_plugin.pion.url": _url(server)}
    extra.update({f"remote_storage_plugin.pion.{k}": v for k, v in settings.items()})
    config = EngineConfig(["pion"], extra)
    (adapter,) = load_remote_plugins(config)
    assert adapter.can_parse("plugin://pion") and adapter.can_parse("plugin://pion.a")
    assert not adapter.can_parse("plugin://fs") and not adapter.can_parse("redis://x:1")
    backend = LocalCPUBackend()
    loop = asyncio.new_event_loop()
    ctx = ConnectorContext("plugin://pion", loop, backend, config, None, "pion")
    conn = adapter.create_connector(ctx)
    assert isinstance(conn, RemoteConnector)
    return conn, backend, loop


def _chunk(seed: int, tokens: int = 256, dtype=torch.bfloat16) -> MemoryObj:
    obj = MemoryObj((2, 4, tokens, 128), dtype, MemoryFormat.KV_2LTD)
    g = torch.Generator().manual_seed(seed)
    obj.tensor.copy_(torch.randn(obj.tensor.shape, generator=g).to(dtype))
    return obj


def test_module_imports_without_lmcache():
    code = ("import sys; import pion.integrations.lmcache as m; "
            "assert 'lmcache' not in sys.modules; "
            "assert callable(m.PionNativeConnector)\n"
            "try:\n    m.PionConnectorAdapter\nexcept ImportError:\n    print('lazy')")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "python")}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "lazy"


def test_chunk_header_round_trip():
    h = L.encode_chunk_header(1 << 20, torch.Size([2, 32, 256, 1024]), torch.float8_e4m3fn
                              if hasattr(torch, "float8_e4m3fn") else torch.bfloat16,
                              MemoryFormat.KV_2LTD)
    assert len(h) == L.HEADER_SIZE
    length, shape, dtype, fmt = L.decode_chunk_header(h)
    assert (length, shape, fmt) == (1 << 20, (2, 32, 256, 1024), 1)
    assert getattr(torch, dtype) in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None))
    with pytest.raises(ValueError):
        L.decode_chunk_header(b"X" * L.HEADER_SIZE)


def test_remote_round_trip_one_key_per_chunk(server, r, fake_lmcache):
    conn, backend, loop = _remote(server, fake_lmcache, key_prefix="lmc|", ttl_s=600)
    try:
        keys = [CacheEngineKey("vllm", "m", 2, 1, 0xabc0 + i) for i in range(6)]
        objs = [_chunk(i) for i in range(5)] + [_chunk(5, tokens=100)]  # last one partial
        loop.run_until_complete(conn.batched_put(keys[:5], objs[:5]))
        loop.run_until_complete(conn.put(keys[5], objs[5]))
        # one key per chunk, metadata inside
        stored = sorted(r.keys("lmc|*"))
        assert stored == sorted(b"lmc|" + k.to_string().encode() for k in keys)
        raw = r.get(b"lmc|" + keys[5].to_string().encode())
        assert len(raw) == L.HEADER_SIZE + objs[5].get_size()
        assert 0 < r.pttl(b"lmc|" + keys[0].to_string().encode()) <= 600000

        assert loop.run_until_complete(conn.exists(keys[0]))
        assert conn.exists_sync(keys[5])
        missing = CacheEngineKey("vllm", "m", 2, 1, 0xdead)
        assert not conn.exists_sync(missing)

        got = loop.run_until_complete(conn.batched_get(keys[:3] + [missing] + keys[3:]))
        assert got[3] is None
        for want, have in zip(objs, got[:3] + got[4:]):
            assert have.get_shape() == want.get_shape()
            assert have.get_dtype() == want.get_dtype()
            assert have.get_memory_format() is MemoryFormat.KV_2LTD
            assert torch.equal(have.tensor.view(torch.int16), want.tensor.view(torch.int16))
        one = loop.run_until_complete(conn.get(keys[5]))
        assert one.get_shape() == torch.Size([2, 4, 100, 128])
        assert loop.run_until_complete(conn.get(missing)) is None

        assert conn.batched_contains(keys[:2] + [missing] + keys[2:]) == 2  # as RemoteBackend
        assert conn.batched_contains(keys[:2] + [missing] + keys[2:], True) == [
            True, True] + [False] * 5
        assert conn.batched_contains(keys[:2] + [missing] + keys[2:],
                                     stop_after_first_not_exits=False) == [
            True, True, False, True, True, True, True]
        assert loop.run_until_complete(
            conn.batched_async_contains("req-1", keys[:4] + [missing] + keys[4:])) == 4
        prefix = loop.run_until_complete(
            conn.batched_get_non_blocking("req-1", keys[:2] + [missing] + keys[2:4]))
        assert len(prefix) == 2
        assert loop.run_until_complete(conn.ping()) == 0
        listed = loop.run_until_complete(conn.list())
        assert sorted(listed) == sorted(k.to_string() for k in keys)
        assert conn.remove_sync(keys[0]) and not conn.remove_sync(keys[0])
        assert conn.support_batched_get() and conn.support_batched_put()
        assert conn.support_batched_contains() and conn.support_batched_async_contains()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


def test_remote_value_that_is_no_chunk_is_a_miss(server, r, fake_lmcache):
    conn, backend, loop = _remote(server, fake_lmcache)
    try:
        key = CacheEngineKey("vllm", "m", 1, 0, 7)
        r.set(key.to_string(), b"Z" * 500)  # another writer's value
        assert loop.run_until_complete(conn.get(key)) is None
        r.set(key.to_string(), b"tiny")
        assert loop.run_until_complete(conn.get(key)) is None
        assert backend.allocated == []
        assert r.ping()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


def test_remote_hears_removals(server, r, fake_lmcache):
    conn, backend, loop = _remote(server, fake_lmcache, key_prefix="p|")
    try:
        key = CacheEngineKey("vllm", "m", 1, 0, 9)
        loop.run_until_complete(conn.put(key, _chunk(1, tokens=16)))
        r.delete(b"p|" + key.to_string().encode())
        assert poll(conn.take_removals, 20) == [(key.to_string(), "del")]
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


# ----------------------------------------------------------------------------- the doc

def test_doc_snippets_build_working_connectors(server, r, fake_lmcache):
    url = _url(server)
    # native_plugin: the JSON block, and the same JSON inside the command line
    (block,) = [s for s in doc_snippets("json") if '"native_plugin"' in s]
    cfg = json.loads(block)
    assert cfg["adapter_params"]["url"].startswith("redis://")
    (cmd,) = [s for s in doc_snippets("sh") if "--l2-adapter" in s]
    inline = json.loads(re.search(r"--l2-adapter '(.*?)'", cmd, re.S).group(1))
    assert {k: inline[k] for k in ("type", "module_path", "class_name")} == {
        k: cfg[k] for k in ("type", "module_path", "class_name")}
    cfg["adapter_params"]["url"] = url
    native = load_native_plugin(cfg)
    try:
        key = L.object_key_string("doc-model", 0, b"\x01" * 32)
        src = np.arange(8192, dtype=np.uint8)
        dst = np.zeros_like(src)
        f1 = native.submit_batch_set([key], [memoryview(src)])
        assert wait_completions(native, 1)[f1][0]
        f2 = native.submit_batch_exists([key])
        f3 = native.submit_batch_get([key], [memoryview(dst)])
        done = wait_completions(native, 2)
        assert done[f2][2] == [True] and done[f3][2] == [True]
        assert np.array_equal(src, dst)
    finally:
        native.close()

    # remote_storage_plugins: the YAML block, loaded as LMCache's plugin launcher does
    (block,) = [s for s in doc_snippets("yaml") if "remote_storage_plugins" in s]
    y = yaml.safe_load(block)
    y["extra_config"]["remote_storage_plugin.pion.url"] = url
    config = EngineConfig(y["remote_storage_plugins"], y["extra_config"])
    (adapter,) = load_remote_plugins(config)
    name = y["remote_storage_plugins"][0]
    assert adapter.can_parse(f"plugin://{name}")
    loop = asyncio.new_event_loop()
    conn = adapter.create_connector(ConnectorContext(f"plugin://{name}", loop,
                                                     LocalCPUBackend(), config, None, name))
    try:
        key = CacheEngineKey("vllm", "doc-model", 1, 0, 0x1234)
        obj = _chunk(3, tokens=y["chunk_size"])
        loop.run_until_complete(conn.batched_put([key], [obj]))
        assert 0 < r.ttl(key.to_string()) <= y["extra_config"]["remote_storage_plugin.pion.ttl_s"]
        assert conn.batched_contains([key]) == 1
        (back,) = loop.run_until_complete(conn.batched_get([key]))
        assert torch.equal(back.tensor.view(torch.int16), obj.tensor.view(torch.int16))
    finally:
        loop.run_until_complete(conn.close())
        loop.close()

    # what the doc says INFO shows
    doc = DOC.read_text()
    stats = r.info("commandstats")
    for name in ("cmdstat_set", "cmdstat_get", "cmdstat_kv.block.match", "cmdstat_subscribe"):
        assert f"`{name}`" in doc and name in stats, name
    assert "notify-keyspace-events Egxe" in doc


# ----------------------------------------------------------------------------- proof

PROOF_CFG = dict(vocab_size=8000, d_model=256, n_layers=4, n_heads=4, n_kv_heads=2,
                 head_dim=64, ffn_dim=688, seed=7)
CHUNK = 256  # LMCache's default chunk_size
PREFIX = 2048
DECODE = 16

# Process B: look the prefix's chunks up, load them through the connector, decode.
PROCESS_B = r'''
import hashlib, json, select, sys, time
import numpy as np, torch
from pion.integrations.lmcache import PionNativeConnector, object_key_string
from pion.reference_model import ModelConfig, ReferenceDecoder

args = json.loads(sys.argv[1])
model = ReferenceDecoder(ModelConfig(**args["cfg"]), num_threads=1)
c = model.config
prefix, tail, chunk = args["prefix"], args["tail"], args["chunk"]

def chunk_keys(tokens):
    keys, parent = [], b""
    for i in range(0, len(tokens) - len(tokens) % chunk, chunk):
        parent = hashlib.sha256(parent + np.asarray(tokens[i:i + chunk], "<i8").tobytes()).digest()
        keys.append(object_key_string(c.model_id, 0, parent))
    return keys

def wait(conn, fid):
    p = select.poll(); p.register(conn.event_fd(), select.POLLIN)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll(500):
            for f, ok, err, bools in conn.drain_completions():
                if f == fid:
                    return ok, err, bools
    raise SystemExit("no completion")

conn = PionNativeConnector(url=args["url"], num_workers=4, listen_removals=False)
t0 = time.perf_counter()
keys = chunk_keys(prefix)
ok, err, found = wait(conn, conn.submit_batch_exists(keys))
hit = found.index(False) if False in found else len(found)
bufs = [torch.empty(2, c.n_layers, chunk, c.kv_dim) for _ in range(hit)]
ok, err, loaded = wait(conn, conn.submit_batch_get(keys[:hit], [b.numpy() for b in bufs]))
assert ok and all(loaded), (err, loaded)
kv = torch.cat(bufs, dim=2)  # [2, layers, tokens, kv_dim]: LMCache's KV_2LTD
past = tuple((kv[0, l].view(-1, c.n_kv_heads, c.head_dim).transpose(0, 1).unsqueeze(0),
              kv[1, l].view(-1, c.n_kv_heads, c.head_dim).transpose(0, 1).unsqueeze(0))
             for l in range(c.n_layers))
first = model.generate(prefix[hit * chunk:] + tail, past, n=1)
ttft_loaded = time.perf_counter() - t0
tokens = model.generate(prefix[hit * chunk:] + tail, past, n=args["n"])[0].tolist()
t1 = time.perf_counter()
cold_first = model.generate(prefix + tail, None, n=1)
ttft_cold = time.perf_counter() - t1
assert cold_first[0, 0] == first[0, 0]
conn.close()
print(json.dumps({"hit_chunks": hit, "found": found, "tokens": tokens,
                  "ttft_loaded_s": ttft_loaded, "ttft_cold_s": ttft_cold}))
'''


def test_proof_two_processes_share_a_prefix(server, r):
    """A prefills a 2,048-token prefix and stores it as LMCache's MP server would (chunks
    of 256 tokens in LMCache's KV_2LTD layout, through PionNativeConnector); B, another
    process, finds every chunk with one MATCH, loads them and decodes 16 greedy tokens
    identical to A's."""
    import hashlib
    import subprocess
    from pion.reference_model import ModelConfig, ReferenceDecoder

    threads = torch.get_num_threads()
    try:
        model = ReferenceDecoder(ModelConfig(**PROOF_CFG), num_threads=1)
        c = model.config
        g = torch.Generator().manual_seed(11)
        prefix = torch.randint(0, c.vocab_size, (PREFIX,), generator=g).tolist()
        tail = torch.randint(0, c.vocab_size, (7,), generator=g).tolist()
        # A: prefill the prefix, decode after it
        _, past = model.prefill(prefix)
        want = model.generate(tail, past, n=DECODE)[0].tolist()
        # ... and store its KV as LMCache would: per chunk [2, layers, 256, kv_dim]
        keys, bufs, parent = [], [], b""
        for i in range(0, PREFIX, CHUNK):
            parent = hashlib.sha256(
                parent + np.asarray(prefix[i:i + CHUNK], "<i8").tobytes()).digest()
            keys.append(L.object_key_string(c.model_id, 0, parent))
            kv = torch.stack([torch.stack([p[j][0, :, i:i + CHUNK].transpose(0, 1)
                                           .reshape(CHUNK, c.kv_dim) for p in past])
                              for j in (0, 1)]).contiguous()
            bufs.append(kv)
    finally:
        torch.set_num_threads(threads)
    conn = L.PionNativeConnector(url=_url(server), num_workers=4)
    try:
        fid = conn.submit_batch_set(keys, [b.numpy() for b in bufs])
        assert wait_completions(conn, 1)[fid] == (True, "", [True] * (PREFIX // CHUNK))
    finally:
        conn.close()
    assert r.info("keyspace")["db0"]["keys"] == PREFIX // CHUNK
    matches = r.info("commandstats").get("cmdstat_kv.block.match", {}).get("calls", 0)

    args = {"url": _url(server), "cfg": PROOF_CFG, "prefix": prefix, "tail": tail,
            "chunk": CHUNK, "n": DECODE}
    out = subprocess.run([sys.executable, "-c", PROCESS_B, json.dumps(args)],
                         capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "python"), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["found"] == [True] * (PREFIX // CHUNK) and got["hit_chunks"] == PREFIX // CHUNK
    assert got["tokens"] == want  # identical greedy continuation
    assert r.info("commandstats")["cmdstat_kv.block.match"]["calls"] == matches + 1
    print(f"\nB: time to first token with the 2,048-token prefix loaded from pion "
          f"{got['ttft_loaded_s'] * 1000:.1f} ms; cold prefill {got['ttft_cold_s'] * 1000:.1f} ms")
