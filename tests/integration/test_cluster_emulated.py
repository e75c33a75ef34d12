"""pion-server --cluster-emulated yes: a one-node cluster owning slots 0-16383, so
the cluster client code of test_cluster_module.py (redis-py RedisCluster, hash-tagged
namespaces) runs unchanged against one pion-server."""
from __future__ import annotations

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import RawConn
from pion import PionClient
from redis_module import Spec, exercise_pion_client, exercise_prompt_cache


def test_cluster_client_against_one_server(server_factory):
    srv = server_factory(["--cluster-emulated", "yes"])
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", srv.port)], socket_timeout=30)
    specs = [Spec(f"{{app|v1|e{i}|p}}", i) for i in range(14)]
    for s in specs:
        s.write(rc.execute_command)
    plain = srv.client()
    for s in specs:
        assert s.read(rc.execute_command) == s.read(plain.execute_command)
        assert rc.execute_command("KV.PREFIX.LOOKUP", s.ns) == b"HIT"
    # One node, every slot; the key -> slot rule is Redis Cluster's.
    nodes = rc.get_nodes()
    assert [(n.host, n.port, n.server_type) for n in nodes] == [("127.0.0.1", srv.port, "primary")]
    c = srv.client()
    assert c.execute_command("CLUSTER", "SLOTS")[0][:2] == [0, 16383]
    for key in ("foo", "{app|v1|e3|p}_pk", "plain", ""):
        assert c.execute_command("CLUSTER", "KEYSLOT", key) == rc.keyslot(key)
    info = c.execute_command("CLUSTER", "INFO").decode()
    assert "cluster_state:ok\r\n" in info and "cluster_slots_assigned:16384\r\n" in info
    myid = c.execute_command("CLUSTER", "MYID")
    assert len(myid) == 40 and myid in c.execute_command("CLUSTER", "NODES")
    shards = c.execute_command("CLUSTER", "SHARDS")
    assert shards[0][1] == [0, 16383] and myid in shards[0][3][0]
    assert c.execute_command(b"READONLY") == b"OK" and c.execute_command(b"READWRITE") == b"OK"
    # Key specs for keyed commands (what cluster clients route by).
    raw = RawConn(srv.port)
    (fetch,) = raw.call("COMMAND", "INFO", "V.FETCH")
    ks = fetch[8]
    assert len(ks) == 1 and ks[0][1] == ["RO", "access"]
    assert ks[0][3] == [b"type", b"index", b"spec", [b"index", 1]]
    assert ks[0][5] == [b"type", b"range", b"spec", [b"lastkey", 0, b"keystep", 1, b"limit", 0]]
    (drop,) = raw.call("COMMAND", "INFO", "KV.PREFIX.DROP")
    assert drop[8][0][1] == ["RW", "access", "update"] and drop[8][0][5][3][1] == -1
    (ping,) = raw.call("COMMAND", "INFO", "PING")
    assert ping[8] == []
    raw.close()
    with pytest.raises(redis.ResponseError, match="unknown subcommand 'NOPE'"):
        c.execute_command("CLUSTER", "NOPE")


def test_pion_client_cluster_against_one_server(server_factory):
    srv = server_factory(["--cluster-emulated", "yes"])
    exercise_pion_client(PionClient.cluster([("127.0.0.1", srv.port)]))
    exercise_prompt_cache([("127.0.0.1", srv.port)])


def test_cluster_commands_refused_without_the_option(server):
    c = server.client()
    for cmd in (("CLUSTER", "SLOTS"), ("CLUSTER", "INFO"), ("READONLY",), ("READWRITE",)):
        with pytest.raises(redis.ResponseError, match="^This instance has cluster support disabled$"):
            c.execute_command(*cmd)
