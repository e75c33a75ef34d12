"""A subscriber for KV events in vLLM's format (docs/kv_events.md).

pion publishes which block hashes it holds over ZeroMQ as vLLM's engines do:
multipart messages ``[topic, seq, payload]`` where ``seq`` is an 8-byte
big-endian counter from 0 and ``payload`` is msgpack of ``[ts, [event, ...],
dp_rank]``. Events are maps tagged ``"type"`` (vLLM's current form); consumers
also meet vLLM's older positional form (``["BlockStored", hashes, parent, ...]``),
so :func:`decode_event` reads both. ``KvEventSubscriber`` connects (or binds, for
a pion that connects to its subscriber), tracks gaps in ``seq`` and can replay
missed batches from pion's replay socket.

Needs pyzmq and msgpack (Debian: python3-zmq, python3-msgpack).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = [
    "BlockStored",
    "BlockRemoved",
    "AllBlocksCleared",
    "EventBatch",
    "KvEventSubscriber",
    "decode_event",
    "decode_payload",
    "REPLAY_END",
]

#: The sequence number the replay socket sends after the last buffered batch.
REPLAY_END = 2**64 - 1


@dataclass(frozen=True)
class BlockStored:
    block_hashes: list[int]
    parent_block_hash: int | None
    block_size: int
    medium: str | None
    token_ids: list[int] = field(default_factory=list)
    lora_id: int | None = None
    lora_name: str | None = None
    group_idx: int = 0


@dataclass(frozen=True)
class BlockRemoved:
    block_hashes: list[int]
    medium: str | None
    group_idx: int = 0


@dataclass(frozen=True)
class AllBlocksCleared:
    pass


Event = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(frozen=True)
class EventBatch:
    seq: int
    ts: float
    events: list[Event]
    dp_rank: int | None = None
    topic: bytes = b""


def _hash(h: Any) -> int:
    # vLLM may send a hash as bytes (its non-int mode): the router's u64 is the
    # digest's last 8 bytes, big-endian.
    if isinstance(h, (bytes, bytearray)):
        return int.from_bytes(bytes(h)[-8:], "big")
    return int(h)


def decode_event(raw: Any) -> Event:
    """One event, in the map form (``{"type": ...}``) or the positional one."""
    if isinstance(raw, dict):
        kind = raw.get("type")
        if kind == "BlockStored":
            parent = raw.get("parent_block_hash")
            return BlockStored(
                block_hashes=[_hash(h) for h in raw.get("block_hashes", [])],
                parent_block_hash=None if parent is None else _hash(parent),
                block_size=int(raw.get("block_size", 0)),
                medium=raw.get("medium"),
                token_ids=list(raw.get("token_ids") or []),
                lora_id=raw.get("lora_id"),
                lora_name=raw.get("lora_name"),
                group_idx=int(raw.get("group_idx") or 0),
            )
        if kind == "BlockRemoved":
            return BlockRemoved(
                block_hashes=[_hash(h) for h in raw.get("block_hashes", [])],
                medium=raw.get("medium"),
                group_idx=int(raw.get("group_idx") or 0),
            )
        if kind == "AllBlocksCleared":
            return AllBlocksCleared()
        raise ValueError(f"unknown KV event type {kind!r}")
    if isinstance(raw, (list, tuple)) and raw:
        kind, rest = raw[0], list(raw[1:])
        if kind == "BlockStored":
            # block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, ...
            rest += [None] * (6 - len(rest))
            parent = rest[1]
            return BlockStored(
                block_hashes=[_hash(h) for h in rest[0] or []],
                parent_block_hash=None if parent is None else _hash(parent),
                token_ids=list(rest[2] or []),
                block_size=int(rest[3] or 0),
                lora_id=rest[4],
                medium=rest[5],
            )
        if kind == "BlockRemoved":
            rest += [None] * (2 - len(rest))
            return BlockRemoved(block_hashes=[_hash(h) for h in rest[0] or []], medium=rest[1])
        if kind == "AllBlocksCleared":
            return AllBlocksCleared()
        raise ValueError(f"unknown KV event type {kind!r}")
    raise ValueError(f"not a KV event: {raw!r}")


def decode_payload(payload: bytes, seq: int = 0, topic: bytes = b"") -> EventBatch:
    """A batch payload: msgpack ``[ts, [events], dp_rank]``."""
    import msgpack

    arr = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not isinstance(arr, (list, tuple)) or len(arr) < 2:
        raise ValueError("KV event batch is not [ts, events, ...]")
    rank = arr[2] if len(arr) > 2 else None
    return EventBatch(seq=seq, ts=float(arr[0]), events=[decode_event(e) for e in arr[1]],
                      dp_rank=rank, topic=topic)


def _seq(frame: bytes) -> int:
    if len(frame) != 8:
        raise ValueError(f"sequence frame of {len(frame)} bytes, not 8")
    return struct.unpack(">Q", frame)[0]


class KvEventSubscriber:
    """A ZeroMQ SUB for pion's KV events.

    ``endpoint`` is pion's ``kv-events-endpoint`` seen from here: connected by
    default (pion binds ``tcp://*:5557``); ``bind=True`` for a pion configured to
    connect to this subscriber (llm-d's indexer binds). ``topic`` filters by
    prefix (b"" takes everything). ``replay_endpoint`` is pion's
    ``kv-events-replay-endpoint``.
    """

    def __init__(self, endpoint: str, topic: bytes | str = b"", *, bind: bool = False,
                 replay_endpoint: str | None = None, rcvhwm: int = 100_000) -> None:
        import zmq

        self._zmq = zmq
        self._ctx = zmq.Context()
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.RCVHWM, rcvhwm)
        self._sub.setsockopt(zmq.SUBSCRIBE, topic.encode() if isinstance(topic, str) else topic)
        if bind:
            self._sub.bind(endpoint)
        else:
            self._sub.connect(endpoint)
        self.endpoint = self._sub.getsockopt_string(zmq.LAST_ENDPOINT)
        self._replay_endpoint = replay_endpoint
        self.next_seq: int | None = None  # the seq expected next
        self.gaps: list[tuple[int, int]] = []  # [first missing, first seen after) ranges

    def close(self) -> None:
        self._sub.close(linger=0)
        self._ctx.term()

    def __enter__(self) -> "KvEventSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def recv(self, timeout_s: float | None = None) -> EventBatch | None:
        """The next batch, or None when none arrives within ``timeout_s``."""
        if timeout_s is not None and not self._sub.poll(int(timeout_s * 1000)):
            return None
        frames = self._sub.recv_multipart()
        if len(frames) != 3:
            raise ValueError(f"KV event message of {len(frames)} frames, not 3")
        topic, seq_b, payload = frames
        seq = _seq(seq_b)
        if self.next_seq is not None and seq > self.next_seq:
            self.gaps.append((self.next_seq, seq))
        self.next_seq = seq + 1
        return decode_payload(payload, seq, topic)

    def batches(self, timeout_s: float) -> Iterator[EventBatch]:
        """Batches until none arrives for ``timeout_s``."""
        while True:
            b = self.recv(timeout_s)
            if b is None:
                return
            yield b

    def replay(self, start_seq: int, timeout_s: float = 10.0) -> list[EventBatch]:
        """Every batch pion still buffers from ``start_seq`` on (its replay socket)."""
        if self._replay_endpoint is None:
            raise ValueError("no replay endpoint given")
        zmq = self._zmq
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.connect(self._replay_endpoint)
            sock.send(struct.pack(">Q", start_seq))
            out: list[EventBatch] = []
            while True:
                if not sock.poll(int(timeout_s * 1000)):
                    raise TimeoutError("replay: no end marker")
                seq_b, payload = sock.recv_multipart()
                seq = _seq(seq_b)
                if seq == REPLAY_END:
                    return out
                out.append(decode_payload(payload, seq))
        finally:
            sock.close(linger=0)
