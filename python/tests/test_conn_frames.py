"""pion.integrations._conn's command framing without a server: plain arguments frame as
pion._resp encodes them, a Concat's parts are written as they are (not joined), and a
reader fills a tuple of buffers from one bulk."""
from __future__ import annotations

import socket

import numpy as np

from pion import _resp
from pion.integrations import _conn


def _joined(frames) -> bytes:
    return b"".join(bytes(f) for f in frames)


def test_plain_arguments_frame_as_resp_encode():
    big = np.arange(70_000, dtype=np.uint8)
    for args in [("GET", "k"), ("SET", b"k", big), ("X", 12, 1.5, memoryview(b"ab"))]:
        assert _joined(_conn._frames(args)) == _resp.encode(*args)


def test_concat_parts_are_sent_unjoined():
    k = bytearray(b"K" * 10)
    v = np.full(5, ord("V"), dtype=np.uint8)
    frames = _conn._frames(("SET", "key", _conn.Concat(k, v)))
    assert _joined(frames) == _resp.encode("SET", "key", bytes(k) + v.tobytes())
    # The two parts are the caller's memory, not copies.
    assert any(isinstance(f, memoryview) and f.obj is k for f in frames)
    assert any(isinstance(f, memoryview) and f.nbytes == 5 for f in frames)


def test_send_all_and_parts_reader_over_a_socket_pair():
    a, b = socket.socketpair()
    try:
        bufs = [b"x" * 3, memoryview(bytearray(b"y" * 200_000)), b"z"]
        _conn._send_all(a, bufs + [b"$6\r\nabcdef\r\n"])
        got = bytearray()
        while len(got) < 200_004:
            got += b.recv(1 << 20)
        assert bytes(got[:200_004]) == b"x" * 3 + b"y" * 200_000 + b"z"
        rd = _conn._IntoReader(b)
        rd.buf += got[200_004:]  # what came with the first bytes; the reader recv()s the rest
        p1, p2 = bytearray(2), bytearray(4)
        rd.parts = [memoryview(p1), memoryview(p2)]
        assert len(rd.read()) == 6 and rd.landed
        assert (p1, p2) == (bytearray(b"ab"), bytearray(b"cdef"))
    finally:
        a.close()
        b.close()
