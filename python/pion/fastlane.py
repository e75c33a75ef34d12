"""Client of pion-server's binary fast lane (docs/protocol.md "Binary fast lane").

The lane is a second TCP port (``--fastlane-port``, default port + 1, 0 = off)
that carries the decode hot path in fixed little-endian frames instead of RESP:

    request   [u16 magic 0xCA5E][u8 command][u32 body_len][body]
    response  [u16 magic 0xCA5E][u8 status ][u32 body_len][body]

Status 0 OK, 1 MISS, 2 ERROR (body = the error line), 3 COLDMISS. This module
speaks PING (0xFF), AUTH (0x37), QUERY_FUSED (0x24) and QUERY (0x25).
:class:`FastLane` is one blocking connection; it is not thread-safe.
:class:`pion.PionPromptCache` uses it lazily (connect + PING on first use,
disabled for the object on any failure) and falls back to RESP.
"""
from __future__ import annotations

import socket
import struct

import numpy as np

from . import errors as E

__all__ = ["FastLane", "MAGIC", "OP_PING", "OP_AUTH", "OP_QUERY_FUSED", "OP_QUERY",
           "ST_OK", "ST_MISS", "ST_ERROR", "ST_COLDMISS", "HEADER_SIZE", "frame", "query_fused_body",
           "query_body"]

MAGIC = 0xCA5E
OP_PING = 0xFF
OP_AUTH = 0x37
OP_QUERY_FUSED = 0x24
OP_QUERY = 0x25
ST_OK, ST_MISS, ST_ERROR, ST_COLDMISS = 0, 1, 2, 3

_HDR = struct.Struct("<HBI")
HEADER_SIZE = _HDR.size  # 7: magic, command or status, body length


def frame(op: int, body: bytes = b"") -> bytes:
    """One request frame: the header, then ``body``."""
    return _HDR.pack(MAGIC, op, len(body)) + body


def _sid_bytes(sid: bytes) -> bytes:
    if len(sid) > 0xFFFF:
        raise ValueError("session id longer than 65535 bytes")
    return struct.pack("<H", len(sid)) + sid


def _window(fa_window: int | None) -> bytes:
    return b"" if fa_window is None else struct.pack("<i", int(fa_window))


def query_fused_body(sid: bytes, layer: int, q: np.ndarray, k_suf: np.ndarray, v_suf: np.ndarray,
                     head_map: np.ndarray, fa_window: int | None = None) -> bytes:
    """QUERY_FUSED body: q ``[H_q, M, D]``, k_suf/v_suf ``[H_kv, S, D]`` (f32), head_map ``[H_q]`` u8."""
    h_q, m, d = q.shape
    h_kv, s = k_suf.shape[0], k_suf.shape[1]
    head = _sid_bytes(sid) + struct.pack("<HHHHII", layer, h_q, d, h_kv, m, s)
    return b"".join((head, q.tobytes(), k_suf.tobytes(), v_suf.tobytes(), head_map.tobytes(), _window(fa_window)))


def query_body(sid: bytes, layer: int, q: np.ndarray, fa_window: int | None = None) -> bytes:
    """QUERY body: q ``[H, M, D]`` f32."""
    h, m, d = q.shape
    return b"".join((_sid_bytes(sid), struct.pack("<HHHI", layer, h, d, m), q.tobytes(), _window(fa_window)))


class FastLane:
    """One connection to the fast lane.

    Args:
        host, port: the lane's address (the RESP host, ``CONFIG GET fastlane-port``).
        password, username: sent as an AUTH frame right after connecting.
        timeout: seconds per reply (and to connect).

    :meth:`request` raises :class:`pion.errors.PionConnectionError` on a broken
    connection or a bad frame header (the connection is then closed).
    """

    def __init__(self, host: str, port: int, *, password: str | None = None, username: str | None = None,
                 timeout: float | None = 60.0) -> None:
        self.host, self.port = host, int(port)
        self.sock: socket.socket | None = None
        try:
            self.sock = socket.create_connection((host, self.port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            self.close()
            raise E.PionConnectionError(f"fast lane {host}:{port}: {e}") from None
        if password is not None:
            cred = password.encode() if username is None else username.encode() + b"\0" + password.encode()
            st, body = self.request(OP_AUTH, cred)
            if st != ST_OK:
                self.close()
                raise E.error_from_reply(body.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _exact(self, n: int) -> bytearray:
        assert self.sock is not None
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise OSError("connection closed by the server")
            got += k
        return buf

    def request(self, op: int, body: bytes = b"") -> tuple[int, bytearray]:
        """Sends one frame and reads its response: ``(status, body)``."""
        if self.sock is None:
            raise E.PionConnectionError("fast lane connection is closed")
        try:
            hdr = _HDR.pack(MAGIC, op, len(body))
            if len(body) < 65536:  # one write for the small frames of decode
                self.sock.sendall(hdr + body)
            else:
                self.sock.sendall(hdr)
                self.sock.sendall(body)
            magic, status, n = _HDR.unpack(self._exact(_HDR.size))
            if magic != MAGIC:
                raise OSError(f"bad response magic 0x{magic:04X}")
            return status, self._exact(n) if n else bytearray()
        except OSError as e:
            self.close()
            raise E.PionConnectionError(f"fast lane {self.host}:{self.port}: {e}") from None

    def ping(self) -> bool:
        """PING frame: True on an OK status."""
        return self.request(OP_PING)[0] == ST_OK

    def call(self, op: int, body: bytes) -> bytearray:
        """A request whose non-OK statuses become exceptions (COLDMISS -> ColdMissError)."""
        status, out = self.request(op, body)
        if status == ST_OK:
            return out
        text = out.decode("utf-8", "replace")
        if status == ST_COLDMISS:
            err = E.error_from_reply(text)
            raise err if isinstance(err, E.ColdMissError) else E.ColdMissError(text)
        if status == ST_MISS:
            raise E.UnexpectedReplyError("fast lane: MISS status for a query")
        if status == ST_ERROR:
            if text.startswith("ERR Protocol error"):
                # the server closes the lane connection after a frame it could not take
                # (e.g. over fastlane-max-frame-len): a transport failure, not the command's
                self.close()
                raise E.PionConnectionError(f"fast lane: {text}")
            raise E.error_from_reply(text)
        self.close()
        raise E.PionConnectionError(f"fast lane: unknown status {status}")
