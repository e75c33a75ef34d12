"""asyncio client of pion-server, on ``redis.asyncio``: the data-path methods of
:class:`pion.PionClient` as coroutines, for callers that live in an event loop::

    from pion.asyncio import AsyncPionClient

    async with AsyncPionClient(port=1974) as c:
        if await c.kv_prefix_lookup(ns):
            k = await c.v_fetch_range(ns + "_pk", 0, 0, n, fmt="F16")
        async with c.pipeline() as p:
            p.v_fetch_range(ns + "_pk", 0, 0, n, fmt="F16")
            p.v_fetch_range(ns + "_pv", 0, 0, n, fmt="F16")
            k, v = await p.execute()

Methods, arguments and results are those of :class:`pion.pipeline.Commands` (the
same conversions as the blocking client; ``FMT NATIVE`` needs ``dim``); errors
are the same :mod:`pion.errors` classes. Commands go through a
``redis.asyncio`` connection pool; ``V.FETCH`` replies are read on the client's
own asyncio connections (same address, TLS settings, credentials and database as
the pool), each bulk with ``readexactly``, so a reply of many MiB costs time linear
in its size. Fetched arrays are read-only views of the received bytes.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence

import redis.asyncio as aredis
import redis.exceptions as rex

from . import _fetch
from . import errors as E
from .client import _raw
from .pipeline import Commands, _plain

__all__ = ["AsyncPionClient", "AsyncPipeline"]


class _AsyncReader:
    """RESP replies from an asyncio StreamReader (bulks as uint8 numpy arrays)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def read(self) -> Any:
        import numpy as np

        line = (await self.reader.readuntil(b"\r\n"))[:-2]
        t, rest = line[:1], line[1:]
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = await self.reader.readexactly(n + 2)
            return np.frombuffer(data, dtype=np.uint8, count=n)
        if t in (b"*", b">", b"~"):
            n = int(rest)
            return None if n < 0 else [await self.read() for _ in range(n)]
        if t == b"+":
            return rest
        if t == b"-":
            return E.error_from_reply(rest.decode("utf-8", "replace"))
        if t == b":":
            return int(rest)
        if t == b"_":
            return None
        raise E.UnexpectedReplyError(f"unexpected reply type {line[:20]!r}")


class _AsyncFetchConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.resp = _AsyncReader(reader)

    @classmethod
    async def open(cls, pool: Any) -> "_AsyncFetchConnection":
        kw = pool.connection_kwargs
        timeout = kw.get("socket_connect_timeout") or kw.get("socket_timeout")
        if pool.connection_class is aredis.UnixDomainSocketConnection:
            coro = asyncio.open_unix_connection(kw["path"])
        else:
            host = kw.get("host", "localhost")
            tls = _fetch._tls_context(kw) if pool.connection_class is aredis.SSLConnection else None
            coro = asyncio.open_connection(host, kw.get("port", 6379), ssl=tls,
                                           server_hostname=host if tls else None)
        reader, writer = await asyncio.wait_for(coro, timeout)
        conn = cls(reader, writer)
        setup: list[tuple[Any, ...]] = []
        if kw.get("password") is not None:
            user = kw.get("username")
            setup.append(("AUTH", user, kw["password"]) if user else ("AUTH", kw["password"]))
        if kw.get("db"):
            setup.append(("SELECT", kw["db"]))
        if kw.get("client_name"):
            setup.append(("CLIENT", "SETNAME", kw["client_name"]))
        try:
            for r in await conn.call_many(setup, kw.get("socket_timeout")):
                if isinstance(r, E.PionError):
                    raise r
        except BaseException:
            conn.close()
            raise
        return conn

    async def call_many(self, commands: Sequence[Sequence[Any]], timeout: float | None) -> list[Any]:
        from . import _resp

        if not commands:
            return []
        for c in commands:
            for part in _resp.encode_parts(*c):
                self.writer.write(part)

        async def replies() -> list[Any]:
            await self.writer.drain()
            return [await self.resp.read() for _ in commands]
        return await asyncio.wait_for(replies(), timeout)

    def stale(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class AsyncPionClient(Commands):
    """One pion-server endpoint for asyncio code (see the module documentation).

    Args are those of :class:`pion.PionClient` (host, port, password, username,
    socket_timeout, socket_connect_timeout, max_connections, retries,
    ``redis_client``: a ``redis.asyncio.Redis`` to use, and ``**redis_kwargs``).
    Not thread-safe: use it from one event loop.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 1974, *, password: str | None = None,
                 username: str | None = None, socket_timeout: float | None = 60.0,
                 socket_connect_timeout: float | None = 5.0, max_connections: int | None = None,
                 retries: int = 1, redis_client: aredis.Redis | None = None,
                 **redis_kwargs: Any) -> None:
        self.retries = max(0, int(retries))
        if redis_client is None:
            kw: dict[str, Any] = dict(host=host, port=port, password=password, username=username,
                                      socket_timeout=socket_timeout,
                                      socket_connect_timeout=socket_connect_timeout,
                                      decode_responses=False)
            if max_connections is not None:
                kw["max_connections"] = max_connections
            kw.update(redis_kwargs)
            redis_client = aredis.Redis(connection_pool=aredis.ConnectionPool(**kw))
        self.redis = redis_client
        self._idle: list[_AsyncFetchConnection] = []

    async def __aenter__(self) -> "AsyncPionClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the fetch connections and the redis.asyncio pool."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
        await self.redis.connection_pool.disconnect()

    def _add(self, args: Sequence[Any], convert: Callable[[Any], Any] = lambda r: r,
             fetch: bool = False) -> Any:
        return self._one(tuple(args), convert, fetch)

    async def _one(self, args: tuple[Any, ...], convert: Callable[[Any], Any], fetch: bool) -> Any:
        if fetch:
            r = (await self.fetch_pipeline([args]))[0]
            if isinstance(r, E.PionError):
                raise r
            return convert(r)
        return convert(_plain(await self.execute(*args)))

    async def execute(self, *args: Any) -> Any:
        """Sends one raw command; returns the raw reply; errors raise PionError."""
        attempt = 0
        while True:
            try:
                return await self.redis.execute_command(*_raw(args))
            except (rex.ConnectionError, rex.TimeoutError) as e:
                if attempt >= self.retries or isinstance(e, (rex.TimeoutError, rex.BusyLoadingError)):
                    raise E.translate(e) from None
                attempt += 1
                await asyncio.sleep(0.05 * attempt)  # reconnect backoff
            except rex.RedisError as e:
                raise E.translate(e) from None

    def pipeline(self) -> "AsyncPipeline":
        """``async with client.pipeline() as p: p.v_fetch_range(...); await p.execute()``."""
        return AsyncPipeline(self)

    async def raw_pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Raw commands in one round trip; a refused command's PionError in its place."""
        attempt = 0
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for c in commands:
                pipe.execute_command(*_raw(tuple(c)))
            try:
                replies = await pipe.execute(raise_on_error=False)
            except (rex.ConnectionError, rex.TimeoutError) as e:
                if attempt >= self.retries or isinstance(e, (rex.TimeoutError, rex.BusyLoadingError)):
                    raise E.translate(e) from None
                attempt += 1
                await asyncio.sleep(0.05 * attempt)
                continue
            except rex.RedisError as e:
                raise E.translate(e) from None
            return [E.translate(r) if isinstance(r, BaseException) else r for r in replies]

    async def fetch_pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Commands with large bulk replies (V.FETCH) on the client's own connection;
        bulks arrive as uint8 arrays, errors as PionError instances in place."""
        pool = self.redis.connection_pool
        timeout = pool.connection_kwargs.get("socket_timeout")
        attempt = 0
        while True:
            conn = None
            while self._idle:
                c = self._idle.pop()
                if not c.stale():
                    conn = c
                    break
                c.close()
            try:
                if conn is None:
                    conn = await _AsyncFetchConnection.open(pool)
                replies = await conn.call_many([tuple(c) for c in commands], timeout)
            except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
                if conn is not None:
                    conn.close()
                timeout_hit = isinstance(e, asyncio.TimeoutError)
                if attempt >= self.retries or timeout_hit:
                    raise E.PionConnectionError(f"V.FETCH: {e!r}") from None
                attempt += 1
                await asyncio.sleep(0.05 * attempt)
                continue
            except BaseException:
                if conn is not None:
                    conn.close()  # unknown state: never reuse a half-read connection
                raise
            self._idle.append(conn)
            return replies


class AsyncPipeline(Commands):
    """Commands queued for one round trip of an :class:`AsyncPionClient`; every
    command method returns the pipeline."""

    def __init__(self, client: AsyncPionClient) -> None:
        self.client = client
        self._queue: list[tuple[tuple[Any, ...], Callable[[Any], Any], bool]] = []

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._queue.clear()

    def __len__(self) -> int:
        return len(self._queue)

    def _add(self, args: Sequence[Any], convert: Callable[[Any], Any] = lambda r: r,
             fetch: bool = False) -> "AsyncPipeline":
        self._queue.append((tuple(args), convert, fetch))
        return self

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        queue, self._queue = self._queue, []
        if not queue:
            return []
        commands = [args for args, _, _ in queue]
        if any(fetch for _, _, fetch in queue):
            replies = await self.client.fetch_pipeline(commands)
        else:
            replies = await self.client.raw_pipeline(commands)
        out: list[Any] = []
        for (_, convert, fetch), r in zip(queue, replies):
            if isinstance(r, E.PionError):
                if raise_on_error:
                    raise r
                out.append(r)
                continue
            out.append(convert(r if fetch else _plain(r)))
        return out
