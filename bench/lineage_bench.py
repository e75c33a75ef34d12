#!/usr/bin/python3
"""Lineage-aware eviction vs plain LRU on the same conversation trace.

20 conversations of 5 segments (root = system prompt, then one per turn), under a
--maxmemory that holds about 40% of them. The trace interleaves
  * appends: the serving process adds the next turn as a new segment (it holds its
    own copy of the past, so only the new segment is written: only the leaf is
    touched), and
  * restores: another process resumes the conversation: it restores the longest
    cached run of segments from the root, then prefills and stores the missing
    ones again (the get_or_prefill pattern), and
the same trace is replayed on two fresh servers with the same budget:
  * lineage: segments registered with PARENT, restored with LOOKUP <leaf> CHAIN;
  * plain:   segments registered alone (the server sees no chain: the plain
             V-store LRU), restored segment by segment from the root.

Reported per mode: restores, whole-chain hits (every segment cached), token reuse
(tokens restored / tokens the restores asked for), roots evicted while a descendant
was held (checked after every step) and the bytes held in orphaned segments
(unreachable from the root) at the end. Prints a Markdown table.

    /usr/bin/python3 bench/lineage_bench.py --build build/release [--steps 600] [--seed 16]
"""
import argparse
import os
import random
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pion.testing import PionServer  # noqa: E402

DIM = 64  # fp16, 128 bytes per row per side
CHAINS = 20
SEGS = 5


class Server(PionServer):
    def __init__(self, build, budget, tmp):
        super().__init__(tempfile.mkdtemp(dir=tmp), ["--appendonly", "no", "--maxmemory", str(budget)],
                         bin_dir=os.path.join(build, "bin"))
        self.start()
        self.r = self.client()

    def stop(self):
        self.kill()


def seg(c, i):
    return f"conv{c}:seg{i}"


def make_trace(seed, steps, lengths):
    """[(op, chain)] with op 'append' or 'restore'; popularity skewed (a few hot conversations)."""
    rng = random.Random(seed)
    weights = [1.0 / (1 + k) ** 0.8 for k in range(CHAINS)]
    rng.shuffle(weights)
    built = [0] * CHAINS
    trace = []
    while len(trace) < steps or min(built) < SEGS:
        c = rng.choices(range(CHAINS), weights)[0] if len(trace) < steps else built.index(min(built))
        if built[c] < SEGS and (built[c] == 0 or rng.random() < 0.55):
            trace.append(("append", c))
            built[c] += 1
        else:
            trace.append(("restore", c))
    return trace


class Runner:
    def __init__(self, server, lineage, lengths):
        self.r = server.r
        self.lineage = lineage
        self.lengths = lengths  # tokens per segment, per chain
        self.stats = dict(restores=0, whole_hits=0, asked=0, reused=0, roots_lost=0, orphan_checks=0,
                          repaired=0)

    def store(self, c, i):
        n = self.lengths[c][i]
        p = self.r.pipeline(transaction=False)
        args = ["KV.PREFIX.REGISTER", seg(c, i), DIM, "fp16"]
        if self.lineage and i:
            args += ["PARENT", seg(c, i - 1)]
        p.execute_command(*args)
        blob = np.full((n, DIM), 0.5, dtype=np.float16).tobytes()
        for side in ("pk", "pv"):
            p.execute_command("V.STOREBATCH", f"{seg(c, i)}_{side}", 0, 0, n, blob, "FMT", "F16")
        for x in p.execute(raise_on_error=False):
            if isinstance(x, Exception):
                raise RuntimeError(f"store {seg(c, i)}: {x}")

    def held(self, c, upto):
        p = self.r.pipeline(transaction=False)
        for i in range(upto):
            p.execute_command("KV.PREFIX.INFO", seg(c, i))
        return [x != b"UNKNOWN" for x in p.execute()]

    def restore(self, c, built, repair=False):
        """Longest cached run from the root, fetched; the rest prefilled and stored again.
        `repair`: an append found its ancestors gone (counted apart from restores)."""
        h = self.held(c, built)
        run = h.index(False) if False in h else built
        asked = sum(self.lengths[c][:built])
        reused = sum(self.lengths[c][:run])
        if run:
            p = self.r.pipeline(transaction=False)
            if self.lineage:
                p.execute_command("KV.PREFIX.LOOKUP", seg(c, run - 1), "CHAIN")
            for i in range(run):
                for side in ("pk", "pv"):
                    p.execute_command("V.FETCH", f"{seg(c, i)}_{side}", "BATCH", 0, self.lengths[c][i], 1,
                                      "FMT", "NATIVE")
            if not self.lineage:
                p.execute_command("KV.PREFIX.LOOKUP", seg(c, run - 1), "TOKENS", reused)
            p.execute()
        st = self.stats
        if repair:
            st["repaired"] += asked - reused
        else:
            st["restores"] += 1
            st["asked"] += asked
            st["reused"] += reused
            st["whole_hits"] += run == built
        for i in range(run, built):  # prefill the missing segments and store them again
            self.store(c, i)

    def check_roots(self, built):
        """Counts chains whose root is gone while a later segment is held."""
        for c in range(CHAINS):
            if built[c] < 2:
                continue
            h = self.held(c, built[c])
            self.stats["orphan_checks"] += 1
            if not h[0] and any(h[1:]):
                self.stats["roots_lost"] += 1

    def orphan_bytes(self, built):
        total = 0
        for c in range(CHAINS):
            h = self.held(c, built[c])
            run = h.index(False) if False in h else len(h)
            total += sum(self.lengths[c][i] * DIM * 2 * 2 for i in range(run, len(h)) if h[i])
        return total


def run_mode(build, tmp, budget, trace, lengths, lineage):
    s = Server(build, budget, tmp)
    try:
        run = Runner(s, lineage, lengths)
        built = [0] * CHAINS
        t0 = time.perf_counter()
        for op, c in trace:
            if op == "append":
                # The serving process knows its chain: a segment whose parent was
                # evicted cannot be appended to (plain LRU) - it stores the lost
                # ones again first, as it would on its next restore.
                i = built[c]
                if i and False in run.held(c, i):
                    run.restore(c, i, repair=True)
                run.store(c, i)
                built[c] += 1
            else:
                run.restore(c, built[c])
            run.check_roots(built)
        secs = time.perf_counter() - t0
        st = dict(run.stats)
        st["orphan_bytes"] = run.orphan_bytes(built)
        info = dict(l.split(":", 1) for l in s.r.execute_command("KV.PREFIX.INFO").decode().split("\r\n") if l)
        st["evicted"] = int(info["vstore_evictions"]) // 2
        st["bytes"] = int(info["vstore_bytes"])
        st["seconds"] = secs
        return st
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--fraction", type=float, default=0.4, help="budget as a fraction of all segments")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    # Root (system prompt) longer than the turns.
    lengths = [[int(rng.integers(96, 160))] + [int(x) for x in rng.integers(24, 64, SEGS - 1)]
               for _ in range(CHAINS)]
    total = sum(sum(l) for l in lengths) * DIM * 2 * 2
    budget = int(total * a.fraction)
    trace = make_trace(a.seed, a.steps, lengths)
    n_app = sum(op == "append" for op, _ in trace)
    with tempfile.TemporaryDirectory(prefix="pion-lineage-") as tmp:
        res = {m: run_mode(a.build, tmp, budget, trace, lengths, m == "lineage") for m in ("lineage", "plain")}
    print(f"\n{CHAINS} chains x {SEGS} segments, {len(trace)} steps ({n_app} appends, "
          f"{len(trace) - n_app} restores), seed {a.seed}, maxmemory {budget} B "
          f"({a.fraction:.0%} of {total} B)\n")
    print("| mode | whole-chain hit rate | token reuse | tokens prefilled again (restores + appends) | "
          "roots evicted under a held descendant | orphaned bytes at end | namespaces evicted | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for m, st in res.items():
        again = st["asked"] - st["reused"] + st["repaired"]
        print(f"| {m} | {st['whole_hits']}/{st['restores']} = {st['whole_hits'] / st['restores']:.1%} | "
              f"{st['reused'] / st['asked']:.1%} | {again} ({st['asked'] - st['reused']} + {st['repaired']}) | "
              f"{st['roots_lost']} (of {st['orphan_checks']} checks) | "
              f"{st['orphan_bytes']} | {st['evicted']} | {st['seconds']:.1f} |")
    lin, pl = res["lineage"], res["plain"]
    print(f"\nlineage / plain: whole-chain hits x{lin['whole_hits'] / max(1, pl['whole_hits']):.2f}, "
          f"token reuse x{(lin['reused'] / lin['asked']) / max(1e-9, pl['reused'] / pl['asked']):.2f}")


if __name__ == "__main__":
    main()
