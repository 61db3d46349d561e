"""Every golden vector of wire/testdata/golden, read and written byte for byte.

For each entry of index.json with a ``value``, the file decodes to that value, the value
built independently from its typed-JSON description encodes to exactly the file's bytes, and
so does the decoded value; every entry with ``"error": "malformed"`` is refused.
"""

from __future__ import annotations

import json
import math
import struct
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakeshore import wire

GOLDEN = Path(__file__).resolve().parents[2] / "wire" / "testdata" / "golden"
INDEX: list[dict[str, Any]] = json.loads((GOLDEN / "index.json").read_text())
VALID = [e for e in INDEX if "value" in e]
INVALID = [e for e in INDEX if e.get("error") == "malformed"]


def test_index_covers_every_file() -> None:
    files = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.msgpack")}
    assert files == {e["file"] for e in INDEX}
    assert len(VALID) >= 60 and len(INVALID) >= 20


def build(desc: dict[str, Any]) -> Any:
    """The Python value a typed-JSON description stands for, built without the decoder."""
    t = desc["type"]
    if t == "nil":
        return None
    if t == "bool":
        return desc["value"]
    if t == "int":
        return int(desc["value"])
    if t == "float64":
        return struct.unpack(">d", bytes.fromhex(desc["bits"].rjust(16, "0")))[0]
    if t == "float32":
        return wire.Float32(struct.unpack(">f", bytes.fromhex(desc["bits"].rjust(8, "0")))[0])
    if t == "str":
        return desc["value"]
    if t == "bin":
        return bytes.fromhex(desc["hex"])
    if t == "array":
        return [build(i) for i in desc["items"]]
    if t == "tuple":
        return tuple(build(i) for i in desc["items"])
    if t == "map":
        return {k: build(v) for k, v in desc["entries"].items()}
    if t in ("ndarray", "tensor"):
        cls = wire.NDArray if t == "ndarray" else wire.Tensor
        return cls(desc["dtype"], tuple(desc["shape"]), bytes.fromhex(desc["hex"]))
    if t == "image":
        return wire.Image(desc["format"], bytes.fromhex(desc["hex"]))
    if t == "thunk":
        return wire.Thunk(desc["language"], bytes.fromhex(desc["hex"]))
    if t == "timestamp":
        return wire.UnixTime(int(desc["seconds"]), int(desc["nanoseconds"]))
    raise AssertionError(f"unknown description type {t}")


def check(desc: dict[str, Any], got: Any, where: str = "$") -> None:
    """Assert that a decoded value matches its description exactly, types included."""
    t = desc["type"]
    if t == "nil":
        assert got is None, where
    elif t == "bool":
        assert got is desc["value"], where
    elif t == "int":
        assert type(got) is int and got == int(desc["value"]), where
    elif t == "float64":
        assert type(got) is float, where
        assert struct.pack(">d", got).hex().lstrip("0") == desc["bits"].lstrip("0"), where
    elif t == "float32":
        assert type(got) is wire.Float32, where
        assert struct.pack(">f", got).hex().lstrip("0") == desc["bits"].lstrip("0"), where
    elif t == "str":
        assert type(got) is str and got == desc["value"], where
    elif t == "bin":
        assert type(got) is bytes and got.hex() == desc["hex"], where
    elif t in ("array", "tuple"):
        assert type(got) is (list if t == "array" else tuple), where
        assert len(got) == len(desc["items"]), where
        for i, (d, g) in enumerate(zip(desc["items"], got)):
            check(d, g, f"{where}[{i}]")
    elif t == "map":
        assert type(got) is dict and set(got) == set(desc["entries"]), where
        for k, d in desc["entries"].items():
            check(d, got[k], f"{where}.{k}")
    elif t == "ndarray":
        if desc["dtype"] == "bfloat16" and wire._numpy_dtype("bfloat16") is None:
            assert got == build(desc), where
            return
        assert isinstance(got, np.ndarray), where
        assert got.dtype.name == desc["dtype"], where
        assert list(got.shape) == desc["shape"], where
        assert got.astype(got.dtype.newbyteorder("<")).tobytes().hex() == desc["hex"], where
        assert got.flags.writeable, where
    elif t == "tensor":
        if isinstance(got, wire.Tensor):
            assert got == build(desc), where
        else:  # torch is installed
            assert got.dtype.__repr__() == f"torch.{desc['dtype']}", where
            assert list(got.shape) == desc["shape"], where
    elif t == "image":
        assert got == wire.Image(desc["format"], bytes.fromhex(desc["hex"])), where
    elif t == "thunk":
        assert got == wire.Thunk(desc["language"], bytes.fromhex(desc["hex"])), where
    elif t == "timestamp":
        assert isinstance(got, datetime), where
        assert got.tzinfo is not None and got.utcoffset() == timezone.utc.utcoffset(None), where
        sec, nsec = wire._unix(got)
        assert (sec, nsec) == (int(desc["seconds"]), desc["nanoseconds"]), where
        if nsec % 1000:
            assert type(got) is wire.Timestamp and got.nanosecond == nsec % 1000, where
    else:
        raise AssertionError(f"unknown description type {t}")


@pytest.mark.parametrize("entry", VALID, ids=[e["file"] for e in VALID])
def test_valid_vector(entry: dict[str, Any]) -> None:
    data = (GOLDEN / entry["file"]).read_bytes()
    assert data.hex() == entry["hex"]
    # Decode gives the described value.
    got = wire.decode(data)
    check(entry["value"], got)
    # The described value, built independently, encodes to the same bytes.
    assert wire.encode(build(entry["value"])).hex() == entry["hex"]
    # And the decoded value re-encodes to them too (the round trip is exact).
    assert wire.encode(got).hex() == entry["hex"]
    # The raw forms round-trip as well.
    raw = wire.decode(data, tensors="raw")
    assert wire.encode(raw) == data


@pytest.mark.parametrize("entry", INVALID, ids=[e["file"] for e in INVALID])
def test_invalid_vector(entry: dict[str, Any]) -> None:
    data = (GOLDEN / entry["file"]).read_bytes()
    assert data.hex() == entry["hex"]
    with pytest.raises(wire.DecodeError) as info:
        wire.decode(data)
    err = info.value
    assert err.reason and err.path.startswith("$")
    assert 0 <= err.offset <= len(data)
    assert isinstance(err, ValueError)


def test_nan_bits_survive() -> None:
    entry = next(e for e in VALID if e["file"] == "float64-nan.msgpack")
    got = wire.decode(bytes.fromhex(entry["hex"]))
    assert math.isnan(got)
    assert wire.encode(got).hex() == entry["hex"]
