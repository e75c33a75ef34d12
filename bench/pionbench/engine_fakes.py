"""Stand-ins for the engine modules the adapters import lazily, for machines without the
engines (the bench never needs a GPU): only the names, fields and method signatures the
adapters use, as the engines' sources define them (vLLM `vllm/v1/kv_offload/base.py` and
`tiering/base.py` at cda0f324; SGLang `python/sglang/srt/mem_cache/hicache_storage.py`
at 001067ff), and nothing of their behaviour. `install_vllm()` / `install_sglang()` put
them into sys.modules only when the real package does not import.

Also a fake SGLang host pool in the page_first layout (MHA: K and V regions per page),
the one layout the SGLang adapter accepts."""

import enum
import logging
import sys
import time
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, NamedTuple


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    m.__bench_fake__ = True
    sys.modules[name] = m
    parent, _, child = name.rpartition('.')
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


# ------------------------------------------------------------------ vLLM

def install_vllm():
    """The real vllm.v1.kv_offload.{base, tiering.base}, or the stand-ins. Returns
    (base, tiering_base) modules."""
    try:
        import vllm.v1.kv_offload.base as base
        import vllm.v1.kv_offload.tiering.base as tiering_base
        return base, tiering_base
    except ImportError:
        pass
    if 'vllm.v1.kv_offload.tiering.base' in sys.modules:
        return (sys.modules['vllm.v1.kv_offload.base'],
                sys.modules['vllm.v1.kv_offload.tiering.base'])

    def make_offload_key(block_hash, group_idx):
        return bytes(block_hash) + int(group_idx).to_bytes(4, 'big')

    class Medium(enum.Enum):
        CPU = 'CPU'
        STORAGE = 'STORAGE'

    class Locality(enum.Enum):
        LOCAL = 'LOCAL'
        REMOTE = 'REMOTE'

    class LookupResult(enum.Enum):
        MISS = enum.auto()
        HIT = enum.auto()
        HIT_PENDING = enum.auto()
        RETRY = enum.auto()

    class OffloadPolicy(enum.Enum):
        CHUNK_LEVEL = 'chunk_level'
        REQUEST_LEVEL = 'request_level'

    @dataclass
    class ReqContext:
        req_id: str
        kv_transfer_params: Any = None
        kv_hints: Any = None
        load_tier_filter: Any = None
        _state: dict = field(default_factory=dict, repr=False, init=False)

        def set_state(self, val):
            self._state[type(val)] = val

        def get_state(self, cls):
            return self._state.get(cls)

    @dataclass
    class RequestOffloadingContext:
        policy: OffloadPolicy = OffloadPolicy.CHUNK_LEVEL

    class ScheduleEndContext(NamedTuple):
        new_req_ids: Any
        preempted_req_ids: Any

    @dataclass
    class OffloadingEvent:
        keys: list
        medium: Medium
        removed: bool
        locality: Any = None
        ownership: Any = None
        removal_expected: bool = False

    @dataclass(frozen=True)
    class OffloadingMetricMetadata:
        documentation: str
        labelnames: tuple = ()

    class OffloadingSpec:
        pass

    @dataclass
    class TransferJob:
        job_id: int
        keys: Any
        chunk_ids: Any
        is_promotion: bool
        req_context: Any
        submit_time: float = field(default_factory=time.monotonic)

    @dataclass
    class JobResult:
        job_id: int
        success: bool
        successful_keys: Any = None
        transfer_time: Any = None
        transfer_bytes: Any = None

    class BackpressureDetector:
        pass

    class SecondaryTierManager(ABC):
        medium = None

        def __init__(self, offloading_spec, primary_kv_view, tier_type,
                     backpressure_detector=None):
            self._offloading_spec = offloading_spec
            self._primary_kv_view = primary_kv_view
            self._block_size_bytes = primary_kv_view.strides[0]
            self.tier_type = tier_type
            self.locality = None
            self._bp_detector = backpressure_detector

        @property
        def block_size_bytes(self):
            return self._block_size_bytes

        @property
        def bp_detector(self):
            return self._bp_detector

        @abstractmethod
        def lookup(self, key, req_context): ...

        @abstractmethod
        def submit_store(self, job_metadata): ...

        @abstractmethod
        def submit_load(self, job_metadata): ...

        @abstractmethod
        def get_finished_jobs(self): ...

        def has_pending_work(self):
            return False

        def take_events(self):
            return ()

        def touch(self, keys, req_context):
            return

        @abstractmethod
        def on_new_request(self, req_context): ...

        def on_request_finished(self, req_context):
            return

        def serve_external_requests(self, parent):
            return

        def on_schedule_end(self, context):
            return

        @abstractmethod
        def drain_jobs(self): ...

        def shutdown(self):
            return

        @classmethod
        def build_metric_definitions(cls, extra_config):
            return {}

        def get_stats(self):
            return None

    _module('vllm')
    _module('vllm.logger', init_logger=logging.getLogger)
    _module('vllm.v1')
    _module('vllm.v1.kv_offload')
    base = _module('vllm.v1.kv_offload.base', OffloadKey=bytes, make_offload_key=make_offload_key,
                   get_offload_block_hash=lambda k: k[:-4],
                   get_offload_group_idx=lambda k: int.from_bytes(k[-4:], 'big'),
                   Medium=Medium, Locality=Locality, LookupResult=LookupResult,
                   OffloadPolicy=OffloadPolicy, ReqContext=ReqContext,
                   RequestOffloadingContext=RequestOffloadingContext,
                   ScheduleEndContext=ScheduleEndContext, OffloadingEvent=OffloadingEvent,
                   OffloadingMetricMetadata=OffloadingMetricMetadata,
                   OffloadingSpec=OffloadingSpec)
    _module('vllm.v1.kv_offload.tiering')
    _module('vllm.v1.kv_offload.tiering.backpressure', BackpressureDetector=BackpressureDetector)
    tiering_base = _module('vllm.v1.kv_offload.tiering.base', JobId=int, TransferJob=TransferJob,
                           JobResult=JobResult, SecondaryTierManager=SecondaryTierManager)
    return base, tiering_base


# ------------------------------------------------------------------ SGLang

def install_sglang():
    """The real sglang.srt.mem_cache.hicache_storage, or the stand-in."""
    try:
        import sglang.srt.mem_cache.hicache_storage as hs
        return hs
    except ImportError:
        pass
    if 'sglang.srt.mem_cache.hicache_storage' in sys.modules:
        return sys.modules['sglang.srt.mem_cache.hicache_storage']

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
        model_name: Any
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Any = None
        should_split_heads: bool = False
        extra_config: Any = None

    @dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Any = None
        extra_info: Any = None

    class HiCacheStorage(ABC):
        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        @abstractmethod
        def get(self, key, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def exists(self, key): ...

        def batch_exists(self, keys, extra_info=None):
            for i in range(len(keys)):
                if not self.exists(keys[i]):
                    return i
            return len(keys)

        def clear(self):
            pass

        def get_stats(self):
            return None

    _module('sglang')
    _module('sglang.srt')
    _module('sglang.srt.mem_cache')
    return _module('sglang.srt.mem_cache.hicache_storage',
                   HiCacheStorageConfig=HiCacheStorageConfig,
                   HiCacheStorageExtraInfo=HiCacheStorageExtraInfo,
                   HiCacheStorage=HiCacheStorage)


class PageFirstHostPool:
    """SGLang's MHA host pool in the page_first layout, as far as storage backends see it:
    kv_buffer of shape (2, size, layer_num, head_num, head_dim), so a page's K and its V
    are each one contiguous region; get_page_buffer_meta gives their addresses (K, V per
    page) and sizes; get_data_page / set_from_flat_data_page / get_dummy_flat_data_page
    copy a page as one flat (K then V) tensor."""

    layout = 'page_first'

    def __init__(self, pages, page_size=64, layer_num=8, head_num=8, head_dim=128):
        import torch
        self.torch = torch
        self.page_size = page_size
        self.size = pages * page_size
        self.layer_num, self.head_num, self.head_dim = layer_num, head_num, head_dim
        self.start_layer, self.end_layer = 0, layer_num
        self.dtype = torch.float16
        self.device = 'cpu'
        self.kv_buffer = torch.zeros((2, self.size, layer_num, head_num, head_dim),
                                     dtype=self.dtype)
        self.element_size = self.kv_buffer.element_size()

    def get_size_per_token(self):
        return 2 * self.layer_num * self.head_num * self.head_dim * self.element_size

    def get_ksize_per_token(self):
        return self.get_size_per_token() // 2

    def page_region_bytes(self):
        return self.page_size * self.get_ksize_per_token()

    def page_regions(self, page):
        """(K, V) of a page as writable uint8 numpy views."""
        s = slice(page * self.page_size, (page + 1) * self.page_size)
        return (self.kv_buffer[0, s].view(self.torch.uint8).reshape(-1).numpy(),
                self.kv_buffer[1, s].view(self.torch.uint8).reshape(-1).numpy())

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        n = self.page_region_bytes()
        for i in range(0, len(indices), self.page_size):
            idx = int(indices[i])
            ptrs.append(self.kv_buffer[0, idx].data_ptr())
            ptrs.append(self.kv_buffer[1, idx].data_ptr())
            sizes += [n, n]
        return ptrs, sizes

    def get_data_page(self, index, flat=True):
        page = self.kv_buffer[:, index:index + self.page_size]
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self):
        return self.torch.zeros(2 * self.page_size * self.layer_num * self.head_num *
                                self.head_dim, dtype=self.dtype)

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, index:index + self.page_size] = data_page.reshape(
            2, self.page_size, self.layer_num, self.head_num, self.head_dim)
