"""Durability of pion-server: WAL, snapshots, crash recovery (docs/wal_format.md,
docs/snapshot_format.md).

Uses the real binary (conftest.py). The SIGKILL loop runs 20 times by default and
100 times with PION_SLOW=1 or `-m slow`. Formats: docs/wal_format.md,
docs/snapshot_format.md.
"""
from __future__ import annotations

import os
import signal
import random
import struct
import subprocess
import threading
import time

import numpy as np
import pytest
import redis

from conftest import BIN_DIR

FORMATS = ["int8", "turbo4", "turbo3", "turbo2", "fp16", "fp8", "mlx4g32"]
DIM = 64
SLOW = os.environ.get("PION_SLOW", "") not in ("", "0")


def register(c, ns, dim=DIM, fmt="fp16", blocks=None):
    args = ["KV.PREFIX.REGISTER", ns, dim, fmt]
    if blocks is not None:
        bs, hashes = blocks
        args += ["BLOCKS", bs, len(hashes), struct.pack(f"<{len(hashes)}Q", *hashes)]
    assert c.execute_command(*args) in (b"OK", "OK", True)


def rows_f16(seed, count, dim=DIM):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((count, dim)).astype(np.float16)


def store_f16(c, sid, layer, start, arr):
    return c.execute_command("V.STOREBATCH", sid, layer, start, arr.shape[0], arr.tobytes(),
                             "FMT", "F16")


def fetch_native(c, sid, layer, start, end):
    return c.execute_command("V.FETCH", sid, layer, "RANGE", start, end, "FMT", "NATIVE")


def pion_check(path):
    p = subprocess.run([str(BIN_DIR / "pion-check"), str(path)], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


# --- SIGKILL during a concurrent write load under appendfsync always ---------

def _kill_round(server_factory, sub, seed, policy="always"):
    s = server_factory(args=["--appendfsync", policy], sub=sub)
    rng = random.Random(seed)
    nclients = 4
    acked = [[] for _ in range(nclients)]   # (ns, side, layer, start, bytes)
    attempted = [[] for _ in range(nclients)]
    stop = threading.Event()
    setup = s.client()
    for i in range(nclients):
        register(setup, f"k{i}")
    setup.close()

    def writer(i):
        c = s.client(socket_timeout=10)
        pos = 0
        n = 0
        try:
            while not stop.is_set():
                count = rng.randint(1, 8) if i % 2 else 64
                side = "_pk" if n % 2 == 0 else "_pv"
                layer = n % 3
                arr = rows_f16(seed * 1000 + i * 100000 + n, count)
                rec = (f"k{i}", side, layer, pos, arr.tobytes())
                attempted[i].append(rec)
                store_f16(c, f"k{i}{side}", layer, pos, arr)
                acked[i].append(rec)
                pos += count
                n += 1
        except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
            pass
        finally:
            c.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(nclients)]
    for t in threads:
        t.start()
    time.sleep(0.15 + rng.random() * 0.35)
    s.kill()
    stop.set()
    for t in threads:
        t.join()
    s.start()
    c = s.client()
    total = 0
    for i in range(nclients):
        acked_set = {(r[0], r[1], r[2], r[3]) for r in acked[i]}
        for ns, side, layer, start, data in attempted[i]:
            n = len(data) // (2 * DIM)
            try:
                got = fetch_native(c, ns + side, layer, start, start + n)
            except redis.ResponseError:
                got = None
            if (ns, side, layer, start) in acked_set:
                assert got == data, f"acknowledged write lost or changed: {ns}{side} L{layer} @{start}"
                total += 1
            else:
                # Not acknowledged: either absent (zeros / null) or complete, never torn.
                assert got is None or got == data or got == b"\0" * len(data), \
                    f"torn write visible: {ns}{side} L{layer} @{start}"
    c.close()
    s.stop()
    return total


@pytest.mark.parametrize("round_", range(20))
def test_sigkill_during_writes_keeps_acknowledged(server_factory, round_):
    n = _kill_round(server_factory, f"kill{round_}", 1000 + round_)
    assert n > 0


@pytest.mark.parametrize("round_", range(5))
def test_sigkill_under_everysec_keeps_acknowledged(server_factory, round_):
    """appendfsync everysec: a reply goes out once the record is written to the
    WAL file (not yet fsynced), so a killed process loses nothing it acknowledged
    (the kernel has the bytes); only an OS crash or power loss can lose up to the
    last second, which a process kill cannot show."""
    n = _kill_round(server_factory, f"ev{round_}", 3000 + round_, policy="everysec")
    assert n > 0


@pytest.mark.slow
def test_sigkill_100_rounds(server_factory, request):
    """The 100-round kill -9 loop (every acknowledged write survives): PION_SLOW=1,
    or select it with -m slow."""
    if not SLOW and "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("slow: set PION_SLOW=1 or run with -m slow")
    for i in range(100):
        assert _kill_round(server_factory, f"slow{i}", 5000 + i) > 0


# --- SAVE, restart, snapshot + WAL -------------------------------------------

@pytest.mark.concurrency
def test_save_while_8_clients_write_then_restart(server_factory):
    s = server_factory(args=["--appendfsync", "everysec"])
    setup = s.client()
    for i in range(8):
        register(setup, f"w{i}")
    acked = [[] for _ in range(8)]
    stop = threading.Event()

    def writer(i):
        c = s.client()
        pos = 0
        n = 0
        while not stop.is_set():
            arr = rows_f16(i * 7919 + n, 16)
            store_f16(c, f"w{i}_pk", n % 2, pos, arr)
            acked[i].append((n % 2, pos, arr.tobytes()))
            pos += 16
            n += 1
        c.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    saves = 0
    t_end = time.monotonic() + 2.0
    while time.monotonic() < t_end:
        assert setup.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
        saves += 1
    stop.set()
    for t in threads:
        t.join()
    assert saves >= 2
    assert setup.execute_command("KV.PREFIX.COMMIT") in (b"OK", "OK", True)
    info = setup.execute_command("KV.PREFIX.INFO").decode()
    assert "wal_enabled:1" in info
    assert "last_save_unix:0" not in info
    setup.close()
    s.kill()  # after COMMIT, everything is on disk even under everysec
    s.start()
    c = s.client()
    for i in range(8):
        for layer, pos, data in acked[i]:
            assert fetch_native(c, f"w{i}_pk", layer, pos, pos + 16) == data
    c.close()


def test_restart_after_save_and_more_writes(server_factory):
    s = server_factory()
    c = s.client()
    register(c, "a")
    a = rows_f16(1, 32)
    store_f16(c, "a_pk", 0, 0, a)
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
    register(c, "b", fmt="fp16")
    b = rows_f16(2, 8)
    store_f16(c, "b_pv", 3, 100, b)
    store_f16(c, "a_pk", 0, 32, b)
    c.execute_command("KV.PREFIX.DROP", "zzz")
    c.close()
    s.restart()  # SIGTERM: flush + fsync
    c = s.client()
    assert fetch_native(c, "a_pk", 0, 0, 32) == a.tobytes()
    assert fetch_native(c, "a_pk", 0, 32, 40) == b.tobytes()
    assert fetch_native(c, "b_pv", 3, 100, 108) == b.tobytes()
    info = c.execute_command("KV.PREFIX.INFO").decode()
    replayed = int(info.split("wal_replayed:")[1].split("\r\n")[0])
    assert replayed == 3  # register b, two stores (dropping an unknown namespace logs nothing)
    assert "recovery done" in s.log()
    c.close()


def test_every_format_bit_identical_after_restart(server_factory):
    s = server_factory()
    c = s.client()
    before = {}
    for k, fmt in enumerate(FORMATS):
        ns = f"fmt_{fmt}"
        register(c, ns, dim=128, fmt=fmt)
        x = np.random.default_rng(k).standard_normal((40, 128)).astype(np.float32)
        for side in ("_pk", "_pv"):
            for layer in (0, 5):
                c.execute_command("V.STOREBATCH", ns + side, layer, 3, 40, x.tobytes())
                before[(ns + side, layer)] = c.execute_command(
                    "V.FETCH", ns + side, layer, "RANGE", 0, 50, "FMT", "F32")
    # Half from the snapshot, half from the WAL.
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
    for key in list(before)[::3]:
        c.execute_command("V.STOREBATCH", key[0], key[1], 60, 1,
                          np.ones((1, 128), np.float32).tobytes())
        before[key] = c.execute_command("V.FETCH", key[0], key[1], "RANGE", 0, 61, "FMT", "F32")
    c.close()
    s.kill()
    s.start()
    c = s.client()
    for (sid, layer), want in before.items():
        end = 61 if len(want) == 61 * 128 * 4 else 50
        assert c.execute_command("V.FETCH", sid, layer, "RANGE", 0, end, "FMT", "F32") == want
    c.close()


def test_block_tables_and_lru_order_survive_restart(server_factory):
    s = server_factory(args=["--max-sessions", "6"])
    c = s.client()
    hashes = [random.getrandbits(64) for _ in range(100)]
    register(c, "a", blocks=(16, hashes))
    register(c, "b")
    register(c, "c")
    c.execute_command("KV.PREFIX.LOOKUP", "a")  # a is now the most recently used
    blocks_before = c.execute_command("KV.PREFIX.BLOCKS", "a")
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
    c.close()
    s.kill()
    s.start()
    c = s.client()
    assert c.execute_command("KV.PREFIX.BLOCKS", "a") == blocks_before
    register(c, "d")  # evicts the least recently used: b
    assert c.execute_command("KV.PREFIX.LOOKUP", "b") in (b"MISS", "MISS")
    assert c.execute_command("KV.PREFIX.LOOKUP", "c") in (b"HIT", "HIT")
    assert c.execute_command("KV.PREFIX.LOOKUP", "a") in (b"HIT", "HIT")
    c.close()


# --- damaged files -------------------------------------------------------------

def _fill(c, rows=20):
    """Six namespaces of `rows` rows; {sid: bytes}."""
    data = {}
    for i in range(6):
        register(c, f"n{i}")
        arr = rows_f16(i, rows)
        store_f16(c, f"n{i}_pk", 0, 0, arr)
        data[f"n{i}_pk"] = arr.tobytes()
    return data


def _fill_and_stop(s):
    c = s.client()
    data = _fill(c)
    c.close()
    s.stop()
    return data


def test_killed_after_recycling_reads_old_records_as_the_end(server_factory):
    """SIGKILL after appending into a recycled WAL file (wal_format.md §6): the
    file's old records follow the last new one. pion-check calls that OK and the
    restart cuts them as the file's earlier use, not as a torn tail."""
    s = server_factory(args=["--appendfsync", "always"])
    c = s.client()
    data = _fill(c, rows=40)
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)  # generation 1 kept
    arr = rows_f16(50, 4)
    store_f16(c, "n0_pv", 0, 0, arr)
    data["n0_pv"] = arr.tobytes()
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)  # and recycled
    arr = rows_f16(51, 4)
    store_f16(c, "n1_pv", 0, 0, arr)  # acknowledged under always: durable
    data["n1_pv"] = arr.tobytes()
    c.close()
    s.kill()
    wal = s.dir / "pion.vstore.wal"
    rc, out = pion_check(wal)
    assert rc == 0 and "earlier use" in out, out
    s.start()
    log = s.log()
    assert "the file's earlier use), truncated" in log
    assert "torn tail" not in log
    c = s.client()
    for sid, d in data.items():
        assert fetch_native(c, sid, 0, 0, len(d) // (2 * DIM)) == d
    c.close()
    s.stop()
    rc, out = pion_check(wal)
    assert rc == 0 and "status: OK" in out and "earlier use" not in out, out


def test_torn_last_record_is_repaired(server_factory):
    s = server_factory()
    data = _fill_and_stop(s)
    wal = s.dir / "pion.vstore.wal"
    size = wal.stat().st_size
    raw = wal.read_bytes()
    with open(wal, "ab") as f:
        f.write(raw[40:40 + 57])  # the start of a record: a crash mid-append
    rc, out = pion_check(wal)
    assert rc == 1 and "torn tail" in out
    s.start()
    assert "torn tail" in s.log()
    c = s.client()
    for sid, d in data.items():
        assert fetch_native(c, sid, 0, 0, 20) == d
    c.close()
    s.stop()
    assert wal.stat().st_size == size
    assert pion_check(wal)[0] == 0


def test_corrupt_byte_mid_wal_refuses_start_and_repair_starts(server_factory):
    s = server_factory()
    data = _fill_and_stop(s)
    wal = s.dir / "pion.vstore.wal"
    raw = bytearray(wal.read_bytes())
    mid = len(raw) // 2
    raw[mid] ^= 0x5A
    wal.write_bytes(bytes(raw))
    rc, out = pion_check(wal)
    assert rc == 1 and "first_bad_offset" in out
    with pytest.raises(RuntimeError) as e:
        s.start(timeout=20)
    assert "corrupt at offset" in str(e.value) and "pion.vstore.wal" in str(e.value)
    s.args = ["--wal-repair"]
    s.start()
    assert "--wal-repair" in s.log()
    c = s.client()
    # The records before the damage are back.
    assert fetch_native(c, "n0_pk", 0, 0, 20) == data["n0_pk"]
    c.close()


def test_corrupt_snapshot_refuses_start(server_factory):
    s = server_factory()
    c = s.client()
    register(c, "x")
    store_f16(c, "x_pk", 0, 0, rows_f16(3, 50))
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
    c.close()
    s.stop()
    snap = s.dir / "pion.vstore"
    assert pion_check(snap)[0] == 0
    raw = bytearray(snap.read_bytes())
    raw[len(raw) // 2] ^= 1
    snap.write_bytes(bytes(raw))
    rc, out = pion_check(snap)
    assert rc == 1 and "first_bad_offset" in out
    with pytest.raises(RuntimeError) as e:
        s.start(timeout=20)
    assert "snapshot" in str(e.value) and "corrupt at offset" in str(e.value)


def test_pion_check_good_files(server_factory):
    s = server_factory()
    _fill_and_stop(s)
    rc, out = pion_check(s.dir / "pion.vstore.wal")
    assert rc == 0, out
    assert "namespaces: 6" in out and "rows: 120" in out
    s.start()
    c = s.client()
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)
    (s.dir / "backup").mkdir()
    assert c.execute_command("KV.PREFIX.SAVE", "backup/one.vstore") in (b"OK", "OK", True)
    c.close()
    rc, out = pion_check(s.dir / "pion.vstore")
    assert rc == 0 and "namespaces: 6" in out and "sessions: 12" in out
    assert pion_check(s.dir / "backup" / "one.vstore")[0] == 0
    junk = s.dir / "junk"
    junk.write_bytes(b"hello world")
    assert pion_check(junk)[0] == 1


def test_save_path_rules_and_commit(server):
    c = server.client()
    for bad in ["/etc/passwd", "../x", "a/../../b", "x\x01y", "pion.vstore.wal"]:
        with pytest.raises(redis.ResponseError):
            c.execute_command("KV.PREFIX.SAVE", bad)
    assert c.execute_command("KV.PREFIX.SAVE") in (b"OK", "OK", True)  # empty store
    assert c.execute_command("KV.PREFIX.COMMIT") in (b"OK", "OK", True)
    assert (server.dir / "pion.vstore").exists()
    info = c.info("persistence")
    assert info["loading"] == 0
    c.execute_command("CONFIG", "SET", "appendfsync", "always")
    register(c, "q")
    assert c.execute_command("CONFIG", "GET", "appendfsync")[1] in (b"always", "always")
    c.close()


def test_shutdown_save(server_factory):
    s = server_factory(args=["--appendfsync", "no"])
    c = s.client()
    register(c, "sv")
    d = rows_f16(9, 10)
    store_f16(c, "sv_pv", 1, 0, d)
    try:
        c.execute_command("SHUTDOWN", "SAVE")
    except redis.ConnectionError:
        pass
    s.proc.wait(30)
    assert s.proc.returncode == 0
    assert (s.dir / "pion.vstore").exists()
    rc, out = pion_check(s.dir / "pion.vstore")
    assert rc == 0 and "namespaces: 1" in out
    s.start()
    c = s.client()
    assert fetch_native(c, "sv_pv", 1, 0, 10) == d.tobytes()
    c.close()


# --- a full disk -------------------------------------------

def test_full_disk_writes_resume_without_restart(tmp_path):
    # A 16 MiB tmpfs as --dir (needs mount rights; skipped without them). The WAL
    # fills it; once space is freed, writes succeed again with no restart, a SAVE
    # that cannot fit leaves no pion.vstore.wal.<N>, and a restart recovers every
    # acknowledged write.
    from conftest import PionServer
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    s = None
    try:
        data = mnt / "data"
        filler = mnt / "filler"
        filler.write_bytes(b"\0" * (4 << 20))  # freed later
        s = PionServer(data, ["--appendfsync", "always"]).start()
        c = s.client()
        register(c, "f", dim=1024)
        acked = {}
        err = None
        for i in range(64):  # 1 MiB per store: the disk is full well before 64
            arr = rows_f16(i, 512, dim=1024)
            try:
                store_f16(c, "f_pk", i, 0, arr)
                acked[i] = arr.tobytes()
            except redis.ResponseError as e:
                err = str(e)
                break
        assert err is not None and "No space left on device" in err, err
        # The error names a file that exists.
        named = err.split("write ", 1)[1].split(":", 1)[0]
        assert os.path.exists(named), err
        # Still full: refused again, cleanly.
        with pytest.raises(redis.ResponseError):
            store_f16(c, "f_pk", 63, 0, rows_f16(63, 512, dim=1024))
        filler.unlink()
        arr = rows_f16(100, 512, dim=1024)
        store_f16(c, "f_pk", 63, 0, arr)
        acked[63] = arr.tobytes()
        assert c.info("persistence")["aof_last_write_status"] == "ok"
        # A snapshot needs as much space as the WAL holds: it fails and leaves no
        # stray WAL generation.
        with pytest.raises(redis.ResponseError):
            c.execute_command("KV.PREFIX.SAVE")
        names = sorted(p.name for p in data.iterdir() if p.name.startswith("pion.vstore"))
        assert names == ["pion.vstore.wal"], names
        c.close()
        assert s.stop() == 0
        s.start()
        c = s.client()
        for layer, want in acked.items():
            assert fetch_native(c, "f_pk", layer, 0, 512) == want, layer
        c.close()
    finally:
        if s is not None:
            s.stop(signal.SIGKILL)
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_multi_chunk_stores_replay_from_the_wal_bit_exact(server_factory):
    """A V.STOREBATCH spanning whole chunks is logged piece by piece from the chunks
    themselves (docs/ARCHITECTURE.md "One pass per stored byte"); replaying the WAL alone
    (no snapshot, SIGKILL) rebuilds every row byte for byte: F32 into every format, F16 into
    fp16 (whole chunks adopted from the receive buffer), then a partial overwrite inside an
    adopted chunk."""
    s = server_factory()
    c = s.client()
    before = {}
    start, count = 7, 5000  # a partial head, whole chunks, a partial tail
    for k, fmt in enumerate(FORMATS):
        ns = f"mc_{fmt}"
        register(c, ns, dim=DIM, fmt=fmt)
        x = np.random.default_rng(100 + k).standard_normal((count, DIM)).astype(np.float32)
        c.execute_command("V.STOREBATCH", ns + "_pk", 0, start, count, x.tobytes())
        before[ns + "_pk"] = fetch_native(c, ns + "_pk", 0, 0, start + count)
    register(c, "mc_f16", dim=DIM, fmt="fp16")
    h = rows_f16(7, count)
    store_f16(c, "mc_f16_pv", 1, 0, h)
    patch = rows_f16(8, 10)
    store_f16(c, "mc_f16_pv", 1, 2100, patch)
    want = h.copy()
    want[2100:2110] = patch
    got = fetch_native(c, "mc_f16_pv", 1, 0, count)
    assert got == want.tobytes()
    before["mc_f16_pv"] = got
    c.close()
    s.kill()
    s.start()
    c = s.client()
    for sid, want_bytes in before.items():
        layer = 1 if sid == "mc_f16_pv" else 0
        end = count if sid == "mc_f16_pv" else start + count
        assert fetch_native(c, sid, layer, 0, end) == want_bytes, sid
    c.close()
