"""Client eviction (maxmemory-clients), as Redis 7: once the buffers of all clients pass
the bound, the clients holding the most are closed, largest first, never one that
turned CLIENT NO-EVICT on; INFO evicted_clients counts them. Bounded polls, no sleeps."""
from __future__ import annotations

import socket

from conftest import poll

MiB = 1 << 20


def info_int(r, section: str, field: str) -> int:
    return int(r.info(section)[field])


def is_closed(conn) -> bool:
    """Whether the server closed conn (EOF or reset), without waiting long."""
    conn.sock.settimeout(0.05)
    try:
        while True:
            data = conn.sock.recv(1 << 20)
            if not data:
                return True
    except (TimeoutError, socket.timeout, BlockingIOError):
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_big_argument_evicts_the_largest_client(server_factory, raw_factory):
    s = server_factory(["--maxmemory-clients", "8mb", "-w", "1"], kvcache=False)
    r = s.client(single_connection_client=True)
    assert r.execute_command("CLIENT", "NO-EVICT", "on") == b"OK"
    assert "flags=e" in r.execute_command("CLIENT", "INFO").decode()
    a = raw_factory(s)
    b = raw_factory(s)
    # a holds ~6 MiB of an unfinished 10 MiB argument.
    a.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (10 * MiB) + b"a" * (6 * MiB))
    assert poll(lambda: info_int(r, "memory", "mem_clients_normal") >= 5 * MiB)
    assert info_int(r, "stats", "evicted_clients") == 0
    # b's 3 MiB argument takes the total past 8 MiB: a, the largest, goes; b is served.
    size = 3 * MiB
    assert b.call("ECHO", b"b" * size) == b"b" * size
    assert poll(lambda: is_closed(a))
    assert info_int(r, "stats", "evicted_clients") == 1
    assert poll(lambda: info_int(r, "memory", "mem_clients_normal") < 8 * MiB)
    assert r.ping()
    r.config_resetstat()
    assert info_int(r, "stats", "evicted_clients") == 0


def client_fields(r, name: str) -> dict[str, str]:
    for line in r.execute_command("CLIENT", "LIST").decode().splitlines():
        fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
        if fields.get("name") == name:
            return fields
    return {}


def test_no_evict_client_grows_past_the_bound(server_factory, raw_factory):
    """As Redis: a NO-EVICT client's own buffers are never refused, so it may hold more
    than the bound (qbuf counts the big argument's bytes that arrived); the other
    clients are evicted then, as Redis evicts while the total is past the bound."""
    s = server_factory(["--maxmemory-clients", "8mb", "-w", "1"], kvcache=False)
    r = s.client(single_connection_client=True)
    r.execute_command("CLIENT", "NO-EVICT", "on")
    a = raw_factory(s)
    b = raw_factory(s)
    assert a.call("CLIENT", "NO-EVICT", "on") == "OK"
    assert a.call("CLIENT", "SETNAME", "a") == "OK"
    a.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (12 * MiB) + b"a" * (9 * MiB))
    assert poll(lambda: client_fields(r, "a").get("qbuf") == str(9 * MiB))
    assert int(client_fields(r, "a")["tot-mem"]) > 8 * MiB
    assert not is_closed(a)
    try:
        b.call("ECHO", b"b" * (3 * MiB))
    except OSError:
        pass  # closed while sending or reading
    assert poll(lambda: is_closed(b))
    assert info_int(r, "stats", "evicted_clients") == 1
    assert not is_closed(a)
    # RESET turns NO-EVICT off.
    b = raw_factory(s)
    assert b.call("CLIENT", "NO-EVICT", "on") == "OK"
    assert "flags=e" in b.call("CLIENT", "INFO").decode()
    assert b.call("RESET") == "RESET"
    assert "flags=N" in b.call("CLIENT", "INFO").decode()


def test_queued_transaction_counts_and_evicts(server_factory, raw_factory):
    """The commands queued in MULTI hold memory (CLIENT LIST multi=, multi-mem, in
    tot-mem), as Redis counts them: a transaction growing past the bound is evicted."""
    s = server_factory(["--maxmemory-clients", "3mb", "-w", "1"])
    r = s.client(single_connection_client=True)
    r.execute_command("CLIENT", "NO-EVICT", "on")
    d = raw_factory(s)
    assert d.call("CLIENT", "SETNAME", "d") == "OK"
    assert client_fields(r, "d")["multi"] == "-1"
    assert d.call("MULTI") == "OK"
    assert client_fields(r, "d")["multi"] == "0"
    assert d.call("SET", "k", b"v" * 500_000) == "QUEUED"
    f = client_fields(r, "d")
    assert f["multi"] == "1" and int(f["multi-mem"]) >= 500_000
    assert int(f["tot-mem"]) >= int(f["multi-mem"])
    assert d.call("DISCARD") == "OK"
    f = client_fields(r, "d")
    assert f["multi"] == "-1" and f["multi-mem"] == "0"
    c = raw_factory(s)
    assert c.call("CLIENT", "SETNAME", "c") == "OK"
    assert c.call("MULTI") == "OK"
    try:
        for _ in range(8):  # 4 MB queued in all
            if c.call("SET", "k", b"v" * 500_000) != "QUEUED":
                break
    except OSError:
        pass  # closed while sending or reading
    assert poll(lambda: is_closed(c))
    assert client_fields(r, "c") == {}
    assert info_int(r, "stats", "evicted_clients") == 1
    assert d.call("PING") == "PONG"


def test_output_buffers_evict_readers_that_do_not_read(server_factory, raw_factory):
    s = server_factory(["-w", "2"])
    r = s.client(single_connection_client=True)
    r.execute_command("CLIENT", "NO-EVICT", "on")
    r.set("v", b"x" * 10_000)  # under 16 KiB: copied into each reply
    r.config_set("maxmemory-clients", "4mb")
    slow = [raw_factory(s) for _ in range(10)]
    # (A reply of a larger value refers to the stored value and holds no memory of its
    # own: it counts against the output limits only.)
    mget = b"*2\r\n$4\r\nMGET\r\n$1\r\nv\r\n"
    for c in slow:  # each asks for 20 MB of replies and reads none
        c.send(mget * 2000)
    assert poll(lambda: info_int(r, "stats", "evicted_clients") >= 1)
    assert poll(lambda: any(is_closed(c) for c in slow))
    assert r.dbsize() == 1 and r.ping()
    assert info_int(r, "stats", "evicted_keys") == 0


def test_lowering_the_bound_evicts(server_factory, raw_factory):
    """CONFIG SET maxmemory-clients below what clients hold evicts them (the server's
    cron checks), as Redis does."""
    s = server_factory(["-w", "1"], kvcache=False)
    r = s.client(single_connection_client=True)
    r.execute_command("CLIENT", "NO-EVICT", "on")
    a = raw_factory(s)
    assert a.call("CLIENT", "SETNAME", "big") == "OK"
    a.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (10 * MiB) + b"a" * (4 * MiB))
    assert poll(lambda: info_int(r, "memory", "mem_clients_normal") >= 3 * MiB)
    assert not is_closed(a)
    r.config_set("maxmemory-clients", "1mb")
    # Gone from CLIENT LIST by the time CONFIG SET answered; closed by its worker.
    assert "name=big " not in r.execute_command("CLIENT", "LIST").decode()
    assert poll(lambda: is_closed(a))
    assert info_int(r, "stats", "evicted_clients") == 1


def test_client_whose_argument_passes_the_bound_is_evicted(server_factory, raw_factory):
    """The client growing past the bound is itself the largest: it goes (as Redis evicts
    a client for its own large argument), the others stay."""
    s = server_factory(["--maxmemory-clients", "4mb", "-w", "1"], kvcache=False)
    r = s.client(single_connection_client=True)
    other = raw_factory(s)
    assert other.call("PING") == "PONG"
    big = raw_factory(s)
    try:
        big.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (16 * MiB) + b"z" * (8 * MiB))
    except OSError:
        pass  # closed while sending
    assert poll(lambda: is_closed(big))
    assert info_int(r, "stats", "evicted_clients") == 1
    assert other.call("PING") == "PONG"
