"""Reply parsers shared by the clients: ``key:value`` bulks (INFO, KV.PREFIX.INFO,
V.INFO), the PION.STATS receipt and status replies."""
from __future__ import annotations

from typing import Any

from . import errors as E

__all__ = ["STATS_FIELDS", "parse_info", "parse_stats"]

#: PION.STATS fields in server order (docs/protocol.md "The value receipt").
STATS_FIELDS = (
    "worker_id",
    "uptime_in_seconds",
    "kvprefix_hits",
    "kvprefix_misses",
    "kvprefix_hits_measured",
    "kvprefix_tokens_served",
    "kvprefix_bytes_served",
    "kvprefix_prefill_us_saved",
    "kvprefix_prefill_us_measured",
    "prefill_seconds_avoided",
    "prefill_seconds_avoided_measured",
    "semantic_hits",
    "semantic_misses",
    "moe_hits",
    "moe_misses",
    "vector_queries",
)
_SECONDS_FIELDS = ("prefill_seconds_avoided", "prefill_seconds_avoided_measured")


def _s(v: Any) -> str:
    return bytes(v).decode("utf-8", "replace") if isinstance(v, (bytes, bytearray, memoryview)) else str(v)


def _num(v: str) -> int | float | str:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def parse_info(reply: bytes | str) -> dict[str, int | float | str]:
    """Parses a ``key:value`` per line reply (KV.PREFIX.INFO, V.INFO, INFO) into a dict.

    Numbers become ``int`` / ``float``; ``# Section`` headers and blank lines are skipped.
    """
    out: dict[str, int | float | str] = {}
    for line in _s(reply).splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, _, v = line.partition(":")
        out[k] = _num(v)
    return out


def parse_stats(reply: Any) -> dict[str, int | float]:
    """Parses a PION.STATS reply (RESP3 map or RESP2 flat array) into an ordered dict.

    Integer fields stay ``int``; the two ``S.mmm`` seconds fields become ``float``
    (the exact microseconds are in ``kvprefix_prefill_us_saved`` / ``..._measured``).
    """
    if isinstance(reply, dict):
        pairs = list(reply.items())
    elif isinstance(reply, (list, tuple)):
        if len(reply) % 2:
            raise E.UnexpectedReplyError(f"PION.STATS: odd-length array ({len(reply)})")
        pairs = [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]
    else:
        raise E.UnexpectedReplyError(f"PION.STATS: unexpected reply {reply!r:.80}")
    out: dict[str, int | float] = {}
    for k, v in pairs:
        key = _s(k)
        if isinstance(v, int):
            out[key] = v
        else:
            text = _s(v)
            out[key] = float(text) if key in _SECONDS_FIELDS or "." in text else int(text)
    return out


def _status(reply: Any) -> str:
    if isinstance(reply, (bytes, bytearray)):
        return reply.decode("utf-8", "replace")
    if isinstance(reply, str):
        return reply
    if reply is True:  # redis-py callbacks turn +OK into True for some commands
        return "OK"
    raise E.UnexpectedReplyError(f"expected a status reply, got {reply!r:.80}")


def _expect_ok(reply: Any, cmd: str) -> None:
    s = _status(reply)
    if s != "OK":
        raise E.UnexpectedReplyError(f"{cmd}: expected +OK, got {s!r}")
