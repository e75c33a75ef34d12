"""A Redis Cluster of pion.so: 6 Debian redis-server nodes (3 primaries, 3
replicas) made by `redis-cli --cluster create --cluster-replicas 1`, driven through
redis-py's RedisCluster. 64 hash-tagged namespaces spread over every primary, read
back bit-exact against pion-server's own output for the same input (every vquant);
MEMBERSHIP and receipts per node; replicas bit-identical to their primaries (DEBUG
DIGEST); CROSSSLOT for a namespace without a hash tag; kill -9 of a primary: its
replica takes over and every namespace acknowledged with WAIT 1 1000 is still there,
bit-exact. Everything is polled with a deadline."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterCrossSlotError

from conftest import RawConn, RawError, poll
from pion import PionClient
from redis_module import (MODULE, REDIS_CLI, RedisNode, Spec, check_logs, exercise_pion_client,
                          exercise_prompt_cache)

pytestmark = pytest.mark.skipif(not MODULE.exists(), reason=f"{MODULE} not built")

N_NAMESPACES = 64


def cluster_info(node: RedisNode) -> dict:
    text = node.client(socket_timeout=5).execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def cluster_ok(nodes) -> bool:
    try:
        return all(cluster_info(n).get("cluster_state") == "ok" for n in nodes)
    except (redis.ConnectionError, redis.TimeoutError):
        return False


def roles(nodes) -> dict:
    return {n.port: n.client().execute_command("ROLE")[0] for n in nodes}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("pion-cluster-")
    nodes = [RedisNode(root, f"n{i}", cluster=True) for i in range(6)]
    for n in nodes:
        n.start()
    cmd = [REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in nodes],
           "--cluster-replicas", "1", "--cluster-yes"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # Every node sees the whole cluster, all slots covered, every replica in sync.
    assert poll(lambda: cluster_ok(nodes) and all(
        int(cluster_info(n)["cluster_known_nodes"]) == 6 for n in nodes), timeout=60)
    assert poll(lambda: sorted(roles(nodes).values()) == [b"master"] * 3 + [b"slave"] * 3,
                timeout=30)
    yield nodes
    for n in nodes:
        n.kill()
    check_logs(nodes)


def rc_of(nodes) -> RedisCluster:
    live = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
    return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in live],
                        socket_timeout=30)


def specs():
    # The hash tag is the whole namespace: "{app|v1|model|fmt|p}" and its "_pk"/"_pv"
    # session ids hash alike (docs/cluster.md).
    return [Spec(f"{{app|v1|m{i}|{Spec('', i).fmt}|p}}", i) for i in range(N_NAMESPACES)]


@pytest.fixture(scope="module")
def reference(server_module):
    """What pion-server returns for the same namespaces (the bit-exact reference)."""
    c = server_module.client()
    out = {}
    for s in specs():
        s.write(c.execute_command)
        out[s.ns] = s.read(c.execute_command)
    return out


@pytest.fixture(scope="module")
def server_module(tmp_path_factory):
    from conftest import PionServer
    s = PionServer(tmp_path_factory.mktemp("pion-ref-")).start()
    yield s
    s.kill()
    assert not s.sanitizer_report(), s.sanitizer_report()


def primaries(nodes) -> list[RedisNode]:
    return [n for n in nodes if n.proc.poll() is None
            and n.client().execute_command("ROLE")[0] == b"master"]


def test_namespaces_over_every_primary_bit_exact(cluster, reference):
    rc = rc_of(cluster)
    all_specs = specs()
    for s in all_specs:
        s.write(rc.execute_command)
    for s in all_specs:
        assert s.read(rc.execute_command) == reference[s.ns], s.ns
    # Spread: every primary holds some namespaces (one key each), 64 in all.
    prim = primaries(cluster)
    sizes = [p.client().dbsize() for p in prim]
    assert len(prim) == 3 and all(n > 0 for n in sizes) and sum(sizes) == N_NAMESPACES
    # Each namespace lives on the primary that owns its slot, with its sids beside it.
    for s in all_specs:
        node = rc.get_node_from_key(s.ns)
        assert rc.get_node_from_key(s.sid("k")) == node == rc.get_node_from_key(s.sid("v"))
        assert rc.keyslot(s.ns) == rc.keyslot(s.sid("k"))


def test_membership_and_receipts_per_node(cluster):
    rc = rc_of(cluster)
    prim = primaries(cluster)
    for p in prim:
        assert p.client().execute_command("PION.STATS", "RESET") == b"OK"
    all_specs = specs()
    for s in all_specs:
        probe = s.hashes[:2] + [12345, s.hashes[3]]
        bits = rc.execute_command("KV.PREFIX.MEMBERSHIP", s.ns, 4,
                                  np.array(probe, dtype="<u8").tobytes())
        assert bits == bytes([0b1011])
        assert rc.execute_command("KV.PREFIX.LOOKUP", s.ns) == b"HIT"
    assert rc.execute_command("KV.PREFIX.LOOKUP", "{app|v1|absent|p}") == b"MISS"
    per_node = {}
    for p in prim:
        st = p.client().execute_command("PION.STATS")
        st = dict(zip(st[::2], st[1::2]))
        per_node[p.port] = st
        # Receipts are each node's own: its hits are its namespaces, credited with
        # the PREFILL_MS each was registered with (7 + i ms).
        assert st[b"kvprefix_hits"] == p.client().dbsize()
        info = p.client().execute_command("KV.PREFIX.INFO").decode()
        assert f"registered_prefixes:{st[b'kvprefix_hits']}\r\n" in info
    assert sum(st[b"kvprefix_hits"] for st in per_node.values()) == N_NAMESPACES
    assert sum(st[b"kvprefix_misses"] for st in per_node.values()) == 1
    want_us = sum((7 + s.i) * 1000 for s in all_specs)
    assert sum(st[b"kvprefix_prefill_us_measured"] for st in per_node.values()) == want_us


def test_crossslot_without_a_hash_tag(cluster):
    rc = rc_of(cluster)
    ns = "plain-namespace"           # "plain-namespace" and "..._pk" hash to other slots
    assert rc.keyslot(ns) != rc.keyslot(ns + "_pk")
    # redis-py maps the CROSSSLOT code word to its own exception (the text follows it).
    with pytest.raises(ClusterCrossSlotError, match=r"plain-namespace.*hash tag"):
        rc.execute_command("KV.PREFIX.REGISTER", ns, 64, "int8")
    with pytest.raises(ClusterCrossSlotError, match=r"hash tag, e\.g\. '\{plain-namespace\}'"):
        rc.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, 1)
    # On the wire: the CROSSSLOT code word, from the node owning the namespace's slot.
    raw = RawConn(rc.get_node_from_key(ns).port)
    reply = raw.call("KV.PREFIX.REGISTER", ns, 64, "int8")
    raw.close()
    assert isinstance(reply, RawError) and reply.startswith("CROSSSLOT namespace 'plain-namespace'")


def test_block_match_in_one_round_trip_with_a_hash_tag(cluster):
    rc = rc_of(cluster)
    keys = [f"{{chain7}}blk{i}" for i in range(8)]
    for k in keys[:5]:
        rc.set(k, b"v" * 64)
    # One command to the node that owns the tag's slot answers for the whole chain.
    raw = RawConn(rc.get_node_from_key(keys[0]).port)
    assert raw.call("KV.BLOCK.MATCH", 8, *keys) == 5
    assert raw.call("KV.BLOCK.MATCH", 8, *keys, "BITMAP") == bytes([0x1F])
    # Keys of different slots: Redis's own CROSSSLOT (the keys come from the getkeys API).
    a, b = "chain-a", "chain-b"
    assert rc.keyslot(a) != rc.keyslot(b)
    reply = raw.call("KV.BLOCK.MATCH", 2, a, b)
    raw.close()
    assert isinstance(reply, RawError) and reply.startswith("CROSSSLOT"), reply
    # redis-py's cluster client routes it by the keys, as it routes MGET.
    assert rc.execute_command("KV.BLOCK.MATCH", 8, *keys) == 5
    assert rc.delete(*keys[:5]) == 5  # the later tests count the cluster's keys


def test_pion_client_cluster(cluster):
    c = PionClient.cluster([("127.0.0.1", cluster[0].port)])
    exercise_pion_client(c)
    # The client put every namespace in a hash tag: {py|v1|model0|p} on the wire.
    assert c.redis.keyslot("{py|v1|model0|p}") == c.redis.keyslot("{py|v1|model0|p}_pk")
    c.close()
    exercise_prompt_cache([("127.0.0.1", cluster[1].port)])


def test_replicas_bit_identical_to_primaries(cluster):
    for p in primaries(cluster):
        c = p.client()
        assert poll(lambda: c.execute_command("WAIT", 1, 1000) >= 1, timeout=30)
        replica_ports = [int(r[1]) for r in c.execute_command("ROLE")[2]]
        assert len(replica_ports) == 1
        rep = redis.Redis(host="127.0.0.1", port=replica_ports[0])
        want = c.execute_command("DEBUG", "DIGEST")
        assert poll(lambda: rep.execute_command("DEBUG", "DIGEST") == want, timeout=30)
        assert rep.dbsize() == c.dbsize() > 0


def test_primary_killed_replica_takes_over_acked_writes_survive(cluster, reference):
    rc = rc_of(cluster)
    # New namespaces, each written on a connection of its own primary and
    # acknowledged by one replica (WAIT 1 1000) before the kill.
    extra = [Spec(f"{{acked|{i}}}", i) for i in range(16)]
    conns = {}
    for s in extra:
        node = rc.get_node_from_key(s.ns)
        c = conns.setdefault(node.port, redis.Redis(host="127.0.0.1", port=node.port,
                                                    single_connection_client=True))
        s.write(c.execute_command)
        # Acknowledged: WAIT 1 1000 answered 1 (asked again while a loaded replica lags).
        assert poll(lambda: c.execute_command("WAIT", 1, 1000) == 1, timeout=30)
    expect = {s.ns: s.read(rc.execute_command) for s in extra}
    victim = max(primaries(cluster), key=lambda p: p.client().dbsize())
    victim_keys = victim.client().dbsize()
    victim.kill()
    alive = [n for n in cluster if n is not victim]
    assert poll(lambda: cluster_ok(alive) and len(primaries(alive)) == 3, timeout=60)
    rc = rc_of(alive)
    for s in specs():
        assert s.read(rc.execute_command) == reference[s.ns], s.ns
    for s in extra:
        assert s.read(rc.execute_command) == expect[s.ns], s.ns
    assert sum(p.client().dbsize() for p in primaries(alive)) == N_NAMESPACES + len(extra)
    assert victim_keys > 0


def node_id(node: RedisNode) -> str:
    return node.client().execute_command("CLUSTER", "MYID").decode()


def first_slots(node: RedisNode, n: int) -> range:
    """The first n slots `node` serves (what `redis-cli --cluster reshard` moves first)."""
    c = node.client()
    mine = [(s[0], s[1]) for s in c.execute_command("CLUSTER", "SLOTS")
            if int(s[2][1]) == node.port]
    lo = min(a for a, _ in mine)
    return range(lo, lo + n)


def test_reshard_moves_namespaces_while_a_reader_reads(cluster):
    import threading

    rc = rc_of(cluster)
    live = [n for n in cluster if n.proc.poll() is None]
    src, dst = sorted(primaries(live), key=lambda p: p.port)[:2]
    moved = first_slots(src, 48)
    # Namespaces whose hash tag lands in the slots about to move.
    tags, k = [], 0
    while len(tags) < 12:
        t = f"{{rs|{k}}}"
        if rc.keyslot(t) in moved:
            tags.append(t)
        k += 1
    specs_ = [Spec(t, 100 + i) for i, t in enumerate(tags)]
    for s in specs_:
        s.write(rc.execute_command)
    expect = {s.ns: s.read(rc.execute_command) for s in specs_}
    stop = threading.Event()
    reads, bad = [0], []

    def reader():
        r = rc_of(live)
        while not stop.is_set():
            for s in specs_:
                try:
                    got = s.read(r.execute_command)
                except redis.RedisError as e:  # a redirect redis-py could not follow
                    bad.append(f"{s.ns}: {e!r}")
                    continue
                if got != expect[s.ns]:
                    bad.append(f"{s.ns}: different rows")
                reads[0] += 1

    th = threading.Thread(target=reader)
    th.start()
    try:
        out = subprocess.run(
            [REDIS_CLI, "--cluster", "reshard", f"127.0.0.1:{src.port}",
             "--cluster-from", node_id(src), "--cluster-to", node_id(dst),
             "--cluster-slots", str(len(moved)), "--cluster-yes"],
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr
        assert poll(lambda: reads[0] >= 2 * len(specs_), timeout=30)
    finally:
        stop.set()
        th.join(60)
    assert not bad, bad[:5]
    # Every moved namespace now lives on the destination, whole.
    dc, sc = dst.client(), src.client()
    for s in specs_:
        slot = rc.keyslot(s.ns)
        assert dc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) >= 1
        assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        assert s.read(rc_of(live).execute_command) == expect[s.ns]
    assert poll(lambda: cluster_ok(live), timeout=30)


def test_tryagain_while_a_namespace_is_on_its_way(cluster):
    # Redis ASKs a V.* command on a migrating slot over to the importing node (the
    # session id is never a key itself); until the namespace arrives that node answers
    # TRYAGAIN, which cluster clients retry, not "session not found".
    rc = rc_of(cluster)
    live = [n for n in cluster if n.proc.poll() is None]
    ns = "{tryagain|ns}"
    Spec(ns, 5).write(rc.execute_command)
    owner = rc.get_node_from_key(ns)
    src = next(n for n in live if n.port == owner.port)
    dst = next(p for p in primaries(live) if p.port != src.port)
    slot = rc.keyslot(ns)
    d = dst.client()
    assert d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src)) == b"OK"
    try:
        raw = RawConn(dst.port)
        assert raw.call("ASKING") == "OK"
        reply = raw.call("V.FETCH", ns + "_pk", 0, "RANGE", 0, 1)
        assert isinstance(reply, RawError) and reply.startswith("TRYAGAIN ")
        # On the owner (not importing), an absent namespace is "session not found".
        other = RawConn(src.port)
        assert other.call("V.FETCH", "{tryagain|ns}x_pk", 0, "RANGE", 0, 1) == (
            "NOSESSION session not found")
        raw.close()
        other.close()
    finally:
        assert d.execute_command("CLUSTER", "SETSLOT", slot, "STABLE") == b"OK"
    assert rc.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, 1) is not None
