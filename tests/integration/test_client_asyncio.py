"""pion.asyncio: the asyncio client (redis.asyncio underneath, its own connections
for V.FETCH) against the real pion-server."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
import redis.exceptions as rex

from pion.asyncio import AsyncPionClient
from pion.errors import CommandError, SessionNotFoundError, WrongPassError


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_data_path_and_pipeline(server):
    rows = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)

    async def main():
        async with AsyncPionClient(port=server.port) as c:
            assert await c.ping() is True
            await c.kv_prefix_register("a", 8, "fp16")
            await c.v_storebatch("a_pk", 0, 0, rows)
            await c.v_storebatch("a_pv", 1, 0, rows * 2)
            assert await c.kv_prefix_lookup("a") is True
            assert await c.kv_prefix_lookup("b") is False
            k = await c.v_fetch_range("a_pk", 0, 0, 16)
            v = await c.v_fetch_range("a_pv", 1, 0, 16, fmt="NATIVE", dim=8)
            ids = await c.v_fetch_ids("a_pk", 0, [5, 1], fmt="F16")
            batch = await c.v_fetch_batch("a_pv", 0, 16, fmt="F32")
            info = await c.kv_prefix_info("a")
            stats = await c.pion_stats()
            with pytest.raises(SessionNotFoundError):
                await c.v_fetch_range("zz_pk", 0, 0, 1)
            with pytest.raises(CommandError) as ei:
                await c.kv_prefix_register("e", 7, "nosuch")
            assert isinstance(ei.value, rex.RedisError)
            # Concurrent fetches each get their own connection.
            many = await asyncio.gather(*[c.v_fetch_range("a_pk", 0, i, i + 1) for i in range(8)])
            async with c.pipeline() as p:
                p.kv_prefix_lookup("a").v_fetch_range("a_pk", 0, 0, 16, fmt="F16")
                p.v_fetch_range("missing_pk", 0, 0, 1)
                hit, k16, err = await p.execute(raise_on_error=False)
            return k, v, ids, batch, info, stats, many, hit, k16, err

    k, v, ids, batch, info, stats, many, hit, k16, err = run(main())
    assert np.array_equal(k, rows) and k.dtype == np.float32
    assert v.dtype == np.float16 and np.array_equal(v, (rows * 2).astype(np.float16))
    assert np.array_equal(ids, rows[[5, 1]].astype(np.float16))
    assert batch[0] is None and np.array_equal(batch[1], rows * 2)
    assert info["namespace"] == "a" and stats["kvprefix_hits"] == 1
    assert all(np.array_equal(m, rows[i:i + 1]) for i, m in enumerate(many))
    assert hit is True and np.array_equal(k16, rows.astype(np.float16))
    assert isinstance(err, SessionNotFoundError)


def test_fetch_connection_authenticates(server_factory):
    s = server_factory(["--requirepass", "pw"])

    async def main():
        async with AsyncPionClient(port=s.port, password="pw") as c:
            await c.kv_prefix_register("p", 4, "fp16")
            await c.v_storebatch("p_pk", 0, 0, np.ones((2, 4), np.float32))
            got = await c.v_fetch_range("p_pk", 0, 0, 2)
        async with AsyncPionClient(port=s.port, password="bad", retries=0) as bad:
            with pytest.raises(WrongPassError):
                await bad.v_fetch_range("p_pk", 0, 0, 2)
        return got

    assert np.array_equal(run(main()), np.ones((2, 4), np.float32))
