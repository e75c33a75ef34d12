"""redis-py-style pipelines of the Python client (pion.pipeline) and its own fetch
connections (pion._fetch), against the real pion-server."""
from __future__ import annotations

import numpy as np
import pytest
import redis.exceptions as rex

from pion import PionClient, Pipeline
from pion.errors import CommandError, PionError, SessionNotFoundError
from test_security import certs, tls_args, tls_port

FIXTURES = (certs,)  # the TLS certificates fixture, module-scoped


@pytest.fixture
def pc(server):
    c = PionClient(port=server.port)
    yield c
    c.close()


def test_pipeline_round_trip_in_order(pc):
    rows = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    with pc.pipeline() as p:
        assert isinstance(p, Pipeline)
        p.kv_prefix_register("pl", 8, "fp16").kv_prefix_lookup("pl")
        p.v_storebatch("pl_pk", 0, 0, rows).v_storebatch("pl_pv", 0, 0, rows * 2)
        p.kv_prefix_lookup("nope")
        assert len(p) == 5
        assert p.execute() == [None, True, None, None, False]
        assert len(p) == 0
        p.v_fetch_range("pl_pk", 0, 0, 4, fmt="F32")
        p.v_fetch_range("pl_pv", 0, 0, 4, fmt="NATIVE", dim=8)
        p.v_fetch_batch("pl_pk", 0, 4, fmt="F16")
        p.v_fetch_ids("pl_pv", 0, [3, 0])
        p.kv_prefix_info("pl").v_info("pl_pk").pion_stats().execute_command("PING")
        k, v, batch, ids, info, vinfo, stats, pong = p.execute()
    assert k.dtype == np.float32 and np.array_equal(k, rows)
    assert v.dtype == np.float16 and np.array_equal(v, (rows * 2).astype(np.float16))
    assert len(batch) == 1 and np.array_equal(batch[0], rows.astype(np.float16))
    assert np.array_equal(ids, (rows * 2)[[3, 0]])
    assert info["namespace"] == "pl" and vinfo["value_dim"] == 8
    assert stats["kvprefix_hits"] == 1 and stats["kvprefix_misses"] == 1
    assert pong == b"PONG"


def test_pipeline_errors_raise_or_stay_in_place(pc):
    with pc.pipeline() as p:
        p.execute_command("PING").v_fetch_range("missing_pk", 0, 0, 1).execute_command("PING")
        with pytest.raises(SessionNotFoundError):
            p.execute()
        p.execute_command("PING").kv_prefix_register("e", 7, "nosuch").execute_command("PING")
        a, err, b = p.execute(raise_on_error=False)
    assert a == b == b"PONG"
    assert isinstance(err, CommandError) and isinstance(err, rex.RedisError)
    assert "unknown vquant" in err.message


def test_pipeline_discarded_outside_the_block(pc):
    with pc.pipeline() as p:
        p.execute_command("PING")
    assert len(p) == 0 and p.execute() == []
    with pytest.raises(ValueError):
        pc.pipeline().v_fetch_range("x_pk", 0, 0, 1, fmt="NATIVE")  # NATIVE needs dim


def test_fetch_connection_authenticates_and_survives_a_restart(server_factory):
    s = server_factory(["--requirepass", "pw"])
    c = PionClient(port=s.port, password="pw")
    c.kv_prefix_register("r", 4, "fp16")
    c.v_storebatch("r_pk", 0, 0, np.ones((2, 4), np.float32))
    assert np.array_equal(c.v_fetch_range("r_pk", 0, 0, 2), np.ones((2, 4), np.float32))
    s.restart()  # the idle fetch connection is now closed by the server
    assert np.array_equal(c.v_fetch_range("r_pk", 0, 0, 2), np.ones((2, 4), np.float32))
    c.close()
    wrong = PionClient(port=s.port, password="bad", retries=0)
    with pytest.raises(PionError):
        wrong.v_fetch_range("r_pk", 0, 0, 2)
    wrong.close()


def test_fetch_connection_over_tls(server_factory, certs):
    s = server_factory(tls_args(certs, auth="yes"))
    kw = dict(port=tls_port(s), ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
              ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"))
    c = PionClient(**kw)
    x = np.random.default_rng(3).random((1024, 256), dtype=np.float32)
    c.kv_prefix_register("t", 256, "fp16")
    c.v_storebatch("t_pk", 0, 0, x)
    got = c.v_fetch_range("t_pk", 0, 0, 1024, fmt="NATIVE", dim=256)
    assert got.dtype == np.float16 and np.array_equal(got, x.astype(np.float16))
    c.close()
    # The fetch connection checks the server's certificate as the pool does.
    kw.pop("ssl_ca_certs")
    bad = PionClient(retries=0, **kw)
    with pytest.raises(PionError):
        bad.v_fetch_range("t_pk", 0, 0, 1, fmt="F32")
    bad.close()
