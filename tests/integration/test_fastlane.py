"""The binary fast lane (--fastlane-port, docs/protocol.md "Binary fast lane"): frames,
statuses, pipelining, AUTH, the shared limits (maxclients, idle timeout, frame length),
and that a malformed frame closes only its own connection."""
from __future__ import annotations

import socket
import struct

import pytest

from conftest import FastLaneConn, free_port, poll
from pion.fastlane import frame

# A raw fast-lane connection: exact frames on the wire (pion.testing).
Lane = FastLaneConn

MAGIC = 0xCA5E
PING, AUTH, QUERY_FUSED, QUERY = 0xFF, 0x37, 0x24, 0x25
OK, MISS, ERROR, COLDMISS = 0, 1, 2, 3


def query_fused_body(sid: bytes, layer: int, hq: int, d: int, hkv: int, m: int, s_suf: int,
                     q: bytes, k: bytes, v: bytes, head_map: bytes,
                     window: int | None = None) -> bytes:
    b = struct.pack("<H", len(sid)) + sid + struct.pack("<HHHHII", layer, hq, d, hkv, m, s_suf)
    b += q + k + v + head_map
    if window is not None:
        b += struct.pack("<i", window)
    return b


def query_body(sid: bytes, layer: int, h: int, d: int, m: int, q: bytes,
               window: int | None = None) -> bytes:
    b = struct.pack("<H", len(sid)) + sid + struct.pack("<HHHI", layer, h, d, m) + q
    if window is not None:
        b += struct.pack("<i", window)
    return b


@pytest.fixture
def lanes():
    """lanes(port) -> Lane; all are closed at the end."""
    conns: list[Lane] = []

    def make(port: int, timeout: float = 30.0) -> Lane:
        c = Lane(port, timeout)
        conns.append(c)
        return c

    yield make
    for c in conns:
        try:
            c.close()
        except OSError:
            pass


def lane_server(server_factory, *args: str, kvcache: bool = True):
    port = free_port()
    s = server_factory(["--fastlane-port", str(port), *args], kvcache=kvcache)
    s.lane_port = port
    return s


def test_ping_and_config(server_factory, lanes):
    s = lane_server(server_factory)
    c = lanes(s.lane_port)
    assert c.call(PING) == (OK, b"")
    # PING with a body is PING <msg>: the body comes back.
    assert c.call(PING, b"hello\x00\xff") == (OK, b"hello\x00\xff")
    r = s.client()
    assert r.config_get("fastlane-port") == {"fastlane-port": str(s.lane_port)}
    assert r.config_get("fastlane-max-frame-len") == {"fastlane-max-frame-len": str(1 << 30)}
    assert r.info("server")["fastlane_port"] == s.lane_port


def test_default_port_is_port_plus_one(server_factory, lanes):
    # --fastlane-port -1 is the default (conftest passes 0 unless a test asks).
    for _ in range(20):
        s = server_factory(["--fastlane-port", "-1"], start=False)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", s.port + 1))
            except OSError:
                continue  # port + 1 is taken: another free port
        break
    s.start()
    assert s.client().config_get("fastlane-port") == {"fastlane-port": str(s.port + 1)}
    assert lanes(s.port + 1).call(PING) == (OK, b"")


def test_lane_off(server_factory):
    s = server_factory(["--fastlane-port", "0"])
    r = s.client()
    assert r.config_get("fastlane-port") == {"fastlane-port": "0"}
    assert r.info("server")["fastlane_port"] == 0
    # Only with --kvcache: a port given without it is ignored (warned), nothing listens.
    port = free_port()
    s2 = server_factory(["--fastlane-port", str(port)], kvcache=False, sub="nokv")
    assert s2.client().config_get("fastlane-port") == {"fastlane-port": "0"}
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert "fast lane needs --kvcache" in s2.log()


def test_bad_fastlane_config_values(server_factory):
    for args in (["--fastlane-port", "65536"], ["--fastlane-port", "-2"],
                 ["--fastlane-max-frame-len", "3gb"], ["--fastlane-max-frame-len", "10"]):
        s = server_factory(args, start=False)
        with pytest.raises(RuntimeError, match="fastlane"):
            s.start()


def test_explicit_port_in_use_fails_to_start(server_factory):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        s = server_factory(["--fastlane-port", str(port)], start=False)
        with pytest.raises(RuntimeError, match="could not listen"):
            s.start()


def test_pipelined_frames_answered_in_order(server_factory, lanes):
    s = lane_server(server_factory)
    c = lanes(s.lane_port)
    bodies = [b"%d" % i * (i % 7) for i in range(300)]
    big = bytes(range(256)) * 600  # 150 KiB: a body read into its own buffer
    payload = b"".join(frame(PING, b) for b in bodies) + frame(PING, big) + frame(PING)
    # Sent in uneven pieces, frames split anywhere.
    for off in range(0, len(payload), 997):
        c.send(payload[off:off + 997])
    for b in bodies:
        assert c.read() == (OK, b)
    assert c.read() == (OK, big)
    assert c.read() == (OK, b"")


def test_command_errors_keep_the_connection(server_factory, lanes):
    s = lane_server(server_factory)
    c = lanes(s.lane_port)
    # A well-formed QUERY for a session that does not exist: the command's own error
    # (or, before the ATTEND commands exist, the unknown command's), then more frames.
    c.send(frame(PING, b"a") + frame(QUERY, query_body(b"nosuch", 0, 1, 4, 1, b"\0" * 16))
           + frame(PING, b"b"))
    assert c.read() == (OK, b"a")
    st, body = c.read()
    assert st == ERROR and body.startswith(b"ERR "), body
    assert c.read() == (OK, b"b")


@pytest.mark.parametrize("bad, text", [
    (b"*1\r\n$4\r\nPING\r\n", b"ERR Protocol error: bad fast-lane frame magic (expected 0xCA5E)"),
    (struct.pack("<HBI", 0xCA5F, PING, 0), b"ERR Protocol error: bad fast-lane frame magic"),
    (struct.pack("<HBI", MAGIC, 0x01, 0), b"ERR Protocol error: unknown fast-lane command 0x01"),
    (struct.pack("<HBI", MAGIC, 0x20, 0), b"ERR Protocol error: unknown fast-lane command 0x20"),
    (struct.pack("<HBI", MAGIC, PING, 2049),
     b"ERR Protocol error: fast-lane frame body too long (2049 bytes, fastlane-max-frame-len is "
     b"2048)"),
    (frame(QUERY_FUSED, b"\x05\x00abc"),
     b"ERR Protocol error: malformed fast-lane QUERY_FUSED frame body (shorter than its fixed "
     b"fields)"),
    (frame(QUERY, query_body(b"s", 0, 2, 4, 1, b"\0" * 31)),
     b"ERR Protocol error: malformed fast-lane QUERY frame body (shorter than H*M*D*4 bytes of Q)"),
    (frame(QUERY, query_body(b"s", 0, 2, 4, 1, b"\0" * 32) + b"\0\0"),
     b"ERR Protocol error: malformed fast-lane QUERY frame body (bytes after Q other than a u32 "
     b"fa_window)"),
    (frame(QUERY_FUSED, query_fused_body(b"s", 0, 2, 4, 1, 1, 1, b"\0" * 32, b"\0" * 16,
                                         b"\0" * 16, b"\0")),
     b"ERR Protocol error: malformed fast-lane QUERY_FUSED frame body (shorter than "
     b"H_q*M*D*4 + 2*H_kv*S_suf*D*4 + H_q bytes)"),
])
def test_malformed_frame_closes_only_that_connection(server_factory, lanes, bad, text):
    s = lane_server(server_factory, "--fastlane-max-frame-len", "2kb")
    other = lanes(s.lane_port)
    assert other.call(PING) == (OK, b"")
    r = s.client()
    c = lanes(s.lane_port)
    c.send(frame(PING, b"before") + bad + frame(PING, b"after"))
    assert c.read() == (OK, b"before")
    st, body = c.read()
    assert st == ERROR
    assert body.startswith(text), body
    assert c.at_eof()
    assert c.buf == b""  # nothing after the error: the frame after it was not run
    # The other lane client and the RESP clients are untouched.
    assert other.call(PING, b"still") == (OK, b"still")
    assert r.ping()


def test_frame_length_limit_edges(server_factory, lanes):
    s = lane_server(server_factory, "--fastlane-max-frame-len", "64kb")
    c = lanes(s.lane_port)
    at_limit = b"x" * (64 * 1024)
    assert c.call(PING, at_limit) == (OK, at_limit)
    c.send(struct.pack("<HBI", MAGIC, PING, 64 * 1024 + 1))  # the header alone is refused
    st, body = c.read()
    assert st == ERROR and b"too long" in body
    assert c.at_eof()


def test_auth_required_with_requirepass(server_factory, lanes):
    s = lane_server(server_factory, "--requirepass", "s3cret")
    c = lanes(s.lane_port)
    assert c.call(PING) == (ERROR, b"NOAUTH Authentication required.")
    assert c.call(QUERY, query_body(b"x", 0, 1, 4, 1, b"\0" * 16)) == (
        ERROR, b"NOAUTH Authentication required.")
    assert c.call(AUTH, b"wrong") == (
        ERROR, b"WRONGPASS invalid username-password pair or user is disabled.")
    assert c.call(AUTH, b"default\x00wrong")[0] == ERROR
    assert c.call(AUTH, b"s3cret") == (OK, b"")
    assert c.call(PING) == (OK, b"")
    # user\0password (the default user).
    c2 = lanes(s.lane_port)
    assert c2.call(AUTH, b"default\x00s3cret") == (OK, b"")
    assert c2.call(PING, b"p") == (OK, b"p")
    # Before AUTH, a body over 16 KiB is a protocol error (as RESP's unauthenticated bulks).
    c3 = lanes(s.lane_port)
    c3.send(struct.pack("<HBI", MAGIC, QUERY_FUSED, 16 * 1024 + 1))
    st, body = c3.read()
    assert st == ERROR and b"unauthenticated" in body
    assert c3.at_eof()


def test_auth_without_requirepass(server_factory, lanes):
    s = lane_server(server_factory)
    c = lanes(s.lane_port)
    st, body = c.call(AUTH, b"pw")
    assert st == ERROR and body.startswith(b"ERR AUTH <password> called without any password")
    assert c.call(PING) == (OK, b"")


def test_maxclients_shared_with_resp(server_factory, lanes, raw_factory):
    s = lane_server(server_factory, "--maxclients", "3")
    a = lanes(s.lane_port)
    assert a.call(PING) == (OK, b"")
    r1 = raw_factory(s)
    assert r1.call("PING") == "PONG"
    b = lanes(s.lane_port)
    assert b.call(PING) == (OK, b"")
    # Full: a fourth client, on either port, is refused in its own protocol.
    c = lanes(s.lane_port)
    assert c.read() == (ERROR, b"ERR max number of clients reached")
    assert c.at_eof()
    r2 = raw_factory(s)
    assert r2.read() == "ERR max number of clients reached"
    # A slot freed by a lane client is usable by either.
    # (Until the server has seen the close, a new client is still refused.)
    a.close()
    assert poll(lambda: _lane_ping_ok(s.lane_port))


def _lane_ping_ok(port: int) -> bool:
    try:
        c = Lane(port, timeout=5)
    except OSError:
        return False
    try:
        return c.call(PING) == (OK, b"")
    except OSError:  # refused (ERROR frame, then closed) while still full
        return False
    finally:
        c.close()


def test_idle_timeout_closes_lane_clients(server_factory, lanes):
    s = lane_server(server_factory, "--timeout", "1")
    idle = lanes(s.lane_port)
    assert idle.call(PING) == (OK, b"")
    assert idle.at_eof(timeout=15)
    fresh = lanes(s.lane_port)
    assert fresh.call(PING) == (OK, b"")


def test_lane_clients_in_client_list_and_kill(server_factory, lanes):
    s = lane_server(server_factory)
    c = lanes(s.lane_port)
    assert c.call(PING) == (OK, b"")
    r = s.client()
    mine = [cl for cl in r.client_list() if cl["laddr"].endswith(":%d" % s.lane_port)]
    assert len(mine) == 1 and mine[0]["cmd"] == "ping"
    r.client_kill_filter(_id=mine[0]["id"])
    assert c.at_eof()


# ---------------------------------------------------------------- the ATTEND commands

def _f32(rng, *shape) -> bytes:
    import numpy as np
    return rng.standard_normal(shape).astype(np.float32).tobytes()


def _store(r, sid: bytes, layer: int, h: int, n: int, d: int, rng) -> None:
    assert r.execute_command("ATTEND.PREFIX.STORE", sid, layer, h, n, d,
                             _f32(rng, h, n, d), _f32(rng, h, n, d)) in (b"OK", "OK", True)


def _resp_raw(raw, *args):
    """The RESP twin's reply: bytes for a bulk, RawError for an error."""
    return raw.call(*args)


def test_query_fused_equals_resp_twin(server_factory, lanes, raw_factory):
    import numpy as np
    rng = np.random.default_rng(1)
    s = lane_server(server_factory)
    r = s.client()
    hq, hkv, d, n = 8, 2, 16, 40
    sid = b"ns_attn"
    _store(r, sid, 3, hkv, n, d, rng)
    c = lanes(s.lane_port)
    raw = raw_factory(s)
    head_map = bytes(h * hkv // hq for h in range(hq))
    for m, s_suf, window in ((1, 1, None), (1, 0, None), (2, 3, None), (1, 2, 8), (3, 4, 0)):
        q = _f32(rng, hq, m, d)
        k = _f32(rng, hkv, s_suf, d)
        v = _f32(rng, hkv, s_suf, d)
        body = query_fused_body(sid, 3, hq, d, hkv, m, s_suf, q, k, v, head_map, window)
        st, out = c.call(QUERY_FUSED, body)
        args = ["ATTEND.PREFIX.QUERY_FUSED", sid, 3, hq, d, s_suf, hkv, q, k, v, head_map]
        if window is not None:
            args.append(window)
        want = _resp_raw(raw, *args)
        assert isinstance(want, bytes), want
        assert (st, out) == (OK, want), (m, s_suf, window)
        assert len(out) == hq * m * d * 4


def test_query_equals_resp_twin(server_factory, lanes, raw_factory):
    import numpy as np
    rng = np.random.default_rng(2)
    s = lane_server(server_factory)
    r = s.client()
    h, d, n = 4, 8, 33
    _store(r, b"q_attn", 0, h, n, d, rng)
    c = lanes(s.lane_port)
    raw = raw_factory(s)
    for m, window in ((1, None), (3, None), (2, 5)):
        q = _f32(rng, h, m, d)
        st, out = c.call(QUERY, query_body(b"q_attn", 0, h, d, m, q, window))
        args = ["ATTEND.PREFIX.QUERY", b"q_attn", 0, h, d, 1, q]
        if window is not None:
            args.append(window)
        want = _resp_raw(raw, *args)
        assert isinstance(want, bytes), want
        assert (st, out) == (OK, want), (m, window)
        # out (H·M·D f32), then the LSE (H·M f32) when M > 1.
        assert len(out) == h * m * d * 4 + (h * m * 4 if m > 1 else 0)


def test_command_errors_equal_resp_twin(server_factory, lanes, raw_factory):
    import numpy as np
    rng = np.random.default_rng(3)
    s = lane_server(server_factory)
    _store(s.client(), b"e_attn", 0, 2, 8, 4, rng)
    c = lanes(s.lane_port)
    raw = raw_factory(s)
    z = b"\0"
    cases = [
        # H_q = 0; H_q % H_kv != 0; M = 0 (empty Q); unknown session; D mismatch.
        (0, 4, 2, 1, 0, b"", b"", b"", b""),
        (3, 4, 2, 1, 0, z * 48, b"", b"", z * 3),
        (2, 4, 2, 0, 0, b"", b"", b"", z * 2),
        (2, 8, 2, 1, 1, z * 64, z * 64, z * 64, z * 2),
    ]
    for sid in (b"e_attn", b"nosuch_attn"):
        for hq, d, hkv, m, s_suf, q, k, v, hm in cases:
            st, body = c.call(QUERY_FUSED, query_fused_body(sid, 0, hq, d, hkv, m, s_suf, q, k,
                                                            v, hm))
            want = _resp_raw(raw, "ATTEND.PREFIX.QUERY_FUSED", sid, 0, hq, d, s_suf, hkv, q, k,
                             v, hm)
            assert isinstance(want, str), want
            assert (st, body) == (ERROR, want.encode()), (sid, hq, m)
    # QUERY with H = 0 and with a missing session.
    for sid, h in ((b"e_attn", 0), (b"nosuch_attn", 2)):
        q = z * (h * 4 * 4)
        st, body = c.call(QUERY, query_body(sid, 0, h, 4, 1, q))
        want = _resp_raw(raw, "ATTEND.PREFIX.QUERY", sid, 0, h, 4, 1, q)
        assert (st, body) == (ERROR, str(want).encode())
    assert c.call(PING) == (OK, b"")  # still open


def test_coldmiss_is_status_3(server_factory, lanes, raw_factory):
    import numpy as np
    rng = np.random.default_rng(4)
    s = lane_server(server_factory, "--attend-max-slots", "1")
    r = s.client()
    h, d, n = 2, 8, 16
    _store(r, b"a_attn", 0, h, n, d, rng)
    _store(r, b"b_attn", 0, h, n, d, rng)  # past the cap: a is demoted
    assert r.execute_command("ATTEND.PREFIX.LOOKUP", b"a_attn", 0) in (b"COLD", "COLD")
    c = lanes(s.lane_port)
    raw = raw_factory(s)
    q = _f32(rng, h, 1, d)
    st, body = c.call(QUERY, query_body(b"a_attn", 0, h, d, 1, q))
    want = raw.call("ATTEND.PREFIX.QUERY", b"a_attn", 0, h, d, 1, q)
    assert want.startswith("COLDMISS"), want
    assert (st, body) == (COLDMISS, want.encode())
    st, body = c.call(QUERY_FUSED, query_fused_body(b"a_attn", 0, h, d, h, 1, 0, q, b"", b"",
                                                    bytes(range(h))))
    assert st == COLDMISS and body.startswith(b"COLDMISS"), body
    # The connection stays; a re-STORE brings the slot back.
    _store(r, b"a_attn", 0, h, n, d, rng)
    st, body = c.call(QUERY, query_body(b"a_attn", 0, h, d, 1, q))
    assert st == OK and len(body) == h * d * 4


def test_pipelined_queries_and_pings_in_order(server_factory, lanes):
    import numpy as np
    rng = np.random.default_rng(5)
    s = lane_server(server_factory, "--attend-threads", "2")
    h, d, n = 8, 64, 8192  # big enough to run on the compute pool (deferred reply)
    _store(s.client(), b"p_attn", 0, h, n, d, rng)
    c = lanes(s.lane_port)
    q = _f32(rng, h, 1, d)
    req = frame(QUERY, query_body(b"p_attn", 0, h, d, 1, q))
    c.send(b"".join(req + frame(PING, b"%d" % i) for i in range(20)))
    first = None
    for i in range(20):
        st, out = c.read()
        assert st == OK and len(out) == h * d * 4
        first = first or out
        assert out == first
        assert c.read() == (OK, b"%d" % i)
