#!/usr/bin/env python3
"""Writes the fuzz seed corpora checked in under tests/fuzz/corpus (run it again after
changing a harness's input layout; the files are small and deterministic).

corpus/resp:    [mode byte][chunk byte] + a RESP byte stream (fuzz_resp_parser.cc).
corpus/persist: [0] + a whole WAL or snapshot file (raw mode), or [1] + its records
                as [type u8][length u32 LE][payload] (framed mode, fuzz_persist_readers.cc),
                taken from the golden files in tests/testdata.
"""
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTDATA = HERE.parent / "testdata"

# Record type -> the byte the harness maps back to it (MapType: index in its table).
TYPE_INDEX = {1: 0, 2: 1, 3: 2, 4: 3, 16: 4, 17: 5, 18: 6}


def cmd(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


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
    return {
        "raw_wal": b"\x00" + wal,
        "raw_snapshot": b"\x00" + snap,
        "framed_wal": framed(wal, 40),
        "framed_snapshot": framed(snap, 64),
    }


def main() -> None:
    for name, seeds in (("resp", resp_seeds()), ("persist", persist_seeds())):
        d = HERE / "corpus" / name
        d.mkdir(parents=True, exist_ok=True)
        for f, data in seeds.items():
            (d / f).write_bytes(data)


if __name__ == "__main__":
    main()
