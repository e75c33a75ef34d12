"""Behaviours Redis 7.0's own test suites check, end to end (docs/protocol.md,
docs/security.md, docs/operations.md): MULTI/EXEC under memory pressure, MONITOR of
a transaction, AUTH's text as redis-py reads it, CONFIG SET requirepass, ACL rules
of Redis ACL files, used_memory bounded by maxmemory, maxmemory-clients as a
percentage."""
import random

import pytest
import redis

from conftest import RawError

OOM = "OOM command not allowed when used memory > 'maxmemory'."


def test_multi_under_memory_pressure(server, raw_factory):
    c = raw_factory(server)
    admin = raw_factory(server)
    assert admin.call("CONFIG", "SET", "maxmemory-policy", "noeviction") == "OK"
    assert c.call("SET", "a", "1") == "OK"
    # Queue time: the command is refused and the transaction aborts.
    assert admin.call("CONFIG", "SET", "maxmemory", "1") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "x", "1") == OOM
    assert c.call("EXEC") == "EXECABORT Transaction discarded because of previous errors."
    # DISCARD never fails.
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "x", "1") == OOM
    assert c.call("DISCARD") == "OK"
    # EXEC time: memory ran short after the writes were queued; nothing runs.
    assert admin.call("CONFIG", "SET", "maxmemory", "0") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "x", "1") == "QUEUED"
    assert c.call("SET", "y", "1") == "QUEUED"
    assert admin.call("CONFIG", "SET", "maxmemory", "1") == "OK"
    assert c.call("EXEC") == ("EXECABORT Transaction discarded because of: " + OOM)
    # Reads only: not refused.
    assert admin.call("CONFIG", "SET", "maxmemory", "0") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("GET", "a") == "QUEUED"
    assert c.call("PING") == "QUEUED"
    assert admin.call("CONFIG", "SET", "maxmemory", "1") == "OK"
    assert c.call("EXEC") == [b"1", "PONG"]
    assert admin.call("CONFIG", "SET", "maxmemory", "0") == "OK"
    assert c.call("EXISTS", "x", "y") == 0
    stats = admin.call("INFO", "commandstats").decode()
    line = next(l for l in stats.splitlines() if l.startswith("cmdstat_set:"))
    assert "rejected_calls=2," in line, line
    line = next(l for l in stats.splitlines() if l.startswith("cmdstat_exec:"))
    assert "rejected_calls=1," in line, line


def test_monitor_shows_the_commands_of_a_transaction(server, raw_factory):
    mon = raw_factory(server)
    assert mon.call("MONITOR") == "OK"
    c = raw_factory(server)
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "foo", "bar") == "QUEUED"
    assert c.call("EXEC") == ["OK"]
    lines = [mon.read() for _ in range(3)]
    assert lines[0].endswith('"MULTI"'), lines
    assert lines[1].endswith('"SET" "foo" "bar"'), lines
    assert lines[2].endswith('"EXEC"'), lines
    # A transaction aborted by an error: MULTI, then EXEC.
    assert c.call("MULTI") == "OK"
    assert isinstance(c.call("NOSUCH", "error"), RawError)
    assert c.call("EXEC").startswith("EXECABORT")
    lines = [mon.read() for _ in range(2)]
    assert lines[0].endswith('"MULTI"') and lines[1].endswith('"EXEC"'), lines


AUTH_NO_PASSWORD = ("AUTH <password> called without any password configured for the default "
                    "user. Are you sure your configuration is correct?")


def test_auth_without_password_has_redis_7_text(r, server, raw_factory):
    assert raw_factory(server).call("AUTH", "foo") == "ERR " + AUTH_NO_PASSWORD
    # redis-py maps Redis 7's exact text to AuthenticationError (the releases that
    # know it; older ones raise ResponseError, against Redis 7.0 as well).
    known = AUTH_NO_PASSWORD in redis.connection.BaseParser.EXCEPTION_CLASSES.get("ERR", {})
    with pytest.raises(redis.AuthenticationError if known else redis.ResponseError):
        r.auth("foo")


def test_config_set_requirepass(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CONFIG", "SET", "requirepass", "foobar") == "OK"
    assert c.call("PING") == "PONG"  # still authenticated
    other = raw_factory(server)
    assert other.call("PING") == "NOAUTH Authentication required."
    assert other.call("AUTH", "foobar") == "OK"
    assert other.call("PING") == "PONG"
    assert c.call("CONFIG", "SET", "requirepass", "") == "OK"
    assert raw_factory(server).call("PING") == "PONG"


def test_acl_files_of_redis_load(server, raw_factory):
    c = raw_factory(server)
    assert c.call("ACL", "SETUSER", "app", "on", "nopass", "~*", "+@all", "-debug",
                  "-config|set") == "OK"
    assert c.call("ACL", "SETUSER", "ops", "on", "nopass", "-@all", "+config|get",
                  "+client|id", "+info") == "OK"
    u = raw_factory(server)
    assert u.call("AUTH", "app", "x") == "OK"
    assert u.call("SET", "k", "v") == "OK"
    assert u.call("CONFIG", "SET", "timeout", "0") == \
        "NOPERM this user has no permissions to run the 'config|set' command"
    o = raw_factory(server)
    assert o.call("AUTH", "ops", "x") == "OK"
    assert o.call("CONFIG", "GET", "timeout") == [b"timeout", b"0"]
    assert isinstance(o.call("CLIENT", "ID"), int)
    assert o.call("CLIENT", "GETNAME") == \
        "NOPERM this user has no permissions to run the 'client|getname' command"


def used_memory(r) -> int:
    return r.info("memory")["used_memory"]


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random", "volatile-lru"])
def test_used_memory_honours_maxmemory(server, policy):
    # Redis's unit/maxmemory "is the memory limit honoured?": used_memory stays
    # within maxmemory while keys keep coming.
    r = server.client()
    r.flushall()
    limit = used_memory(r) + 100 * 1024
    r.config_set("maxmemory", limit)
    r.config_set("maxmemory-policy", policy)
    rng = random.Random(7)
    numkeys = 0
    while True:
        r.setex(f"key:{rng.randrange(10**9)}", 10000, "x")
        numkeys += 1
        if used_memory(r) + 4096 > limit:
            assert numkeys > 10
            break
        assert numkeys < 100000
    for _ in range(numkeys):
        r.setex(f"key:{rng.randrange(10**9)}", 10000, "x")
    mem = r.info("memory")
    assert mem["used_memory"] < limit + 4096
    assert mem["maxmemory"] == limit
    assert mem["allocator_allocated"] > 0  # what the allocator holds, buffers included


def test_maxmemory_clients_small_and_percentage(r):
    r.config_set("maxmemory-clients", "10mb")
    assert r.config_get("maxmemory-clients") == {"maxmemory-clients": str(10 << 20)}
    assert r.info("memory")["maxmemory_clients"] == 10 << 20
    r.config_set("maxmemory", "100mb")
    r.config_set("maxmemory-clients", "10%")
    assert r.config_get("maxmemory-clients") == {"maxmemory-clients": "10%"}
    assert r.info("memory")["maxmemory_clients"] == 10 << 20
    # A percentage follows maxmemory; none without it.
    r.config_set("maxmemory", "0")
    assert r.info("memory")["maxmemory_clients"] == 0
    with pytest.raises(redis.ResponseError):
        r.config_set("maxmemory-clients", "101%")
    r.config_set("maxmemory-clients", "1kb")  # as Redis: counts as 128kb
    assert r.info("memory")["maxmemory_clients"] == 128 * 1024
