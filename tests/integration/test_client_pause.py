"""CLIENT PAUSE / UNPAUSE (docs/protocol.md "Server"): as Redis 7.0, a WRITE pause holds
every client's writes (and EXEC of a transaction with a write, and PUBLISH) until it ends
or CLIENT UNPAUSE; reads go on. A held command stays in its client's query buffer and
the client's later commands wait behind it."""
import threading

import pytest

from pion._resp import encode
from conftest import poll


def _qbuf(admin, name: str) -> int:
    for line in admin.call("CLIENT", "LIST").decode().splitlines():
        if f" name={name} " in line:
            return int(line.split(" qbuf=")[1].split(" ")[0])
    return -1


def test_write_pause_holds_writes_until_unpause(server, raw_factory):
    admin = raw_factory(server)
    writer = raw_factory(server)
    assert writer.call("CLIENT", "SETNAME", "writer") == "OK"
    assert admin.call("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    # Reads are not held.
    assert writer.call("GET", "k") is None
    # A write is: it waits in the query buffer, with the PING behind it.
    writer.send(encode("SET", "k", "v") + encode("PING"))
    assert poll(lambda: _qbuf(admin, "writer") > 0), "the SET never arrived"
    assert admin.call("GET", "k") is None
    # A read of the pausing client itself goes on; UNPAUSE releases the write.
    assert admin.call("CLIENT", "UNPAUSE") == "OK"
    assert writer.read() == "OK"
    assert writer.read() == "PONG"
    assert admin.call("GET", "k") == b"v"


def test_pause_ends_by_itself_and_all_holds_reads(server, raw_factory):
    admin = raw_factory(server)
    c = raw_factory(server)
    # A short ALL pause: every command waits for its end, then runs.
    assert admin.call("CLIENT", "PAUSE", "50", "ALL") == "OK"
    assert c.call("PING") == "PONG"
    assert c.call("SET", "x", "1") == "OK"
    assert admin.call("GET", "x") == b"1"


def test_exec_with_a_write_is_held_under_a_write_pause(server, raw_factory):
    admin = raw_factory(server)
    c = raw_factory(server)
    assert c.call("CLIENT", "SETNAME", "tx") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("GET", "a") == "QUEUED"
    assert admin.call("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    # A transaction of reads runs; queueing a write waits.
    assert c.call("EXEC") == [None]
    assert c.call("MULTI") == "OK"
    c.send(encode("SET", "a", "1"))
    assert poll(lambda: _qbuf(admin, "tx") > 0)
    assert admin.call("CLIENT", "UNPAUSE") == "OK"
    assert c.read() == "QUEUED"
    assert c.call("EXEC") == ["OK"]


def test_pause_argument_errors(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CLIENT", "PAUSE", "10", "SOME") == "ERR CLIENT PAUSE mode must be WRITE or ALL"
    assert c.call("CLIENT", "PAUSE", "abc") == "ERR timeout is not an integer or out of range"
    assert c.call("CLIENT", "PAUSE", "-1") == "ERR timeout is negative"
    assert c.call("CLIENT", "PAUSE") == "ERR wrong number of arguments for 'client|pause' command"
    assert c.call("CLIENT", "UNPAUSE") == "OK"


@pytest.mark.concurrency
def test_pause_and_unpause_while_both_workers_write(server_factory, raw_factory):
    """Writers on two workers pipeline SETs from their own threads while another client
    pauses and unpauses over and over (run under TSan): every write runs once, in order."""
    s = server_factory(["-w", "2"])
    writers = [raw_factory(s) for _ in range(4)]
    admin = raw_factory(s)
    errors: list[str] = []

    def write(c, me: int) -> None:
        try:
            for j in range(200):
                c.send(encode("SET", f"w{me}", str(j)) + encode("INCR", f"n{me}"))
                if c.read() != "OK" or c.read() != j + 1:
                    errors.append(f"writer {me} at {j}")
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"writer {me}: {e!r}")

    threads = [threading.Thread(target=write, args=(c, i)) for i, c in enumerate(writers)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        assert admin.call("CLIENT", "PAUSE", "5", "WRITE") == "OK"
        admin.call("GET", "w0")  # reads go on during the pause
        assert admin.call("CLIENT", "UNPAUSE") == "OK"
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert [admin.call("GET", f"n{i}") for i in range(4)] == [b"200"] * 4
