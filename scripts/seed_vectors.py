"""Write the seed golden vectors: wire bytes produced by the real dreamlake-lakeshore codec.

Run by scripts/seed_vectors.sh, which makes a scratch virtual environment with the package
(``dreamlake-lakeshore==0.5.0``, ``import dreamlake.lakeshore``) and numpy and Pillow, and
calls ``python seed_vectors.py OUTDIR``. Every vector is the output of the package's own
``wire.pack``, ``wire.Envelope.to_bytes`` or ``wire.Frame.to_bytes``; this script never
encodes a value itself. It writes ``OUTDIR/NAME.msgpack`` for each and ``OUTDIR/index.json``:

    {"package": "dreamlake-lakeshore 0.5.0", ..., "vectors": [
      {"file": "NAME.msgpack", "about": "...", "hex": "...", "value": {typed JSON}}, ...]}

``value`` describes the value as Lakeshore's decoders must give it, in the typed-JSON form of
wire/testdata/golden/index.json (docs/wire.md): built from the Python value handed to the
package, with arrays normalised to their plain dtype name and little-endian data. Each
vector is also unpacked by the package and compared with that value, so a description that
disagrees with the package stops the script.

Lakeshore's Go tests (wire/seed_test.go) and Python tests (python/tests/test_wire_seed.py)
decode every vector to its value and re-encode it to exactly the file's bytes.
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from PIL import Image

from dreamlake.lakeshore import wire

PACKAGE = "dreamlake-lakeshore"


def describe(v: Any) -> dict[str, Any]:
    """The typed-JSON description of a Python value (docs/wire.md, Golden vectors)."""
    if v is None:
        return {"type": "nil"}
    if isinstance(v, bool):
        return {"type": "bool", "value": v}
    if isinstance(v, int):
        return {"type": "int", "value": str(v)}
    if isinstance(v, float):
        bits = struct.unpack(">Q", struct.pack(">d", v))[0]
        return {"type": "float64", "value": repr(v), "bits": format(bits, "x")}
    if isinstance(v, str):
        return {"type": "str", "value": v}
    if isinstance(v, bytes):
        return {"type": "bin", "hex": v.hex()}
    if isinstance(v, tuple):
        return {"type": "tuple", "items": [describe(x) for x in v]}
    if isinstance(v, list):
        return {"type": "array", "items": [describe(x) for x in v]}
    if isinstance(v, dict):
        return {"type": "map", "entries": {k: describe(x) for k, x in v.items()}}
    if isinstance(v, np.ndarray):
        little = np.ascontiguousarray(v).astype(v.dtype.newbyteorder("<"))
        return {"type": "ndarray", "dtype": v.dtype.name, "shape": list(v.shape), "hex": little.tobytes().hex()}
    if isinstance(v, Image.Image):
        raise TypeError("describe images from their packed bytes (image_description)")
    raise TypeError(f"no description for {type(v).__name__}")


def same(a: Any, b: Any) -> bool:
    """Whether the package's unpacked value b equals the packed value a (NaN equal to NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def image_description(packed: bytes) -> dict[str, Any]:
    """The description of a packed image, read from the bytes with plain msgpack."""
    ext = msgpack.unpackb(packed, raw=False, ext_hook=lambda code, data: msgpack.ExtType(code, data))
    assert isinstance(ext, msgpack.ExtType) and ext.code == wire.CODE_IMAGE, ext
    fmt, data = msgpack.unpackb(ext.data, raw=False)
    return {"type": "image", "format": fmt, "hex": data.hex()}


def tiny_image() -> Image.Image:
    img = Image.new("RGB", (2, 2))
    img.putdata([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)])
    return img


def values() -> list[tuple[str, str, Any]]:
    """(name, about, value) for every vector packed with wire.pack."""
    letters = lambda n: ("abcdefghij" * (n // 10 + 1))[:n]  # noqa: E731
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    out: list[tuple[str, str, Any]] = [
        ("nil", "None", None),
        ("bool-true", "True", True),
        ("bool-false", "False", False),
    ]
    for i in [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1,
              -1, -32, -33, -128, -129, -32768, -32769, -(2**31) - 1, -(2**63)]:
        out.append((f"int-minus-{-i}" if i < 0 else f"int-{i}", f"int {i}", i))
    out += [
        ("float-zero", "0.0 as float 64", 0.0),
        ("float-negative-zero", "-0.0 keeps its sign", -0.0),
        ("float-pi", "float 64", math.pi),
        ("float-inf", "+inf", math.inf),
        ("float-minus-inf", "-inf", -math.inf),
        ("float-nan", "Python's NaN (bits 7ff8000000000000)", math.nan),
        ("str-empty", "empty str", ""),
        ("str-hello", "fixstr", "hello"),
        ("str-unicode", "UTF-8 str", "héllo, 世界 ✓"),
        ("str-32", "str 8", letters(32)),
        ("str-256", "str 16", letters(256)),
        ("bin-empty", "empty bin", b""),
        ("bin-small", "bin 8", bytes([0, 1, 2, 255])),
        ("bin-256", "bin 16", bytes(range(256))),
        ("list-empty", "empty list", []),
        ("list-mixed", "list of mixed values", [1, "two", None, 3.5, True, b"x"]),
        ("list-16", "array 16", list(range(16))),
        ("list-nested", "lists and maps nested", [[1, [2, []]], {"k": [None]}]),
        ("map-empty", "empty dict", {}),
        ("map-unsorted", "keys in insertion order, not sorted", {"zeta": 1, "alpha": 2, "mid": 3}),
        ("map-nested-unsorted", "nested dicts keep insertion order",
         {"b": {"y": 1, "x": [{"z": None, "a": 2.5}]}, "a": {}}),
        ("map-16", "map 16, keys in reverse order", {f"k{25 - i}": i for i in range(16)}),
        ("tuple-empty", "ext 5: the empty tuple", ()),
        ("tuple-pair", "ext 5: the tuple (1, 'a')", (1, "a")),
        ("tuple-nested", "ext 5 inside ext 5: ((), (None,))", ((), (None,))),
        ("tuple-str-bytes", "ext 5: ('python', pickle bytes), the shape of Lakeshore version 1's thunk",
         ("python", b"\x80\x05\x95")),
        ("tuple-in-map", "ext 5 inside a dict", {"pair": (1, 2.5), "list": [1, 2.5]}),
        ("tuple-of-arrays", "ext 5 holding ext 1 values: (rgb, depth)",
         (np.zeros((1, 2, 3), dtype=np.uint8), np.ones((1, 2), dtype=np.float32))),
    ]
    for dt in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "complex64", "complex128"]:
        a = (np.arange(4) % 2).astype(dt) if dt == "bool" else (np.arange(4) - (1 if dt[0] in "ifc" else 0)).astype(dt)
        if dt.startswith("complex"):
            a = a + 1j * np.arange(4).astype(dt)
        out.append((f"ndarray-{dt}", f"ext 1: {dt} vector, dtype name {str(a.dtype)!r}", a))
    for code in [">i2", ">i4", ">i8", ">u4", ">f2", ">f4", ">f8", ">c8", ">c16"]:
        a = (np.arange(3) - 1).astype(code)
        if code[1] == "c":
            a = a + 1j * np.arange(3).astype(code)
            a = a.astype(code)
        name = "big-endian-" + np.dtype(code).name
        out.append((f"ndarray-{name}", f"ext 1: big-endian array, dtype {str(a.dtype)!r}, big-endian data", a))
    out += [
        ("ndarray-float32-2x3", "ext 1: float32 of shape [2, 3], C order", arr),
        ("ndarray-transposed", "ext 1: a transposed (non-contiguous) array, written in C order", arr.T),
        ("ndarray-0d", "ext 1: a 0-d float64 array", np.array(2.5)),
        ("ndarray-empty", "ext 1: empty int32 array of shape [0, 3]", np.zeros((0, 3), dtype=np.int32)),
        ("ndarray-in-map", "ext 1 inside a dict", {"points": np.arange(6, dtype=np.int64).reshape(3, 2), "n": 3}),
    ]
    return out


def envelope_args() -> tuple[bytes, bytes]:
    args = wire.pack([1, "two", (3, 4.5), np.arange(3, dtype=">i4")])
    kwargs = wire.pack({"scale": 0.5, "mask": np.array([True, False]), "name": "a"})
    return args, kwargs


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.msgpack"):
        old.unlink()
    vectors: list[dict[str, Any]] = []

    def add(name: str, about: str, data: bytes, desc: dict[str, Any]) -> None:
        (outdir / f"{name}.msgpack").write_bytes(data)
        vectors.append({"file": f"{name}.msgpack", "about": about, "hex": data.hex(), "value": desc})

    for name, about, v in values():
        data = wire.pack(v)
        back = wire.unpack(data)
        assert same(v, back), (name, v, back)
        add(name, about, data, describe(v))

    img = tiny_image()
    data = wire.pack(img)
    assert isinstance(wire.unpack(data), Image.Image)
    add("image-png", "ext 3: a 2x2 RGB image as PIL writes it, format 'PNG'", data, image_description(data))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    opened = Image.open(io.BytesIO(buf.getvalue()))
    data = wire.pack({"img": opened, "label": "cat"})
    desc = {"type": "map", "entries": {"img": image_description(wire.pack(opened)), "label": describe("cat")}}
    add("image-in-map", "ext 3 inside a dict", data, desc)

    args, kwargs = envelope_args()
    add("envelope-args", "an Envelope's args: wire.pack(list(args))", args,
        describe([1, "two", (3, 4.5), np.arange(3, dtype=">i4")]))
    add("envelope-kwargs", "an Envelope's kwargs: wire.pack(dict(kwargs))", kwargs,
        describe({"scale": 0.5, "mask": np.array([True, False]), "name": "a"}))
    fn = {"kind": "ref", "module": "json", "qualname": "dumps", "src_hash": "sha256:2aeed87f2853842e"}
    full = wire.Envelope(id="01JD0000000000000000000000", fn=fn, args=args, kwargs=kwargs, prefix="runs/7",
                         key="nightly-7", cfg={"code": "sha256:ab", "timeout": 30}, parent="01JC0000000000000000000000")
    minimal = wire.Envelope(id="01JD0000000000000000000001", fn=fn)
    for name, about, env in [("envelope", "an Envelope with every field set", full),
                             ("envelope-minimal", "an Envelope with the defaults (key, parent nil; args empty)", minimal)]:
        data = env.to_bytes()
        assert wire.Envelope.from_bytes(data) == env
        add(name, about, data, describe({"v": env.v, "id": env.id, "fn": env.fn, "args": env.args, "kwargs": env.kwargs,
                                         "prefix": env.prefix, "key": env.key, "cfg": env.cfg, "parent": env.parent}))

    K = wire.FrameKind
    frames = [
        ("frame-value", "VALUE frame: [0, seq, body, nil]", wire.Frame(K.VALUE, 0, {"loss": 0.25, "step": (1, 2)})),
        ("frame-value-array", "VALUE frame with an ndarray body", wire.Frame(K.VALUE, 1, np.arange(2, dtype=np.float64))),
        ("frame-begin", "BEGIN frame opening a CHUNK run", wire.Frame(K.BEGIN, 2, None, {"total": 6, "content_type": "text/plain"})),
        ("frame-chunk", "CHUNK frame: a slice of one large value as bin", wire.Frame(K.CHUNK, 3, b"abc")),
        ("frame-end", "END frame as the package's worker writes it: Frame(END, seq)", wire.Frame(K.END, 4)),
        ("frame-end-state", "END frame with meta", wire.Frame(K.END, 5, None, {"state": "succeeded"})),
        ("frame-error", "ERROR frame from wire.frame_error(ValueError('boom')), seq -1",
         wire.frame_error(ValueError("boom"))),
    ]
    for name, about, fr in frames:
        data = fr.to_bytes()
        got = wire.Frame.from_obj(wire.unpack(data))
        assert got.kind == fr.kind and got.seq == fr.seq and same(fr.meta, got.meta), name
        add(name, about, data, describe([int(fr.kind), fr.seq, fr.body, fr.meta]))

    index = {
        "package": f"{PACKAGE} {version(PACKAGE)}",
        "msgpack": version("msgpack"),
        "numpy": version("numpy"),
        "pillow": version("pillow"),
        "made_by": "scripts/seed_vectors.sh",
        "vectors": vectors,
    }
    (outdir / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(vectors)} vectors to {outdir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
