"""The client's own connections for large replies (V.FETCH).

redis-py reads replies through a buffer that hiredis grows 1 MiB at a time, so a
reply of S MiB costs O(S^2) copying. :class:`FetchConnection` is a socket the
client opens itself (same address, TLS settings, credentials and database as the
redis-py pool it sits beside, read from the pool's public ``connection_class`` and
``connection_kwargs``) and reads with :class:`pion._resp.SocketReader`: each bulk
arrives with ``recv_into`` in its own exact-size numpy buffer, one copy, writable.
:class:`FetchPool` keeps idle ones for reuse; it is thread-safe.
"""
from __future__ import annotations

import select
import socket
import ssl
import threading
from typing import Any, Callable, Sequence

import numpy as np
import redis

from . import _resp
from . import errors as E

__all__ = ["FetchConnection", "FetchPool", "supported"]


class _ArrayReader(_resp.SocketReader):
    """Bulks as ``uint8`` numpy arrays, simple strings as bytes, errors as PionError."""

    def alloc(self, n: int) -> np.ndarray:
        return np.empty(n, dtype=np.uint8)

    def error(self, text: str) -> E.PionError:
        return E.error_from_reply(text)


def supported(pool: Any) -> bool:
    """True when the pool's connections are ones a FetchConnection can reproduce
    (TCP, TLS or a Unix socket, without a credential provider)."""
    cls = getattr(pool, "connection_class", None)
    kw = getattr(pool, "connection_kwargs", None)
    if cls is None or kw is None or kw.get("credential_provider") is not None:
        return False
    return cls in (redis.Connection, redis.SSLConnection, redis.UnixDomainSocketConnection)


def _tls_context(kw: dict[str, Any]) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    reqs = kw.get("ssl_cert_reqs", "required")
    if isinstance(reqs, str):
        reqs = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}[reqs]
    ctx.check_hostname = bool(kw.get("ssl_check_hostname", False))
    ctx.verify_mode = reqs
    if kw.get("ssl_certfile"):
        ctx.load_cert_chain(kw["ssl_certfile"], kw.get("ssl_keyfile"), kw.get("ssl_password"))
    if kw.get("ssl_ca_certs") or kw.get("ssl_ca_path") or kw.get("ssl_ca_data"):
        ctx.load_verify_locations(cafile=kw.get("ssl_ca_certs"), capath=kw.get("ssl_ca_path"),
                                  cadata=kw.get("ssl_ca_data"))
    return ctx


class FetchConnection:
    """One socket to the server of a redis-py pool, authenticated like the pool's."""

    def __init__(self, connection_class: type, kw: dict[str, Any]) -> None:
        timeout = kw.get("socket_timeout")
        connect_timeout = kw.get("socket_connect_timeout") or timeout
        if connection_class is redis.UnixDomainSocketConnection:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(connect_timeout)
            sock.connect(kw["path"])
        else:
            host = kw.get("host", "localhost")
            sock = socket.create_connection((host, kw.get("port", 6379)), connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if connection_class is redis.SSLConnection:
                sock = _tls_context(kw).wrap_socket(sock, server_hostname=host)
        sock.settimeout(timeout)
        self.sock = sock
        self.reader: _resp.SocketReader = _ArrayReader(sock)
        try:
            self._handshake(kw)
        except BaseException:
            self.close()
            raise

    def _handshake(self, kw: dict[str, Any]) -> None:
        setup: list[tuple[Any, ...]] = []
        if kw.get("password") is not None:
            user = kw.get("username")
            setup.append(("AUTH", user, kw["password"]) if user else ("AUTH", kw["password"]))
        if kw.get("db"):
            setup.append(("SELECT", kw["db"]))
        if kw.get("client_name"):
            setup.append(("CLIENT", "SETNAME", kw["client_name"]))
        if not setup:
            return
        replies = self.call_many(setup)
        for r in replies:
            if isinstance(r, E.PionError):
                raise r

    def send(self, commands: Sequence[Sequence[Any]]) -> None:
        for c in commands:
            for part in _resp.encode_parts(*c):
                self.sock.sendall(part)

    def call_many(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Sends the commands in one pipeline and reads one reply each (errors come
        back as PionError instances, not raised)."""
        self.send(commands)
        return [self.reader.read() for _ in commands]

    def stale(self) -> bool:
        """True when an idle connection is readable: the server closed it (or sent
        something nobody asked for)."""
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class FetchPool:
    """Idle FetchConnections per redis-py pool (a cluster client has one per node)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[Any, ...], list[FetchConnection]] = {}

    def run(self, pool: Any, commands: Sequence[Sequence[Any]],
            on_error: Callable[[BaseException], None] | None = None) -> list[Any]:
        """Sends ``commands`` on an idle connection to ``pool``'s server (a new one if
        none is idle) and reads the replies. A connection that fails is closed, never
        reused."""
        kw = pool.connection_kwargs
        # By what the connection reaches, not by the pool object: a cluster client's node
        # pools come and go with the topology, and a dead pool's id may be reused.
        key = (pool.connection_class, kw.get("host"), kw.get("port"), kw.get("path"),
               kw.get("db"), kw.get("username"), kw.get("password"))
        conn = None
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            if conn is None or not conn.stale():
                break
            conn.close()  # the server closed it (restart, CLIENT KILL, idle timeout)
        if conn is None:
            conn = FetchConnection(pool.connection_class, kw)
        try:
            replies = conn.call_many(commands)
        except BaseException:
            conn.close()  # unknown state: never reuse a half-read connection
            raise
        with self._lock:
            self._idle.setdefault(key, []).append(conn)
        return replies

    def close(self) -> None:
        with self._lock:
            conns = [c for lst in self._idle.values() for c in lst]
            self._idle.clear()
        for c in conns:
            c.close()
