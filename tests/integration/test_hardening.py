"""Regressions for the hardening issue: each case below took the Stage-1 server down or
made it hold memory without bound. They run against the real binary with bounded loops
and deadlines; none sleeps to synchronise (a few pace a slow client on purpose)."""
from __future__ import annotations

import os
import resource
import socket
import subprocess
import time

import numpy as np
import pytest

from conftest import BIN_DIR, RawConn, RawError, poll

MiB = 1 << 20
# Under ASan/TSan (make test-sanitize) the behaviour is checked but not the memory
# figures: the sanitizer's shadow memory and quarantine dwarf them, and its address
# space reservation does not fit under an RLIMIT_AS.
SANITIZED = bool(os.environ.get("ASAN_OPTIONS") or os.environ.get("TSAN_OPTIONS")
                 or BIN_DIR.parent.name in ("dev", "tsan"))


def assert_memory(value_mb: float, bound_mb: float, what: str) -> None:
    if not SANITIZED:
        assert value_mb < bound_mb, f"{value_mb:.0f} MB {what} (bound {bound_mb} MB)"



def status_kb(server, field: str) -> int:
    """A /proc/<pid>/status field of the server in KiB (VmRSS, VmHWM, VmSize)."""
    with open(f"/proc/{server.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def info_int(server, section: str, field: str) -> int:
    return int(server.client().info(section)[field])


def recv_exact_discard(conn: RawConn, n: int, keep_head: int = 0) -> bytes:
    """Reads exactly n bytes (what conn buffered first), keeping the first keep_head."""
    sock = conn.sock
    pre, conn.buf = conn.buf[:n], conn.buf[n:]
    head = bytearray(pre[:keep_head])
    buf = bytearray(4 * MiB)
    view = memoryview(buf)
    left = n - len(pre)
    while left > 0:
        k = sock.recv_into(view, min(left, len(buf)))
        if k == 0:
            raise ConnectionError(f"closed with {left} of {n} bytes unread")
        if len(head) < keep_head:
            head += view[:min(k, keep_head - len(head))]
        left -= k
    return bytes(head)


# ------------------------------------------------ 1. output memory is reclaimed as sent

def test_steady_pipeline_with_slow_reads_keeps_memory_bounded(server_factory, raw_factory):
    """The queue never empties (the client stays two batches of replies behind and its
    receive buffer is small); sent bytes must still be freed. Before: the arena kept
    every byte queued since it was last empty (3.75 GB in 16 s)."""
    s = server_factory(["-w", "1"], kvcache=False)
    c = RawConn.__new__(RawConn)
    c.buf = b""
    c.sock = socket.socket()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    c.sock.settimeout(60)
    c.sock.connect(("127.0.0.1", s.port))
    payload = b"x" * 1000
    batch = 8000  # ~8 MB of replies per batch
    cmd = RawConn.encode("ECHO", payload) * batch
    reply = (b"$1000\r\n" + payload + b"\r\n") * batch
    rounds = 48  # ~384 MB through the queue in all, at most ~24 MB unsent at a time
    try:
        c.send(cmd)
        c.send(cmd)
        for _ in range(rounds - 2):
            c.send(cmd)
            assert c.read_raw(len(reply)) == reply  # two batches behind
        for _ in range(2):
            assert c.read_raw(len(reply)) == reply
        hwm_mb = status_kb(s, "VmHWM") / 1024
        assert_memory(hwm_mb, 200, "peak RSS for ~24 MB of unsent replies")
        assert c.call("PING") == "PONG"
    finally:
        c.close()


# ------------------------------------------------ 2. pipelines written whole before reading

def test_redis_py_big_pipelines_complete(server):
    r = server.client(socket_timeout=120)
    r.execute_command("KV.PREFIX.REGISTER", "pipe", 256, "fp16")
    rows = np.arange(1024 * 256, dtype=np.float32).reshape(1024, 256) / 1000  # 1 MiB of f32
    blob = rows.tobytes()
    p = r.pipeline(transaction=False)
    for layer in range(48):
        p.execute_command("V.STOREBATCH", "pipe_pk", layer, 0, 1024, blob)
        p.execute_command("V.FETCH", "pipe_pk", layer, "RANGE", 0, 1024)
    out = p.execute()
    assert len(out) == 96
    want = rows.astype(np.float16).astype(np.float32).tobytes()
    for i in range(48):
        assert out[2 * i] in (b"OK", "OK", True)
        assert out[2 * i + 1] == want
    big = b"e" * MiB
    p = r.pipeline(transaction=False)
    for _ in range(64):
        p.echo(big)
    assert p.execute() == [big] * 64


def test_raw_pipeline_written_before_reading(server, raw_factory):
    """64 x ECHO 1 MiB sent with one sendall before the first read (as hiredis'
    redisAppendCommand + redisGetReply does)."""
    c = raw_factory(server, timeout=120)
    big = b"z" * MiB
    c.send(RawConn.encode("ECHO", big) * 64)
    for _ in range(64):
        assert c.read() == big


# ------------------------------------------------ 3. client-output-buffer-limit as Redis

def test_output_limit_redis_syntax_and_refusals(server, raw_factory):
    c = raw_factory(server)
    rest = b" slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    assert c.call("CONFIG", "GET", "client-output-buffer-limit") == [
        b"client-output-buffer-limit", b"normal 0 0 0" + rest]
    assert c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 64mb 16mb 10") == "OK"
    assert c.call("CONFIG", "GET", "client-output-buffer-limit")[1] == b"normal %d %d 10" % (
        64 * MiB, 16 * MiB) + rest
    # The short form (pion's) keeps its 1mb floor; Redis's class syntax takes any size.
    for bad in ("1", "normal 64mb 16mb x", "master 1 2 3", "normal 64mb"):
        e = c.call("CONFIG", "SET", "client-output-buffer-limit", bad)
        assert isinstance(e, RawError) and e.startswith("ERR CONFIG SET failed"), (bad, e)
    assert c.call("CONFIG", "GET", "client-output-buffer-limit")[1] == b"normal %d %d 10" % (
        64 * MiB, 16 * MiB) + rest
    assert c.call("CONFIG", "SET", "client-output-buffer-limit", "0") == "OK"
    assert c.call("PING") == "PONG"


def test_soft_limit_disconnects_a_client_that_stopped_reading(server_factory, raw_factory):
    s = server_factory(["--client-output-buffer-limit", "normal", "0", "2mb", "1"],
                       kvcache=False)
    slow = raw_factory(s)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.send(RawConn.encode("ECHO", b"s" * MiB) * 8)  # never read
    r = s.client()
    assert poll(lambda: r.info("stats")["client_output_buffer_limit_disconnections"] >= 1)
    assert "soft limit" in s.log()
    # Gone on the server's side (the peer may see only an RST its tiny window dropped).
    assert poll(lambda: r.info("clients")["connected_clients"] == 1)
    assert r.ping()


def test_largest_reply_is_delivered_with_default_limits(server, raw_factory):
    """1 GiB (the largest legal V.FETCH reply) reaches a reading client under the default
    limits (the normal class has none, as Redis). Once: closed with 0 bytes, the reply
    alone being above a 1 GiB default limit."""
    c = raw_factory(server, timeout=120)
    assert c.call("KV.PREFIX.REGISTER", "huge", 16, "fp16") == "OK"
    row = np.arange(16, dtype=np.float32)
    assert c.call("V.STOREBATCH", "huge_pk", 0, 0, 1, row.tobytes()) == "OK"
    c.send(RawConn.encode("V.FETCH", "huge_pk", 0, "RANGE", 0, 1 << 24))
    header = b"$%d\r\n" % (1 << 30)
    assert c.read_raw(len(header)) == header
    head = recv_exact_discard(c, (1 << 30) + 2, keep_head=128)
    assert np.frombuffer(head[:64], dtype=np.float32).tolist() == row.tolist()
    assert head[64:128] == b"\0" * 64
    assert c.call("PING") == "PONG"


def test_pinned_chunks_count_against_the_output_limit(server_factory, raw_factory):
    """A one-row fetch sent by reference pins its whole stored chunk (dropped or evicted
    rows stay alive while unsent): the limit counts each pinned chunk once, not the row."""
    s = server_factory(["--client-output-buffer-limit", "4mb", "-w", "1"])
    c = raw_factory(s, timeout=60)
    assert c.call("KV.PREFIX.REGISTER", "pin", 16, "fp16") == "OK"
    rows = 1 << 19  # 16 MiB of fp16 rows: 64 full chunks of 8192 rows
    data = np.ones((rows, 16), dtype=np.float16).tobytes()
    assert c.call("V.STOREBATCH", "pin_pk", 0, 0, rows, data, "FMT", "F16") == "OK"
    def fetches(chunks):
        return b"".join(RawConn.encode("V.FETCH", "pin_pk", 0, "RANGE", (i % chunks) * 8192,
                                       (i % chunks) * 8192 + 1, "FMT", "NATIVE")
                        for i in range(256))
    # A client far behind on replies that pin one chunk (256 KiB) is under the limit.
    reader = raw_factory(s, timeout=60)
    reader.send(fetches(1) * 8)
    for _ in range(256 * 8):
        assert reader.read() == np.ones(16, dtype=np.float16).tobytes()
    one = fetches(64)
    # One that never reads is cut once its unsent replies pin more than 4 MiB.
    slow = raw_factory(s, timeout=60)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for _ in range(80):  # 20480 fetches of 32 bytes each
            slow.send(one)
    except OSError:
        pass  # closed by the server
    r = s.client()
    assert poll(lambda: r.info("stats")["client_output_buffer_limit_disconnections"] >= 1)
    assert "closed for overcoming of output buffer limits" in s.log()
    assert c.call("PING") == "PONG"


# ------------------------------------------------ 4. reply amplification, bulks in flight

def test_fetch_of_unwritten_rows_costs_no_memory(server_factory, raw_factory):
    """One row at token 16,777,215, then a 1 GiB F32 fetch of rows 0..16777215 from six
    clients that never read. Before: 6 GiB held under --maxmemory 1gb."""
    s = server_factory(["--maxmemory", "1gb"])
    c = raw_factory(s)
    assert c.call("KV.PREFIX.REGISTER", "amp", 16, "int8") == "OK"
    row = np.ones(16, dtype=np.float32)
    assert c.call("V.STOREBATCH", "amp_pk", 0, (1 << 24) - 1, 1, row.tobytes()) == "OK"
    rss0 = status_kb(s, "VmRSS")
    readers = []
    for _ in range(6):
        k = raw_factory(s)
        k.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        k.send(RawConn.encode("V.FETCH", "amp_pk", 0, "RANGE", 0, (1 << 24) - 1))
        readers.append(k)

    def all_queued():
        lst = c.call("CLIENT", "LIST").decode().splitlines()
        big = [ln for ln in lst if any(f.startswith("omem=") and int(f[5:]) > (1 << 29)
                                       for f in ln.split())]
        return len(big) == 6

    assert poll(all_queued, timeout=60)
    grew_mb = (status_kb(s, "VmRSS") - rss0) / 1024
    assert_memory(grew_mb, 128, "of RSS growth for six 1 GiB replies of zeros")
    assert c.call("PING") == "PONG"


def test_partial_bulks_of_no_evict_clients_pass_maxmemory_clients(server_factory, raw_factory):
    """Big arguments take memory as their bytes arrive. Clients with CLIENT NO-EVICT on
    are never refused nor evicted for maxmemory-clients, as in Redis (the admin who set
    it vouches for them; test_client_eviction.py has the eviction of the others): both
    commands complete past the bound, and the server holds what they sent, no more."""
    s = server_factory(["--maxmemory-clients", "64mb", "--maxmemory", "64mb", "-w", "1"],
                       kvcache=False)
    a = raw_factory(s, timeout=60)
    b = raw_factory(s, timeout=60)
    assert a.call("CLIENT", "NO-EVICT", "on") == "OK"
    assert b.call("CLIENT", "NO-EVICT", "on") == "OK"
    size = 48 * MiB
    head = b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % size
    a.send(head + b"a" * (40 * MiB))  # held: a 40+ MiB buffer, reply pending
    assert poll(lambda: info_int(s, "memory", "mem_clients_normal") >= 32 * MiB)
    b.send(head + b"b" * size + b"\r\n")
    assert b.read() == b"b" * size
    assert b.call("PING") == "PONG"
    assert_memory(status_kb(s, "VmRSS") / 1024, 300, "RSS with 96 MiB of client buffers")
    a.send(b"a" * (size - 40 * MiB) + b"\r\n")
    assert a.read() == b"a" * size
    assert a.call("PING") == "PONG"
    assert poll(lambda: info_int(s, "memory", "mem_clients_normal") < 8 * MiB)


# ------------------------------------------------ 5. allocation failure is not an abort

def _limit_as(nbytes):
    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return pre


@pytest.mark.skipif(SANITIZED, reason="a sanitizer's shadow memory needs more address space")
def test_declared_giant_bulks_under_an_address_space_limit(server_factory, raw_factory):
    """200 connections each declare a 1 GiB argument under a 4 GiB address-space limit.
    Before: SIGABRT at the fourth (each header reserved its whole size)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 512:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    s = server_factory(["-w", "1"], kvcache=False, start=False)
    s.dir.mkdir(parents=True, exist_ok=True)
    with open(s.log_path, "ab") as log:
        s.proc = subprocess.Popen(s.cmdline(), stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=_limit_as(4 << 30))
    s.wait_ready()
    conns = []
    for _ in range(200):
        k = raw_factory(s)
        k.send(b"*2\r\n$4\r\nECHO\r\n$1073741824\r\n" + b"q" * 4096)
        conns.append(k)
    assert conns[-1].sock.fileno() >= 0
    ping = raw_factory(s)
    assert poll(lambda: ping.call("PING") == "PONG")
    assert s.proc.poll() is None
    assert status_kb(s, "VmSize") < (4 << 20)
    for k in conns[:100]:
        k.close()
    assert ping.call("PING") == "PONG"


# ------------------------------------------------ 6. file descriptors

def _limit_nofile(n):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return pre


def test_maxclients_lowered_to_the_open_file_limit(server_factory, raw_factory):
    s = server_factory(["-w", "1"], kvcache=False, start=False)
    s.dir.mkdir(parents=True, exist_ok=True)
    with open(s.log_path, "ab") as log:
        s.proc = subprocess.Popen(s.cmdline(), stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=_limit_nofile(96))
    s.wait_ready()
    assert "maxclients lowered to 64" in s.log()
    c = raw_factory(s)
    assert c.call("CONFIG", "GET", "maxclients") == [b"maxclients", b"64"]
    e = c.call("CONFIG", "SET", "maxclients", "10000")
    assert isinstance(e, RawError) and "open file limit" in e
    assert c.call("CONFIG", "SET", "maxclients", "32") == "OK"
    # Past maxclients, clients are refused with the Redis text and the server stays
    # responsive (no EMFILE spin).
    extra = [raw_factory(s) for _ in range(40)]
    refused = 0
    for k in extra:
        k.sock.settimeout(10)
        k.send(b"PING\r\n")
        rep = k.read()
        refused += rep == "ERR max number of clients reached"
    assert refused >= 8
    assert c.call("PING") == "PONG"
    cpu_before = sum(map(int, open(f"/proc/{s.proc.pid}/stat").read().split()[13:15]))
    for k in extra:
        k.close()
    assert poll(lambda: c.call("INFO", "clients").count(b"connected_clients:1\r") == 1)
    cpu_after = sum(map(int, open(f"/proc/{s.proc.pid}/stat").read().split()[13:15]))
    assert cpu_after - cpu_before < 200  # clock ticks: well under 2 s of CPU


# ------------------------------------------------ 8. idle timeout counts bytes moving

def test_slow_upload_and_slow_download_are_not_idle(server_factory, raw_factory):
    s = server_factory(["--timeout", "1", "-w", "1"], kvcache=False)
    up = raw_factory(s, timeout=60)
    size = 12 * MiB
    up.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % size)
    piece = b"u" * MiB
    for _ in range(12):  # 3 s at 4 MiB/s: longer than the timeout, never idle for 1 s
        up.send(piece)
        time.sleep(0.25)  # pacing the upload, not synchronisation
    up.send(b"\r\n")
    down = up
    down.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    got = bytearray()
    header = b"$%d\r\n" % size
    want = len(header) + size + 2
    while len(got) < want:  # ~3 s at 4 MiB/s
        chunk = down.sock.recv(MiB)
        assert chunk, f"closed after {len(got)} of {want} bytes"
        got += chunk
        time.sleep(0.25 * len(chunk) / MiB)  # pacing the download
    assert bytes(got) == header + b"u" * size + b"\r\n"
    assert down.call("PING") == "PONG"
    assert down.at_eof(timeout=10)  # and a really idle client is still closed


# ------------------------------------------------ 9. parser memory shrinks when idle

def test_huge_commands_leave_no_memory_behind(server_factory, raw_factory):
    s = server_factory(["-w", "1"], kvcache=False)
    conns = [raw_factory(s, timeout=60) for _ in range(12)]
    args = 1 << 20
    cmd = b"*%d\r\n$4\r\nECHO\r\n" % args + b"$1\r\nx\r\n" * (args - 1)
    for k in conns:
        k.send(cmd)
        e = k.read()
        assert isinstance(e, RawError) and "wrong number of arguments" in e
    rss_mb = status_kb(s, "VmRSS") / 1024
    assert_memory(rss_mb, 160, "RSS held by 12 idle connections")
    for k in conns:
        assert k.call("PING") == "PONG"


# ------------------------------------------------ 12. protected mode

def test_protected_mode_config_and_warning(server_factory, raw_factory):
    s = server_factory(["--bind", "0.0.0.0"], kvcache=False)
    # The warning follows the listening socket, so a fast first look can miss it.
    assert poll(lambda: "protected mode" in s.log())
    c = raw_factory(s)  # a loopback client is served
    assert c.call("PING") == "PONG"
    assert c.call("CONFIG", "GET", "protected-mode") == [b"protected-mode", b"yes"]
    quiet = server_factory(["--bind", "0.0.0.0", "--protected-mode", "no"], kvcache=False,
                           sub="quiet")
    assert "protected mode" not in quiet.log()
    e = subprocess.run([quiet.binary, "--protected-mode", "maybe"], capture_output=True,
                       text=True, timeout=30)
    assert e.returncode != 0 and "protected-mode" in e.stderr + e.stdout
