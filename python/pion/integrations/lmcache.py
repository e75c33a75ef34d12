"""pion as LMCache's shared KV tier, in both of LMCache's modes.

* :class:`PionNativeConnector`: the connector object of LMCache's multiprocess server's
  ``native_plugin`` L2 adapter (``{"type": "native_plugin", "module_path":
  "pion.integrations.lmcache", "class_name": "PionNativeConnector", "adapter_params":
  {"url": ...}}``). LMCache wraps it in its ``NativeConnectorL2Adapter``, which polls
  :meth:`~PionNativeConnector.event_fd`, calls
  :meth:`~PionNativeConnector.drain_completions` and keeps its lock counts itself, so no
  server pin is taken here. Matched against
  ``lmcache/v1/distributed/l2_adapters/native_connector_l2_adapter.py`` at 99e46618.
* :class:`PionConnectorAdapter` / :class:`PionRemoteConnector`: a remote storage plugin
  (``remote_storage_plugins: ["pion"]``) for LMCache's in-process cache engine: one key
  per chunk holding a small header (LMCache's ``RemoteMetadata`` fields) and the chunk's
  bytes. Matched against ``lmcache/v1/storage_backend/connector/base_connector.py`` at
  78f6e7ee. Both classes subclass LMCache's own base classes, looked up when the names
  are first used (module ``__getattr__``), so this module imports without LMCache.

Evictions, expiries and deletions of the connector's keys are heard through keyspace
notifications (:func:`pion.integrations._conn.ensure_keyspace_events`); ``take_removals``
hands them out and ``removals`` counts them.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import queue
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Optional, Sequence

from . import _conn
from .. import _resp
from .. import errors as E

__all__ = ["PionNativeConnector",  # PionConnectorAdapter, PionRemoteConnector: __getattr__
           "object_key_string", "encode_chunk_header", "decode_chunk_header", "HEADER_SIZE",
           "PLUGIN_TYPE", "MATCHED"]

log = logging.getLogger("pion.integrations.lmcache")

PLUGIN_TYPE = "pion"
MATCHED = {
    "native_plugin": ("LMCache/LMCache",
                      "lmcache/v1/distributed/l2_adapters/native_connector_l2_adapter.py",
                      "99e46618"),
    "remote_storage_plugin": ("LMCache/LMCache",
                              "lmcache/v1/storage_backend/connector/base_connector.py",
                              "78f6e7ee"),
}

_FAILURES = (OSError, ConnectionError, E.PionError, _resp.ProtocolError)


def object_key_string(model_name: str, kv_rank: int, chunk_hash: bytes,
                      cache_salt: str = "") -> str:
    """The key LMCache's MP server hands a native connector for an object:
    ``<model_name>@<kv_rank as 8 hex digits>@<chunk hash hex>[@<cache_salt>]``."""
    base = f"{model_name}@{kv_rank:08x}@{bytes(chunk_hash).hex()}"
    return f"{base}@{cache_salt}" if cache_salt else base


class _Removals:
    """Keyspace notifications for one connector: makes sure the server sends them and
    keeps the removed keys (under the connector's prefix) until taken."""

    def __init__(self, url: str, conn: _conn.BlockConnection, prefix: bytes, keep: int,
                 options: dict[str, Any]) -> None:
        self.count = 0
        self.by_event: collections.Counter[str] = collections.Counter()
        self._heard: collections.deque[tuple[str, str]] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self._strip = len(prefix)
        self.listener: _conn.RemovalListener | None = None
        if _conn.ensure_keyspace_events(conn):
            self.listener = _conn.RemovalListener(url, self._on_removed, prefix=prefix,
                                                  **options)

    def _on_removed(self, key: bytes, event: str) -> None:
        with self._lock:
            self.count += 1
            self.by_event[event] += 1
            self._heard.append((key[self._strip:].decode("utf-8", "replace"), event))

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            out = list(self._heard)
            self._heard.clear()
        return out

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None


def _conn_options(socket_timeout: float | None, socket_connect_timeout: float | None,
                  extra: dict[str, Any] | None) -> dict[str, Any]:
    opts = dict(extra or {})
    if socket_timeout is not None:
        opts["socket_timeout"] = float(socket_timeout)
    if socket_connect_timeout is not None:
        opts["socket_connect_timeout"] = float(socket_connect_timeout)
    return opts


# --------------------------------------------------------------------------- native plugin

class _Batch:
    """One submitted batch: its tiles finish on worker threads; the last one files the
    completion."""

    __slots__ = ("fid", "op", "results", "errors", "remaining", "lock")

    def __init__(self, fid: int, op: str, n: int, tiles: int) -> None:
        self.fid = fid
        self.op = op
        self.results = [False] * n
        self.errors: list[str] = []
        self.remaining = tiles
        self.lock = threading.Lock()


class PionNativeConnector:
    """LMCache's native connector protocol over pion (pure Python, thread-safe).

    ``num_workers`` threads each own one pipelined connection; a get/set/delete batch is
    split into one tile per worker, an exists batch is one ``KV.BLOCK.MATCH ... BITMAP``
    on one worker. Every completion is a tuple ``(future_id, ok, error, result_bools)``:

    * get: ``result_bools[i]`` is True when key i's value filled its memoryview exactly
      (received into it with ``recv_into``); a missing key is False, not an error.
    * set: ``result_bools[i]`` is True when key i was stored; ``ok`` only when all were.
    * exists: key i's bit of the MATCH bitmap.
    * delete: True when key i existed and was removed.

    ``ok`` is False (and ``error`` says why) when the server could not be reached or
    answered an error. ``key_prefix`` is put before every key (LMCache's key already names
    the model and KV rank, so it is optional); ``ttl_s`` gives stored keys a TTL.
    """

    def __init__(self, url: str, key_prefix: str | bytes = "", num_workers: int = 4, depth: int = 64,
                 ttl_s: float | None = None, socket_timeout: float | None = 30.0,
                 socket_connect_timeout: float | None = 10.0, listen_removals: bool = True,
                 max_removals_kept: int = 65536,
                 connection_options: dict[str, Any] | None = None) -> None:
        if int(num_workers) < 1:
            raise ValueError("num_workers must be > 0")
        self.url = url
        self.key_prefix = key_prefix.encode() if isinstance(key_prefix, str) else bytes(key_prefix)
        self.num_workers = int(num_workers)
        self.depth = max(1, int(depth))
        self.px = int(float(ttl_s) * 1000) if ttl_s else None
        self._options = _conn_options(socket_timeout, socket_connect_timeout, connection_options)
        # The first connection checks the URL and credentials now (a bad URL fails here,
        # not on the first batch); it becomes worker 0's.
        first = _conn.connect(url, depth=self.depth, **self._options)
        self.removals: _Removals | None = None
        try:
            if listen_removals:
                self.removals = _Removals(url, first, self.key_prefix, max_removals_kept,
                                          self._options)
        except BaseException:
            first.close()
            raise
        # os.eventfd (Linux, Python 3.10+) is missing from Debian mypy's stubs.
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # type: ignore[attr-defined]
        self._lock = threading.Lock()
        self._done: collections.deque[tuple[int, bool, str, Optional[list[bool]]]] = \
            collections.deque()
        self._next_fid = 1
        self._closed = False
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._workers = [threading.Thread(target=self._worker, args=(first if i == 0 else None,),
                                          name=f"pion-lmcache-{i}", daemon=True)
                         for i in range(self.num_workers)]
        for t in self._workers:
            t.start()

    # ---- the protocol
    def event_fd(self) -> int:
        """An eventfd that becomes readable when a completion is waiting; it stays
        readable until :meth:`drain_completions` clears it."""
        return self._efd

    def submit_batch_get(self, keys: Sequence[str], memoryviews: Sequence[Any]) -> int:
        views = self._views(keys, memoryviews)
        ks = self._keys(keys)

        def run(c: _conn.BlockConnection, lo: int, hi: int, b: _Batch) -> None:
            got = c.get_into(ks[lo:hi], views[lo:hi])
            for j, n in enumerate(got):
                b.results[lo + j] = n == views[lo + j].nbytes
        return self._submit("get", len(ks), run)

    def submit_batch_set(self, keys: Sequence[str], memoryviews: Sequence[Any]) -> int:
        views = self._views(keys, memoryviews)
        ks = self._keys(keys)
        px = self.px

        def run(c: _conn.BlockConnection, lo: int, hi: int, b: _Batch) -> None:
            replies = c.set_many(list(zip(ks[lo:hi], views[lo:hi])), px=px)
            for j, r in enumerate(replies):
                ok = not isinstance(r, E.PionError)
                b.results[lo + j] = ok
                if not ok:
                    b.errors.append(str(r))
        return self._submit("set", len(ks), run)

    def submit_batch_exists(self, keys: Sequence[str]) -> int:
        ks = self._keys(keys)

        def run(c: _conn.BlockConnection, lo: int, hi: int, b: _Batch) -> None:
            bitmap, _ = c.match(ks, bitmap=True)
            for i in range(len(ks)):
                b.results[i] = c.bit(bitmap, i)
        return self._submit("exists", len(ks), run, tiles=1)

    def submit_batch_delete(self, keys: Sequence[str]) -> int:
        ks = self._keys(keys)

        def run(c: _conn.BlockConnection, lo: int, hi: int, b: _Batch) -> None:
            replies = c.run_pipelined([("UNLINK", k) for k in ks[lo:hi]])
            for j, r in enumerate(replies):
                if isinstance(r, E.PionError):
                    b.errors.append(str(r))
                else:
                    b.results[lo + j] = int(r) == 1
        return self._submit("delete", len(ks), run)

    def drain_completions(self) -> list[tuple[int, bool, str, Optional[list[bool]]]]:
        """Every completion filed since the last call; clears the eventfd first, so a
        completion filed while this runs leaves it readable again."""
        try:
            os.eventfd_read(self._efd)  # type: ignore[attr-defined]
        except (BlockingIOError, OSError):
            pass
        with self._lock:
            out = list(self._done)
            self._done.clear()
        return out

    def close(self) -> None:
        """Stops the workers (batches still queued are dropped), closes the connections,
        the removal listener and the eventfd. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._workers:
            self._tasks.put(None)
        for t in self._workers:
            t.join(timeout=10)
        if self.removals is not None:
            self.removals.close()
        try:
            os.close(self._efd)
        except OSError:
            pass

    # ---- extras (not part of LMCache's protocol)
    def take_removals(self) -> list[tuple[str, str]]:
        """``(key, event)`` for each of this connector's keys the server removed
        (``evicted``, ``expired`` or ``del``) since the last call; key without prefix."""
        return self.removals.take() if self.removals is not None else []

    # ---- internals
    def _keys(self, keys: Sequence[str | bytes]) -> list[bytes]:
        p = self.key_prefix
        return [p + (k.encode() if isinstance(k, str) else bytes(k)) for k in keys]

    @staticmethod
    def _views(keys: Sequence[Any], memoryviews: Sequence[Any]) -> list[memoryview]:
        if len(keys) != len(memoryviews):
            raise ValueError("keys and memoryviews size mismatch")
        return [memoryview(m).cast("B") if memoryview(m).format != "B" else memoryview(m)
                for m in memoryviews]

    def _submit(self, op: str, n: int, run: Callable[..., None], tiles: int | None = None) -> int:
        with self._lock:
            if self._closed:
                raise RuntimeError("PionNativeConnector is closed")
            fid = self._next_fid
            self._next_fid += 1
        if n == 0:
            self._file(fid, True, "", [])
            return fid
        tiles = min(n, tiles or self.num_workers)
        size = -(-n // tiles)
        bounds = [(lo, min(n, lo + size)) for lo in range(0, n, size)]
        batch = _Batch(fid, op, n, len(bounds))
        for lo, hi in bounds:
            self._tasks.put((run, lo, hi, batch))
        return fid

    def _file(self, fid: int, ok: bool, error: str, results: Optional[list[bool]]) -> None:
        with self._lock:
            if self._closed:
                return
            self._done.append((fid, ok, error, results))
        os.eventfd_write(self._efd, 1)  # type: ignore[attr-defined]

    def _finish(self, batch: _Batch, error: str | None) -> None:
        with batch.lock:
            if error:
                batch.errors.append(error)
            batch.remaining -= 1
            if batch.remaining:
                return
        errs = batch.errors
        ok = not errs
        if batch.op == "set" and ok:
            ok = all(batch.results)
        text = "; ".join(dict.fromkeys(errs)) if errs else (
            "" if ok else f"{batch.results.count(False)} of {len(batch.results)} keys "
            "not stored")
        self._file(batch.fid, ok, text, batch.results)

    def _worker(self, conn: _conn.BlockConnection | None) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                break
            run, lo, hi, batch = task
            error = None
            try:
                if conn is None:
                    conn = _conn.connect(self.url, depth=self.depth, **self._options)
                run(conn, lo, hi, batch)
            except _FAILURES as exc:
                error = f"{type(exc).__name__}: {exc}"
                if conn is not None and not isinstance(exc, E.CommandError):
                    conn.close()  # unknown state: reconnect for the next tile
                    conn = None
            except Exception as exc:  # a bug must still complete the batch
                log.exception("pion lmcache worker")
                error = f"{type(exc).__name__}: {exc}"
            self._finish(batch, error)
        if conn is not None:
            conn.close()


# --------------------------------------------------------------------------- remote plugin

# A chunk's value: this header, then the chunk's bytes. The header carries LMCache's
# RemoteMetadata fields (length, shape, dtype, memory format), little-endian:
# magic "PLM1", format (the MemoryFormat's value, u32), length (u64), ndim (u32),
# reserved (u32), dtype name (24 bytes, NUL padded, e.g. "bfloat16"), shape (4 x u64).
_HEADER = struct.Struct("<4sIQII24s4Q")
HEADER_SIZE = _HEADER.size  # 80
_MAGIC = b"PLM1"


def encode_chunk_header(length: int, shape: Sequence[int], dtype: Any, fmt: Any) -> bytes:
    """The header stored before a chunk's bytes (``dtype`` a torch dtype or its name,
    ``fmt`` an LMCache MemoryFormat or its integer value)."""
    dims = [int(d) for d in shape]
    if len(dims) > 4:
        raise ValueError(f"chunk shape has {len(dims)} dimensions (at most 4)")
    name = str(dtype).replace("torch.", "").encode()
    if len(name) > 24:
        raise ValueError(f"dtype name too long: {name!r}")
    value = int(getattr(fmt, "value", fmt))
    return _HEADER.pack(_MAGIC, value, int(length), len(dims), 0, name,
                        *(dims + [0] * (4 - len(dims))))


def decode_chunk_header(head: bytes) -> tuple[int, tuple[int, ...], str, int]:
    """``(length, shape, dtype name, format value)``; ValueError when it is no header."""
    magic, fmt, length, ndim, _, name, *dims = _HEADER.unpack(head)
    if magic != _MAGIC or ndim > 4:
        raise ValueError("not a pion LMCache chunk")
    return length, tuple(dims[:ndim]), name.rstrip(b"\0").decode(), fmt


def _byte_view(memory_obj: Any) -> memoryview:
    view = memory_obj.byte_array
    view = view if isinstance(view, memoryview) else memoryview(view)
    return view if view.format == "B" else view.cast("B")


class _ConnPool:
    """Idle BlockConnections for the remote connector's threads."""

    def __init__(self, url: str, depth: int, options: dict[str, Any]) -> None:
        self.url, self.depth, self.options = url, depth, options
        self._idle: list[_conn.BlockConnection] = []
        self._lock = threading.Lock()

    def run(self, fn: Callable[[_conn.BlockConnection], Any]) -> Any:
        with self._lock:
            c = self._idle.pop() if self._idle else None
        if c is None:
            c = _conn.connect(self.url, depth=self.depth, **self.options)
        try:
            out = fn(c)
        except BaseException as exc:
            if isinstance(exc, E.CommandError):
                self._give(c)
            else:
                c.close()  # half-read: never reuse
            raise
        self._give(c)
        return out

    def _give(self, c: _conn.BlockConnection) -> None:
        with self._lock:
            self._idle.append(c)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


def _plugin_settings(config: Any, plugin_name: str) -> dict[str, Any]:
    """``remote_storage_plugin.<plugin_name>.<setting>`` entries of LMCache's
    ``extra_config`` (module_path and class_name left out)."""
    extra = getattr(config, "extra_config", None) or {}
    head = f"remote_storage_plugin.{plugin_name}."
    return {k[len(head):]: v for k, v in extra.items()
            if k.startswith(head) and k[len(head):] not in ("module_path", "class_name")}


class _PionRemoteConnectorImpl:
    """The body of :class:`PionRemoteConnector` (which adds LMCache's RemoteConnector
    as a base). One key per chunk, ``key_prefix + CacheEngineKey.to_string()``; its value
    is :func:`encode_chunk_header` then the chunk's bytes."""

    def __init__(self, url: str, loop: Any = None, local_cpu_backend: Any = None,
                 config: Any = None, metadata: Any = None, plugin_name: str | None = None,
                 *, key_prefix: str = "", ttl_s: float | None = None, depth: int = 64,
                 num_threads: int = 4, socket_timeout: float | None = 30.0,
                 socket_connect_timeout: float | None = 10.0, listen_removals: bool = True,
                 max_removals_kept: int = 65536) -> None:
        mro = type(self).__mro__
        base = next((c for c in mro[mro.index(_PionRemoteConnectorImpl) + 1:]
                     if "__init__" in c.__dict__), object)
        if base is not object:  # 78f6e7ee's RemoteConnector has none; later ones may
            base_init = base.__dict__["__init__"]
            try:
                base_init(self, config, metadata)
            except TypeError:
                base_init(self)
        self.url = url
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name or PLUGIN_TYPE
        self.key_prefix = key_prefix.encode()
        self.px = int(float(ttl_s) * 1000) if ttl_s else None
        self._options = _conn_options(socket_timeout, socket_connect_timeout, None)
        self._pool = _ConnPool(url, max(1, int(depth)), self._options)
        first = _conn.connect(url, depth=max(1, int(depth)), **self._options)
        self.removals: _Removals | None = None
        try:
            if listen_removals:
                self.removals = _Removals(url, first, self.key_prefix, max_removals_kept,
                                          self._options)
        except BaseException:
            first.close()
            raise
        self._pool._give(first)
        self._executor = ThreadPoolExecutor(max_workers=max(1, int(num_threads)),
                                            thread_name_prefix="pion-lmcache-remote")

    # ---- plumbing
    def _key(self, key: Any) -> bytes:
        return self.key_prefix + key.to_string().encode()

    async def _run(self, fn: Callable[[_conn.BlockConnection], Any]) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._pool.run, fn)

    def _memory_format(self, value: int) -> Any:
        from lmcache.v1.memory_management import MemoryFormat
        return MemoryFormat(value)

    def _get_many(self, c: _conn.BlockConnection, keys: Sequence[Any]) -> list[Any]:
        import torch
        objs: list[Any] = [None] * len(keys)

        def place(i: int, head: bytes, rest: int) -> Any:
            try:
                length, shape, dtype, fmt = decode_chunk_header(head)
            except (ValueError, struct.error):
                log.warning("pion: %r is no LMCache chunk", keys[i])
                return None
            if length != rest:
                return None
            obj = self.local_cpu_backend.allocate(torch.Size(shape), getattr(torch, dtype),
                                                  self._memory_format(fmt))
            if obj is None:
                log.warning("Failed to allocate memory during remote receive")
                return None
            objs[i] = obj
            view = _byte_view(obj)
            return view[:rest] if view.nbytes >= rest else None

        got = c.get_split([self._key(k) for k in keys], HEADER_SIZE, place)
        out: list[Any] = []
        for obj, n in zip(objs, got):
            if obj is not None and n < 0:
                obj.ref_count_down()  # allocated, then the value could not land
                obj = None
            out.append(obj)
        return out

    def _put_many(self, c: _conn.BlockConnection, keys: Sequence[Any],
                  memory_objs: Sequence[Any]) -> None:
        items = []
        for k, obj in zip(keys, memory_objs):
            view = _byte_view(obj)
            head = encode_chunk_header(view.nbytes, obj.get_shape(), obj.get_dtype(),
                                       obj.get_memory_format())
            items.append((self._key(k), [head, view]))
        for r in c.set_many(items, px=self.px):
            if isinstance(r, E.PionError):
                raise r

    # ---- RemoteConnector's abstract methods
    async def exists(self, key: Any) -> bool:
        return await self._run(lambda c: c.match([self._key(key)])[0] == 1)

    def exists_sync(self, key: Any) -> bool:
        return self._pool.run(lambda c: c.match([self._key(key)])[0] == 1)

    async def get(self, key: Any) -> Optional[Any]:
        return (await self._run(lambda c: self._get_many(c, [key])))[0]

    async def put(self, key: Any, memory_obj: Any):
        await self._run(lambda c: self._put_many(c, [key], [memory_obj]))

    async def list(self) -> List[str]:
        def scan(c: _conn.BlockConnection) -> list[str]:
            out: list[str] = []
            cursor = b"0"
            pattern = _glob_escape(self.key_prefix) + b"*"
            while True:
                cursor, keys = c.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
                out += [bytes(k)[len(self.key_prefix):].decode("utf-8", "replace")
                        for k in keys]
                if bytes(cursor) == b"0":
                    return out
        return await self._run(scan)

    async def close(self):
        self.close_sync()

    def close_sync(self) -> None:
        self._executor.shutdown(wait=True)
        self._pool.close()
        if self.removals is not None:
            self.removals.close()

    # ---- optional capabilities
    def support_ping(self) -> bool:
        return True

    async def ping(self) -> int:
        try:
            return 0 if await self._run(lambda c: c.call("PING")) == b"PONG" else 1
        except _FAILURES:
            return 1

    def support_batched_get(self) -> bool:
        return True

    async def batched_get(self, keys: List[Any]) -> List[Optional[Any]]:
        return await self._run(lambda c: self._get_many(c, keys))

    def support_batched_put(self) -> bool:
        return True

    async def batched_put(self, keys: List[Any], memory_objs: List[Any]):
        await self._run(lambda c: self._put_many(c, keys, memory_objs))

    def support_batched_contains(self) -> bool:
        return True

    def batched_contains(self, keys: List[Any],
                         stop_after_first_not_exits: Optional[bool] = None) -> Any:
        """One KV.BLOCK.MATCH for all keys. Called as LMCache's RemoteBackend calls it,
        ``batched_contains(keys)``, it answers the number of leading keys present (the
        prefix-hit count the backend slices ``keys`` with). With the flag some LMCache
        trees declare, it answers one bool per key: False after the first miss when the
        flag is true, else each key's own bit (MATCH ... BITMAP)."""
        ks = [self._key(k) for k in keys]
        if stop_after_first_not_exits is None:
            return self._pool.run(lambda c: c.match(ks)[0])
        if stop_after_first_not_exits:
            n = self._pool.run(lambda c: c.match(ks)[0])
            return [i < n for i in range(len(ks))]
        bitmap = self._pool.run(lambda c: c.match(ks, bitmap=True)[0])
        return [_conn.BlockConnection.bit(bitmap, i) for i in range(len(ks))]

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: List[Any],
                                     pin: bool = False) -> int:
        """The number of leading keys present: one KV.BLOCK.MATCH. ``pin`` is not
        taken to the server (this interface has no unpin)."""
        ks = [self._key(k) for k in keys]
        return await self._run(lambda c: c.match(ks)[0])

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id: str, keys: List[Any]) -> List[Any]:
        """The memory objects of the leading keys found (a prefix; objects read after
        the first miss are released)."""
        objs = await self.batched_get(keys)
        out: list[Any] = []
        for i, o in enumerate(objs):
            if o is None:
                for rest in objs[i + 1:]:
                    if rest is not None:
                        rest.ref_count_down()
                break
            out.append(o)
        return out

    def remove_sync(self, key: Any) -> bool:
        return self._pool.run(lambda c: c.delete([self._key(key)])) == 1

    def take_removals(self) -> List[tuple[str, str]]:  # `list` is a method of this class
        """``(key, event)`` for each chunk key the server removed since the last call."""
        return self.removals.take() if self.removals is not None else []

    def __repr__(self) -> str:
        return f"<PionRemoteConnector {self.plugin_name}>"


def _glob_escape(b: bytes) -> bytes:
    out = bytearray()
    for ch in b:
        if ch in b"*?[]\\":
            out += b"\\"
        out.append(ch)
    return bytes(out)


class _PionConnectorAdapterImpl:
    """The body of :class:`PionConnectorAdapter`: matches ``plugin://pion`` and
    ``plugin://pion.<instance>`` and builds a :class:`PionRemoteConnector` from the
    plugin's ``extra_config`` entries (``url`` required)."""

    def __init__(self) -> None:
        super().__init__("pion://")  # type: ignore[call-arg]

    def can_parse(self, url: str) -> bool:
        if url.startswith("plugin://"):
            return url[len("plugin://"):].split(".", 1)[0] == PLUGIN_TYPE
        return url.startswith("pion://")

    def create_connector(self, context: Any) -> Any:
        name = context.plugin_name or (context.url[len("plugin://"):]
                                       if context.url.startswith("plugin://") else PLUGIN_TYPE)
        settings = _plugin_settings(context.config, name)
        url = settings.pop("url", None)
        if url is None and context.url.startswith("pion://"):
            url = "redis://" + context.url[len("pion://"):]
        if not url:
            raise ValueError(f"remote_storage_plugin.{name}.url is not set "
                             "(redis://, rediss:// or unix:// URL of the pion server)")
        cls = __getattr__("PionRemoteConnector")
        return cls(url, context.loop, context.local_cpu_backend, context.config,
                   context.metadata, name, **settings)


_built: dict[str, type] = {}
_build_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    """PionRemoteConnector and PionConnectorAdapter, built on first use as subclasses of
    LMCache's RemoteConnector and ConnectorAdapter (LMCache is imported only then)."""
    if name not in ("PionRemoteConnector", "PionConnectorAdapter"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _build_lock:
        if name not in _built:
            if name == "PionRemoteConnector":
                from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
                base: Any = RemoteConnector
                body: type = _PionRemoteConnectorImpl
            else:
                from lmcache.v1.storage_backend.connector import ConnectorAdapter
                base = ConnectorAdapter
                body = _PionConnectorAdapterImpl
            _built[name] = type(name, (body, base), {"__module__": __name__,
                                                     "__doc__": body.__doc__})
        return _built[name]


def _forget_engine_classes() -> None:
    """Drops the classes built from LMCache's bases (tests that swap fake LMCache
    modules call this)."""
    with _build_lock:
        _built.clear()
