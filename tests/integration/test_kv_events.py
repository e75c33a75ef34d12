"""KV events for routers (docs/kv_events.md): pion publishes the block hashes it
holds in vLLM's KV-event format over ZeroMQ. A real ZeroMQ subscriber (pyzmq,
msgpack: Debian's python3-zmq, python3-msgpack) checks every event type and field,
the sequence numbers, both endpoint directions, replay, drops at the high-water
mark, and the start-up batch after a restart."""
from __future__ import annotations

import signal
import struct
import time

import msgpack
import pytest
import zmq

from conftest import free_port
from pion.events import (AllBlocksCleared, BlockRemoved, BlockStored, KvEventSubscriber,
                         decode_payload)

WAIT = 10.0  # seconds a subscriber waits for a batch that must come (a hang bound)


def blob(hashes: list[int]) -> bytes:
    return struct.pack(f"<{len(hashes)}Q", *hashes)


def register(r, ns: str, hashes: list[int], block_size: int = 16, parent: str | None = None):
    args = ["KV.PREFIX.REGISTER", ns, 8, "fp16", "BLOCKS", block_size, len(hashes), blob(hashes)]
    if parent:
        args += ["PARENT", parent]
    assert r.execute_command(*args) == b"OK"


FENCE = 1 << 60


def sync(sub: KvEventSubscriber, r) -> None:
    """Returns once the subscriber receives pion's events and has read every event
    published before this call: registers a fence namespace until a batch arrives
    (ZeroMQ's slow joiner), then once more, and reads up to that fence's event."""
    deadline = time.monotonic() + WAIT
    n = 0
    while True:
        n += 1
        register(r, "fence", [FENCE + n])
        if sub.recv(0.2) is not None:
            break
        assert time.monotonic() < deadline, "the subscriber never received an event"
    n += 1
    register(r, "fence", [FENCE + n])
    while True:
        b = sub.recv(WAIT)
        assert b is not None, "the fence event did not arrive"
        if any(isinstance(e, BlockStored) and e.block_hashes == [FENCE + n] for e in b.events):
            return


def events_until(sub: KvEventSubscriber, count: int) -> list:
    """The next `count` events (across batches), in order."""
    out = []
    while len(out) < count:
        b = sub.recv(WAIT)
        assert b is not None, f"only {len(out)} of {count} events arrived: {out}"
        out.extend(b.events)
    assert len(out) == count, out
    return out


@pytest.fixture
def ipc_events(server_factory, tmpdir_path):
    """A pion that binds its KV events on an ipc endpoint, and a subscriber."""
    endpoint = f"ipc://{tmpdir_path}/kv-events.sock"
    replay = f"ipc://{tmpdir_path}/kv-replay.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--kv-events-replay-endpoint", replay,
                        "--kv-events-topic", "kv@pod-a@llama"])
    sub = KvEventSubscriber(endpoint, b"kv@", replay_endpoint=replay)
    yield s, sub
    sub.close()


def test_events_are_off_by_default(r):
    info = r.info("all")
    assert info["kv_events_batches"] == 0 and info["kv_events_published"] == 0


@pytest.mark.concurrency
def test_every_event_type_and_field(ipc_events):
    s, sub = ipc_events
    r = s.client()
    # A late joiner misses seq 0 (the start-up batch): replay brings it back.
    first = sub.replay(0)
    assert first and first[0].seq == 0 and first[0].events == [AllBlocksCleared()]
    sync(sub, r)

    register(r, "root", [1, 2, 2**64 - 1], block_size=16)
    (ev,) = events_until(sub, 1)
    assert ev == BlockStored(block_hashes=[1, 2, 2**64 - 1], parent_block_hash=None,
                             block_size=16, medium="SHARED", token_ids=[], lora_id=None,
                             lora_name=None, group_idx=0)
    register(r, "child", [3, 4], block_size=16, parent="root")
    (ev,) = events_until(sub, 1)
    assert ev.block_hashes == [3, 4] and ev.parent_block_hash == 2**64 - 1
    # A re-registration that replaces the table: the old one removed, then the new.
    register(r, "child", [5], block_size=32)
    removed, stored = events_until(sub, 2)
    assert removed == BlockRemoved(block_hashes=[3, 4], medium="SHARED", group_idx=0)
    assert stored.block_hashes == [5] and stored.block_size == 32
    assert stored.parent_block_hash == 2**64 - 1
    # BLOCKS with no hash: nothing. Without BLOCKS: the table stays, nothing either.
    register(r, "empty", [])
    assert r.execute_command("KV.PREFIX.REGISTER", "child", 8, "fp16") == b"OK"
    # DROP of the root takes its child too: one BlockRemoved each.
    assert r.execute_command("KV.PREFIX.DROP", "root") == 2
    evs = events_until(sub, 2)
    assert sorted(tuple(e.block_hashes) for e in evs) == [(1, 2, 2**64 - 1), (5,)]
    assert all(isinstance(e, BlockRemoved) for e in evs)
    register(r, "again", [7])
    events_until(sub, 1)
    assert r.flushall() is True
    assert events_until(sub, 1) == [AllBlocksCleared()]
    assert sub.gaps == []
    info = r.info("all")
    assert info["kv_events_batches"] >= 8 and info["kv_events_dropped"] == 0
    assert info["kv_events_replayed"] >= 1


def test_wire_frames_are_exactly_vllms(ipc_events):
    s, sub = ipc_events
    r = s.client()
    # A raw SUB, decoding by hand: [topic, 8-byte big-endian seq, msgpack payload].
    ctx = zmq.Context()
    raw = ctx.socket(zmq.SUB)
    raw.setsockopt(zmq.SUBSCRIBE, b"")
    raw.connect(sub.endpoint)
    try:
        deadline = time.monotonic() + WAIT
        frames = None
        while frames is None and time.monotonic() < deadline:
            register(r, "w", [11, 12], block_size=4)
            if raw.poll(200):
                frames = raw.recv_multipart()
        assert frames is not None
        topic, seq, payload = frames
        assert topic == b"kv@pod-a@llama" and len(seq) == 8
        ts, events, rank = msgpack.unpackb(payload, raw=False)
        assert isinstance(ts, float) and abs(ts - time.time()) < 3600 and rank == 0
        assert events[-1] == {"type": "BlockStored", "block_hashes": [11, 12],
                              "parent_block_hash": None, "token_ids": [], "block_size": 4,
                              "lora_id": None, "medium": "SHARED", "lora_name": None,
                              "group_idx": 0}
        assert decode_payload(payload).events[-1].block_hashes == [11, 12]
    finally:
        raw.close(linger=0)
        ctx.term()


def test_pion_connects_to_a_subscriber_that_binds(server_factory):
    # llm-d's indexer binds its SUB; pion's endpoint then has no wildcard: it connects.
    port = free_port()
    with KvEventSubscriber(f"tcp://127.0.0.1:{port}", b"", bind=True) as sub:
        s = server_factory(["--kv-events-endpoint", f"tcp://127.0.0.1:{port}",
                            "--kv-events-medium", "CPU_TIER2"])
        r = s.client()
        deadline = time.monotonic() + WAIT
        got = None
        while got is None and time.monotonic() < deadline:
            register(r, "n", [42])
            b = sub.recv(0.2)
            got = b if b and any(isinstance(e, BlockStored) for e in b.events) else None
        assert got is not None
        assert got.topic == f"kv@127.0.0.1:{s.port}@pion".encode()
        ev = [e for e in got.events if isinstance(e, BlockStored)][0]
        assert ev.block_hashes == [42] and ev.medium == "CPU_TIER2"


def test_eviction_is_published(server_factory, tmpdir_path):
    endpoint = f"ipc://{tmpdir_path}/ev.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--maxmemory", "64kb"])
    r = s.client()
    with KvEventSubscriber(endpoint) as sub:
        sync(sub, r)
        # Each table of 1,000 hashes is 8 KB (plus its index): the budget keeps a
        # few, and each eviction is a BlockRemoved of the namespace's hashes.
        for i in range(1, 30):
            register(r, f"p{i}", list(range(i * 10_000, i * 10_000 + 1000)))
        # The fence marks the end: everything before it has been read then.
        removed: set[int] = set()
        register(r, "end", [FENCE - 1])
        done = False
        while not done:
            b = sub.recv(WAIT)
            assert b is not None, "the end marker did not arrive"
            for e in b.events:
                if isinstance(e, BlockRemoved):
                    removed.update(e.block_hashes)
                elif isinstance(e, BlockStored) and e.block_hashes == [FENCE - 1]:
                    done = True
        assert r.info("all")["vstore_evictions"] > 0
        gone = [i for i in range(1, 30) if not r.exists(f"p{i}")]
        assert gone, "nothing was evicted"
        for i in gone:
            assert i * 10_000 in removed, f"p{i} left without a BlockRemoved"
        for i in range(1, 30):
            if i not in gone:
                assert i * 10_000 not in removed, f"p{i} is held but was announced removed"


def test_restart_publishes_cleared_then_what_recovery_loaded(server_factory, tmpdir_path):
    endpoint = f"ipc://{tmpdir_path}/rs.sock"
    replay = f"ipc://{tmpdir_path}/rs-replay.sock"
    args = ["--kv-events-endpoint", endpoint, "--kv-events-replay-endpoint", replay]
    s = server_factory(args)
    r = s.client()
    register(r, "a", [1, 2])
    register(r, "b", [3], parent="a")
    r.close()
    s.stop(signal.SIGTERM)
    s.start()
    with KvEventSubscriber(endpoint, replay_endpoint=replay) as sub:
        (first, *_) = sub.replay(0)
        assert first.seq == 0
        assert first.events[0] == AllBlocksCleared()
        stored = first.events[1:]
        assert [e.block_hashes for e in stored] == [[1, 2], [3]]  # parents first
        assert stored[1].parent_block_hash == 2


def test_a_slow_subscriber_costs_dropped_events_not_latency(server_factory, tmpdir_path):
    endpoint = f"ipc://{tmpdir_path}/hwm.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--kv-events-hwm", "1"])
    r = s.client(socket_timeout=30)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 1)
    sub.setsockopt(zmq.RCVBUF, 4096)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoint)
    try:
        deadline = time.monotonic() + WAIT
        while not sub.poll(100):
            register(r, "x", [1])
            assert time.monotonic() < deadline, "the subscriber never received an event"
        # The subscriber reads nothing more: the publisher must drop, never wait.
        hashes = list(range(50_000))
        for i in range(400):
            register(r, f"big{i % 8}", hashes)
            if r.info("all")["kv_events_dropped"] > 0:
                break
            assert r.ping() is True
        info = r.info("all")
        assert info["kv_events_dropped"] > 0
        assert r.ping() is True
    finally:
        sub.close(linger=0)
        ctx.term()


def test_a_bad_endpoint_stops_start_up(server_factory):
    s = server_factory(["--kv-events-endpoint", "bogus://nowhere"], start=False)
    with pytest.raises(RuntimeError, match="kv-events-endpoint 'bogus://nowhere'"):
        s.start()


# ---- hashed block keys (KV.BLOCK.CHAIN ... HASHES) ----

def chain(r, pairs: list[tuple[str, bytes]], hashes: list[int] | None = None,
          after: str | None = None, tokens: int | None = None, px: int | None = None):
    args: list = ["KV.BLOCK.CHAIN"]
    if after is not None:
        args += ["AFTER", after]
    if px is not None:
        args += ["PX", px]
    if hashes is not None:
        args += ["HASHES", blob(hashes)]
    if tokens is not None:
        args += ["TOKENS", tokens]
    for k, v in pairs:
        args += [k, v]
    assert r.execute_command(*args) == b"OK"


def test_chain_with_hashes_publishes_stored_and_removals(ipc_events):
    s, sub = ipc_events
    r = s.client()
    sync(sub, r)
    chain(r, [("b0", b"x"), ("b1", b"y")], hashes=[10, 2**64 - 2], tokens=16)
    (ev,) = events_until(sub, 1)
    assert ev == BlockStored(block_hashes=[10, 2**64 - 2], parent_block_hash=None,
                             block_size=16, medium="SHARED", token_ids=[], lora_id=None,
                             lora_name=None, group_idx=0)
    # Continuing the chain: the parent is the AFTER key's hash; no TOKENS: 0.
    chain(r, [("b2", b"z")], hashes=[12], after="b1")
    (ev,) = events_until(sub, 1)
    assert ev.block_hashes == [12] and ev.parent_block_hash == 2**64 - 2
    assert ev.block_size == 0
    # AFTER a key without a hash, or a missing one: no parent.
    r.set("plain", "p")
    chain(r, [("c0", b"x")], hashes=[20], after="plain")
    chain(r, [("d0", b"x")], hashes=[30], after="missing")
    evs = events_until(sub, 2)
    assert [(e.block_hashes, e.parent_block_hash) for e in evs] == [([20], None), ([30], None)]
    # A CHAIN without HASHES publishes nothing; RENAME keeps the hash: nothing.
    chain(r, [("e0", b"x")])
    assert r.rename("c0", "c0x") is True
    # DEL of hashed keys (and of one without a hash): BlockRemoved of the hashes.
    # One command's removals in a row share one event.
    assert r.delete("b0", "e0", "b2") == 3
    (ev,) = events_until(sub, 1)
    assert ev == BlockRemoved(block_hashes=[10, 12], medium="SHARED", group_idx=0)
    # UNLINK of the renamed key: its hash goes with it.
    assert r.unlink("c0x") == 1
    (ev,) = events_until(sub, 1)
    assert ev == BlockRemoved(block_hashes=[20], medium="SHARED", group_idx=0)
    # Overwriting a hashed key with SET keeps its hash (no event); a CHAIN with a
    # new hash removes the old one first, then stores the new.
    assert r.set("b1", "new") is True
    chain(r, [("d0", b"w")], hashes=[31])
    removed, stored = events_until(sub, 2)
    assert removed.block_hashes == [30] and stored.block_hashes == [31]
    assert isinstance(removed, BlockRemoved) and isinstance(stored, BlockStored)
    # FLUSHALL: AllBlocksCleared alone.
    assert r.flushall() is True
    assert events_until(sub, 1) == [AllBlocksCleared()]
    assert sub.gaps == []


def test_expiry_of_a_hashed_key_is_published(ipc_events):
    s, sub = ipc_events
    r = s.client()
    sync(sub, r)
    chain(r, [("t0", b"x"), ("t1", b"y")], hashes=[40, 41], px=20)
    (ev,) = events_until(sub, 1)
    assert ev.block_hashes == [40, 41]
    # Active expiry removes them without any command: BlockRemoved arrives.
    removed: list[int] = []
    deadline = time.monotonic() + WAIT
    while sorted(removed) != [40, 41]:
        assert time.monotonic() < deadline, removed
        b = sub.recv(0.5)
        if b is not None:
            removed += [h for e in b.events if isinstance(e, BlockRemoved) for h in e.block_hashes]
    assert r.exists("t0", "t1") == 0


def test_eviction_of_hashed_keys_is_published(server_factory, tmpdir_path):
    endpoint = f"ipc://{tmpdir_path}/kev.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--maxmemory", "256kb"])
    r = s.client()
    value = b"v" * 8192
    with KvEventSubscriber(endpoint) as sub:
        sync(sub, r)
        for i in range(1, 80):
            chain(r, [(f"k{i}", value)], hashes=[1000 + i])
        register(r, "end", [FENCE - 1])
        removed: set[int] = set()
        done = False
        while not done:
            b = sub.recv(WAIT)
            assert b is not None, "the end marker did not arrive"
            for e in b.events:
                if isinstance(e, BlockRemoved):
                    removed.update(e.block_hashes)
                elif isinstance(e, BlockStored) and e.block_hashes == [FENCE - 1]:
                    done = True
        gone = [i for i in range(1, 80) if not r.exists(f"k{i}")]
        assert gone, "nothing was evicted"
        assert {h for h in removed if h < FENCE} == {1000 + i for i in gone}


def test_restart_publishes_hashed_block_keys(server_factory, tmpdir_path):
    endpoint = f"ipc://{tmpdir_path}/rk.sock"
    replay = f"ipc://{tmpdir_path}/rk-replay.sock"
    args = ["--appendfsync", "always", "--kv-events-endpoint", endpoint,
            "--kv-events-replay-endpoint", replay]
    s = server_factory(args)
    r = s.client()
    chain(r, [("a0", b"x"), ("a1", b"y"), ("a2", b"z")], hashes=[1, 2, 3], tokens=16)
    chain(r, [("f0", b"x")], hashes=[4], after="a1", tokens=16)  # a fork
    chain(r, [("n0", b"x")])  # no hash: not announced
    r.close()
    s.stop(signal.SIGTERM)
    s.start()
    with KvEventSubscriber(endpoint, replay_endpoint=replay) as sub:
        (first, *_) = sub.replay(0)
        assert first.seq == 0 and first.events[0] == AllBlocksCleared()
        stored = first.events[1:]
        assert all(isinstance(e, BlockStored) and e.block_size == 16 for e in stored)
        got = sorted((tuple(e.block_hashes), e.parent_block_hash) for e in stored)
        # a1 has two children: the run stops there, each child starts one.
        assert got == [((1, 2), None), ((3,), 2), ((4,), 2)]


# ---- batching (docs/kv_events.md "Batching, drops and replay") ----

def test_commands_of_one_loop_turn_are_one_message_in_order(ipc_events):
    s, sub = ipc_events
    r = s.client()
    sync(sub, r)
    # One write of five commands: one read, one turn of the worker's loop.
    p = r.pipeline(transaction=False)
    for i in range(5):
        p.execute_command("KV.PREFIX.REGISTER", f"turn{i}", 8, "fp16", "BLOCKS", 16, 1,
                          blob([500 + i]))
    p.execute_command("KV.PREFIX.DROP", "turn0")
    assert p.execute() == [b"OK"] * 5 + [1]
    b = sub.recv(WAIT)
    assert b is not None, "the batch never came"
    assert [(type(e).__name__, e.block_hashes) for e in b.events] == (
        [("BlockStored", [500 + i]) for i in range(5)] + [("BlockRemoved", [500])])
    # Its sequence number follows the fence's, and replay gives the same batch.
    assert sub.gaps == []
    (again, *_) = sub.replay(b.seq)
    assert again.seq == b.seq and again.events == b.events


def test_a_held_event_goes_out_without_more_traffic(server_factory, tmpdir_path):
    # The longest hold (1 ms): the worker's loop wakes for it though no command
    # follows. A bounded wait, not a timing: the event must come at all.
    endpoint = f"ipc://{tmpdir_path}/held.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--kv-events-batch-us", "1000"])
    r = s.client()
    with KvEventSubscriber(endpoint) as sub:
        sync(sub, r)
        register(r, "alone", [77])
        b = sub.recv(WAIT)
        assert b is not None, "a held event never went out"
        assert [e.block_hashes for e in b.events] == [[77]]
        # Expiry by the timer, no command at all: its removal goes out too.
        chain(r, [("held0", b"x")], hashes=[78], px=10)
        assert [e.block_hashes for e in events_until(sub, 1)] == [[78]]
        (ev,) = events_until(sub, 1)
        assert isinstance(ev, BlockRemoved) and ev.block_hashes == [78]
    assert r.config_get("kv-events-batch-us") == {"kv-events-batch-us": "1000"}


def test_with_no_subscriber_events_are_counted_and_replayable(server_factory, tmpdir_path):
    # Nobody subscribed: nothing is encoded or sent, but the batches keep their
    # sequence numbers and a late subscriber replays them.
    endpoint = f"ipc://{tmpdir_path}/nosub.sock"
    replay = f"ipc://{tmpdir_path}/nosub-replay.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--kv-events-replay-endpoint", replay])
    r = s.client()
    for i in range(3):
        register(r, f"quiet{i}", [900 + i, 950 + i])
    deadline = time.monotonic() + WAIT
    while r.info("all")["kv_events_published"] < 4:  # the start-up batch's event, and 3
        assert time.monotonic() < deadline, r.info("all")
        time.sleep(0.01)
    assert r.info("all")["kv_events_dropped"] == 0
    with KvEventSubscriber(endpoint, replay_endpoint=replay) as sub:
        got = [e for b in sub.replay(0) for e in b.events]
        assert got[0] == AllBlocksCleared()
        assert [e.block_hashes for e in got[1:]] == [[900 + i, 950 + i] for i in range(3)]


def test_batch_us_zero_sends_each_loop_turn(server_factory, tmpdir_path):
    # kv-events-batch-us 0: no holding back, one batch per loop turn that made
    # events; a pipelined write is still one turn, so one batch.
    endpoint = f"ipc://{tmpdir_path}/zero.sock"
    s = server_factory(["--kv-events-endpoint", endpoint, "--kv-events-batch-us", "0"])
    r = s.client()
    with KvEventSubscriber(endpoint) as sub:
        sync(sub, r)
        p = r.pipeline(transaction=False)
        for i in range(3):
            p.execute_command("KV.PREFIX.REGISTER", f"z{i}", 8, "fp16", "BLOCKS", 16, 1,
                              blob([600 + i]))
        assert p.execute() == [b"OK"] * 3
        b = sub.recv(WAIT)
        assert b is not None
        assert [e.block_hashes for e in b.events] == [[600], [601], [602]]
        register(r, "z-after", [700])
        assert [e.block_hashes for e in events_until(sub, 1)] == [[700]]


def test_with_no_subscriber_and_no_replay_nothing_is_formed(server_factory, tmpdir_path):
    # Nothing could come of the events: the workers skip them (not counted),
    # and once a subscriber joins they flow.
    endpoint = f"ipc://{tmpdir_path}/idle.sock"
    s = server_factory(["--kv-events-endpoint", endpoint])
    r = s.client()
    deadline = time.monotonic() + WAIT
    while r.info("all")["kv_events_published"] < 1:  # the start-up batch's event
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for i in range(5):
        register(r, f"unheard{i}", [800 + i])
    info = r.info("all")
    assert info["kv_events_published"] == 1 and info["kv_events_batches"] == 1
    with KvEventSubscriber(endpoint) as sub:
        sync(sub, r)
        register(r, "heard", [850])
        assert [e.block_hashes for e in events_until(sub, 1)] == [[850]]
