"""pion._resp: the RESP encoder and the readers, against hand-written wire bytes."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from pion import _resp


def test_encode_arguments():
    assert _resp.encode("PING") == b"*1\r\n$4\r\nPING\r\n"
    assert _resp.encode("SET", b"k", 12, -3, 1.5) == (
        b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n12\r\n$2\r\n-3\r\n$3\r\n1.5\r\n")
    assert _resp.encode("X", bytearray(b"ab"), memoryview(b"cd")) == (
        b"*3\r\n$1\r\nX\r\n$2\r\nab\r\n$2\r\ncd\r\n")
    assert _resp.encode("E", "é") == b"*2\r\n$1\r\nE\r\n$2\r\n\xc3\xa9\r\n"
    assert _resp.encode("Z", b"") == b"*2\r\n$1\r\nZ\r\n$0\r\n\r\n"
    with pytest.raises(TypeError):
        _resp.encode("B", True)


def test_encode_numpy_and_large_payload_parts():
    a = np.arange(4, dtype="<f4")
    assert _resp.encode("V", a) == b"*2\r\n$1\r\nV\r\n$16\r\n" + a.tobytes() + b"\r\n"
    big = np.zeros(1 << 17, dtype=np.uint8)
    parts = _resp.encode_parts("V.STOREBATCH", "s", big, "FMT", "F16")
    assert any(isinstance(p, memoryview) and p.obj is not None and p.nbytes == big.nbytes
               for p in parts)  # the payload itself, not a copy
    joined = b"".join(bytes(p) for p in parts)
    assert joined == _resp.encode("V.STOREBATCH", "s", big.tobytes(), "FMT", "F16")


def test_encode_many():
    assert _resp.encode_many([("A",), ("B", 1)]) == b"*1\r\n$1\r\nA\r\n*2\r\n$1\r\nB\r\n$1\r\n1\r\n"


def parse(data: bytes):
    p = _resp.BufferParser(data)
    out = p.read()
    assert p.pos == len(p.buf), "trailing bytes left"
    return out


def test_resp2_types():
    assert parse(b"+OK\r\n") == b"OK"
    assert parse(b":-42\r\n") == -42
    assert parse(b"$5\r\nhe\r\no\r\n") == b"he\r\no"  # a bulk may contain CRLF
    assert parse(b"$0\r\n\r\n") == b""
    assert parse(b"$-1\r\n") is None
    assert parse(b"*-1\r\n") is None
    assert parse(b"*0\r\n") == []
    assert parse(b"*3\r\n:1\r\n*1\r\n+a\r\n$1\r\nb\r\n") == [1, [b"a"], b"b"]
    e = parse(b"-WRONGTYPE Operation against a key\r\n")
    assert isinstance(e, _resp.ReplyError)
    assert (e.code, e.message) == ("WRONGTYPE", "Operation against a key")


def test_resp3_types():
    assert parse(b"%2\r\n+a\r\n:1\r\n$1\r\nb\r\n_\r\n") == {b"a": 1, b"b": None}
    assert parse(b"~2\r\n:1\r\n:2\r\n") == [1, 2]
    assert parse(b"#t\r\n") is True and parse(b"#f\r\n") is False
    assert parse(b",1.25\r\n") == 1.25
    assert parse(b"(12345678901234567890\r\n") == 12345678901234567890
    assert parse(b"=8\r\ntxt:abcd\r\n") == b"abcd"
    assert parse(b"!9\r\nERR oops!\r\n") == "ERR oops!"
    assert parse(b">2\r\n+message\r\n:1\r\n") == [b"message", 1]
    assert parse(b"|1\r\n+ttl\r\n:3\r\n+OK\r\n") == b"OK"  # attributes dropped


def test_incomplete_and_bad_replies():
    with pytest.raises(EOFError):
        _resp.BufferParser(b"$5\r\nab").read()
    with pytest.raises(EOFError):
        _resp.BufferParser(b"*2\r\n:1\r\n").read()
    with pytest.raises(_resp.ProtocolError):
        _resp.BufferParser(b"?x\r\n").read()
    with pytest.raises(_resp.ProtocolError):
        _resp.BufferParser(b"$2\r\nabcd\r\n").read()


def test_hooks_choose_types():
    class Text(_resp.BufferParser):
        def simple(self, data):
            return data.decode()

        def make_map(self, pairs):
            return {k.decode(): v for k, v in pairs}

    assert Text(b"%1\r\n$1\r\nk\r\n+v\r\n").read() == {"k": "v"}


def serve(chunks: list[bytes]):
    """A socketpair whose far end sends `chunks` one send() each, then closes."""
    a, b = socket.socketpair()
    a.settimeout(10)

    def run():
        for c in chunks:
            b.sendall(c)
        b.close()

    t = threading.Thread(target=run)
    t.start()
    return a, t


def test_socket_reader_exact_size_bulks():
    payload = bytes(range(256)) * 4096  # 1 MiB
    wire = b"*3\r\n$%d\r\n" % len(payload) + payload + b"\r\n+OK\r\n$-1\r\n"
    # Split at awkward places: inside the header, the payload and the CRLF.
    cuts = [3, 9, 100, 70000, len(wire) - 12, len(wire) - 11, len(wire)]
    chunks, prev = [], 0
    for c in cuts:
        chunks.append(wire[prev:c])
        prev = c
    a, t = serve(chunks)
    allocated = []

    class Arrays(_resp.SocketReader):
        def alloc(self, n):
            allocated.append(n)
            return np.empty(n, dtype=np.uint8)

    got = Arrays(a, read_size=4096).read()
    t.join()
    a.close()
    assert allocated == [len(payload)]
    assert isinstance(got[0], np.ndarray) and got[0].flags.writeable
    assert got[0].tobytes() == payload and got[1:] == [b"OK", None]


def test_socket_reader_closed_connection():
    a, t = serve([b"$10\r\nabc"])
    with pytest.raises(ConnectionError):
        _resp.SocketReader(a).read()
    t.join()
    a.close()
