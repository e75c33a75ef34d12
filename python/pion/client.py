"""Thin command layer over redis-py for every pion-server command (docs/protocol.md).

:class:`PionClient` owns a ``redis.Redis`` with a connection pool (hiredis
parses replies when installed). Each method sends one command (or one pipeline)
and returns Python / numpy values:

* row payloads (``V.FETCH``) become ``numpy`` arrays over the buffer each bulk was
  received into: the client reads them on connections of its own
  (:mod:`pion._fetch`, one copy from the socket, writable arrays);
* ``key:value`` bulk replies (``KV.PREFIX.INFO``, ``V.INFO``) become dicts;
* ``PION.STATS`` becomes a dict of its 16 fields in server order;
* error replies become :mod:`pion.errors` exceptions named after their code word.

Protocol: redis-py < 5 (Debian's 4.3.4 included) speaks RESP2 only, so the
client uses RESP2 unless ``protocol=3`` is asked for *and* the installed
redis-py supports it (``redis.Redis(protocol=3)``, redis-py >= 5); every parser
here accepts both reply shapes (RESP3 maps / RESP2 flat arrays).

Reconnection: a connection the server closed (restart, ``CLIENT KILL``) is
detected by the pool before reuse, and a command that fails with a connection
error is retried ``retries`` times (default 1) on a fresh connection. Every
pion command is safe to repeat except that a retried ``KV.PREFIX.LOOKUP`` may
count twice in the receipt if the first attempt did reach the server.
"""
from __future__ import annotations

import inspect
import socket
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import redis
import redis.exceptions as rex

from . import _fetch
from .cluster_keys import Key, _sum_replies, _tag_args, hash_tagged, tagged_sid
from .replies import STATS_FIELDS, _expect_ok, _s, _status, parse_info, parse_stats
from . import errors as E
from .blocks import pack_hashes, unpack_bitmap, unpack_hashes

__all__ = [
    "PionClient",
    "BlockTable",
    "VQUANTS",
    "STATS_FIELDS",
    "parse_info",
    "parse_stats",
    "hash_tagged",  # from pion.cluster_keys, kept importable from here
    "tagged_sid",
]

#: Storage formats accepted by KV.PREFIX.REGISTER (docs/quant_formats.md).
VQUANTS = ("int8", "turbo4", "turbo3", "turbo2", "fp16", "fp8", "mlx4g32")

FetchFmt = str  # "F32" | "F16" | "NATIVE"


@dataclass(frozen=True)
class BlockTable:
    """A namespace's registered block table (``KV.PREFIX.BLOCKS``)."""

    block_size: int
    hashes: np.ndarray  # uint64, token order

    def __len__(self) -> int:
        return int(self.hashes.size)


def _raw(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Command name as bytes: redis-py then applies no reply callback (raw replies)."""
    if args and isinstance(args[0], str):
        return (args[0].encode(),) + args[1:]
    return args


def _rows_blob(rows: np.ndarray) -> tuple[memoryview, str | None]:
    """Contiguous little-endian payload for V.STOREBATCH and its FMT (None = F32 default)."""
    if rows.dtype == np.float16:
        a = np.ascontiguousarray(rows, dtype="<f2")
        fmt: str | None = "F16"
    else:
        a = np.ascontiguousarray(rows, dtype="<f4")
        fmt = None
    return a.data.cast("B"), fmt


class PionClient:
    """One pion-server endpoint: a redis-py connection pool plus typed command methods.

    Args:
        host, port: the server (default ``127.0.0.1:1974``).
        password, username: for ``--requirepass`` servers (sent by redis-py's AUTH on connect).
        socket_timeout: seconds per reply (large fetches included); default 60.
        socket_connect_timeout: seconds to connect; default 5.
        max_connections: pool size limit (default unbounded, as redis-py).
        retries: how many times a command that hit a connection error is re-sent
            on a fresh connection (default 1; 0 disables).
        protocol: 2 (default) or 3. 3 needs redis-py >= 5; asking for it with an
            older redis-py raises ``ValueError``.
        redis_client: use this ``redis.Redis`` instead of creating one (it must
            have ``decode_responses=False``).
        **redis_kwargs: passed to redis-py's ``ConnectionPool`` (``ssl=True`` and the
            ``ssl_*`` options select TLS, as with ``redis.Redis``).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 1974,
        *,
        password: str | None = None,
        username: str | None = None,
        socket_timeout: float | None = 60.0,
        socket_connect_timeout: float | None = 5.0,
        max_connections: int | None = None,
        retries: int = 1,
        protocol: int = 2,
        redis_client: redis.Redis | None = None,
        **redis_kwargs: Any,
    ) -> None:
        self.retries = max(0, int(retries))
        if redis_client is not None:
            self.redis = redis_client
        else:
            if protocol not in (2, 3):
                raise ValueError("protocol must be 2 or 3")
            kw: dict[str, Any] = dict(
                host=host,
                port=port,
                password=password,
                username=username,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_connect_timeout,
                decode_responses=False,
                # Read big V.FETCH replies in 1 MiB pieces instead of redis-py's 64 KiB.
                socket_read_size=1 << 20,
            )
            if max_connections is not None:
                kw["max_connections"] = max_connections
            if protocol == 3:
                if not self.resp3_supported():
                    raise ValueError(
                        f"RESP3 needs redis-py >= 5 (installed: {redis.__version__}); use protocol=2")
                kw["protocol"] = 3
            if redis_kwargs.pop("ssl", False):  # as redis.Redis(ssl=True) does
                kw["connection_class"] = redis.SSLConnection
            kw.update(redis_kwargs)
            self.redis = redis.Redis(connection_pool=redis.ConnectionPool(**kw))
        self.protocol = protocol
        self._fetch_pool = _fetch.FetchPool()
        # Set by cluster(): self.redis is a redis.cluster.RedisCluster.
        self.cluster_mode = False
        self.hash_tags = False

    @classmethod
    def cluster(cls, startup_nodes: Sequence[Any], *, password: str | None = None,
                username: str | None = None, socket_timeout: float | None = 60.0,
                socket_connect_timeout: float | None = 5.0, retries: int = 1,
                hash_tags: bool = True, **redis_kwargs: Any) -> "PionClient":
        """A client of a Redis Cluster of pion.so nodes (or of ``pion-server
        --cluster-emulated yes``), on redis-py's ``RedisCluster``.

        ``startup_nodes``: ``(host, port)`` pairs or ``redis.cluster.ClusterNode`` objects.
        Every command goes to the node owning its key's slot (redirects and
        failovers are redis-py's). With ``hash_tags`` (default) namespaces are sent
        wrapped in a hash tag (``"ns"`` -> ``"{ns}"``, ``"ns_pk"`` -> ``"{ns}_pk"``;
        names that already have one are unchanged), so a namespace and its session
        ids share a slot. Commands without a key (``kv_prefix_info``, ``pion_stats``,
        ``v_info()``) are sent to every primary and their counters added up;
        :meth:`per_node` returns each node's reply. ``V.FETCH`` keeps its fast read
        path, on the owning node's connection.
        """
        from redis.cluster import ClusterNode, RedisCluster

        nodes = [n if isinstance(n, ClusterNode) else ClusterNode(str(n[0]), int(n[1]))
                 for n in startup_nodes]
        kw: dict[str, Any] = dict(password=password, username=username,
                                  socket_timeout=socket_timeout,
                                  socket_connect_timeout=socket_connect_timeout,
                                  decode_responses=False)
        kw.update(redis_kwargs)
        c = cls(redis_client=RedisCluster(startup_nodes=nodes, **kw), retries=retries)
        c.cluster_mode = True
        c.hash_tags = hash_tags
        return c

    def _route(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return _tag_args(args) if self.cluster_mode and self.hash_tags else args

    def _wire(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The arguments as sent: the name as bytes for one server (no redis-py reply
        callback), as str for RedisCluster (its key lookup needs the name as text;
        it has no callbacks for pion's commands)."""
        if not self.cluster_mode:
            return _raw(args)
        if args and isinstance(args[0], (bytes, bytearray)):
            return (bytes(args[0]).decode(),) + tuple(args[1:])
        return args

    def per_node(self, *args: Any) -> dict[str, Any]:
        """Cluster mode: sends a keyless command to every primary -> ``{"host:port": reply}``."""
        if not self.cluster_mode:
            return {f"{self.redis.connection_pool.connection_kwargs.get('host')}:"
                    f"{self.redis.connection_pool.connection_kwargs.get('port')}": self.execute(*args)}
        from redis.cluster import RedisCluster

        try:
            r = self.redis.execute_command(*self._wire(args), target_nodes=RedisCluster.PRIMARIES)
        except rex.RedisError as e:
            raise E.translate(e) from None
        if not isinstance(r, dict):  # one primary: redis-py returns the reply itself
            r = {self.redis.get_primaries()[0].name: r}
        return r

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def resp3_supported() -> bool:
        """True when the installed redis-py can speak RESP3 (``redis.Redis(protocol=3)``)."""
        return "protocol" in inspect.signature(redis.Redis.__init__).parameters

    def close(self) -> None:
        """Closes every pooled connection."""
        self._fetch_pool.close()
        if self.cluster_mode:
            self.redis.close()
            return
        self.redis.connection_pool.disconnect()

    def __enter__(self) -> "PionClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def execute(self, *args: Any) -> Any:
        """Sends one raw command; returns the raw reply (bytes / int / list / None).

        redis-py's per-command reply callbacks are bypassed (the command name is
        sent as bytes), so every reply is exactly what the server sent. Error
        replies raise :class:`PionError` subclasses.
        """
        args = self._wire(self._route(args))
        attempt = 0
        while True:
            try:
                return self.redis.execute_command(*args)
            except rex.BusyLoadingError as e:
                raise E.translate(e) from None
            except (rex.ConnectionError, rex.TimeoutError) as e:
                if attempt >= self.retries or isinstance(e, rex.TimeoutError):
                    raise E.translate(e) from None
                attempt += 1
                time.sleep(0.05 * attempt)  # reconnect backoff
            except rex.RedisError as e:
                raise E.translate(e) from None

    def pipeline(self, commands: Sequence[Sequence[Any]] | None = None) -> Any:
        """Without arguments: a redis-py-style :class:`pion.pipeline.Pipeline`
        (``with client.pipeline() as p: p.kv_prefix_lookup(ns); ...; p.execute()``).

        With ``commands``: sends those raw commands in one pipeline (one write, one
        round trip, no MULTI) and returns one entry per command: the reply, or the
        :class:`PionError` instance for a command the server refused (other commands
        still ran). Connection errors are retried as :meth:`execute` does (the whole
        pipeline is re-sent).
        """
        if commands is None:
            from .pipeline import Pipeline

            return Pipeline(self)
        attempt = 0
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for c in commands:
                pipe.execute_command(*self._wire(self._route(tuple(c))))
            try:
                replies = pipe.execute(raise_on_error=False)
            except rex.BusyLoadingError as e:
                raise E.translate(e) from None
            except (rex.ConnectionError, rex.TimeoutError) as e:
                if attempt >= self.retries or isinstance(e, rex.TimeoutError):
                    raise E.translate(e) from None
                attempt += 1
                time.sleep(0.05 * attempt)
                continue
            except rex.RedisError as e:
                raise E.translate(e) from None
            return [E.translate(r) if isinstance(r, BaseException) else r for r in replies]

    def fetch_pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Like :meth:`pipeline`, for commands with large bulk replies (V.FETCH).

        Sends on one of the client's fetch connections (:mod:`pion._fetch`) to the
        server of the redis-py pool; bulks arrive as writable ``uint8`` numpy arrays,
        one copy. Falls back to :meth:`pipeline` when the pool's connections are of
        a kind a fetch connection cannot reproduce (a custom connection class or a
        credential provider).
        """
        if self.cluster_mode:
            return self._fetch_pipeline_cluster(commands)
        return self._fetch_on_pool(self.redis.connection_pool, commands)

    def _fetch_pipeline_cluster(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        # Each command on the connection pool of the node owning its session id (the
        # fast read path per node); one that meets a redirect (a slot moving, a
        # failover) is re-sent through RedisCluster, which follows it.
        routed = [self._route(tuple(c)) for c in commands]
        out: list[Any] = [None] * len(routed)
        groups: dict[str, tuple[Any, list[int]]] = {}
        for i, c in enumerate(routed):
            node = self.redis.get_node_from_key(c[1])
            groups.setdefault(node.name, (node, []))[1].append(i)
        for node, idx in groups.values():
            pool = node.redis_connection.connection_pool
            replies = self._fetch_on_pool(pool, [routed[i] for i in idx])
            for i, r in zip(idx, replies):
                if isinstance(r, E.PionError) and r.code in ("MOVED", "ASK"):
                    try:
                        r = self.redis.execute_command(*self._wire(routed[i]))
                    except rex.RedisError as e:
                        r = E.translate(e)
                out[i] = r
        return out

    def _fetch_on_pool(self, pool: Any, commands: Sequence[Sequence[Any]]) -> list[Any]:
        if not _fetch.supported(pool):
            if self.cluster_mode:
                return [self._execute_or_error(*c) for c in commands]
            return self.pipeline(commands)
        attempt = 0
        while True:
            try:
                return self._fetch_pool.run(pool, [tuple(c) for c in commands])
            except (ConnectionError, OSError, rex.ConnectionError, rex.TimeoutError) as e:
                timeout = isinstance(e, (rex.TimeoutError, TimeoutError, socket.timeout))
                if attempt >= self.retries or timeout:
                    raise E.translate(e) from None
                attempt += 1
                time.sleep(0.05 * attempt)  # reconnect backoff

    def _execute_or_error(self, *args: Any) -> Any:
        try:
            return self.execute(*args)
        except E.PionError as e:
            return e

    def _fetch_one(self, *args: Any) -> Any:
        r = self.fetch_pipeline([args])[0]
        if isinstance(r, E.PionError):
            raise r
        return r

    @staticmethod
    def raise_first(replies: Sequence[Any]) -> None:
        """Raises the first :class:`PionError` found in a :meth:`pipeline` result."""
        for r in replies:
            if isinstance(r, E.PionError):
                raise r

    # ---------------------------------------------------------------- admin

    def ping(self, message: str | bytes | None = None) -> bool | bytes:
        """PING: ``True`` (``+PONG``), or the echoed ``message`` as bytes."""
        if message is None:
            return _status(self.execute("PING")) == "PONG"
        return self.execute("PING", message)

    def echo(self, message: str | bytes) -> bytes:
        """ECHO message -> the same bytes."""
        return self.execute("ECHO", message)

    def hello(self, protover: int | None = None, *, auth: tuple[str, str] | None = None,
              setname: str | None = None) -> dict[str, Any]:
        """HELLO [protover [AUTH user pass] [SETNAME name]] -> the server's info map as a dict.

        ``protover=3`` switches only the connection that sends it; with a redis-py
        that cannot parse RESP3 this is refused client-side (``ValueError``).
        """
        if protover == 3 and self.protocol != 3:
            raise ValueError("HELLO 3 needs PionClient(protocol=3) (redis-py >= 5)")
        args: list[Any] = ["HELLO"]
        if protover is not None:
            args.append(str(protover))
            if auth is not None:
                args += ["AUTH", auth[0], auth[1]]
            if setname is not None:
                args += ["SETNAME", setname]
        reply = self.execute(*args)
        if isinstance(reply, dict):
            items = list(reply.items())
        else:
            items = [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]
        return {_s(k): (v if isinstance(v, (int, list)) else _s(v)) for k, v in items}

    def auth(self, password: str, username: str | None = None) -> None:
        """AUTH [user] pass. Raises WrongPassError / NoAuthError (no password configured)."""
        args = ["AUTH"] + ([username] if username is not None else []) + [password]
        _expect_ok(self.execute(*args), "AUTH")

    def select(self, db: int = 0) -> None:
        """SELECT 0 (pion has only database 0)."""
        _expect_ok(self.execute("SELECT", str(db)), "SELECT")

    def client_id(self) -> int:
        """CLIENT ID."""
        return int(self.execute("CLIENT", "ID"))

    def client_setname(self, name: str) -> None:
        """CLIENT SETNAME name (names the pooled connection that sends it)."""
        _expect_ok(self.execute("CLIENT", "SETNAME", name), "CLIENT SETNAME")

    def client_getname(self) -> str | None:
        """CLIENT GETNAME."""
        r = self.execute("CLIENT", "GETNAME")
        return None if r is None else _s(r)

    def client_info(self) -> dict[str, str]:
        """CLIENT INFO -> dict of the ``k=v`` fields."""
        return dict(kv.split("=", 1) for kv in _s(self.execute("CLIENT", "INFO")).split() if "=" in kv)

    def client_list(self) -> list[dict[str, str]]:
        """CLIENT LIST -> one dict of ``k=v`` fields per connection."""
        out = []
        for line in _s(self.execute("CLIENT", "LIST")).splitlines():
            if line.strip():
                out.append(dict(kv.split("=", 1) for kv in line.split() if "=" in kv))
        return out

    def client_kill(self, *args: Any) -> Any:
        """CLIENT KILL <args...> (raw reply)."""
        return self.execute("CLIENT", "KILL", *args)

    def command_count(self) -> int:
        """COMMAND COUNT."""
        return int(self.execute("COMMAND", "COUNT"))

    def command_info(self, *names: str) -> Any:
        """COMMAND INFO name... (raw reply: one array per command)."""
        return self.execute("COMMAND", "INFO", *names)

    def command_docs(self, *names: str) -> Any:
        """COMMAND DOCS name... (raw reply)."""
        return self.execute("COMMAND", "DOCS", *names)

    def config_get(self, pattern: str) -> dict[str, str]:
        """CONFIG GET pattern -> dict."""
        r = self.execute("CONFIG", "GET", pattern)
        if isinstance(r, dict):
            return {_s(k): _s(v) for k, v in r.items()}
        return {_s(r[i]): _s(r[i + 1]) for i in range(0, len(r), 2)}

    def config_set(self, name: str, value: str | int) -> None:
        """CONFIG SET name value (maxmemory, appendfsync, loglevel)."""
        _expect_ok(self.execute("CONFIG", "SET", name, str(value)), "CONFIG SET")

    def info(self, *sections: str) -> dict[str, int | float | str]:
        """INFO [section ...] -> flat dict of every ``key:value`` line (``# Pion`` included)."""
        return parse_info(self.execute("INFO", *sections))

    def dbsize(self) -> int:
        """DBSIZE: the number of registered namespaces."""
        return int(self.execute("DBSIZE"))

    def flushall(self) -> None:
        """FLUSHALL: drops every session (WAL-logged)."""
        _expect_ok(self.execute("FLUSHALL"), "FLUSHALL")

    def time(self) -> tuple[int, int]:
        """TIME -> (unix seconds, microseconds)."""
        r = self.execute("TIME")
        return int(r[0]), int(r[1])

    def shutdown(self, save: bool | None = None) -> None:
        """SHUTDOWN [SAVE|NOSAVE]. The server closes the connection; that is success."""
        args: list[str] = ["SHUTDOWN"]
        if save is not None:
            args.append("SAVE" if save else "NOSAVE")
        try:
            self.redis.execute_command(*_raw(tuple(args)))
        except rex.ConnectionError:
            return
        except rex.RedisError as e:
            raise E.translate(e) from None

    # ------------------------------------------------------------ KV.PREFIX

    def kv_prefix_register(self, ns: Key, kv_dim: int, vquant: str = "fp16", *,
                           block_size: int | None = None,
                           hashes: Sequence[int] | np.ndarray | None = None,
                           prefill_ms: int | None = None, parent: Key | None = None) -> None:
        """KV.PREFIX.REGISTER ns kv_dim vquant [BLOCKS block_size n blob] [PREFILL_MS ms] [PARENT p].

        Creates the sessions ``<ns>_pk`` and ``<ns>_pv``. ``hashes`` (u64, token
        order) with ``block_size`` adds the block table; ``prefill_ms`` is the
        measured cold prefill credited on every later hit; ``parent`` (a
        registered namespace of the same kv_dim) makes this namespace the next
        segment of the parent's chain (see :class:`pion.PrefixChain`).
        """
        self.execute(*self._register_args(ns, kv_dim, vquant, block_size, hashes, prefill_ms, parent))

    @staticmethod
    def _register_args(ns: Key, kv_dim: int, vquant: str, block_size: int | None,
                       hashes: Sequence[int] | np.ndarray | None,
                       prefill_ms: int | None, parent: Key | None = None) -> list[Any]:
        args: list[Any] = ["KV.PREFIX.REGISTER", ns, str(int(kv_dim)), vquant]
        if hashes is not None:
            if block_size is None:
                raise ValueError("hashes need block_size")
            h = np.asarray(hashes, dtype=np.uint64)
            args += ["BLOCKS", str(int(block_size)), str(h.size), pack_hashes(h)]
        if prefill_ms is not None:
            args += ["PREFILL_MS", str(int(prefill_ms))]
        if parent is not None:
            args += ["PARENT", parent]
        return args

    @staticmethod
    def _lookup_chain_args(ns: Key, tokens: int | None = None,
                           prefill_ms: int | None = None) -> list[Any]:
        args: list[Any] = ["KV.PREFIX.LOOKUP", ns, "CHAIN"]
        if tokens is not None:
            args += ["TOKENS", str(int(tokens))]
        if prefill_ms is not None:
            args += ["PREFILL_MS", str(int(prefill_ms))]
        return args

    @staticmethod
    def parse_chain(reply: Any) -> list[tuple[str, int]] | None:
        """A ``KV.PREFIX.LOOKUP ... CHAIN`` reply as ``[(namespace, tokens), ...]`` root first,
        or None for ``+MISS``."""
        if isinstance(reply, E.PionError):
            raise reply
        if reply in (b"MISS", "MISS"):
            return None
        if not isinstance(reply, list):
            raise E.UnexpectedReplyError(f"KV.PREFIX.LOOKUP CHAIN: {reply!r:.80}")
        out = []
        for seg in reply:
            if not isinstance(seg, list) or len(seg) != 2:
                raise E.UnexpectedReplyError(f"KV.PREFIX.LOOKUP CHAIN: bad segment {seg!r:.80}")
            out.append((bytes(seg[0]).decode("utf-8", "surrogateescape"), int(seg[1])))
        return out

    def kv_prefix_lookup_chain(self, ns: Key, *, tokens: int | None = None,
                               prefill_ms: int | None = None) -> list[tuple[str, int]] | None:
        """KV.PREFIX.LOOKUP ns CHAIN [TOKENS n] [PREFILL_MS ms] -> ``[(namespace, tokens), ...]``
        from the root to ``ns``, or None on ``+MISS``. One receipt hit for the whole chain."""
        return self.parse_chain(self.execute(*self._lookup_chain_args(ns, tokens, prefill_ms)))

    def kv_prefix_lookup(self, ns: Key, *, tokens: int | None = None,
                         prefill_ms: int | None = None) -> bool:
        """KV.PREFIX.LOOKUP ns [TOKENS n] [PREFILL_MS ms] -> True on +HIT, False on +MISS."""
        args: list[Any] = ["KV.PREFIX.LOOKUP", ns]
        if tokens is not None:
            args += ["TOKENS", str(int(tokens))]
        if prefill_ms is not None:
            args += ["PREFILL_MS", str(int(prefill_ms))]
        s = _status(self.execute(*args))
        if s == "HIT":
            return True
        if s == "MISS":
            return False
        raise E.UnexpectedReplyError(f"KV.PREFIX.LOOKUP: {s!r}")

    def kv_prefix_drop(self, *namespaces: Key) -> int:
        """KV.PREFIX.DROP ns [ns ...] -> number of namespaces that were held."""
        if not namespaces:
            raise ValueError("kv_prefix_drop needs at least one namespace")
        if self.cluster_mode:  # one slot per command: namespaces live on different nodes
            return sum(int(self.execute("KV.PREFIX.DROP", ns)) for ns in namespaces)
        return int(self.execute("KV.PREFIX.DROP", *namespaces))

    def kv_prefix_blocks(self, ns: Key) -> BlockTable | None:
        """KV.PREFIX.BLOCKS ns -> :class:`BlockTable`, or None for ``+UNKNOWN``."""
        r = self.execute("KV.PREFIX.BLOCKS", ns)
        if r == b"UNKNOWN" or r == "UNKNOWN":
            return None
        if not isinstance(r, (bytes, bytearray)) or len(r) < 8:
            raise E.UnexpectedReplyError(f"KV.PREFIX.BLOCKS: {r!r:.80}")
        bs, count = np.frombuffer(r, dtype="<u4", count=2)
        if len(r) != 8 + 8 * int(count):
            raise E.UnexpectedReplyError(f"KV.PREFIX.BLOCKS: {len(r)} bytes for {int(count)} hashes")
        return BlockTable(int(bs), unpack_hashes(memoryview(r)[8:]))

    def kv_prefix_membership(self, ns: Key, hashes: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """KV.PREFIX.MEMBERSHIP ns n blob -> bool array (probe i registered?), or None for UNKNOWN."""
        h = np.asarray(hashes, dtype=np.uint64)
        r = self.execute("KV.PREFIX.MEMBERSHIP", ns, str(h.size), pack_hashes(h))
        # +UNKNOWN and a bulk bitmap both arrive as bytes; a 49..56-probe bitmap that
        # spells "UNKNOWN" would be misread as UNKNOWN (ASCII-only bits: not a real concern).
        if r is None or r == b"UNKNOWN":
            return None
        return unpack_bitmap(r, int(h.size))

    def kv_prefix_info(self, ns: Key | None = None) -> dict[str, int | float | str] | None:
        """KV.PREFIX.INFO -> dict (registered_prefixes, vstore_bytes, wal_bytes, ...).

        With ``ns``: that namespace's place in its chain (``parent``, ``children``,
        ``depth``, ``chain_length``, ``tokens``, ``chain_tokens``), or None when it
        is not registered (``+UNKNOWN``).
        """
        if ns is None:
            if self.cluster_mode:
                return _sum_replies(
                    [parse_info(r) for r in self.per_node("KV.PREFIX.INFO").values()])
            return parse_info(self.execute("KV.PREFIX.INFO"))
        r = self.execute("KV.PREFIX.INFO", ns)
        if r in (b"UNKNOWN", "UNKNOWN"):
            return None
        return self.parse_info_reply(r)

    @staticmethod
    def parse_info_reply(reply: Any) -> dict[str, int | float | str]:
        """A ``KV.PREFIX.INFO <ns>`` bulk as a dict; ``namespace`` and ``parent`` stay strings."""
        out = parse_info(bytes(reply) if isinstance(reply, np.ndarray) else reply)
        for line in _s(bytes(reply) if isinstance(reply, np.ndarray) else reply).splitlines():
            k, _, v = line.partition(":")
            if k in ("namespace", "parent"):
                out[k] = v
        return out

    def kv_prefix_save(self, path: str | None = None) -> None:
        """KV.PREFIX.SAVE [path]: snapshot then truncate the WAL. Raises on any failure."""
        _expect_ok(self.execute("KV.PREFIX.SAVE", *([path] if path else [])), "KV.PREFIX.SAVE")

    def kv_prefix_commit(self) -> None:
        """KV.PREFIX.COMMIT: returns once every acknowledged write is on stable storage."""
        _expect_ok(self.execute("KV.PREFIX.COMMIT"), "KV.PREFIX.COMMIT")

    # -------------------------------------------------------------- V-store

    def v_storebatch(self, sid: Key, layer: int, start: int, rows: np.ndarray) -> None:
        """V.STOREBATCH sid layer start count blob [FMT F16].

        ``rows`` is ``[count, dim]`` (head-major rows). float16 arrays are sent as
        ``FMT F16``; every other dtype is converted to float32 (the default F32).
        """
        self.execute(*self._storebatch_args(sid, layer, start, rows))

    @staticmethod
    def _storebatch_args(sid: Key, layer: int, start: int, rows: np.ndarray) -> list[Any]:
        if rows.ndim != 2:
            raise ValueError("rows must be 2-D [count, dim]")
        blob, fmt = _rows_blob(rows)
        args: list[Any] = ["V.STOREBATCH", sid, str(int(layer)), str(int(start)), str(rows.shape[0]), blob]
        if fmt:
            args += ["FMT", fmt]
        return args

    @staticmethod
    def decode_rows(payload: Any, rows: int, dim: int | None, fmt: FetchFmt) -> np.ndarray | None:
        """Turns a V.FETCH bulk (bytes or uint8 array) into an array ``[rows, dim]`` (zero-copy view).

        ``fmt`` is what was asked: F32 -> float32, F16 -> float16, NATIVE -> float16
        when the payload is exactly ``rows*dim*2`` bytes (an fp16 session), else float32.
        """
        if payload is None:
            return None
        n = len(payload)
        f = fmt.upper()
        dt: np.dtype[Any]
        if f == "F16":
            dt = np.dtype("<f2")
        elif f == "F32":
            dt = np.dtype("<f4")
        else:
            if dim is None:
                raise ValueError("FMT NATIVE needs the row dimension to tell f16 from f32")
            dt = np.dtype("<f2")
            if n != rows * dim * 2:
                dt = np.dtype("<f4")
        a = np.frombuffer(payload, dtype=dt)
        if dim is None:
            dim = a.size // rows if rows else 0
        if a.size != rows * dim:
            raise E.UnexpectedReplyError(f"V.FETCH: {n} bytes is not {rows} rows of {dim} {dt.name}")
        return a.reshape(rows, dim)

    def _dim_for(self, sid: Key, dim: int | None, fmt: FetchFmt) -> int | None:
        if dim is None and fmt.upper() == "NATIVE":
            dim = int(self.v_info(sid)["value_dim"])
        return dim

    def v_fetch_range(self, sid: Key, layer: int, start: int, end: int, *, fmt: FetchFmt = "F32",
                      dim: int | None = None) -> np.ndarray | None:
        """V.FETCH sid layer RANGE start end [FMT fmt] -> ``[end-start, dim]`` array or None.

        None means no row of the range is stored. ``dim`` (kv_dim) is needed to
        decode FMT NATIVE; when omitted it is read with V.INFO (one more round trip).
        """
        dim = self._dim_for(sid, dim, fmt)
        r = self._fetch_one("V.FETCH", sid, str(int(layer)), "RANGE", str(int(start)), str(int(end)), "FMT", fmt)
        return self.decode_rows(r, end - start, dim, fmt)

    def v_fetch_batch(self, sid: Key, start: int, end: int, num_layers: int | None = None, *,
                      fmt: FetchFmt = "F32", dim: int | None = None) -> list[np.ndarray | None]:
        """V.FETCH sid BATCH start end [num_layers] [FMT fmt] -> one array (or None) per layer."""
        dim = self._dim_for(sid, dim, fmt)
        args: list[Any] = ["V.FETCH", sid, "BATCH", str(int(start)), str(int(end))]
        if num_layers is not None:
            args.append(str(int(num_layers)))
        args += ["FMT", fmt]
        r = self._fetch_one(*args)
        if not isinstance(r, list):
            raise E.UnexpectedReplyError(f"V.FETCH BATCH: expected an array, got {type(r).__name__}")
        return [self.decode_rows(p, end - start, dim, fmt) for p in r]

    def v_fetch_ids(self, sid: Key, layer: int, ids: Sequence[int], *, fmt: FetchFmt | None = None,
                    dim: int | None = None) -> np.ndarray | None:
        """V.FETCH sid layer id [id ...] [FMT F32|F16] -> rows in request order (``[len(ids), dim]``)."""
        if not ids:
            raise ValueError("v_fetch_ids needs at least one id")
        args: list[Any] = ["V.FETCH", sid, str(int(layer))] + [str(int(i)) for i in ids]
        if fmt is not None:
            args += ["FMT", fmt]
        r = self._fetch_one(*args)
        return self.decode_rows(r, len(ids), dim, fmt or "F32")

    def v_info(self, sid: Key | None = None) -> dict[str, int | float | str]:
        """V.INFO [sid] -> dict (global: sessions, total_tokens...; per sid: value_dim, v_format, layer_<i>_tokens...)."""
        if sid is None and self.cluster_mode:
            return _sum_replies([parse_info(r) for r in self.per_node("V.INFO").values()])
        return parse_info(self.execute("V.INFO", *([sid] if sid is not None else [])))

    # -------------------------------------------------------------- receipt

    def pion_stats(self) -> dict[str, int | float]:
        """PION.STATS -> the 16-field value receipt as a dict (server order)."""
        if self.cluster_mode:
            return _sum_replies([parse_stats(r) for r in self.per_node("PION.STATS").values()])
        return parse_stats(self.execute("PION.STATS"))

    def pion_stats_reset(self) -> None:
        """PION.STATS RESET: zeroes the receipt counters (uptime is kept)."""
        if self.cluster_mode:
            for r in self.per_node("PION.STATS", "RESET").values():
                _expect_ok(r, "PION.STATS RESET")
            return
        _expect_ok(self.execute("PION.STATS", "RESET"), "PION.STATS RESET")
