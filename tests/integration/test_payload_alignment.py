"""Payloads are encoded where they arrive and decoded straight into the reply: the f32/f16 rows of a V.STOREBATCH sit at whatever byte their RESP header
leaves them in the query buffer, and a V.FETCH decodes right after "$<len>\\r\\n".
Session names of 8 lengths and replies of varying row counts put both at every offset
mod 8, on dims with scalar tails. Against the sanitized server (make test-sanitize)
a misaligned float access aborts it; here the rows must also come back exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from test_vstore import int8_reference


def expected(fmt: str, x: np.ndarray) -> np.ndarray | None:
    if fmt == "int8":
        return int8_reference(x)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    return None  # checked for agreement across offsets only


@pytest.mark.parametrize("fmt,dim", [("int8", 37), ("fp16", 13), ("fp8", 32), ("turbo4", 64)])
def test_rows_at_every_offset(r, fmt, dim):
    x = (np.random.default_rng(dim).standard_normal((3, dim)) * 3).astype(np.float32)
    seen: dict[int, bytes] = {}
    for k in range(8):
        ns = f"al{'x' * k}"
        count = 1 + k % 3
        rows = x[:count]
        assert r.execute_command("KV.PREFIX.REGISTER", ns, dim, fmt) == b"OK"
        assert r.execute_command("V.STOREBATCH", ns + "_pk", 0, 0, count, rows.tobytes()) == b"OK"
        h = rows.astype(np.float16)
        assert r.execute_command("V.STOREBATCH", ns + "_pv", 0, 0, count, h.tobytes(),
                                 "FMT", "F16") == b"OK"
        # k extra never-written rows change the reply's length and so its header's.
        end = count + k
        y = np.frombuffer(r.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, end),
                          np.float32).reshape(end, dim)
        yv = np.frombuffer(r.execute_command("V.FETCH", ns + "_pv", 0, "RANGE", 0, end),
                           np.float32).reshape(end, dim)
        assert not y[count:].any() and not yv[count:].any()
        want = expected(fmt, rows)
        if want is not None:
            assert np.array_equal(y[:count], want), (fmt, k)
            assert np.array_equal(yv[:count], expected(fmt, h.astype(np.float32))), (fmt, k)
        for i in range(count):  # every offset decodes a row to the same bytes
            assert seen.setdefault(i, y[i].tobytes()) == y[i].tobytes(), (fmt, k, i)
        y16 = np.frombuffer(r.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 0, end,
                                              "FMT", "F16"), np.float16).reshape(end, dim)
        assert np.array_equal(y16, y.astype(np.float16)), (fmt, k)
