"""Wire-level behaviour of pion-server: RESP2/RESP3, inline commands, pipelining,
protocol errors (each closes only its own connection), limits, slow readers, idle
timeout, maxclients, many connections, and the Redis tools (redis-cli,
redis-benchmark) driving it unmodified."""
from __future__ import annotations

import random
import resource
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import RawConn, Verbatim, poll


def assert_alive(server):
    c = server.client()
    assert c.ping() is True
    c.close()


# ---------------------------------------------------------------- basics

def test_ping_echo(r, server, raw_factory):
    assert r.ping() is True
    assert raw_factory(server).call("PING", "hello") == b"hello"
    assert r.echo("x" * 1000) == b"x" * 1000
    assert r.echo(b"\x00\r\n\xff") == b"\x00\r\n\xff"


def test_command_names_case_insensitive(server, raw_factory):
    c = raw_factory(server)
    assert c.call("pInG") == "PONG"
    assert c.call("echo", "a") == b"a"


def test_unknown_command_and_arity_errors(server, raw_factory):
    c = raw_factory(server)
    assert c.call("FOO", "a", "b") == "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
    assert c.call("nosuch") == "ERR unknown command 'nosuch', with args beginning with: "
    assert c.call("ECHO") == "ERR wrong number of arguments for 'echo' command"
    assert c.call("PING", "a", "b") == "ERR wrong number of arguments for 'ping' command"
    assert c.call("DBSIZE", "x") == "ERR wrong number of arguments for 'dbsize' command"
    # The argument list is cut at 128 bytes, as Redis does.
    e = c.call("FOO", "a" * 300, "b")
    assert e.startswith("ERR unknown command 'FOO', with args beginning with: 'aaaa")
    assert len(e) < 300
    # The connection is still usable after error replies.
    assert c.call("PING") == "PONG"


def test_errors_through_redis_py(r):
    with pytest.raises(redis.ResponseError, match="unknown command 'FOO'"):
        r.execute_command("FOO")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'echo'"):
        r.execute_command("ECHO")


# ---------------------------------------------------------------- HELLO / RESP3

def test_hello_versions(server, raw_factory):
    c = raw_factory(server)
    h = c.call("HELLO")  # no argument: keeps RESP2
    assert isinstance(h, list) and len(h) == 14
    m = dict(zip([x.decode() for x in h[0::2]], h[1::2]))
    assert m["server"] == b"pion" and m["proto"] == 2 and m["mode"] == b"standalone"
    assert m["role"] == b"master" and m["modules"] == [] and m["version"] == b"0.1.0"
    h3 = c.call("HELLO", "3")
    assert isinstance(h3, dict) and h3["proto"] == 3 and h3["server"] == b"pion"
    assert h3["id"] == m["id"]
    assert c.call("HELLO")["proto"] == 3  # keeps RESP3
    assert c.call("HELLO", "4") == "NOPROTO unsupported protocol version"
    assert c.call("HELLO", "1") == "NOPROTO unsupported protocol version"
    assert c.call("HELLO", "abc") == "ERR Protocol version is not an integer or out of range"
    assert c.call("HELLO", "3", "BOGUS") == "ERR Syntax error in HELLO option 'BOGUS'"
    h2 = c.call("HELLO", "2", "SETNAME", "myname")
    assert isinstance(h2, list) and dict(zip(h2[0::2], h2[1::2]))[b"proto"] == 2
    assert c.call("CLIENT", "GETNAME") == b"myname"


def test_resp3_shapes(server, raw_factory):
    c = raw_factory(server)
    c.call("HELLO", "3")
    assert c.call("PING") == "PONG"
    assert c.call("CLIENT", "GETNAME") is None
    c.send(RawConn.encode("CLIENT", "GETNAME"))
    assert c.read_raw(3) == b"_\r\n"
    cfg = c.call("CONFIG", "GET", "maxmemory")
    assert cfg == {"maxmemory": b"0"}
    info = c.call("INFO", "server")
    assert isinstance(info, Verbatim) and info.startswith(b"# Server\r\n")
    c.send(RawConn.encode("INFO", "clients"))
    assert c.read_raw(1) == b"="
    c.buf = b"=" + c.buf
    assert isinstance(c.read(), Verbatim)
    t = c.call("TIME")  # a plain array in both
    assert isinstance(t, list) and len(t) == 2
    # Back to RESP2: the same commands, RESP2 shapes.
    c.call("HELLO", "2")
    c.send(RawConn.encode("CLIENT", "GETNAME"))
    assert c.read_raw(5) == b"$-1\r\n"
    assert c.call("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]
    c.send(RawConn.encode("INFO", "clients"))
    assert c.read_raw(1) == b"$"
    c.buf = b"$" + c.buf
    assert c.read().startswith(b"# Clients\r\n")


# ---------------------------------------------------------------- inline and pipelining

def test_inline_commands(server, raw_factory):
    c = raw_factory(server)
    c.send(b"PING\r\n")
    assert c.read() == "PONG"
    c.send(b'ECHO "hello world"\r\n')
    assert c.read() == b"hello world"
    c.send(b"ECHO 'single quoted'\n")  # LF only
    assert c.read() == b"single quoted"
    c.send(b'ECHO "\\x41\\x42\\n"\r\n')
    assert c.read() == b"AB\n"
    c.send(b"\r\n\r\n   \r\nPING\r\n")  # empty lines are ignored
    assert c.read() == "PONG"
    c.send(b"echo a b\r\n")
    assert c.read() == "ERR wrong number of arguments for 'echo' command"
    # Inline and multibulk mixed in one write.
    c.send(b"PING\r\n" + RawConn.encode("ECHO", "x") + b"PING\r\n")
    assert [c.read(), c.read(), c.read()] == ["PONG", b"x", "PONG"]


def test_pipeline_10k_in_one_write(server, raw_factory):
    c = raw_factory(server)
    n = 10000
    payload = b"".join(RawConn.encode("ECHO", str(i)) for i in range(n))
    c.send(payload)
    for i in range(n):
        assert c.read() == str(i).encode()
    assert c.call("PING") == "PONG"


def test_pipeline_redis_py(r):
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.echo(str(i))
    assert p.execute() == [str(i).encode() for i in range(2000)]


def test_large_arguments(r):
    for n in (32 * 1024 - 1, 32 * 1024, 100_000, 1 << 20, 16 << 20):
        v = bytes(random.Random(n).getrandbits(8) for _ in range(256)) * (n // 256) + b"z" * (n % 256)
        assert r.echo(v) == v


def test_pipelined_large_arguments(r):
    vals = [bytes([i]) * (40_000 + i * 1000) for i in range(20)]
    p = r.pipeline(transaction=False)
    for v in vals:
        p.echo(v)
    assert p.execute() == vals


# ---------------------------------------------------------------- protocol errors

PROTOCOL_CASES = [
    # (bytes, expected error text) -- Redis tests/unit/protocol.tcl and more
    (b"*3000000000\r\n", "ERR Protocol error: invalid multibulk length"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "ERR Protocol error: expected '$', got 'f'"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*1\r\nfoo\r\n", "ERR Protocol error: expected '$', got 'f'"),
    (b'set """test-key""" test-value\r\nping\r\n', "ERR Protocol error: unbalanced quotes in request"),
    (b"*abc\r\n", "ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n$4\r\nPINGxx", "ERR Protocol error: expected CRLF after bulk argument"),
]


@pytest.mark.parametrize("data,err", PROTOCOL_CASES)
def test_protocol_error_closes_only_that_client(server, raw_factory, data, err):
    other = raw_factory(server)
    assert other.call("PING") == "PONG"
    bad = raw_factory(server)
    bad.send(data)
    assert bad.read() == err
    assert bad.at_eof()
    assert other.call("PING") == "PONG"
    assert_alive(server)


def test_negative_and_zero_multibulk_are_empty_commands(server, raw_factory):
    c = raw_factory(server)
    c.send(b"*-10\r\n*0\r\n")
    assert c.call("PING") == "PONG"


@pytest.mark.parametrize("seq", [b"\x00", b"*\x00", b"$\x00"])
def test_protocol_desync(server, raw_factory, seq):
    """protocol.tcl 'Protocol desync regression test': the server must answer a
    protocol error and close instead of buffering forever."""
    c = raw_factory(server)
    c.send(seq)
    payload = b"A" * 1024  # no newline: the line never ends
    reply = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            c.sock.sendall(payload)
        except OSError:
            break
        c.sock.setblocking(False)
        try:
            reply += c.sock.recv(4096)
        except BlockingIOError:
            pass
        except OSError:
            break
        finally:
            c.sock.setblocking(True)
        if b"Protocol error" in reply:
            break
    if b"Protocol error" not in reply:
        c.sock.settimeout(5)
        try:
            reply += c.sock.recv(4096)
        except OSError:
            pass
    assert b"Protocol error" in reply
    assert_alive(server)


def test_proto_max_bulk_len(server_factory, raw_factory):
    s = server_factory(["--proto-max-bulk-len", "1000"], kvcache=False)
    c = raw_factory(s)
    assert c.call("ECHO", "x" * 1000) == b"x" * 1000
    c.send(b"*2\r\n$4\r\nECHO\r\n$1001\r\n")
    assert c.read() == "ERR Protocol error: invalid bulk length"
    assert c.at_eof()


def test_unauthenticated_limits(server_factory, raw_factory):
    s = server_factory(["--requirepass", "pw"], kvcache=False)
    c = raw_factory(s)
    c.send(b"*11\r\n")
    assert c.read() == "ERR Protocol error: unauthenticated multibulk length"
    assert c.at_eof()
    c = raw_factory(s)
    c.send(b"*2\r\n$4\r\nECHO\r\n$20000\r\n")
    assert c.read() == "ERR Protocol error: unauthenticated bulk length"


def test_client_query_buffer_limit(server_factory, raw_factory):
    s = server_factory(["--client-query-buffer-limit", "1mb"], kvcache=False)
    c = raw_factory(s)
    c.send(b"*3\r\n$4\r\nECHO\r\n$600000\r\n" + b"x" * 600000 + b"\r\n$600000\r\n")
    assert c.read() == "ERR Protocol error: client query buffer limit exceeded"
    assert c.at_eof()
    assert_alive(s)


def test_client_disappears_mid_bulk(server, raw_factory):
    for body in (b"x" * 100, b"y" * 100_000):
        c = raw_factory(server)
        c.send(b"*2\r\n$4\r\nECHO\r\n$1000000\r\n" + body)
        c.close()
    c = raw_factory(server)
    c.send(b"*2\r\n$4\r\nEC")
    c.close()
    assert_alive(server)
    r = server.client()
    assert poll(lambda: r.info("clients")["connected_clients"] == 1)


def test_garbage_bytes(server, raw_factory):
    rng = random.Random(1234)
    print("seed 1234")
    for i in range(30):
        c = raw_factory(server, timeout=5)
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 5000)))
        try:
            c.send(data)
            c.sock.shutdown(socket.SHUT_WR)
            c.at_eof(5)
        except OSError:
            pass
        c.close()
    assert_alive(server)


# ---------------------------------------------------------------- slow readers, limits

def test_output_buffer_limit_disconnects_slow_reader(server_factory, raw_factory):
    s = server_factory(["--client-output-buffer-limit", "4mb"], kvcache=False)
    good = raw_factory(s)
    slow = raw_factory(s)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sock.settimeout(30)
    big = b"e" * (1 << 20)
    cmd = RawConn.encode("ECHO", big)
    try:
        for _ in range(64):  # never reads the replies
            slow.send(cmd)
    except OSError:
        pass  # the server closed it
    r = s.client()
    assert poll(lambda: r.info("stats")["client_output_buffer_limit_disconnections"] >= 1)
    assert "closed for overcoming of output buffer limits" in s.log()
    assert good.call("PING") == "PONG"
    assert r.echo(big) == big  # a large reply to a reading client is fine


def test_one_reply_past_the_hard_limit_closes_a_reading_client(server_factory, raw_factory):
    """As Redis: the hard limit counts every reply, so one reply larger than it closes even
    a client that reads (a string value and a by-reference V.FETCH alike); smaller replies
    pass and no other client is touched."""
    s = server_factory(["--client-output-buffer-limit", "2mb"])
    c = raw_factory(s)
    assert c.call("SET", "big", b"v" * (3 << 20)) == "OK"
    assert c.call("KV.PREFIX.REGISTER", "obuf", 16, "fp16") == "OK"
    rows = 3 << 15  # 3 MiB of 32-byte rows
    assert c.call("V.STOREBATCH", "obuf_pk", 0, 0, rows, b"\x01" * (rows * 32),
                  "FMT", "F16") == "OK"
    r = s.client()
    before = r.info("stats")["client_output_buffer_limit_disconnections"]
    assert c.call("GETRANGE", "big", 0, (1 << 20) - 1) == b"v" * (1 << 20)
    assert len(c.call("V.FETCH", "obuf_pk", 0, "RANGE", 0, 1 << 15, "FMT", "NATIVE")) == 1 << 20
    for cmd in (("GET", "big"), ("V.FETCH", "obuf_pk", 0, "RANGE", 0, rows, "FMT", "NATIVE")):
        reader = raw_factory(s)
        reader.send(reader.encode(*cmd))
        assert reader.at_eof(), cmd
        assert len(reader.buf) < 3 << 20, cmd  # never the whole reply
    assert r.info("stats")["client_output_buffer_limit_disconnections"] == before + 2
    assert c.call("PING") == "PONG"


def test_slow_reader_under_the_limit_gets_everything(server, raw_factory):
    """Backpressure pauses a pipelining client that reads slowly; it is not cut off."""
    c = raw_factory(server)
    n, size = 80, 1 << 20
    data = b"".join(RawConn.encode("ECHO", bytes([65 + i % 26]) * size) for i in range(n))
    # The server stops reading while ~32 MiB of replies are queued, so the
    # client must read while it sends.
    sender = threading.Thread(target=c.send, args=(data,))
    sender.start()
    for i in range(n):
        assert c.read() == bytes([65 + i % 26]) * size
    sender.join()


def test_idle_timeout(server_factory, raw_factory):
    s = server_factory(["--timeout", "1"], kvcache=False)
    c = raw_factory(s)
    assert c.call("PING") == "PONG"
    assert c.at_eof(timeout=10)
    assert_alive(s)


def test_maxclients(server_factory, raw_factory):
    s = server_factory(["--maxclients", "3"], kvcache=False)
    conns = []

    def try_open():
        c = raw_factory(s)
        c.send(b"PING\r\n")
        rep = c.read()
        if rep == "PONG":
            conns.append(c)
            return True
        return False

    for _ in range(3):
        assert poll(try_open)  # the readiness client may still be closing
    extra = raw_factory(s)
    assert extra.read() == "ERR max number of clients reached"
    assert extra.at_eof()
    conns[0].close()
    assert poll(try_open)
    r_info = conns[1].call("INFO", "stats")
    assert b"rejected_connections:" in r_info


def test_thousand_connections(server_factory, raw_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    s = server_factory(["-w", "2"], kvcache=False)  # inherits the raised limit
    conns = [raw_factory(s) for _ in range(1000)]
    for i, c in enumerate(conns):
        c.send(RawConn.encode("ECHO", str(i)))
    for i, c in enumerate(conns):
        assert c.read() == str(i).encode()
    r = s.client()
    assert r.info("clients")["connected_clients"] >= 1000
    for c in conns:
        c.close()
    assert poll(lambda: r.info("clients")["connected_clients"] == 1)


@pytest.mark.concurrency
def test_workers_4(server_factory, raw_factory):
    s = server_factory(["-w", "4"], kvcache=False)
    assert s.client().info("server")["workers"] == 4
    conns = [raw_factory(s) for _ in range(16)]
    for i, c in enumerate(conns):
        assert c.call("ECHO", str(i)) == str(i).encode()
    lst = conns[0].call("CLIENT", "LIST").decode()
    workers = {int(f.split("=")[1]) for line in lst.splitlines() for f in line.split()
               if f.startswith("worker=")}
    assert workers == {0, 1, 2, 3}


# ---------------------------------------------------------------- Redis tools

def test_redis_cli(server):
    base = ["redis-cli", "-p", str(server.port)]
    out = subprocess.run(base + ["PING"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "PONG"
    out = subprocess.run(base + ["--raw", "INFO", "server"], capture_output=True, text=True,
                         timeout=30)
    assert "redis_version:7.0.0" in out.stdout and "tcp_port:%d" % server.port in out.stdout
    out = subprocess.run(base + ["ECHO", "a b"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "a b"
    out = subprocess.run(base + ["NOSUCH"], capture_output=True, text=True, timeout=30)
    assert "unknown command" in out.stdout
    # Commands from stdin, one per line (how scripts drive an interactive session).
    out = subprocess.run(base, input="PING\nECHO hello\nDBSIZE\nINFO keyspace\nCOMMAND COUNT\n",
                         capture_output=True, text=True, timeout=30)
    lines = out.stdout.splitlines()
    assert lines[0] == "PONG" and lines[1] == "hello" and lines[2] == "0"
    out = subprocess.run(base + ["-3", "HELLO", "3"], capture_output=True, text=True,
                         timeout=30)
    assert "pion" in out.stdout


def test_redis_benchmark(server):
    out = subprocess.run(["redis-benchmark", "-p", str(server.port), "-t", "ping_mbulk",
                          "-n", "2000", "-c", "50", "-q"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "PING_MBULK" in out.stdout
    out = subprocess.run(["redis-benchmark", "-p", str(server.port), "-t", "ping_inline",
                          "-n", "2000", "-c", "10", "-P", "16", "-q"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "PING_INLINE" in out.stdout
    assert_alive(server)
