"""CLIENT TRACKING end to end (docs/protocol.md "Client-side caching"): invalidations
as RESP3 pushes and, for RESP2, redirected to a client subscribed to
__redis__:invalidate, across two workers; NOLOOP, BCAST prefixes, OPTIN/OPTOUT,
FLUSHALL's null, expiry and eviction, a broken redirect, and clients tracking and
writing from several threads at once (marked `concurrency`: run under TSan)."""
import threading

import pytest
import redis

from conftest import RawConn, poll

INVALIDATE = "__redis__:invalidate"


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


def resp3(c: RawConn) -> RawConn:
    assert c.call("HELLO", "3")["proto"] == 3
    return c


def no_push_pending(c: RawConn) -> bool:
    """A push queued for `c` before this call would precede the PING's reply."""
    return c.call("PING") == "PONG"


@pytest.fixture
def two(server_factory, raw_factory):
    s = server_factory(["-w", "2"])
    a, b = on_each_worker(s, raw_factory)
    return s, a, b


def test_resp3_push_across_workers_once(two):
    _, a, b = two
    resp3(a)
    assert a.call("CLIENT", "TRACKING", "on") == "OK"
    assert b.call("SET", "k", "v") == "OK"
    assert a.call("GET", "k") == b"v"
    assert b.call("SET", "k", "w") == "OK"
    assert a.read() == [b"invalidate", [b"k"]]
    # Forgotten after one invalidation, until it is read again.
    assert b.call("SET", "k", "x") == "OK"
    assert no_push_pending(a)
    assert a.call("MGET", "k", "k2") == [b"x", None]
    assert b.call("DEL", "k", "k2") == 1
    got = [a.read(), a.read()]
    assert sorted(got) == [[b"invalidate", [b"k"]], [b"invalidate", [b"k2"]]]
    info = a.call("INFO", "stats")
    assert b"tracking_total_keys:0" in info


def test_resp2_redirect_to_subscriber_on_other_worker(two):
    s, sub, _ = two
    assert sub.call("SUBSCRIBE", INVALIDATE) == [b"subscribe", INVALIDATE.encode(), 1]
    sub_id = int(RawConn(s.port).call("CLIENT", "LIST", "TYPE", "pubsub").split(b"id=")[1].split()[0])
    # redis-py (RESP2) as the tracking client and as the writer.
    r = redis.Redis(port=s.port, single_connection_client=True)
    w = redis.Redis(port=s.port, single_connection_client=True)
    assert r.client_tracking_on(clientid=sub_id)
    assert r.client_getredir() == sub_id
    assert b" flags=t " in r.execute_command("CLIENT", "INFO")
    w.set("user:1", "a")
    assert r.get("user:1") == b"a"
    w.set("user:1", "b")
    assert sub.read() == [b"message", INVALIDATE.encode(), [b"user:1"]]
    # FLUSHALL: a null for everything.
    assert w.flushall()
    assert sub.read() == [b"message", INVALIDATE.encode(), None]
    r.close()
    w.close()


def test_noloop(two):
    _, a, b = two
    resp3(a)
    assert a.call("CLIENT", "TRACKING", "on", "NOLOOP") == "OK"
    assert a.call("GET", "k") is None
    assert a.call("SET", "k", "mine") == "OK"  # its own write: no push
    assert no_push_pending(a)
    assert a.call("GET", "k") == b"mine"
    assert b.call("SET", "k", "theirs") == "OK"
    assert a.read() == [b"invalidate", [b"k"]]
    # Without NOLOOP a client is told of its own writes (after the reply).
    assert a.call("CLIENT", "TRACKING", "on") == "OK"
    assert a.call("GET", "k") == b"theirs"
    assert a.call("SET", "k", "again") == "OK"
    assert a.read() == [b"invalidate", [b"k"]]


def test_bcast_prefixes(two):
    _, a, b = two
    resp3(a)
    assert a.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "obj:") == "OK"
    assert a.call("CLIENT", "TRACKINGINFO")["prefixes"] == [b"obj:", b"user:"]
    assert b.call("SET", "user:1", "x") == "OK"
    assert b.call("SET", "other", "x") == "OK"
    assert b.call("MSET", "obj:2", "y", "zzz", "z") == "OK"
    assert a.read() == [b"invalidate", [b"user:1"]]
    assert a.read() == [b"invalidate", [b"obj:2"]]
    assert no_push_pending(a)
    # The keys one command (or transaction) modifies come in one array per prefix.
    assert b.call("MSET", "user:4", "1", "user:3", "2", "obj:1", "3") == "OK"
    assert a.read() == [b"invalidate", [b"obj:1"]]
    assert a.read() == [b"invalidate", [b"user:3", b"user:4"]]
    assert no_push_pending(a)
    assert b"tracking_total_prefixes:2" in b.call("INFO", "stats")
    assert b" flags=tB " in a.call("CLIENT", "INFO")


def test_optin_optout(two):
    _, a, b = two
    resp3(a)
    assert a.call("CLIENT", "TRACKING", "on", "OPTIN") == "OK"
    assert a.call("GET", "a") is None  # not tracked
    assert a.call("CLIENT", "CACHING", "yes") == "OK"
    assert a.call("GET", "b") is None  # tracked
    assert a.call("GET", "c") is None  # not: CACHING covers one command
    assert b.call("MSET", "a", "1", "b", "2", "c", "3") == "OK"
    assert a.read() == [b"invalidate", [b"b"]]
    assert no_push_pending(a)
    assert a.call("CLIENT", "TRACKING", "off") == "OK"
    assert a.call("CLIENT", "TRACKING", "on", "OPTOUT") == "OK"
    assert a.call("CLIENT", "CACHING", "no") == "OK"
    assert a.call("GET", "a") == b"1"  # not tracked
    assert a.call("GET", "b") == b"2"  # tracked
    assert b.call("MSET", "a", "1", "b", "2") == "OK"
    assert a.read() == [b"invalidate", [b"b"]]
    assert no_push_pending(a)


def test_flushall_sends_null_to_resp3(two):
    _, a, b = two
    resp3(a)
    assert a.call("CLIENT", "TRACKING", "on") == "OK"
    assert b.call("FLUSHALL") == "OK"
    assert a.read() == [b"invalidate", None]


def test_expiry_and_eviction_invalidate(server, raw_factory):
    a, c = resp3(raw_factory(server)), raw_factory(server)
    assert a.call("CLIENT", "TRACKING", "on") == "OK"
    assert c.call("SET", "gone", "v", "PX", "30") == "OK"
    assert a.call("GET", "gone") in (b"v", None)
    # Active expiry (or the lazy one of a read) removes it: one invalidation.
    assert poll(lambda: c.call("EXISTS", "gone") == 0)
    assert a.read() == [b"invalidate", [b"gone"]]
    assert c.call("SET", "big", "x" * 100000) == "OK"
    assert a.call("STRLEN", "big") == 100000
    c.call("CONFIG", "SET", "maxmemory", "1")
    c.call("SET", "other", "y")
    c.call("CONFIG", "SET", "maxmemory", "0")
    assert a.read() == [b"invalidate", [b"big"]]


def test_broken_redirect(two):
    s, a, r = two
    resp3(a)
    rid = r.call("CLIENT", "ID")
    assert a.call("CLIENT", "TRACKING", "on", "REDIRECT", str(rid)) == "OK"
    assert a.call("GET", "k") is None
    r.close()
    w = RawConn(s.port)
    assert poll(lambda: b"id=%d " % rid not in w.call("CLIENT", "LIST"))
    assert w.call("SET", "k", "v") == "OK"
    assert a.read() == [b"tracking-redir-broken", rid]
    info = a.call("CLIENT", "TRACKINGINFO")
    assert b"broken_redirect" in info["flags"]
    assert b" flags=tR " in a.call("CLIENT", "INFO")
    w.close()


def test_reset_turns_tracking_off(server, raw_factory):
    a = raw_factory(server)
    assert a.call("CLIENT", "TRACKING", "on", "BCAST") == "OK"
    assert a.call("RESET") == "RESET"
    assert b" flags=N " in a.call("CLIENT", "INFO")
    assert a.call("CLIENT", "GETREDIR") == -1
    assert b"tracking_clients:0" in a.call("INFO", "clients")


@pytest.mark.concurrency
def test_trackers_and_writers_on_both_workers(server_factory, raw_factory):
    """Clients on both workers read (tracking) and write the same keys from several
    threads; every client keeps getting its pushes and replies in order."""
    s = server_factory(["-w", "2"])
    conns = [resp3(raw_factory(s)) for _ in range(4)]
    for i, c in enumerate(conns):
        if i % 2:
            assert c.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "k1") == "OK"
        else:
            assert c.call("CLIENT", "TRACKING", "on") == "OK"
    errors: list[str] = []

    def run(c: RawConn, me: int) -> None:
        try:
            for j in range(300):
                key = f"k{(j * 3 + me) % 20}"
                c.send(RawConn.encode("GET", key) + RawConn.encode("SET", key, str(j)))
                replies = []
                while len(replies) < 2:  # skip pushes, keep the two replies
                    v = c.read()
                    if isinstance(v, list) and v and v[0] == b"invalidate":
                        continue
                    replies.append(v)
                if replies[1] != "OK":
                    errors.append(f"{me}: {replies}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{me}: {e!r}")

    threads = [threading.Thread(target=run, args=(c, i)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    admin = raw_factory(s)
    assert admin.call("FLUSHALL") == "OK"
    assert b"tracking_total_keys:0" in admin.call("INFO", "stats")
    assert b"tracking_clients:4" in admin.call("INFO", "clients")
