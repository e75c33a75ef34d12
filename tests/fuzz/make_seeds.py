#!/usr/bin/env python3
"""Writes the fuzz seed corpora checked in under tests/fuzz/corpus (run it again after
changing a harness's input layout; the files are small and deterministic).

corpus/resp:    [mode byte][chunk byte] + a RESP byte stream (fuzz_resp_parser.cc).
corpus/frame:   [mode byte][chunk byte] + a fast-lane frame stream (fuzz_frame_parser.cc).
corpus/persist: [0] + a whole WAL or snapshot file (raw mode), or [1] + its records
                as [type u8][length u32 LE][payload] (framed mode, fuzz_persist_readers.cc),
                taken from the golden files in tests/testdata.
corpus/tier:    [mode byte] + a disk tier file (fuzz_tier_reader.cc): raw files with
                correct CRCs, and files whose CRCs the harness fills in (odd mode).
"""
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTDATA = HERE.parent / "testdata"
sys.path.insert(0, str(HERE.parents[1] / "python"))

from pion._resp import encode as cmd  # noqa: E402
from pion.fastlane import frame  # noqa: E402

# Record type -> the byte the harness maps back to it (MapType: index in its table).
TYPE_INDEX = {1: 0, 2: 1, 3: 2, 4: 3, 16: 4, 17: 5, 18: 6, 19: 11, 10: 14, 22: 15, 24: 17, 25: 18}


def resp_seeds() -> dict[str, bytes]:
    f32 = struct.pack("<8f", *[0.5 * i for i in range(8)])
    return {
        "ping": b"\x00\x00" + cmd(b"PING"),
        "inline": b"\x00\x03" + b"PING\r\nECHO hello\r\nSET k \"quoted v\"\r\n",
        "pipeline_chunked": b"\x00\x07" + cmd(b"SET", b"a", b"1") + cmd(b"GET", b"a") * 3,
        "direct_bulk": b"\x04\xc8" + cmd(b"ECHO", b"x" * 300),
        "tight_limits": b"\x01\x10" + cmd(*[b"a"] * 70),
        "auth": b"\x02\x05" + cmd(b"AUTH", b"pw") + cmd(b"PING"),
        "vstore": b"\x04\x20" + cmd(b"V.STOREBATCH", b"ns:k", b"0", b"0", b"1", f32),
        "bad_len": b"\x00\x00" + b"*2\r\n$-7\r\nx\r\n",
        "resp3_types": b"\x00\x00" + b"*1\r\n$5\r\nHELLO\r\n*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
        # KV.BLOCK grammars (docs/protocol.md "Blocks").
        "kvblock_match": b"\x00\x05" + cmd(b"KV.BLOCK.MATCH", b"3", b"a", b"b", b"c", b"BITMAP",
                                             b"PIN", b"5000"),
        "kvblock_chain": b"\x00\x09" + cmd(b"KV.BLOCK.CHAIN", b"AFTER", b"p", b"PX", b"100",
                                             b"HASHES", struct.pack("<2Q", 1, 2), b"TOKENS",
                                             b"16", b"k1", b"v1", b"k2", b"TOKENS")
        + cmd(b"KV.BLOCK.UNPIN", b"1", b"x"),
    }


def frame_seeds() -> dict[str, bytes]:
    hq, d, hkv, m, s_suf = 4, 8, 2, 1, 2
    fused = (struct.pack("<H", 6) + b"ns_att" + struct.pack("<HHHHII", 3, hq, d, hkv, m, s_suf)
             + b"\x01" * (hq * m * d * 4) + b"\x02" * (hkv * s_suf * d * 4) * 2
             + bytes([0, 0, 1, 1]))
    query = (struct.pack("<H", 2) + b"s1" + struct.pack("<HHHI", 0, 2, 8, 3)
             + b"\x03" * (2 * 3 * 8 * 4))
    big = b"\x05" * (40 * 1024)
    return {
        "ping": b"\x00\x00" + frame(0xFF, b""),
        "pipeline_chunked": b"\x00\x07" + frame(0xFF, b"a") + frame(0x37, b"pw") + frame(0xFF, b""),
        "auth_user": b"\x02\x03" + frame(0x37, b"default\x00pw") + frame(0xFF, b""),
        "query_fused": b"\x00\x10" + frame(0x24, fused),
        "query_fused_window": b"\x01\x21" + frame(0x24, fused + struct.pack("<i", 64)),
        "query": b"\x00\xc8" + frame(0x25, query) + frame(0x25, query + struct.pack("<i", -1)),
        "big_direct": b"\x04\x30" + frame(0xFF, big),
        "big_denied": b"\x0c\x30" + frame(0x24, big) + frame(0xFF, b""),
        "bad_magic": b"\x00\x00" + b"*1\r\n$4\r\nPING\r\n",
        "unknown_cmd": b"\x00\x00" + frame(0x01, b""),
        "too_long": b"\x01\x00" + struct.pack("<HBI", 0xCA5E, 0x24, 0xFFFFFFFF),
        "malformed_body": b"\x00\x00" + frame(0x24, b"\x05\x00abc"),
    }


def records(data: bytes, header: int):
    off = header
    while off + 20 <= len(data):
        length, rtype = struct.unpack_from("<IB", data, off + 4)
        payload = data[off + 20: off + 20 + length]
        yield rtype, payload
        off += 20 + length


def framed(data: bytes, header: int) -> bytes:
    out = b"\x01"
    for rtype, payload in records(data, header):
        out += bytes([TYPE_INDEX.get(rtype, 0xF0)]) + struct.pack("<I", len(payload)) + payload
    return out


def persist_seeds() -> dict[str, bytes]:
    wal = (TESTDATA / "golden_v1.wal").read_bytes()
    snap = (TESTDATA / "golden_v1.vstore").read_bytes()
    snap8 = (TESTDATA / "golden_v8.vstore").read_bytes()  # a NAMESPACE_TIER section
    return {
        "raw_wal": b"\x00" + wal,
        "raw_snapshot": b"\x00" + snap,
        "framed_wal": framed(wal, 40),
        "framed_snapshot": framed(snap, 64),
        "raw_snapshot_v8": b"\x00" + snap8,
        "framed_snapshot_v8": framed(snap8, 64),
    }


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def tier_extent(key: bytes, value: bytes, seq: int) -> bytes:
    """One extent as docs/tier_format.md lays it out, CRCs included."""
    hb = -(-(64 + len(key)) // 4096) * 4096
    head = bytearray(hb)
    struct.pack_into("<8sIIQIIQ", head, 0, b"PIONTIER", 1, hb, len(value), len(key),
                     _crc32c(value), seq)
    head[64:64 + len(key)] = key
    struct.pack_into("<I", head, 60, _crc32c(bytes(head)))  # the field is still zero here
    ext = bytes(head) + value
    return ext + b"\0" * (-len(ext) % 4096)


def tier_seeds() -> dict[str, bytes]:
    a = tier_extent(b"alpha", bytes(range(256)) * 20, 1)
    b = tier_extent(b"k" * 5000, b"v" * 100, 2)
    c = tier_extent(b"", b"", 3)
    hole = b"\0" * 4096
    bad = bytearray(a)
    bad[4096 + 7] ^= 0xFF
    return {
        "raw_clean": b"\x00" + a + hole + b + c,
        "raw_damaged_value": b"\x00" + bytes(bad) + c,
        "raw_stray": b"\x00" + c + b"x" * 5000,
        "raw_holes_as_zeros": b"\x04" + hole + a + hole + hole + c,
        "fixed_crcs": b"\x03" + a[:4096] + b"\x11" * 9000 + c,
        "fixed_header_only": b"\x01" + b[:8192] + b"\x22" * 300,
    }


def main() -> None:
    for name, seeds in (("resp", resp_seeds()), ("frame", frame_seeds()),
                        ("persist", persist_seeds()), ("tier", tier_seeds())):
        d = HERE / "corpus" / name
        d.mkdir(parents=True, exist_ok=True)
        for f, data in seeds.items():
            (d / f).write_bytes(data)


if __name__ == "__main__":
    main()
