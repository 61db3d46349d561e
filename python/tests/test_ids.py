"""Client-made ULIDs: the canonical encoding (the ULID spec's time vector), monotonic
within a millisecond, and the table-driven encoder against the plain 26-step one."""

from __future__ import annotations

import random

import pytest

from lakeshore import _ids


def _reference(n: int) -> str:
    # The ULID spec's encoding, five bits at a time from the low end.
    out = []
    for _ in range(26):
        out.append("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[n & 31])
        n >>= 5
    return "".join(reversed(out))


def test_the_spec_time_vector_and_monotonic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ids, "_last_ms", -1)
    monkeypatch.setattr(_ids.time, "time_ns", lambda: 1469918176385 * 1_000_000 + 999_999)
    monkeypatch.setattr(_ids.os, "urandom", lambda k: bytes(range(1, k + 1)))
    a, b = _ids.new_ulid(), _ids.new_ulid()
    rand = int.from_bytes(bytes(range(1, 11)), "big")
    assert a == "01ARYZ6S41" + _reference(rand)[10:]
    assert b == "01ARYZ6S41" + _reference(rand + 1)[10:]  # the same millisecond: + 1
    assert _ids.is_ulid(a) and a < b


def test_the_encoder_matches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    for n in [0, (1 << 128) - 1, 1 << 80, (1 << 80) - 1] + [rng.getrandbits(128) for _ in range(2000)]:
        ms, rand = n >> 80, n & ((1 << 80) - 1)
        monkeypatch.setattr(_ids, "_last_ms", -1)
        monkeypatch.setattr(_ids.time, "time_ns", lambda: ms * 1_000_000)
        monkeypatch.setattr(_ids.os, "urandom", lambda k: rand.to_bytes(k, "big"))
        assert _ids.new_ulid() == _reference(n)
