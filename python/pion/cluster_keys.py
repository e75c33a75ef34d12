"""Keys of a Redis Cluster: which argument of a pion command is its key, and the hash
tags that keep a namespace and its session ids in one slot (docs/cluster.md "The
hash-tag rule"); and how a keyless command's per-node replies add up.
"""
from __future__ import annotations

from typing import Any, Sequence, Union, cast

__all__ = ["Key", "hash_tagged", "tagged_sid"]

Key = Union[str, bytes]


# Commands whose argument 1 is a namespace / a session id, and KV.PREFIX.DROP (every
# argument a namespace): what a cluster client wraps in a hash tag (docs/cluster.md).
_NS_AT_1 = {"KV.PREFIX.REGISTER", "KV.PREFIX.LOOKUP", "KV.PREFIX.BLOCKS", "KV.PREFIX.MEMBERSHIP",
            "PION.LOADROWS"}
_SID_AT_1 = {"V.STOREBATCH", "V.FETCH", "V.INFO"}


def hash_tagged(ns: Key) -> Key:
    """``ns`` wrapped in a Redis Cluster hash tag (``"{ns}"``) unless it already has one.

    A namespace and its session ids ``<ns>_pk`` / ``<ns>_pv`` must hash to one slot; the
    part inside the first ``{...}`` is all that is hashed, so ``{ns}``, ``{ns}_pk`` and
    ``{ns}_pv`` always do.
    """
    b = ns.encode() if isinstance(ns, str) else bytes(ns)
    i = b.find(b"{")
    if i >= 0 and b.find(b"}", i + 2) > i:
        return ns
    return "{" + ns + "}" if isinstance(ns, str) else b"{" + b + b"}"


def tagged_sid(sid: Key) -> Key:
    """A session id ``<ns>_pk``/``<ns>_pv`` with its namespace hash-tagged (others unchanged)."""
    b = sid.encode() if isinstance(sid, str) else bytes(sid)
    if len(b) > 3 and b[-3:] in (b"_pk", b"_pv"):
        if isinstance(sid, str):
            return cast(str, hash_tagged(sid[:-3])) + sid[-3:]
        return cast(bytes, hash_tagged(sid[:-3])) + sid[-3:]
    return sid


def _tag_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    if not args:
        return args
    name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
    name = name.upper()
    if name == "KV.PREFIX.DROP":
        return (args[0],) + tuple(hash_tagged(a) for a in args[1:])
    if len(args) > 1 and name in _NS_AT_1:
        return (args[0], hash_tagged(args[1])) + args[2:]
    if len(args) > 1 and name in _SID_AT_1:
        return (args[0], tagged_sid(args[1])) + args[2:]
    return args


def _sum_replies(parsed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Adds up per-node counters: numbers are summed, other values kept from the first."""
    out: dict[str, Any] = {}
    for d in parsed:
        for k, v in d.items():
            if k in out and isinstance(v, (int, float)) and isinstance(out[k], (int, float)):
                out[k] += v
            elif k not in out:
                out[k] = v
    return out
