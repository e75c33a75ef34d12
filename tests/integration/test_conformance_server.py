"""Server behaviours Redis 7.0's suites check, end to end: an unauthenticated client's
output limit, the Redis commands pion answers as Redis does (MEMORY STATS, MODULE LIST,
LOLWUT, BGSAVE) as redis-py reads them."""
import socket

import redis

from pion._resp import encode


def test_unauthenticated_client_output_is_limited(server_factory):
    s = server_factory(["--requirepass", "pw"], kvcache=False)
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.settimeout(30)
    # NOAUTH after NOAUTH, never read: past 1 KiB unsent, the server hangs up.
    batch = encode("SET", "x", "5") * 1000
    closed = False
    try:
        for _ in range(2000):  # up to 2M commands, far more than the socket buffers hold
            sock.sendall(batch)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:  # the peer closed: reading drains to EOF
        sock.settimeout(10)
        try:
            while sock.recv(1 << 20):
                pass
            closed = True
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
    sock.close()
    assert closed
    # An authenticated client is not limited so.
    r = redis.Redis(port=s.port, password="pw")
    assert r.ping()


def test_redis_py_reads_memory_module_and_lolwut(server):
    r = redis.Redis(port=server.port)
    r.set("foo", "bar")
    stats = r.memory_stats()
    assert isinstance(stats, dict)
    assert stats["keys.count"] == 1
    assert not isinstance(stats["db.0"], list)
    assert r.memory_malloc_stats()
    assert r.module_list() == []
    assert "Redis ver." in r.lolwut().decode()
    assert "Redis ver." in r.lolwut(5, 6, 7, 8).decode()
    assert r.client_getredir() == -1
    assert r.client_unblock(r.client_id()) == 0


def test_bgsave_and_save_need_persistence(server_factory):
    s = server_factory(["--appendonly", "no"])
    r = redis.Redis(port=s.port)
    for cmd in (("SAVE",), ("BGSAVE",), ("BGREWRITEAOF",)):
        try:
            r.execute_command(*cmd)
            raise AssertionError(f"{cmd} succeeded without persistence")
        except redis.ResponseError as e:
            assert str(e) == "NOPERSIST persistence is not enabled"  # pion's code word
    # MULTI refuses SAVE (its reply comes later), as Redis refuses it.
    p = redis.Redis(port=s.port).pipeline(transaction=True)
    p.set("foo", "bar")
    p.execute_command("SAVE")
    try:
        p.execute()
        raise AssertionError("EXEC ran")
    except redis.ResponseError as e:
        assert "EXECABORT" in str(e) or "not allowed inside a transaction" in str(e)


def test_bgsave_with_persistence(server):
    r = redis.Redis(port=server.port)
    r.set("x", "10")
    assert r.execute_command("SAVE") is True
    before = r.lastsave()
    assert r.bgsave() is True  # "Background saving started"
    # Another BGSAVE (SCHEDULE) while one runs is refused or starts a new one.
    try:
        assert r.bgsave(True) is True
    except redis.ResponseError as e:
        assert str(e) == "Background save already in progress"
    assert r.lastsave() >= before
