"""The wire codec beyond the golden vectors: every dtype, limits, refusals, optional types."""

from __future__ import annotations

import math
import random
import struct
import subprocess
import sys
from collections import OrderedDict, namedtuple
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from lakeshore import wire

GOLDEN = Path(__file__).resolve().parents[2] / "wire" / "testdata" / "golden"

NUMPY_DTYPES = [d for d in wire.DTYPES if d != "bfloat16"]


def roundtrip(v: Any, **kw: Any) -> Any:
    return wire.decode(wire.encode(v), **kw)


# ---------------------------------------------------------------------------------- ndarray


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_every_numpy_dtype_round_trips(dtype: str) -> None:
    rng = np.random.default_rng(7)
    a = (rng.random((3, 4)) * 100).astype(dtype)
    if dtype.startswith("complex"):
        a = a + 1j * a
    got = roundtrip(a)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.dtype(dtype) and got.shape == (3, 4)
    np.testing.assert_array_equal(got, a)
    # The payload is dtype name, shape, little-endian C-order bytes.
    data = wire.encode(a)
    assert dtype.encode() in data and a.astype(a.dtype.newbyteorder("<")).tobytes() in data


def test_bfloat16_with_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.0, 2.0, -0.5], dtype=ml_dtypes.bfloat16)
    data = wire.encode(a)
    assert data == wire.encode(wire.NDArray("bfloat16", (3,), a.tobytes()))
    got = wire.decode(data)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), [1.0, 2.0, -0.5])


def test_bfloat16_without_ml_dtypes_stays_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(wire._optional_modules, "ml_dtypes", None)
    raw = wire.NDArray("bfloat16", (2,), b"\x80\x3f\x00\x40")
    got = roundtrip(raw)
    assert got == raw
    with pytest.raises(ImportError, match="ml_dtypes"):
        got.numpy()


@pytest.mark.parametrize(
    "a",
    [
        np.zeros((0,), np.float64),
        np.zeros((3, 0, 2), np.int16),
        np.array(2.5),
        np.array(7, dtype=np.uint64),
        np.arange(24, dtype=np.int32).reshape(2, 3, 4).transpose(2, 0, 1),  # not contiguous
        np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        np.arange(10, dtype=np.int64)[::3],
        np.arange(6, dtype=">f8").reshape(3, 2),  # big endian
        np.array([True, False, True]),
    ],
    ids=["empty", "zero-dim-inside", "0d", "0d-uint64", "transposed", "fortran", "strided", "big-endian", "bool"],
)
def test_array_layouts(a: np.ndarray[Any, Any]) -> None:
    got = roundtrip(a)
    assert got.shape == a.shape and got.dtype.name == a.dtype.name
    np.testing.assert_array_equal(got, a)
    assert got.flags.writeable and got.flags.c_contiguous
    got[...] = 0  # decoded arrays are copies, never views of the input


def test_unsupported_numpy_dtypes_are_refused() -> None:
    for a in [np.array(["a"]), np.array([object()]), np.zeros(2, dtype=[("x", "i4")]), np.array(["2024"], "M8[D]")]:
        with pytest.raises(wire.EncodeError, match="has no wire form"):
            wire.encode({"a": a})


def test_numpy_scalars() -> None:
    assert wire.encode(np.int64(5)) == wire.encode(5)
    assert wire.encode(np.uint64(2**64 - 1)) == wire.encode(2**64 - 1)
    assert wire.encode(np.float64(0.5)) == wire.encode(0.5)
    assert wire.encode(np.float32(0.5)) == wire.encode(wire.Float32(0.5))
    assert wire.encode(np.bool_(True)) == b"\xc3"
    assert wire.encode(np.str_("x")) == wire.encode("x")
    with pytest.raises(wire.EncodeError, match="complex"):
        wire.encode(np.complex64(1 + 2j))


def test_tensor_modes() -> None:
    t = wire.Tensor("float32", (2,), struct.pack("<2f", 0.5, -0.5))
    assert roundtrip(t, tensors="raw") == t
    as_numpy = roundtrip(t, tensors="numpy")
    np.testing.assert_array_equal(as_numpy, np.array([0.5, -0.5], np.float32))
    np.testing.assert_array_equal(t.numpy(), as_numpy)
    if wire._optional("torch") is None:
        assert roundtrip(t) == t
        with pytest.raises(ImportError):
            roundtrip(t, tensors="torch")


def test_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    for dtype in ["float32", "bfloat16", "int64", "bool", "complex64", "uint8", "float16"]:
        x = torch.ones((2, 3), dtype=getattr(torch, dtype))
        data = wire.encode(x)
        assert data[:1] in (b"\xc7", b"\xc8", b"\xd8") and data[2 if data[0] == 0xC7 else 1] != 0
        got = wire.decode(data)
        assert isinstance(got, torch.Tensor) and got.dtype == x.dtype and torch.equal(got, x)
        assert wire.decode(data, tensors="raw").dtype == dtype
    assert wire.decode(wire.encode(torch.zeros((0, 3)))).shape == (0, 3)
    assert wire.decode(wire.encode(torch.tensor(1.5))).shape == ()


def test_array_validation() -> None:
    with pytest.raises(wire.EncodeError, match="needs 8"):
        wire.encode(wire.NDArray("float32", (2,), b"\x00" * 4))
    with pytest.raises(wire.EncodeError, match="unknown dtype"):
        wire.encode(wire.NDArray("float8", (1,), b"\x00"))
    with pytest.raises(wire.EncodeError, match="non-negative"):
        wire.encode(wire.Tensor("int8", (-1,), b""))
    with pytest.raises(wire.EncodeError, match="at most 64"):
        wire.encode(wire.NDArray("int8", (1,) * 65, b"\x00"))
    wire.encode(wire.NDArray("int8", (1,) * 64, b"\x00"))


def _array_ext(dtype: str, shape: list[int], data: bytes = b"", typ: int = 1) -> bytes:
    """An ndarray (or tensor) extension built by msgpack-python, not by this codec."""
    return msgpack.packb(msgpack.ExtType(typ, msgpack.packb([dtype, shape, data], use_bin_type=True)))


BIG = (1 << 63) - 1  # the largest dimension the wire carries (Go's math.MaxInt)


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        ("float32", [0, BIG]),  # the payload of the issue: Go and the JSON API accept it
        ("int16", [BIG, 0]),
        ("complex128", [3, 0, BIG]),
        ("int8", [1 << 32, 1 << 32, 0]),  # the product overflows before the zero: Go accepts it
        ("float64", [0] + [BIG] * 63),
    ],
    ids=["zero-then-max", "max-then-zero", "zero-among-huge", "overflow-then-zero", "sixty-three-huge"],
)
def test_zero_size_arrays_numpy_cannot_hold_are_decode_errors(dtype: str, shape: list[int]) -> None:
    # Valid wire values (Go's checkArray accepts them: zero elements, zero bytes) that numpy
    # cannot make: a DecodeError naming the limit, never numpy's raw ValueError.
    for typ, mode in [(1, "auto"), (2, "numpy")]:
        with pytest.raises(wire.DecodeError, match="cannot be held by numpy") as e:
            wire.decode(_array_ext(dtype, shape, typ=typ), tensors=mode)  # type: ignore[arg-type]
        assert "cannot be decoded here" in e.value.reason and e.value.path == "$"
    # The same from this codec's own encoding, and nested: the path says where.
    data = wire.encode({"x": [wire.NDArray(dtype, tuple(shape), b"")]})
    with pytest.raises(wire.DecodeError, match="cannot be held by numpy") as e:
        wire.decode(data)
    assert e.value.path == "$.x[0]"
    # Raw forms keep it (no allocation); asking numpy for it is a clear ValueError.
    raw = wire.decode(_array_ext(dtype, shape, typ=2), tensors="raw")
    assert raw == wire.Tensor(dtype, tuple(shape), b"")
    with pytest.raises(ValueError, match="cannot be held by numpy"):
        raw.numpy()


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [("float32", [0, (1 << 61) - 1]), ("int8", [0, BIG]), ("int16", [1 << 20, 1 << 20, 0]), ("bool", [0] * 64)],
)
def test_zero_size_arrays_numpy_can_hold_decode(dtype: str, shape: list[int]) -> None:
    got = wire.decode(_array_ext(dtype, shape))
    assert isinstance(got, np.ndarray) and got.shape == tuple(shape) and got.size == 0
    assert got.dtype == np.dtype(dtype) and got.flags.writeable
    assert wire.encode(got) == wire.encode(wire.NDArray(dtype, tuple(shape), b""))


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ([-1], "want a non-negative int"),
        ([0, -5], "want a non-negative int"),
        ([1 << 32, 1 << 32, 1 << 32], "needs"),  # overflows uint64: Go refuses it too
        ([BIG, BIG], "needs"),
        ([1 << 62], "needs"),  # bytes over MaxInt: Go refuses it too
        ([1 << 63], "overflows int64"),
        ([0, (1 << 64) - 1], "overflows int64"),
    ],
)
def test_array_shapes_go_refuses_are_refused(shape: list[int], says: str) -> None:
    with pytest.raises(wire.DecodeError, match=says):
        wire.decode(_array_ext("float32", shape))


def test_encode_refuses_dimensions_over_int64() -> None:
    with pytest.raises(wire.EncodeError, match="dimension over"):
        wire.encode(wire.NDArray("float32", (0, 1 << 63), b""))


def test_no_memory_for_an_array_is_a_decode_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = np.frombuffer

    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(np, "frombuffer", no_memory)
    with pytest.raises(wire.DecodeError, match="MemoryError"):
        wire.decode(wire.encode(np.zeros(4, np.float32)))
    monkeypatch.setattr(np, "frombuffer", real)
    assert wire.decode(wire.encode(np.zeros(4, np.float32))).shape == (4,)


# ---------------------------------------------------------------------------------- scalars


@pytest.mark.parametrize("i", [0, 127, 128, 255, 256, 65535, 65536, 2**32, 2**63 - 1, 2**64 - 1, -1, -32, -33, -129, -(2**63)])
def test_ints_match_msgpack_python(i: int) -> None:
    assert wire.encode(i) == msgpack.packb(i)
    assert roundtrip(i) == i and type(roundtrip(i)) is int


@pytest.mark.parametrize("i", [2**64, -(2**63) - 1, 10**30])
def test_ints_out_of_range(i: int) -> None:
    with pytest.raises(wire.EncodeError, match="outside"):
        wire.encode([i])


def test_bool_and_int_subclasses() -> None:
    import enum

    class Color(enum.IntEnum):
        RED = 3

    assert wire.encode(True) == b"\xc3" and wire.encode(Color.RED) == b"\x03"
    assert roundtrip([True, 1]) == [True, 1] and type(roundtrip(True)) is bool


def test_float32() -> None:
    f = wire.Float32(0.1)
    assert f != 0.1 and float(f) == struct.unpack(">f", struct.pack(">f", 0.1))[0]
    assert wire.encode(f)[0] == 0xCA
    got = roundtrip(f)
    assert type(got) is wire.Float32 and got == f
    for special in [math.inf, -math.inf, -0.0]:
        assert struct.pack(">d", roundtrip(special)) == struct.pack(">d", special)
    assert math.isnan(roundtrip(math.nan))


def test_strings_and_bytes() -> None:
    assert roundtrip("héllo, 世界 ✓") == "héllo, 世界 ✓"
    assert roundtrip(bytearray(b"ab")) == b"ab"
    assert roundtrip(memoryview(b"abc")[1:]) == b"bc"
    with pytest.raises(wire.EncodeError, match="UTF-8"):
        wire.encode({"k": "\udcff"})
    with pytest.raises(wire.EncodeError, match="UTF-8"):
        wire.encode({"\ud800": 1})
    # A surrogate encoded in the CESU way is not UTF-8 for Go or Python.
    with pytest.raises(wire.DecodeError, match="UTF-8"):
        wire.decode(b"\xa3\xed\xa0\x80")


def test_maps() -> None:
    m = OrderedDict([("b", 1), ("a", 2), ("é", 3), ("B", 4)])
    assert wire.encode(m) == msgpack.packb(dict(sorted(m.items())))
    assert list(roundtrip(m)) == ["B", "a", "b", "é"]
    with pytest.raises(wire.EncodeError, match=r"map key 1 is int; Lakeshore maps have str keys only") as info:
        wire.encode({"outer": [{1: 2}]})
    assert info.value.path == "$.outer[0]"
    with pytest.raises(wire.EncodeError, match="str keys"):
        wire.encode({b"k": 1})


def test_tuples() -> None:
    Point = namedtuple("Point", "x y")
    v = {"pair": (1, 2.5), "list": [1, 2.5], "nested": ((), (None,), ((1,),)), "point": Point(1, 2)}
    got = roundtrip(v)
    assert got == {"pair": (1, 2.5), "list": [1, 2.5], "nested": ((), (None,), ((1,),)), "point": (1, 2)}
    assert type(got["pair"]) is tuple and type(got["list"]) is list
    big = tuple(range(70000))  # a tuple whose payload needs ext 32
    assert roundtrip(big) == big


def test_refused_values_name_the_path() -> None:
    cases: list[tuple[Any, str]] = [
        ({"a": {1, 2}}, "set"),
        ({"a": [1, 2j]}, "complex"),
        ({"a": object()}, "object"),
        ({"a": lambda: 1}, "thunk"),
        ({"a": date(2024, 1, 1)}, "aware datetime"),
        ({"a": datetime(2024, 1, 1)}, "naive"),
    ]
    for value, fragment in cases:
        with pytest.raises(wire.EncodeError) as info:
            wire.encode(value)
        assert fragment in str(info.value)
        assert info.value.path.startswith("$.a")
        assert isinstance(info.value, TypeError)


# ---------------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    "t",
    [
        datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc),
        datetime(1969, 7, 20, 20, 17, 40, 500000, tzinfo=timezone.utc),
        datetime(1, 1, 1, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        datetime(2600, 1, 1, tzinfo=timezone.utc),
    ],
)
def test_datetimes(t: datetime) -> None:
    got = roundtrip(t)
    assert got == t and got.tzinfo == timezone.utc and type(got) is datetime


def test_other_time_zones_keep_the_instant() -> None:
    cet = timezone(timedelta(hours=1))
    t = datetime(2024, 1, 2, 4, 4, 5, tzinfo=cet)
    assert wire.encode(t) == wire.encode(t.astimezone(timezone.utc))
    assert roundtrip(t) == t


def test_nanoseconds() -> None:
    ts = wire.Timestamp.from_unix(1704164645, 123456789)
    assert ts.nanosecond == 789 and ts.microsecond == 123456
    got = roundtrip(ts)
    assert type(got) is wire.Timestamp and got.unix() == (1704164645, 123456789)
    before = wire.Timestamp.from_unix(-1, 1)
    assert roundtrip(before).unix() == (-1, 1)
    import pickle

    assert pickle.loads(pickle.dumps(ts)).unix() == ts.unix()


def test_timestamps_outside_datetime() -> None:
    for sec, nsec in [(-62135596801, 0), (253402300800, 5), (2**62, 999999999), (-(2**63), 0)]:
        got = roundtrip(wire.UnixTime(sec, nsec))
        assert got == wire.UnixTime(sec, nsec)
    with pytest.raises(wire.EncodeError):
        wire.encode(wire.UnixTime(2**63, 0))


# ---------------------------------------------------------------------------------- image, thunk


def test_images_with_pil() -> None:
    PILImage = pytest.importorskip("PIL.Image")
    img = PILImage.new("RGB", (3, 2), (255, 0, 0))
    data = wire.encode({"img": img})
    raw = wire.decode(data)["img"]
    assert isinstance(raw, wire.Image) and raw.format == "png" and raw.data.startswith(b"\x89PNG")
    back = wire.decode(data, images="pil")["img"]
    assert back.size == (3, 2) and back.getpixel((0, 0)) == (255, 0, 0)
    assert raw.to_pil().size == (3, 2)
    with pytest.raises(wire.DecodeError, match="PIL cannot read"):
        wire.decode(wire.encode(wire.Image("png", b"not a png")), images="pil")


def test_image_format_rules() -> None:
    with pytest.raises(wire.EncodeError, match="non-empty"):
        wire.encode(wire.Image("", b""))


def test_thunks() -> None:
    pytest.importorskip("cloudpickle")
    base = 40
    th = wire.thunk(lambda: base + 2)
    assert th.language == "python"
    got = roundtrip({"fn": th})["fn"]
    assert isinstance(got, wire.Thunk) and got() == 42 and got.load()() == 42
    with pytest.raises(ValueError, match="only 'python'"):
        wire.Thunk("js", b"x").load()
    with pytest.raises(wire.EncodeError, match="language"):
        wire.encode(wire.Thunk("", b""))
    # dreamlake-lakeshore's Thunk(fn, *args): refused naming thunk(), not a thunk that
    # fails on the worker; the repr shows the size, not the pickle.
    with pytest.raises(TypeError, match=r"lakeshore\.thunk\(fn, \*args, \*\*kwargs\)"):
        wire.Thunk(len, [1, 2])  # type: ignore[arg-type]
    assert repr(wire.Thunk("python", b"abc")) == "Thunk(language='python', data=<3 bytes>)"


def test_pack_and_unpack_are_encode_and_decode() -> None:
    """dreamlake-lakeshore's wire.pack / wire.unpack names."""
    v = {"t": (1, [2.5]), "n": None, "b": b"\x00"}
    assert wire.pack(v) == wire.encode(v)
    assert wire.unpack(wire.pack(v)) == v


# ---------------------------------------------------------------------------------- limits


def nested(depth: int, leaf: Any = None) -> Any:
    v = leaf
    for _ in range(depth):
        v = [v]
    return v


def test_depth_limit_both_ways() -> None:
    ok = nested(wire.MAX_DEPTH)
    data = wire.encode(ok)
    assert data == b"\x91" * 512 + b"\xc0"
    assert wire.decode(data) == ok
    with pytest.raises(wire.EncodeError, match="deeper than 512"):
        wire.encode(nested(wire.MAX_DEPTH + 1))
    with pytest.raises(wire.DecodeError, match="deeper than 512"):
        wire.decode(b"\x91" * 513 + b"\xc0")
    # Tuples count as containers: 511 arrays around one tuple is 512 deep.
    t: Any = (1,)
    assert wire.decode(wire.encode(nested(511, t))) == nested(511, t)
    with pytest.raises(wire.EncodeError):
        wire.encode(nested(512, t))


def test_depth_needs_no_recursion() -> None:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(150)
    try:
        data = b"\x91" * 510 + b"\x81\xa1k\xd5\x05\x91\x01"  # 510 arrays, a map, a tuple
        v = wire.decode(data)
        assert wire.encode(v) == data
    finally:
        sys.setrecursionlimit(old)


def test_cycles_are_refused() -> None:
    a: list[Any] = []
    a.append(a)
    with pytest.raises(wire.EncodeError, match="cycle"):
        wire.encode(a)


@pytest.mark.parametrize(
    "data",
    [
        b"\xdb\xff\xff\xff\xff",  # str 32 declaring 4 GiB
        b"\xdf\xff\xff\xff\xff\x01",  # map 32 declaring 2^32-1 entries
        b"\xdc\x00\x05\x01\x02",  # array 16 of 5 with 2
        b"\xc9\xff\xff\xff\xff\x01",  # ext 32 declaring 4 GiB
        b"\x81\xa1a",  # map missing its value
        b"\x92\x01",  # array missing an element
        b"\xcb\x00\x00",  # float 64 cut short
        b"\xd4\x04\x92\x01",  # tuple payload cut by its ext length
        b"\xd5\x04\x91\x01\x02",  # bytes inside a tuple after its array
        b"\x82\xa1a\x01\xa1a\x02",  # duplicate key
        b"\xc7\x03\x01\x93\xa0\x90",  # ndarray with an empty dtype and no data
        b"\xd6\x01\x93\xa4bool\x90",  # ndarray payload cut
        b"\xc7\x09\x01\x93\xa4bool\x90\xa1x",  # ndarray data as str, not bin
        b"\xc7\x0c\x01\x93\xa4bool\x91\xcf\x80\x00\x00\x00\x00\x00\x00\x00\xc4\x00",  # dim overflows int64
    ],
)
def test_malformed_inputs(data: bytes) -> None:
    with pytest.raises(wire.DecodeError):
        wire.decode(data)


def test_every_prefix_of_every_vector_is_refused_cleanly() -> None:
    for f in GOLDEN.glob("*.msgpack"):
        data = f.read_bytes()
        for i in range(len(data)):
            with pytest.raises(wire.DecodeError):
                wire.decode(data[:i])


def test_mutated_vectors_never_raise_anything_else() -> None:
    rng = random.Random(14)
    vectors = [f.read_bytes() for f in sorted(GOLDEN.rglob("*.msgpack"))]
    for _ in range(20000):
        data = bytearray(rng.choice(vectors))
        if not data:
            continue
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            v = wire.decode(data, images="raw")
        except wire.DecodeError:
            continue
        assert wire.decode(wire.encode(v)) is not None or v is None


# ---------------------------------------------------------------------------------- interop


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randrange(-(2**63), 2**64), rng.randrange(-40, 200), rng.randrange(-70000, 70000)])
    if kind == 2:
        return rng.choice([rng.random() * 1e6, -0.0, math.inf])
    if kind == 3:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0xD7FF)])) for _ in range(rng.randrange(40)))
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 300])))
    if kind == 5:
        return rng.randrange(-5, 5)
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.choice([0, 2, 17]))]
    return {f"k{rng.randrange(100)}": random_value(rng, depth + 1) for _ in range(rng.choice([0, 3, 20]))}


def sort_maps(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: sort_maps(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sort_maps(x) for x in v]
    return v


def test_msgpack_python_agrees_on_plain_values() -> None:
    """msgpack-python, an independent implementation, reads and writes the same bytes."""
    rng = random.Random(3)
    for _ in range(500):
        v = random_value(rng)
        data = wire.encode(v)
        assert data == msgpack.packb(sort_maps(v), use_bin_type=True)
        assert msgpack.unpackb(data, raw=False, strict_map_key=True) == wire.decode(data)


def _general(value: Any) -> bytes:
    """The general encoder's bytes, bypassing the plain-data fast path."""
    out = bytearray()
    wire._encode_into(out, [], value)
    return bytes(out)


_EDGE_INTS = [0, 1, 31, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
              -1, -31, -32, -33, -127, -128, -129, -32767, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]


def _random_plain(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(10 if depth < 4 else 7)
    if pick == 0:
        return rng.choice([None, True, False])
    if pick == 1:
        return rng.choice(_EDGE_INTS)
    if pick == 2:
        return rng.choice([0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), 1e300, rng.random()])
    if pick == 3:
        return "é" * rng.choice([0, 1, 15, 16, 31, 32, 127, 128, 255, 256, 40000])
    if pick == 4:
        return "x" * rng.choice([0, 31, 32, 255, 256, 65535, 65536])
    if pick == 5:
        return bytes(rng.choice([0, 1, 255, 256, 65535, 65536]))
    if pick == 6:
        return rng.randrange(-(2**63), 2**64)
    if pick in (7, 8):
        return {rng.choice(["b", "a", "ü", "k" * 40, "", "Z"]) + str(i): _random_plain(rng, depth + 1)
                for i in range(rng.choice([0, 1, 3, 15, 16, 17]))}
    return [_random_plain(rng, depth + 1) for _ in range(rng.choice([0, 1, 15, 16, 17]))]


def test_plain_fast_path_is_the_canonical_form() -> None:
    """``encode`` hands plain data (None, bool, int, float, str, bytes, list, dict with str
    keys) to msgpack's C packer with sorted keys: its bytes must be the general encoder's,
    header sizes, integer forms, NaN bits and key order included."""
    rng = random.Random(7)
    for _ in range(3000):
        v = {"r": _random_plain(rng)} if rng.random() < 0.5 else [_random_plain(rng)]
        assert wire.encode(v) == _general(v), v
    # Not plain (the general encoder writes them): a tuple, a Mapping that is not a dict,
    # nesting deeper than the fast path goes; and errors it names: an out-of-range int, a
    # non-str key, a lone surrogate, a set.
    deep: Any = 1
    for _ in range(20):
        deep = [deep]
    for v in ({"t": (1, 2)}, {"b": True, "e": 2**64 - 1}, [OrderedDict(b=1, a=2)], [deep], {"d": {"x": 1.0}}):
        assert wire.encode(v) == _general(v)
    for bad in ({"i": 2**64}, {1: "a"}, ["\ud800"], {"s": {1, 2}}):
        with pytest.raises(wire.EncodeError):
            wire.encode(bad)


def test_numpy_is_imported_only_for_an_array() -> None:
    # import lakeshore and plain values never import numpy (most of a worker process's
    # start-up); an array's bytes decode to an ndarray all the same, importing it then.
    data = wire.encode({"a": np.arange(3, dtype=">i4"), "s": np.float32(1.5)})
    code = (
        "import sys, lakeshore\n"
        "from lakeshore import wire\n"
        "assert wire.decode(wire.encode({'a': [1, 2.0, 'x', b'y', None]})) == {'a': [1, 2.0, 'x', b'y', None]}\n"
        "assert 'numpy' not in sys.modules, 'numpy imported without an array'\n"
        f"v = wire.decode({data!r})\n"
        "import numpy as np\n"
        "assert isinstance(v['a'], np.ndarray) and v['a'].tolist() == [0, 1, 2], v\n"
        "assert float(v['s']) == 1.5, v\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
