"""The adapters suite's engine-specific part: one driver per adapter, each calling the
adapter exactly as its engine does (the engine's method names and signatures), so the time
measured is the adapter's. Everything that depends on how an adapter is built or what it
accepts is here and nowhere else (suites_adapters.py only calls the Driver methods).

A driver: `Driver(url, n, size, src)` builds the adapter (raising NotAvailable when its
module does not import), `store()` writes the n source blocks through it (not timed),
`find_and_load()` finds the prefix and loads it into the engine's buffers and returns
{'found', 'find_s', 'load_s', 'call_us': [every adapter call made while finding]},
`check()` compares the loaded bytes with the source, `close()`.

Engine drives, as the engines call the adapters:
- vLLM (SecondaryTierManager): each scheduler step looks up every key of the request
  (RETRY does not stop the scan; MISS does), then on_schedule_end(); once every key is a
  HIT, one submit_load (TransferJob, is_promotion) into primary slots 0..n-1, then
  get_finished_jobs() polled until the job is reported.
- SGLang (HiCacheStorage, interface_v1): batch_exists(keys) then batch_get_v1(keys,
  host_indices) into a page_first host pool (engine_fakes.PageFirstHostPool).
- LMCache native_plugin: submit_batch_exists(keys), wait on event_fd(), drain_completions();
  submit_batch_get(keys, memoryviews), wait, drain.
"""

import hashlib
import importlib
import select
import time
from types import SimpleNamespace

from .engine_fakes import PageFirstHostPool, install_sglang, install_vllm

WAIT_S = 30.0  # bound on any one wait for an adapter (a hang is an error, not a stall)


class NotAvailable(Exception):
    """The adapter's module is not there (or has not the class): the row says so."""


def load_class(module, name):
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise NotAvailable('%s does not import (%s)' % (module, e))
    cls = getattr(mod, name, None)
    if cls is None:
        raise NotAvailable('%s has no %s' % (module, name))
    return cls


def digests(n, tag):
    return [hashlib.sha256(b'%s:%d' % (tag.encode(), i)).digest() for i in range(n)]


# ------------------------------------------------------------------ vLLM

class VllmTier:
    name = 'vLLM PionTier (SecondaryTierManager)'

    def __init__(self, url, n, size, src):
        import numpy as np
        self.np = np
        self.base, self.tb = install_vllm()
        cls = load_class('pion.integrations.vllm', 'PionTier')
        self.n, self.size, self.src = n, size, src
        self.slots = np.zeros((n, size), dtype=np.uint8)
        self.tier = cls(offloading_spec=SimpleNamespace(), primary_kv_view=memoryview(self.slots),
                        tier_type='PionTier', url=url, key_prefix='bench-vllm')
        self.keys = [self.base.make_offload_key(d, 0) for d in digests(n, 'vllm')]
        self.job_id = 0
        self.req = 0

    def _wait_job(self, job_id):
        # vLLM's own blocking wait (as the LMCache driver blocks on its eventfd): a poll
        # loop here would take the GIL from the job thread between its socket reads.
        self.tier.drain_jobs()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for r in self.tier.get_finished_jobs():
                if r.job_id == job_id:
                    return r
            time.sleep(0.0001)
        raise TimeoutError('job %d not finished in %.0f s' % (job_id, WAIT_S))

    def store(self):
        for i in range(self.n):
            self.slots[i] = self.np.frombuffer(self.src[i], dtype=self.np.uint8)
        self.job_id += 1
        ctx = self.base.ReqContext(req_id='store')
        self.tier.submit_store(self.tb.TransferJob(
            job_id=self.job_id, keys=list(self.keys), chunk_ids=self.np.arange(self.n),
            is_promotion=False, req_context=ctx))
        r = self._wait_job(self.job_id)
        if not r.success:
            raise RuntimeError('store job failed')
        self.slots[:] = 0

    def find_and_load(self):
        LR = self.base.LookupResult
        self.req += 1
        ctx = self.base.ReqContext(req_id='bench-%d' % self.req)
        calls = []
        clock = time.perf_counter
        t0 = clock()
        self.tier.on_new_request(ctx)
        new_ids = [ctx.req_id]
        deadline = time.monotonic() + WAIT_S
        while True:
            hits = 0
            pending = False
            for k in self.keys:
                a = clock()
                r = self.tier.lookup(k, ctx)
                calls.append(clock() - a)
                if r is LR.MISS:
                    break
                if r is LR.HIT:
                    hits += 1
                else:
                    pending = True
            if not pending or time.monotonic() > deadline:
                break
            a = clock()
            self.tier.on_schedule_end(self.base.ScheduleEndContext(
                new_req_ids=new_ids, preempted_req_ids=[]))
            calls.append(clock() - a)
            new_ids = []
            time.sleep(0.0001)  # the model runs between steps
        t1 = clock()
        if hits:
            self.job_id += 1
            self.tier.submit_load(self.tb.TransferJob(
                job_id=self.job_id, keys=list(self.keys[:hits]),
                chunk_ids=self.np.arange(hits), is_promotion=True, req_context=ctx))
            r = self._wait_job(self.job_id)
            if not r.success:
                raise RuntimeError('load job failed (%r)' % (r,))
        t2 = clock()
        self.tier.on_request_finished(ctx)
        return {'found': hits, 'find_s': t1 - t0, 'load_s': t2 - t1,
                'call_us': [1e6 * c for c in calls]}

    def check(self):
        for i in range(self.n):
            if bytes(self.slots[i]) != bytes(self.src[i]):
                return 'slot %d differs from block %d' % (i, i)
        return None

    def close(self):
        self.tier.shutdown()


# ------------------------------------------------------------------ SGLang

class SglangStorage:
    name = 'SGLang PionHiCacheStorage (batch_exists + batch_get_v1)'

    def __init__(self, url, n, size, src):
        try:
            import torch
        except ImportError as e:
            raise NotAvailable('torch does not import (%s)' % e)
        self.torch = torch
        hs = install_sglang()
        cls = load_class('pion.integrations.sglang', 'PionHiCacheStorage')
        self.n, self.size, self.src = n, size, src
        # size = K + V of one page: page_size tokens x 8 layers x 8 heads x 128 x fp16.
        page_size = size // (2 * 8 * 8 * 128 * 2)
        self.pool = PageFirstHostPool(n, page_size=page_size)
        if self.pool.page_region_bytes() * 2 != size:
            raise NotAvailable('block size %d is no whole page' % size)
        cfg = hs.HiCacheStorageConfig(
            tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
            is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
            model_name='bench/model',
            extra_config={'backend_name': 'pion', 'module_path': 'pion.integrations.sglang',
                          'class_name': 'PionHiCacheStorage', 'interface_v1': 1, 'url': url,
                          'key_prefix': 'bench-sglang'})
        self.storage = cls(cfg, {})
        self.storage.register_mem_pool_host(self.pool)
        # SGLang's page keys: a sha256-hex chain.
        self.keys = [d.hex() for d in digests(n, 'sglang')]
        self.indices = torch.arange(n * page_size, dtype=torch.int64)
        self.half = size // 2

    def _fill(self, zero):
        for i in range(self.n):
            k, v = self.pool.page_regions(i)
            if zero:
                k[:] = 0
                v[:] = 0
            else:
                k[:] = memoryview(self.src[i])[:self.half]
                v[:] = memoryview(self.src[i])[self.half:]

    def store(self):
        self._fill(zero=False)
        ok = self.storage.batch_set_v1(self.keys, self.indices)
        if not all(ok):
            raise RuntimeError('batch_set_v1: %r' % (ok,))
        self._fill(zero=True)

    def find_and_load(self):
        clock = time.perf_counter
        t0 = clock()
        hits = self.storage.batch_exists(self.keys)
        t1 = clock()
        ok = []
        if hits:
            ok = self.storage.batch_get_v1(self.keys[:hits],
                                           self.indices[:hits * self.pool.page_size])
        t2 = clock()
        if not all(ok):
            raise RuntimeError('batch_get_v1: %r' % (ok,))
        return {'found': hits, 'find_s': t1 - t0, 'load_s': t2 - t1,
                'call_us': [1e6 * (t1 - t0)]}

    def check(self):
        for i in range(self.n):
            k, v = self.pool.page_regions(i)
            if bytes(k) + bytes(v) != bytes(self.src[i]):
                return 'page %d differs from block %d' % (i, i)
        return None

    def close(self):
        for attr in ('close', 'shutdown'):
            f = getattr(self.storage, attr, None)
            if callable(f):
                f()
                return


# ------------------------------------------------------------------ LMCache

class LmcacheNative:
    name = 'LMCache PionNativeConnector (native_plugin)'

    def __init__(self, url, n, size, src):
        from .suites_blocks import aligned
        cls = load_class('pion.integrations.lmcache', 'PionNativeConnector')
        self.n, self.size, self.src = n, size, src
        # adapter_params of the native_plugin config, as keyword arguments.
        self.conn = cls(url=url)
        self.fd = int(self.conn.event_fd())
        # LMCache's key string: <model>@<kv_rank:08x>@<object_group_id:x>@<chunk_hash_hex>.
        self.keys = ['bench/model@%08x@%x@%s' % (0, 0, d.hex()) for d in digests(n, 'lmcache')]
        self.dest = [aligned(size) for _ in range(n)]
        self.done = {}

    def _wait(self, fid, calls):
        clock = time.perf_counter
        deadline = time.monotonic() + WAIT_S
        while fid not in self.done:
            if time.monotonic() > deadline:
                raise TimeoutError('future %d not completed in %.0f s' % (fid, WAIT_S))
            select.select([self.fd], [], [], 0.1)
            a = clock()
            for c in self.conn.drain_completions():
                self.done[int(c[0])] = c
            calls.append(clock() - a)
        fid_, ok, err, result = self.done.pop(fid)
        if not ok:
            raise RuntimeError('future %d failed: %s' % (fid, err))
        return result

    def store(self):
        fid = self.conn.submit_batch_set(self.keys, [memoryview(s) for s in self.src])
        self._wait(int(fid), [])

    def find_and_load(self):
        clock = time.perf_counter
        calls = []
        t0 = clock()
        fid = int(self.conn.submit_batch_exists(self.keys))
        calls.append(clock() - t0)
        bits = self._wait(fid, calls)
        hits = 0
        for b in bits:
            if not b:
                break
            hits += 1
        t1 = clock()
        if hits:
            a = clock()
            fid = int(self.conn.submit_batch_get(self.keys[:hits], self.dest[:hits]))
            calls.append(clock() - a)
            got = self._wait(fid, [])
            if got is not None and not all(got[:hits]):
                raise RuntimeError('submit_batch_get: %r' % (got,))
        t2 = clock()
        return {'found': hits, 'find_s': t1 - t0, 'load_s': t2 - t1,
                'call_us': [1e6 * c for c in calls]}

    def check(self):
        for i in range(self.n):
            if self.dest[i] != self.src[i]:
                return 'buffer %d differs from block %d' % (i, i)
        return None

    def close(self):
        self.conn.close()


DRIVERS = [VllmTier, SglangStorage, LmcacheNative]
