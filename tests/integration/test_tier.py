"""The disk tier end to end: values the RAM budget pushes out move to the tier
file and read back bit-exact (GET through the direct-read path, every other read
through the mapping), promotion, writes over tiered keys, the tier's own LRU
drops when full, damage, CONFIG, and a kill -9 restart (one that adopts the
tier's extents a snapshot referenced)."""
from __future__ import annotations

import hashlib
import os
import signal

import pytest

from pion.testing import damage_tier_values, poll

MIB = 1 << 20


def _value(i: int, n: int = MIB) -> bytes:
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def _info(r) -> dict:
    return r.info("pion")


def _tier_server(server_factory, tmp, *, ram="8mb", tier="64mb", extra=()):
    return server_factory(["--maxmemory", ram, "--tier-dir", str(tmp / "tier"),
                           "--tier-maxbytes", tier, "--appendonly", "yes", *extra])


def _settle(r):
    """Waits until every queued tier write has been applied."""
    poll(lambda: _info(r)["tier_write_backlog_bytes"] == 0 or None, timeout=30)


@pytest.mark.concurrency  # tier I/O threads, deferred replies, promotions: also under TSan
def test_values_move_to_the_tier_and_read_back(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    for i in range(24):
        r.set(b"v%d" % i, _value(i))
    _settle(r)
    info = _info(r)
    assert info["tier_enabled"] == 1
    assert info["tier_entries"] >= 16, info
    assert info["tier_writes"] >= 16
    assert info["tier_bytes"] >= info["tier_entries"] * (MIB + 4096)
    assert r.info("memory")["used_memory"] <= 8 * MIB
    assert r.dbsize() == 24
    assert os.path.getsize(tmpdir_path / "tier" / "pion-tier.dat") > 0
    # Every read form answers the same bytes, from RAM or the tier.
    for i in range(24):
        v = _value(i)
        assert r.strlen(b"v%d" % i) == MIB
        assert r.getrange(b"v%d" % i, 1000, 1099) == v[1000:1100]
        assert r.get(b"v%d" % i) == v
    assert r.mget([b"v%d" % i for i in range(3)]) == [_value(i) for i in range(3)]
    # MGET of values on disk (read together, asynchronously), in RAM and missing, in order.
    for i in range(24):
        r.set(b"w%d" % i, _value(100 + i))
    _settle(r)
    names = [b"w%d" % i for i in range(24)]
    on_disk = _info(r)["tier_entries"]
    before = _info(r)["tier_reads"]
    got = r.mget(names[:12] + [b"nope"] + names[12:])
    assert got == [_value(100 + i) for i in range(12)] + [None] + \
        [_value(100 + i) for i in range(12, 24)]
    assert _info(r)["tier_reads"] > before and on_disk > 0
    info = _info(r)
    assert info["tier_reads"] >= 1
    assert info["tier_promotions"] >= 1
    assert info["evicted_keys"] if "evicted_keys" in info else True
    assert r.info("stats")["evicted_keys"] == 0  # moves are not evictions


def test_writes_to_tiered_keys_behave_as_in_ram(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    for i in range(20):
        r.set(b"w%d" % i, _value(i))
    _settle(r)
    # w0 is among the coldest: on disk now.
    r.append(b"w0", b"tail")
    assert r.get(b"w0") == _value(0) + b"tail"
    r.setrange(b"w1", 5, b"XY")
    v1 = bytearray(_value(1))
    v1[5:7] = b"XY"
    assert r.get(b"w1") == bytes(v1)
    r.set(b"w2", b"small")
    assert r.get(b"w2") == b"small"
    assert r.delete(b"w3") == 1 and r.get(b"w3") is None
    assert r.rename(b"w4", b"w4b") and r.get(b"w4b") == _value(4)
    assert r.copy(b"w5", b"w5c") and r.get(b"w5c") == _value(5)
    assert r.expire(b"w6", 1000) and 0 < r.ttl(b"w6") <= 1000
    assert r.getdel(b"w7") == _value(7) and not r.exists(b"w7")
    assert r.object("encoding", b"w8") in (b"raw", b"embstr", "raw")
    r.flushall()
    _settle(r)
    assert _info(r)["tier_entries"] == 0
    poll(lambda: _info(r)["tier_bytes"] == 0 or None, timeout=10)


def test_full_tier_drops_its_coldest_as_evictions(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path, ram="4mb", tier="8mb")
    r = s.client()
    p = r.pubsub()
    r.config_set("notify-keyspace-events", "Ee")
    p.subscribe("__keyevent@0__:evicted")
    for i in range(30):
        r.set(b"f%d" % i, _value(i))
        _settle(r)
    info = _info(r)
    assert info["tier_bytes"] <= 8 * MIB
    assert info["tier_evictions"] > 0
    evicted = r.info("stats")["evicted_keys"]
    assert evicted == info["tier_evictions"]
    assert r.dbsize() == 30 - evicted
    assert r.get(b"f0") is None  # the oldest left pion
    assert r.get(b"f29") == _value(29)
    heard = []
    poll(lambda: (m := p.get_message(timeout=0.1)) and m["type"] == "message"
         and heard.append(m["data"]) or None if len(heard) < 1 else True, timeout=10)
    assert heard and heard[0].startswith(b"f")
    # Shrinking the tier drops more, at once.
    r.config_set("tier-maxbytes", "3mb")
    assert _info(r)["tier_bytes"] <= 3 * MIB
    with pytest.raises(Exception, match="tier-maxbytes"):
        r.config_set("tier-maxbytes", "0")
    assert r.config_get("tier-min-value") == {"tier-min-value": "65536"}
    p.close()


def test_small_values_are_evicted_not_tiered(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path, ram="2mb",
                     extra=("--tier-min-value", "200kb"))
    r = s.client()
    for i in range(40):
        r.set(b"s%d" % i, _value(i, 100 * 1024))
    _settle(r)
    assert _info(r)["tier_entries"] == 0
    assert r.info("stats")["evicted_keys"] > 0


def test_kill9_restart_serves_every_acknowledged_value(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    for i in range(24):
        r.set(b"k%d" % i, _value(i))
    _settle(r)
    assert _info(r)["tier_entries"] > 0
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    assert r.dbsize() == 24
    # Recovery brought everything back; what is beyond the budget went to the tier.
    _settle(r)
    assert r.info("memory")["used_memory"] <= 8 * MIB
    assert _info(r)["tier_entries"] > 0
    for i in range(24):
        assert r.get(b"k%d" % i) == _value(i)


def _vm_hwm(s) -> int:
    """The server process's peak resident set (VmHWM), bytes."""
    with open(f"/proc/{s.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _damage_first_two_extents(tmpdir_path):
    """After a kill -9: damages the first extent's header (not adopted at start) and the
    second one's value (adopted, dropped by its first read); pion-check --tier must name
    both. Returns its output."""
    path = tmpdir_path / "tier" / "pion-tier.dat"
    with open(path, "r+b") as f:
        blob = f.read()
        first = blob.find(b"PIONTIER")
        second = blob.find(b"PIONTIER", first + 4096)
        assert first >= 0 and second > first
        f.seek(first + 16)
        f.write(b"\xff\xfe\xfd")
        f.seek(second + 4096 + 1000)
        f.write(b"\xff\xfe\xfd")
    rc, out = _pion_check(tmpdir_path / "data" / "pion.vstore", "--tier", tmpdir_path / "tier")
    assert rc == 1 and "tier_refs_bad: 2" in out, out
    return out


def _pion_check(*args):
    import subprocess

    from conftest import BIN_DIR
    p = subprocess.run([str(BIN_DIR / "pion-check"), *map(str, args)], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def test_restart_adopts_the_tier_without_loading_it_into_ram(server_factory, tmpdir_path):
    """Most of the data in the tier, a snapshot, kill -9, restart: the snapshot
    referenced the tier's extents and the restart adopted them, so every byte
    reads back and the restart never held the data set in RAM."""
    n = 96  # 96 MiB of values under an 8 MiB budget
    s = _tier_server(server_factory, tmpdir_path, tier="256mb")
    r = s.client()
    idle = _vm_hwm(s)  # this build's footprint with nothing stored (sanitizers: more)
    for i in range(n):
        r.set(b"a%d" % i, _value(i))
    _settle(r)
    before = _info(r)["tier_entries"]
    assert before >= n - 8, before
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    snap = tmpdir_path / "data" / "pion.vstore"
    assert os.path.getsize(snap) < 16 * MIB  # references, not the values
    rc, out = _pion_check(snap, "--tier", tmpdir_path / "tier")
    assert rc == 0, out
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert int(fields["tier_refs"]) >= before - 1, out
    assert fields["tier_refs_bad"] == "0", out
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    assert r.dbsize() == n
    _settle(r)
    info = _info(r)
    assert abs(info["tier_entries"] - before) <= 2, (info["tier_entries"], before)
    assert r.info("memory")["used_memory"] <= 8 * MIB
    # The point: the restart never loaded the 96 MiB into RAM.
    assert _vm_hwm(s) - idle < n * MIB // 2, (_vm_hwm(s), idle)
    assert "values adopted from" in s.log()
    for i in range(n):
        assert r.get(b"a%d" % i) == _value(i), i
    assert r.getrange(b"a%d" % (n - 1), 5, 9) == _value(n - 1)[5:10]


def test_restart_replays_the_wal_over_adopted_extents(server_factory, tmpdir_path):
    """Writes after the snapshot (overwrites and deletes of tiered keys, new keys)
    are replayed from the WAL on top of the extents the restart adopted."""
    s = _tier_server(server_factory, tmpdir_path, tier="256mb")
    r = s.client()
    want = {}
    for i in range(40):
        r.set(b"w%d" % i, _value(i))
        want[b"w%d" % i] = _value(i)
    _settle(r)
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    for i in range(0, 40, 4):
        r.set(b"w%d" % i, _value(1000 + i))
        want[b"w%d" % i] = _value(1000 + i)
    for i in range(1, 40, 7):
        r.delete(b"w%d" % i)
        del want[b"w%d" % i]
    r.append(b"w2", b"tail")
    want[b"w2"] += b"tail"
    for i in range(40, 48):
        r.set(b"w%d" % i, _value(i))
        want[b"w%d" % i] = _value(i)
    _settle(r)
    before = _info(r)["tier_entries"]
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    assert r.dbsize() == len(want)
    _settle(r)
    assert r.info("memory")["used_memory"] <= 8 * MIB
    assert abs(_info(r)["tier_entries"] - before) <= 4
    for k, v in want.items():
        assert r.get(k) == v, k
    # And once more after a second snapshot (the adopted extents' turn to be replaced).
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    r.set(b"w0", _value(7))
    want[b"w0"] = _value(7)
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    for k, v in want.items():
        assert r.get(k) == v, k


def test_restart_drops_a_damaged_referenced_extent(server_factory, tmpdir_path):
    """A referenced extent damaged on disk drops its key at start (or at its first
    read); the server starts and every other key reads back exact."""
    s = _tier_server(server_factory, tmpdir_path, tier="256mb")
    r = s.client()
    for i in range(32):
        r.set(b"x%d" % i, _value(i))
    _settle(r)
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    s.stop(signal.SIGKILL)
    _damage_first_two_extents(tmpdir_path)
    s.start()
    r = s.client()
    wrong = missing = 0
    for i in range(32):
        got = r.get(b"x%d" % i)
        missing += got is None
        wrong += got is not None and got != _value(i)
    assert wrong == 0
    assert missing == 2
    assert _info(r)["tier_errors"] >= 2
    assert "not adopted" in s.log()


def test_damaged_extent_is_dropped_never_served(server_factory, tmpdir_path):
    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    for i in range(20):
        r.set(b"d%d" % i, _value(i))
    _settle(r)
    # Flip bytes in the middle of every extent's value on disk.
    damage_tier_values(tmpdir_path / "tier" / "pion-tier.dat")
    # Each read path meets damaged extents first: GET (direct read), MGET, GETRANGE
    # (checked reads): none may answer a wrong byte.
    wrong = 0
    for i in range(0, 20, 3):
        got = r.get(b"d%d" % i)
        wrong += got is not None and got != _value(i)
    for i in range(1, 20, 3):
        got = r.mget([b"d%d" % i])[0]
        wrong += got is not None and got != _value(i)
    for i in range(2, 20, 3):
        got = r.getrange(b"d%d" % i, 900, 1100)
        wrong += got != b"" and got != _value(i)[900:1101]
    assert wrong == 0
    assert _info(r)["tier_errors"] > 0


def _rows(n: int, dim: int, seed: int):
    import numpy as np
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim)).astype(np.float16)


def test_namespaces_move_to_the_tier_and_read_back(server_factory, tmpdir_path):
    import numpy as np
    s = _tier_server(server_factory, tmpdir_path, ram="6mb", tier="256mb",
                     extra=("--tier-min-value", "4kb"))
    r = s.client()
    dim, n, layers = 256, 1024, 4  # 2 sides x 4 layers x 1024 x 256 x fp16 = 4 MiB each
    names = [f"ns{i}" for i in range(6)]
    data = {}
    for i, ns in enumerate(names):
        assert r.execute_command("KV.PREFIX.REGISTER", ns, dim, "fp16") == b"OK"
        for side in ("pk", "pv"):
            for layer in range(layers):
                rows = _rows(n, dim, hash((i, side, layer)) & 0xFFFF)
                data[(ns, side, layer)] = rows
                assert r.execute_command("V.STOREBATCH", f"{ns}_{side}", layer, 0, n,
                                         rows.tobytes(), "FMT", "F16") == b"OK"
    _settle(r)
    info = _info(r)
    assert info["tier_entries"] >= 4, info
    assert r.info("memory")["used_memory"] <= 6 * 1024 * 1024
    assert r.info("stats")["evicted_keys"] == 0
    tiers = {ns: r.execute_command("KV.PREFIX.INFO", ns).decode() for ns in names}
    assert sum("tier:disk" in t for t in tiers.values()) >= 4
    # Every namespace answers LOOKUP and every row, bit-exact, wherever it lives.
    for ns in names:
        assert r.execute_command("KV.PREFIX.LOOKUP", ns) != b"MISS"
        for side in ("pk", "pv"):
            for layer in range(layers):
                got = r.execute_command("V.FETCH", f"{ns}_{side}", layer, "RANGE", 0, n,
                                         "FMT", "F16")
                assert np.array_equal(np.frombuffer(got, np.float16).reshape(n, dim),
                                      data[(ns, side, layer)]), (ns, side, layer)
    # A write to a namespace on disk behaves as in RAM.
    ns = next(k for k, t in tiers.items() if "tier:disk" in t)
    extra = _rows(16, dim, 99)
    assert r.execute_command("V.STOREBATCH", f"{ns}_pk", 0, n, 16, extra.tobytes(),
                             "FMT", "F16") == b"OK"
    got = r.execute_command("V.FETCH", f"{ns}_pk", 0, "RANGE", n - 16, n + 16,
                            "FMT", "F16")
    want = np.concatenate([data[(ns, "pk", 0)][-16:], extra])
    assert np.array_equal(np.frombuffer(got, np.float16).reshape(32, dim), want)
    # DROP of a namespace on disk frees its extent.
    before = _info(r)["tier_bytes"]
    victim = next(k for k, t in tiers.items() if "tier:disk" in t and k != ns)
    assert r.execute_command("KV.PREFIX.DROP", victim) == 1
    _settle(r)
    poll(lambda: _info(r)["tier_bytes"] < before or None, timeout=10)
    # After kill -9, everything acknowledged is served again.
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    for name in names:
        if name == victim:
            continue
        got = r.execute_command("V.FETCH", f"{name}_pv", layers - 1, "RANGE", 0, n,
                                 "FMT", "F16")
        assert np.array_equal(np.frombuffer(got, np.float16).reshape(n, dim),
                              data[(name, "pv", layers - 1)])


def _loaded(r):
    import redis
    try:
        return r.dbsize() is not None
    except redis.exceptions.BusyLoadingError:
        return None


def test_restart_adopts_namespaces_in_the_tier_without_loading_them(server_factory,
                                                                    tmpdir_path):
    """Namespaces far over the RAM budget, a snapshot (NAMESPACE_TIER references),
    writes after it, kill -9, restart: the namespaces' extents are adopted, not
    read into RAM, the WAL replays on top, and every row reads back bit-exact."""
    import numpy as np
    s = _tier_server(server_factory, tmpdir_path, tier="512mb",
                     extra=("--tier-min-value", "4kb"))
    r = s.client()
    idle = _vm_hwm(s)
    dim, n, layers = 256, 1024, 2  # 2 sides x 2 layers x 1024 x 256 x fp16 = 2 MiB each
    names = [f"tns{i}" for i in range(48)]  # 96 MiB under an 8 MiB budget
    data = {}
    for i, ns in enumerate(names):
        assert r.execute_command("KV.PREFIX.REGISTER", ns, dim, "fp16") == b"OK"
        for side in ("pk", "pv"):
            for layer in range(layers):
                rows = _rows(n, dim, i * 4 + (side == "pv") * 2 + layer)
                data[(ns, side, layer)] = rows
                assert r.execute_command("V.STOREBATCH", f"{ns}_{side}", layer, 0, n,
                                         rows.tobytes(), "FMT", "F16") == b"OK"
    _settle(r)
    tiered = [ns for ns in names
              if "tier:disk" in r.execute_command("KV.PREFIX.INFO", ns).decode()]
    assert len(tiered) >= 40, len(tiered)
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    snap = tmpdir_path / "data" / "pion.vstore"
    assert os.path.getsize(snap) < 16 * MIB  # references, not the rows
    rc, out = _pion_check(snap, "--tier", tmpdir_path / "tier")
    assert rc == 0, out
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert int(fields["ns_tier_refs"]) >= len(tiered) - 1, out
    assert fields["tier_refs_bad"] == "0", out
    # After the snapshot, replayed from the WAL: rows rewritten in a tiered
    # namespace, a tiered namespace dropped, a new one.
    ns = tiered[0]
    extra = _rows(16, dim, 999)
    assert r.execute_command("V.STOREBATCH", f"{ns}_pk", 0, 8, 16, extra.tobytes(),
                             "FMT", "F16") == b"OK"
    data[(ns, "pk", 0)] = data[(ns, "pk", 0)].copy()
    data[(ns, "pk", 0)][8:24] = extra
    assert r.execute_command("KV.PREFIX.DROP", tiered[1]) == 1
    for side in ("pk", "pv"):
        for layer in range(layers):
            data.pop((tiered[1], side, layer))
    assert r.execute_command("KV.PREFIX.REGISTER", "tnew", dim, "fp16") == b"OK"
    data[("tnew", "pv", 1)] = _rows(n, dim, 1234)
    assert r.execute_command("V.STOREBATCH", "tnew_pv", 1, 0, n,
                             data[("tnew", "pv", 1)].tobytes(), "FMT", "F16") == b"OK"
    _settle(r)
    s.stop(signal.SIGKILL)
    s.start()
    r = s.client()
    # Loaded (INFO answers while loading; data commands do not).
    poll(lambda: "namespaces adopted from" in s.log() or None, timeout=60)
    poll(lambda: _loaded(r), timeout=60)
    _settle(r)
    assert r.info("memory")["used_memory"] <= 8 * MIB
    # The point: the restart never loaded the 96 MiB of rows into RAM.
    assert _vm_hwm(s) - idle < 96 * MIB // 2, (_vm_hwm(s), idle)
    assert r.execute_command("KV.PREFIX.LOOKUP", tiered[1]) == b"MISS"
    for (name, side, layer), rows in data.items():
        got = r.execute_command("V.FETCH", f"{name}_{side}", layer, "RANGE", 0, n, "FMT", "F16")
        assert np.array_equal(np.frombuffer(got, np.float16).reshape(n, dim), rows), \
            (name, side, layer)


def test_restart_drops_a_namespace_whose_referenced_extent_is_damaged(server_factory,
                                                                       tmpdir_path):
    """A damaged header drops its namespace at start (not adopted), a damaged
    value drops it at its first read; pion-check --tier names both; every other
    namespace reads back bit-exact."""
    import numpy as np
    import redis
    s = _tier_server(server_factory, tmpdir_path, tier="256mb",
                     extra=("--tier-min-value", "4kb"))
    r = s.client()
    dim, n = 256, 1024
    names = [f"dns{i}" for i in range(12)]  # 2 MiB each (one layer a side) under 8 MiB
    data = {}
    for i, ns in enumerate(names):
        assert r.execute_command("KV.PREFIX.REGISTER", ns, dim, "fp16") == b"OK"
        for side in ("pk", "pv"):
            data[(ns, side)] = _rows(2 * n, dim, 500 + i * 2 + (side == "pv"))
            assert r.execute_command("V.STOREBATCH", f"{ns}_{side}", 0, 0, 2 * n,
                                     data[(ns, side)].tobytes(), "FMT", "F16") == b"OK"
    _settle(r)
    assert r.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK")
    s.stop(signal.SIGKILL)
    out = _damage_first_two_extents(tmpdir_path)
    assert out.count("; namespace dns") == 2, out
    s.start()
    r = s.client()
    poll(lambda: _loaded(r), timeout=60)
    wrong = missing = 0
    for (ns, side), rows in data.items():
        try:
            got = r.execute_command("V.FETCH", f"{ns}_{side}", 0, "RANGE", 0, 2 * n,
                                     "FMT", "F16")
        except redis.exceptions.ResponseError:
            missing += 1
            continue
        wrong += not np.array_equal(np.frombuffer(got, np.float16).reshape(2 * n, dim), rows)
    assert wrong == 0
    assert missing == 4  # two namespaces, both sides
    assert _info(r)["tier_errors"] >= 2
    assert "not adopted" in s.log()


@pytest.mark.concurrency  # tier I/O threads, deferred replies, promotions: also under TSan
def test_damaged_namespace_extent_is_never_served(server_factory, tmpdir_path):
    import numpy as np
    import redis
    s = _tier_server(server_factory, tmpdir_path, ram="2mb", tier="64mb",
                     extra=("--tier-min-value", "4kb"))
    r = s.client()
    dim, n = 256, 1024  # 512 KiB per namespace: 8 of them under a 2 MiB budget
    data = {}
    for i in range(8):
        ns = f"dn{i}"
        assert r.execute_command("KV.PREFIX.REGISTER", ns, dim, "fp16") == b"OK"
        data[ns] = _rows(n, dim, 1000 + i)
        assert r.execute_command("V.STOREBATCH", f"{ns}_pk", 0, 0, n, data[ns].tobytes(),
                                 "FMT", "F16") == b"OK"
    _settle(r)
    on_disk = [ns for ns in data if "tier:disk" in
               r.execute_command("KV.PREFIX.INFO", ns).decode()]
    assert len(on_disk) >= 4, on_disk
    # Flip bytes inside every extent's value on disk (the page cache sees them too).
    path = tmpdir_path / "tier" / "pion-tier.dat"
    with open(path, "r+b") as f:
        blob = f.read()
        at = 0
        while (at := blob.find(b"PIONTIER", at)) >= 0:
            f.seek(at + 4096 + 5000)
            f.write(b"\xff\xfe\xfd")
            at += 4096
    os.sync()
    wrong = gone = 0
    for ns in on_disk:
        try:
            got = r.execute_command("V.FETCH", f"{ns}_pk", 0, "RANGE", 0, n, "FMT", "F16")
        except redis.ResponseError as e:
            assert "not found" in str(e), e
            gone += 1
            continue
        wrong += not np.array_equal(np.frombuffer(got, np.float16).reshape(n, dim), data[ns])
    assert wrong == 0
    assert gone == len(on_disk)  # each was damaged: checked, dropped, never served
    assert _info(r)["tier_errors"] >= len(on_disk)
    assert r.info("stats")["evicted_keys"] >= len(on_disk)  # dropped as evictions


def test_pion_check_verifies_a_live_tier(server_factory, tmpdir_path):
    """pion-check on a running server's tier directory: OK after writes; after a
    value byte is damaged on disk, non-zero with that extent's offset."""
    import subprocess

    from conftest import BIN_DIR

    def check(path):
        p = subprocess.run([str(BIN_DIR / "pion-check"), str(path)], capture_output=True,
                           text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    s = _tier_server(server_factory, tmpdir_path)
    r = s.client()
    for i in range(20):
        r.set(b"c%d" % i, _value(i))
    _settle(r)
    entries = _info(r)["tier_entries"]
    assert entries > 0
    tier_dir = tmpdir_path / "tier"
    rc, out = check(tier_dir)
    assert rc == 0, out
    assert "type: tier" in out and "status: OK" in out, out
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert int(fields["extents"]) >= entries, out
    assert int(fields["value_bytes"]) >= entries * MIB, out
    assert fields["damaged_extents"] == "0", out
    # Damage the value of the first extent in the file (read nothing through the
    # server first: a read would drop the damaged entry and free its extent).
    path = tier_dir / "pion-tier.dat"
    with open(path, "r+b") as f:
        at = f.read().find(b"PIONTIER")
        assert at >= 0 and at % 4096 == 0
        f.seek(at + 4096 + 1000)
        f.write(b"\xff\xfe\xfd")
    rc, out = check(path)
    assert rc == 1, out
    assert "damaged: offset %d: value checksum mismatch" % at in out, out
    assert "first_bad_offset: %d" % at in out, out
