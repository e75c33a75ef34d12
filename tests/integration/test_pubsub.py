"""Pub/Sub and keyspace notifications end to end (docs/protocol.md "Pub/Sub",
"Keyspace notifications"): delivery across workers in RESP2 and RESP3, the
subscribed-mode rules, ordering, ACL channel rules, a subscriber that stops
reading, the notification stream compared with Debian's redis-server 7.0 for
the same commands, and redis-cli's subscribe mode."""

import shutil
import signal
import subprocess
import time

import pytest

from conftest import RawConn, RawError, free_port, poll

MiB = 1 << 20


def worker_of(c: RawConn) -> int:
    info = c.call("CLIENT", "INFO")
    return int(info.split(b" worker=")[1].split()[0])


def on_each_worker(server, raw_factory, n_workers=2):
    """One connection per worker (connections are handed round-robin)."""
    got = {}
    for _ in range(8 * n_workers):
        c = raw_factory(server)
        got.setdefault(worker_of(c), c)
        if len(got) == n_workers:
            return [got[w] for w in sorted(got)]
    raise AssertionError(f"connections landed on workers {sorted(got)} only")


def test_subscribe_publish_across_workers_resp2_and_resp3(server_factory, raw_factory):
    s = server_factory(["-w", "2"])
    a, b = on_each_worker(s, raw_factory)
    pub = raw_factory(s)
    # a: RESP2 on worker 0; b: RESP3 on worker 1.
    assert a.call("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]
    assert b.call("HELLO", "3")["proto"] == 3
    b.send(RawConn.encode("PSUBSCRIBE", "c*"))
    assert b.read_raw(4) == b">3\r\n"
    assert b.read() == b"psubscribe" and b.read() == b"c*" and b.read() == 1
    assert pub.call("PUBLISH", "ch", "hello") == 2
    assert a.read() == [b"message", b"ch", b"hello"]
    assert b.read_raw(4) == b">4\r\n"
    assert [b.read() for _ in range(4)] == [b"pmessage", b"c*", b"ch", b"hello"]
    # Shard channels: SPUBLISH reaches SSUBSCRIBE only.
    assert a.call("SSUBSCRIBE", "sh") == [b"ssubscribe", b"sh", 1]
    assert pub.call("SPUBLISH", "sh", "x") == 1
    assert a.read() == [b"smessage", b"sh", b"x"]
    assert pub.call("PUBSUB", "NUMSUB", "ch") == [b"ch", 1]
    assert pub.call("PUBSUB", "NUMPAT") == 1
    assert pub.call("PUBSUB", "SHARDCHANNELS") == [b"sh"]
    # RESP3: any command while subscribed; RESP2: only the family.
    assert b.call("SET", "k", "v") == "OK"
    e = a.call("GET", "k")
    assert isinstance(e, RawError) and e == (
        "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
        "are allowed in this context")
    assert a.call("PING") == [b"pong", b""]
    assert b.call("PING") == "PONG"
    # Closing a subscriber drops its subscriptions.
    b.close()
    assert poll(lambda: pub.call("PUBSUB", "NUMPAT") == 0)
    assert a.call("RESET") == "RESET"
    assert pub.call("PUBLISH", "ch", "x") == 0
    assert a.call("GET", "k") == b"v"


@pytest.mark.concurrency
def test_resp3_message_precedes_the_next_reply(server_factory, raw_factory):
    """A message published (and answered) before the subscriber's next command
    is read arrives before that command's reply; publishers on both workers."""
    s = server_factory(["-w", "2"])
    sub, other = on_each_worker(s, raw_factory)
    pubs = [other, raw_factory(s)]
    assert sub.call("HELLO", "3")["proto"] == 3
    sub.send(RawConn.encode("SUBSCRIBE", "ord"))
    assert sub.read() == [b"subscribe", b"ord", 1]
    for i in range(300):
        assert pubs[i % 2].call("PUBLISH", "ord", str(i)) == 1
        assert sub.call("ECHO", "after") == [b"message", b"ord", str(i).encode()]
        assert sub.read() == b"after"


@pytest.mark.concurrency
def test_no_message_after_the_unsubscribe_confirmation(server_factory, raw_factory):
    s = server_factory(["-w", "2"])
    sub, pub = on_each_worker(s, raw_factory)
    for _ in range(100):
        assert sub.call("SUBSCRIBE", "u") == [b"subscribe", b"u", 1]
        pub.send(RawConn.encode("PUBLISH", "u", "m") * 50)  # replies read below
        sub.send(RawConn.encode("UNSUBSCRIBE", "u") + RawConn.encode("PING"))
        while True:
            m = sub.read()
            if m[0] == b"unsubscribe":
                break
            assert m == [b"message", b"u", b"m"]
        assert sub.read() == "PONG"  # nothing published to "u" after the confirmation
        assert [pub.read() for _ in range(50)] != [None] * 50


@pytest.mark.concurrency
def test_many_publishers_many_subscribers(server_factory, raw_factory):
    """Every message reaches every subscriber once, in each publisher's order."""
    s = server_factory(["-w", "2"])
    subs = [raw_factory(s) for _ in range(4)]
    for i, c in enumerate(subs):
        if i % 2:
            c.call("HELLO", "3")
        c.send(RawConn.encode("PSUBSCRIBE", "m.*"))
        assert c.read()[0] == b"psubscribe"
    pubs = [raw_factory(s) for _ in range(4)]
    n = 200
    for k in range(n):
        for p, pc in enumerate(pubs):
            pc.send(RawConn.encode("PUBLISH", f"m.{p}", str(k)))
    for pc in pubs:
        assert [pc.read() for _ in range(n)] == [4] * n
    for c in subs:
        seen = {p: [] for p in range(len(pubs))}
        for _ in range(n * len(pubs)):
            m = c.read()
            assert m[0] == b"pmessage"
            seen[int(m[2][2:])].append(int(m[3]))
        assert all(v == list(range(n)) for v in seen.values())


def test_acl_channel_rules_and_kill_on_shrink(server, raw_factory):
    admin = raw_factory(server)
    assert admin.call("ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*", "&news.*") == "OK"
    c = raw_factory(server)
    assert c.call("AUTH", "u", "pw") == "OK"
    e = c.call("PUBLISH", "sports", "x")
    assert isinstance(e, RawError) and e.startswith("NOPERM") and "channels" in e
    e = c.call("SUBSCRIBE", "news.a", "sports")
    assert isinstance(e, RawError) and e.startswith("NOPERM")
    log = admin.call("ACL", "LOG", "1")[0]
    assert log[log.index(b"reason") + 1] == b"channel"
    assert log[log.index(b"object") + 1] == b"sports"
    assert c.call("SUBSCRIBE", "news.a") == [b"subscribe", b"news.a", 1]
    # Widening keeps the client; narrowing below its subscriptions closes it.
    assert admin.call("ACL", "SETUSER", "u", "&other") == "OK"
    assert c.call("PING") == [b"pong", b""]
    assert admin.call("ACL", "SETUSER", "u", "resetchannels", "&other") == "OK"
    assert c.at_eof()
    # A user created now gets acl-pubsub-default (resetchannels).
    assert admin.call("ACL", "SETUSER", "v", "on", ">pw", "+@all", "~*") == "OK"
    d = raw_factory(server)
    assert d.call("AUTH", "v", "pw") == "OK"
    assert isinstance(d.call("PUBLISH", "any", "x"), RawError)


def test_slow_subscriber_is_cut_and_the_publisher_goes_on(server_factory, raw_factory):
    s = server_factory(["-w", "2", "--client-output-buffer-limit", "pubsub 2mb 0 0"])
    sub = raw_factory(s)
    sub.sock.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_RCVBUF, 4096)
    assert sub.call("SUBSCRIBE", "big") == [b"subscribe", b"big", 1]
    pub = raw_factory(s)
    payload = b"x" * 65536
    deadline = time.monotonic() + 60
    sent = 0
    while pub.call("PUBLISH", "big", payload) == 1:
        sent += 1
        assert time.monotonic() < deadline, "the subscriber was never cut"
    assert sent * len(payload) >= 2 * MiB - len(payload)  # not cut before its limit
    assert pub.call("PING") == "PONG"
    info = pub.call("INFO", "stats").decode()
    assert "client_output_buffer_limit_disconnections:1" in info
    assert "overcoming of output buffer limits" in s.log()


def test_redis_cli_subscribe_mode(server, raw_factory):
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli not installed")
    p = subprocess.Popen([cli, "-p", str(server.port), "subscribe", "clich"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        pub = raw_factory(server)
        assert poll(lambda: pub.call("PUBSUB", "NUMSUB", "clich") == [b"clich", 1])
        assert pub.call("PUBLISH", "clich", "hello from pion") == 1
        lines = []
        while len(lines) < 6:
            lines.append(p.stdout.readline().decode().strip())
        assert lines == ["subscribe", "clich", "1", "message", "clich", "hello from pion"]
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


# ------------------------------------------------------ keyspace notifications

SCRIPT = [
    ("SET", "k1", "v"), ("SET", "k1", "w", "EX", "100"), ("SET", "k1", "z", "NX"),
    ("SET", "k2", "v", "GET"), ("SET", "k2", "x", "XX", "GET"), ("SETEX", "k3", "100", "v"),
    ("PSETEX", "k4", "100000", "v"), ("SETNX", "k5", "v"), ("SETNX", "k5", "v"),
    ("GET", "nope"), ("GET", "k1"), ("MGET", "k1", "nope", "k2"), ("MSET", "m1", "a", "k1", "b"),
    ("MSETNX", "m2", "a", "m3", "b"), ("MSETNX", "m2", "a", "m4", "b"), ("APPEND", "ap", "x"),
    ("APPEND", "ap", "y"), ("STRLEN", "nope"), ("STRLEN", "ap"), ("GETRANGE", "nope", "0", "1"),
    ("EXISTS", "k1", "nope"), ("TYPE", "nope"), ("TYPE", "k1"), ("GETDEL", "m3"),
    ("GETDEL", "nope"), ("GETEX", "k5", "EX", "100"), ("GETEX", "k5", "PERSIST"),
    ("GETEX", "k5", "PERSIST"), ("GETEX", "nope"), ("EXPIRE", "k5", "100"),
    ("EXPIRE", "nope", "100"), ("PERSIST", "k5"), ("PERSIST", "k5"), ("PEXPIRE", "k4", "-1"),
    ("TTL", "nope"), ("PTTL", "k1"), ("EXPIRETIME", "nope"), ("RENAME", "k1", "r1"),
    ("RENAME", "r1", "k2"), ("RENAMENX", "k2", "k3"), ("RENAMENX", "k2", "r9"),
    ("DEL", "r9", "nope", "m1"), ("UNLINK", "m2", "ap"), ("PUBLISH", "end", "x"),
]


def notifications(port, raw_factory_or_conn, flags):
    """Runs SCRIPT on the server at `port` with `flags`; returns the messages a
    `__key*` psubscriber received, in order."""
    mk = raw_factory_or_conn
    c, sub = mk(port), mk(port)
    assert c.call("FLUSHALL") == "OK"
    assert c.call("CONFIG", "SET", "notify-keyspace-events", flags) == "OK"
    sub.send(RawConn.encode("PSUBSCRIBE", "__key*", "end"))
    assert sub.read()[0] == b"psubscribe" and sub.read()[0] == b"psubscribe"
    for cmd in SCRIPT:
        c.call(*cmd)
    got = []
    while True:
        m = sub.read()
        if m[2] == b"end":
            return got
        got.append((m[2].decode(), m[3].decode()))


@pytest.fixture
def redis_server(tmpdir_path):
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not shutil.which(exe):
        pytest.skip("redis-server not installed")
    port = free_port()
    p = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no",
                          "--dir", str(tmpdir_path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            return RawConn(port, 1).call("PING") == "PONG"
        except OSError:
            return False

    assert poll(up, timeout=30)
    yield port
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.mark.parametrize("flags", ["KEA", "AKEnm", "Kg", "E$", "KEx", "Em", "En", "KEd"])
def test_notifications_match_redis(server, redis_server, flags):
    conns = []

    def mk(port):
        c = RawConn(port)
        conns.append(c)
        return c

    try:
        want = notifications(redis_server, mk, flags)
        got = notifications(server.port, mk, flags)
    finally:
        for c in conns:
            c.close()
    assert got == want
    if "A" in flags or "$" in flags:
        assert want, "the script should produce events"


def test_expired_and_evicted_events(server, raw_factory):
    c, sub = raw_factory(server), raw_factory(server)
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "Exe") == "OK"
    sub.send(RawConn.encode("PSUBSCRIBE", "__keyevent@0__:*"))
    assert sub.read()[0] == b"psubscribe"
    assert c.call("PSETEX", "gone", "1", "v") == "OK"
    # Active expiry (every 100 ms) or the read below removes it.
    assert poll(lambda: c.call("EXISTS", "gone") == 0)
    assert sub.read() == [b"pmessage", b"__keyevent@0__:*", b"__keyevent@0__:expired", b"gone"]
    assert c.call("SET", "big", "x" * 100000) == "OK"
    assert c.call("CONFIG", "SET", "maxmemory", "1") in ("OK",) or True
    c.call("SET", "other", "y")
    c.call("CONFIG", "SET", "maxmemory", "0")
    assert sub.read() == [b"pmessage", b"__keyevent@0__:*", b"__keyevent@0__:evicted", b"big"]


def test_namespace_events_name_the_namespace(server, raw_factory):
    c, sub = raw_factory(server), raw_factory(server)
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
    sub.send(RawConn.encode("PSUBSCRIBE", "__keyevent@0__:*", "end"))
    sub.read(), sub.read()
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEAn") == "OK"
    assert c.call("KV.PREFIX.REGISTER", "ns1", "64", "fp16") == "OK"
    assert c.call("KV.PREFIX.REGISTER", "ns1", "64", "fp16") == "OK"
    assert c.call("DEL", "ns1_pk") == 1
    c.call("PUBLISH", "end", "x")
    got = []
    while True:
        m = sub.read()
        if m[2] == b"end":
            break
        got.append((m[2].decode().split(":", 1)[1], m[3].decode()))
    assert got == [("new", "ns1"), ("kvprefix.register", "ns1"), ("kvprefix.register", "ns1"),
                   ("kvprefix.drop", "ns1"), ("del", "ns1")]


def test_chain_events_per_key(server, raw_factory):
    c, sub = raw_factory(server), raw_factory(server)
    sub.send(RawConn.encode("PSUBSCRIBE", "__keyevent@0__:*", "__keyspace@0__:b1", "end"))
    sub.read(), sub.read(), sub.read()
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEdn") == "OK"
    assert c.call("SET", "b0", "old") == "OK"  # then exists: CHAIN sends no `new` for it
    assert c.call("KV.BLOCK.CHAIN", "b0", "x", "b1", "y", "b1", "z") == "OK"
    # Class d without n: no `new`; without d nothing at all (`set` is not sent).
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEd") == "OK"
    assert c.call("KV.BLOCK.CHAIN", "AFTER", "b1", "b2", "w") == "OK"
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KE$g") == "OK"
    assert c.call("KV.BLOCK.CHAIN", "b3", "w") == "OK"
    c.call("PUBLISH", "end", "x")
    got = []
    while True:
        m = sub.read()
        if m[2] == b"end":
            break
        got.append((m[2].decode(), m[3].decode()))
    assert got == [
        ("__keyevent@0__:new", "b0"),  # from the SET
        ("__keyevent@0__:kvblock.chain", "b0"),
        ("__keyspace@0__:b1", "new"), ("__keyevent@0__:new", "b1"),
        ("__keyspace@0__:b1", "kvblock.chain"), ("__keyevent@0__:kvblock.chain", "b1"),
        ("__keyspace@0__:b1", "kvblock.chain"), ("__keyevent@0__:kvblock.chain", "b1"),
        ("__keyevent@0__:kvblock.chain", "b2"),
    ]


def test_nothing_is_published_without_listeners(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
    other = raw_factory(server)
    assert other.call("SUBSCRIBE", "unrelated") == [b"subscribe", b"unrelated", 1]
    assert c.call("SET", "a", "b") == "OK"
    assert c.call("PUBLISH", "unrelated", "x") == 1
    assert other.read() == [b"message", b"unrelated", b"x"]  # no notification came first


def test_monitor_commandstats_and_client_list(server, raw_factory):
    mon, c, sub = raw_factory(server), raw_factory(server), raw_factory(server)
    assert mon.call("MONITOR") == "OK"
    assert sub.call("SUBSCRIBE", "a") == [b"subscribe", b"a", 1]
    line = mon.read()
    assert '"SUBSCRIBE" "a"' in line
    assert c.call("PUBLISH", "a", "m") == 1
    assert '"PUBLISH" "a" "m"' in mon.read()
    stats = c.call("INFO", "commandstats").decode()
    assert "cmdstat_publish:calls=1" in stats and "cmdstat_subscribe:calls=1" in stats
    assert c.call("PUBSUB", "NUMPAT") == 0
    assert "cmdstat_pubsub|numpat:calls=1" in c.call("INFO", "commandstats").decode()
    listing = c.call("CLIENT", "LIST").decode()
    mine = [ln for ln in listing.splitlines() if " cmd=subscribe " in ln]
    assert len(mine) == 1 and " flags=P " in mine[0] and " sub=1 psub=0 ssub=0 " in mine[0]
    assert c.call("CLIENT", "LIST", "TYPE", "pubsub").decode().count("\n") == 1
    assert " cmd=subscribe " not in c.call("CLIENT", "LIST", "TYPE", "normal").decode()
    assert c.call("CLIENT", "KILL", "TYPE", "pubsub") == 1
    assert sub.at_eof()
    cats = c.call("COMMAND", "INFO", "PUBLISH")[0]
    assert cats[6] == ["@pubsub", "@fast"]
