"""redis-py-style pipelines of :class:`pion.PionClient`::

    with client.pipeline() as p:
        p.kv_prefix_lookup(ns)
        p.v_fetch_range(ns + "_pk", 0, 0, n, fmt="F16")
        p.v_fetch_range(ns + "_pv", 0, 0, n, fmt="F16")
        hit, k, v = p.execute()

Each queued method takes the arguments of the client method of the same name and
returns the pipeline (calls chain); :meth:`Pipeline.execute` sends every queued
command in one write, one round trip, no MULTI, and returns one result per command,
converted as the client method would. A pipeline holding a ``V.FETCH`` is sent on
the client's fetch connection (payloads arrive as arrays, one copy); others go
through redis-py. ``execute(raise_on_error=False)`` returns a failed command's
:class:`pion.errors.PionError` in its place instead of raising the first one.
Leaving the ``with`` block discards what was not executed. Not thread-safe.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from . import errors as E
from .blocks import pack_hashes, unpack_bitmap
from .cluster_keys import Key
from .replies import _status, parse_info, parse_stats

if TYPE_CHECKING:
    from .client import PionClient

__all__ = ["Pipeline", "Commands"]


def _plain(r: Any) -> Any:
    """A reply read on the fetch connection (bulks as uint8 arrays) as redis-py gives it."""
    if isinstance(r, np.ndarray):
        return r.tobytes()
    if isinstance(r, list):
        return [_plain(x) for x in r]
    return r


def _lookup(r: Any) -> bool:
    s = _status(r)
    if s in ("HIT", "MISS"):
        return s == "HIT"
    raise E.UnexpectedReplyError(f"KV.PREFIX.LOOKUP: {s!r}")


def _ok(name: str) -> Callable[[Any], None]:
    def check(r: Any) -> None:
        if _status(r) != "OK":
            raise E.UnexpectedReplyError(f"{name}: expected +OK, got {r!r:.80}")
    return check


class Commands:
    """The data-path commands as (arguments, conversion of the reply, is a V.FETCH):
    each method hands them to ``_add``, which a pipeline queues and the asyncio
    client (:mod:`pion.asyncio`) sends at once."""

    def _add(self, args: Sequence[Any], convert: Callable[[Any], Any] = lambda r: r,
             fetch: bool = False) -> Any:
        raise NotImplementedError

    # ---- commands
    def execute_command(self, *args: Any) -> Any:
        """Any command; its result is the raw reply."""
        return self._add(args)

    def ping(self) -> Any:
        return self._add(("PING",), lambda r: _status(r) == "PONG")

    def kv_prefix_register(self, ns: Key, kv_dim: int, vquant: str = "fp16", *,
                           block_size: int | None = None, hashes: Any = None,
                           prefill_ms: int | None = None, parent: Key | None = None) -> Any:
        args = _client()._register_args(ns, kv_dim, vquant, block_size, hashes, prefill_ms, parent)
        return self._add(args, _ok("KV.PREFIX.REGISTER"))

    def kv_prefix_lookup(self, ns: Key, *, tokens: int | None = None,
                         prefill_ms: int | None = None) -> Any:
        args: list[Any] = ["KV.PREFIX.LOOKUP", ns]
        if tokens is not None:
            args += ["TOKENS", str(int(tokens))]
        if prefill_ms is not None:
            args += ["PREFILL_MS", str(int(prefill_ms))]
        return self._add(args, _lookup)

    def kv_prefix_lookup_chain(self, ns: Key, *, tokens: int | None = None,
                               prefill_ms: int | None = None) -> Any:
        return self._add(_client()._lookup_chain_args(ns, tokens, prefill_ms),
                         _client().parse_chain)

    def kv_prefix_drop(self, *namespaces: Key) -> Any:
        if not namespaces:
            raise ValueError("kv_prefix_drop needs at least one namespace")
        return self._add(("KV.PREFIX.DROP",) + namespaces, int)

    def kv_prefix_membership(self, ns: Key, hashes: Any) -> Any:
        h = np.asarray(hashes, dtype=np.uint64)
        return self._add(("KV.PREFIX.MEMBERSHIP", ns, str(h.size), pack_hashes(h)),
                         lambda r: None if r is None or r == b"UNKNOWN"
                         else unpack_bitmap(r, int(h.size)))

    def kv_prefix_info(self, ns: Key | None = None) -> Any:
        if ns is None:
            return self._add(("KV.PREFIX.INFO",), parse_info)
        return self._add(("KV.PREFIX.INFO", ns),
                         lambda r: None if r in (b"UNKNOWN", "UNKNOWN")
                         else _client().parse_info_reply(r))

    def kv_prefix_save(self, path: str | None = None) -> Any:
        return self._add(("KV.PREFIX.SAVE",) + ((path,) if path else ()), _ok("KV.PREFIX.SAVE"))

    def kv_prefix_commit(self) -> Any:
        return self._add(("KV.PREFIX.COMMIT",), _ok("KV.PREFIX.COMMIT"))

    def v_storebatch(self, sid: Key, layer: int, start: int, rows: np.ndarray) -> Any:
        return self._add(_client()._storebatch_args(sid, layer, start, rows), _ok("V.STOREBATCH"))

    def v_fetch_range(self, sid: Key, layer: int, start: int, end: int, *, fmt: str = "F32",
                      dim: int | None = None) -> Any:
        """As :meth:`PionClient.v_fetch_range`; ``FMT NATIVE`` needs ``dim`` here."""
        if dim is None and fmt.upper() == "NATIVE":
            raise ValueError("FMT NATIVE needs dim here (no V.INFO round trip)")
        args = ("V.FETCH", sid, str(int(layer)), "RANGE", str(int(start)), str(int(end)), "FMT", fmt)
        return self._add(args, lambda r: _client().decode_rows(r, end - start, dim, fmt), True)

    def v_fetch_batch(self, sid: Key, start: int, end: int, num_layers: int | None = None, *,
                      fmt: str = "F32", dim: int | None = None) -> Any:
        if dim is None and fmt.upper() == "NATIVE":
            raise ValueError("FMT NATIVE needs dim here (no V.INFO round trip)")
        args: list[Any] = ["V.FETCH", sid, "BATCH", str(int(start)), str(int(end))]
        if num_layers is not None:
            args.append(str(int(num_layers)))
        args += ["FMT", fmt]

        def convert(r: Any) -> list[Any]:
            if not isinstance(r, list):
                raise E.UnexpectedReplyError("V.FETCH BATCH: expected an array")
            return [_client().decode_rows(p, end - start, dim, fmt) for p in r]
        return self._add(args, convert, True)

    def v_fetch_ids(self, sid: Key, layer: int, ids: Sequence[int], *, fmt: str | None = None,
                    dim: int | None = None) -> Any:
        if not ids:
            raise ValueError("v_fetch_ids needs at least one id")
        args: list[Any] = ["V.FETCH", sid, str(int(layer))] + [str(int(i)) for i in ids]
        if fmt is not None:
            args += ["FMT", fmt]
        return self._add(args, lambda r: _client().decode_rows(r, len(ids), dim, fmt or "F32"),
                         True)

    def v_info(self, sid: Key | None = None) -> Any:
        return self._add(("V.INFO",) + ((sid,) if sid is not None else ()), parse_info)

    def pion_stats(self) -> Any:
        return self._add(("PION.STATS",), parse_stats)

    def pion_stats_reset(self) -> Any:
        return self._add(("PION.STATS", "RESET"), _ok("PION.STATS RESET"))


def _client() -> type[PionClient]:
    from .client import PionClient

    return PionClient


class Pipeline(Commands):
    """Commands queued for one round trip (see the module documentation); every
    command method returns the pipeline."""

    def __init__(self, client: "PionClient") -> None:
        self.client = client
        self._queue: list[tuple[tuple[Any, ...], Callable[[Any], Any], bool]] = []

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.reset()

    def __len__(self) -> int:
        return len(self._queue)

    def reset(self) -> None:
        """Discards every queued command."""
        self._queue.clear()

    def _add(self, args: Sequence[Any], convert: Callable[[Any], Any] = lambda r: r,
             fetch: bool = False) -> "Pipeline":
        self._queue.append((tuple(args), convert, fetch))
        return self

    # ---- the round trip
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Sends the queued commands and returns their results (the queue is emptied)."""
        queue, self._queue = self._queue, []
        if not queue:
            return []
        commands = [args for args, _, _ in queue]
        if any(fetch for _, _, fetch in queue):
            replies = self.client.fetch_pipeline(commands)
        else:
            replies = self.client.pipeline(commands)
        out: list[Any] = []
        for (_, convert, fetch), r in zip(queue, replies):
            if isinstance(r, E.PionError):
                if raise_on_error:
                    raise r
                out.append(r)
                continue
            out.append(convert(r if fetch else _plain(r)))
        return out
