"""The Lakeshore wire codec: one msgpack value with six extension types (wire version 2).

Every payload, result and frame value crosses processes and languages as one msgpack value
in the format of the Go package ``wire`` (``docs/wire.md`` in the repository). This module
reads and writes exactly that format, byte for byte: the golden vectors in
``wire/testdata/golden`` are its test.

Mapping (``decode`` gives the right-hand side, ``encode`` accepts it; ``unpack`` and ``pack``
are the same two by dreamlake-lakeshore's names):

=================  ==========================================================================
msgpack            Python
=================  ==========================================================================
nil, bool          ``None``, ``bool``
int / uint         ``int`` in [-2**63, 2**64)
float 64           ``float``
float 32           :class:`Float32` (a ``float`` that re-encodes as float 32)
str                ``str`` (valid UTF-8)
bin                ``bytes`` (``bytearray`` and ``memoryview`` encode too)
array              ``list``
map                ``dict`` with ``str`` keys (written sorted by key); :class:`Map` with
                   ``verbatim=True`` (written in its order)
ext -1 timestamp   aware ``datetime`` in UTC; :class:`Timestamp` when it has nanoseconds;
                   :class:`UnixTime` outside the years 1–9999
ext 1 ndarray      ``numpy.ndarray`` (bfloat16 needs ``ml_dtypes``; without it :class:`NDArray`)
ext 2 tensor       ``torch.Tensor`` when torch is installed, else :class:`Tensor`
ext 3 image        :class:`Image` (its file bytes); ``PIL.Image.Image`` with ``images="pil"``
ext 5 tuple        ``tuple`` (ext 4, version 1's tuple code, decodes to a tuple too)
ext 64 thunk       :class:`Thunk` (never unpickled by ``decode``; see :meth:`Thunk.load`)
=================  ==========================================================================

Wire version 2 (:data:`WIRE_VERSION`) adopted the extension codes of the dreamlake-lakeshore
codec (tuple 5) and moved the thunk to 64; version 1 wrote tuples as ext 4 and thunks as ext
5, which ``decode(data, version=1)`` reads. Arrays written with a numpy byte-order dtype name
(``">i4"``, big-endian data, as dreamlake-lakeshore writes a big-endian array) decode to the
plain dtype in native order; ``decode(data, verbatim=True)`` keeps them as written (an
:class:`NDArray` or :class:`Tensor`) and maps in their wire order (:class:`Map`), so that
``encode`` gives the input back byte for byte.

Decoding refuses what the Go decoder refuses (:class:`DecodeError`): truncated input, bytes
after the value, the byte ``0xc1``, map keys that are not str, duplicate keys, invalid UTF-8,
nesting deeper than :data:`MAX_DEPTH`, unknown extension codes and extension payloads that
break their layout. It also raises :class:`DecodeError` (never numpy's ``ValueError`` or a
``MemoryError``) for a valid array this process cannot hold: zero elements whose non-zero
dimensions × item size exceed numpy's limit of 2**63-1, as ``[0, 2**63-1]``, which Go accepts.
Encoding refuses values with no wire form (:class:`EncodeError`).
Both work without recursion, so nesting up to :data:`MAX_DEPTH` never hits Python's
recursion limit.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import importlib
import importlib.util
import io
import struct
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from msgpack import packb as _packb

if TYPE_CHECKING:
    # numpy is imported where an array is made (decode, a byte-order name's data): a
    # process that never holds one does not pay its import (≈ 0.1–0.3 s a process start on
    # the shared 2-core machine, most of ``import lakeshore``). A value can be a numpy
    # array or scalar only once numpy is in sys.modules, which is what encode checks.
    import numpy as np

__all__ = [
    "MAX_DEPTH",
    "MAX_DIMS",
    "DTYPES",
    "EXT_TIMESTAMP",
    "EXT_NDARRAY",
    "EXT_TENSOR",
    "EXT_IMAGE",
    "EXT_TUPLE",
    "EXT_THUNK",
    "EXT_TUPLE_V1",
    "EXT_THUNK_V1",
    "WIRE_VERSION",
    "Map",
    "THUNK_LANGUAGE",
    "WireError",
    "DecodeError",
    "EncodeError",
    "Float32",
    "NDArray",
    "Tensor",
    "Image",
    "Thunk",
    "Timestamp",
    "UnixTime",
    "encode",
    "decode",
    "pack",
    "unpack",
    "thunk",
]

MAX_DEPTH = 512
"""The deepest nesting of containers (arrays, maps, tuples) ``encode`` writes and ``decode``
accepts. The top-level value is at depth 0."""

MAX_DIMS = 64
"""The most dimensions an ndarray or tensor may have (numpy's limit)."""

EXT_TIMESTAMP = -1
EXT_NDARRAY = 1
EXT_TENSOR = 2
EXT_IMAGE = 3
EXT_TUPLE = 5
EXT_THUNK = 64
EXT_TUPLE_V1 = 4
"""Version 1's tuple code; still decoded as a tuple (no other writer uses it)."""
EXT_THUNK_V1 = 5
"""Version 1's thunk code, now the tuple's: only ``decode(data, version=1)`` reads it as a thunk."""

WIRE_VERSION = 2
"""The wire version ``encode`` writes (docs/wire.md, Versions)."""

THUNK_LANGUAGE = "python"
"""The language :func:`thunk` writes: the data is a cloudpickle of a Python callable."""

DTYPES: Mapping[str, int] = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}
"""Every dtype name the wire carries, with its width in bytes."""

_DTYPE_LIST = ", ".join(DTYPES) + ', or a byte-order name such as ">i4"'

# numpy's type codes (after the byte-order character) and the plain dtype names they stand for.
_BYTE_ORDER_CODES = {
    "b1": "bool",
    "i1": "int8",
    "u1": "uint8",
    "i2": "int16",
    "u2": "uint16",
    "f2": "float16",
    "i4": "int32",
    "u4": "uint32",
    "f4": "float32",
    "i8": "int64",
    "u8": "uint64",
    "f8": "float64",
    "c8": "complex64",
    "c16": "complex128",
}


def _plain_dtype(dtype: str) -> tuple[str, bool] | None:
    """The plain name of a byte-order dtype name and whether its data is big endian
    (``">i4"`` → ``("int32", True)``); None for any other name. ``"|"`` goes with one-byte
    types only, and numpy's ``"="`` (the writer's native order) is refused."""
    plain = _BYTE_ORDER_CODES.get(dtype[1:])
    if plain is None or not dtype:
        return None
    if dtype[0] == "<":
        return plain, False
    if dtype[0] == ">":
        return plain, True
    if dtype[0] == "|" and dtype[2] == "1":
        return plain, False
    return None


def _normalize(dtype: str, data: bytes) -> tuple[str, bytes]:
    """A byte-order dtype name and its data as the plain name and little-endian data; other
    names unchanged. The data must fit the dtype (checked by the caller)."""
    plain = _plain_dtype(dtype)
    if plain is None:
        return dtype, data
    name, big = plain
    if not big or DTYPES[name] == 1:
        return name, data
    import numpy as np

    swapped = np.frombuffer(data, dtype=np.dtype(dtype)).byteswap()
    return name, swapped.tobytes()

_MIN_INT = -(1 << 63)
_MAX_INT = (1 << 63) - 1
_MAX_UINT = (1 << 64) - 1
_MAX_U32 = (1 << 32) - 1

# Python datetime covers years 1..9999; outside, timestamps decode to UnixTime.
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
# Go's time.Unix limit: the largest second it represents.
_MAX_TIMESTAMP_SECONDS = (1 << 63) - 1 - 62135596800


# --------------------------------------------------------------------------------------------
# Errors


class WireError(Exception):
    """Base class of the codec's errors."""


class DecodeError(WireError, ValueError):
    """The input bytes are not one valid Lakeshore wire value (Go: ``wire.ErrMalformed``).

    Attributes:
        offset: byte offset in the input where the offending value starts.
        path: where the value is, e.g. ``"$.inputs[2]"`` (``"$"`` is the top-level value).
        reason: what was wrong and what is allowed.
    """

    def __init__(self, offset: int, path: str, reason: str) -> None:
        self.offset = offset
        self.path = path
        self.reason = reason
        super().__init__(f"wire: malformed input at {_short_path(path)} (byte {offset}): {reason}")


class EncodeError(WireError, TypeError):
    """A Python value has no wire form (Go: ``wire.ErrUnsupported``).

    Attributes:
        path: where the value is inside the argument, e.g. ``"$.inputs[2]"``.
        type_name: the Python type of the offending value, e.g. ``"set"``.
        reason: what was wrong and what is allowed.
    """

    def __init__(self, path: str, type_name: str, reason: str) -> None:
        self.path = path
        self.type_name = type_name
        self.reason = reason
        super().__init__(f"wire: cannot encode {type_name} at {_short_path(path)}: {reason}")


def _short_path(p: str) -> str:
    if len(p) <= 120:
        return p
    return p[:60] + "…" + p[-60:]


def _key_seg(k: str) -> str:
    if k == "":
        return '[""]'
    for i, c in enumerate(k):
        if not (c == "_" or "a" <= c <= "z" or "A" <= c <= "Z" or (i > 0 and "0" <= c <= "9")):
            return "[" + _go_quote(k) + "]"
    return "." + k


def _go_quote(s: str) -> str:
    out = ['"']
    for c in s:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Value types


class Float32(float):
    """A float that encodes as msgpack float 32 (decoding float 32 gives one).

    Its value is the nearest single-precision number, so ``Float32(0.1) != 0.1``.
    """

    __slots__ = ()

    def __new__(cls, value: float | str | int = 0.0) -> Float32:
        single: float = struct.unpack(">f", struct.pack(">f", float(value)))[0]
        return super().__new__(cls, single)

    def __repr__(self) -> str:
        return f"Float32({float.__repr__(self)})"


class Map(dict[str, Any]):
    """A dict that :func:`encode` writes in its insertion order (a plain ``dict`` is written
    sorted by key). ``decode(data, verbatim=True)`` gives maps as ``Map`` in their wire
    order, so re-encoding gives the same bytes whatever order the writer chose (the
    dreamlake-lakeshore codec writes insertion order)."""

    __slots__ = ()


def _check_array(dtype: str, shape: tuple[int, ...], n: int) -> str:
    """Return "" if dtype, shape and n data bytes form a valid array, else the reason."""
    plain = _plain_dtype(dtype)
    size = DTYPES.get(plain[0] if plain else dtype)
    if size is None:
        return f"unknown dtype {_go_quote(dtype)}; want one of {_DTYPE_LIST}"
    if len(shape) > MAX_DIMS:
        return f"shape has {len(shape)} dimensions; at most {MAX_DIMS} are allowed"
    count = 1
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            return f"shape {_shape_text(shape)} has a dimension that is not a non-negative int"
        if d > _MAX_INT:
            return f"shape {_shape_text(shape)} has a dimension over {_MAX_INT} (the wire's int64)"
        count *= d
    want = count * size
    if n != want:
        return (
            f"data is {n} bytes; shape {_shape_text(shape)} of {dtype} needs {want} "
            f"({count} elements × {size} bytes)"
        )
    return ""


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + " ".join(str(d) for d in shape) + "]"


@dataclasses.dataclass(frozen=True)
class _WireArray:
    """The layout :class:`NDArray` and :class:`Tensor` share: a dtype, a shape and the
    elements' bytes, checked by ``validate`` and read by ``numpy`` the one way for both."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def validate(self) -> None:
        """Raise :class:`EncodeError` unless the array can be encoded."""
        reason = _check_array(self.dtype, tuple(self.shape), len(self.data))
        if reason:
            raise EncodeError("$", type(self).__name__, reason)

    def numpy(self) -> np.ndarray[Any, Any]:
        """Return the elements as a writable ``numpy.ndarray`` (bfloat16 needs ``ml_dtypes``)."""
        self.validate()
        return _to_numpy(self.dtype, tuple(self.shape), self.data, "$")


@dataclasses.dataclass(frozen=True)
class NDArray(_WireArray):
    """An n-dimensional array in its wire form (extension 1), for dtypes numpy cannot hold.

    ``decode`` gives a ``numpy.ndarray`` whenever it can; it gives an ``NDArray`` only for
    bfloat16 without ``ml_dtypes``, and with ``verbatim=True`` for a byte-order dtype name.
    ``encode`` accepts both.

    Attributes:
        dtype: a name from :data:`DTYPES`, e.g. ``"bfloat16"``; or a numpy byte-order name
            (``">i4"``, ``"<f8"``, ``"|u1"``) as ``decode(..., verbatim=True)`` keeps it.
        shape: dimensions, outermost first; ``()`` is a 0-d array of one element.
        data: ``product(shape) * DTYPES[dtype]`` bytes, C order, each element little endian
            (big endian under a ``">"`` name).
    """


@dataclasses.dataclass(frozen=True)
class Tensor(_WireArray):
    """A tensor in its wire form (extension 2); the layout is :class:`NDArray`'s.

    ``decode`` gives a ``torch.Tensor`` when torch is installed (or ``tensors="torch"``),
    else a ``Tensor``; ``encode`` accepts both, and writes ``torch.Tensor`` values as tensors.

    Attributes:
        dtype: a name from :data:`DTYPES`.
        shape: dimensions, outermost first.
        data: the elements in C order, little endian.
    """

    def torch(self) -> Any:
        """Return the tensor as a ``torch.Tensor`` (raises ``ImportError`` without torch)."""
        self.validate()
        return _to_torch(self.dtype, tuple(self.shape), self.data)


@dataclasses.dataclass(frozen=True)
class Image:
    """An encoded image (extension 3), kept as its file bytes.

    Attributes:
        format: the encoding, e.g. ``"png"``, ``"jpeg"``; never empty. Its case carries no
            meaning and is kept as written: PIL and dreamlake-lakeshore write ``"PNG"``,
            :meth:`from_pil` lower case.
        data: the image file.
    """

    format: str
    data: bytes

    def to_pil(self) -> Any:
        """Open the image with PIL (``pillow``), fully loaded."""
        from PIL import Image as PILImage

        img = PILImage.open(io.BytesIO(self.data))
        img.load()
        return img

    @classmethod
    def from_pil(cls, img: Any, format: str | None = None) -> Image:
        """Encode a PIL image as ``format`` (default: the format it was read from, else png)."""
        fmt = (format or getattr(img, "format", None) or "png").lower()
        buf = io.BytesIO()
        img.save(buf, format=fmt)
        return cls(fmt, buf.getvalue())


@dataclasses.dataclass(frozen=True)
class Thunk:
    """Code passed by value (extension 64; 5 in wire version 1), opaque to the codec.

    Attributes:
        language: the runtime that can run it; :func:`thunk` writes ``"python"``
            (a cloudpickle of a callable).
        data: the serialized code.
    """

    language: str
    data: bytes

    def __post_init__(self) -> None:
        # Thunk(fn, *args) is how dreamlake-lakeshore spells thunk(fn, *args): refused here
        # with the name to use, not made into a thunk that fails only when a worker runs it.
        if not isinstance(self.language, str) or not isinstance(self.data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"Thunk(language: str, data: bytes) is a thunk's wire value, not Thunk({type(self.language).__name__}, "
                f"{type(self.data).__name__}): to carry a callable, use lakeshore.thunk(fn, *args, **kwargs)"
            )

    def __repr__(self) -> str:
        return f"Thunk(language={self.language!r}, data=<{len(self.data)} bytes>)"

    def load(self) -> Any:
        """Unpickle the callable of a ``"python"`` thunk.

        Unpickling runs code: call it only on thunks from a producer you trust (a worker of
        your own queue). Raises ``ValueError`` for another language.
        """
        if self.language != THUNK_LANGUAGE:
            raise ValueError(f"thunk language is {self.language!r}; only {THUNK_LANGUAGE!r} thunks run in Python")
        import pickle

        return pickle.loads(self.data)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Load the callable and call it."""
        return self.load()(*args, **kwargs)


def thunk(fn: Any, /, *args: Any, **kwargs: Any) -> Thunk:
    """Carry a Python callable by value: a :class:`Thunk` of language ``"python"``.

    With ``args``/``kwargs`` (as dreamlake-lakeshore's ``thunk(fn, *args, **kwargs)``), the
    thunk is ``functools.partial(fn, *args, **kwargs)``: calling it calls ``fn`` with them.
    Needs ``cloudpickle`` (``pip install 'lakeshore-queue[thunk]'``), which pickles lambdas and
    closures by value. A Python worker runs it with :meth:`Thunk.load`.
    """
    if not callable(fn):
        raise TypeError(f"thunk wants a callable, got {type(fn).__name__}")
    if args or kwargs:
        fn = functools.partial(fn, *args, **kwargs)
    try:
        import cloudpickle
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("lakeshore.thunk needs cloudpickle: pip install 'lakeshore-queue[thunk]'") from e
    return Thunk(THUNK_LANGUAGE, cast(bytes, cloudpickle.dumps(fn)))


class Timestamp(_dt.datetime):
    """An aware UTC datetime that keeps nanoseconds, which ``datetime`` cannot.

    ``decode`` gives one for timestamps whose nanoseconds are not a whole number of
    microseconds; ``encode`` writes all of them. Comparison and arithmetic are
    ``datetime``'s (they ignore :attr:`nanosecond`).
    """

    __slots__ = ("_nanosecond",)
    _nanosecond: int

    @classmethod
    def from_unix(cls, seconds: int, nanoseconds: int) -> Timestamp:
        """The instant ``seconds`` (since 1970, UTC) plus ``nanoseconds`` (0 ≤ n < 10**9)."""
        if not 0 <= nanoseconds < 1_000_000_000:
            raise ValueError(f"nanoseconds {nanoseconds}; want 0 <= n < 1000000000")
        base = _EPOCH + _dt.timedelta(seconds=seconds, microseconds=nanoseconds // 1000)
        ts = cls(
            base.year,
            base.month,
            base.day,
            base.hour,
            base.minute,
            base.second,
            base.microsecond,
            tzinfo=_dt.timezone.utc,
        )
        ts._nanosecond = nanoseconds % 1000
        return ts

    @property
    def nanosecond(self) -> int:
        """Nanoseconds beyond :attr:`microsecond`, 0–999."""
        return getattr(self, "_nanosecond", 0)

    def unix(self) -> tuple[int, int]:
        """Return (seconds since 1970, nanoseconds 0–999,999,999)."""
        sec, nsec = _unix(self)
        return sec, nsec

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (Timestamp.from_unix, self.unix())

    def __repr__(self) -> str:
        return f"Timestamp({self.isoformat()!r}, nanosecond={self.nanosecond})"


@dataclasses.dataclass(frozen=True)
class UnixTime:
    """A timestamp outside Python's ``datetime`` range (years 1–9999).

    Attributes:
        seconds: seconds since 1970-01-01T00:00:00Z (negative before).
        nanoseconds: 0 ≤ n < 10**9.
    """

    seconds: int
    nanoseconds: int


def _unix(t: _dt.datetime) -> tuple[int, int]:
    delta = t - _EPOCH
    sec = delta.days * 86400 + delta.seconds
    nsec = delta.microseconds * 1000 + (t.nanosecond if isinstance(t, Timestamp) else 0)
    return sec, nsec


# --------------------------------------------------------------------------------------------
# numpy, ml_dtypes, torch


_optional_modules: dict[str, Any] = {}


def _optional(name: str) -> Any:
    """Import an optional module once; None when it is not installed."""
    if name not in _optional_modules:
        mod: Any = None
        if importlib.util.find_spec(name) is not None:
            try:
                mod = importlib.import_module(name)
            except ImportError:  # pragma: no cover - a broken installation
                mod = None
        _optional_modules[name] = mod
    return _optional_modules[name]


def _numpy_dtype(name: str) -> np.dtype[Any] | None:
    """The little-endian numpy dtype of a wire dtype name; None for bfloat16 without ml_dtypes."""
    import numpy as np

    if name == "bfloat16":
        ml = _optional("ml_dtypes")
        if ml is None:
            return None
        bf: np.dtype[Any] = np.dtype(ml.bfloat16)
        return bf
    le: np.dtype[Any] = np.dtype(name).newbyteorder("<")
    return le


def _numpy_span_reason(dtype: str, shape: tuple[int, ...]) -> str:
    """Return "" if numpy can hold an array of ``shape`` and ``dtype``, else the reason.

    numpy refuses an array whose non-zero dimensions times the item size exceed its index
    type (int64) even when a zero dimension makes it empty: the wire (and Go) accept
    ``[0, 9223372036854775807]``, numpy cannot make it."""
    span = DTYPES[dtype]
    for d in shape:
        if d:
            span *= d
    if span > _MAX_INT:
        return (
            f"shape {_shape_text(shape)} of {dtype} cannot be held by numpy: its non-zero dimensions "
            f"× {DTYPES[dtype]} bytes are {span}, over numpy's limit of {_MAX_INT} (even for an array of "
            "zero elements)"
        )
    return ""


def _to_numpy(dtype: str, shape: tuple[int, ...], data: bytes | memoryview, path: str) -> np.ndarray[Any, Any]:
    """The array as a writable numpy copy; ``ValueError`` when numpy cannot hold its shape
    (checked before anything is allocated), ``ImportError`` for bfloat16 without ml_dtypes."""
    import numpy as np

    dtype, data = _normalize(dtype, bytes(data))
    nd = _numpy_dtype(dtype)
    if nd is None:
        raise ImportError("bfloat16 arrays need ml_dtypes: pip install 'lakeshore-queue[bfloat16]'")
    reason = _numpy_span_reason(dtype, shape)
    if reason:
        raise ValueError(reason)
    if not data:
        return np.empty(shape, dtype=nd)
    arr = np.frombuffer(bytearray(data), dtype=nd).reshape(shape)
    return arr


_TORCH_DTYPES = {
    "bool": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "complex64": "complex64",
    "complex128": "complex128",
}


def _to_torch(dtype: str, shape: tuple[int, ...], data: bytes | memoryview) -> Any:
    torch = _optional("torch")
    if torch is None:
        raise ImportError("torch is not installed")
    dtype, data = _normalize(dtype, bytes(data))
    tdt = getattr(torch, _TORCH_DTYPES[dtype], None)
    if tdt is None:  # an old torch without uint16/32/64
        raise ImportError(f"this torch has no {dtype} dtype")
    if len(data) == 0:
        return torch.empty(shape, dtype=tdt)
    t = torch.frombuffer(bytearray(data), dtype=tdt).reshape(shape)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian test machine
        raise ImportError("tensors on big-endian machines are not supported")
    return t


def _torch_parts(t: Any, path: str) -> tuple[str, tuple[int, ...], bytes]:
    torch = sys.modules["torch"]
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise EncodeError(path, "torch.Tensor", f"dtype {name} has no wire form; want one of {_DTYPE_LIST}")
    t = t.detach().to("cpu").contiguous()
    shape = tuple(int(d) for d in t.shape)
    if t.numel() == 0:
        return name, shape, b""
    raw = t.reshape(-1).view(torch.uint8)
    return name, shape, bytes(raw.numpy().tobytes())


def _numpy_parts(a: np.ndarray[Any, Any], path: str) -> tuple[str, tuple[int, ...], bytes]:
    name = a.dtype.name
    if name not in DTYPES or a.dtype.fields is not None:
        raise EncodeError(
            path,
            "numpy.ndarray",
            f"dtype {a.dtype} has no wire form; want one of {_DTYPE_LIST}",
        )
    if len(a.shape) > MAX_DIMS:
        raise EncodeError(path, "numpy.ndarray", f"shape has {len(a.shape)} dimensions; at most {MAX_DIMS} are allowed")
    le = a.dtype.newbyteorder("<") if a.dtype.byteorder in (">", "=") and a.dtype.itemsize > 1 else a.dtype
    return name, tuple(int(d) for d in a.shape), a.astype(le, copy=False).tobytes(order="C")


# --------------------------------------------------------------------------------------------
# Encoding


_pack_f64 = struct.Struct(">Bd").pack
_pack_f32 = struct.Struct(">Bf").pack
_pack_b_b = struct.Struct(">BB").pack
_pack_b_h = struct.Struct(">BH").pack
_pack_b_i = struct.Struct(">BI").pack
_pack_b_q = struct.Struct(">BQ").pack
_pack_sb = struct.Struct(">Bb").pack
_pack_sh = struct.Struct(">Bh").pack
_pack_si = struct.Struct(">Bi").pack
_pack_sq = struct.Struct(">Bq").pack


def _int_bytes(i: int) -> bytes:
    if i >= 0:
        if i < 0x80:
            return bytes((i,))
        if i <= 0xFF:
            return _pack_b_b(0xCC, i)
        if i <= 0xFFFF:
            return _pack_b_h(0xCD, i)
        if i <= 0xFFFFFFFF:
            return _pack_b_i(0xCE, i)
        return _pack_b_q(0xCF, i)
    if i >= -32:
        return bytes((i & 0xFF,))
    if i >= -0x80:
        return _pack_sb(0xD0, i)
    if i >= -0x8000:
        return _pack_sh(0xD1, i)
    if i >= -0x80000000:
        return _pack_si(0xD2, i)
    return _pack_sq(0xD3, i)


def _str_header(n: int) -> bytes:
    if n < 32:
        return bytes((0xA0 | n,))
    if n <= 0xFF:
        return _pack_b_b(0xD9, n)
    if n <= 0xFFFF:
        return _pack_b_h(0xDA, n)
    return _pack_b_i(0xDB, n)


def _bin_header(n: int) -> bytes:
    if n <= 0xFF:
        return _pack_b_b(0xC4, n)
    if n <= 0xFFFF:
        return _pack_b_h(0xC5, n)
    return _pack_b_i(0xC6, n)


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n <= 0xFFFF:
        return _pack_b_h(0xDC, n)
    return _pack_b_i(0xDD, n)


def _map_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x80 | n,))
    if n <= 0xFFFF:
        return _pack_b_h(0xDE, n)
    return _pack_b_i(0xDF, n)


def _ext_header(typ: int, n: int) -> bytes:
    t = typ & 0xFF
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}.get(n)
    if fixed is not None:
        return bytes((fixed, t))
    if n <= 0xFF:
        return bytes((0xC7, n, t))
    if n <= 0xFFFF:
        return struct.pack(">BHB", 0xC8, n, t)
    return struct.pack(">BIB", 0xC9, n, t)


def _utf8(s: str, path: str, what: str) -> bytes:
    try:
        b = s.encode("utf-8")
    except UnicodeEncodeError:
        raise EncodeError(path, type(s).__name__, f"{what} is not valid UTF-8 (a lone surrogate); send bytes as bytes") from None
    if len(b) > _MAX_U32:
        raise EncodeError(path, type(s).__name__, f"{what} is longer than 2^32-1 bytes")
    return b


def _array_ext(typ: int, dtype: str, shape: tuple[int, ...], data: bytes, path: str, type_name: str) -> bytes:
    reason = _check_array(dtype, shape, len(data))
    if reason:
        raise EncodeError(path, type_name, reason)
    parts = [_array_header(3), _str_header(len(dtype)), dtype.encode(), _array_header(len(shape))]
    parts.extend(_int_bytes(d) for d in shape)
    parts.append(_bin_header(len(data)))
    payload_head = b"".join(parts)
    n = len(payload_head) + len(data)
    if n > _MAX_U32:
        raise EncodeError(path, type_name, "payload is larger than 2^32-1 bytes")
    return _ext_header(typ, n) + payload_head + data


def _pair_ext(typ: int, name: str, data: bytes, path: str, type_name: str, field: str) -> bytes:
    if not isinstance(name, str) or name == "":
        raise EncodeError(path, type_name, f"{field} must be a non-empty UTF-8 string")
    nb = _utf8(name, path, field)
    if len(data) > _MAX_U32:
        raise EncodeError(path, type_name, "data is longer than 2^32-1 bytes")
    payload_head = _array_header(2) + _str_header(len(nb)) + nb + _bin_header(len(data))
    n = len(payload_head) + len(data)
    if n > _MAX_U32:
        raise EncodeError(path, type_name, "payload is larger than 2^32-1 bytes")
    return _ext_header(typ, n) + payload_head + data


def _timestamp_ext(sec: int, nsec: int, path: str) -> bytes:
    if not 0 <= nsec < 1_000_000_000:
        raise EncodeError(path, "timestamp", f"nanoseconds {nsec}; want 0 <= n < 1000000000")
    if not _MIN_INT <= sec <= _MAX_TIMESTAMP_SECONDS:
        raise EncodeError(path, "timestamp", "time is outside the range of Unix seconds in an int64")
    if sec >> 34 == 0:
        data64 = (nsec << 34) | sec
        if data64 >> 32 == 0:
            return b"\xd6\xff" + struct.pack(">I", data64)
        return b"\xd7\xff" + struct.pack(">Q", data64)
    return b"\xc7\x0c\xff" + struct.pack(">Iq", nsec, sec)


class _Container:
    """An array, map or tuple being written by the iterative encoder."""

    __slots__ = ("kind", "items", "keys", "index", "start", "path")

    def __init__(self, kind: str, items: list[Any], keys: list[str] | None, start: int, path: str) -> None:
        self.kind = kind  # "array", "map" or "tuple"
        self.items = items
        self.keys = keys
        self.index = -1
        self.start = start  # tuple: where its 6 reserved header bytes begin
        self.path = path

    def child_path(self) -> str:
        """The path segment of the element being written, e.g. ``.key`` or ``[3]``."""
        if self.keys is not None:
            return _key_seg(self.keys[self.index])
        return f"[{self.index}]"


def _type_name(v: Any) -> str:
    t = type(v)
    if t.__module__ in ("builtins", None):
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


def encode(value: Any) -> bytes:
    """Encode ``value`` as one msgpack value in the canonical wire form.

    Integers take their smallest form (non-negative ones unsigned), floats keep their width
    (``float`` is float 64, :class:`Float32` and ``numpy.float32`` float 32), map keys are
    sorted (a :class:`Map` keeps its order), so equal values give equal bytes: the form of
    the golden vectors. Tuples are written as ext 5 and thunks as ext 64 (wire version 2).

    Accepted: ``None``, ``bool``, ``int`` in [-2**63, 2**64), ``float``, ``str``, ``bytes``,
    ``bytearray``, ``memoryview``, ``list``, ``dict`` with ``str`` keys, ``tuple``, numpy
    scalars and arrays, ``torch.Tensor``, ``PIL.Image.Image`` (written in its own format,
    else png), aware ``datetime``, and :class:`NDArray`, :class:`Tensor`, :class:`Image`,
    :class:`Thunk`, :class:`UnixTime`.

    Raises:
        EncodeError: for anything else (sets, complex numbers, naive datetimes, objects —
            wrap callables with :func:`thunk`), strings with lone surrogates, dicts with
            non-str keys, invalid arrays, and nesting deeper than :data:`MAX_DEPTH` (a cycle).
    """
    t = type(value)
    if t is dict or t is list:
        # Plain data (the common record, payload and result) is what msgpack's C packer
        # writes byte for byte as the canonical form, once its maps' keys are sorted.
        plain = _plain(value, 0)
        if plain is not _NOT_PLAIN:
            try:
                return cast(bytes, _packb(plain, use_bin_type=True))
            except (ValueError, OverflowError, UnicodeEncodeError, TypeError):
                pass  # the loop below names what is wrong
    out = bytearray()
    stack: list[_Container] = []
    try:
        _encode_into(out, stack, value)
    except EncodeError as e:
        # Errors are raised with paths relative to the failing value ("$", "$.k"); the stack
        # says where that value is. Paths are built only on failure.
        where = "$" + "".join(c.child_path() for c in stack)
        raise EncodeError(where + e.path[1:], e.type_name, e.reason) from None
    return bytes(out)


_NOT_PLAIN = object()
_PLAIN_DEPTH = 8  # deeper values take the general encoder (which bounds depth itself)
_SCALARS = (type(None), bool, float, str, bytes)


def _plain(v: Any, depth: int) -> Any:
    """``v`` with every map's keys sorted when it holds only ``None``, ``bool``, ``int`` in
    [-2**63, 2**64), ``float``, ``str``, ``bytes``, ``list`` and ``dict`` with ``str`` keys
    (exact types, no subclass), at most :data:`_PLAIN_DEPTH` deep; else ``_NOT_PLAIN``.
    For such values msgpack's packer (``use_bin_type=True``) writes the canonical form:
    smallest integer forms, float 64, str and bin with their smallest headers."""
    t = type(v)
    if t is int:
        return v if _MIN_INT <= v <= _MAX_UINT else _NOT_PLAIN
    if t in _SCALARS:
        return v
    if depth >= _PLAIN_DEPTH:
        return _NOT_PLAIN
    if t is dict:
        for k in v:
            if type(k) is not str:
                return _NOT_PLAIN
        out = {}
        for k in sorted(v):
            x = v[k]
            tx = type(x)
            if tx in _SCALARS or (tx is int and _MIN_INT <= x <= _MAX_UINT):
                out[k] = x
            else:  # a container, or not plain
                x = _plain(x, depth + 1)
                if x is _NOT_PLAIN:
                    return _NOT_PLAIN
                out[k] = x
        return out
    if t is list:
        items = []
        for x in v:
            tx = type(x)
            if not (tx in _SCALARS or (tx is int and _MIN_INT <= x <= _MAX_UINT)):
                x = _plain(x, depth + 1)
                if x is _NOT_PLAIN:
                    return _NOT_PLAIN
            items.append(x)
        return items
    return _NOT_PLAIN


def _encode_into(out: bytearray, stack: list[_Container], value: Any) -> None:
    """The loop of :func:`encode`: writes value into out, containers through stack."""
    v = value
    str_header = _str_header
    while True:
        # Write v, or open it as a container.
        t = type(v)
        opened: _Container | None = None
        if v is None:
            out.append(0xC0)
        elif t is str:
            try:
                b = v.encode("utf-8")
            except UnicodeEncodeError:
                b = _utf8(v, "$", "string")
            if len(b) < 32:
                out.append(0xA0 | len(b))
            else:
                out += str_header(len(b))
            out += b
        elif t is int:
            if 0 <= v < 0x80:
                out.append(v)
            elif not _MIN_INT <= v <= _MAX_UINT:
                raise EncodeError("$", "int", f"{v} is outside [-2^63, 2^64)")
            else:
                out += _int_bytes(v)
        elif t is float:
            out += _pack_f64(0xCB, v)
        elif t is bool:
            out.append(0xC3 if v else 0xC2)
        elif t is bytes:
            if len(v) > _MAX_U32:
                raise EncodeError("$", "bytes", "longer than 2^32-1 bytes")
            out += _bin_header(len(v))
            out += v
        elif t is list or t is dict or t is tuple:
            opened = _open(out, v, "$", len(stack))
        else:
            opened = _encode_other(out, v, "$", len(stack))
        if opened is not None:
            if opened.items:
                stack.append(opened)
            else:
                _close(out, opened)
        # Move to the next value to write, closing finished containers.
        while stack:
            c = stack[-1]
            c.index += 1
            if c.index < len(c.items):
                if c.keys is not None:
                    k = c.keys[c.index]
                    try:
                        kb = k.encode("utf-8")
                    except UnicodeEncodeError:
                        kb = _utf8(k, "$", "map key")
                    if len(kb) < 32:
                        out.append(0xA0 | len(kb))
                    else:
                        out += str_header(len(kb))
                    out += kb
                v = c.items[c.index]
                break
            stack.pop()
            _close(out, c)
        else:
            return


def _open(out: bytearray, v: Any, path: str, depth: int) -> _Container:
    """Write the header of a list, dict or tuple (or reserve it) and return its container."""
    if depth >= MAX_DEPTH:
        raise EncodeError(path, _type_name(v), f"nesting is deeper than {MAX_DEPTH} (a cycle?)")
    if isinstance(v, Mapping):
        keys = list(v.keys())
        for k in keys:
            if not isinstance(k, str):
                raise EncodeError(
                    path, _type_name(v), f"map key {k!r} is {_type_name(k)}; Lakeshore maps have str keys only"
                )
        if not isinstance(v, Map):
            keys.sort()
        if len(keys) > _MAX_U32:
            raise EncodeError(path, _type_name(v), "more than 2^32-1 entries")
        out += _map_header(len(keys))
        return _Container("map", [v[k] for k in keys], keys, len(out), path)
    items = list(v)
    if len(items) > _MAX_U32:
        raise EncodeError(path, _type_name(v), "more than 2^32-1 elements")
    if isinstance(v, tuple):
        start = len(out)
        out += bytes(6)
        out += _array_header(len(items))
        return _Container("tuple", items, None, start, path)
    out += _array_header(len(items))
    return _Container("array", items, None, len(out), path)


def _close(out: bytearray, c: _Container) -> None:
    """Finish a container: a tuple's extension header replaces its reserved bytes."""
    if c.kind != "tuple":
        return
    n = len(out) - c.start - 6
    if n > _MAX_U32:
        raise EncodeError(c.path, "tuple", "payload is larger than 2^32-1 bytes")
    out[c.start : c.start + 6] = _ext_header(EXT_TUPLE, n)


def _encode_other(out: bytearray, v: Any, path: str, depth: int) -> _Container | None:
    """Write a value that is not of an exact builtin type; return a container to fill."""
    np_module = sys.modules.get("numpy")  # None: no value of this process is a numpy one
    if np_module is not None:
        if isinstance(v, np_module.ndarray):
            dtype, shape, data = _numpy_parts(v, path)
            out += _array_ext(EXT_NDARRAY, dtype, shape, data, path, "numpy.ndarray")
            return None
        if isinstance(v, np_module.generic):
            _encode_numpy_scalar(out, v, path)
            return None
    if isinstance(v, bool):
        out.append(0xC3 if v else 0xC2)
        return None
    if isinstance(v, Float32):
        out += _pack_f32(0xCA, v)
        return None
    if isinstance(v, int):
        i = int(v)
        if not _MIN_INT <= i <= _MAX_UINT:
            raise EncodeError(path, _type_name(v), f"{i} is outside [-2^63, 2^64)")
        out += _int_bytes(i)
        return None
    if isinstance(v, float):
        out += _pack_f64(0xCB, float(v))
        return None
    if isinstance(v, str):
        b = _utf8(str(v), path, "string")
        out += _str_header(len(b))
        out += b
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v) if not isinstance(v, memoryview) else v.tobytes()
        if len(b) > _MAX_U32:
            raise EncodeError(path, _type_name(v), "longer than 2^32-1 bytes")
        out += _bin_header(len(b))
        out += b
        return None
    if isinstance(v, (list, tuple, Mapping)):
        return _open(out, v, path, depth)
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            raise EncodeError(
                path, _type_name(v), "a naive datetime has no instant; attach a tzinfo, e.g. datetime.timezone.utc"
            )
        sec, nsec = _unix(v)
        out += _timestamp_ext(sec, nsec, path)
        return None
    if isinstance(v, UnixTime):
        out += _timestamp_ext(v.seconds, v.nanoseconds, path)
        return None
    if isinstance(v, NDArray):
        out += _array_ext(EXT_NDARRAY, v.dtype, tuple(v.shape), bytes(v.data), path, "NDArray")
        return None
    if isinstance(v, Tensor):
        out += _array_ext(EXT_TENSOR, v.dtype, tuple(v.shape), bytes(v.data), path, "Tensor")
        return None
    if isinstance(v, Image):
        out += _pair_ext(EXT_IMAGE, v.format, bytes(v.data), path, "Image", "format")
        return None
    if isinstance(v, Thunk):
        out += _pair_ext(EXT_THUNK, v.language, bytes(v.data), path, "Thunk", "language")
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        dtype, shape, data = _torch_parts(v, path)
        out += _array_ext(EXT_TENSOR, dtype, shape, data, path, "torch.Tensor")
        return None
    pil = sys.modules.get("PIL.Image")
    if pil is not None and isinstance(v, pil.Image):
        try:
            img = Image.from_pil(v)
        except Exception as e:  # PIL raises OSError, KeyError, ValueError by format
            raise EncodeError(path, "PIL.Image.Image", f"PIL could not save it: {e}") from e
        out += _pair_ext(EXT_IMAGE, img.format, img.data, path, "PIL.Image.Image", "format")
        return None
    if isinstance(v, complex):
        raise EncodeError(
            path, "complex", "complex numbers are not wire values; use a numpy array of dtype complex64 or complex128"
        )
    if isinstance(v, _dt.date):
        raise EncodeError(path, _type_name(v), "dates and times of day are not wire values; use an aware datetime")
    hint = "wire values are None, bool, int, float, str, bytes, list, tuple, dict with str keys, numpy arrays, "
    hint += "tensors, images and aware datetimes"
    if callable(v):
        hint += "; to send a callable by value wrap it in lakeshore.thunk(...)"
    elif dataclasses.is_dataclass(v):
        hint += "; convert a dataclass with dataclasses.asdict(...)"
    raise EncodeError(path, _type_name(v), hint)


def _encode_numpy_scalar(out: bytearray, v: np.generic[Any], path: str) -> None:
    import numpy as np

    if isinstance(v, np.bool_):
        out.append(0xC3 if bool(v) else 0xC2)
    elif isinstance(v, np.integer):
        i = int(v)
        out += _int_bytes(i)
    elif isinstance(v, np.float64):
        out += _pack_f64(0xCB, float(v))
    elif isinstance(v, (np.float32, np.float16)):
        out += _pack_f32(0xCA, float(v))
    elif isinstance(v, np.str_):
        b = _utf8(str(v), path, "string")
        out += _str_header(len(b)) + b
    elif isinstance(v, np.bytes_):
        out += _bin_header(len(v)) + bytes(v)
    elif v.dtype.name == "bfloat16":
        out += _pack_f32(0xCA, float(v))
    else:
        raise EncodeError(
            path,
            f"numpy.{v.dtype.name}",
            "this numpy scalar has no wire form (complex numbers travel only inside arrays)",
        )


# --------------------------------------------------------------------------------------------
# Decoding


TensorMode = Literal["auto", "torch", "numpy", "raw"]
ImageMode = Literal["raw", "pil"]

_unpack_u16 = struct.Struct(">H").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_unpack_u64 = struct.Struct(">Q").unpack_from
_unpack_i8 = struct.Struct(">b").unpack_from
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_unpack_i64 = struct.Struct(">q").unpack_from
_unpack_f32 = struct.Struct(">f").unpack_from
_unpack_f64 = struct.Struct(">d").unpack_from


class _Frame:
    """A container being filled by the iterative decoder."""

    __slots__ = ("kind", "items", "remaining", "key", "index", "end", "start")

    def __init__(self, kind: str, remaining: int, end: int, start: int, ordered: bool = False) -> None:
        self.kind = kind  # "array", "map" or "tuple"
        self.items: Any = (Map() if ordered else {}) if kind == "map" else []
        self.remaining = remaining
        self.key: str | None = None  # map: the key whose value is read next
        self.index = 0
        self.end = end  # the input limit inside this container (a tuple's payload end)
        self.start = start


class _Fail(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        self.offset = offset
        self.reason = reason


class _Reader:
    """Reads msgpack scalars from a bytes object within [pos, end)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def need(self, n: int, at: int, what: str) -> None:
        if self.end - self.pos < n:
            raise _Fail(at, f"{what} is truncated")

    def length(self, size: int, at: int, what: str) -> int:
        """Read a big-endian unsigned length of size bytes after the lead byte."""
        self.need(size, at, what)
        p = self.pos
        if size == 1:
            n = self.buf[p]
        elif size == 2:
            n = _unpack_u16(self.buf, p)[0]
        else:
            n = _unpack_u32(self.buf, p)[0]
        self.pos = p + size
        return int(n)

    def str_of(self, what: str) -> str:
        at = self.pos
        if at >= self.end:
            raise _Fail(at, f"{what} is truncated")
        lead = self.buf[at]
        self.pos += 1
        if 0xA0 <= lead <= 0xBF:
            n = lead & 0x1F
        elif lead == 0xD9:
            n = self.length(1, at, what)
        elif lead == 0xDA:
            n = self.length(2, at, what)
        elif lead == 0xDB:
            n = self.length(4, at, what)
        else:
            raise _Fail(at, f"{what} is {_lead_kind(lead)}; want a str")
        self.need(n, at, what)
        raw = self.buf[self.pos : self.pos + n]
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Fail(at, f"{what} is not valid UTF-8; binary data must be sent as bin") from None
        self.pos += n
        return s

    def bin_of(self, what: str) -> bytes:
        at = self.pos
        if at >= self.end:
            raise _Fail(at, f"{what} is truncated")
        lead = self.buf[at]
        self.pos += 1
        if lead == 0xC4:
            n = self.length(1, at, what)
        elif lead == 0xC5:
            n = self.length(2, at, what)
        elif lead == 0xC6:
            n = self.length(4, at, what)
        else:
            raise _Fail(at, f"{what} is {_lead_kind(lead)}; want a bin")
        self.need(n, at, what)
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def array_header(self, what: str) -> int:
        at = self.pos
        if at >= self.end:
            raise _Fail(at, f"{what} is truncated")
        lead = self.buf[at]
        self.pos += 1
        if 0x90 <= lead <= 0x9F:
            return lead & 0x0F
        if lead == 0xDC:
            return self.length(2, at, what)
        if lead == 0xDD:
            return self.length(4, at, what)
        raise _Fail(at, f"{what} is {_lead_kind(lead)}; want an array")

    def int_of(self, what: str) -> int:
        """Read any msgpack int that fits an int64 (msgp.ReadInt64Bytes)."""
        at = self.pos
        if at >= self.end:
            raise _Fail(at, f"{what} is truncated")
        lead = self.buf[at]
        self.pos += 1
        if lead <= 0x7F:
            return lead
        if lead >= 0xE0:
            return lead - 0x100
        sizes = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
        size = sizes.get(lead)
        if size is None:
            raise _Fail(at, f"{what} is {_lead_kind(lead)}; want an int")
        self.need(size, at, what)
        p = self.pos
        self.pos += size
        if lead == 0xCC:
            return self.buf[p]
        if lead == 0xCD:
            return int(_unpack_u16(self.buf, p)[0])
        if lead == 0xCE:
            return int(_unpack_u32(self.buf, p)[0])
        if lead == 0xCF:
            u = int(_unpack_u64(self.buf, p)[0])
            if u > (1 << 63) - 1:
                raise _Fail(at, f"{what} {u} overflows int64")
            return u
        if lead == 0xD0:
            return int(_unpack_i8(self.buf, p)[0])
        if lead == 0xD1:
            return int(_unpack_i16(self.buf, p)[0])
        if lead == 0xD2:
            return int(_unpack_i32(self.buf, p)[0])
        return int(_unpack_i64(self.buf, p)[0])


def _lead_kind(t: int) -> str:
    if t <= 0x7F or t >= 0xE0 or 0xCC <= t <= 0xD3:
        return "an int"
    if t <= 0x8F or t in (0xDE, 0xDF):
        return "a map"
    if t <= 0x9F or t in (0xDC, 0xDD):
        return "an array"
    if t <= 0xBF or 0xD9 <= t <= 0xDB:
        return "a str"
    if t == 0xC0:
        return "nil"
    if t in (0xC2, 0xC3):
        return "a bool"
    if t in (0xC4, 0xC5, 0xC6):
        return "a bin"
    if t in (0xCA, 0xCB):
        return "a float"
    if t in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        return "an ext"
    return "the never-used byte 0xc1"


def _frame_path(stack: list[_Frame]) -> str:
    parts = ["$"]
    for f in stack:
        if f.kind == "map":
            if f.key is not None:
                parts.append(_key_seg(f.key))
        else:
            parts.append(f"[{f.index}]")
    return "".join(parts)


def decode(
    data: bytes | bytearray | memoryview,
    *,
    tensors: TensorMode = "auto",
    images: ImageMode = "raw",
    verbatim: bool = False,
    version: int = WIRE_VERSION,
) -> Any:
    """Decode ``data``, which must hold exactly one wire value.

    Args:
        data: the msgpack bytes (never aliased: arrays and bytes in the result are copies).
        tensors: what extension 2 becomes: ``"auto"`` a ``torch.Tensor`` when torch is
            installed, else a :class:`Tensor`; ``"torch"`` always torch (``ImportError``
            without it); ``"numpy"`` a ``numpy.ndarray``; ``"raw"`` a :class:`Tensor`.
        images: what extension 3 becomes: ``"raw"`` an :class:`Image` (the file bytes, which
            re-encode exactly); ``"pil"`` a loaded ``PIL.Image.Image`` (a file PIL cannot read
            is a :class:`DecodeError`).
        verbatim: keep what the writer chose where decoding normalises: maps become
            :class:`Map` in wire order, and arrays with a byte-order dtype name (``">i4"``)
            stay :class:`NDArray` / :class:`Tensor` as written. ``encode`` of the result then
            gives ``data`` back byte for byte whenever ``data`` is in canonical form (smallest
            headers), e.g. every value the dreamlake-lakeshore codec writes.
        version: the wire version ``data`` was written in: 2 (the current one) or 1, whose
            ext 5 is a :class:`Thunk` (see :data:`EXT_THUNK_V1`); stored bytes from before
            version 2 need it to read their thunks.

    Returns:
        The value, mapped as the module documentation says.

    Raises:
        DecodeError: the bytes are not one valid wire value, or hold one this process cannot
            represent (an array over numpy's size limit, such as shape ``[0, 2**63-1]``, or
            no memory for it); it says where and why. Nothing else is raised for any input,
            except ``ImportError`` for a mode that needs a missing module.
    """
    if version not in (1, WIRE_VERSION):
        raise ValueError(f"wire version {version!r} is not known; want 1 or {WIRE_VERSION}")
    buf = bytes(data)
    n = len(buf)
    if n == 0:
        raise DecodeError(0, "$", "input is empty; want one msgpack value")
    stack: list[_Frame] = []
    r = _Reader(buf, 0, n)
    at = 0
    try:
        while True:
            end = r.end
            at = r.pos
            # A map reads its key before each value.
            if stack and stack[-1].kind == "map":
                top = stack[-1]
                if at >= end:
                    raise _Fail(at, "input ends where a map key should start (truncated)")
                lead = buf[at]
                if 0xA0 <= lead <= 0xBF and at + 1 + (lead & 0x1F) <= end:
                    kend = at + 1 + (lead & 0x1F)
                    try:
                        k = buf[at + 1 : kend].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Fail(at, "map key is not valid UTF-8; binary data must be sent as bin") from None
                    r.pos = kend
                elif 0xD9 <= lead <= 0xDB or 0xA0 <= lead <= 0xBF:
                    k = r.str_of("map key")
                else:
                    raise _Fail(at, f"map key is {_lead_kind(lead)}; Lakeshore maps have str keys only")
                if k in top.items:
                    raise _Fail(at, f"duplicate map key {_go_quote(k)}")
                top.key = k
                at = r.pos
            if at >= end:
                raise _Fail(at, "input ends where a value should start (truncated)")
            lead = buf[at]
            r.pos = at + 1
            value: Any
            if lead <= 0x7F:
                value = lead
            elif 0xA0 <= lead <= 0xBF and at + 1 + (lead & 0x1F) <= end:
                send = at + 1 + (lead & 0x1F)
                try:
                    value = buf[at + 1 : send].decode("utf-8")
                except UnicodeDecodeError:
                    raise _Fail(at, "str is not valid UTF-8; binary data must be sent as bin") from None
                r.pos = send
            elif lead >= 0xE0:
                value = lead - 0x100
            elif lead <= 0x8F or lead == 0xDE or lead == 0xDF:
                if lead <= 0x8F:
                    count = lead & 0x0F
                else:
                    count = r.length(2 if lead == 0xDE else 4, at, "map header")
                _check_depth(stack, at)
                if 2 * count > end - r.pos:
                    raise _Fail(at, f"map declares {count} entries but only {end - r.pos} bytes follow")
                if count:
                    stack.append(_Frame("map", count, end, at, verbatim))
                    continue
                value = Map() if verbatim else {}
            elif lead <= 0x9F or lead == 0xDC or lead == 0xDD:
                if lead <= 0x9F:
                    count = lead & 0x0F
                else:
                    count = r.length(2 if lead == 0xDC else 4, at, "array header")
                _check_depth(stack, at)
                if count > end - r.pos:
                    raise _Fail(at, f"array declares {count} elements but only {end - r.pos} bytes follow")
                if count:
                    stack.append(_Frame("array", count, end, at))
                    continue
                value = []
            elif lead <= 0xBF or 0xD9 <= lead <= 0xDB:
                r.pos = at
                value = r.str_of("str")
            elif lead == 0xC0:
                value = None
            elif lead == 0xC2:
                value = False
            elif lead == 0xC3:
                value = True
            elif lead in (0xC4, 0xC5, 0xC6):
                r.pos = at
                value = r.bin_of("bin")
            elif lead == 0xCA:
                r.need(4, at, "float 32")
                value = Float32(_unpack_f32(buf, r.pos)[0])
                r.pos += 4
            elif lead == 0xCB:
                r.need(8, at, "float 64")
                value = float(_unpack_f64(buf, r.pos)[0])
                r.pos += 8
            elif 0xCC <= lead <= 0xD3:
                if lead == 0xCF:
                    r.need(8, at, "uint 64")
                    value = int(_unpack_u64(buf, r.pos)[0])
                    r.pos += 8
                else:
                    r.pos = at
                    value = r.int_of("int")
            elif lead in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
                typ, pstart, pend = _ext_header_at(r, at)
                if typ == EXT_TUPLE_V1 or (typ == EXT_TUPLE and version != 1):
                    value = _open_tuple(r, stack, at, pstart, pend)
                    if value is None:
                        continue
                else:
                    value = _ext_value(buf, typ, at, pstart, pend, tensors, images, verbatim)
                    r.pos = pend
            else:
                raise _Fail(at, "byte 0xc1 is never used in msgpack")

            # Deliver the value to its container, closing the ones that are full.
            while stack:
                top = stack[-1]
                if top.kind == "map":
                    assert top.key is not None
                    top.items[top.key] = value
                    top.key = None
                else:
                    top.items.append(value)
                top.index += 1
                top.remaining -= 1
                if top.remaining:
                    break
                stack.pop()
                if top.kind == "tuple":
                    if r.pos != top.end:
                        raise _Fail(r.pos, f"{top.end - r.pos} bytes follow the tuple payload's last element")
                    r.end = stack[-1].end if stack else n
                    value = tuple(top.items)
                else:
                    value = top.items
            else:
                if r.pos != n:
                    raise _Fail(r.pos, f"{n - r.pos} bytes follow the value; want exactly one msgpack value")
                return value
    except _Fail as f:
        raise DecodeError(f.offset, _frame_path(stack), f.reason) from None
    except (ValueError, OverflowError, MemoryError) as e:
        # A backstop: a well-formed value this process cannot hold is the decoder's error,
        # never a library's raw exception (the array path says more, above).
        raise DecodeError(at, _frame_path(stack), f"the value cannot be decoded here: {e or type(e).__name__}") from None


def pack(value: Any) -> bytes:
    """dreamlake-lakeshore's name for :func:`encode` (its ``wire.pack``): the same bytes."""
    return encode(value)


def unpack(data: bytes | bytearray | memoryview) -> Any:
    """dreamlake-lakeshore's name for :func:`decode` with its defaults (its ``wire.unpack``)."""
    return decode(data)


def _check_depth(stack: list[_Frame], at: int) -> None:
    if len(stack) >= MAX_DEPTH:
        raise _Fail(at, f"nesting is deeper than {MAX_DEPTH}")


def _ext_header_at(r: _Reader, at: int) -> tuple[int, int, int]:
    """Read an extension header at ``at``; return (type, payload start, payload end)."""
    buf = r.buf
    lead = buf[at]
    if 0xD4 <= lead <= 0xD8:
        size = 1 << (lead - 0xD4)
        off = at + 2
    elif lead == 0xC7:
        if r.end - at < 3:
            raise _Fail(at, "ext is truncated")
        size, off = buf[at + 1], at + 3
    elif lead == 0xC8:
        if r.end - at < 4:
            raise _Fail(at, "ext is truncated")
        size, off = int(_unpack_u16(buf, at + 1)[0]), at + 4
    else:
        if r.end - at < 6:
            raise _Fail(at, "ext is truncated")
        size, off = int(_unpack_u32(buf, at + 1)[0]), at + 6
    if off > r.end or r.end - off < size:
        raise _Fail(at, "ext is truncated")
    typ = buf[off - 1]
    if typ >= 0x80:
        typ -= 0x100
    return typ, off, off + size


def _open_tuple(r: _Reader, stack: list[_Frame], at: int, pstart: int, pend: int) -> tuple[Any, ...] | None:
    """Start a tuple whose payload is [pstart, pend): push its frame, or return () when empty."""
    buf = r.buf
    if pstart >= pend or _lead_kind(buf[pstart]) != "an array":
        raise _Fail(pstart, "tuple payload must be an array [values…]")
    _check_depth(stack, at)
    inner = _Reader(buf, pstart, pend)
    count = inner.array_header("tuple payload")
    if count > pend - inner.pos:
        raise _Fail(pstart, f"array declares {count} elements but only {pend - inner.pos} bytes follow")
    if count == 0:
        if inner.pos != pend:
            raise _Fail(inner.pos, f"{pend - inner.pos} bytes follow the tuple payload's last element")
        r.pos = pend
        return ()
    stack.append(_Frame("tuple", count, pend, at))
    r.pos = inner.pos
    r.end = pend
    return None


def _ext_value(
    buf: bytes, typ: int, at: int, pstart: int, pend: int, tensors: TensorMode, images: ImageMode, verbatim: bool
) -> Any:
    """The value of an extension other than a tuple (ext 5 here is version 1's thunk)."""
    if typ == EXT_TIMESTAMP:
        return _timestamp_value(buf[pstart:pend], at)
    if typ in (EXT_NDARRAY, EXT_TENSOR):
        kind = "ndarray" if typ == EXT_NDARRAY else "tensor"
        dtype, shape, data = _array_payload(buf, kind, pstart, pend)
        if _plain_dtype(dtype) is not None:
            if verbatim:
                return (NDArray if typ == EXT_NDARRAY else Tensor)(dtype, shape, data)
            dtype, data = _normalize(dtype, data)
        try:
            return _array_value(typ, dtype, shape, data, tensors)
        except ImportError:
            raise
        except (ValueError, OverflowError, MemoryError, RuntimeError) as e:
            # A valid wire array this process cannot hold (numpy's or torch's size limits,
            # or no memory for the copy): the decoder's error, never the library's.
            why = str(e) or type(e).__name__
            raise _Fail(at, f"{kind} cannot be decoded here: {why}") from None
    if typ in (EXT_IMAGE, EXT_THUNK, EXT_THUNK_V1):
        kind, field = ("image", "format") if typ == EXT_IMAGE else ("thunk", "language")
        r = _Reader(buf, pstart, pend)
        if r.array_header(f"{kind} payload") != 2:
            raise _Fail(pstart, f"{kind} payload must be an array [{field} str, data bin]")
        name_at = r.pos
        name = r.str_of(f"{kind} {field}")
        if name == "":
            raise _Fail(name_at, f"{kind} {field} must not be empty")
        data = r.bin_of(f"{kind} data")
        if r.pos != pend:
            raise _Fail(r.pos, f"{pend - r.pos} bytes follow the {kind} payload's last element")
        if typ != EXT_IMAGE:
            return Thunk(name, data)
        img = Image(name, data)
        if images == "pil":
            try:
                return img.to_pil()
            except ImportError:
                raise
            except Exception as e:
                raise _Fail(at, f"image: PIL cannot read this {name} file ({e}); decode with images='raw'") from e
        return img
    raise _Fail(
        at,
        f"unknown ext type {typ}; want -1 (timestamp), 1 (ndarray), 2 (tensor), 3 (image), "
        "5 (tuple; 4 in wire version 1) or 64 (thunk)",
    )


def _array_value(typ: int, dtype: str, shape: tuple[int, ...], data: bytes, tensors: TensorMode) -> Any:
    """The Python value of a valid ndarray (``typ`` 1) or tensor (2) payload."""
    if typ == EXT_NDARRAY:
        if _numpy_dtype(dtype) is None:
            return NDArray(dtype, shape, data)
        return _to_numpy(dtype, shape, data, "")
    if tensors == "raw":
        return Tensor(dtype, shape, data)
    if tensors == "numpy":
        if _numpy_dtype(dtype) is None:
            return Tensor(dtype, shape, data)
        return _to_numpy(dtype, shape, data, "")
    if tensors == "torch" or _optional("torch") is not None:
        return _to_torch(dtype, shape, data)
    return Tensor(dtype, shape, data)


def _array_payload(buf: bytes, kind: str, pstart: int, pend: int) -> tuple[str, tuple[int, ...], bytes]:
    r = _Reader(buf, pstart, pend)
    try:
        count = r.array_header(f"{kind} payload")
    except _Fail:
        count = -1
    if count != 3:
        raise _Fail(pstart, f"{kind} payload must be an array [dtype str, shape [int…], data bin]")
    dtype = r.str_of(f"{kind} dtype")
    shape_at = r.pos
    ndim = r.array_header(f"{kind} shape")
    if ndim > MAX_DIMS:
        raise _Fail(shape_at, f"{kind} shape has {ndim} dimensions; at most {MAX_DIMS} are allowed")
    shape = []
    for i in range(ndim):
        dim_at = r.pos
        d = r.int_of(f"{kind} shape[{i}]")
        if d < 0:
            raise _Fail(dim_at, f"{kind} shape[{i}] is {d}; want a non-negative int")
        shape.append(d)
    data = r.bin_of(f"{kind} data")
    if r.pos != pend:
        raise _Fail(r.pos, f"{pend - r.pos} bytes follow the {kind} payload's last element")
    reason = _check_array(dtype, tuple(shape), len(data))
    if reason:
        raise _Fail(pstart, f"{kind}: {reason}")
    return dtype, tuple(shape), data


def _timestamp_value(p: bytes, at: int) -> Any:
    if len(p) == 4:
        sec, nsec = int(_unpack_u32(p, 0)[0]), 0
    elif len(p) == 8:
        d64 = int(_unpack_u64(p, 0)[0])
        nsec, sec = d64 >> 34, d64 & ((1 << 34) - 1)
    elif len(p) == 12:
        nsec = int(_unpack_u32(p, 0)[0])
        sec = int(_unpack_i64(p, 4)[0])
    else:
        raise _Fail(at, f"timestamp payload is {len(p)} bytes; want 4, 8 or 12")
    if nsec >= 1_000_000_000:
        raise _Fail(at, f"timestamp nanoseconds {nsec}; want < 1000000000")
    if sec > _MAX_TIMESTAMP_SECONDS:
        raise _Fail(at, f"timestamp seconds {sec}; want <= {_MAX_TIMESTAMP_SECONDS}")
    try:
        if nsec % 1000 == 0:
            return _EPOCH + _dt.timedelta(seconds=sec, microseconds=nsec // 1000)
        return Timestamp.from_unix(sec, nsec)
    except OverflowError:
        return UnixTime(sec, nsec)
