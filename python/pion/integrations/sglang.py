"""SGLang's HiCache L3 storage on pion: ``PionHiCacheStorage``.

SGLang (matched against ``python/sglang/srt/mem_cache/hicache_storage.py`` at upstream
commit 001067ff, interface ``batch_get_v1`` / ``batch_set_v1``) loads it as a ``dynamic``
storage backend::

    --enable-hierarchical-cache --hicache-mem-layout page_first
    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "pion",
        "module_path": "pion.integrations.sglang", "class_name": "PionHiCacheStorage",
        "interface_v1": 1, "url": "redis://pion:6379/0", "key_prefix": "prod-bf16"}'

SGLang's factory builds it as ``PionHiCacheStorage(storage_config, {})``: every setting
comes from the extra config (``storage_config.extra_config``), see :data:`SETTINGS`.

* One pion key per page: ``<key_prefix>|<model>|<tp_rank>of<tp_size>|<page hash>``
  (no TP part for MLA models, whose pages every rank holds whole; ``|pp<r>of<n>`` and
  ``|cp<r>of<n>`` are added with pipeline or context parallelism, as SGLang's file
  backend adds them). ``<page hash>`` is SGLang's own key (the sha256-hex page chain).
* A page of an MHA ``page_first`` host pool is two regions, K and V: it is stored as one
  value, K then V, sent from both regions without joining them and received straight
  back into them (``recv_into``); an MLA page is one region. The value is byte for byte
  what SGLang's ``get_data_page(..., flat=True)`` gives, so the copying v0 calls
  (``get``/``set``/``batch_get``/``batch_set``) read and write the same values.
* ``batch_exists`` is one ``KV.BLOCK.MATCH`` (the count of the leading run of stored
  pages, which is what SGLang asks for), optionally pinning them until ``batch_get_v1``
  has read them (``pin_ms``). ``batch_set_v1`` skips pages already stored (one MATCH
  BITMAP) and writes the others with pipelined ``KV.BLOCK.CHAIN``, linked after the
  request's previous page, so pion evicts a prefix from its tail.
* Only the ``page_first`` host layout is served (a page must be contiguous per K/V for
  zero copy); any other layout is refused with a message saying what to set.

The engine's base class is imported when ``PionHiCacheStorage`` is first looked up on
this module (``storage_class(base)`` builds it over any base with the same methods), so
the module imports without SGLang installed.
"""
from __future__ import annotations

import ctypes
import logging
import threading
import time
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from .. import errors as E
from . import _conn

# PionHiCacheStorage is built on first access (module __getattr__), so it is not in __all__.
__all__ = ["storage_class", "SETTINGS", "INTERFACE"]

log = logging.getLogger("pion.integrations.sglang")

#: What this adapter was matched against.
INTERFACE = "sglang python/sglang/srt/mem_cache/hicache_storage.py @ 001067ff (interface_v1)"

#: Extra-config keys this adapter reads, with their defaults (None: required).
SETTINGS: dict[str, Any] = {
    "url": None,                 # redis://, rediss:// or unix:// (credentials as redis-py)
    "key_prefix": None,          # names the deployment: dtype, quantization, weights revision
    "ttl_s": 0,                  # 0: pages live until evicted
    "depth": 64,                 # commands in flight per pipeline window
    "per_command": 8,            # pages per KV.BLOCK.CHAIN command
    "timeout_s": 10.0,           # socket timeout
    "connect_timeout_s": 5.0,
    "pin_ms": 10000,             # pin what batch_exists found until batch_get_v1 (0: off)
    "skip_existing": True,       # batch_set_v1 writes only pages not stored yet
    "listen_removals": True,     # count evictions/expiries/deletions of our pages
}
# Keys of the extra config that SGLang itself reads or that name the backend.
_ENGINE_KEYS = {"backend_name", "module_path", "class_name", "interface_v1", "tp_lcm_size"}

_SUPPORTED_LAYOUT = "page_first"


def _layout_refusal(layout: Any) -> ValueError:
    return ValueError(
        f"PionHiCacheStorage needs the page_first host layout (got {layout!r}): a page is "
        "stored as one value read and written in place, which needs each page's K and V "
        "to be contiguous. Start SGLang with --hicache-mem-layout page_first.")


@dataclass
class _StorageMetrics:
    """The fields of SGLang's ``StorageMetrics`` (used when SGLang is not installed)."""

    prefetch_pgs: List[int] = field(default_factory=list)
    backup_pgs: List[int] = field(default_factory=list)
    prefetch_bandwidth: List[float] = field(default_factory=list)
    backup_bandwidth: List[float] = field(default_factory=list)


_metrics_cls: list[type] = []


def _metrics_class() -> type:
    """SGLang's ``StorageMetrics`` (its collector asserts that type), else ours."""
    if not _metrics_cls:
        try:
            from sglang.srt.metrics.collector import StorageMetrics
            _metrics_cls.append(StorageMetrics)
        except Exception:  # no SGLang, or one without it
            _metrics_cls.append(_StorageMetrics)
    return _metrics_cls[0]


def _tensor_view(t: Any) -> memoryview:
    """The bytes of a contiguous CPU tensor (or any buffer), writable, not copied."""
    if hasattr(t, "data_ptr") and hasattr(t, "element_size"):
        if not t.is_contiguous():
            raise ValueError("a page tensor must be contiguous")
        n = t.numel() * t.element_size()
        return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")
    return memoryview(t).cast("B")


class _PionHiCacheStorage:
    """The adapter's behaviour; :func:`storage_class` mixes it with SGLang's
    ``HiCacheStorage`` into ``PionHiCacheStorage``."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        extra.update(kwargs or {})
        unknown = sorted(k for k in extra if k not in SETTINGS and k not in _ENGINE_KEYS)
        if unknown:
            log.warning("PionHiCacheStorage ignores unknown extra-config keys %s", unknown)
        cfg = {k: extra.get(k, d) for k, d in SETTINGS.items()}
        for k in ("url", "key_prefix"):
            if not cfg[k]:
                raise ValueError(f"PionHiCacheStorage needs {k!r} in "
                                 "--hicache-storage-backend-extra-config")
        if "|" in str(cfg["key_prefix"]):
            raise ValueError("PionHiCacheStorage: key_prefix may not contain '|' (it separates "
                             "the parts of a page key, and clear() relies on that)")
        for k, lo, hi in (("depth", 1, 1 << 20), ("per_command", 1, 4096),
                          ("pin_ms", 0, 600000)):
            if not lo <= int(cfg[k]) <= hi:
                raise ValueError(f"PionHiCacheStorage: {k} must be in {lo}..{hi}, "
                                 f"got {cfg[k]!r}")
        if float(cfg["ttl_s"]) < 0:
            raise ValueError(f"PionHiCacheStorage: ttl_s must be >= 0, got {cfg['ttl_s']!r}")
        if not getattr(storage_config, "is_page_first_layout", True):
            raise _layout_refusal("not page_first")
        self.config = cfg
        self.storage_config = storage_config
        self.is_mla = bool(getattr(storage_config, "is_mla_model", False))
        model = getattr(storage_config, "model_name", None) or ""
        head = f"{cfg['key_prefix']}|{model}|"
        if not self.is_mla:
            head += f"{storage_config.tp_rank}of{storage_config.tp_size}|"
        pp_size = int(getattr(storage_config, "pp_size", 1) or 1)
        if pp_size > 1:
            head += f"pp{storage_config.pp_rank}of{pp_size}|"
        cp_size = int(getattr(storage_config, "attn_cp_size", 1) or 1)
        if cp_size > 1:
            head += f"cp{storage_config.attn_cp_rank}of{cp_size}|"
        self.key_head = head.encode()
        self.mem_pool_host: Any = None
        self._ttl_ms = int(float(cfg["ttl_s"]) * 1000)
        self._opts: dict[str, Any] = {"socket_timeout": float(cfg["timeout_s"]),
                      "socket_connect_timeout": float(cfg["connect_timeout_s"]),
                      "client_name": f"sglang-hicache-tp{getattr(storage_config, 'tp_rank', 0)}"}
        self._local = threading.local()
        self._conns: list[_conn.BlockConnection] = []
        self._lock = threading.Lock()
        self._leases: OrderedDict[bytes, int] = OrderedDict()
        self._metrics = _StorageMetrics()
        self.counters = {"exists_queries": 0, "pages_found": 0, "pages_loaded": 0,
                         "pages_load_failed": 0, "pages_stored": 0, "pages_skipped": 0,
                         "pages_store_failed": 0, "bytes_loaded": 0, "bytes_stored": 0,
                         "pages_removed": 0, "errors": 0}
        c = self._connection()  # fail at start, not at the first request, on a bad URL or password
        self.removals_reported = _conn.ensure_keyspace_events(c)
        self._listener: Optional[_conn.RemovalListener] = None
        if cfg["listen_removals"] and self.removals_reported:
            self._listener = _conn.RemovalListener(
                cfg["url"], self._on_removed, prefix=self.key_head, **self._opts)
        log.info("PionHiCacheStorage: pages under %r at %s (%s)", self.key_head.decode(),
                 _redact(cfg["url"]), INTERFACE)

    # ---- plumbing
    def _connection(self) -> _conn.BlockConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = _conn.connect(self.config["url"], depth=int(self.config["depth"]), **self._opts)
            self._local.conn = c
            with self._lock:
                self._conns.append(c)
        return c

    def _drop_conn(self, exc: BaseException, what: str) -> None:
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            c.close()
            with self._lock:
                if c in self._conns:
                    self._conns.remove(c)
        self._count(errors=1)
        log.warning("PionHiCacheStorage %s failed: %s", what, exc)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                self.counters[k] += v

    def _key(self, page_hash: str) -> bytes:
        return self.key_head + page_hash.encode()

    def _on_removed(self, key: bytes, event: str) -> None:
        self._count(pages_removed=1)

    def _page_views(self, keys: Sequence[str], host_indices: Any) -> list[tuple[memoryview, ...]]:
        """Per key, the page's regions in the host pool (K then V, or one for MLA)."""
        pool = self.mem_pool_host
        if pool is None:
            raise RuntimeError("register_mem_pool_host was not called")
        if getattr(pool, "layout", _SUPPORTED_LAYOUT) != _SUPPORTED_LAYOUT:
            raise _layout_refusal(pool.layout)
        need = len(keys) * int(pool.page_size)
        if len(host_indices) < need:
            raise ValueError(f"{len(keys)} pages need {need} host indices, got {len(host_indices)}")
        ptrs, sizes = pool.get_page_buffer_meta(host_indices[:need])
        if not keys or len(ptrs) % len(keys):
            raise ValueError(f"host pool gave {len(ptrs)} regions for {len(keys)} pages")
        per = len(ptrs) // len(keys)
        views = [memoryview((ctypes.c_ubyte * int(n)).from_address(int(p))).cast("B")
                 for p, n in zip(ptrs, sizes)]
        return [tuple(views[i * per:(i + 1) * per]) for i in range(len(keys))]

    def _parent(self, extra_info: Any) -> Optional[bytes]:
        prefix = getattr(extra_info, "prefix_keys", None) if extra_info is not None else None
        return self._key(prefix[-1]) if prefix else None

    def _store(self, pkeys: list[bytes], values: list[Any], parent: Optional[bytes]) -> list[bool]:
        """Stores pages (skipping those already stored when configured); per page True
        when it is stored now."""
        c = self._connection()
        ok = [False] * len(pkeys)
        todo = list(range(len(pkeys)))
        if self.config["skip_existing"] and pkeys:
            bm, _ = c.match(pkeys, bitmap=True)
            todo = [i for i in todo if not c.bit(bm, i)]
            for i in range(len(pkeys)):
                if c.bit(bm, i):
                    ok[i] = True
            self._count(pages_skipped=len(pkeys) - len(todo))
        per = max(1, int(self.config["per_command"]))
        # Runs of consecutive pages to write, each chained after the page before it.
        runs: list[list[int]] = []
        for i in todo:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        for run in runs:
            after = pkeys[run[0] - 1] if run[0] > 0 else parent
            replies = c.chain([(pkeys[i], values[i]) for i in run], after=after,
                              px=self._ttl_ms or None, tokens=self._page_tokens(),
                              per_command=per)
            for j, r in enumerate(replies):
                good = not isinstance(r, E.PionError)
                if not good:
                    log.warning("PionHiCacheStorage: storing pages failed: %s", r)
                for i in run[j * per:(j + 1) * per]:
                    ok[i] = good
        return ok

    def _page_tokens(self) -> Optional[int]:
        n = getattr(self.mem_pool_host, "page_size", None)
        return int(n) if n and 0 < int(n) <= 65536 else None

    # ---- SGLang's interface: registration
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        layout = getattr(mem_pool_host, "layout", _SUPPORTED_LAYOUT)
        if layout != _SUPPORTED_LAYOUT:
            raise _layout_refusal(layout)
        self.mem_pool_host = mem_pool_host

    # ---- zero copy (interface_v1)
    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        if not keys:
            return 0
        pkeys = [self._key(k) for k in keys]
        pin = int(self.config["pin_ms"] or 0)
        try:
            n, lease = self._connection().match(pkeys, pin_ms=pin or None)
        except Exception as exc:
            self._drop_conn(exc, "batch_exists")
            return 0
        n = int(n)
        self._count(exists_queries=1, pages_found=n)
        if lease:
            with self._lock:
                self._leases[pkeys[0]] = lease
                while len(self._leases) > 4096:  # the oldest end by their own deadline
                    self._leases.popitem(last=False)
        return n

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Any = None) -> List[bool]:
        if not keys:
            return []
        t0 = time.perf_counter()
        pkeys = [self._key(k) for k in keys]
        try:
            views = self._page_views(keys, host_indices)
        except (ValueError, RuntimeError) as exc:  # never raise into SGLang's IO threads
            log.error("PionHiCacheStorage.batch_get_v1: %s", exc)
            return [False] * len(keys)
        try:
            c = self._connection()
            got = c.get_into(pkeys, views)
            with self._lock:
                lease = self._leases.pop(pkeys[0], 0)
            if lease:
                c.unpin([lease])
        except Exception as exc:
            self._drop_conn(exc, "batch_get_v1")
            return [False] * len(keys)
        want = [sum(v.nbytes for v in page) for page in views]
        ok = [g == w for g, w in zip(got, want)]
        n_ok = sum(ok)
        nbytes = sum(w for w, o in zip(want, ok) if o)
        self._count(pages_loaded=n_ok, pages_load_failed=len(ok) - n_ok, bytes_loaded=nbytes)
        self._record(self._metrics.prefetch_pgs, self._metrics.prefetch_bandwidth, n_ok,
                     nbytes, t0)
        return ok

    def batch_set_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Any = None) -> List[bool]:
        if not keys:
            return []
        t0 = time.perf_counter()
        try:
            views = self._page_views(keys, host_indices)
        except (ValueError, RuntimeError) as exc:
            log.error("PionHiCacheStorage.batch_set_v1: %s", exc)
            return [False] * len(keys)
        values = [_conn.Concat(*page) for page in views]
        try:
            ok = self._store([self._key(k) for k in keys], values, self._parent(extra_info))
        except Exception as exc:
            self._drop_conn(exc, "batch_set_v1")
            return [False] * len(keys)
        n_ok = sum(ok)
        nbytes = sum(v.nbytes for v, o in zip(values, ok) if o)
        self._count(pages_stored=n_ok, pages_store_failed=len(ok) - n_ok, bytes_stored=nbytes)
        self._record(self._metrics.backup_pgs, self._metrics.backup_bandwidth, n_ok, nbytes, t0)
        return ok

    def _record(self, pgs: list, bw: list, n: int, nbytes: int, t0: float) -> None:
        dt = time.perf_counter() - t0
        with self._lock:
            pgs.append(n)
            if dt > 0 and nbytes:
                bw.append(nbytes / dt / 1e9)

    # ---- the copying interface (SGLang without interface_v1)
    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Any:
        return self.batch_get([key], [target_location])[0]

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Any]:
        if not keys:
            return []
        if target_locations is None:
            raise ValueError("PionHiCacheStorage.batch_get reads into target_locations")
        try:
            got = self._connection().get_into([self._key(k) for k in keys],
                                        [_tensor_view(t) for t in target_locations])
        except Exception as exc:
            self._drop_conn(exc, "batch_get")
            return [None] * len(keys)
        return [t if g >= 0 and g == _tensor_view(t).nbytes else None
                for t, g in zip(target_locations, got)]

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        if not keys:
            return True
        if values is None:  # nothing to store (not an error of the connection)
            return False
        try:
            ok = self._store([self._key(k) for k in keys], [_tensor_view(v) for v in values],
                             None)
        except Exception as exc:
            self._drop_conn(exc, "batch_set")
            return False
        self._count(pages_stored=sum(ok))
        return all(ok)

    def exists(self, key: str) -> bool:
        try:
            return self._connection().match([self._key(key)])[0] == 1
        except Exception as exc:
            self._drop_conn(exc, "exists")
            return False

    # ---- housekeeping
    def clear(self) -> None:
        """Removes every page under this adapter's ``key_prefix`` (all models and ranks
        sharing it), nothing else."""
        pattern = _glob_escape(f"{self.config['key_prefix']}|".encode()) + b"*"
        try:
            n = self._connection().delete_matching(pattern)
        except Exception as exc:
            self._drop_conn(exc, "clear")
            return
        log.info("PionHiCacheStorage: cleared %d pages under %r", n,
                 self.config["key_prefix"])

    def get_stats(self) -> Any:
        """SGLang's ``StorageMetrics`` for the calls since the last ``get_stats``
        (pages and GB/s per batch, loads and stores)."""
        cls = _metrics_class()
        with self._lock:
            m, self._metrics = self._metrics, _StorageMetrics()
        return cls(prefetch_pgs=m.prefetch_pgs, backup_pgs=m.backup_pgs,
                   prefetch_bandwidth=m.prefetch_bandwidth,
                   backup_bandwidth=m.backup_bandwidth)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()
        self._local = threading.local()


def _glob_escape(b: bytes) -> bytes:
    out = bytearray()
    for ch in b:
        if ch in b"*?[]\\":
            out += b"\\"
        out.append(ch)
    return bytes(out)


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url


_built: dict[Any, type] = {}


def storage_class(base: Optional[type] = None) -> type:
    """``PionHiCacheStorage`` built over ``base`` (default: SGLang's ``HiCacheStorage``,
    imported now). Built once per base."""
    if base is None:
        from sglang.srt.mem_cache.hicache_storage import HiCacheStorage
        base = HiCacheStorage
    cls = _built.get(base)
    if cls is None:
        def body(ns: dict) -> None:
            ns["__module__"] = __name__
            ns["__qualname__"] = "PionHiCacheStorage"
            ns["__doc__"] = ("SGLang HiCache L3 storage on pion (see the module "
                             "pion.integrations.sglang).")
        cls = types.new_class("PionHiCacheStorage", (_PionHiCacheStorage, base), {}, body)
        _built[base] = cls
    return cls


def __getattr__(name: str) -> Any:
    if name == "PionHiCacheStorage":
        return storage_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
