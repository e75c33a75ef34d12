"""pion.integrations.vllm.PionTier against a live pion-server, driven through a stand-in
of vLLM's tiering interface.

vLLM is not installed here, so the vLLM types the tier uses are written out below with
the method names, signatures and fields of vllm-project/vllm at commit
cda0f3248538da3cc96b3760fe4cfaa7d3d652b9: ``vllm/v1/kv_offload/tiering/base.py``
(``SecondaryTierManager``, ``TransferJob``, ``JobResult``), the types it imports from
``vllm/v1/kv_offload/base.py`` (``Medium``, ``Locality``, ``LookupResult``, ``ReqContext``,
``RequestOffloadingContext``, ``ScheduleEndContext``, ``OffloadingEvent``) and how
``vllm/v1/kv_offload/tiering/factory.py`` (``SecondaryTierFactory``) builds an
out-of-tree tier. They are installed under vLLM's module names before the adapter is
first used, so ``pion.integrations.vllm`` resolves its base class exactly as it would in
vLLM.

Run as a script (``--role b``) this file is process B of the two-process proof.
"""
from __future__ import annotations

import argparse
import enum
import importlib
import json
import os
import re
import subprocess
import sys
import time
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Collection, Iterable, NamedTuple

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))


# ---- the stand-in of vLLM's interface (vllm-project/vllm @ cda0f3248538) ----------------

OffloadKey = bytes


class Medium(enum.Enum):
    CPU = "CPU"
    STORAGE = "STORAGE"


class Locality(enum.Enum):
    LOCAL = "LOCAL"
    REMOTE = "REMOTE"


class LookupResult(enum.Enum):
    MISS = enum.auto()
    HIT = enum.auto()
    HIT_PENDING = enum.auto()
    RETRY = enum.auto()


@dataclass
class ReqContext:
    req_id: str
    kv_transfer_params: dict | None = None


@dataclass
class RequestOffloadingContext:
    policy: str = "chunk_level"


class ScheduleEndContext(NamedTuple):
    new_req_ids: Collection[str]
    preempted_req_ids: Collection[str]


@dataclass
class OffloadingEvent:
    keys: list
    medium: Medium
    removed: bool
    locality: Locality | None = None
    ownership: str | None = None
    removal_expected: bool = False


@dataclass
class TransferJob:
    job_id: int
    keys: Collection[OffloadKey]
    chunk_ids: np.ndarray
    is_promotion: bool
    req_context: ReqContext
    submit_time: float = field(default_factory=time.monotonic)


@dataclass
class JobResult:
    job_id: int
    success: bool
    successful_keys: Collection[OffloadKey] | None = None
    transfer_time: float | None = None
    transfer_bytes: int | None = None


class SecondaryTierManager(ABC):
    medium: ClassVar[Medium | None] = None

    def __init__(self, offloading_spec: Any, primary_kv_view: memoryview, tier_type: str,
                 backpressure_detector: Any = None) -> None:
        self._offloading_spec = offloading_spec
        self._primary_kv_view = primary_kv_view
        assert primary_kv_view.strides is not None
        self._block_size_bytes = primary_kv_view.strides[0]
        self.tier_type = tier_type
        self.locality: Locality | None = None
        self._bp_detector = backpressure_detector

    @property
    def block_size_bytes(self) -> int:
        return self._block_size_bytes

    @abstractmethod
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult: ...

    @abstractmethod
    def submit_store(self, job_metadata: TransferJob) -> None: ...

    @abstractmethod
    def submit_load(self, job_metadata: TransferJob) -> None: ...

    @abstractmethod
    def get_finished_jobs(self) -> Iterable[JobResult]: ...

    def has_pending_work(self) -> bool:
        return False

    def take_events(self) -> Iterable[OffloadingEvent]:
        return ()

    def touch(self, keys: Collection[OffloadKey], req_context: ReqContext):
        return

    @abstractmethod
    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext: ...

    def on_request_finished(self, req_context: ReqContext) -> None:
        return

    def serve_external_requests(self, parent: Any) -> None:
        return

    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        return

    @abstractmethod
    def drain_jobs(self) -> None: ...

    def shutdown(self) -> None:
        return

    @classmethod
    def build_metric_definitions(cls, extra_config: dict[str, Any]) -> dict[str, Any]:
        return {}

    def get_stats(self) -> Any:
        return None


def create_secondary_tier(tier_config: dict, primary_kv_view: memoryview,
                          offloading_spec: Any) -> SecondaryTierManager:
    """What SecondaryTierFactory.create_secondary_tier does for an unregistered type."""
    tier_type = tier_config["type"]
    cls = getattr(importlib.import_module(tier_config["module_path"]), tier_type)
    assert issubclass(cls, SecondaryTierManager)
    config = dict(tier_config)
    config.pop("type")
    config.pop("module_path", None)
    return cls(offloading_spec=offloading_spec, primary_kv_view=primary_kv_view,
               tier_type=tier_type, **config)


def _install_stand_in() -> None:
    if "vllm.v1.kv_offload.tiering.base" in sys.modules:
        return
    names = ["vllm", "vllm.v1", "vllm.v1.kv_offload", "vllm.v1.kv_offload.tiering"]
    for n in names:
        sys.modules.setdefault(n, types.ModuleType(n))
    base = types.ModuleType("vllm.v1.kv_offload.base")
    for obj in (Medium, Locality, LookupResult, ReqContext, RequestOffloadingContext,
                ScheduleEndContext, OffloadingEvent):
        setattr(base, obj.__name__, obj)
    base.OffloadKey = OffloadKey
    tiering = types.ModuleType("vllm.v1.kv_offload.tiering.base")
    for obj in (TransferJob, JobResult, SecondaryTierManager, RequestOffloadingContext,
                ScheduleEndContext):
        setattr(tiering, obj.__name__, obj)
    sys.modules["vllm.v1.kv_offload.base"] = base
    sys.modules["vllm.v1.kv_offload.tiering.base"] = tiering


_install_stand_in()

from pion import hashing  # noqa: E402
from pion.integrations import vllm as pion_vllm  # noqa: E402
from test_security import certs, tls_args, tls_port  # noqa: E402

FIXTURES = (certs,)  # the TLS certificates fixture, module-scoped


# ---- helpers ---------------------------------------------------------------------------

def _spec(tokens_per_hash: int = 16, events: bool = True) -> Any:
    return types.SimpleNamespace(
        kv_events_config=types.SimpleNamespace(enable_kv_cache_events=events),
        tokens_per_hash=tokens_per_hash, blocks_per_chunk=1)


def _tier(url: str, view: memoryview, **settings: Any) -> Any:
    cfg = {"type": "PionTier", "module_path": "pion.integrations.vllm", "url": url,
           "key_prefix": "test-model|f32|tp1|"}
    cfg.update(settings)
    return create_secondary_tier(cfg, view, _spec())


def _url(server) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def _keys(n: int, seed: str = "0", group: int = 0) -> list[bytes]:
    toks = list(range(1000, 1000 + 16 * n))
    return [hashing.vllm_offload_key(h, group) for h in hashing.vllm_block_hashes(toks, 16, seed)]


def _deadline_loop(fn, timeout: float = 20.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)  # polling interval of a deadline loop


def _finished(tier, job_ids: set) -> dict:
    out: dict = {}

    def poll():
        for r in tier.get_finished_jobs():
            out[r.job_id] = r
        return job_ids <= set(out)
    _deadline_loop(poll, what=f"jobs {sorted(job_ids)}")
    return out


def _resolve(tier, keys: list, ctx: ReqContext) -> tuple[list, list]:
    """Drives lookups as vLLM's scheduler does: ask, end the step, ask again. Returns the
    first answers and the final ones."""
    first = [tier.lookup(k, ctx) for k in keys]
    tier.on_schedule_end(ScheduleEndContext([ctx.req_id], []))

    def settled():
        res = [tier.lookup(k, ctx) for k in keys]
        return res if LookupResult.RETRY not in res else None
    return first, _deadline_loop(settled, what="lookup results")


def _info(r, field_name: str) -> int:
    return int(r.info("all")[field_name])


# ---- tests -----------------------------------------------------------------------------

def _docs_config() -> dict:
    text = (ROOT / "docs" / "integrations" / "vllm.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    cfgs = [json.loads(b) for b in blocks if "secondary_tiers" in b]
    assert len(cfgs) == 1, "docs/integrations/vllm.md holds one --kv-transfer-config"
    return cfgs[0]


def test_docs_snippet_builds_the_tier(server, r):
    cfg = _docs_config()
    assert cfg["kv_connector"] == "OffloadingConnector"
    extra = cfg["kv_connector_extra_config"]
    assert extra["spec_name"] == "TieringOffloadingSpec"
    (entry,) = extra["secondary_tiers"]
    assert entry["type"] == "PionTier" and entry["module_path"] == "pion.integrations.vllm"
    entry = dict(entry, url=_url(server))  # the docs' server, here the test's
    slots = np.zeros((4, 4096), dtype=np.uint8)
    tier = create_secondary_tier(entry, memoryview(slots), _spec())
    try:
        assert isinstance(tier, SecondaryTierManager)
        assert type(tier) is pion_vllm.PionTier and "cda0f3248538" in pion_vllm.MATCHED_UPSTREAM
        assert tier.medium is Medium.STORAGE and tier.tier_type == "PionTier"
        assert tier.locality is Locality.REMOTE
        assert isinstance(tier.on_new_request(ReqContext("r")), RequestOffloadingContext)
        assert set("Egxe") <= set(r.config_get("notify-keyspace-events")["notify-keyspace-events"])
    finally:
        tier.shutdown()
    with pytest.raises(TypeError, match="unknown setting"):
        create_secondary_tier(dict(entry, colour="blue"), memoryview(slots), _spec())


def test_methods_match_the_interface():
    import inspect
    cls = pion_vllm.PionTier
    for name in ("lookup", "submit_store", "submit_load", "get_finished_jobs", "has_pending_work",
                 "take_events", "touch", "on_new_request", "on_request_finished",
                 "on_schedule_end", "drain_jobs", "shutdown"):
        ours = list(inspect.signature(getattr(cls, name)).parameters)
        theirs = list(inspect.signature(getattr(SecondaryTierManager, name)).parameters)
        assert ours == theirs, name
    assert not getattr(cls, "__abstractmethods__", None)
    init = inspect.signature(cls.__init__).parameters
    assert list(init)[:4] == ["self", "offloading_spec", "primary_kv_view", "tier_type"]


def test_module_loads_without_vllm_and_parses_settings():
    code = ("import pion.integrations.vllm as m\n"
            "try:\n    m.PionTier\nexcept ImportError as e:\n    print('ImportError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("ImportError"), out.stderr
    assert "cda0f3248538" in out.stdout
    assert pion_vllm._parse_format("fp8:bf16:128") == ("fp8", "bf16", 128)
    assert pion_vllm._parse_format({"format": "turbo4", "dtype": "f16", "row": 64}) == \
        ("turbo4", "f16", 64)
    assert pion_vllm._parse_format(None) is None
    with pytest.raises(ValueError):
        pion_vllm._parse_format("fp8")


def test_round_trip_bit_exact_and_pins_released(server, r):
    n, size = 12, 16384
    rng = np.random.default_rng(7)
    slots = np.zeros((2 * n, size), dtype=np.uint8)
    slots[:n] = rng.integers(0, 256, (n, size), dtype=np.uint8)
    tier = _tier(_url(server), memoryview(slots), ttl_s=3600, chain_per_command=5)
    try:
        keys = _keys(n)
        ctx = ReqContext("req-a")
        tier.on_new_request(ctx)
        # vLLM cascades a request's chunks in steps: two jobs, the second after the first.
        tier.submit_store(TransferJob(1, keys[:7], np.arange(7), False, ctx))
        tier.submit_store(TransferJob(2, keys[7:], np.arange(7, n), False, ctx))
        res = _finished(tier, {1, 2})
        assert res[1].success and res[2].success and res[2].transfer_bytes == 5 * size
        name = tier.key_name(keys[7])
        info = r.execute_command("KV.BLOCK.INFO", name)
        assert info[1] == tier.key_name(keys[6])  # chained after the first job's last chunk
        assert int(info[5]) == hashing.vllm_event_hash(keys[7][:-4]) and int(info[7]) == 16
        assert 0 < r.ttl(name) <= 3600
        stored = [e for e in tier.take_events() if not e.removed]
        assert sorted(k for e in stored for k in e.keys) == sorted(keys)
        assert all(e.medium is Medium.STORAGE for e in stored)
        tier.on_request_finished(ctx)

        ctx2 = ReqContext("req-b")
        t0 = time.perf_counter()
        first = [tier.lookup(k, ctx2) for k in keys]
        took = time.perf_counter() - t0
        assert first == [LookupResult.RETRY] * n
        tier.on_schedule_end(ScheduleEndContext(["req-b"], []))
        print(f"\n{n} first lookups (RETRY, nothing sent): {took * 1e6:.0f} us in all")
        _, final = _resolve(tier, keys, ctx2)
        assert final == [LookupResult.HIT] * n
        assert _info(r, "pinned_keys") == n and _info(r, "leases") == 1
        tier.submit_load(TransferJob(3, keys, np.arange(n, 2 * n), True, ctx2))
        (done,) = _finished(tier, {3}).values()
        assert done.success and done.successful_keys is None
        assert np.array_equal(slots[n:], slots[:n])
        assert _info(r, "pinned_keys") == 0 and _info(r, "leases") == 0
        tier.on_request_finished(ctx2)
        assert not tier.has_pending_work()
    finally:
        tier.shutdown()


def test_partial_load_reports_successful_keys(server, r):
    n, size = 6, 4096
    slots = np.zeros((2 * n, size), dtype=np.uint8)
    slots[:n] = np.arange(n * size, dtype=np.uint32).reshape(n, size).astype(np.uint8) ^ 0xA5
    tier = _tier(_url(server), memoryview(slots))
    try:
        keys = _keys(n, seed="partial")
        ctx = ReqContext("w")
        tier.submit_store(TransferJob(1, keys, np.arange(n), False, ctx))
        assert _finished(tier, {1})[1].success
        tier.take_events()
        ctx2 = ReqContext("rd")
        _, final = _resolve(tier, keys, ctx2)
        assert final == [LookupResult.HIT] * n and _info(r, "pinned_keys") == n
        # DEL acts on pinned keys at once; the load then finds them gone.
        assert r.delete(tier.key_name(keys[1]), tier.key_name(keys[4])) == 2
        tier.submit_load(TransferJob(2, keys, np.arange(n, 2 * n), True, ctx2))
        (res,) = _finished(tier, {2}).values()
        assert res.success is False
        assert list(res.successful_keys) == [keys[i] for i in (0, 2, 3, 5)]
        for i in (0, 2, 3, 5):
            assert np.array_equal(slots[n + i], slots[i])
        assert _info(r, "pinned_keys") == 0 and _info(r, "leases") == 0
        # The deletions come back as removal events, and the keys now answer MISS.
        removed = set()
        _deadline_loop(lambda: removed.update(k for e in tier.take_events() if e.removed
                                              for k in e.keys) or removed == {keys[1], keys[4]},
                       what="removal events")
        assert tier.lookup(keys[1], ctx2) is LookupResult.MISS
        assert tier.lookup(keys[0], ctx2) is LookupResult.HIT
        tier.on_request_finished(ctx2)
        # A load of keys that were never looked up at all: every key missing. (The job
        # object of vLLM before TransferJob, JobMetadata with block_ids, is accepted.)
        old_job = types.SimpleNamespace(job_id=3, keys=_keys(2, seed="never"),
                                        block_ids=np.arange(2), req_context=ctx2)
        tier.submit_load(old_job)
        (res,) = _finished(tier, {3}).values()
        assert res.success is False and res.successful_keys is None
    finally:
        tier.shutdown()


def test_evictions_reported_through_take_events(server_factory):
    server = server_factory(["--maxmemory-policy", "allkeys-lru"])
    r = server.client()
    n, size = 16, 65536
    slots = np.ones((n, size), dtype=np.uint8)
    tier = _tier(_url(server), memoryview(slots))
    try:
        keys = _keys(n, seed="evict")
        tier.submit_store(TransferJob(1, keys, np.arange(n), False, ReqContext("e")))
        assert _finished(tier, {1})[1].success
        tier.take_events()
        used = int(r.info("memory")["used_memory"])
        r.config_set("maxmemory", used + 4 * size)
        for i in range(12):  # fillers push the chunks out, leaves first
            r.set(f"filler:{i}", b"x" * size)
        assert _info(r, "evicted_keys") > 0
        gone = {k for k in keys if not r.exists(tier.key_name(k))}
        assert gone
        heard = set()
        _deadline_loop(lambda: heard.update(k for e in tier.take_events() if e.removed
                                            for k in e.keys) or gone <= heard,
                       what="eviction events")
        print(f"\n{len(gone)} of {n} chunks evicted, all reported by take_events")
    finally:
        tier.shutdown()
        r.close()


def test_lookup_never_blocks(server, r):
    slots = np.zeros((1, 1024), dtype=np.uint8)
    tier = _tier(_url(server), memoryview(slots))
    try:
        keys = _keys(2000, seed="many")
        ctx = ReqContext("many")
        r.execute_command("KV.BLOCK.CHAIN", *[x for k in keys[:1000]
                                              for x in (tier.key_name(k), b"v" * 1024)])
        durations = []
        for step in range(4):  # four scheduler steps of 500 new keys each
            for k in keys[step * 500:(step + 1) * 500]:
                t0 = time.perf_counter()
                assert tier.lookup(k, ctx) is LookupResult.RETRY
                durations.append(time.perf_counter() - t0)
            tier.on_schedule_end(ScheduleEndContext([], []))
        _, final = _resolve(tier, keys, ctx)
        assert final == [LookupResult.HIT] * 1000 + [LookupResult.MISS] * 1000
        d = np.array(durations) * 1e6
        print(f"\nlookup() of an unresolved key: mean {d.mean():.2f} us, p99 "
              f"{np.percentile(d, 99):.2f} us, max {d.max():.1f} us over {d.size} calls")
        assert _info(r, "pinned_keys") == 1000
        tier.touch(keys[:10], ctx)
        tier.on_request_finished(ctx)  # never loaded: the request's end releases the pins
        _deadline_loop(lambda: _info(r, "pinned_keys") == 0, what="pins released")
        assert _info(r, "leases") == 0
    finally:
        tier.shutdown()


def test_acl_user_with_key_pattern(server, r):
    """Credentials from the URL; a user limited to its prefix (no CONFIG) works when the
    operator set the notification classes, and a wrong password fails at start-up."""
    r.config_set("notify-keyspace-events", "Egxe")
    r.execute_command("ACL", "SETUSER", "vllm", "on", ">s3cret", "~test-model|*",
                      "&__keyevent@*", "+@all", "-config")
    url = f"redis://vllm:s3cret@127.0.0.1:{server.port}/0"
    slots = np.zeros((8, 1024), dtype=np.uint8)
    slots[:4] = np.random.default_rng(3).integers(0, 256, (4, 1024), dtype=np.uint8)
    tier = _tier(url, memoryview(slots))
    try:
        keys = _keys(4, seed="acl")
        ctx = ReqContext("acl")
        tier.submit_store(TransferJob(1, keys, np.arange(4), False, ctx))
        assert _finished(tier, {1})[1].success
        _, final = _resolve(tier, keys, ReqContext("acl2"))
        assert final == [LookupResult.HIT] * 4
        tier.submit_load(TransferJob(2, keys, np.arange(4, 8), True, ReqContext("acl2")))
        assert _finished(tier, {2})[2].success
        assert np.array_equal(slots[4:], slots[:4])
        r.delete(tier.key_name(keys[0]))
        _deadline_loop(lambda: any(e.removed for e in tier.take_events()), what="removal event")
    finally:
        tier.shutdown()
    with pytest.raises(Exception, match="(?i)WRONGPASS|invalid"):
        _tier(f"redis://vllm:wrong@127.0.0.1:{server.port}/0", memoryview(slots))


def test_tls_with_client_certificate(server_factory, certs):
    s = server_factory(tls_args(certs, auth="yes"))
    slots = np.zeros((4, 2048), dtype=np.uint8)
    slots[:2] = 0x3C
    tier = _tier(f"rediss://localhost:{tls_port(s)}/0", memoryview(slots),
                 ssl_ca_certs=str(certs / "ca.crt"), ssl_certfile=str(certs / "client.crt"),
                 ssl_keyfile=str(certs / "client.key"))
    try:
        keys = _keys(2, seed="tls")
        tier.submit_store(TransferJob(1, keys, np.arange(2), False, ReqContext("t")))
        assert _finished(tier, {1})[1].success
        ctx = ReqContext("t2")
        assert _resolve(tier, keys, ctx)[1] == [LookupResult.HIT] * 2
        tier.submit_load(TransferJob(2, keys, np.arange(2, 4), True, ctx))
        assert _finished(tier, {2})[2].success and np.array_equal(slots[2:], slots[:2])
    finally:
        tier.shutdown()


def test_drain_and_shutdown_release_everything(server, r):
    n, size = 8, 8192
    slots = np.full((2 * n, size), 3, dtype=np.uint8)
    tier = _tier(_url(server), memoryview(slots), depth=2)
    keys = _keys(n, seed="drain")
    tier.submit_store(TransferJob(1, keys, np.arange(n), False, ReqContext("d")))
    tier.drain_jobs()
    assert [x.job_id for x in tier.get_finished_jobs()] == [1]
    ctx = ReqContext("d2")
    _resolve(tier, keys, ctx)
    assert _info(r, "pinned_keys") == n
    tier.shutdown()  # leases still held are released
    _deadline_loop(lambda: _info(r, "pinned_keys") == 0, what="pins released at shutdown")
    tier.shutdown()  # idempotent


# ---- the two-process proof ------------------------------------------------------------

PREFIX_TOKENS, BLOCK, DECODE = 2048, 16, 16
MODEL = dict(vocab_size=2048, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2,
             head_dim=32, ffn_dim=256, seed=11)


def _model():
    from pion.reference_model import ModelConfig, ReferenceDecoder
    return ReferenceDecoder(ModelConfig(**MODEL), num_threads=1)


def _prompt():
    rng = np.random.default_rng(2024)
    prefix = rng.integers(3, MODEL["vocab_size"], PREFIX_TOKENS).tolist()
    suffix = [5, 17, 29, 41, 53]
    return prefix, suffix


def _slot_bytes(model) -> int:
    c = model.config
    return c.n_layers * 2 * c.n_kv_heads * BLOCK * c.head_dim * 4


def _past_to_slots(past, slots: np.ndarray) -> None:
    """vLLM's CPU slot layout for this test: per block, for each layer K then V,
    [kv_heads, 16 tokens, head_dim] float32."""
    n = past[0][0].shape[2] // BLOCK
    for b in range(n):
        parts = [t[0, :, b * BLOCK:(b + 1) * BLOCK, :].numpy() for kv in past for t in kv]
        slots[b] = np.concatenate([p.ravel() for p in parts]).view(np.uint8)


def _slots_to_past(slots: np.ndarray, model):
    import torch
    c = model.config
    n = slots.shape[0]
    arr = slots.view(np.float32).reshape(n, c.n_layers, 2, c.n_kv_heads, BLOCK, c.head_dim)
    arr = arr.transpose(1, 2, 3, 0, 4, 5).reshape(c.n_layers, 2, c.n_kv_heads, n * BLOCK, c.head_dim)
    return tuple((torch.from_numpy(np.ascontiguousarray(arr[li, 0]))[None],
                  torch.from_numpy(np.ascontiguousarray(arr[li, 1]))[None])
                 for li in range(c.n_layers))


def _prefix_keys(prefix) -> list[bytes]:
    return [hashing.vllm_offload_key(h) for h in hashing.vllm_block_hashes(prefix, BLOCK, "0")]


def _role_b(url: str) -> dict:
    """Process B: a fresh vLLM instance that has the prompt's prefix in pion only."""
    model = _model()
    prefix, suffix = _prompt()
    keys = _prefix_keys(prefix)
    model.generate([1, 2, 3], None, n=1)  # warm-up of the kernels, not of any cache
    t0 = time.perf_counter()
    model.generate(prefix + suffix, None, n=1)
    cold = time.perf_counter() - t0
    slots = np.zeros((len(keys), _slot_bytes(model)), dtype=np.uint8)
    tier = _tier(url, memoryview(slots))
    try:
        ctx = ReqContext("b")
        tier.on_new_request(ctx)
        t0 = time.perf_counter()
        first, final = _resolve(tier, keys, ctx)
        tier.submit_load(TransferJob(1, keys, np.arange(len(keys)), True, ctx))
        (res,) = _finished(tier, {1}).values()
        past = _slots_to_past(slots, model)
        first_token = model.generate(suffix, past, n=1)
        warm = time.perf_counter() - t0
        tokens = model.generate(suffix, past, n=DECODE)[0].tolist()
        tier.on_request_finished(ctx)
    finally:
        tier.shutdown()
    return {"first": sorted({x.name for x in first}), "final": sorted({x.name for x in final}),
            "success": res.success, "tokens": tokens, "first_token": int(first_token[0, 0]),
            "ttft_warm_s": warm, "ttft_cold_s": cold}


def test_two_processes_share_a_prefix(server, r):
    model = _model()
    prefix, suffix = _prompt()
    keys = _prefix_keys(prefix)
    assert len(keys) == PREFIX_TOKENS // BLOCK
    # Process A: prefill, cascade the prefix's KV to pion as vLLM would, decode.
    _, past = model.prefill(prefix)
    slots = np.zeros((len(keys), _slot_bytes(model)), dtype=np.uint8)
    _past_to_slots(past, slots)
    tier = _tier(_url(server), memoryview(slots))
    try:
        ctx = ReqContext("a")
        step = 32  # chunks cascaded per scheduler step
        for j, i in enumerate(range(0, len(keys), step)):
            tier.submit_store(TransferJob(j, keys[i:i + step], np.arange(i, i + step), False, ctx))
        res = _finished(tier, set(range(len(keys) // step)))
        assert all(x.success for x in res.values())
    finally:
        tier.shutdown()
    tokens_a = model.generate(suffix, past, n=DECODE)[0].tolist()

    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, __file__, "--role", "b", "--url", _url(server)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    b = json.loads(proc.stdout.strip().splitlines()[-1])
    assert b["first"] == ["RETRY"] and b["final"] == ["HIT"] and b["success"]
    assert b["tokens"] == tokens_a
    assert _info(r, "pinned_keys") == 0
    print(f"\nprocess B: {len(keys)} chunks of {slots.shape[1]} bytes found and loaded; "
          f"time to first token {b['ttft_warm_s'] * 1e3:.1f} ms from pion vs "
          f"{b['ttft_cold_s'] * 1e3:.1f} ms cold prefill of {PREFIX_TOKENS + len(suffix)} tokens; "
          f"16 greedy tokens identical to process A's")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["b"], required=True)
    ap.add_argument("--url", required=True)
    a = ap.parse_args()
    print(json.dumps(_role_b(a.url)))
