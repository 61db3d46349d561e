"""The seed vectors: bytes the real dreamlake-lakeshore codec wrote (wire/testdata/seed).

Every vector decodes to the value its index describes (arrays normalised to a plain dtype
name and little-endian data), and ``decode(..., verbatim=True)`` re-encodes to exactly the
file's bytes. Also wire version 1's bytes (thunks as ext 5, tuples as ext 4), byte-order
dtype names, and the Envelope and Frame layouts of docs/wire.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakeshore import wire

from .test_wire_golden import check

SEED = Path(__file__).resolve().parents[2] / "wire" / "testdata" / "seed"
INDEX: dict[str, Any] = json.loads((SEED / "index.json").read_text())
VECTORS: list[dict[str, Any]] = INDEX["vectors"]


def read(name: str) -> bytes:
    return (SEED / f"{name}.msgpack").read_bytes()


def test_index_covers_every_file() -> None:
    assert INDEX["package"] == "dreamlake-lakeshore 0.5.0"
    assert {p.name for p in SEED.glob("*.msgpack")} == {v["file"] for v in VECTORS}
    assert len(VECTORS) >= 90


@pytest.mark.parametrize("entry", VECTORS, ids=[v["file"] for v in VECTORS])
def test_seed_vector(entry: dict[str, Any]) -> None:
    data = (SEED / entry["file"]).read_bytes()
    assert data.hex() == entry["hex"]
    got = wire.decode(data)
    check(entry["value"], got)
    # The verbatim decoding re-encodes exactly; the normalised one to bytes that decode the same.
    assert wire.encode(wire.decode(data, verbatim=True)).hex() == entry["hex"]
    check(entry["value"], wire.decode(wire.encode(got)))


def test_envelope_layout() -> None:
    env = wire.decode(read("envelope"), verbatim=True)
    assert isinstance(env, wire.Map)
    assert list(env) == ["v", "id", "fn", "args", "kwargs", "prefix", "key", "cfg", "parent"]
    assert env["v"] == 1 and env["key"] == "nightly-7"
    args = wire.decode(env["args"])
    assert args[:3] == [1, "two", (3, 4.5)]
    assert args[3].dtype == np.dtype("<i4") and args[3].tolist() == [0, 1, 2]
    kwargs = wire.decode(env["kwargs"], verbatim=True)
    assert list(kwargs) == ["scale", "mask", "name"]
    minimal = wire.decode(read("envelope-minimal"))
    assert minimal["key"] is None and minimal["parent"] is None and minimal["args"] == b""


def test_frame_layout() -> None:
    kinds = {"frame-value": 0, "frame-chunk": 1, "frame-begin": 2, "frame-end": 3, "frame-error": 4}
    for name, kind in kinds.items():
        frame = wire.decode(read(name))
        assert type(frame) is list and len(frame) == 4 and frame[0] == kind, name
    assert wire.decode(read("frame-error")) == [4, -1, None, {"type": "ValueError", "message": "boom"}]
    assert wire.decode(read("frame-value"))[2] == {"loss": 0.25, "step": (1, 2)}


# Bytes wire version 1 wrote: the golden thunk (ext 5) and tuple (ext 4) before version 2.
V1_THUNK = bytes.fromhex("c7190592b2707974686f6e2d636c6f75647069636b6c65c403800595")
V1_TUPLE_PAIR = bytes.fromhex("d6049201a161")


def test_version1_thunks_read_with_version_1() -> None:
    got = wire.decode(V1_THUNK, version=1)
    assert got == wire.Thunk("python-cloudpickle", b"\x80\x05\x95")
    again = wire.encode(got)
    assert again[2] == wire.EXT_THUNK == 64
    assert wire.decode(again) == got
    # Read as version 2 (and by dreamlake-lakeshore), the same bytes are a tuple.
    assert wire.decode(V1_THUNK) == ("python-cloudpickle", b"\x80\x05\x95")
    # A real thunk of version 1 runs after the upgrade.
    th = wire.thunk(lambda: 41 + 1)
    old = wire.encode(th)
    at = {0xC7: 2, 0xC8: 3, 0xC9: 5}[old[0]]  # the type byte after an ext 8/16/32 header
    assert old[at] == wire.EXT_THUNK
    old_v1 = old[:at] + bytes([wire.EXT_THUNK_V1]) + old[at + 1 :]
    assert wire.decode(old_v1, version=1)() == 42
    # The seed vector of that shape is a tuple, as its writer meant.
    assert wire.decode(read("tuple-str-bytes")) == ("python", b"\x80\x05\x95")
    with pytest.raises(ValueError, match="version 3"):
        wire.decode(b"\xc0", version=3)


def test_version1_tuples_read_in_every_version() -> None:
    for version in (1, 2):
        assert wire.decode(V1_TUPLE_PAIR, version=version) == (1, "a")
    assert wire.encode((1, "a")).hex() == "d6059201a161"


def test_byte_order_dtypes() -> None:
    for code in [">i2", ">u4", ">f8", ">c8", ">c16", "<f4", "|u1", "|b1"]:
        a = np.array([1, 0, 3], dtype=code)
        raw = wire.NDArray(code, (3,), a.tobytes())
        got = wire.decode(wire.encode(raw))
        assert isinstance(got, np.ndarray)
        assert got.dtype == a.dtype.newbyteorder("<")
        assert got.tolist() == a.tolist()
        kept = wire.decode(wire.encode(raw), verbatim=True)
        assert kept == raw
        assert wire.encode(kept) == wire.encode(raw)
        assert kept.numpy().tolist() == a.tolist()
    assert wire.decode(wire.encode(wire.Tensor(">i4", (1,), b"\x00\x00\x01\x00")), tensors="numpy").tolist() == [256]
    for bad in ["=f4", "|f4", ">f3", ">"]:
        with pytest.raises(wire.EncodeError, match="unknown dtype"):
            wire.encode(wire.NDArray(bad, (1,), b"\x00" * 4))


def test_map_keeps_order() -> None:
    m = wire.Map(zeta=1, alpha=wire.Map(b=None, a=[wire.Map()]))
    data = wire.encode(m)
    assert data[2:6] == b"zeta"
    back = wire.decode(data, verbatim=True)
    assert type(back) is wire.Map and list(back) == ["zeta", "alpha"] and list(back["alpha"]) == ["b", "a"]
    assert type(back["alpha"]["a"][0]) is wire.Map
    assert wire.encode(back) == data
    plain = wire.decode(data)
    assert type(plain) is dict and wire.encode(plain) != data
    assert wire.decode(b"\x80", verbatim=True) == {} and type(wire.decode(b"\x80", verbatim=True)) is wire.Map


def test_image_format_either_case() -> None:
    for fmt in ["PNG", "png", "Jpeg"]:
        img = wire.Image(fmt, b"\x01\x02")
        assert wire.decode(wire.encode(img)) == img


def test_version1_thunk_payload_runs_on_a_thunks_only_queue() -> None:
    """A job stored before wire version 2 holds its thunk as ext 5, which now decodes as the
    tuple (language, data); a thunks-only queue (which takes no tuples) still runs it."""
    from lakeshore import worker

    th = wire.thunk(lambda: 6 * 7)
    payload = wire.decode(wire.encode((th.language, th.data)))
    assert payload == (th.language, th.data)
    _, call = worker._prepare(worker._run_thunk, payload)
    assert call() == 42
    # On a queue with a handler, a tuple stays a tuple.
    _, call = worker._prepare(lambda p: p, payload)
    assert call() == payload


def _real_package_python() -> str | None:
    """The python of a virtual environment with dreamlake-lakeshore (scripts/seed_vectors.sh
    makes one: SEED_VENV, default /tmp/lakeshore-seed-venv), or None."""
    import os

    venv = Path(os.environ.get("SEED_VENV", "/tmp/lakeshore-seed-venv"))
    py = venv / "bin" / "python"
    return str(py) if py.exists() else None


def test_real_package_reads_our_bytes() -> None:
    """The other direction: bytes our encoder writes, read by dreamlake-lakeshore's own
    decoder and written again by its encoder, come back unchanged (tuples as tuples, our
    thunk as an opaque ext 64 it keeps). Needs the package's virtual environment."""
    import subprocess

    py = _real_package_python()
    if py is None:
        pytest.skip("no dreamlake-lakeshore venv: run sh scripts/seed_vectors.sh (or set SEED_VENV)")
    values: list[Any] = [
        (1, "a"),
        ((), (None,)),
        ("python", b"\x80\x05\x95"),
        {"pair": (1, 2.5), "list": [1, 2.5]},
        wire.Map(zeta=1, alpha=(2, [3])),
        np.arange(6, dtype=np.int32).reshape(2, 3),
        np.array([True, False]),
        np.arange(3, dtype=">f8"),
        (np.zeros((1, 2), dtype=np.uint8), {"k": np.array(1.5)}),
        wire.thunk(len),
        [2**64 - 1, -(2**63), -0.0, "héllo", b""],
    ]
    ours = [wire.encode(v).hex() for v in values]
    script = (
        "import sys\n"
        "from dreamlake.lakeshore import wire\n"
        "for h in sys.stdin.read().split():\n"
        "    v = wire.unpack(bytes.fromhex(h))\n"
        "    print(type(v).__name__, wire.pack(v).hex())\n"
    )
    out = subprocess.run([py, "-c", script], input=" ".join(ours), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    for i, h in enumerate(ours):
        kind, again = lines[i].split()
        assert again == h, (i, values[i])
    assert lines[0].split()[0] == "tuple" and lines[2].split()[0] == "tuple"
    assert lines[9].split()[0] == "ExtType"
