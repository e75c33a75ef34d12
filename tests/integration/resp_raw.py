"""A minimal raw RESP client for tests that need the exact bytes on the wire
(RESP3 shapes, error texts, pipelining of arbitrary commands)."""
from __future__ import annotations

import socket


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Raw:
    def __init__(self, port: int, timeout: float = 30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args):
        self.send(encode(*args))
        return self.read()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        """Returns a tagged tree: ('+', b'OK'), ('-', b'ERR ...'), (':', 5), ('$', bytes|None),
        ('*', [..]|None), ('%', [(k, v)...]), ('_', None), ('=', bytes), (',', float), ('#', bool)."""
        line = self._line()
        t, rest = chr(line[0]), line[1:]
        if t in "+-":
            return (t, rest)
        if t == ":":
            return (t, int(rest))
        if t in "$=":
            n = int(rest)
            return (t, None if n < 0 else self._exact(n))
        if t in "*~>":
            n = int(rest)
            return (t, None if n < 0 else [self.read() for _ in range(n)])
        if t == "%":
            return (t, [(self.read(), self.read()) for _ in range(int(rest))])
        if t == "_":
            return (t, None)
        if t == ",":
            return (t, float(rest))
        if t == "#":
            return (t, rest == b"t")
        raise ValueError(f"unexpected RESP type {line!r}")
