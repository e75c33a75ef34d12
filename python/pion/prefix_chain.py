"""PrefixChain: a conversation stored as a chain of segment namespaces.

A serving layer that keeps a conversation as one namespace per segment (the
root holds the system prompt, then one segment per turn) would restore the
chain with one ``V.FETCH ... BATCH`` per segment side plus ``KV.PREFIX.LOOKUP
<leaf> TOKENS <n>`` for the receipt and, with the server's LRU seeing only the
leaf being touched, would have to run its own byte budget and eviction loop. Here
the server knows the chain (``KV.PREFIX.REGISTER ... PARENT``, docs/protocol.md
"Lineage"): touching a segment refreshes its ancestors, eviction takes leaves
first and the least recently used chain first, and ``KV.PREFIX.LOOKUP <leaf>
CHAIN`` answers the chain with each segment's token count in one reply,
crediting the receipt once for the whole chain. So this helper has no budget
loop: it names segments, appends them, and restores them.

Naming: segment ``i`` of a conversation whose turns are ``t0..tn`` is
``make_namespace(*parts, vquant, "chain:" + sha256(len(t0), t0, ..., len(ti), ti))``:
it names exactly the tokens up to and including its turn, with the turn
boundaries, so two conversations that share their first turns share those
segments (a tree), and any process that knows the turns finds them.

Array layout as :class:`pion.PionPromptCache`: ``[layers, kv_heads, tokens,
head_dim]``; a segment's rows start at token 0 of its own sessions and hold
the K/V of its own tokens only (K after RoPE at their absolute positions), so
the concatenation of the segments along the token axis is the conversation's
past.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Sequence

import numpy as np

from . import errors as E
from .client import PionClient
from .prompt_cache import PionPromptCache, PrefixKV, TokenIds, _token_list

__all__ = ["PrefixChain"]

# prefill_fn(suffix_ids, past) -> K/V of the suffix (or of past + suffix):
# ``(K, V)`` numpy arrays or torch ``past_key_values``; past is ``(K, V)`` or None.
PrefillFn = Callable[[np.ndarray, PrefixKV | None], Any]


def _concat(parts: list[PrefixKV]) -> PrefixKV:
    if len(parts) == 1:
        return parts[0]
    dt = np.result_type(*[p[0].dtype for p in parts])
    k = np.concatenate([p[0].astype(dt, copy=False) for p in parts], axis=2)
    v = np.concatenate([p[1].astype(dt, copy=False) for p in parts], axis=2)
    return k, v


class PrefixChain:
    """One conversation's segments on a pion-server, through a :class:`PionPromptCache`.

    Args:
        cache: gives the connection, the layout (``n_layers``, ``n_kv_heads``,
            ``head_dim``), the vquant of new segments and the fetch format.
        *parts: what the K/V depend on besides the tokens, for the namespace
            names (default: the cache model's ``model_id``).

    State: ``turns`` and ``namespaces`` of the segments this object has
    appended or restored, root first. Counters of the last
    :meth:`get_or_prefill`: ``last_restored_segments``, ``last_restored_tokens``,
    ``last_prefilled_tokens``, ``last_prefill_ms``; totals ``restored_tokens``,
    ``prefilled_tokens``. Not thread-safe.
    """

    def __init__(self, cache: PionPromptCache, *parts: Any) -> None:
        if not parts:
            mid = getattr(cache.model, "model_id", None)
            if mid is None:
                raise ValueError("PrefixChain needs parts (or a cache whose model has model_id)")
            parts = (mid,)
        self.cache = cache
        self.parts = tuple(parts)
        self.turns: list[np.ndarray] = []
        self.namespaces: list[str] = []
        self.last_restored_segments = 0
        self.last_restored_tokens = 0
        self.last_prefilled_tokens = 0
        self.last_prefill_ms = 0.0
        self.restored_tokens = 0
        self.prefilled_tokens = 0

    # ------------------------------------------------------------------ names

    def namespaces_for(self, turns: Sequence[TokenIds]) -> list[str]:
        """The segment namespaces of a conversation whose turns are ``turns`` (root first)."""
        h = hashlib.sha256()
        out = []
        for t in turns:
            ids = _token_list(t).astype("<u4")
            h.update(np.uint32(ids.size).astype("<u4").tobytes())
            h.update(ids.tobytes())
            out.append(self.cache.make_namespace(*self.parts, self.cache.vquant, "chain:" + h.hexdigest()))
        return out

    @property
    def leaf(self) -> str | None:
        """The last segment's namespace (None for an empty chain)."""
        return self.namespaces[-1] if self.namespaces else None

    @property
    def n_tokens(self) -> int:
        """Tokens in the chain's segments."""
        return int(sum(t.size for t in self.turns))

    # ------------------------------------------------------------------ writes

    def append(self, turn_ids: TokenIds, k: Any, v: np.ndarray | None = None, *,
               prefill_ms: float | None = None) -> str:
        """Stores one turn as a new segment, the child of the current leaf; returns its namespace.

        ``k``, ``v``: that turn's K/V only, ``[layers, kv_heads, len(turn_ids), head_dim]``
        (or torch ``past_key_values`` as ``k``). REGISTER ... PARENT and every
        layer's rows go in one pipelined round trip. ``prefill_ms`` is credited
        on later lookups of chains through this segment.
        """
        ids = _token_list(turn_ids)
        if ids.size < 1:
            raise ValueError("a turn holds at least one token")
        if v is None:
            from .torch_adapters import from_past_key_values

            k, v = from_past_key_values(k)
        if np.asarray(k).shape[2] != ids.size:
            raise ValueError(f"K holds {np.asarray(k).shape[2]} tokens, the turn {ids.size}")
        ns = self.namespaces_for(self.turns + [ids])[-1]
        self.cache.store(ns, k, v, parent=self.leaf, prefill_ms=prefill_ms)
        self.turns.append(ids)
        self.namespaces.append(ns)
        return ns

    # ------------------------------------------------------------------ reads

    def _fetch_cmds(self, ns: str, n_tokens: int, fmt: str) -> list[list[Any]]:
        sid_k, sid_v = self.cache._sids(ns)
        L = str(self.cache.n_layers)
        return [["V.FETCH", sid, "BATCH", "0", str(n_tokens), L, "FMT", fmt] for sid in (sid_k, sid_v)]

    def _decode(self, ns: str, replies: Sequence[Any], n_tokens: int, fmt: str) -> PrefixKV:
        heads, hd, n_layers = self.cache.n_kv_heads, self.cache.head_dim, self.cache.n_layers
        if heads is None or hd is None or n_layers is None:
            raise ValueError(f"{ns}: the cache's model shape (layers, KV heads, head dim) is not known")
        out = []
        for side, r in zip("KV", replies):
            if isinstance(r, E.PionError):
                raise r
            if not isinstance(r, list) or len(r) < n_layers:
                raise E.IncompletePrefixError(f"{ns}: {side} side incomplete")
            arr = None
            for layer in range(n_layers):
                rows = PionClient.decode_rows(r[layer], n_tokens, heads * hd, fmt)
                if rows is None:
                    raise E.IncompletePrefixError(f"{ns}: {side} layer {layer} has no stored rows")
                if arr is None:
                    arr = np.empty((n_layers, heads, n_tokens, hd), dtype=rows.dtype)
                arr[layer] = rows.reshape(n_tokens, heads, hd).transpose(1, 0, 2)
            if arr is None:
                raise E.IncompletePrefixError(f"{ns}: no layers")
            out.append(arr)
        self.cache.bytes_fetched += out[0].nbytes + out[1].nbytes
        return out[0], out[1]

    def _need_layout(self) -> None:
        c = self.cache
        if not c.n_layers or not c.n_kv_heads or not c.head_dim:
            raise ValueError("layout unknown: pass n_layers/n_kv_heads/head_dim or a model to the cache")

    def restore(self, leaf: str | None = None) -> PrefixKV:
        """Restores a whole chain: ``(K, V)`` of every segment from the root to ``leaf``.

        Two round trips: ``KV.PREFIX.LOOKUP <leaf> CHAIN`` (the segments and their
        token counts; one receipt hit for the whole chain), then one pipeline of
        ``V.FETCH <seg>_pk|_pv BATCH 0 n L FMT fmt`` for every segment. The
        chain becomes this object's: ``namespaces`` is set, ``turns`` cleared
        (the server keeps no token ids; :meth:`get_or_prefill` knows them).

        Raises:
            SessionNotFoundError: ``leaf`` is not registered (``+MISS``).
            IncompletePrefixError: a segment's rows are not all stored.
        """
        self._need_layout()
        leaf = leaf or self.leaf
        if leaf is None:
            raise ValueError("restore needs a leaf namespace")
        chain = self.cache.client.kv_prefix_lookup_chain(leaf)
        if chain is None:
            raise E.SessionNotFoundError(f"{leaf}: not registered")
        fmt = self.cache._fetch_fmt()
        t0 = time.perf_counter()
        cmds: list[list[Any]] = []
        for ns, n in chain:
            if n < 1:
                raise E.IncompletePrefixError(f"{ns}: no stored tokens")
            cmds += self._fetch_cmds(ns, n, fmt)
        replies = self.cache.client.fetch_pipeline(cmds)
        parts = [self._decode(ns, replies[2 * i:2 * i + 2], n, fmt) for i, (ns, n) in enumerate(chain)]
        self.cache.fetch_ms_total += (time.perf_counter() - t0) * 1000.0
        self.namespaces = [ns for ns, _ in chain]
        self.turns = []
        return _concat(parts)

    def get_or_prefill(self, turns: Sequence[TokenIds], prefill_fn: PrefillFn | None = None) -> PrefixKV:
        """The K/V of a conversation: the longest cached ancestor restored, only the rest prefilled.

        1. One pipeline of ``KV.PREFIX.INFO <seg>`` for every segment of ``turns``
           (no LRU touch, no receipt) finds the longest run of segments from
           the root that are registered, linked as a chain and fully stored.
        2. One pipeline restores them: ``KV.PREFIX.LOOKUP <last> CHAIN`` (touches
           the chain, one receipt hit for all of it) and every segment's
           ``V.FETCH ... BATCH``. A segment that turns out incomplete (another
           process still storing it, or an eviction in between) ends the run there.
        3. The missing turns are prefilled in one call, ``prefill_fn(suffix_ids,
           past)`` with ``past`` the restored ``(K, V)`` (None when nothing was
           cached), timed; it returns the suffix's K/V (or past + suffix's:
           the suffix is sliced off), as ``(K, V)`` numpy arrays or torch
           ``past_key_values``. Default: the cache model's ``forward``.
        4. Each missing turn is appended as a segment (child of the one before),
           with its share of the measured prefill time as PREFILL_MS.

        Returns ``(K, V)`` of the whole conversation: restored segments as
        fetched (float16 for an fp16 chain), the prefilled suffix as the
        function computed it (converted to a common dtype).
        """
        self._need_layout()
        ids = [_token_list(t) for t in turns]
        if not ids or any(t.size < 1 for t in ids):
            raise ValueError("turns must be a non-empty list of non-empty token lists")
        nss = self.namespaces_for(ids)
        client = self.cache.client
        infos = client.pipeline([["KV.PREFIX.INFO", ns] for ns in nss])
        have = 0
        for i, (ns, r) in enumerate(zip(nss, infos)):
            if isinstance(r, E.PionError) or r in (b"UNKNOWN", "UNKNOWN"):
                break
            info = client.parse_info_reply(r)
            if (info.get("chain_length") != i + 1 or info.get("tokens") != ids[i].size
                    or (i > 0 and info.get("parent") != nss[i - 1])):
                break
            have = i + 1
        parts: list[PrefixKV] = []
        if have:
            fmt = self.cache._fetch_fmt()
            t0 = time.perf_counter()
            cmds: list[list[Any]] = [PionClient._lookup_chain_args(nss[have - 1])]
            for i in range(have):
                cmds += self._fetch_cmds(nss[i], int(ids[i].size), fmt)
            replies = client.fetch_pipeline(cmds)
            chain = client.parse_chain(replies[0]) if not isinstance(replies[0], E.PionError) else None
            if chain is None:
                have = 0
            for i in range(have):
                try:
                    parts.append(self._decode(nss[i], replies[1 + 2 * i:3 + 2 * i], int(ids[i].size), fmt))
                except (E.IncompletePrefixError, E.SessionNotFoundError):
                    have = i
                    break
            self.cache.fetch_ms_total += (time.perf_counter() - t0) * 1000.0
        past = _concat(parts) if parts else None
        restored = int(sum(t.size for t in ids[:have]))
        self.turns, self.namespaces = ids[:have], nss[:have]
        self.last_restored_segments, self.last_restored_tokens = have, restored
        self.restored_tokens += restored
        self.last_prefilled_tokens, self.last_prefill_ms = 0, 0.0
        if have == len(ids):
            self.cache.hits += 1
            self.cache.last_hit = True
            return past  # type: ignore[return-value]
        self.cache.misses += 1
        self.cache.last_hit = False
        # Prefill the missing turns in one call.
        suffix = np.concatenate(ids[have:])
        fn = prefill_fn or self._default_prefill()
        t0 = time.perf_counter()
        result = fn(suffix, past)
        ms = (time.perf_counter() - t0) * 1000.0
        ks, vs = self._suffix_of(result, restored, int(suffix.size))
        self.last_prefilled_tokens, self.last_prefill_ms = int(suffix.size), ms
        self.prefilled_tokens += int(suffix.size)
        self.cache.last_prefill_ms = ms
        off = 0
        for t in ids[have:]:
            n = int(t.size)
            share = ms * n / suffix.size
            self.append(t, ks[:, :, off:off + n], vs[:, :, off:off + n], prefill_ms=share if share >= 1 else None)
            off += n
        return _concat(([past] if past is not None else []) + [(ks, vs)])

    def _default_prefill(self) -> PrefillFn:
        model = self.cache.model
        forward: Callable[..., Any] | None = getattr(model, "forward", None)
        if forward is None:
            raise ValueError("get_or_prefill needs prefill_fn (or a cache model with forward(ids, past))")
        fwd = forward

        def run(suffix: np.ndarray, past: PrefixKV | None) -> Any:
            from .torch_adapters import to_past_key_values

            pkv = to_past_key_values(past[0], past[1]) if past is not None else None
            return fwd(suffix.tolist(), pkv, last_only=True)[1]

        return run

    @staticmethod
    def _suffix_of(result: Any, restored: int, n_suffix: int) -> PrefixKV:
        if isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0], np.ndarray):
            k, v = result
        else:
            from .torch_adapters import from_past_key_values

            k, v = from_past_key_values(result)
        n = k.shape[2]
        if n == restored + n_suffix and restored:
            k, v = k[:, :, restored:], v[:, :, restored:]
        elif n != n_suffix:
            raise ValueError(f"prefill_fn returned {n} tokens: want {n_suffix} (or {restored + n_suffix})")
        return np.ascontiguousarray(k), np.ascontiguousarray(v)
