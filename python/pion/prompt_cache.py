"""PionPromptCache: store a prefilled prompt prefix once, restore it from any process.

The API is that of the Apple-hardware client, minus what only applies there
(MLX caches, the in-process and binary lanes, ``V.EXPORT``), so its callers run
unchanged:

* its constructor arguments that apply here: ``model``, ``vquant``,
  ``host``, ``port``, ``stage2`` (now ``server_attention``), ``admission_threshold``. Stage 2 (attention
  over the cached prefix on the server: ``attend_*``, ``warm``, ``-COLDMISS``
  rehydration, the binary fast lane) is in :mod:`pion.attend`; the decode helper
  for the reference model in :mod:`pion.server_decode`. ``boundary_protect`` (needs ``V.CREATE ... SCHEMA``),
  ``prefill_chunk_size`` and ``softmax_bitexact`` (MLX prefill details) have no
  meaning for a caller-supplied ``prefill_fn`` and are not offered;
* ``make_namespace``, ``register``, ``lookup``, ``store`` / ``fetch`` of whole
  prefixes, ``get_or_prefill``, ``drop``, ``save``, ``commit``, ``info``,
  ``server_stats``, ``blocks`` / ``membership`` with the chained block-hash
  helper (:mod:`pion.blocks`), and client-side ``stats()``.

Array layout: a prefix is two numpy arrays ``K`` and ``V`` shaped
``[layers, kv_heads, tokens, head_dim]``. On the wire each layer is one
``V.STOREBATCH`` of rows ``[tokens, kv_heads * head_dim]`` (head-major rows) in
session ``<ns>_pk`` (K) / ``<ns>_pv`` (V). Torch ``past_key_values`` convert with
:mod:`pion.torch_adapters`.
"""
from __future__ import annotations

import hashlib
import time
import warnings
from typing import Any, Callable, Sequence, Tuple, Union

import numpy as np

from . import errors as E
from .attend import AttendMixin
from .blocks import DEFAULT_BLOCK_SIZE, block_hashes
from .client import VQUANTS, BlockTable, PionClient

__all__ = ["PionPromptCache", "PrefixKV"]

PrefixKV = Tuple[np.ndarray, np.ndarray]
TokenIds = Union[Sequence[int], np.ndarray, Any]

# One V.STOREBATCH carries at most this many payload bytes (the server accepts up
# to 1 GiB per bulk; smaller commands keep the pipeline streaming).
_MAX_BATCH_BYTES = 32 << 20


def _token_list(prefix_ids: TokenIds) -> np.ndarray:
    if hasattr(prefix_ids, "detach"):  # torch tensor
        prefix_ids = prefix_ids.detach().cpu().numpy()
    a = np.asarray(prefix_ids).reshape(-1)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError("prefix_ids must be integer token ids")
    return a.astype(np.int64, copy=False)


def _layout_of(model: Any) -> tuple[int | None, int | None, int | None]:
    """(n_layers, n_kv_heads, head_dim) from a model object or its ``config`` (HF names too)."""
    for src in (model, getattr(model, "config", None), getattr(model, "args", None)):
        if src is None:
            continue
        nl = getattr(src, "n_layers", None) or getattr(src, "num_hidden_layers", None)
        nh = getattr(src, "n_kv_heads", None) or getattr(src, "num_key_value_heads", None)
        hd = getattr(src, "head_dim", None)
        if hd is None:
            hidden = getattr(src, "hidden_size", None)
            heads = getattr(src, "num_attention_heads", None)
            if hidden and heads:
                hd = hidden // heads
        if nl and nh and hd:
            return int(nl), int(nh), int(hd)
    return None, None, None


class PionPromptCache(AttendMixin):
    """Prompt-prefix K/V cache on a pion-server (``--kvcache``).

    Args:
        model: optional model whose layout (``n_layers``, ``n_kv_heads``,
            ``head_dim``, directly or on ``model.config``; Hugging Face names
            ``num_hidden_layers`` / ``num_key_value_heads`` also work) and
            ``prefill_kv(ids)`` / ``model_id`` are used by default.
        vquant: storage format of new namespaces: ``fp16`` (default, lossless
            for fp16 models), ``fp8``, ``int8``, ``mlx4g32``, ``turbo4``,
            ``turbo3``, ``turbo2``.
        host, port: the server (default ``127.0.0.1:1974``).
        server_attention: also keep every stored prefix as server-side attention
            slots (``<ns>_attn``, one per layer) and require them in :meth:`lookup`
            (rebuilt with ``KV.PREFIX.WARM`` when the V-store hits but the slot
            is cold or missing). The ``attend_*`` methods work either way.
            ``stage2=`` is its deprecated former name (accepted for one release,
            with a ``DeprecationWarning``).
        admission_threshold: a namespace is stored only once it has missed this
            many times in this object (1 = store on the first miss); misses below
            the threshold return the local prefill and count ``admission_skips``.
        n_layers, n_kv_heads, head_dim: layout, when there is no ``model`` (also
            learnt from the first ``store``).
        block_size: tokens per block of the block-hash table sent with REGISTER
            when prefix ids are known (default 16; None = no table).
        block_seed: initial chain value of the block hashes (:mod:`pion.blocks`).
        fetch_fmt: ``V.FETCH`` format: None = ``NATIVE`` for fp16 namespaces
            (stored bytes as is, returned as float16) and ``F32`` otherwise;
            ``"F16"`` halves the bytes of dequantized formats.
        client: an existing :class:`PionClient` (else one is made from host/port
            and ``client_kwargs``).
        lane_port: the binary fast lane's port (default: ``CONFIG GET
            fastlane-port`` on first use; 0 = never use the lane).
        cluster: ``(host, port)`` start-up nodes of a Redis Cluster of pion.so nodes (or
            of ``pion-server --cluster-emulated yes``): the client is then
            :meth:`PionClient.cluster` (hash-tagged namespaces, docs/cluster.md).
        **client_kwargs: passed to :class:`PionClient` (password, socket_timeout, ...).

    The object is not thread-safe (its counters are plain ints); the underlying
    connection pool is.
    """

    def __init__(
        self,
        model: Any = None,
        vquant: str = "fp16",
        host: str = "127.0.0.1",
        port: int = 1974,
        server_attention: bool = False,
        admission_threshold: int = 1,
        *,
        stage2: bool | None = None,
        n_layers: int | None = None,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        block_size: int | None = DEFAULT_BLOCK_SIZE,
        block_seed: int = 0,
        fetch_fmt: str | None = None,
        client: PionClient | None = None,
        lane_port: int | None = None,
        cluster: Sequence[Any] | None = None,
        **client_kwargs: Any,
    ) -> None:
        vq = vquant.lower()
        if vq not in VQUANTS:
            raise ValueError(f"vquant must be one of {', '.join(VQUANTS)}")
        if admission_threshold < 1:
            raise ValueError("admission_threshold must be >= 1")
        if fetch_fmt is not None and fetch_fmt.upper() not in ("NATIVE", "F16", "F32"):
            raise ValueError("fetch_fmt must be NATIVE, F16 or F32")
        if stage2 is not None:
            warnings.warn("PionPromptCache(stage2=...) is deprecated; use server_attention=...",
                          DeprecationWarning, stacklevel=2)
            server_attention = stage2
        self.model = model
        self.server_attention = bool(server_attention)
        self.vquant = vq
        self.admission_threshold = int(admission_threshold)
        self.block_size = block_size
        self.block_seed = block_seed
        self.fetch_fmt = fetch_fmt.upper() if fetch_fmt else None
        ml, mh, md = _layout_of(model) if model is not None else (None, None, None)
        self.n_layers = n_layers or ml
        self.n_kv_heads = n_kv_heads or mh
        self.head_dim = head_dim or md
        if client is None and cluster is not None:
            client = PionClient.cluster(cluster, **client_kwargs)
            if lane_port is None:
                lane_port = 0  # the fast lane is pion-server's, not a cluster's
        self.client = client if client is not None else PionClient(host, port, **client_kwargs)
        # client-side statistics (stats())
        self.hits = 0
        self.misses = 0
        self.admission_skips = 0
        self.fetch_ms_total = 0.0
        self.store_ms_total = 0.0
        self.last_prefill_ms = 0.0
        self.bytes_stored = 0
        self.bytes_fetched = 0
        self.last_hit: bool | None = None
        self._miss_counts: dict[str, int] = {}
        self._init_attend(lane_port)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def make_namespace(*parts: Any) -> str:
        """``sha256("|".join(parts)).hexdigest()[:32]``: a namespace key from its parts.

        Use parts that pin everything the K/V depends on, e.g. ``app, version,
        model id, tokenizer, vquant, prompt id``; a collision of meaning (same key,
        different tokens) is silent corruption, not an error.
        """
        return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:32]

    def namespace_for(self, prefix_ids: TokenIds, *parts: Any) -> str:
        """A namespace naming exactly these tokens: ``make_namespace(*parts, vquant, sha256(tokens))``.

        Without ``parts`` the model's ``model_id`` is used (ValueError if it has none).
        """
        if not parts:
            mid = getattr(self.model, "model_id", None)
            if mid is None:
                raise ValueError("namespace_for needs parts (or a model with model_id)")
            parts = (mid,)
        ids = _token_list(prefix_ids).astype("<u4").tobytes()
        return self.make_namespace(*parts, self.vquant, "tokens:" + hashlib.sha256(ids).hexdigest())

    def block_hashes(self, prefix_ids: TokenIds) -> np.ndarray:
        """Chained XXH3-64 block hashes of ``prefix_ids`` with this cache's block size and seed."""
        return block_hashes(_token_list(prefix_ids), self.block_size or DEFAULT_BLOCK_SIZE, self.block_seed)

    @property
    def kv_dim(self) -> int | None:
        """``n_kv_heads * head_dim`` when the layout is known."""
        if self.n_kv_heads and self.head_dim:
            return self.n_kv_heads * self.head_dim
        return None

    @staticmethod
    def _sids(namespace: str) -> tuple[str, str]:
        return namespace + "_pk", namespace + "_pv"

    def _register_args(self, namespace: str, kv_dim: int, prefix_ids: TokenIds | None,
                       prefill_ms: float | None, parent: str | None = None) -> list[Any]:
        hashes = None
        if prefix_ids is not None and self.block_size:
            hashes = self.block_hashes(prefix_ids)
        ms = None if not prefill_ms or prefill_ms <= 0 else int(round(prefill_ms))
        return PionClient._register_args(namespace, kv_dim, self.vquant,
                                         self.block_size if hashes is not None else None, hashes, ms,
                                         parent)

    # ------------------------------------------------------------------ commands

    def register(self, namespace: str, kv_dim: int | None = None, *,
                 prefix_ids: TokenIds | None = None, prefill_ms: float | None = None,
                 parent: str | None = None) -> None:
        """KV.PREFIX.REGISTER: creates ``<ns>_pk`` / ``<ns>_pv`` in this cache's vquant.

        Args:
            kv_dim: values per row (default: the known layout's ``n_kv_heads * head_dim``).
            prefix_ids: when given (and ``block_size`` is set), their block hashes
                are registered with ``BLOCKS``.
            prefill_ms: measured cold prefill, sent as ``PREFILL_MS`` (rounded; omitted when 0).
            parent: the namespace this one continues (``PARENT``; see :class:`pion.PrefixChain`).
        """
        kv_dim = kv_dim or self.kv_dim
        if not kv_dim:
            raise ValueError("kv_dim unknown: pass it, a model, or n_kv_heads/head_dim")
        self.client.execute(*self._register_args(namespace, kv_dim, prefix_ids, prefill_ms, parent))

    def lookup(self, namespace: str, *, tokens: int | None = None,
               prefill_ms: float | None = None) -> bool:
        """KV.PREFIX.LOOKUP: True if both sides of the namespace exist (a receipt hit).

        With ``server_attention`` the attention slot must be usable too: ``ATTEND.PREFIX.LOOKUP
        <ns>_attn 0`` is ``+HIT``, or (``+COLD`` / ``+MISS``, e.g. after a demotion
        or a server restart) ``KV.PREFIX.WARM`` rebuilds the slots from the V-store
        (counted in ``warm_rebuilds``; no prefill). False if that stores no layer.
        """
        ms = None if prefill_ms is None else int(round(prefill_ms))
        if not self.client.kv_prefix_lookup(namespace, tokens=tokens, prefill_ms=ms):
            return False
        if not self.server_attention:
            return True
        if self.attend_lookup(namespace, 0) == "HIT":
            return True
        if not self.n_kv_heads or not self.head_dim:
            return False
        if self.warm(namespace) < 1:
            return False
        self.warm_rebuilds += 1
        return True

    def store(self, namespace: str, k: Any, v: np.ndarray | None = None, *,
              register: bool = True, prefix_ids: TokenIds | None = None,
              prefill_ms: float | None = None, parent: str | None = None) -> int:
        """Stores a whole prefix in one pipelined round trip; returns the payload bytes sent.

        Args:
            k, v: arrays ``[layers, kv_heads, tokens, head_dim]``; or torch
                ``past_key_values`` as ``k`` with ``v=None``.
            register: send KV.PREFIX.REGISTER first (same pipeline).
            prefix_ids, prefill_ms, parent: passed to the REGISTER (BLOCKS table,
                PREFILL_MS, PARENT).

        With ``server_attention`` every layer is also sent as ``ATTEND.PREFIX.STORE
        <ns>_attn <layer> H N D K V`` in the same pipeline, with the values the
        V-store keeps for an fp16 namespace (float16, ``FMT F16``) so a slot
        rebuilt later by ``KV.PREFIX.WARM`` holds exactly the same numbers;
        float32 for the other formats.

        Upload format: float16 rows go as ``FMT F16``. For an fp16 namespace,
        float32 rows are rounded to float16 here (IEEE round-to-nearest-even,
        exactly what the server would store) and sent as F16, halving the bytes;
        other namespaces get float32 rows (the server quantizes them).
        """
        if v is None:
            from .torch_adapters import from_past_key_values

            k, v = from_past_key_values(k)
        k = np.asarray(k)
        v = np.asarray(v)
        if k.ndim != 4 or k.shape != v.shape:
            raise ValueError(f"K {k.shape} and V {v.shape} must be equal 4-D shapes [L, H, N, D]")
        n_layers, heads, n_tok, hd = k.shape
        if n_tok < 1:
            raise ValueError("the prefix holds no tokens")
        self.n_layers, self.n_kv_heads, self.head_dim = self.n_layers or n_layers, self.n_kv_heads or heads, \
            self.head_dim or hd
        kv_dim = heads * hd
        f16 = k.dtype == np.float16 and v.dtype == np.float16
        wire = np.float16 if (f16 or self.vquant == "fp16") else np.float32
        t0 = time.perf_counter()
        sid_k, sid_v = self._sids(namespace)
        cmds: list[list[Any]] = []
        if register:
            cmds.append(self._register_args(namespace, kv_dim, prefix_ids, prefill_ms, parent))
        row_bytes = kv_dim * np.dtype(wire).itemsize
        step = max(1, _MAX_BATCH_BYTES // row_bytes)
        keep = []  # the row arrays must outlive the pipeline (memoryviews point into them)
        sent = 0
        for sid, arr in ((sid_k, k), (sid_v, v)):
            # [L, H, N, D] -> [L, N, H, D] contiguous: one copy, head-major rows.
            rows_all = np.ascontiguousarray(arr.transpose(0, 2, 1, 3), dtype=wire).reshape(n_layers, n_tok, kv_dim)
            keep.append(rows_all)
            for layer in range(n_layers):
                for s in range(0, n_tok, step):
                    rows = rows_all[layer, s:s + step]
                    cmds.append(PionClient._storebatch_args(sid, layer, s, rows))
                    sent += rows.nbytes
        if self.server_attention:
            wire_attn = np.float16 if wire == np.float16 else np.float32
            ka = np.ascontiguousarray(k, dtype=wire_attn)
            va = np.ascontiguousarray(v, dtype=wire_attn)
            keep += [ka, va]
            for layer in range(n_layers):
                cmds.append(self._attend_store_args(namespace, layer, ka[layer], va[layer]))
                sent += ka[layer].nbytes + va[layer].nbytes
        replies = self.client.pipeline(cmds)
        self.client.raise_first(replies)
        self.store_ms_total += (time.perf_counter() - t0) * 1000.0
        self.bytes_stored += sent
        return sent

    def _fetch_fmt(self) -> str:
        if self.fetch_fmt:
            return self.fetch_fmt
        return "NATIVE" if self.vquant == "fp16" else "F32"

    def fetch(self, namespace: str, n_tokens: int | None = None, *,
              n_layers: int | None = None, fmt: str | None = None) -> PrefixKV:
        """Fetches a whole prefix: ``(K, V)`` arrays ``[layers, kv_heads, tokens, head_dim]``.

        K and V are fetched with ``V.FETCH <sid> BATCH 0 n n_layers FMT <fmt>``, both
        in one pipelined round trip. float16 for NATIVE (fp16 namespace) / F16,
        float32 otherwise.

        Args:
            n_tokens: prefix length (default: read from ``V.INFO <ns>_pk``).
            n_layers: layers (default: the known layout, else V.INFO).
            fmt: overrides the cache's fetch format.

        Raises:
            IncompletePrefixError: a layer of either side has no stored row
                (e.g. another process is still storing the prefix).
            SessionNotFoundError: the namespace is not registered.
        """
        fmt = (fmt or self._fetch_fmt()).upper()
        heads, hd = self.n_kv_heads, self.head_dim
        if not heads or not hd:
            raise ValueError("layout unknown: pass n_kv_heads/head_dim or a model")
        kv_dim = heads * hd
        sid_k, sid_v = self._sids(namespace)
        t0 = time.perf_counter()
        n_layers = n_layers or self.n_layers
        if n_tokens is None or n_layers is None:
            vi = self.client.v_info(sid_k)
            n_layers = n_layers or int(vi["num_layers"])
            if n_tokens is None:
                n_tokens = int(vi.get("layer_0_tokens", 0))
        if n_tokens < 1:
            raise E.IncompletePrefixError(f"{namespace}: no stored tokens")
        cmds = [["V.FETCH", sid, "BATCH", "0", str(n_tokens), str(n_layers), "FMT", fmt] for sid in (sid_k, sid_v)]
        replies = self.client.fetch_pipeline(cmds)
        self.client.raise_first(replies)
        out = []
        nbytes = 0
        for side, r in zip("KV", replies):
            if not isinstance(r, list):
                raise E.UnexpectedReplyError(f"V.FETCH BATCH: expected an array, got {type(r).__name__}")
            if len(r) < n_layers:
                raise E.IncompletePrefixError(f"{namespace}: {side} side has {len(r)} of {n_layers} layers")
            arr = None
            for layer in range(n_layers):
                rows = PionClient.decode_rows(r[layer], n_tokens, kv_dim, fmt)
                if rows is None:
                    raise E.IncompletePrefixError(f"{namespace}: {side} layer {layer} has no stored rows")
                nbytes += rows.nbytes
                if arr is None:
                    arr = np.empty((n_layers, heads, n_tokens, hd), dtype=rows.dtype)
                arr[layer] = rows.reshape(n_tokens, heads, hd).transpose(1, 0, 2)
            if arr is None:
                raise E.IncompletePrefixError(f"{namespace}: no layers")
            out.append(arr)
        self.fetch_ms_total += (time.perf_counter() - t0) * 1000.0
        self.bytes_fetched += nbytes
        self.n_layers = self.n_layers or n_layers
        return out[0], out[1]

    def get_or_prefill(
        self,
        prefix_ids: TokenIds,
        namespace: str | None = None,
        prefill_fn: Callable[[Any], Any] | None = None,
        *,
        output: str = "numpy",
        torch_dtype: Any = None,
    ) -> Any:
        """Returns the prefix's K/V: fetched on a hit, else prefilled (timed) and stored.

        1. ``lookup(namespace)``; on a hit fetch the prefix (``hits += 1``). A hit
           whose rows are not all there yet is treated as a miss.
        2. On a miss (``misses += 1``) call ``prefill_fn(prefix_ids)`` and time it
           (``last_prefill_ms``; the function must return only when the K/V are
           computed: synchronise the device inside it).
        3. Admission: unless this namespace has now missed ``admission_threshold``
           times in this object, return without storing (``admission_skips += 1``).
        4. Store: REGISTER with ``PREFILL_MS <last_prefill_ms>`` (and the block
           table of ``prefix_ids``) plus every layer's rows, one pipeline. Every
           later hit on the namespace is credited exactly that time in PION.STATS.

        Args:
            prefix_ids: the prefix's token ids.
            namespace: the key (default: :meth:`namespace_for` ``(prefix_ids)``).
            prefill_fn: ``ids -> past_key_values`` (torch) or ``(K, V)`` numpy arrays
                ``[L, H, N, D]``; default ``model.prefill_kv``.
            output: ``"numpy"`` -> ``(K, V)`` arrays; ``"torch"`` -> ``past_key_values``
                (a miss returns ``prefill_fn``'s own tensors when they are torch).
            torch_dtype: dtype of restored tensors for ``output="torch"`` (default:
                float16 for fp16 fetches, else float32).

        ``last_hit`` tells which path ran.
        """
        if output not in ("numpy", "torch"):
            raise ValueError("output must be 'numpy' or 'torch'")
        ids = _token_list(prefix_ids)
        if namespace is None:
            namespace = self.namespace_for(ids)
        if self.lookup(namespace):
            try:
                k, v = self.fetch(namespace, int(ids.size))
            except E.IncompletePrefixError:
                pass
            else:
                self.hits += 1
                self.last_hit = True
                if output == "torch":
                    from .torch_adapters import to_past_key_values

                    return to_past_key_values(k, v, dtype=torch_dtype)
                return k, v
        self.misses += 1
        self.last_hit = False
        if prefill_fn is None:
            prefill_fn = getattr(self.model, "prefill_kv", None)
            if prefill_fn is None:
                raise ValueError("get_or_prefill needs prefill_fn (or a model with prefill_kv)")
        t0 = time.perf_counter()
        result = prefill_fn(prefix_ids)
        self.last_prefill_ms = (time.perf_counter() - t0) * 1000.0
        is_numpy = isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0], np.ndarray)
        if is_numpy:
            k, v = result
        else:
            from .torch_adapters import from_past_key_values

            k, v = from_past_key_values(result)
        count = self._miss_counts.get(namespace, 0) + 1
        self._miss_counts[namespace] = count
        if count < self.admission_threshold:
            self.admission_skips += 1
        else:
            self.store(namespace, k, v, prefix_ids=ids, prefill_ms=self.last_prefill_ms)
        if output == "torch":
            if not is_numpy:
                return result
            from .torch_adapters import to_past_key_values

            return to_past_key_values(k, v, dtype=torch_dtype)
        return k, v

    def drop(self, *namespaces: str) -> int:
        """KV.PREFIX.DROP: frees both sides of each namespace; returns how many were held."""
        for ns in namespaces:
            self._miss_counts.pop(ns, None)
        return self.client.kv_prefix_drop(*namespaces)

    def save(self, path: str | None = None) -> None:
        """KV.PREFIX.SAVE [path]: snapshot + WAL truncation. Raises PionError on failure
        (e.g. ``PersistenceNotEnabledError`` on a server without durability)."""
        self.client.kv_prefix_save(path)

    def commit(self) -> None:
        """KV.PREFIX.COMMIT: returns once every acknowledged write is on stable storage."""
        self.client.kv_prefix_commit()

    def info(self) -> dict[str, int | float | str]:
        """KV.PREFIX.INFO parsed into a dict."""
        return self.client.kv_prefix_info()

    def server_stats(self) -> dict[str, int | float]:
        """PION.STATS (the server's value receipt) parsed into a dict."""
        return self.client.pion_stats()

    def blocks(self, namespace: str) -> BlockTable | None:
        """KV.PREFIX.BLOCKS: the registered block table, or None (+UNKNOWN)."""
        return self.client.kv_prefix_blocks(namespace)

    def membership(self, namespace: str, hashes: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """KV.PREFIX.MEMBERSHIP: bool per probe hash, or None (+UNKNOWN).

        Probe with :meth:`block_hashes` of a prompt to see how many leading
        blocks a namespace covers (``int(np.argmin(bits)) if not bits.all()``).
        """
        return self.client.kv_prefix_membership(namespace, hashes)

    def stats(self) -> dict[str, int | float]:
        """Client-side counters of this object (not the server's receipt)."""
        total = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": (self.hits / total) if total else 0.0,
            "admission_skips": self.admission_skips,
            "admission_threshold": self.admission_threshold,
            "fetch_ms_total": self.fetch_ms_total,
            "store_ms_total": self.store_ms_total,
            "last_prefill_ms": self.last_prefill_ms,
            "bytes_stored": self.bytes_stored,
            "bytes_fetched": self.bytes_fetched,
            "cold_rehydrates_observed": self.cold_rehydrates_observed,
            "attend_query_ms_total": self.attend_query_ms_total,
            "attend_query_calls": self.attend_query_calls,
            "lane_queries": self.lane_queries,
            "warm_rebuilds": self.warm_rebuilds,
        }

    def close(self) -> None:
        """Closes the connection pool (and the fast-lane connection)."""
        if self._lane is not None:
            self._lane.close()
            self._lane = None
        self.client.close()

    @property
    def stage2(self) -> bool:
        """Deprecated name of :attr:`server_attention` (kept for one release)."""
        warnings.warn("PionPromptCache.stage2 is deprecated; use server_attention",
                      DeprecationWarning, stacklevel=2)
        return self.server_attention

    @stage2.setter
    def stage2(self, value: bool) -> None:
        warnings.warn("PionPromptCache.stage2 is deprecated; use server_attention",
                      DeprecationWarning, stacklevel=2)
        self.server_attention = bool(value)

    def __enter__(self) -> "PionPromptCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
