"""pion as a secondary tier of vLLM's tiered KV offloading: :class:`PionTier`.

vLLM (``kv_connector: OffloadingConnector``, ``spec_name: TieringOffloadingSpec``) keeps
offloaded KV chunks in a CPU primary tier and cascades them to the secondary tiers listed
in ``secondary_tiers``; an entry ``{"type": "PionTier", "module_path":
"pion.integrations.vllm", "url": ..., "key_prefix": ...}`` makes pion one of them, shared
by every vLLM instance that points at it. Matched against vLLM's
``vllm/v1/kv_offload/tiering/base.py`` at upstream commit cda0f3248538
(``SecondaryTierManager``, ``TransferJob``, ``JobResult``; the older ``JobMetadata`` with
``block_ids`` and ``get_finished()`` are accepted too). docs/integrations/vllm.md has the
configuration and what it does on the server.

Nothing of vLLM is imported when this module is: ``PionTier`` is built on first access
(the module's ``__getattr__``) as a subclass of vLLM's ``SecondaryTierManager``, so the
module loads without vLLM, and tests can put a stand-in base class under the same module
names.

What each call does (all run on vLLM's scheduler thread and never wait on the network):

* ``lookup(key)``: HIT/MISS from what an earlier probe found; a key not probed yet is
  remembered and answered RETRY. ``on_schedule_end`` sends the keys remembered during the
  step as **one** ``KV.BLOCK.MATCH n k1 .. kn BITMAP PIN ms`` from a background thread;
  the keys found are pinned under one lease until they are loaded or their requests end.
* ``submit_store(job)``: the job's slots of the primary view go out as pipelined
  ``KV.BLOCK.CHAIN [AFTER prev] [PX ttl] HASHES .. TOKENS .. [FORMAT ..] k v ...``
  (values are slices of the view: no copy), linked after the request's previous chunk.
* ``submit_load(job)``: pipelined GETs whose values are received with ``recv_into``
  straight into the job's slots, then ``KV.BLOCK.UNPIN`` of the leases no key needs any
  more. A key that is gone makes the job partly successful (``successful_keys``).
* ``get_finished_jobs()``, ``drain_jobs()``, ``touch()`` (a MATCH without pin, which
  stamps the LRU), ``take_events()`` (chunks stored, and chunks removed from pion as its
  keyspace notifications tell), ``shutdown()``.

Keys on the server: ``<key_prefix><hex of vLLM's 36-byte offload key>`` (block hash and
KV-cache group). vLLM's block hash names tokens only, so ``key_prefix`` must name the
model, dtype and parallel layout (two deployments sharing a pion would read each other's
bytes otherwise).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import queue
import re
import struct
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable, Mapping, cast

from . import _conn
from ..hashing import vllm_event_hash

__all__ = ["PionTier", "MATCHED_UPSTREAM", "tier_class"]

PionTier: type  # built on first access by the module's __getattr__ (see tier_class)

log = logging.getLogger("pion.integrations.vllm")

MATCHED_UPSTREAM = "vllm-project/vllm vllm/v1/kv_offload/tiering/base.py @ cda0f3248538"
_TIERING_MODULE = "vllm.v1.kv_offload.tiering.base"
_TYPES_MODULE = "vllm.v1.kv_offload.base"
_EVENTS_MAX = 65536  # events kept when nobody takes them (oldest dropped)


@dataclasses.dataclass
class _KeyState:
    gen: int
    result: bool | None = None  # None: probe pending
    reqs: set = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class _Done:
    job_id: Any
    load: bool
    keys: list
    ok: list  # per key
    seconds: float
    nbytes: int


def _fields(cls: Any) -> set[str]:
    try:
        return {f.name for f in dataclasses.fields(cls)}
    except TypeError:
        return set(inspect.signature(cls).parameters)


def _parse_format(fmt: Any) -> tuple[str, str, int] | None:
    """``{"format": "fp8", "dtype": "bf16", "row": 128}`` or ``"fp8:bf16:128"``."""
    if fmt is None or fmt == "":
        return None
    if isinstance(fmt, str):
        parts = fmt.split(":")
        if len(parts) != 3:
            raise ValueError(f"format {fmt!r}: expected FORMAT:DTYPE:ROW")
        return parts[0], parts[1], int(parts[2])
    if isinstance(fmt, dict):
        try:
            return str(fmt["format"]), str(fmt["dtype"]), int(fmt["row"])
        except KeyError as e:
            raise ValueError(f"format needs keys format, dtype and row (missing {e})") from None
    raise ValueError(f"format {fmt!r}: a dict or a FORMAT:DTYPE:ROW string")


def _redact(url: str) -> str:
    """The URL without its credentials (for logs)."""
    return re.sub(r"//[^/@]*@", "//***@", url)


class _PionTierImpl:
    """Everything of :class:`PionTier` but its vLLM base class (see the module doc)."""

    _vllm_tiering: Any = None  # set on the built class
    _vllm_types: Any = None
    medium: Any  # set by vLLM's base class

    def __init__(self, offloading_spec: Any = None, primary_kv_view: memoryview | None = None,
                 tier_type: str = "PionTier", *, url: str, key_prefix: str | bytes,
                 username: str | None = None, password: str | None = None,
                 ssl_ca_certs: str | None = None, ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None, ssl_cert_reqs: str | None = None,
                 socket_timeout: float = 30.0, socket_connect_timeout: float = 5.0,
                 depth: int = 64, chain_per_command: int = 16, ttl_s: float | None = None,
                 format: Any = None, pin_ms: int = 60000, kv_events: bool | None = None,
                 locality: str | None = "REMOTE", tokens_per_key: int | None = None,
                 vllm_config: Any = None, **unknown: Any) -> None:
        if unknown:
            raise TypeError(f"PionTier: unknown setting(s) {sorted(unknown)} in the "
                            "secondary_tiers entry")
        if primary_kv_view is None:
            raise TypeError("PionTier needs primary_kv_view")
        if not key_prefix:
            raise ValueError("PionTier needs a non-empty key_prefix naming the model, dtype "
                             "and parallel layout (vLLM's block hashes name tokens only)")
        if not 1 <= int(pin_ms) <= 600000:
            raise ValueError("pin_ms must be 1..600000")
        self._init_base(offloading_spec, primary_kv_view, tier_type, vllm_config)
        if not hasattr(self, "tier_type"):
            self.tier_type = tier_type
        view = primary_kv_view
        self._bs = int(cast(tuple, view.strides)[0]) if view.ndim > 1 else int(view.nbytes)
        # vLLM's view is 2-D (slots x slot bytes); slices are taken from a 1-D byte view.
        self._flat = view.cast("B") if (view.ndim != 1 or view.format != "B") else view
        self._prefix = key_prefix.encode() if isinstance(key_prefix, str) else bytes(key_prefix)
        self._ttl_ms = int(ttl_s * 1000) if ttl_s else None
        self._fmt = _parse_format(format)
        self._pin_ms = int(pin_ms)
        self._per_command = max(1, int(chain_per_command))
        self._tokens = tokens_per_key or self._spec_tokens(offloading_spec)
        types = self._vllm_types
        Locality = getattr(types, "Locality", None)
        self.locality = (Locality(locality) if (Locality is not None and locality) else None)
        if kv_events is None:
            cfg = getattr(offloading_spec, "kv_events_config", None)
            kv_events = bool(getattr(cfg, "enable_kv_cache_events", True)) if cfg else True
        self._events: deque | None = deque(maxlen=_EVENTS_MAX) if kv_events else None

        self._url = url
        self._options: dict[str, Any] = {k: v for k, v in dict(
            username=username, password=password, ssl_ca_certs=ssl_ca_certs,
            ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
            socket_timeout=socket_timeout, socket_connect_timeout=socket_connect_timeout).items()
            if v is not None}
        self._depth = int(depth)
        # Scheduler-thread state (lookups).
        self._state: dict[bytes, _KeyState] = {}
        self._req_keys: dict[str, set] = {}
        self._batch: list[tuple[bytes, int]] = []
        self._gen = 0
        self._inflight_lookups = 0
        self._last_stored: dict[str, bytes] = {}
        # Shared with the I/O threads.
        self._lock = threading.Lock()
        self._key_lease: dict[bytes, int] = {}
        self._lease_keys: dict[int, set] = {}
        self._loading: dict[bytes, int] = {}
        self._results: queue.SimpleQueue = queue.SimpleQueue()  # lookup thread -> scheduler
        self._finished: queue.SimpleQueue = queue.SimpleQueue()  # job threads -> scheduler
        self._removed: queue.SimpleQueue = queue.SimpleQueue()  # listener -> scheduler
        self._jobs_cv = threading.Condition()
        self._pending_jobs = 0
        self._closed = False

        conn = self._connect()  # fails start-up on a wrong URL or credentials
        notify = _conn.ensure_keyspace_events(conn)
        try:
            self._listener: Any = _conn.RemovalListener(url, self._on_removed,
                                                        prefix=self._prefix, **self._options)
        except Exception as exc:  # e.g. an ACL user without SUBSCRIBE on __keyevent@*
            log.warning("pion tier %s: cannot subscribe to keyspace notifications (%s): "
                        "removals will not be reported", tier_type, exc)
            self._listener = None
            notify = False
        self._workers: list[tuple[queue.SimpleQueue, threading.Thread]] = []
        self._lookup_q = self._start("pion-vllm-lookup", self._lookup_task, conn)
        self._store_q = self._start("pion-vllm-store", self._store_task, None)
        self._load_q = self._start("pion-vllm-load", self._load_task, None)
        log.info("pion tier %s at %s: key prefix %r, %d-byte chunks, ttl %s, format %s, "
                 "pins %d ms, evictions %s (matched %s)", self.tier_type, _redact(url),
                 self._prefix.decode(errors="replace"), self._bs,
                 f"{ttl_s} s" if ttl_s else "none", self._fmt or "none (bytes as given)",
                 self._pin_ms, "reported" if notify else "NOT reported", MATCHED_UPSTREAM)

    # ---- set-up helpers
    def _init_base(self, spec: Any, view: memoryview, tier_type: str, vllm_config: Any) -> None:
        base_init = super().__init__  # the vLLM base class, next in the MRO
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(base_init).parameters
        except (TypeError, ValueError):
            params = {}
        kw: dict[str, Any] = {"primary_kv_view": view}
        if "offloading_spec" in params:
            kw["offloading_spec"] = spec
        if "vllm_config" in params:
            kw["vllm_config"] = vllm_config
        if "tier_type" in params:
            kw["tier_type"] = tier_type
        if len(params) == 0 or set(params) <= {"self", "args", "kwargs"}:
            base_init()
        else:
            base_init(**kw)

    @staticmethod
    def _spec_tokens(spec: Any) -> int | None:
        per_hash = getattr(spec, "tokens_per_hash", None)
        per_chunk = getattr(spec, "blocks_per_chunk", 1) or 1
        if isinstance(per_hash, int) and 1 <= per_hash * per_chunk <= 65536:
            return per_hash * per_chunk
        return None

    def _connect(self) -> _conn.BlockConnection:
        return _conn.connect(self._url, depth=self._depth, **self._options)

    def _start(self, name: str, task: Callable[[Any, dict], None], conn: Any) -> queue.SimpleQueue:
        q: queue.SimpleQueue = queue.SimpleQueue()
        t = threading.Thread(target=self._worker, args=(q, task, conn), name=name, daemon=True)
        t.start()
        self._workers.append((q, t))
        return q

    def _worker(self, q: queue.SimpleQueue, task: Callable[[Any, dict], None], conn: Any) -> None:
        while True:
            item = q.get()
            if item is None:
                break
            try:
                if conn is None:
                    conn = self._connect()
                task(conn, item)
            except Exception as exc:  # connection trouble: the task reports failure
                log.warning("pion tier %s: %s failed: %s", self.tier_type,
                            threading.current_thread().name, exc)
                if conn is not None:
                    conn.close()
                conn = None
                self._task_failed(item)
        if conn is not None:
            conn.close()

    def _name(self, key: bytes) -> bytes:
        return self._prefix + bytes(key).hex().encode()

    def _slot(self, slot: Any) -> memoryview:
        s = int(slot)
        return self._flat[s * self._bs:(s + 1) * self._bs]

    @staticmethod
    def _slots(job: Any) -> list:
        ids = getattr(job, "chunk_ids", None)
        if ids is None:
            ids = getattr(job, "block_ids")  # the job type before TransferJob
        return list(ids)

    # ---- I/O threads (items are dicts: "kind" and what that kind needs)
    def _lookup_task(self, conn: _conn.BlockConnection, item: dict) -> None:
        kind = item["kind"]
        if kind == "match":
            batch = item["batch"]
            bitmap, lease = conn.match([self._name(k) for k, _ in batch], bitmap=True,
                                       pin_ms=self._pin_ms)
            self._results.put((batch, [conn.bit(bitmap, i) for i in range(len(batch))], lease))
        elif kind == "touch":
            conn.match(item["names"], bitmap=True)
        elif kind == "unpin":
            conn.unpin(item["leases"])

    def _store_task(self, conn: _conn.BlockConnection, item: dict) -> None:
        keys = item["keys"]
        ok = [True] * len(keys)
        if keys:
            pairs = [(self._name(k), self._slot(s)) for k, s in zip(keys, item["slots"])]
            hashes = b"".join(struct.pack("<Q", vllm_event_hash(bytes(k)[:-4])) for k in keys)
            replies = conn.chain(pairs, after=item["after"], px=self._ttl_ms, hashes=hashes,
                                 tokens=self._tokens, per_command=self._per_command,
                                 fmt=self._fmt)
            n = self._per_command
            for i, r in enumerate(replies):
                if r != b"OK":
                    log.warning("pion tier %s: store of job %s: %s", self.tier_type,
                                item["job_id"], r)
                    ok[i * n:(i + 1) * n] = [False] * len(ok[i * n:(i + 1) * n])
        self._job_done(_Done(item["job_id"], False, keys, ok, time.monotonic() - item["t0"],
                             sum(ok) * self._bs))

    def _load_task(self, conn: _conn.BlockConnection, item: dict) -> None:
        keys = item["keys"]
        try:
            got = conn.get_into([self._name(k) for k in keys],
                                [self._slot(s) for s in item["slots"]])
        finally:
            self._loaded(item, conn)
        ok = [g == self._bs for g in got]
        self._job_done(_Done(item["job_id"], True, keys, ok, time.monotonic() - item["t0"],
                             sum(ok) * self._bs))

    def _loaded(self, item: dict, conn: _conn.BlockConnection | None) -> None:
        """A load's keys need their pins no more: release the leases they emptied (once)."""
        if item.get("released"):
            return
        item["released"] = True
        with self._lock:
            for k in item["keys"]:
                n = self._loading.get(k, 0) - 1
                if n > 0:
                    self._loading[k] = n
                else:
                    self._loading.pop(k, None)
            leases = self._release(item["keys"])
        if not leases:
            return
        try:
            if conn is None:
                raise ConnectionError("no connection")
            conn.unpin(leases)
        except Exception:
            self._lookup_q.put({"kind": "unpin", "leases": leases})  # on the other connection

    def _task_failed(self, item: dict) -> None:
        kind = item["kind"]
        if kind == "match":
            self._results.put((item["batch"], [False] * len(item["batch"]), 0))
        elif kind == "store":
            keys = item["keys"]
            self._job_done(_Done(item["job_id"], False, keys, [False] * len(keys), 0.0, 0))
        elif kind == "load":
            self._loaded(item, None)
            keys = item["keys"]
            self._job_done(_Done(item["job_id"], True, keys, [False] * len(keys), 0.0, 0))

    def _job_done(self, done: _Done) -> None:
        self._finished.put(done)
        with self._jobs_cv:
            self._pending_jobs -= 1
            self._jobs_cv.notify_all()

    def _on_removed(self, name: bytes, event: str) -> None:
        self._removed.put(name)

    # ---- lease bookkeeping (callers hold self._lock)
    def _release(self, keys: Iterable[bytes]) -> list[int]:
        done = []
        for k in keys:
            lease = self._key_lease.pop(k, 0)
            if lease:
                s = self._lease_keys.get(lease)
                if s is not None:
                    s.discard(k)
                    if not s:
                        del self._lease_keys[lease]
                        done.append(lease)
        return done

    # ---- scheduler thread: fold in what the threads produced
    def _drain(self) -> None:
        unpins: list[int] = []
        while not self._results.empty():
            batch, found, lease = self._results.get()
            self._inflight_lookups -= 1
            with self._lock:
                for (key, gen), hit in zip(batch, found):
                    st = self._state.get(key)
                    if st is None or st.gen != gen:
                        continue  # its requests ended meanwhile: the pin is not kept
                    st.result = hit
                    if hit and lease:
                        unpins += self._release([key])
                        self._key_lease[key] = lease
                        self._lease_keys.setdefault(lease, set()).add(key)
                if lease and lease not in self._lease_keys:
                    unpins.append(lease)
        if unpins:
            self._lookup_q.put({"kind": "unpin", "leases": unpins})
        if not self._removed.empty():
            gone = []
            while not self._removed.empty():
                name = self._removed.get()
                try:
                    key = bytes.fromhex(name[len(self._prefix):].decode())
                except ValueError:
                    continue
                st = self._state.get(key)
                if st is not None:
                    st.result = False
                gone.append(key)
            self._event(gone, removed=True)

    def _event(self, keys: list, removed: bool) -> None:
        if self._events is None or not keys:
            return
        ev_cls = self._vllm_types.OffloadingEvent
        names = _fields(ev_cls)
        kw: dict[str, Any] = {"keys": list(keys), "medium": self.medium, "removed": removed}
        if "locality" in names:
            kw["locality"] = self.locality
        self._events.append(ev_cls(**kw))

    # ---- SecondaryTierManager
    def lookup(self, key: bytes, req_context: Any) -> Any:
        LookupResult = self._vllm_types.LookupResult
        if not self._results.empty() or not self._removed.empty():
            self._drain()
        st = self._state.get(key)
        if st is None:
            st = _KeyState(self._gen)
            self._gen += 1
            self._state[key] = st
            self._batch.append((key, st.gen))
        req_id = req_context.req_id
        st.reqs.add(req_id)
        self._req_keys.setdefault(req_id, set()).add(key)
        if st.result is None:
            return LookupResult.RETRY
        return LookupResult.HIT if st.result else LookupResult.MISS

    def on_schedule_end(self, context: Any) -> None:
        self._drain()
        if self._batch:
            batch, self._batch = self._batch, []
            self._inflight_lookups += 1
            self._lookup_q.put({"kind": "match", "batch": batch})

    def submit_store(self, job_metadata: Any) -> None:
        keys = list(job_metadata.keys)
        slots = self._slots(job_metadata)
        todo = [(k, s) for k, s in zip(keys, slots)
                if not (self._state.get(k) and self._state[k].result)]  # known present
        req = getattr(getattr(job_metadata, "req_context", None), "req_id", None)
        after = self._last_stored.get(req) if req is not None else None
        if req is not None and keys:
            self._last_stored[req] = self._name(keys[-1])
        with self._jobs_cv:
            self._pending_jobs += 1
        self._store_q.put({"kind": "store", "job_id": job_metadata.job_id,
                           "keys": [k for k, _ in todo], "slots": [s for _, s in todo],
                           "after": after, "t0": time.monotonic()})

    def submit_load(self, job_metadata: Any) -> None:
        keys = list(job_metadata.keys)
        with self._lock:
            for k in keys:
                self._loading[k] = self._loading.get(k, 0) + 1
        with self._jobs_cv:
            self._pending_jobs += 1
        self._load_q.put({"kind": "load", "job_id": job_metadata.job_id, "keys": keys,
                          "slots": self._slots(job_metadata), "t0": time.monotonic()})

    def get_finished_jobs(self) -> list:
        self._drain()
        JobResult = self._vllm_tiering.JobResult
        names = _fields(JobResult)
        out = []
        while not self._finished.empty():
            d: _Done = self._finished.get()
            good = [k for k, o in zip(d.keys, d.ok) if o]
            success = len(good) == len(d.keys)
            kw: dict[str, Any] = {"job_id": d.job_id, "success": success}
            if d.load:
                for k, o in zip(d.keys, d.ok):
                    st = self._state.get(k)
                    if st is not None and not o:
                        st.result = False  # a failed load is not retried from a stale HIT
                if not success and good:
                    kw["successful_keys"] = tuple(good)
            else:
                for k in good:
                    st = self._state.get(k)
                    if st is not None:
                        st.result = True
                self._event(good, removed=False)
            if "transfer_time" in names:
                kw["transfer_time"] = d.seconds
            for size_field in ("transfer_bytes", "transfer_size"):
                if size_field in names:
                    kw[size_field] = d.nbytes
            out.append(JobResult(**kw))
        return out

    def get_finished(self) -> list:
        """The name of :meth:`get_finished_jobs` in vLLM before cda0f3248538."""
        return self.get_finished_jobs()

    def has_pending_work(self) -> bool:
        with self._jobs_cv:
            jobs = self._pending_jobs
        return bool(jobs or self._batch or self._inflight_lookups
                    or not self._finished.empty())

    def drain_jobs(self) -> None:
        with self._jobs_cv:
            while self._pending_jobs > 0:
                self._jobs_cv.wait(timeout=1.0)

    def touch(self, keys: Any, req_context: Any) -> None:
        names = [self._name(k) for k in keys]
        if names:
            self._lookup_q.put({"kind": "touch", "names": names})

    def on_new_request(self, req_context: Any) -> Any:
        ctx = getattr(self._vllm_types, "RequestOffloadingContext", None)
        if ctx is None:
            ctx = getattr(self._vllm_tiering, "RequestOffloadingContext", None)
        return ctx() if ctx is not None else None

    def on_request_finished(self, req_context: Any) -> None:
        req_id = req_context.req_id
        self._last_stored.pop(req_id, None)
        dropped = []
        for key in self._req_keys.pop(req_id, ()):
            st = self._state.get(key)
            if st is None:
                continue
            st.reqs.discard(req_id)
            if not st.reqs:
                del self._state[key]
                dropped.append(key)
        if dropped:
            with self._lock:
                leases = self._release([k for k in dropped if not self._loading.get(k)])
            if leases:
                self._lookup_q.put({"kind": "unpin", "leases": leases})

    def take_events(self) -> Iterable[Any]:
        self._drain()
        out = []
        if self._events is not None:
            while self._events:
                out.append(self._events.popleft())
        return out

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.drain_jobs()
        with self._lock:
            leases = list(self._lease_keys)
            self._lease_keys.clear()
            self._key_lease.clear()
        if leases:
            self._lookup_q.put({"kind": "unpin", "leases": leases})
        for q, _ in self._workers:
            q.put(None)
        for _, t in self._workers:
            t.join(timeout=10)
        if self._listener is not None:
            self._listener.close()

    # ---- for tests and operators
    def key_name(self, key: bytes) -> bytes:
        """The server key a vLLM offload key is stored under."""
        return self._name(key)


_built: dict[str, type] = {}


def tier_class() -> type:
    """``PionTier``: :class:`_PionTierImpl` on vLLM's ``SecondaryTierManager`` (imported
    now), with ``medium`` the storage member of vLLM's ``Medium`` enum."""
    cls = _built.get("PionTier")
    if cls is not None:
        return cls
    try:
        tiering = importlib.import_module(_TIERING_MODULE)
        types = importlib.import_module(_TYPES_MODULE)
    except ImportError as e:
        raise ImportError("pion.integrations.vllm.PionTier needs vLLM with tiered offloading "
                          f"({_TIERING_MODULE}); matched against {MATCHED_UPSTREAM}") from e
    medium_enum = types.Medium
    medium = getattr(medium_enum, "STORAGE", None)
    if medium is None:
        medium = next((m for m in medium_enum if m.name != "CPU"), None)
    cls = type("PionTier", (_PionTierImpl, tiering.SecondaryTierManager), {
        "__module__": __name__,
        "__doc__": _PionTierImpl.__doc__,
        "__qualname__": "PionTier",
        "medium": medium,
        "_vllm_tiering": tiering,
        "_vllm_types": types,
    })
    cls.__doc__ = ("pion as a vLLM secondary tier (see the module documentation); "
                   f"matched against {MATCHED_UPSTREAM}.")
    _built["PionTier"] = cls
    return cls


def __getattr__(name: str) -> Any:
    if name == "PionTier":
        return tier_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
