"""The one RESP2/RESP3 codec of the package: command encoding and reply reading.

Used by :class:`pion.client.PionClient`'s fetch connections, by :mod:`pion.testing`
(raw test connections) and by the benchmarks. Standard library only.

* :func:`encode` / :func:`encode_many`: a command as a RESP array of bulk strings.
  Arguments may be ``bytes``, ``bytearray``, ``memoryview`` (or anything with the
  buffer protocol, e.g. a contiguous numpy array), ``str`` (UTF-8), ``int`` or
  ``float``. :func:`encode_parts` returns the pieces without joining them, so a
  large payload is sent without being copied into the frame.
* :class:`Parser`: turns one reply into Python values. It reads from two methods a
  subclass provides, ``_line()`` (one line, CRLF removed) and ``_bulk_body(n)`` (n
  bytes plus the CRLF after them), and builds values through hooks a subclass may
  override (``simple``, ``error``, ``verbatim``, ``make_set``, ``make_map``).
* :class:`SocketReader`: a :class:`Parser` over a socket. Each bulk of n bytes is
  received with ``recv_into`` straight into its own buffer of exactly n bytes
  (``alloc(n)``; a ``bytearray`` unless overridden): one copy from the kernel, no
  growing buffer, which keeps a reply of many MiB linear in its size.
"""
from __future__ import annotations

import socket
from typing import Any, Iterable, Sequence

__all__ = ["ReplyError", "encode", "encode_parts", "encode_many", "Parser", "BufferParser",
           "SocketReader", "ProtocolError"]


class ProtocolError(ValueError):
    """The bytes received are not a RESP reply."""


class ReplyError(str):
    """An error reply, as the default :meth:`Parser.error` returns it: the whole line
    after ``-`` (code word included). ``code`` is the first word, ``message`` the rest."""

    @property
    def code(self) -> str:
        return self.partition(" ")[0]

    @property
    def message(self) -> str:
        return self.partition(" ")[2]


def _arg(a: Any) -> bytes | memoryview:
    if isinstance(a, bytes):
        return a
    if isinstance(a, str):
        return a.encode()
    if isinstance(a, bool):
        raise TypeError("bool is not a RESP argument (send 0/1 or a word)")
    if isinstance(a, int):
        return b"%d" % a
    if isinstance(a, float):
        return repr(a).encode()
    if isinstance(a, (bytearray, memoryview)):
        return memoryview(a).cast("B")
    try:
        return memoryview(a).cast("B")  # numpy arrays and other buffers
    except TypeError:
        return str(a).encode()


def encode_parts(*args: Any) -> list[bytes | memoryview]:
    """The command as pieces to write in order (large arguments are not copied)."""
    parts: list[bytes | memoryview] = []
    head = [b"*%d\r\n" % len(args)]
    for a in args:
        b = _arg(a)
        n = b.nbytes if isinstance(b, memoryview) else len(b)
        if n > 1 << 16:
            head.append(b"$%d\r\n" % n)
            parts.append(b"".join(head))
            parts.append(b)
            head = [b"\r\n"]
        else:
            head.append(b"$%d\r\n" % n)
            head.append(bytes(b))
            head.append(b"\r\n")
    parts.append(b"".join(head))
    return parts


def encode(*args: Any) -> bytes:
    """The command ``args`` as one RESP array of bulk strings."""
    return b"".join(bytes(p) for p in encode_parts(*args))


def encode_many(commands: Iterable[Sequence[Any]]) -> bytes:
    """Several commands back to back (a pipeline)."""
    return b"".join(encode(*c) for c in commands)


class Parser:
    """Reads RESP2 and RESP3 replies. Subclasses provide ``_line`` and ``_bulk_body``
    and may override the value hooks; the defaults return ``bytes`` for simple and
    bulk strings, ``int`` for integers, ``None`` for nulls, :class:`ReplyError` for
    errors, lists for arrays, sets and pushes, and dicts for maps."""

    # ---- source: provided by subclasses
    def _line(self) -> bytes:
        raise NotImplementedError

    def _bulk_body(self, n: int) -> Any:
        raise NotImplementedError

    # ---- value hooks
    def simple(self, data: bytes) -> Any:
        return data

    def error(self, text: str) -> Any:
        return ReplyError(text)

    def bulk(self, data: Any) -> Any:
        return data

    def integer(self, n: int) -> Any:
        return n

    def array(self, items: list[Any]) -> Any:
        return items

    def null(self) -> Any:
        return None

    def verbatim(self, data: Any) -> Any:
        return bytes(data[4:])  # "txt:" / "mkd:" prefix dropped

    def make_set(self, items: list[Any]) -> Any:
        return items

    def make_map(self, pairs: list[tuple[Any, Any]]) -> Any:
        return dict(pairs)

    def read(self) -> Any:
        """One whole reply (nested aggregates included)."""
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"$":
            n = int(rest)
            return self.null() if n < 0 else self.bulk(self._bulk_body(n))
        if t in (b"*", b">"):
            n = int(rest)
            return self.null() if n < 0 else self.array([self.read() for _ in range(n)])
        if t == b":":
            return self.integer(int(rest))
        if t == b"+":
            return self.simple(rest)
        if t == b"-":
            return self.error(rest.decode("utf-8", "replace"))
        if t == b"%":
            return self.make_map([(self.read(), self.read()) for _ in range(int(rest))])
        if t == b"~":
            return self.make_set([self.read() for _ in range(int(rest))])
        if t == b"_":
            return self.null()
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest)
        if t == b"(":
            return int(rest)
        if t == b"=":
            return self.verbatim(self._bulk_body(int(rest)))
        if t == b"!":
            return self.error(bytes(self._bulk_body(int(rest))).decode("utf-8", "replace"))
        if t == b"|":  # attributes: read and dropped, the reply follows
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        raise ProtocolError(f"bad reply type {line[:40]!r}")


class BufferParser(Parser):
    """A :class:`Parser` over bytes already received (``feed``); raises
    ``EOFError`` when a reply is incomplete. Used by the server-less unit tests."""

    def __init__(self, data: bytes = b"") -> None:
        self.buf = bytearray(data)
        self.pos = 0

    def feed(self, data: bytes) -> None:
        self.buf += data

    def _line(self) -> bytes:
        i = self.buf.find(b"\r\n", self.pos)
        if i < 0:
            raise EOFError("incomplete reply")
        line = bytes(self.buf[self.pos:i])
        self.pos = i + 2
        return line

    def _bulk_body(self, n: int) -> bytes:
        if len(self.buf) - self.pos < n + 2:
            raise EOFError("incomplete reply")
        data = bytes(self.buf[self.pos:self.pos + n])
        if self.buf[self.pos + n:self.pos + n + 2] != b"\r\n":
            raise ProtocolError("bulk string not followed by CRLF")
        self.pos += n + 2
        return data


class SocketReader(Parser):
    """A :class:`Parser` reading from a connected socket (plain or TLS).

    Lines are read through a small buffer; each bulk goes with ``recv_into`` into
    ``alloc(n)``, an exact-size buffer (what the buffer already holds is copied
    first). A closed connection raises ``ConnectionError``.
    """

    def __init__(self, sock: socket.socket, read_size: int = 1 << 16) -> None:
        self.sock = sock
        self.read_size = read_size
        self.buf = bytearray()
        self.pos = 0

    def alloc(self, n: int) -> Any:
        """An exact-size writable buffer for a bulk of n bytes."""
        return bytearray(n)

    def _fill(self) -> None:
        chunk = self.sock.recv(self.read_size)
        if not chunk:
            raise ConnectionError("Connection closed by server.")
        if self.pos:
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += chunk

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._fill()

    def _bulk_body(self, n: int) -> Any:
        out = self.alloc(n)
        mv = memoryview(out).cast("B")
        have = min(n, len(self.buf) - self.pos)
        mv[:have] = self.buf[self.pos:self.pos + have]
        self.pos += have
        got = have
        while got < n:
            k = self.sock.recv_into(mv[got:], n - got)
            if k == 0:
                raise ConnectionError("Connection closed by server.")
            got += k
        while len(self.buf) - self.pos < 2:
            self._fill()
        if self.buf[self.pos:self.pos + 2] != b"\r\n":
            raise ProtocolError("bulk string not followed by CRLF")
        self.pos += 2
        return out
