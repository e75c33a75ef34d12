"""Lineage against the real binary: KV.PREFIX.REGISTER ... PARENT, LOOKUP ... CHAIN,
INFO <ns>, DROP of a subtree, and tree-aware eviction under --maxmemory.

The workload: 20 conversations (chains) of 5 segments each, built by
interleaved appends (a turn added as a child of the chain's leaf: only the leaf is
touched, as a serving process that keeps its own copy does) and restores (another
process restores the whole chain: every segment is read). Checked after every
step: no segment is held while one of its ancestors is gone (so no root is ever
evicted while a descendant is held). Then the least recently used whole chain
goes first, and a restart (WAL replay, and snapshot + WAL) keeps the links and
that order.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
import redis

DIM = 64  # fp16: 128 bytes per row, both sides stored


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def info(r, ns=None) -> dict | None:
    body = r.execute_command("KV.PREFIX.INFO", *([ns] if ns else []))
    if body == b"UNKNOWN":
        return None
    return {k: int(v) if v.isdigit() else v
            for k, v in (l.split(":", 1) for l in body.decode().split("\r\n") if l)}


def rows(n: int, seed: int) -> bytes:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float16).tobytes()


def seg_name(c: int, i: int) -> str:
    return f"conv{c}:seg{i}"


def append(r, c: int, i: int, n: int) -> None:
    """Registers segment i of chain c (child of segment i-1) and stores n rows both sides."""
    p = r.pipeline(transaction=False)
    args = ["KV.PREFIX.REGISTER", seg_name(c, i), DIM, "fp16"]
    if i:
        args += ["PARENT", seg_name(c, i - 1)]
    p.execute_command(*args)
    for side in ("pk", "pv"):
        p.execute_command("V.STOREBATCH", f"{seg_name(c, i)}_{side}", 0, 0, n, rows(n, 1000 * c + i),
                          "FMT", "F16")
    for reply in p.execute(raise_on_error=False):
        assert not isinstance(reply, Exception), reply


def restore(r, c: int) -> list | None:
    """LOOKUP <leaf> CHAIN, then every segment's K and V (BATCH): the chain, or None on a miss."""
    known = [i for i in range(5) if r.execute_command("KV.PREFIX.INFO", seg_name(c, i)) != b"UNKNOWN"]
    if not known:
        return None
    chain = r.execute_command("KV.PREFIX.LOOKUP", seg_name(c, known[-1]), "CHAIN")
    if chain == b"MISS":
        return None
    p = r.pipeline(transaction=False)
    for ns, n in chain:
        for side in ("pk", "pv"):
            p.execute_command("V.FETCH", f"{ns.decode()}_{side}", "BATCH", 0, n, 1, "FMT", "NATIVE")
    for reply in p.execute(raise_on_error=False):
        assert not isinstance(reply, Exception), reply
    return chain


def held(r, chains: int = 20, segs: int = 5) -> dict:
    """{chain: [True/False per segment]} from one pipeline of KV.PREFIX.INFO <seg>."""
    p = r.pipeline(transaction=False)
    for c in range(chains):
        for i in range(segs):
            p.execute_command("KV.PREFIX.INFO", seg_name(c, i))
    out = p.execute()
    return {c: [out[c * segs + i] != b"UNKNOWN" for i in range(segs)] for c in range(chains)}


def assert_no_orphan(h: dict, built: dict) -> None:
    for c, segs in h.items():
        for i in range(1, built.get(c, 0)):
            if segs[i]:
                assert all(segs[:i]), f"chain {c}: segment {i} held without an ancestor: {segs}"


def test_register_parent_chain_info_drop(r):
    assert err(r, "KV.PREFIX.REGISTER", "t1", DIM, "fp16", "PARENT", "root") == (
        "PARENT namespace is not registered")
    assert r.execute_command("KV.PREFIX.REGISTER", "root", DIM, "fp16", "PREFILL_MS", 200) == b"OK"
    assert err(r, "KV.PREFIX.REGISTER", "t1", 32, "fp16", "PARENT", "root") == (
        "PARENT namespace has kv_dim 64 (a chain keeps one kv_dim)")
    assert r.execute_command("KV.PREFIX.REGISTER", "t1", DIM, "fp16", "PARENT", "root") == b"OK"
    assert r.execute_command("KV.PREFIX.REGISTER", "t2", DIM, "fp16", "PARENT", "t1") == b"OK"
    assert err(r, "KV.PREFIX.REGISTER", "t2", DIM, "fp16", "PARENT", "root") == (
        "namespace already registered with PARENT 't1'")
    for ns, n in (("root", 30), ("t1", 7), ("t2", 3)):
        assert r.execute_command("V.STOREBATCH", f"{ns}_pk", 0, 0, n, rows(n, 1), "FMT", "F16") == b"OK"
    r.execute_command("PION.STATS", "RESET")
    assert r.execute_command("KV.PREFIX.LOOKUP", "t2", "CHAIN") == [[b"root", 30], [b"t1", 7], [b"t2", 3]]
    flat = r.execute_command("PION.STATS")
    st = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
    assert st["kvprefix_hits"] == 1 and st["kvprefix_tokens_served"] == 40
    assert info(r, "t2") == {"namespace": "t2", "parent": "t1", "children": 0, "depth": 2,
                             "chain_length": 3, "tokens": 3, "chain_tokens": 40,
                             "tier": "ram"}
    assert info(r)["linked_prefixes"] == 2
    assert r.execute_command("KV.PREFIX.LOOKUP", "nope", "CHAIN") == b"MISS"
    # DROP of a parent drops its subtree and counts every namespace removed.
    assert r.execute_command("KV.PREFIX.REGISTER", "t1b", DIM, "fp16", "PARENT", "t1") == b"OK"
    assert r.execute_command("KV.PREFIX.DROP", "t1") == 3
    assert r.execute_command("KV.PREFIX.LOOKUP", "t2") == b"MISS"
    assert info(r, "root")["children"] == 0
    assert r.execute_command("KV.PREFIX.DROP", "root", "t2") == 1


def build_budget(n_rows: int, chains_that_fit: float) -> int:
    return int(chains_that_fit * 5 * n_rows * DIM * 2 * 2)


def test_twenty_chains_under_maxmemory_keep_roots(server_factory):
    """Interleaved appends and restores of 20 chains under a budget for about 6 of them."""
    n = 24
    s = server_factory(["--maxmemory", str(build_budget(n, 6))])
    r = s.client()
    rng = random.Random(16)
    built = {c: 0 for c in range(20)}
    restores = hits = 0
    steps = 0
    while any(b < 5 for b in built.values()) or steps < 220:
        steps += 1
        c = rng.randrange(20)
        if built[c] < 5 and rng.random() < 0.6:
            # A turn appended to the leaf; a chain whose leaf was evicted restarts
            # at the first missing segment (its parent is held: no orphan).
            h = held(r)[c]
            i = built[c] if all(h[:built[c]]) else h.index(False)
            append(r, c, i, n)
            built[c] = i + 1
        elif built[c]:
            restores += 1
            chain = restore(r, c)
            if chain is not None and len(chain) == built[c]:
                hits += 1
            if chain is not None:
                assert [ns.decode() for ns, _ in chain] == [seg_name(c, i) for i in range(len(chain))]
        assert_no_orphan(held(r), built)
    kv = info(r)
    assert kv["vstore_evictions"] > 0, "the budget never evicted: the test tests nothing"
    assert kv["vstore_bytes"] <= build_budget(n, 6)
    assert restores > 50 and hits > 0
    print(f"\n20 chains x 5 segments, budget for ~6: {restores} restores, {hits} whole-chain hits, "
          f"{kv['vstore_evictions'] // 2} namespaces evicted, no orphaned segment")


ORDER = [3, 0, 6, 1, 7, 4, 2, 5]  # chain 3 used longest ago, chain 5 most recently


def fill_by_restores(r, n: int) -> None:
    """Builds chains 0..7, then restores them in ORDER (reads touch every segment)."""
    for c in range(8):
        for i in range(5):
            append(r, c, i, n)
    for c in ORDER:
        assert len(restore(r, c)) == 5


def fill_by_appends(r, n: int) -> None:
    """Builds segments 0..3 of chains 0..7, then each chain's leaf in ORDER: writes
    alone (which the WAL replays) make the same order."""
    for i in range(4):
        for c in range(8):
            append(r, c, i, n)
    for c in ORDER:
        append(r, c, 4, n)


def evict_one_chain(r, n: int, new: int = 8) -> list[int]:
    """With the budget full, adds chain `new` (one chain's bytes); returns the chains that
    lost a segment (each must have lost all of them)."""
    before = held(r, chains=new + 1)
    for i in range(5):
        append(r, new, i, n)
    h = held(r, chains=new + 1)
    assert all(h[new])
    gone = [c for c in range(new) if all(before[c]) and not all(h[c])]
    for c in gone:
        assert not any(h[c]), f"chain {c} only partly evicted: {h[c]}"
    return gone


def test_least_recent_whole_chain_goes_first(server_factory):
    n = 16
    # Exactly 8 chains. Eviction is sampled LRU: with at least as many samples as
    # leaves (8-11 here) it is exact, which this test's order needs.
    s = server_factory(["--maxmemory", str(build_budget(n, 8)), "--maxmemory-samples", "16"])
    r = s.client()
    fill_by_restores(r, n)
    assert info(r)["vstore_evictions"] == 0
    # Chain 3, restored longest ago, goes whole (leaf to root) and nothing else.
    assert evict_one_chain(r, n) == [3]
    assert info(r)["vstore_evictions"] == 2 * 5
    # Appending to a chain touches its leaf, so its ancestors: chain 0 (next in
    # line) gets a sixth segment's worth of fresh use and chain 6 goes next.
    r.execute_command("KV.PREFIX.DROP", seg_name(8, 0))
    for i in range(5):
        append(r, 9, i, n)  # fits in the room chain 8 left
    assert r.execute_command("KV.PREFIX.LOOKUP", seg_name(0, 4), "CHAIN") != b"MISS"
    assert evict_one_chain(r, n, new=10) == [6]


@pytest.mark.parametrize("how", ["wal", "snapshot"])
def test_restart_keeps_links_and_eviction_order(server_factory, how):
    n = 16
    # Samples >= leaves: exact LRU order (see test_least_recent_whole_chain_goes_first).
    s = server_factory(["--maxmemory", str(build_budget(n, 8)), "--appendfsync", "always",
                        "--maxmemory-samples", "16"])
    r = s.client()
    if how == "wal":
        fill_by_appends(r, n)  # the order lives in the log only
    else:
        fill_by_restores(r, n)  # reads are not logged: the order lives in the snapshot's stamps
        assert r.execute_command("KV.PREFIX.SAVE") == b"OK"
    r.close()
    s.restart()
    r = s.client()
    for c in range(8):
        for i in range(5):
            d = info(r, seg_name(c, i))
            assert d is not None and d["parent"] == (seg_name(c, i - 1) if i else "")
            assert d["chain_length"] == i + 1 and d["tokens"] == n
    assert info(r)["linked_prefixes"] == 8 * 4
    assert evict_one_chain(r, n) == [3]
    # The next chain in line goes next.
    r.execute_command("KV.PREFIX.DROP", seg_name(8, 0))
    for i in range(5):
        append(r, 9, i, n)
    assert evict_one_chain(r, n, new=10) == [0]


def test_parent_needs_read_permission_on_it(server_factory):
    """PARENT names a key the registration reads: a tenant cannot link to another's."""
    s = server_factory(["--appendonly", "no"])
    admin = s.client()
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">pa", "~a|*", "+@all", "-@dangerous")
    for ns in ("a|root", "b|root"):
        assert admin.execute_command("KV.PREFIX.REGISTER", ns, DIM, "fp16") == b"OK"
    alice = s.client(username="alice", password="pa")
    assert err(alice, "KV.PREFIX.REGISTER", "a|t1", DIM, "fp16", "PARENT", "b|root") == (
        "this user has no permissions to access one of the keys used as arguments")
    assert alice.execute_command("KV.PREFIX.LOOKUP", "a|t1") == b"MISS"
    assert alice.execute_command("KV.PREFIX.REGISTER", "a|t1", DIM, "fp16", "PARENT", "a|root") == b"OK"
    assert alice.execute_command("KV.PREFIX.LOOKUP", "a|t1", "CHAIN") == [[b"a|root", 0], [b"a|t1", 0]]
