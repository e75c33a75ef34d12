"""What every engine adapter needs from pion: a block connection and eviction news.

* :func:`connect` opens a :class:`BlockConnection` from a ``redis://``, ``rediss://`` or
  ``unix://`` URL (credentials, database and TLS parameters as redis-py reads them from
  a URL, plus the same keyword options ``redis.ConnectionPool.from_url`` takes).
* :class:`BlockConnection` speaks the block commands in as few round trips as they
  allow: :meth:`~BlockConnection.match` (one ``KV.BLOCK.MATCH``, optionally with a
  bitmap and a pin lease), :meth:`~BlockConnection.chain` (``KV.BLOCK.CHAIN`` commands
  pipelined ``depth`` at a time), :meth:`~BlockConnection.get_into` (pipelined GETs whose
  values are received with ``recv_into`` straight into the caller's buffers: no
  intermediate ``bytes``), :meth:`~BlockConnection.unpin` and
  :meth:`~BlockConnection.delete`.
* :func:`ensure_keyspace_events` makes sure the server announces what an adapter must
  hear (evictions, expiries, deletions), or says once that it cannot.
* :class:`RemovalListener` is a thread subscribed to those announcements that hands each
  removed key (under a prefix) to a callback.

Standard library and redis-py only; no engine is imported here.
"""
from __future__ import annotations

import functools
import logging
import socket
import ssl
import threading
from typing import Any, Callable, Iterable, Sequence

import redis

from .. import _fetch, _resp
from .. import errors as E

__all__ = ["BlockConnection", "Concat", "RemovalListener", "connect",
           "ensure_keyspace_events", "connection_params"]

log = logging.getLogger("pion.integrations")

# Notification classes the adapters rely on: E keyevent channels, g generic (del,
# expire), x expired, e evicted.
REMOVAL_CLASSES = "Egxe"
REMOVAL_EVENTS = ("evicted", "expired", "del")


def connection_params(url: str, **options: Any) -> tuple[type, dict[str, Any]]:
    """The redis-py connection class and keyword arguments a URL names (the same
    parsing ``redis.from_url`` does; ``options`` override what the URL says)."""
    pool = redis.ConnectionPool.from_url(url, **options)
    try:
        return pool.connection_class, dict(pool.connection_kwargs)
    finally:
        pool.disconnect()


class Concat:
    """One value made of several buffers, in order (e.g. a page's K region, then its V
    region). As a command argument it is sent as one bulk string whose parts are written
    one after the other: nothing is joined or copied on this side of the socket."""

    __slots__ = ("parts", "nbytes")

    def __init__(self, *parts: Any) -> None:
        self.parts = [memoryview(p).cast("B") for p in parts]
        self.nbytes = sum(p.nbytes for p in self.parts)


# Writes with sendmsg gather at most this many buffers per call (below IOV_MAX).
_IOV = 512
_SMALL = 1 << 16


def _frames(args: Sequence[Any]) -> list[Any]:
    """A command as buffers to write in order; large arguments and every part of a
    Concat are their own buffers (not copied), small pieces are joined."""
    out: list[Any] = []
    head = [b"*%d\r\n" % len(args)]
    parts: list[Any]
    for a in args:
        if isinstance(a, Concat):
            parts = a.parts
            n = a.nbytes
        else:
            b = _resp._arg(a)
            parts = [b]
            n = b.nbytes if isinstance(b, memoryview) else len(b)
        head.append(b"$%d\r\n" % n)
        if isinstance(a, Concat) or n > _SMALL:
            out.append(b"".join(head))
            out.extend(parts)
            head = [b"\r\n"]
        else:
            head.append(bytes(parts[0]))
            head.append(b"\r\n")
    out.append(b"".join(head))
    return out


def _send_all(sock: socket.socket, bufs: list[Any]) -> None:
    """Writes every buffer in order: gathered (sendmsg) on a plain socket, one sendall
    each on TLS (no gather write there)."""
    if isinstance(sock, ssl.SSLSocket) or not hasattr(sock, "sendmsg"):
        for b in bufs:
            sock.sendall(b)
        return
    views = [memoryview(b).cast("B") for b in bufs]
    i = 0
    while i < len(views):
        batch = views[i:i + _IOV]
        sent = sock.sendmsg(batch)
        for v in batch:
            if sent >= v.nbytes:
                sent -= v.nbytes
                i += 1
            else:
                views[i] = v[sent:]
                break


class _IntoReader(_resp.SocketReader):
    """Bulks go into the buffer ``target`` names when its size matches, or into the
    buffers ``parts`` names, in order, when their total size matches (else into a fresh
    bytearray); errors come back as PionError values."""

    target: memoryview | None = None
    parts: list[memoryview] | None = None
    landed: bool = False

    def alloc(self, n: int) -> Any:
        t = self.target
        if t is not None and t.nbytes == n:
            self.landed = True
            return t
        return bytearray(n)

    def error(self, text: str) -> E.PionError:
        return E.error_from_reply(text)

    # A split read: the value's first ``split_size`` bytes (a header) are read, handed
    # to ``split(header, rest)``, and the rest goes into the buffer it returns.
    split: Callable[[bytes, int], Any] | None = None
    split_size: int = 0
    rest: int = 0

    def _read_exact(self, mv: memoryview) -> None:
        n = mv.nbytes
        have = min(n, len(self.buf) - self.pos)
        mv[:have] = self.buf[self.pos:self.pos + have]
        self.pos += have
        while have < n:
            k = self.sock.recv_into(mv[have:], n - have)
            if k == 0:
                raise ConnectionError("Connection closed by server.")
            have += k

    def _bulk_body(self, n: int) -> Any:
        if self.split is not None:
            return self._split_body(n)
        parts = self.parts
        if parts is not None and sum(p.nbytes for p in parts) == n:
            return self._parts_body(parts, n)
        return super()._bulk_body(n)

    def _parts_body(self, parts: list[memoryview], n: int) -> Any:
        for mv in parts:  # what is buffered first, then recv_into straight into each part
            self._read_exact(mv)
        self._crlf()
        self.landed = True
        return _Landed(n)

    def _crlf(self) -> None:
        while len(self.buf) - self.pos < 2:
            self._fill()
        if self.buf[self.pos:self.pos + 2] != b"\r\n":
            raise _resp.ProtocolError("bulk string not followed by CRLF")
        self.pos += 2

    def _split_body(self, n: int) -> Any:
        split = self.split
        if split is None or n < self.split_size:
            return super()._bulk_body(n)
        head = bytearray(self.split_size)
        self._read_exact(memoryview(head))
        rest = self.rest = n - self.split_size
        target = split(bytes(head), rest)
        mv = memoryview(target).cast("B") if target is not None else None
        if mv is not None and mv.nbytes >= rest:
            self.landed = True
            self._read_exact(mv[:rest])
        else:
            self._read_exact(memoryview(bytearray(rest)))  # read and dropped
        self._crlf()
        return head


class _Landed(int):
    """What a bulk received into caller parts reads as: its length."""

    def __len__(self) -> int:
        return int(self)


class BlockConnection(_fetch.FetchConnection):
    """One pipelined connection for block traffic (not thread-safe: one user at a time)."""

    def __init__(self, connection_class: type, kw: dict[str, Any], depth: int = 64) -> None:
        super().__init__(connection_class, kw)
        self.into = _IntoReader(self.sock)  # the base's reader, with its buffer-placing API
        self.reader = self.into
        self.depth = max(1, int(depth))

    def send(self, commands: Sequence[Sequence[Any]]) -> None:
        bufs: list[Any] = []
        for c in commands:
            bufs.extend(_frames(c))
        _send_all(self.sock, bufs)

    # ---- generic
    def call(self, *args: Any) -> Any:
        """One command; an error reply is raised as PionError."""
        r = self.call_many([args])[0]
        if isinstance(r, E.PionError):
            raise r
        return r

    def run_pipelined(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Sends the commands ``depth`` at a time, reading each window's replies before
        the next is sent (bounded memory in both directions). Errors come back as values."""
        out: list[Any] = []
        for i in range(0, len(commands), self.depth):
            out.extend(self.call_many(commands[i:i + self.depth]))
        return out

    # ---- blocks
    def match(self, keys: Sequence[Any], *, bitmap: bool = False,
              pin_ms: int | None = None) -> tuple[Any, int]:
        """One ``KV.BLOCK.MATCH``: ``(count, lease)``, or ``(bitmap bytes, lease)`` with
        ``bitmap``; lease is 0 when nothing was pinned or no pin was asked for."""
        if not keys:
            return (b"" if bitmap else 0), 0
        args: list[Any] = ["KV.BLOCK.MATCH", len(keys), *keys]
        if bitmap:
            args.append("BITMAP")
        if pin_ms:
            args += ["PIN", int(pin_ms)]
        r = self.call(*args)
        if pin_ms:
            found, lease = r[0], int(r[1])
        else:
            found, lease = r, 0
        if bitmap:
            found = bytes(found)
        return found, lease

    @staticmethod
    def bit(bitmap: bytes, i: int) -> bool:
        """Key i's bit in a MATCH ... BITMAP reply."""
        return bool(bitmap[i >> 3] >> (i & 7) & 1)

    def chain(self, pairs: Sequence[tuple[Any, Any]], *, after: Any = None,
              px: int | None = None, hashes: bytes | None = None,
              tokens: int | None = None, per_command: int = 8,
              fmt: Sequence[Any] | None = None) -> list[Any]:
        """Stores ``(key, value)`` pairs as one chain: ``KV.BLOCK.CHAIN`` commands of
        ``per_command`` pairs each, every one after the previous one's last key, all
        pipelined. Values may be any buffer (memoryview slices are sent without a copy).
        ``fmt`` = ``(format, dtype, row)`` adds ``FORMAT f DTYPE d ROW r`` (the server
        stores the values quantized). Returns one reply per command (``b"OK"`` or a
        PionError value)."""
        cmds: list[list[Any]] = []
        parent = after
        for i in range(0, len(pairs), per_command):
            group = pairs[i:i + per_command]
            args: list[Any] = ["KV.BLOCK.CHAIN"]
            if parent is not None:
                args += ["AFTER", parent]
            if px:
                args += ["PX", int(px)]
            if hashes is not None:
                args += ["HASHES", hashes[8 * i:8 * (i + len(group))]]
            if tokens:
                args += ["TOKENS", int(tokens)]
            if fmt is not None:
                args += ["FORMAT", fmt[0], "DTYPE", fmt[1], "ROW", int(fmt[2])]
            for k, v in group:
                args += [k, v]
            cmds.append(args)
            parent = group[-1][0]
        return self.run_pipelined(cmds)

    def get_into(self, keys: Sequence[Any], buffers: Sequence[Any]) -> list[int]:
        """Pipelined GETs; value i lands in ``buffers[i]`` (any writable buffer, or a
        tuple of writable buffers that the value fills one after the other) by
        ``recv_into``. Returns per key the value's length when it filled its buffer(s)
        exactly, -1 when the key is missing, and -2 when the value's size differs from
        the buffer's (the bytes are read and dropped; the buffer may not be trusted)."""
        out: list[int] = []
        rd = self.into
        for i in range(0, len(keys), self.depth):
            window = range(i, min(len(keys), i + self.depth))
            self.send([("GET", keys[j]) for j in window])
            for j in window:
                b = buffers[j]
                if isinstance(b, (tuple, list)):
                    rd.parts = [memoryview(p).cast("B") for p in b]
                else:
                    rd.target = memoryview(b).cast("B")
                rd.landed = False
                try:
                    r = rd.read()
                finally:
                    rd.target = None
                    rd.parts = None
                if isinstance(r, E.PionError):
                    out.append(-1 if isinstance(r, E.CommandError) and r.code == "WRONGTYPE"
                               else -2)
                elif r is None:
                    out.append(-1)
                elif rd.landed:
                    out.append(len(r))
                else:
                    out.append(-2)
        return out

    def get_split(self, keys: Sequence[Any], header_size: int,
                  place: Callable[[int, bytes, int], Any]) -> list[int]:
        """Pipelined GETs of values that begin with a ``header_size``-byte header:
        for key i the header is read first and ``place(i, header, rest)`` returns the
        writable buffer (at least ``rest`` bytes) the remaining bytes are received into
        with ``recv_into``, or None to drop them. Returns per key ``rest`` when it
        landed, -1 when the key is missing, -2 when the value was dropped or shorter
        than a header."""
        out: list[int] = []
        rd = self.into
        for i in range(0, len(keys), self.depth):
            window = range(i, min(len(keys), i + self.depth))
            self.send([("GET", keys[j]) for j in window])
            for j in window:
                rd.split = functools.partial(place, j)
                rd.split_size = header_size
                rd.landed = False
                try:
                    r = rd.read()
                finally:
                    rd.split = None
                if r is None or (isinstance(r, E.CommandError) and r.code == "WRONGTYPE"):
                    out.append(-1)
                elif rd.landed and not isinstance(r, E.PionError):
                    out.append(rd.rest)
                else:
                    out.append(-2)
        return out

    def set_many(self, items: Sequence[tuple[Any, Any]], *, px: int | None = None) -> list[Any]:
        """Pipelined ``SET key value [PX px]``, ``depth`` at a time. A value is one buffer
        or a list of buffers sent back to back as one value (a header and a payload
        without joining them in memory, as :class:`Concat`). Returns one reply per key
        (``b"OK"`` or a PionError value)."""
        opt = ["PX", int(px)] if px else []
        return self.run_pipelined([
            ["SET", key, Concat(*value) if isinstance(value, (list, tuple)) else value, *opt]
            for key, value in items])

    def unpin(self, leases: Iterable[int]) -> int:
        ids = [int(x) for x in leases if x]
        return int(self.call("KV.BLOCK.UNPIN", *ids)) if ids else 0

    def delete(self, keys: Sequence[Any]) -> int:
        return int(self.call("UNLINK", *keys)) if keys else 0

    def delete_matching(self, pattern: bytes | str, count: int = 1000) -> int:
        """UNLINKs every key matching the glob ``pattern`` (SCAN ... MATCH, one UNLINK
        per page of results); returns how many were removed. Keys written meanwhile may
        or may not be seen, as SCAN guarantees."""
        cursor = b"0"
        removed = 0
        while True:
            cursor, found = self.call("SCAN", cursor, "MATCH", pattern, "COUNT", int(count))
            cursor = bytes(cursor)
            if found:
                removed += self.delete([bytes(k) for k in found])
            if cursor == b"0":
                return removed


def connect(url: str, *, depth: int = 64, **options: Any) -> BlockConnection:
    """A :class:`BlockConnection` to the server ``url`` names."""
    cls, kw = connection_params(url, **options)
    return BlockConnection(cls, kw, depth)


_warned: set[str] = set()


def ensure_keyspace_events(conn: BlockConnection, needed: str = REMOVAL_CLASSES) -> bool:
    """True when the server announces every class in ``needed`` (setting the missing ones
    with CONFIG SET when this user may). Otherwise logs one warning per server that
    removals will not be reported, and returns False."""
    try:
        reply = conn.call("CONFIG", "GET", "notify-keyspace-events")
        current = bytes(reply[1]).decode() if len(reply) == 2 else ""
        missing = "".join(c for c in needed if c not in current and
                          not (c in "gxe" and "A" in current))
        if not missing:
            return True
        conn.call("CONFIG", "SET", "notify-keyspace-events", current + missing)
        return True
    except (E.PionError, redis.RedisError) as exc:
        where = f"{conn.sock.getpeername()!r}"
        if where not in _warned:
            _warned.add(where)
            log.warning("pion at %s does not announce evictions (notify-keyspace-events "
                        "needs %r; %s): evictions will not be reported to the engine; set it "
                        "in pion.conf", where, needed, exc)
        return False


class RemovalListener:
    """A thread subscribed to the evicted/expired/del key events of database ``db``;
    calls ``on_removed(key: bytes, event: str)`` for each key that starts with
    ``prefix``. ``close`` stops it."""

    def __init__(self, url: str, on_removed: Callable[[bytes, str], None], *,
                 prefix: bytes = b"", db: int = 0, **options: Any) -> None:
        cls, kw = connection_params(url, **options)
        kw["socket_timeout"] = 0.2  # wake to notice close()
        self._conn = _fetch.FetchConnection(cls, kw)
        self._prefix = prefix
        self._cb = on_removed
        self._stop = threading.Event()
        db = kw.get("db") or db
        channels = [f"__keyevent@{db}__:{ev}" for ev in REMOVAL_EVENTS]
        self._conn.send([("SUBSCRIBE", *channels)])
        for _ in channels:
            self._conn.reader.read()  # the subscribe confirmations
        self._thread = threading.Thread(target=self._run, name="pion-removals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rd = self._conn.reader
        while not self._stop.is_set():
            try:
                msg = rd.read()
            except TimeoutError:
                continue
            except (OSError, ConnectionError, ValueError):
                return
            if (isinstance(msg, list) and len(msg) == 3 and bytes(msg[0]) == b"message"):
                key = bytes(msg[2])
                if key.startswith(self._prefix):
                    event = bytes(msg[1]).rsplit(b":", 1)[-1].decode()
                    try:
                        self._cb(key, event)
                    except Exception:  # a callback's bug must not kill the listener
                        log.exception("pion removal callback failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._conn.close()
