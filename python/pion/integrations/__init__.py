"""Adapters that plug pion into inference engines as their shared KV tier.

Each submodule serves one engine and imports nothing of that engine until it is used
(the engine's base class is looked up when the adapter class is first built), so
``import pion.integrations.<engine>`` works on a machine without the engine:

* :mod:`pion.integrations.vllm`: ``PionTier``, a secondary tier of vLLM's tiered
  KV offloading.
* :mod:`pion.integrations.sglang`: ``PionHiCacheStorage``, SGLang's HiCache L3 storage.
* :mod:`pion.integrations.lmcache`: ``PionNativeConnector`` (LMCache's multiprocess
  server) and ``PionConnectorAdapter`` (its remote storage plugins).

What they share (URLs, pipelined block commands, eviction news) is in
:mod:`pion.integrations._conn`; the engines' block hashes are in :mod:`pion.hashing`.
"""
