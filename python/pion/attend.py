"""Stage 2 of :class:`pion.PionPromptCache`: attention over a cached prefix runs on the server.

Every method takes numpy arrays or torch tensors (any float dtype; sent as
little-endian float32 except where noted) and returns the same kind it was
given (torch in -> torch out, float32). Shapes: a query ``[H, D]`` (one row per
head) or ``[H, M, D]`` (M rows per head), a layer's K/V ``[H_kv, S, D]``.
The attention session of namespace ``ns`` is ``<ns>_attn``.

Cold tier (docs/python.md "Stage 2: attention on the server"): a query on a slot the server demoted answers
``-COLDMISS`` (RESP) or status 3 (fast lane). Each query method then counts
``cold_rehydrates_observed``, sends ``KV.PREFIX.WARM <ns> <H_kv> <D> <ns>_attn``
(rebuilds every layer's slot from the durable V-store) and retries exactly
once; a second COLDMISS raises :class:`pion.errors.ColdMissError`.

Lanes: ``attend_query`` and ``attend_query_fused`` (without ``with_lse``) go
over the binary fast lane when the server has one (``CONFIG GET
fastlane-port``): connected lazily with a PING, disabled for the object on any
failure (that call is then re-sent over RESP), and never used when the
environment variable ``PION_PROMPT_CACHE_NO_BINARY=1`` is set. Everything else
is RESP.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, TypeVar

import numpy as np

from . import errors as E
from .fastlane import OP_QUERY, OP_QUERY_FUSED, FastLane, query_body, query_fused_body

__all__ = ["AttendMixin", "SELECTORS", "default_head_map"]

#: Sparse-auto block selectors and their wire ids (docs/attention.md).
SELECTORS = {"block_mean": 0, "quest": 1}

T = TypeVar("T")
Tensor = Any  # numpy.ndarray or torch.Tensor


def _is_torch(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "numpy")


def _f32(x: Any, name: str, ndim: tuple[int, ...]) -> np.ndarray:
    if _is_torch(x):
        x = x.detach().cpu().float().numpy()
    a = np.ascontiguousarray(x, dtype="<f4")
    if a.ndim not in ndim:
        raise ValueError(f"{name} must have {' or '.join(str(n) for n in ndim)} dimensions, got shape {a.shape}")
    return a


def _out(a: np.ndarray, like_torch: bool) -> Tensor:
    if like_torch:
        import torch

        return torch.from_numpy(a)
    return a


def default_head_map(h_q: int, h_kv: int) -> np.ndarray:
    """GQA map of query head -> KV head: ``hq // (H_q / H_kv)`` as u8 (the server's default)."""
    if h_kv < 1 or h_q % h_kv:
        raise ValueError(f"H_q ({h_q}) must be a multiple of H_kv ({h_kv})")
    if h_kv > 256:
        raise ValueError("head_map entries are u8: H_kv must be <= 256")
    return np.repeat(np.arange(h_kv, dtype=np.uint8), h_q // h_kv)


def _head_map(head_map: Any, h_q: int, h_kv: int) -> np.ndarray:
    if head_map is None:
        return default_head_map(h_q, h_kv)
    if _is_torch(head_map):
        head_map = head_map.detach().cpu().numpy()
    hm = np.asarray(head_map).reshape(-1)
    if hm.size != h_q:
        raise ValueError(f"head_map must have H_q = {h_q} entries, got {hm.size}")
    if hm.size and (hm.min() < 0 or hm.max() >= h_kv):
        raise ValueError(f"head_map entries must be in 0..{h_kv - 1}")
    return np.ascontiguousarray(hm, dtype=np.uint8)


def _blob(reply: Any, n_floats: int, cmd: str) -> np.ndarray:
    if not isinstance(reply, (bytes, bytearray, memoryview, np.ndarray)):
        raise E.UnexpectedReplyError(f"{cmd}: expected a bulk reply, got {type(reply).__name__}")
    a = np.frombuffer(reply, dtype="<f4")
    if not a.flags.writeable:  # bytes from redis-py: hand out a writable copy
        a = a.copy()
    if a.size != n_floats:
        raise E.UnexpectedReplyError(f"{cmd}: reply holds {a.size} floats, expected {n_floats}")
    return a


def _mv(a: np.ndarray) -> memoryview | bytes:
    """The array's bytes for a command argument, without a copy (b"" when empty)."""
    return a.data.cast("B") if a.size else b""


def _window_args(fa_window: int | None) -> list[str]:
    return [] if fa_window is None else [str(int(fa_window))]


class AttendMixin:
    """The Stage-2 methods of :class:`pion.PionPromptCache` (see the module docstring)."""

    # provided by PionPromptCache
    client: Any
    n_kv_heads: int | None
    head_dim: int | None

    def _init_attend(self, lane_port: int | None) -> None:
        self.cold_rehydrates_observed = 0
        self.attend_query_ms_total = 0.0
        self.attend_query_calls = 0
        self.lane_queries = 0
        self.warm_rebuilds = 0
        self._lane: FastLane | None = None
        self._lane_port = lane_port
        self._lane_disabled = os.environ.get("PION_PROMPT_CACHE_NO_BINARY", "") not in ("", "0")

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def attn_sid(namespace: str) -> str:
        """The attention session of a namespace: ``<ns>_attn``."""
        return namespace + "_attn"

    @property
    def lane_active(self) -> bool:
        """True once the fast lane is connected (and not disabled)."""
        return self._lane is not None and not self._lane_disabled

    def _disable_lane(self) -> None:
        self._lane_disabled = True
        if self._lane is not None:
            self._lane.close()
            self._lane = None

    def _get_lane(self) -> FastLane | None:
        if self._lane_disabled:
            return None
        if self._lane is not None:
            return self._lane
        try:
            port = self._lane_port
            if port is None:
                port = int(self.client.config_get("fastlane-port").get("fastlane-port", "0"))
            if port <= 0:
                raise E.ClientError("the server has no fast lane")
            kw = self.client.redis.connection_pool.connection_kwargs
            lane = FastLane(kw.get("host", "127.0.0.1"), port, password=kw.get("password"),
                            username=kw.get("username"), timeout=kw.get("socket_timeout") or 60.0)
            if not lane.ping():
                lane.close()
                raise E.ClientError("fast lane PING failed")
        except (E.PionError, OSError, ValueError):
            self._disable_lane()
            return None
        self._lane = lane
        return lane

    def _lane_call(self, op: int, body: bytes) -> bytearray | None:
        """The lane's reply body; None when the lane is unusable (then the caller uses RESP).

        ColdMissError and the server's command errors propagate; a transport failure
        disables the lane for this object.
        """
        lane = self._get_lane()
        if lane is None:
            return None
        try:
            out = lane.call(op, body)
        except E.PionConnectionError:
            self._disable_lane()
            return None
        self.lane_queries += 1
        return out

    def _cold_retry(self, namespace: str, layer: int, h_kv: int, d: int, fn: Callable[[], T]) -> T:
        """Runs ``fn``; on COLDMISS rehydrates once (:meth:`_rehydrate`) and runs it again.

        A second COLDMISS propagates as :class:`ColdMissError`.
        """
        t0 = time.perf_counter()
        try:
            try:
                return fn()
            except E.ColdMissError:
                self.cold_rehydrates_observed += 1
                self._rehydrate(namespace, layer, h_kv, d)
                return fn()
        finally:
            self.attend_query_ms_total += (time.perf_counter() - t0) * 1000.0
            self.attend_query_calls += 1

    def _rehydrate(self, namespace: str, layer: int, h_kv: int, d: int) -> None:
        """``KV.PREFIX.WARM <ns> <H_kv> <D> <ns>_attn``. The server installs the layers in
        their last-access order and the COLDMISS that led here stamped ``layer``, so the
        queried layer is the most recent slot afterwards even when ``attend-max-slots`` /
        ``attend-maxmemory`` hold fewer slots than the namespace has layers. Nothing is
        rebuilt when the V-store lacks the namespace (the retry then raises ColdMissError)."""
        self.warm(namespace, h_kv, d)

    # ------------------------------------------------------------------ slots

    def attend_store_layer(self, namespace: str, layer: int, k: Tensor, v: Tensor) -> None:
        """``ATTEND.PREFIX.STORE <ns>_attn layer H N D K V``: one layer ``[H, N, D]`` as a slot.

        float16 arrays go as ``FMT F16`` (half the bytes); anything else as float32.
        The server stores the slot in its ``attend-precision``.
        """
        r = self.client.execute(*self._attend_store_args(namespace, layer, k, v))
        if r not in (b"OK", "OK", True):
            raise E.UnexpectedReplyError(f"ATTEND.PREFIX.STORE: expected +OK, got {r!r:.80}")

    def _attend_store_args(self, namespace: str, layer: int, k: Tensor, v: Tensor) -> list[Any]:
        ka = k.detach().cpu().numpy() if _is_torch(k) else np.asarray(k)
        va = v.detach().cpu().numpy() if _is_torch(v) else np.asarray(v)
        if ka.ndim != 3 or ka.shape != va.shape:
            raise ValueError(f"K {ka.shape} and V {va.shape} must be equal 3-D shapes [H, N, D]")
        f16 = ka.dtype == np.float16 and va.dtype == np.float16
        dt = "<f2" if f16 else "<f4"
        kb = np.ascontiguousarray(ka, dtype=dt)
        vb = np.ascontiguousarray(va, dtype=dt)
        h, n, d = kb.shape
        args: list[Any] = ["ATTEND.PREFIX.STORE", self.attn_sid(namespace), str(layer), str(h), str(n), str(d),
                           kb.data.cast("B"), vb.data.cast("B")]
        if f16:
            args += ["FMT", "F16"]
        return args

    def attend_lookup(self, namespace: str, layer: int = 0) -> str:
        """``ATTEND.PREFIX.LOOKUP <ns>_attn layer``: ``"HIT"`` (warm), ``"COLD"`` or ``"MISS"``."""
        r = self.client.execute("ATTEND.PREFIX.LOOKUP", self.attn_sid(namespace), str(layer))
        s = r.decode() if isinstance(r, (bytes, bytearray)) else str(r)
        if s not in ("HIT", "COLD", "MISS"):
            raise E.UnexpectedReplyError(f"ATTEND.PREFIX.LOOKUP: unexpected reply {s!r}")
        return s

    def attend_drop(self, namespace: str, layer: int | None = None) -> int:
        """``ATTEND.PREFIX.DROP <ns>_attn [layer]``: removes the slots (warm and cold); returns how many."""
        args = ["ATTEND.PREFIX.DROP", self.attn_sid(namespace)] + ([] if layer is None else [str(layer)])
        return int(self.client.execute(*args))

    def warm(self, namespace: str, n_kv_heads: int | None = None, head_dim: int | None = None) -> int:
        """``KV.PREFIX.WARM <ns> <H> <D> <ns>_attn``: rebuilds every layer's slot from the V-store.

        Returns the number of layers stored (0 for an unknown namespace). Cheap
        compared with a prefill: the server dequantizes the stored rows.
        """
        h = n_kv_heads or self.n_kv_heads
        d = head_dim or self.head_dim
        if not h or not d:
            raise ValueError("warm needs n_kv_heads and head_dim (or a known layout)")
        r = self.client.execute("KV.PREFIX.WARM", namespace, str(h), str(d), self.attn_sid(namespace))
        s = r.decode() if isinstance(r, (bytes, bytearray)) else str(r)
        try:
            return int(s.split()[0])
        except (ValueError, IndexError):
            raise E.UnexpectedReplyError(f"KV.PREFIX.WARM: unexpected reply {s!r}") from None

    # ------------------------------------------------------------------ queries

    def attend_query(self, namespace: str, layer: int, q: Tensor, top_k: int = 0, with_lse: bool = False,
                     fa_window: int | None = None) -> Tensor | tuple[Tensor, Tensor]:
        """Dense attention of ``q`` over the layer's cached prefix (every row at position N).

        Args:
            q: ``[H, D]`` or ``[H, M, D]``; H must be the slot's head count.
            top_k: ignored by the server (dense); sent as 1 when <= 0.
            with_lse: also return the log-sum-exp ``[H, M]`` (needs M > 1: ValueError otherwise).
            fa_window: attend only the last W prefix positions (0 = full).

        Returns:
            ``[H, D]`` (or ``[H, M, D]``) float32, plus the LSE with ``with_lse``.
        """
        tq = _is_torch(q)
        qa = _f32(q, "Q", (2, 3))
        single = qa.ndim == 2
        q3 = qa[:, None, :] if single else qa
        h, m, d = q3.shape
        if with_lse and m == 1:
            raise ValueError("with_lse needs M > 1 query rows (the server sends LSE only then)")
        sid = self.attn_sid(namespace)

        def once() -> np.ndarray:
            body = self._lane_call(OP_QUERY, query_body(sid.encode(), layer, q3, fa_window))
            if body is None:
                body = self.client.execute("ATTEND.PREFIX.QUERY", sid, str(layer), str(h), str(d),
                                           str(top_k if top_k > 0 else 1), _mv(q3),
                                           *_window_args(fa_window))
            return _blob(body, h * m * d + (h * m if m > 1 else 0), "ATTEND.PREFIX.QUERY")

        a = self._cold_retry(namespace, layer, h, d, once)
        out = a[:h * m * d].reshape(h, d) if single else a[:h * m * d].reshape(h, m, d)
        if with_lse:
            return _out(out, tq), _out(a[h * m * d:].reshape(h, m), tq)
        return _out(out, tq)

    def attend_query_fused(self, namespace: str, layer: int, q: Tensor, k_suf: Tensor, v_suf: Tensor,
                           head_map: Any = None, fa_window: int | None = None,
                           with_lse: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Attention over the cached prefix plus a caller suffix (``ATTEND.PREFIX.QUERY_FUSED``).

        The M query rows are the last M suffix positions (causal within the suffix);
        with an empty suffix every row sits at position N.

        Args:
            q: ``[H_q, D]`` or ``[H_q, M, D]``.
            k_suf, v_suf: ``[H_kv, S, D]`` (S >= M, or S = 0), the suffix's K (after RoPE) and V.
            head_map: ``[H_q]`` query head -> KV head (default ``hq // (H_q / H_kv)``).
            fa_window: sliding window W (0 = full).
            with_lse: also return the LSE ``[H_q, M]`` (RESP only: the lane carries outputs).

        Returns:
            ``[H_q, D]`` (or ``[H_q, M, D]``) float32, plus the LSE with ``with_lse``.
        """
        tq = _is_torch(q)
        qa = _f32(q, "Q", (2, 3))
        single = qa.ndim == 2
        q3 = qa[:, None, :] if single else qa
        ks = _f32(k_suf, "K_suf", (3,))
        vs = _f32(v_suf, "V_suf", (3,))
        if ks.shape != vs.shape:
            raise ValueError(f"K_suf {ks.shape} and V_suf {vs.shape} must have equal shapes")
        h_q, m, d = q3.shape
        h_kv, s = ks.shape[0], ks.shape[1]
        if ks.shape[2] != d:
            raise ValueError(f"K_suf head_dim {ks.shape[2]} != Q head_dim {d}")
        if s and m > s:
            raise ValueError(f"Q has {m} rows but the suffix only {s} positions")
        hm = _head_map(head_map, h_q, h_kv)
        sid = self.attn_sid(namespace)
        n_out = h_q * m * d

        def once() -> np.ndarray:
            body = None
            if not with_lse:
                body = self._lane_call(OP_QUERY_FUSED, query_fused_body(sid.encode(), layer, q3, ks, vs, hm, fa_window))
            if body is None:
                extra = _window_args(fa_window)
                if with_lse:
                    extra = (extra or ["-1"]) + ["LSE"]
                body = self.client.execute("ATTEND.PREFIX.QUERY_FUSED", sid, str(layer), str(h_q), str(d), str(s),
                                           str(h_kv), _mv(q3), _mv(ks),
                                           _mv(vs), _mv(hm), *extra)
            return _blob(body, n_out + (h_q * m if with_lse else 0), "ATTEND.PREFIX.QUERY_FUSED")

        a = self._cold_retry(namespace, layer, h_kv, d, once)
        out = a[:n_out].reshape(h_q, d) if single else a[:n_out].reshape(h_q, m, d)
        if with_lse:
            lse = a[n_out:].reshape(h_q) if single else a[n_out:].reshape(h_q, m)
            return _out(out, tq), _out(lse, tq)
        return _out(out, tq)

    def attend_query_sparse(self, namespace: str, layer: int, q: Tensor, indices: Any,
                            fa_window: int | None = None) -> Tensor:
        """Attention over explicit prefix positions per head (``ATTEND.PREFIX.QUERY_SPARSE``).

        Args:
            q: ``[H, D]`` (H = the slot's heads).
            indices: per head a sequence of prefix positions (a list of H sequences, or
                an ``[H, K]`` integer array); duplicates count once.
        """
        tq = _is_torch(q)
        qa = _f32(q, "Q", (2,))
        h, d = qa.shape
        if _is_torch(indices):
            indices = indices.detach().cpu().numpy()
        rows = [np.asarray(r, dtype=np.int64).reshape(-1) for r in indices]
        if len(rows) != h:
            raise ValueError(f"indices must hold one sequence per head ({h}), got {len(rows)}")
        kmax = max(1, max(r.size for r in rows))
        idx = np.zeros((h, kmax), dtype="<i4")
        counts = np.zeros(h, dtype="<u4")
        for i, r in enumerate(rows):
            idx[i, :r.size] = r
            counts[i] = r.size
        sid = self.attn_sid(namespace)

        def once() -> np.ndarray:
            r = self.client.execute("ATTEND.PREFIX.QUERY_SPARSE", sid, str(layer), str(h), str(d), str(kmax),
                                    _mv(qa), _mv(idx),
                                    _mv(counts), *_window_args(fa_window))
            return _blob(r, h * d, "ATTEND.PREFIX.QUERY_SPARSE")

        return _out(self._cold_retry(namespace, layer, h, d, once).reshape(h, d), tq)

    def _sparse_auto(self, namespace: str, layer: int, q: Tensor, block_size: int, k_top: int,
                     n_kv_heads: int | None, head_map: Any, fa_window: int | None, selector: str,
                     suffix: tuple[Tensor, Tensor] | None) -> Tensor:
        if selector not in SELECTORS:
            raise ValueError(f"selector must be one of {', '.join(SELECTORS)}")
        tq = _is_torch(q)
        qa = _f32(q, "Q", (2,))
        h_q, d = qa.shape
        h_kv = n_kv_heads or self.n_kv_heads or h_q
        hm = np.zeros(0, np.uint8) if (head_map is None and h_kv == h_q) else _head_map(head_map, h_q, h_kv)
        tail: list[Any] = [str(int(fa_window)) if fa_window is not None else "-1",
                           str(SELECTORS[selector])]
        if fa_window is None and selector == "block_mean":
            tail = []
        sid = self.attn_sid(namespace)
        if suffix is None:
            name = "ATTEND.PREFIX.QUERY_SPARSE_AUTO"
            args = [name, sid, str(layer), str(h_q), str(d), str(block_size), str(k_top), str(h_kv),
                    _mv(qa), _mv(hm)] + tail
        else:
            ks = _f32(suffix[0], "K_suf", (3,))
            vs = _f32(suffix[1], "V_suf", (3,))
            if ks.shape != vs.shape or ks.shape[0] != h_kv or ks.shape[2] != d:
                raise ValueError(f"K_suf/V_suf must be [H_kv={h_kv}, S, D={d}], got {ks.shape} / {vs.shape}")
            name = "ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED"
            args = [name, sid, str(layer), str(h_q), str(d), str(block_size), str(k_top), str(h_kv),
                    str(ks.shape[1]), _mv(qa), _mv(ks), _mv(vs),
                    _mv(hm)] + tail

        def once() -> np.ndarray:
            return _blob(self.client.execute(*args), h_q * d, name)

        return _out(self._cold_retry(namespace, layer, h_kv, d, once).reshape(h_q, d), tq)

    def attend_query_sparse_auto(self, namespace: str, layer: int, q: Tensor, block_size: int, k_top: int,
                                 n_kv_heads: int | None = None, head_map: Any = None,
                                 fa_window: int | None = None, selector: str = "block_mean") -> Tensor:
        """Block-sparse attention (``ATTEND.PREFIX.QUERY_SPARSE_AUTO``): the ``k_top`` best blocks of
        ``block_size`` tokens, one mask for all heads; dense when ``k_top * block_size >= N``.

        Args:
            q: ``[H_q, D]``.
            n_kv_heads: the slot's H_kv (default: the cache's layout, else H_q).
            selector: ``"block_mean"`` (0) or ``"quest"`` (1).
        """
        return self._sparse_auto(namespace, layer, q, block_size, k_top, n_kv_heads, head_map, fa_window,
                                 selector, None)

    def attend_query_sparse_auto_fused(self, namespace: str, layer: int, q: Tensor, k_suf: Tensor, v_suf: Tensor,
                                       block_size: int, k_top: int, head_map: Any = None,
                                       fa_window: int | None = None, selector: str = "block_mean") -> Tensor:
        """Sparse-auto prefix plus a dense causal suffix ``[H_kv, S, D]``; the query row ``[H_q, D]``
        is the last suffix position (``ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED``)."""
        h_kv = (k_suf.shape[0]) if hasattr(k_suf, "shape") else None
        return self._sparse_auto(namespace, layer, q, block_size, k_top, h_kv, head_map, fa_window, selector,
                                 (k_suf, v_suf))
