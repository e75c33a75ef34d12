"""String keys and the generic key commands (docs/protocol.md "Keys", "Transactions").

End to end against the real server: Redis semantics of the string commands, one key
space with the namespaces (WRONGTYPE, TYPE pion-kvprefix, DEL = drop), expiry that
survives a restart, values bit-exact after restart, the SCAN guarantee under concurrent
inserts, redis-py's default transactional pipeline, redis-cli's key tools, and the two
LMCache remote-tier clients (its RESP client byte for byte, and the redis-py one).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import poll
from pion import _resp

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def value_for(key: bytes, size: int) -> bytes:
    """A value only this key has (its 64-byte digest repeated), cheap to make and check."""
    pat = hashlib.blake2b(key, digest_size=64).digest()
    return pat * (size // 64) + pat[: size % 64]


# ---- string commands ----------------------------------------------------------------


def test_set_get_and_options(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True) is True
    assert r.set("absent", "w", xx=True) is None
    assert r.set("k", "x", get=True) == b"w"
    assert r.get("k") == b"x"
    assert r.set("k", "y", ex=100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.set("k", "z", keepttl=True) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.set("k", "z2") is True
    assert r.ttl("k") == -1
    r.set("k", "p", px=50000)
    assert 49000 < r.pttl("k") <= 50000
    at = int(time.time()) + 500
    r.set("k", "q", exat=at)
    assert r.expiretime("k") == at
    r.set("k", "q", pxat=at * 1000 + 7)
    assert r.pexpiretime("k") == at * 1000 + 7
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SET", "k", "v", "NX", "XX")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SET", "k", "v", "EX", "10", "KEEPTTL")
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'set' command"):
        r.execute_command("SET", "k", "v", "EX", "0")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.execute_command("SET", "k", "v", "EX", "ten")
    assert r.get("missing") is None


def test_string_family(r):
    assert r.setex("a", 100, "1") is True
    assert 99 <= r.ttl("a") <= 100
    assert r.psetex("b", 100000, "2") is True
    assert r.setnx("a", "x") is False
    assert r.setnx("c", "3") is True
    assert r.getdel("c") == b"3"
    assert r.getdel("c") is None
    assert r.mset({"m1": "a", "m2": "b"}) is True
    assert r.mget("m1", "nope", "m2") == [b"a", None, b"b"]
    assert r.msetnx({"m2": "z", "m3": "c"}) is False
    assert r.get("m3") is None
    assert r.msetnx({"m3": "c", "m4": "d"}) is True
    assert r.append("ap", "hello") == 5
    assert r.append("ap", " world") == 11
    assert r.strlen("ap") == 11
    assert r.strlen("nope") == 0
    assert r.getrange("ap", 0, 4) == b"hello"
    assert r.getrange("ap", -5, -1) == b"world"
    assert r.getrange("ap", 5, 1) == b""
    assert r.getrange("ap", 0, 100) == b"hello world"
    assert r.getex("m1", ex=50) == b"a"
    assert 49 <= r.ttl("m1") <= 50
    assert r.getex("m1", persist=True) == b"a"
    assert r.ttl("m1") == -1
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'mset'"):
        r.execute_command("MSET", "a", "1", "b")
    # Binary-safe keys and values, and an empty value.
    r.set(b"\x00\xff key", b"\x00\r\n\xff")
    assert r.get(b"\x00\xff key") == b"\x00\r\n\xff"
    r.set("empty", "")
    assert r.get("empty") == b"" and r.exists("empty") == 1


def test_generic_key_commands(r):
    r.mset({"x1": "1", "x2": "2", "y1": "3"})
    assert r.exists("x1", "x1", "nope", "y1") == 3
    assert r.type("x1") == b"string"
    assert r.type("nope") == b"none"
    assert sorted(r.keys("x*")) == [b"x1", b"x2"]
    assert r.dbsize() == 3
    assert r.randomkey() in {b"x1", b"x2", b"y1"}
    assert r.rename("x1", "z1") is True
    assert r.get("z1") == b"1" and r.exists("x1") == 0
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.rename("x1", "z9")
    assert r.renamenx("z1", "x2") is False
    assert r.delete("z1", "x2", "nope") == 2
    assert r.unlink("y1") == 1
    assert r.dbsize() == 0
    assert r.randomkey() is None
    r.set("m", "v" * 1000)
    assert r.memory_usage("m") >= 1000
    assert r.memory_usage("nope") is None
    r.set("f", "1")
    assert r.flushdb() is True
    assert r.dbsize() == 0
    assert r.execute_command("SELECT", "0") is True
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", "1")


def test_long_nested_glob_patterns_do_not_stall_the_server(server):
    # Redis' "Regression for pattern matching long nested loops" (CVE-2022-36021):
    # KEYS, SCAN MATCH and an ACL key pattern of 20+ stars against a long key used to
    # take minutes (the matcher recursed once per star); each must now answer at once.
    # The bound is the client's socket timeout, a hang detector, not a timed assertion.
    r = server.client(socket_timeout=30)
    key = "a" * 40
    r.set(key, "1")
    pattern = "a*" * 30 + "b"
    assert r.keys(pattern) == []
    assert r.scan(0, match=pattern, count=100) == (0, [])
    assert r.execute_command("ACL", "SETUSER", "globby", "on", "nopass", "~" + pattern,
                             "+get") == b"OK"
    u = server.client(socket_timeout=30, username="globby", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        u.get(key)
    assert r.keys("a*a") == [key.encode()]
    u.close()
    r.close()


def test_expire_family_and_lazy_expiry(r):
    r.set("e", "v")
    assert r.ttl("e") == -1 and r.ttl("nope") == -2
    assert r.expire("e", 100) is True
    assert r.expire("e", 200, nx=True) is False
    assert r.expire("e", 50, gt=True) is False
    assert r.expire("e", 50, lt=True) is True
    assert 49 <= r.ttl("e") <= 50
    assert r.persist("e") is True and r.persist("e") is False
    assert r.pexpire("e", 100000) is True
    assert r.expireat("e", int(time.time()) + 300) is True
    assert r.pexpireat("e", int(time.time() * 1000) + 300000) is True
    assert r.expire("nope", 10) is False
    with pytest.raises(redis.ResponseError, match="not compatible"):
        r.execute_command("EXPIRE", "e", "10", "NX", "XX")
    # A time in the past deletes the key.
    assert r.expire("e", -1) is True
    assert r.exists("e") == 0
    # A short TTL: the key vanishes (lazily on access or by the active cycle).
    r.set("short", "v", px=50)
    assert poll(lambda: r.exists("short") == 0, timeout=10)
    assert r.get("short") is None
    info = r.info("stats")
    assert info["expired_keys"] >= 1


def test_active_expiry_without_access(r):
    for i in range(50):
        r.set(f"t{i}", "v", px=30)
    # Nothing reads the keys: the active cycle removes them (DBSIZE counts them until then).
    assert poll(lambda: r.dbsize() == 0, timeout=10)
    assert r.info("stats")["expired_keys"] >= 50


def test_info_keyspace_and_hits(r):
    r.set("a", "1")
    r.set("b", "2", ex=1000)
    r.get("a")
    r.get("zz")
    ks = r.info("keyspace")
    assert ks["db0"]["keys"] == 2 and ks["db0"]["expires"] == 1
    assert 0 < ks["db0"]["avg_ttl"] <= 1000 * 1000
    st = r.info("stats")
    assert st["keyspace_hits"] >= 1 and st["keyspace_misses"] >= 1


# ---- one key space with the namespaces ---------------------------------------------


def test_namespaces_are_keys(r):
    assert r.execute_command("KV.PREFIX.REGISTER", "ns1", 64, "fp16") == b"OK"
    assert r.type("ns1") == b"pion-kvprefix"
    assert r.type("ns1_pk") == b"pion-kvprefix"
    assert r.exists("ns1", "ns1_pv") == 2
    for cmd in (("SET", "ns1", "v"), ("GET", "ns1"), ("APPEND", "ns1_pk", "x")):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*cmd)
        assert str(e.value) == WRONGTYPE
    r.set("plain", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("KV.PREFIX.REGISTER", "plain", 64, "fp16")
    assert str(e.value) == WRONGTYPE
    assert r.mget("ns1", "plain") == [None, b"v"]
    keys = set()
    cur = 0
    while True:
        cur, batch = r.scan(cur, count=1)
        keys.update(batch)
        if cur == 0:
            break
    assert keys == {b"ns1", b"plain"}
    assert r.scan(0, _type="pion-kvprefix", count=1000)[1] == [b"ns1"]
    assert r.scan(0, _type="string", count=1000)[1] == [b"plain"]
    assert r.dbsize() == 2
    assert r.delete("ns1") == 1
    assert r.type("ns1") == b"none" and r.exists("ns1_pk") == 0
    assert r.dbsize() == 1
    r.execute_command("KV.PREFIX.REGISTER", "ns2", 64, "fp16")
    assert r.flushall() is True
    assert r.dbsize() == 0


def test_kvcache_needed(server_factory):
    s = server_factory(kvcache=False)
    c = s.client()
    with pytest.raises(redis.ResponseError, match="use --kvcache"):
        c.set("a", "b")
    assert c.dbsize() == 0


# ---- transactions ------------------------------------------------------------------


def test_redis_py_default_pipeline(r):
    p = r.pipeline()  # transaction=True: MULTI ... EXEC
    p.set("a", "1").get("a").mset({"b": "2", "c": "3"}).mget("a", "b", "c").exists("a", "zz")
    assert p.execute() == [True, b"1", True, [b"1", b"2", b"3"], 1]


def test_multi_exec_semantics(raw_factory, server):
    c = raw_factory(server)
    assert c.call("MULTI") == "OK"
    assert str(c.call("MULTI")) == "ERR MULTI calls can not be nested"
    assert c.call("SET", "k", "v") == "QUEUED"
    assert c.call("GET", "k") == "QUEUED"
    assert str(c.call("WATCH", "k")) == "ERR WATCH inside MULTI is not allowed"
    assert c.call("EXEC") == ["OK", b"v"]
    # A queue-time error aborts EXEC.
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "k", "w") == "QUEUED"
    err = c.call("NOSUCHCOMMAND")
    assert str(err).startswith("ERR unknown command")
    err = c.call("GET")
    assert "wrong number of arguments" in str(err)
    err = c.call("EXEC")
    assert str(err) == "EXECABORT Transaction discarded because of previous errors."
    r = server.client()
    assert r.get("k") == b"v"
    # DISCARD, and EXEC/DISCARD outside MULTI.
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "k", "z") == "QUEUED"
    assert c.call("DISCARD") == "OK"
    assert r.get("k") == b"v"
    assert str(c.call("EXEC")) == "ERR EXEC without MULTI"
    assert str(c.call("DISCARD")) == "ERR DISCARD without MULTI"
    # A runtime error is one element of the reply; the rest still runs.
    assert c.call("MULTI") == "OK"
    c.call("KV.PREFIX.REGISTER", "nsx", "64", "fp16")
    c.call("SET", "nsx", "v")
    c.call("SET", "k2", "v2")
    out = c.call("EXEC")
    assert out[0] == "OK" and str(out[1]) == WRONGTYPE and out[2] == "OK"


def test_exec_after_commands_in_the_same_read(server):
    """A client's commands from one read share the exec lock (taken by the first,
    kept to the end of the batch); EXEC in that batch takes it exclusively, so the
    batch's hold must be released first or the worker deadlocks on itself."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    cmds = [["SET", "x", "1"], ["GET", "x"], ["MULTI"], ["SET", "y", "2"], ["EXEC"],
            ["GET", "y"], ["MULTI"], ["GET", "x"], ["EXEC"], ["PING"]]
    s.sendall(b"".join(b"*%d\r\n" % len(c) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode())
                                                        for a in c) for c in cmds))
    want = (b"+OK\r\n$1\r\n1\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n$1\r\n2\r\n"
            b"+OK\r\n+QUEUED\r\n*1\r\n$1\r\n1\r\n+PONG\r\n")
    got = b""
    while len(got) < len(want):
        chunk = s.recv(4096)  # a timeout here is the deadlock
        assert chunk, got
        got += chunk
    assert got == want
    # Another client is still served (no lock left held by the batch).
    r = server.client()
    p = r.pipeline()
    p.set("z", "3").get("z")
    assert p.execute() == [True, b"3"]
    s.close()


def test_watch(server):
    r = server.client()
    other = server.client()
    r.set("w", "1")
    with r.pipeline() as p:
        p.watch("w")
        other.set("w", "2")
        p.multi()
        p.set("w", "3")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("w") == b"2"
    with r.pipeline() as p:
        p.watch("w")
        p.multi()
        p.set("w", "4")
        assert p.execute() == [True]
    assert r.get("w") == b"4"
    # redis-py's optimistic-locking helper.
    def incr(pipe):
        v = int(pipe.get("w"))
        pipe.multi()
        pipe.set("w", v + 1)
    r.transaction(incr, "w")
    assert r.get("w") == b"5"


@pytest.mark.concurrency
def test_exec_is_atomic_against_other_clients(server_factory):
    s = server_factory(["-w", "2"])
    r = s.client()
    r.mset({"a": "0", "b": "0"})
    stop = threading.Event()
    bad = []

    def reader():
        c = s.client()
        while not stop.is_set():
            a, b = c.mget("a", "b")
            if a != b:
                bad.append((a, b))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 300):
            p = r.pipeline()
            p.set("a", str(i)).set("b", str(i))
            p.execute()
    finally:
        stop.set()
        t.join(30)
    assert bad == []
    assert r.mget("a", "b") == [b"299", b"299"]


# ---- durability --------------------------------------------------------------------


def test_restart_keeps_values_bit_exact_and_ttl(server_factory):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    vals = {f"v{i}".encode(): os.urandom(n) for i, n in enumerate([0, 1, 100, 40000, 300000])}
    for k, v in vals.items():
        r.set(k, v)
    r.set("ttl", "x", ex=1000)
    r.set("gone", "y")
    r.delete("gone")
    r.rename("v1", "v1r")
    vals[b"v1r"] = vals.pop(b"v1")
    r.append("v2", b"tail")
    vals[b"v2"] += b"tail"
    # Half before a snapshot, half in the WAL after it.
    assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    r.set("after", "z", px=600000)
    r.set("short", "s", px=300)
    s.kill()  # SIGKILL: everything acknowledged is in the WAL
    s.start()
    r = s.client()
    for k, v in vals.items():
        assert r.get(k) == v, k
    assert r.get("gone") is None
    assert 990 <= r.ttl("ttl") <= 1000
    assert 590000 < r.pttl("after") <= 600000
    assert poll(lambda: r.exists("short") == 0, timeout=10)
    # And once more through a snapshot that holds them all.
    assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    s.restart()
    r = s.client()
    for k, v in vals.items():
        assert r.get(k) == v, k
    assert 980 <= r.ttl("ttl") <= 1000


# ---- SCAN --------------------------------------------------------------------------


@pytest.mark.concurrency
def test_scan_returns_every_key_present_throughout(server_factory):
    s = server_factory(["-w", "2"])
    r = s.client()
    base = {f"base:{i}".encode() for i in range(3000)}
    p = r.pipeline(transaction=False)
    for k in base:
        p.set(k, "v")
    p.execute()
    stop = threading.Event()

    def writer():
        c = s.client()
        i = 0
        while not stop.is_set() and i < 20000:
            c.set(f"new:{i}", "v")  # inserts (and the map's rehashes) during the scan
            if i % 3 == 0:
                c.delete(f"new:{i // 2}")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    try:
        cur = 0
        rounds = 0
        while True:
            cur, batch = r.scan(cur, count=50)
            seen.update(batch)
            rounds += 1
            assert rounds < 100000
            if cur == 0:
                break
    finally:
        stop.set()
        t.join(60)
    assert base <= seen
    assert {k for k in seen if k.startswith(b"base:")} == base
    # MATCH and COUNT.
    got = set()
    cur = 0
    while True:
        cur, batch = r.scan(cur, match="base:1*", count=500)
        got.update(batch)
        if cur == 0:
            break
    assert got == {k for k in base if k.startswith(b"base:1")}
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("SCAN", "abc")


# ---- redis-cli tools ---------------------------------------------------------------


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not installed")
def test_redis_cli_scan_bigkeys_memkeys(server):
    r = server.client()
    for i in range(20):
        r.set(f"k{i}", "x" * (i * 100))
    r.execute_command("KV.PREFIX.REGISTER", "nsA", 64, "fp16")
    base = ["redis-cli", "-p", str(server.port)]
    out = subprocess.run(base + ["--scan"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert set(out.stdout.split()) == {f"k{i}" for i in range(20)} | {"nsA"}
    out = subprocess.run(base + ["--scan", "--pattern", "k1*"], capture_output=True, text=True,
                         timeout=60)
    assert set(out.stdout.split()) == {"k1"} | {f"k{i}" for i in range(10, 20)}
    out = subprocess.run(base + ["--bigkeys"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Biggest string found" in out.stdout and "k19" in out.stdout
    assert "21 keys" in out.stdout or "Sampled 21 keys" in out.stdout
    out = subprocess.run(base + ["--memkeys"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "k19" in out.stdout


# ---- LMCache's remote-tier clients -------------------------------------------------


class RespClient:
    """One blocking socket speaking RESP2 the way LMCache's native client does: it reads
    exactly the reply forms it expects and desynchronises on anything else."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.s.recv(max(1 << 20, n - len(self.buf)))
            assert chunk, "server closed the connection"
            self.buf += chunk

    def _take(self, n: int) -> bytes:
        self._fill(n)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            assert chunk, "server closed the connection"
            self.buf += chunk
        i = self.buf.index(b"\r\n") + 2
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    @staticmethod
    def cmd(*parts: bytes) -> list[bytes | memoryview]:
        return _resp.encode_parts(*parts)

    def send(self, *parts: bytes) -> None:
        self.s.sendmsg(self.cmd(*parts))

    def set(self, key: bytes, value: bytes) -> bytes:
        self.send(b"SET", key, value)
        return self._take(5)

    def exists(self, key: bytes) -> bytes:
        self.send(b"EXISTS", key)
        return self._take(4)

    def get(self, key: bytes) -> bytes | None:
        self.send(b"GET", key)
        head = self._line()
        if head == b"$-1\r\n":
            return None
        assert head.startswith(b"$") and head[1:-2].isdigit(), head
        n = int(head[1:-2])
        body = self._take(n + 2)
        assert body[-2:] == b"\r\n"
        return body[:-2]


@pytest.mark.concurrency
def test_lmcache_resp_client_2gib_under_512mb(server_factory):
    """8 threads, one blocking RESP2 socket each, 64-byte chunk keys, 256 KiB and 2 MiB
    values, 2 GiB stored through a 512 MiB budget: every reply is exactly one of the forms
    LMCache accepts, no error ever, evictions counted, every GET the stored bytes or nil."""
    s = server_factory(["-w", "2", "--maxmemory", "512mb", "--appendonly", "no"])
    threads = 8
    sizes = [256 * 1024, 2 * 1024 * 1024]
    per_thread = (2 << 30) // threads
    errors: list[str] = []
    stats = {"hits": 0, "misses": 0, "stored": 0}
    lock = threading.Lock()

    def run(t: int) -> None:
        try:
            c = RespClient(s.port)
            done, i, hits, misses = 0, 0, 0, 0
            recent: list[tuple[bytes, int]] = []
            while done < per_thread:
                size = sizes[i % 2]
                key = hashlib.sha256(b"%d:%d" % (t, i)).hexdigest().encode()  # 64 bytes
                assert len(key) == 64
                v = value_for(key, size)
                rep = c.set(key, v)
                if rep != b"+OK\r\n":
                    errors.append(f"SET -> {rep!r}")
                    return
                rep = c.exists(key)
                if rep not in (b":0\r\n", b":1\r\n"):
                    errors.append(f"EXISTS -> {rep!r}")
                    return
                recent.append((key, size))
                if i % 2 == 1:  # read back an earlier chunk: stored bytes or nil
                    k, sz = recent[-2] if i % 4 == 1 else recent[max(0, len(recent) - 6)]
                    got = c.get(k)
                    if got is None:
                        misses += 1
                    elif got != value_for(k, sz):
                        errors.append(f"GET {k!r}: wrong bytes")
                        return
                    else:
                        hits += 1
                done += size
                i += 1
            with lock:
                stats["hits"] += hits
                stats["misses"] += misses
                stats["stored"] += done
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    assert errors == []
    assert stats["stored"] >= 2 << 30
    assert stats["hits"] > 0
    r = s.client()
    info = r.info()
    assert info["evicted_keys"] > 0
    assert info["vstore_bytes"] <= 512 * 1024 * 1024
    assert info["total_error_replies"] == 0


def test_lmcache_redis_py_connector(server_factory):
    """LMCache's redis:// connector: `<chunk>kv_bytes` and `<chunk>metadata` keys, EXISTS
    before GET, SCAN over every key, DEL; evicting under a small budget never errors."""
    s = server_factory(["--maxmemory", "16mb"])
    r = s.client()
    chunks = [hashlib.sha256(b"c%d" % i).hexdigest().encode() for i in range(160)]
    for ck in chunks:
        kv = value_for(ck, 256 * 1024)
        meta = b'{"shape":[2,32,256],"dtype":"bfloat16","fmt":"vllm"}'
        assert r.set(ck + b"kv_bytes", kv) is True
        assert r.set(ck + b"metadata", meta) is True
    found = 0
    for ck in chunks:
        if r.exists(ck + b"kv_bytes"):
            got = r.get(ck + b"kv_bytes")
            assert got is None or got == value_for(ck, 256 * 1024)
            found += got is not None
    assert 0 < found < len(chunks)  # the budget evicted the oldest
    keys = set()
    for k in r.scan_iter(count=100):
        keys.add(k)
    assert keys and all(k.endswith(b"kv_bytes") or k.endswith(b"metadata") for k in keys)
    assert len(keys) == r.dbsize()
    assert r.info("stats")["evicted_keys"] > 0
    victims = list(keys)[:10]
    assert r.delete(*victims) == 10


def test_maxmemory_policies(server_factory):
    s = server_factory(["--maxmemory", "1mb", "--maxmemory-policy", "noeviction"])
    r = s.client()
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    big = b"x" * (200 * 1024)
    for i in range(4):
        r.set(f"k{i}", big)
    with pytest.raises(redis.ResponseError, match="^OOM"):
        for i in range(4, 10):
            r.set(f"k{i}", big)
    assert r.get("k0") == big
    # A value larger than the whole budget is refused under any policy.
    r.config_set("maxmemory-policy", "allkeys-lru")
    with pytest.raises(redis.ResponseError, match="^OOM"):
        r.set("huge", b"x" * (2 << 20))
    for i in range(10, 20):
        assert r.set(f"k{i}", big) is True
    assert r.get("k0") is None and r.get("k19") == big
    r.config_set("maxmemory-policy", "volatile-lru")
    r.flushall()
    r.set("keep", big)
    for i in range(8):
        r.set(f"t{i}", big, ex=1000)
    assert r.get("keep") == big  # only keys with a TTL are evicted
    r.config_set("maxmemory-policy", "allkeys-random")
    for i in range(10):
        assert r.set(f"r{i}", big) is True
    assert r.info("memory")["maxmemory_policy"] == "allkeys-random"
    with pytest.raises(redis.ResponseError,
                       match="expected allkeys-lru, noeviction, volatile-lru, allkeys-random, "
                             "allkeys-lfu, volatile-lfu, volatile-random or volatile-ttl"):
        r.config_set("maxmemory-policy", "lfu")
