"""Cluster hash tags (pion.cluster_keys.hash_tagged / tagged_sid) and the fast-lane frame
codec: pure functions, no server."""
from __future__ import annotations

import struct

import numpy as np

from pion import fastlane
from pion import client
from pion.cluster_keys import _tag_args, hash_tagged, tagged_sid


def test_hash_tagged():
    assert hash_tagged("ns") == "{ns}"
    assert hash_tagged(b"ns") == b"{ns}"
    assert hash_tagged("{ns}") == "{ns}"
    assert hash_tagged("a{b}c") == "a{b}c"  # already has a tag
    assert hash_tagged("a{}c") == "{a{}c}"  # an empty tag does not count


def test_still_importable_from_the_client_module():
    assert client.hash_tagged is hash_tagged and client.tagged_sid is tagged_sid


def test_tagged_sid():
    assert tagged_sid("ns_pk") == "{ns}_pk"
    assert tagged_sid("ns_pv") == "{ns}_pv"
    assert tagged_sid("{ns}_pk") == "{ns}_pk"
    assert tagged_sid("other") == "other"


def test_tag_args():
    assert _tag_args(("KV.PREFIX.LOOKUP", "ns")) == ("KV.PREFIX.LOOKUP", "{ns}")
    assert _tag_args(("V.FETCH", "ns_pk", 0)) == ("V.FETCH", "{ns}_pk", 0)
    assert _tag_args(("KV.PREFIX.DROP", "a", "b")) == ("KV.PREFIX.DROP", "{a}", "{b}")
    assert _tag_args(("PING",)) == ("PING",)


def test_fastlane_frames():
    assert fastlane.frame(fastlane.OP_PING) == struct.pack("<HBI", 0xCA5E, 0xFF, 0)
    f = fastlane.frame(fastlane.OP_AUTH, b"pw")
    assert f[:fastlane.HEADER_SIZE] == struct.pack("<HBI", 0xCA5E, 0x37, 2) and f[7:] == b"pw"
    q = np.ones((2, 1, 4), np.float32)
    body = fastlane.query_body(b"s", 3, q, fa_window=5)
    assert body[:3] == b"\x01\x00s"
    assert struct.unpack_from("<HHHI", body, 3) == (3, 2, 4, 1)
    assert body[13:13 + q.nbytes] == q.tobytes() and body[-4:] == struct.pack("<i", 5)
