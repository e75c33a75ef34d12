"""KV.BLOCK.* against the real binary (docs/protocol.md "Blocks"): pins under memory
pressure (a leased run survives a fill of the budget, released by UNPIN and by its
deadline, -OOM when everything is pinned), chains under a budget (roots survive, leaves
go), and a restart that keeps links, hashes and tokens (WAL and snapshot)."""
import struct
import time

import pytest
import redis

from conftest import poll

VALUE = 8 * 1024
CHARGE = VALUE + 96 + 16  # value capacity + entry overhead + key (approximate)


def block(i: int) -> bytes:
    return bytes([i % 251]) * VALUE


def fill(r, prefix: str, n: int) -> None:
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"{prefix}{i}", block(i))
    p.execute()


def pinfo(r) -> dict:
    return r.info("pion")


def binfo(r, key: str) -> dict | None:
    v = r.execute_command("KV.BLOCK.INFO", key)
    if v is None:
        return None
    d = dict(zip([x.decode() for x in v[0::2]], v[1::2]))
    return d


def test_leased_run_survives_a_fill_and_is_released_by_unpin(server_factory):
    s = server_factory(["--maxmemory", str(64 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"run:{i}" for i in range(16)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 600000)
    assert count == 16 and lease > 0
    info = pinfo(r)
    assert info["pinned_keys"] == 16 and info["leases"] == 1
    assert info["pinned_bytes"] >= 16 * VALUE
    # Fill the whole budget several times over: the pinned run stays.
    fill(r, "fill:", 4 * 64)
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) == 16
    assert r.get(keys[3]) == block(3)
    # Released: the next fill evicts the run (it is now the least recently used).
    assert r.execute_command("KV.BLOCK.UNPIN", lease, 12345) == 1
    assert pinfo(r)["pinned_keys"] == 0
    fill(r, "more:", 2 * 64)
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) < 16


def test_pins_end_at_their_deadline(server_factory):
    s = server_factory(["--maxmemory", str(64 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"d:{i}" for i in range(8)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 300)
    assert count == 8
    # The active expiry cycle ends the lease by itself (no UNPIN, no client needed).
    r2 = s.client()
    assert poll(lambda: pinfo(r2)["leases"] == 0, timeout=10)
    assert pinfo(r2)["pinned_keys"] == 0
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 0


def test_a_client_that_dies_leaks_no_lease(server_factory):
    s = server_factory(["--appendonly", "no"])
    r = s.client()
    r.set("k", "v")
    c = s.client()
    c.execute_command("KV.BLOCK.MATCH", 1, "k", "PIN", 200)
    c.close()
    assert poll(lambda: pinfo(r)["leases"] == 0, timeout=10)


def test_oom_when_everything_is_pinned(server_factory):
    s = server_factory(["--maxmemory", str(16 * CHARGE), "--appendonly", "no"])
    r = s.client()
    keys = [f"p:{i}" for i in range(14)]
    for i, k in enumerate(keys):
        r.set(k, block(i))
    count, lease = r.execute_command("KV.BLOCK.MATCH", len(keys), *keys, "PIN", 600000)
    assert count == 14
    # Other keys are evicted for new ones; once every evictable byte is pinned
    # (a budget of the pinned bytes and half a block), a write that needs room is -OOM.
    for i in range(8):
        r.set(f"new:{i}", block(i))
    r.config_set("maxmemory", pinfo(r)["pinned_bytes"] + CHARGE // 2)
    with pytest.raises(redis.exceptions.ResponseError, match="^OOM"):
        r.set("new:x", block(1))
    assert r.execute_command("KV.BLOCK.MATCH", len(keys), *keys) == 14
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 1
    r.set("new:x", block(1))  # room again


def test_pinned_key_outlives_its_ttl(server_factory):
    s = server_factory(["--appendonly", "no"])
    r = s.client()
    r.set("t", "v", px=50)
    _, lease = r.execute_command("KV.BLOCK.MATCH", 1, "t", "PIN", 600000)
    time.sleep(0.1)  # let the TTL pass (not a synchronisation: the clock must move on)
    assert r.get("t") == b"v"
    assert r.pttl("t") == 0
    assert r.execute_command("KV.BLOCK.UNPIN", lease) == 1
    assert r.get("t") is None


def chain(r, prefix: str, n: int, after: str | None = None, hashes=None, tokens=None):
    args = ["KV.BLOCK.CHAIN"]
    if after is not None:
        args += ["AFTER", after]
    if hashes is not None:
        args += ["HASHES", struct.pack(f"<{len(hashes)}Q", *hashes)]
    if tokens is not None:
        args += ["TOKENS", tokens]
    for i in range(n):
        args += [f"{prefix}{i}", block(i)]
    assert r.execute_command(*args) == b"OK"


def test_chains_under_a_budget_keep_roots_and_lose_leaves(server_factory):
    # 12 chains of 6 blocks in a budget of about 40 blocks.
    s = server_factory(["--maxmemory", str(40 * CHARGE), "--appendonly", "no"])
    r = s.client()
    for c in range(12):
        chain(r, f"c{c}:", 6)
    held = {c: [r.exists(f"c{c}:{i}") for i in range(6)] for c in range(12)}
    # Within every chain what is left is a prefix: leaves went first, roots last.
    for c, h in held.items():
        n = sum(h)
        assert h == [1] * n + [0] * (6 - n), (c, h)
    # The most recent chains are whole, the oldest were taken first.
    assert all(held[11]) and not any(held[0])
    # A chain that is read is refreshed as a unit: reading the last block left of
    # the oldest surviving chain keeps its root over the chains written after.
    victim = min(c for c in range(12) if held[c][0])
    leaf = max(i for i in range(6) if held[victim][i])
    assert r.get(f"c{victim}:{leaf}") == block(leaf)
    for c in range(12, 16):
        chain(r, f"c{c}:", 6)
    assert r.exists(f"c{victim}:0") == 1
    assert not any(r.exists(f"c{c}:0") for c in range(victim + 1, victim + 2) if c < 12)


@pytest.mark.parametrize("how", ["wal", "snapshot"])
def test_restart_keeps_links_hashes_and_tokens(server_factory, how):
    s = server_factory(["--appendfsync", "always"])
    r = s.client()
    r.set("root", "r")
    chain(r, "b", 4, after="root", hashes=[2**64 - 1, 2, 3, 4], tokens=16)
    r.delete("b2")  # b3 becomes a root
    r.rename("b1", "b1x")  # the links move
    if how == "snapshot":
        assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    r.close()
    s.restart()
    r = s.client()
    b0 = binfo(r, "b0")
    assert b0["parent"] == b"root" and b0["children"] == 1
    assert b0["hash"] == str(2**64 - 1).encode() and b0["tokens"] == 16
    assert binfo(r, "b1x")["parent"] == b"b0"
    assert binfo(r, "b3")["parent"] is None and binfo(r, "b3")["hash"] == b"4"
    assert binfo(r, "root")["children"] == 1
    assert binfo(r, "nope") is None
    assert r.get("b0") == block(0)
