"""The data queue: append-only, persistent records for training pipelines (package ``persist``
of the Go engine, over the data routes of the HTTP API, ``docs/http-api.md``)::

    import asyncio
    from lakeshore.data import Queue, GRPOGroupNSampler

    async def main() -> None:
        q = Queue("events", storage_path="./data")
        await q.put({"step": 1, "reward": 0.5})
        await q.flush()
        records = await q.get(limit=100)
        batch = await q.reader().get_batch(
            fields=["reward"], batch_size=32, task_name="train", sampler=GRPOGroupNSampler(n_samples_per_prompt=4)
        )
        batch["reward"]        # a numpy array, zero-copy from the Arrow answer

    asyncio.run(main())

Every plane serves the data routes: the embedded daemon (``Dispatch(path)`` and the process
default), a private ``Dispatch(":memory:")`` (its data goes with the daemon) and ``lakeshore
serve`` (``HttpDispatch``), with the same code.

Reads answer Arrow IPC; :meth:`Reader.get_batch` returns the columns as numpy arrays (or
torch tensors, or a TensorDict) without a Python object per row for numbers, equal-length
lists and tensors of one dtype and shape (``pyarrow`` is needed for reads: ``pip install
'lakeshore-queue[data]'``). Records are maps of field name to a wire value (int, float, bool, str,
bytes, lists of numbers, numpy arrays and torch tensors as tensors; anything else is stored
encoded).

Where the data lives: ``dispatch=`` when given; else, with ``storage_path`` and no
``$LAKESHORE_URL``, the embedded plane of that directory (``{storage_path}/lakeshore.db``,
whose daemon keeps the data queues in ``{storage_path}/data/{namespace}/{queue}/``); else the
process default (``$LAKESHORE_URL``, or the embedded plane under ``$LAKESHORE_HOME``). With a
server plane (a dispatch or ``$LAKESHORE_URL``) the server decides where its data lives and
``storage_path`` is only recorded.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import json
import logging
import math
import numbers
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lakeshore import errors, wire
from lakeshore._transport import LONG_POLL_MAX, path_segment, redact_url
from lakeshore.dispatch import Dispatch, check_target, default_dispatch, is_url
from lakeshore.queue import MAX_VALUE_BYTES, _check_name, _check_seconds, encode_value

log = logging.getLogger("lakeshore.data")

__all__ = [
    "Queue",
    "Reader",
    "Writer",
    "QueueReader",
    "QueueWriter",
    "BatchMeta",
    "Batch",
    "Sampler",
    "SequentialSampler",
    "RankAwareSampler",
    "GRPOGroupNSampler",
    "SeqlenBalancedSampler",
    "KVInterface",
    "ZerocopyMode",
    "BatchFormat",
    "Backpressure",
    "WEIGHT_VERSION",
    "TARGET_WEIGHT_VERSION",
    "LAST_WEIGHT_VERSION",
    "SEGMENT_VERSIONS",
    "COMPLETE",
]

ARROW = "application/vnd.apache.arrow.stream"

ZerocopyMode = Literal["auto", "off"]
"""How read columns relate to the answer's memory: ``"auto"`` views on the answer's Arrow
buffers where the layout allows (numbers without nulls, equal-length lists, tensors of one
dtype and shape; writable, and one answer's buffer is kept alive while any of its columns
is); ``"off"`` every column its own copy."""

BatchFormat = Literal["numpy", "torch", "tensordict"]
"""What :meth:`Reader.get_batch` returns: a :class:`Batch` of numpy arrays, a :class:`Batch`
of torch tensors, or a ``tensordict.TensorDict``."""

_ZEROCOPY_MODES = ("auto", "off")
_FORMATS = ("numpy", "torch", "tensordict")

# ------------------------------------------------------------------------------ samplers


@dataclasses.dataclass(frozen=True)
class Sampler:
    """Which records a reader's :meth:`~Reader.get_meta` picks (the server's samplers).

    A sampler runs in the store, inside the transaction that hands the records out, so
    concurrent readers of one task never pick the same record. The built-in ones are made
    by :func:`SequentialSampler`, :func:`RankAwareSampler`, :func:`GRPOGroupNSampler` and
    :func:`SeqlenBalancedSampler`. A custom sampler (what persisting's ``BaseSampler``
    subclasses are) is written in Go and added to the server's stores
    (``persist.DefaultSamplers().With(name, factory)`` in their ``Config.Samplers``); a
    reader names it with ``Sampler(name, params)``. A Python object with a ``sample``
    method is refused (:class:`~lakeshore.errors.InvalidError`, field ``sampler``)."""

    name: str = "sequential"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The ``sampler`` field of a meta request."""
        out: dict[str, Any] = {"name": self.name}
        if self.params:
            out["params"] = dict(self.params)
        return out


# The parameters of the built-in samplers that name a field the sampler reads (Go's
# persist.SamplerFields): a misspelt one is warned about as a misspelt field asked for.
_SAMPLER_FIELD_PARAMS = {
    "grpo-group-n": ("group_field", "drop_zero_variance", "time_field"),
    "seqlen-balanced": ("length_field",),
}
# What a sample without that field becomes (docs/persist.md, "A field a sampler reads that
# no record has").
_SAMPLER_FIELD_EFFECT = {
    "group_field": "a sample without it is in no group, so is never handed out",
    "drop_zero_variance": "a group with a sample without it is not judged (served)",
    "time_field": "a group without it is never judged a straggler",
    "length_field": "a sample without it counts length 0",
}


def _sampler_fields(sampler: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The (parameter, field) pairs of a meta request's ``sampler`` body that name a field
    the sampler reads; none for a custom sampler (its parameters' meaning is its own)."""
    if not sampler:
        return []
    params = sampler.get("params") or {}
    return [
        (p, params[p])
        for p in _SAMPLER_FIELD_PARAMS.get(str(sampler.get("name")), ())
        if isinstance(params.get(p), str) and params[p]
    ]


def _sampler_body(sampler: Any) -> dict[str, Any]:
    """The ``sampler`` field of a meta request for ``sampler`` (None: sequential). Raises
    InvalidError for anything but a :class:`Sampler`: a Python sampler class (persisting's
    ``BaseSampler`` subclass) cannot run in the store's transaction."""
    if sampler is None:
        return SequentialSampler().body()
    if not isinstance(sampler, Sampler):
        raise errors.InvalidError(
            f"invalid sampler {type(sampler).__name__!r}: want a lakeshore.data.Sampler, as SequentialSampler(), "
            "RankAwareSampler(), GRPOGroupNSampler(…), SeqlenBalancedSampler(…) return, or Sampler(name, params) "
            "for one the server's stores register; a Python sampler class (persisting's BaseSampler) is not run: "
            "samplers run in the store, so concurrent readers never pick the same record",
            field="sampler",
            value=type(sampler).__name__,
            rule="a lakeshore.data.Sampler",
        )
    return sampler.body()


def SequentialSampler() -> Sampler:
    """Records in index order, each once per task."""
    return Sampler("sequential")


def RankAwareSampler() -> Sampler:
    """Each data-parallel rank gets its own records (``reader(rank, world_size)``)."""
    return Sampler("rank-aware")


def GRPOGroupNSampler(
    n_samples_per_prompt: int = 1,
    group_field: str | None = None,
    *,
    use: int | None = None,
    drop_zero_variance: str | None = None,
    straggler_seconds: float | None = None,
    time_field: str | None = None,
    straggler_policy: str | None = None,
) -> Sampler:
    """Whole groups of ``n_samples_per_prompt`` records of one prompt (GRPO): a group is
    handed out only when all of them are ready; the batch size must be a multiple of
    ``use`` (default ``n_samples_per_prompt``; that defaults to 1, as persisting's). ``group_field`` names the prompt's field
    (default: aligned blocks of n consecutive records). Decided in the store's hand-out
    transaction, so concurrent readers agree, and counted in ``stats()``:

    - ``use=m`` (over-sampling): n produced, the first m of a complete group handed out, the
      rest consumed unused (``samples_unused``).
    - ``drop_zero_variance="reward"`` (DAPO's filter): a complete group whose values of that
      numeric field are all equal is dropped (``groups_dropped``).
    - ``straggler_seconds=T, time_field="at"``: an incomplete group whose oldest record's
      ``time_field`` (Unix seconds, set by the producer, e.g. ``time.time()``) is more than
      T ago is dropped (``straggler_policy="drop"``, the default) or handed out as it is
      (``"partial"``).

    Go: ``persist.GRPOGroupN``. Bad parameters raise InvalidError from the server."""
    if not isinstance(n_samples_per_prompt, int) or n_samples_per_prompt < 1:
        raise errors.InvalidError(
            f"invalid n_samples_per_prompt {n_samples_per_prompt!r}: want an integer ≥ 1",
            field="n_samples_per_prompt",
            value=n_samples_per_prompt,
            rule="≥ 1",
        )
    params: dict[str, Any] = {"n": n_samples_per_prompt}
    if group_field:
        params["group_field"] = group_field
    if use is not None:
        params["use"] = use
    if drop_zero_variance:
        params["drop_zero_variance"] = drop_zero_variance
    if straggler_seconds is not None:
        params["straggler_seconds"] = straggler_seconds
    if time_field:
        params["time_field"] = time_field
    if straggler_policy:
        params["straggler_policy"] = straggler_policy
    return Sampler("grpo-group-n", params)


def SeqlenBalancedSampler(length_field: str, groups: int | None = None) -> Sampler:
    """Batches balanced by a length field across ``groups``."""
    params: dict[str, Any] = {"length_field": length_field}
    if groups is not None:
        params["groups"] = groups
    return Sampler("seqlen-balanced", params)


# ------------------------------------------------------------------------------ results


@dataclasses.dataclass(frozen=True)
class BatchMeta:
    """What :meth:`Reader.get_meta` picked: pass it to :meth:`Reader.get_data`.

    Attributes:
        size: the number of records.
        global_indexes: their global indexes.
        field_names: the fields asked for.
        partition_id: the partition.
        task_name: the consuming task.
        fields: the fields' ``{name, kind, dtype, shape}`` as the server describes them.
    """

    size: int
    global_indexes: list[int]
    field_names: list[str]
    partition_id: str
    task_name: str
    fields: list[Mapping[str, Any]] = dataclasses.field(default_factory=list)


def _check_meta(name: str, meta: Any) -> None:
    """Refuse, before anything is sent, a ``meta`` argument that is not a :class:`BatchMeta`
    (:meth:`Reader.commit`, :meth:`Reader.get_data`): before, ``commit(None)`` raised
    AttributeError from inside the call."""
    if not isinstance(meta, BatchMeta):
        hint = " (pass its .meta)" if isinstance(meta, Batch) else ""
        raise errors.InvalidError(
            f"invalid {name} {meta!r:.80}: want the BatchMeta of a read (get_meta's answer, or a Batch's .meta){hint}",
            field=name,
            value=meta,
            rule="a BatchMeta from get_meta, or the .meta of a Batch from get_batch",
        )


class Batch(dict[str, Any]):
    """Columns by field name (numpy arrays, or torch tensors with ``format="torch"``), with
    ``global_indexes`` (a numpy int64 array), ``meta`` (the :class:`BatchMeta`) and ``table``
    (the pyarrow Table of the answer)."""

    global_indexes: np.ndarray[Any, Any]
    table: Any
    meta: BatchMeta | None = None

    def __len__(self) -> int:
        return int(len(self.global_indexes))


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401
        import pyarrow.ipc  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise errors.DispatchError(
            "data queue reads need pyarrow: pip install 'lakeshore-queue[data]' (or pyarrow)", code="not_implemented"
        ) from e
    return pyarrow


class _Answer:
    """One Arrow answer: the table and the private, writable copy of the bytes its buffers
    point into (so that column views on it are writable numpy arrays)."""

    def __init__(self, data: bytes) -> None:
        pa = _pyarrow()
        self.raw = bytearray(data)
        self.base = np.frombuffer(self.raw, dtype=np.uint8) if self.raw else np.zeros(0, dtype=np.uint8)
        if not data:
            self.table = pa.table({})
            self._address = 0
            return
        buf = pa.py_buffer(self.raw)
        self._address = buf.address
        self.table = pa.ipc.open_stream(buf).read_all()

    def view(self, buf: Any, dtype: np.dtype[Any], count: int, byte_offset: int) -> np.ndarray[Any, Any]:
        """``count`` items of ``dtype`` at ``byte_offset`` in the Arrow buffer ``buf``: a
        writable view on the answer when the buffer lies in it, else a read-only view."""
        start = buf.address - self._address + byte_offset
        if self.raw and 0 <= start and start + count * dtype.itemsize <= len(self.raw):
            return np.frombuffer(self.raw, dtype=dtype, count=count, offset=start)
        return np.frombuffer(buf, dtype=dtype, count=count, offset=byte_offset)  # pragma: no cover - compressed IPC


def _objects(items: list[Any]) -> np.ndarray[Any, Any]:
    """A 1-D object array of items (numpy would make a 2-D array of equal-length lists)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _primitive(ans: _Answer, arr: Any) -> np.ndarray[Any, Any] | None:
    """A numeric Arrow array without nulls as a numpy view; None for other arrays."""
    pa = _pyarrow()
    t = arr.type
    if arr.null_count or not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    dt = np.dtype(t.to_pandas_dtype())
    if len(arr) == 0:
        return np.zeros(0, dtype=dt)
    return ans.view(arr.buffers()[1], dt, len(arr), arr.offset * dt.itemsize)


def _offsets(ans: _Answer, arr: Any) -> np.ndarray[Any, Any]:
    """The n+1 offsets of a list or binary Arrow array, as numpy int64."""
    pa = _pyarrow()
    large = pa.types.is_large_list(arr.type) or pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    dt = np.dtype(np.int64 if large else np.int32)
    if len(arr) == 0:
        return np.zeros(1, dtype=np.int64)
    return ans.view(arr.buffers()[1], dt, len(arr) + 1, arr.offset * dt.itemsize).astype(np.int64)


def _list_column(ans: _Answer, arr: Any) -> np.ndarray[Any, Any] | None:
    """A list or fixed-size-list column of numbers without nulls: a 2-D view when every row
    has the same length, else an object array of 1-D views; None for other lists."""
    pa = _pyarrow()
    t = arr.type
    if arr.null_count:
        return None
    n = len(arr)
    if pa.types.is_fixed_size_list(t):
        k = t.list_size
        values = arr.values  # the child, from the array's first slot
        flat = _primitive(ans, values)
        if flat is None:
            return None
        start = arr.offset * k
        return flat[start : start + n * k].reshape(n, k)
    offsets = _offsets(ans, arr)
    flat = _primitive(ans, arr.values)
    if flat is None:
        return None
    lengths = np.diff(offsets)
    if n and (lengths == lengths[0]).all():
        return flat[offsets[0] : offsets[-1]].reshape(n, int(lengths[0]))
    return _objects([flat[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())])


def _tensor_column(ans: _Answer, arr: Any, field: Mapping[str, Any] | None) -> Any:
    """A tensor column (struct ``{dtype, shape, data}``, the wire ndarray's layout): one
    ``(n, *shape)`` view on the answer when every row has the same dtype and shape, else
    an object array of per-row arrays."""
    pa = _pyarrow()
    names = [f.name for f in arr.type]
    parts = dict(zip(names, arr.flatten()))
    dtypes, shapes, datas = parts["dtype"], parts["shape"], parts["data"]
    n = len(arr)
    if n == 0:
        empty = wire._numpy_dtype(str((field or {}).get("dtype") or "float64")) or np.dtype(np.float64)
        return np.zeros((0, *((field or {}).get("shape") or ())), dtype=empty)
    if not (arr.null_count or dtypes.null_count or shapes.null_count or datas.null_count):
        unique = pa.compute.unique(dtypes)
        nd: np.dtype[Any] | None = wire._numpy_dtype(unique[0].as_py()) if len(unique) == 1 else None
        shape_offsets = _offsets(ans, shapes)
        ranks = np.diff(shape_offsets)
        dims = _primitive(ans, shapes.values)
        if nd is not None and dims is not None and (ranks == ranks[0]).all():
            k = int(ranks[0])
            rows = dims[shape_offsets[0] : shape_offsets[-1]].reshape(n, k)
            if (rows == rows[0]).all():
                shape = tuple(int(d) for d in rows[0])
                per = math.prod(shape) * nd.itemsize
                data_offsets = _offsets(ans, datas)
                if (np.diff(data_offsets) == per).all():
                    count = n * math.prod(shape)
                    if count == 0:
                        return np.zeros((n, *shape), dtype=nd)
                    flat = ans.view(datas.buffers()[2], nd, count, int(data_offsets[0]))
                    return flat.reshape((n, *shape))
    # Mixed dtypes or shapes, nulls, or bfloat16 without ml_dtypes: one array per row.
    items: list[Any] = []
    for d in arr.to_pylist():
        if d is None:
            items.append(None)
            continue
        rd = wire._numpy_dtype(d["dtype"])
        if rd is None:
            items.append(wire.NDArray(d["dtype"], tuple(d["shape"]), bytes(d["data"])))
        else:
            items.append(np.frombuffer(bytearray(d["data"]), dtype=rd).reshape(d["shape"]))
    return _objects(items)


def _kind(field: Any) -> str:
    """The ``lakeshore.kind`` metadata of an Arrow field ("" when none): ``"codec"`` for
    values stored wire-encoded (maps, lists of strings, mixed lists)."""
    md = field.metadata or {}
    return str(md.get(b"lakeshore.kind", b"").decode())


def _codec_value(v: Any) -> Any:
    """A value of a ``codec`` column decoded from its wire bytes (None stays None): the
    one decoding of such values for ``get`` and the batch reads alike."""
    return wire.decode(v) if isinstance(v, (bytes, bytearray)) else v


def _column(ans: _Answer, col: Any, field: Mapping[str, Any] | None, kind: str = "") -> Any:
    """One Arrow column as numpy: views on the answer for numbers without nulls,
    equal-length lists and uniform tensors; object arrays for strings, bytes and ragged
    values, and for the decoded values of a ``codec`` column (``kind``, its field's
    ``lakeshore.kind``)."""
    pa = _pyarrow()
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    out: Any = None
    if kind == "codec" and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        out = _objects([_codec_value(v) for v in arr.to_pylist()])
    elif pa.types.is_struct(t) and {f.name for f in t} >= {"dtype", "shape", "data"}:
        out = _tensor_column(ans, arr, field)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        out = _list_column(ans, arr)
        if out is None:
            out = _objects([None if v is None else np.asarray(v) for v in arr.to_pylist()])
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        out = _objects(arr.to_pylist())
    else:
        out = _primitive(ans, arr)
        if out is None:
            out = arr.to_numpy(zero_copy_only=False)
    return out


def _torch_of(a: Any) -> Any:
    """A numpy column as a torch tensor sharing its memory (bfloat16 through a uint16 view);
    object columns stay numpy."""
    if not isinstance(a, np.ndarray) or a.dtype == object:
        return a
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    if not a.flags.writeable:  # pragma: no cover - views on the answer are writable
        a = a.copy()
    return torch.from_numpy(a)


def _batch(
    data: bytes, fields: Sequence[str] | None, fmt: str, zerocopy: str, meta: BatchMeta | None = None
) -> Any:
    """The answer of a batch read as a :class:`Batch` (or a TensorDict)."""
    ans = _Answer(data)
    table = ans.table
    b = Batch()
    described = {str(f.get("name")): f for f in (meta.fields if meta else [])}
    names = [n for n in table.column_names if not n.startswith("_")]
    for n in fields or names:
        if n in table.column_names:
            col = _column(ans, table.column(n), described.get(n), _kind(table.schema.field(n)))
            if zerocopy == "off" and isinstance(col, np.ndarray) and col.dtype != object:
                col = col.copy()
            b[n] = col
    if "_index" in table.column_names:
        idx = _column(ans, table.column("_index"), None)
        b.global_indexes = idx.copy() if zerocopy == "off" else idx
    else:
        b.global_indexes = np.zeros(0, dtype=np.int64)
    b.table = table
    b.meta = meta
    if fmt == "numpy":
        return b
    if fmt == "torch":
        for k in list(b):
            b[k] = _torch_of(b[k])
        return b
    return _tensordict(b)


def _tensordict(b: Batch) -> Any:
    """A Batch as a ``tensordict.TensorDict`` of batch size ``[n]``: numeric columns as
    tensors, the others (strings, bytes, ragged values) as non-tensor data; the global
    indexes under ``"_index"``."""
    try:
        import torch
        from tensordict import TensorDict
    except ImportError as e:
        raise errors.DispatchError(
            "format='tensordict' needs torch and tensordict: pip install tensordict", code="not_implemented"
        ) from e
    n = len(b)
    td = TensorDict({}, batch_size=[n])
    td["_index"] = torch.from_numpy(np.ascontiguousarray(b.global_indexes))
    for k, v in b.items():
        t = _torch_of(v)
        if isinstance(t, torch.Tensor):
            td[k] = t
        else:
            td.set_non_tensor(k, list(v))
    return td


def _records(data: bytes) -> list[dict[str, Any]]:
    """Rows as dicts of field values (no null fields, no _index/_partition)."""
    pa = _pyarrow()
    table = pa.table({}) if not data else pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    names = [n for n in table.column_names if not n.startswith("_")]
    kinds = {f.name: _kind(f) for f in table.schema}
    rows = table.select(names).to_pylist() if names else [{} for _ in range(table.num_rows)]
    out = []
    for r in rows:
        rec: dict[str, Any] = {}
        for k, v in r.items():
            if v is None:
                continue
            if kinds.get(k) == "codec" and isinstance(v, bytes):
                v = _codec_value(v)
            elif isinstance(v, dict) and {"dtype", "shape", "data"} <= set(v):
                nd = wire._numpy_dtype(v["dtype"])
                if nd is None:
                    v = wire.NDArray(v["dtype"], tuple(v["shape"]), bytes(v["data"]))
                else:
                    v = np.frombuffer(bytearray(v["data"]), dtype=nd).reshape(v["shape"])
            rec[k] = v
        out.append(rec)
    return out


def _meta_of(ans: Mapping[str, Any], fields: Sequence[str], partition: str, task: str) -> BatchMeta:
    return BatchMeta(
        size=int(ans.get("size") or 0),
        global_indexes=[int(i) for i in ans.get("indexes") or []],
        field_names=list(fields),
        partition_id=str(ans.get("partition") or partition),
        task_name=str(ans.get("task") or task),
        fields=list(ans.get("fields") or []),
    )


def _integer(name: str, v: Any) -> int:
    """``v`` as an int, for an argument that counts (a batch size, a staleness bound, a
    step): an integer (numpy's too), never a float or a string silently truncated.
    Raises InvalidError naming ``name``."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise errors.InvalidError(f"invalid {name} {v!r}: want an integer", field=name, value=v, rule="an integer")
    return int(v)


def _version(name: str, v: Any) -> int:
    """``v`` as a weight version for the argument ``name``: an integer (numpy's too: a
    batch's weight_version column holds numpy integers) in [0, 2^63), never a bool or a
    float silently truncated. The one check of every version argument (put, put_batch,
    put_partial, patch_partial, set_version, lakeshore.rl's Weights). Raises InvalidError
    naming ``name``."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= int(v) < 1 << 63:
        raise errors.InvalidError(
            f"invalid {name} {v!r}: want an integer ≥ 0 and below 2^63", field=name, value=v, rule="0 ≤ v < 2^63"
        )
    return int(v)


def _refused(e: errors.DispatchError) -> bool:
    """Whether the server answered ``e`` as a refusal (a 4xx: nothing of the request was
    written and a repeat would be refused again), not an answer that was lost (no status: a
    connection error; a 5xx) nor a "try again" (408, 429), which are repeated."""
    return e.status is not None and 400 <= e.status < 500 and e.status not in (408, 429)


# The most encoded record bytes one put request carries (each record counted with the 5
# bytes of its msgpack bin header). The server refuses a body over its limit, by default
# the largest value (16 MiB) plus 1 MiB for the envelope (server.MaxBodyBytesDefault), with
# 413; a record is at most 16 MiB encoded, so a chunk of one record (the bound is never
# split below one) and any chunk within this bound is a body of at most 16 MiB plus a few
# bytes of envelope: nearly 1 MiB under the limit.
_SEND_CHUNK_BYTES = MAX_VALUE_BYTES


def _chunks(recs: list[bytes], limit: int = _SEND_CHUNK_BYTES) -> list[list[bytes]]:
    """Split encoded records, in order, into runs of at most ``limit`` bytes (each record
    counted with 5 bytes of header), each at least one record: one put request each."""
    out: list[list[bytes]] = []
    cur: list[bytes] = []
    size = 0
    for r in recs:
        n = len(r) + 5
        if cur and size + n > limit:
            out.append(cur)
            cur, size = [], 0
        cur.append(r)
        size += n
    if cur:
        out.append(cur)
    return out


def _queue_missing(e: BaseException) -> bool:
    """Whether e says the data queue itself does not exist yet (no put created it): the
    server answers reads of such a queue 404 with details.queue, and creates nothing."""
    return isinstance(e, errors.NotFoundError) and bool(e.details.get("queue"))


# How long a waiting call sleeps between asks while its queue does not exist yet: a batch
# hand-out (whose deadline is seconds away), a read of a stream (whose idle timeout may be
# short).
_ABSENT_WAIT = 0.5
_ABSENT_READ_WAIT = 0.05

# The most rows one answer holds (the server's bound, Go's persist.ScanLimitMax, checked
# by persist.CheckAnswerCount): the limit of GET …/records and GET …/kv, the indexes of
# POST …/data, the keys of POST …/kv/get, the batch_size of POST …/batch and the size of
# POST …/replay. A larger ``limit`` reads a page of this many, and the cursor continues
# at the server's next offset, so a big queue is read in pages; a larger get_data,
# kv_batch_get, get_batch or replay is split into requests of at most this many.
_READ_LIMIT_MAX = 10_000


def _parts(n: int) -> list[tuple[int, int]]:
    """The parts ``[lo, hi)`` of ``n`` items that one request each may ask for (at most
    ``_READ_LIMIT_MAX``); one empty part when ``n`` is 0."""
    return [(lo, min(n, lo + _READ_LIMIT_MAX)) for lo in range(0, max(n, 1), _READ_LIMIT_MAX)]


def _join_arrow(parts: list[bytes]) -> bytes:
    """The Arrow IPC answers of one read split into several requests as one answer, their
    rows in order (parts without rows are left out: they may not carry the fields)."""
    if len(parts) == 1:
        return parts[0]
    pa = _pyarrow()
    tables = [pa.ipc.open_stream(pa.py_buffer(p)).read_all() for p in parts if p]
    rows = [t for t in tables if t.num_rows] or tables[:1]
    if not rows:
        return b""
    table = pa.concat_tables(rows).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _arrow_rows(data: bytes) -> int:
    """How many rows an Arrow IPC answer holds (0 for an empty answer)."""
    if not data:
        return 0
    pa = _pyarrow()
    return int(pa.ipc.open_stream(pa.py_buffer(data)).read_all().num_rows)


def _replay_part_seed(seed: int, k: int) -> int:
    """The seed of part ``k`` of a replay split into requests (Go's
    persist.ReplayPartSeed): ``seed + k`` modulo 2^64, skipping 0; 0 (a fresh seed) stays 0."""
    if seed == 0:
        return 0
    s = seed + k
    return s if s < 1 << 64 else s - (1 << 64) + 1


def _put_id() -> str:
    """A new idempotency id for one put batch (the put_id parameter): 26 random
    characters, as the Go SDK's ULIDs are long."""
    return secrets.token_hex(13)


# ------------------------------------------------------------------------------ the plane of a storage path

_storage_lock = threading.Lock()
_storage_planes: dict[str, Dispatch] = {}


def _storage_dispatch(storage_path: str | os.PathLike[str]) -> Dispatch:
    """The embedded plane of a storage directory (``{dir}/lakeshore.db``), one per directory
    in the process, closed at exit; the process default when ``$LAKESHORE_URL`` is set."""
    if is_url(str(storage_path)):
        shown = redact_url(str(storage_path))
        raise errors.InvalidError(
            f"storage_path {shown!r} is a URL; name a directory (the queue's data goes under it), "
            "or pass dispatch=Dispatch('http://…') for a server's data queues",
            field="storage_path",
            value=shown,
            rule="a directory",
        )
    check_target(str(storage_path), "storage_path", http=False)  # white space, a libpq keyword string
    if os.environ.get("LAKESHORE_URL"):
        return default_dispatch()
    root = Path(storage_path).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise errors.InvalidError(
            f"storage_path {str(storage_path)!r} is a file; name a directory (the queue's data goes under it)",
            field="storage_path",
            value=str(storage_path),
            rule="a directory",
        )
    target = str(root / "lakeshore.db")
    with _storage_lock:
        d = _storage_planes.get(target)
        if d is None or not d._closer.alive:
            d = Dispatch(target)  # makes root 0700 when missing (and lakeshore.db 0600)
            _storage_planes[target] = d
        return d


def _close_storage_planes() -> None:
    for d in list(_storage_planes.values()):
        d.close()


atexit.register(_close_storage_planes)


# ------------------------------------------------------------------------------ the queue


@dataclasses.dataclass(frozen=True)
class Backpressure:
    """Back-pressure of a queue's puts (Go: ``persist.Admission``): a batch is admitted
    only while ``task_name`` has at most ``max_unconsumed`` records of the partition left
    to consume (counting the batch; a batch into an empty buffer always goes), and while
    its records' target version (``target_weight_version``, else ``weight_version``) is
    at most ``max_ahead`` above the queue's current version. A refused batch raises
    :class:`~lakeshore.errors.QueueFullError` and stays buffered (sent again, with its put
    id, by the next send), so nothing is lost or put twice. Reads on the same object are
    never held by it: they send what is buffered without waiting on back-pressure, and a
    batch still refused stays buffered while the read goes on (the read is what frees
    room for the next flush).

    Attributes:
        task_name: the trainer's task whose unconsumed records count (with
            ``max_unconsumed``).
        max_unconsumed: at most this many unconsumed records (None or 0: no bound);
            an integer ≥ 0, needing ``task_name`` when > 0.
        max_ahead: at most this many versions ahead (None: no bound); an integer ≥ 0.
            One of the two bounds is required: a Backpressure bounding nothing is refused.
        on_full: ``"reject"`` (QueueFullError at once) or ``"block"`` (the put waits for
            the trainer to consume or advance the version, up to ``timeout``).
        timeout: seconds a blocked put waits, > 0 (default 30).

    Raises:
        InvalidError: when made with a bad field (an unknown ``on_full``, a negative
            bound, ``max_unconsumed`` without ``task_name``, no bound at all, a
            ``timeout`` that is not seconds > 0), naming it.
    """

    task_name: str | None = None
    max_unconsumed: int | None = None
    max_ahead: int | None = None
    on_full: str = "reject"
    timeout: float | None = None

    def __post_init__(self) -> None:
        # Checked where it is written, not where it is first used: a @rollout's
        # Backpressure is used at each job's end, so a typo (on_full="wait") failed every
        # rollout job after its generation ran, and each retry ran it again.
        self.params()

    def params(self) -> dict[str, str]:
        """The query parameters of a put (docs/http-api.md)."""
        if self.on_full not in ("reject", "block"):
            raise errors.InvalidError(
                f"invalid on_full {self.on_full!r}: use 'reject' or 'block'", field="on_full", value=self.on_full, rule="reject|block"
            )
        for name, v in (("max_unconsumed", self.max_unconsumed), ("max_ahead", self.max_ahead)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise errors.InvalidError(
                    f"invalid {name} {v!r}: want an integer ≥ 0 (None: no bound)", field=name, value=v, rule="an integer ≥ 0"
                )
        # Not NaN, ≤ 0 or a string: the server refuses a negative wait (each batch then
        # dropped) and reads 0 as its default wait. None: 30 s.
        _check_seconds("timeout", self.timeout, above_zero=True)
        if self.max_unconsumed and not self.task_name:
            raise errors.InvalidError(
                f"invalid task_name {self.task_name!r}: max_unconsumed needs the task whose unconsumed records it bounds",
                field="task_name",
                value=self.task_name,
                rule="a task name, with max_unconsumed",
            )
        if not self.max_unconsumed and self.max_ahead is None:
            # As Go's persist.CheckAdmission: a Backpressure bounding nothing admitted every
            # put, so a task_name given without its bound held nothing back, silently.
            raise errors.InvalidError(
                f"invalid max_unconsumed {self.max_unconsumed!r}: back-pressure needs a bound: max_unconsumed > 0 "
                "(with task_name, the trainer's task) and/or max_ahead ≥ 0 (for none, pass no Backpressure)",
                field="max_unconsumed",
                value=self.max_unconsumed,
                rule="max_unconsumed > 0 and/or max_ahead ≥ 0",
            )
        out: dict[str, str] = {}
        if self.task_name is not None:
            out["admission_task"] = self.task_name
        out["max_unconsumed"] = str(int(self.max_unconsumed or 0))
        if self.max_ahead is not None:
            out["max_ahead"] = str(int(self.max_ahead))
        if self.on_full == "block":
            out["admission_block"] = "true"
            if self.timeout is not None:
                out["admission_timeout"] = repr(float(self.timeout))
        return out


LEASE_MAX_SECONDS = 24 * 3600.0
"""The longest lease of a read (Go persist.LeaseMax): a longer one is refused."""

WEIGHT_VERSION = "weight_version"
"""The field holding the policy version that produced a record (Go: persist.WeightVersionField)."""
TARGET_WEIGHT_VERSION = "target_weight_version"
"""The field holding the version a record is meant for (Go: persist.TargetVersionField)."""
LAST_WEIGHT_VERSION = "last_weight_version"
"""A partial rollout's newest segment's version (Go: persist.LastWeightVersionField)."""
SEGMENT_VERSIONS = "segment_versions"
"""A partial rollout's segment versions, in order (Go: persist.SegmentVersionsField)."""
COMPLETE = "complete"
"""True once a partial rollout's last segment is in, absent before (Go: persist.CompleteField):
list it in a read's fields to get only complete rollouts."""


class Queue:
    """A persistent, append-only data queue.

    Args:
        name: the queue, 1–128 bytes of ``[A-Za-z0-9._-]``.
        storage_path: a directory: without ``dispatch`` and ``$LAKESHORE_URL``, the queue
            lives on the embedded plane of that directory (its data under
            ``{storage_path}/data/``); with a server plane it is only recorded (the server
            keeps its data under its data directory). See the module's doc.
        batch_size: puts are buffered and sent when this many accumulate.
        auto_flush_interval_sec: or after this many seconds (buffered records are sent and
            committed).
        enable_metrics: count this object's puts, gets and flushes in :meth:`stats`.
        zerocopy_mode: ``"auto"`` (default): read columns are views on the answer's Arrow
            buffers where the layout allows; ``"off"``: copies (:data:`ZerocopyMode`). Puts
            carry numpy arrays and torch tensors as raw tensors either way (never pickled).
        dispatch: the plane (default: see ``storage_path``, else the process default).
        partition_id: the partition puts and reads use by default (``"default"``).
        backpressure: the back-pressure of this object's puts (:class:`Backpressure`;
            None: none).

    Raises:
        InvalidError: a bad name, batch size or zerocopy mode, or a bad ``backpressure``
            (a negative bound, ``max_unconsumed`` without ``task_name``, an unknown
            ``on_full``).
    """

    def __init__(
        self,
        name: str,
        storage_path: str | os.PathLike[str] | None = None,
        batch_size: int = 100,
        auto_flush_interval_sec: float = 1.0,
        enable_metrics: bool = False,
        *,
        zerocopy_mode: ZerocopyMode = "auto",
        dispatch: Dispatch | None = None,
        partition_id: str = "default",
        backpressure: Backpressure | None = None,
    ) -> None:
        _check_name("queue name", name)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise errors.InvalidError(
                f"invalid batch_size {batch_size!r}: want an integer ≥ 1", field="batch_size", value=batch_size, rule="≥ 1"
            )
        if zerocopy_mode not in _ZEROCOPY_MODES:
            raise errors.InvalidError(
                f"invalid zerocopy_mode {zerocopy_mode!r}: use 'auto' (views on the answer) or 'off' (copies)",
                field="zerocopy_mode",
                value=zerocopy_mode,
                rule="auto|off",
            )
        self.name = name
        self._told_partition = False
        # Field names a batch hand-out asked for: those found in the queue's schema, and
        # those warned about (in neither it nor any produced field set; _tell_unknown_fields).
        self._schema_fields: set[str] = set()
        self._told_fields: set[str] = set()
        self._default_reader: Reader | None = None  # get_meta/get_batch on the queue
        self.storage_path = None if storage_path is None else os.fspath(storage_path)
        self.batch_size = batch_size
        self.auto_flush_interval_sec = auto_flush_interval_sec
        self.enable_metrics = enable_metrics
        self.zerocopy_mode = zerocopy_mode
        self.partition_id = partition_id
        self._bp_params = backpressure.params() if backpressure is not None else {}
        self._bp_wait = float(backpressure.timeout if backpressure.timeout is not None else 30.0) if (
            backpressure is not None and backpressure.on_full == "block"
        ) else 0.0
        if dispatch is not None:
            self._d = dispatch
        elif storage_path is not None:
            self._d = _storage_dispatch(storage_path)
        else:
            self._d = default_dispatch()
        self.path = f"/v1/namespaces/{path_segment('namespace', self._d.namespace)}/data/{path_segment('data queue name', name)}"
        self._buffer: list[tuple[str, bytes]] = []
        # Batches sent without an answer (a dropped connection, a killed server, a 5xx),
        # with their put ids: sent again, first, by the next send, so the server answers a
        # repeat with the first put's indexes instead of appending twice. A batch the server
        # refused (a 4xx: it wrote nothing) is never among them.
        self._unsent: list[tuple[str, list[bytes], str]] = []
        # The put id of each new batch, in the order sent: random by default; lakeshore.rl
        # makes a rollout job's ids from the job's id and the batch's number, so that a
        # retried attempt's batches repeat the ids of the ones an earlier attempt wrote.
        self._next_put_id: Callable[[], str] = _put_id
        # A refusal the background auto-flush met: raised by the next flush().
        self._refused: errors.DispatchError | None = None
        self._buffer_lock = asyncio.Lock()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._offsets: dict[str, int] = {}  # the read cursor of each partition
        self.metrics = {"puts": 0, "gets": 0, "flushes": 0}
        # After close(): puts are sent at once (no buffer, no auto-flush timer left).
        self._closed = False
        # Records a send (_send) has taken from the buffer and not yet had answered: out
        # of _held()'s count, back in _unsent if the send fails.
        self._in_flight = 0

    @property
    def dispatch(self) -> Dispatch:
        """The plane the queue lives on."""
        return self._d

    def __repr__(self) -> str:
        return f"data.Queue({self.name!r}, dispatch={self._d!r})"

    def __len__(self) -> int:
        """persisting's ``len(q)``: the records of the queue, every partition (the
        store's ``len``: put minus cleared, as :meth:`stats` reports it), plus those this
        object holds buffered and not yet sent (as persisting counts its buffer). 0 for a
        queue nothing was ever put to.

        A blocking call (one request to the plane, on the dispatch's client thread, as
        :class:`~lakeshore.SyncQueue`'s verbs are): in a coroutine it holds the event loop
        for that request; ``(await q.stats())["len"]`` is the awaitable form of the
        store's count.

        Raises:
            DispatchError: the plane could not answer (e.g. UnavailableError).
            RuntimeError: called on the dispatch's own client thread."""
        return int(self._d.run(self.stats()).get("len") or 0) + self._held()

    def __bool__(self) -> bool:
        # A Queue object is always true: without this, ``if q:`` would ask the plane for
        # len() (a blocking request) and an empty queue would read as false.
        return True

    def _held(self) -> int:
        """The records this object holds: buffered, and sent without an answer."""
        return len(self._buffer) + sum(len(b[1]) for b in self._unsent)

    def close(self) -> None:
        """persisting's ``close()``: stop the auto-flush timer and send, then commit, the
        records this object still buffers (:meth:`flush`), so none is lost with the object.
        Safe to call again. The queue's data and the plane stay: the queue is durable and
        the plane is shared (``Dispatch.close`` closes a plane). After it the object still
        reads, and a put is sent at once instead of buffered (there is no timer left to
        send it), so a put after ``close()`` is not lost either.

        A blocking call, as :meth:`__len__`; it sends nothing, so makes no request, when
        nothing is buffered. In a coroutine, ``await q.flush()`` first makes it a no-op.

        Raises:
            DispatchError: as :meth:`flush`: the buffered records could not be sent (they
                stay buffered and the queue stays open: call ``close()`` again), or a
                refusal a background flush met. After a refusal the queue is closed.
            RuntimeError: called in a coroutine while a send of this object's records is in
                flight (a background auto-flush held by back-pressure or a slow server):
                ``close()`` would hold the very loop that send needs, and closing without it
                could lose its records. Nothing changes: ``await q.flush()`` (which waits for
                it), then ``close()``. Called with no loop running in its thread, it waits."""
        if self._in_flight and _loop_running():
            raise RuntimeError(
                f"close() of data queue {self.name!r} while a send of {self._in_flight} of its records is in flight "
                "(a background auto-flush): await q.flush() first, then close()"
            )
        timer, self._flush_timer = self._flush_timer, None
        if timer is not None:
            timer.cancel()
        if self._held() or self._refused is not None or self._in_flight:
            try:
                self._d.run(self.flush())
            except errors.DispatchError:
                if self._held():
                    raise  # not sent: still buffered, the queue stays open
                self._closed = True
                raise
        self._closed = True

    def writer(self) -> Writer:
        """persisting's ``writer()``: a producer's view of this queue (:class:`Writer`),
        sharing its buffer."""
        return Writer(self)

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self._d.run_async(self._d._transport.call(method, self.path + path, **kw))

    async def _post_records(self, params: dict[str, str], body: dict[str, Any], wait: float) -> Any:
        """POST …/records with ``params``. A put whose :class:`Backpressure` blocks (``wait`` > 0,
        its timeout) is sent again, with its put id, while the server's cap of one long-poll
        (``--long-poll-max``, 60 s by default) ended its wait with QueueFullError before the
        timeout, each request asking for what is left of it: the put waits its whole timeout,
        as in Go, however the server caps one request."""
        if wait <= 0:
            return await self._call("POST", "/records", params=params, body=body, retry="safe", wait=wait)
        deadline = time.monotonic() + wait
        while True:
            left = min(max(deadline - time.monotonic(), 0.001), LONG_POLL_MAX)
            try:
                return await self._call(
                    "POST", "/records", params={**params, "admission_timeout": repr(left)}, body=body, retry="safe", wait=left
                )
            except errors.QueueFullError:
                if time.monotonic() >= deadline:
                    raise

    # -- writes --------------------------------------------------------------------------

    async def put(
        self,
        record: Mapping[str, Any],
        partition_id: str | None = None,
        *,
        weight_version: int | None = None,
        target_weight_version: int | None = None,
    ) -> None:
        """Buffer one record (a map of field → value); sent at ``batch_size`` or after
        ``auto_flush_interval_sec``. ``weight_version`` (and ``target_weight_version``)
        tag it with the policy version that produced it (the ``weight_version`` field,
        which staleness-bounded reads judge). After :meth:`close` it is sent at once.
        Raises EncodeError for a value with no wire form."""
        await self.put_batch(
            [record], partition_id=partition_id, weight_version=weight_version, target_weight_version=target_weight_version
        )

    async def put_batch(
        self,
        records: Sequence[Mapping[str, Any]],
        partition_id: str | None = None,
        *,
        weight_version: int | None = None,
        target_weight_version: int | None = None,
    ) -> None:
        """Buffer several records (sent as :meth:`put`'s)."""
        part = partition_id or self.partition_id
        tags: dict[str, int] = {}
        for name, v in ((WEIGHT_VERSION, weight_version), (TARGET_WEIGHT_VERSION, target_weight_version)):
            if v is not None:
                tags[name] = _version(name, v)
        encoded = []
        for i, r in enumerate(records):
            if type(r) is not dict:
                if not isinstance(r, Mapping):
                    raise TypeError(f"record {i} is a {type(r).__name__}; a record is a map of field name → value")
                r = dict(r)
            if tags:
                r = dict(r, **tags)
            try:
                data = wire.encode(r)  # a dict is read, never changed: no copy
            except wire.EncodeError as e:  # named here, not for every record
                raise wire.EncodeError(f"record {i}" + e.path[1:], e.type_name, e.reason) from None
            if len(data) > MAX_VALUE_BYTES:
                encode_value(f"record {i}", r)  # raises its size error
            encoded.append((part, data))
        async with self._buffer_lock:
            self._buffer.extend(encoded)
            self.metrics["puts"] += len(encoded)
            full = len(self._buffer) >= self.batch_size or self._closed
        if full:
            await self._send()
        elif self._flush_timer is None and self.auto_flush_interval_sec > 0:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(
                self.auto_flush_interval_sec, lambda: loop.create_task(self._auto_flush())
            )

    async def put_partial(
        self,
        records: Sequence[Mapping[str, Any]],
        weight_version: int,
        *,
        complete: bool = False,
        partition_id: str | None = None,
    ) -> list[int]:
        """Put partial rollouts now (after this object's buffered records) and return their
        global indexes, for :meth:`patch_partial` (Go: ``persist.Queue.PutPartial``): each
        record's first segment was produced at ``weight_version``, which it keeps as its
        ``weight_version`` (the oldest segment, judged by staleness bounds by default);
        ``last_weight_version`` and ``segment_versions`` (``[weight_version]``) follow its
        segments, and ``complete`` is set (True) only once the last segment is in — a
        reader that asks for the ``complete`` field gets only complete rollouts. The
        queue's :class:`Backpressure` applies.

        Raises:
            InvalidError: a negative ``weight_version``.
            QueueFullError: back-pressure refused the put: nothing was written, unless the
                records were over the server's body limit (16 MiB), so went as several
                requests, and a later one was refused — then the error's
                ``written_indexes`` lists the records the earlier ones wrote (any other
                error after the first request says the same)."""
        weight_version = _version(WEIGHT_VERSION, weight_version)
        tags: dict[str, Any] = {WEIGHT_VERSION: weight_version, LAST_WEIGHT_VERSION: weight_version, SEGMENT_VERSIONS: [weight_version]}
        if complete:
            tags[COMPLETE] = True
        recs = [encode_value(f"record {i}", dict(r, **tags)) for i, r in enumerate(records)]
        if self._buffer or self._unsent:
            await self._send()
        indexes: list[int] = []
        chunks = _chunks(recs)  # each request under the server's body limit
        for chunk in chunks:
            try:
                ans = await self._post_records(
                    {"partition": partition_id or self.partition_id, "put_id": _put_id(), **self._bp_params}, {"records": chunk}, self._bp_wait
                )
            except errors.DispatchError as e:
                if indexes:
                    # The earlier requests' records are in: name them, so the caller can patch
                    # them, or put only the rest again.
                    e.written_indexes = list(indexes)
                    e.message = (
                        f"{e.message} (this put_partial went as {len(chunks)} requests over the server's body limit: "
                        f"the first {len(indexes)} of its {len(recs)} records were written, their indexes in "
                        "the error's written_indexes; the rest were not)"
                    )
                raise
            self.metrics["puts"] += len(chunk)
            indexes.extend(int(i) for i in ans.get("indexes") or [])
        return indexes

    async def patch_partial(
        self,
        global_indexes: Sequence[int],
        records: Sequence[Mapping[str, Any]] | None,
        weight_version: int,
        *,
        complete: bool = False,
        partition_id: str | None = None,
    ) -> None:
        """Add a segment produced at ``weight_version`` to the partial rollouts at
        ``global_indexes`` (``POST D/partial/patch``; Go: ``persist.Queue.PatchPartial``):
        ``records[i]`` is merged into the i-th (None: no field), the version is appended to
        its ``segment_versions`` and becomes its ``last_weight_version``; ``complete=True``
        marks it complete. Its ``weight_version`` (the oldest segment) stays.

        Raises:
            InvalidError: a version below the record's newest segment's, a record that is not
                a partial rollout, a record that sets a version field or ``complete``.
            NotFoundError: an index that is not a record of the partition."""
        body: dict[str, Any] = {
            "partition": partition_id or self.partition_id,
            "indexes": [int(i) for i in global_indexes],
            "weight_version": _version(WEIGHT_VERSION, weight_version),
            "complete": bool(complete),
        }
        if records is not None:
            body["records"] = [encode_value(f"record {i}", dict(r)) for i, r in enumerate(records)]
        await self._call("POST", "/partial/patch", body=body, retry="safe")

    async def _auto_flush(self) -> None:
        self._flush_timer = None
        try:
            await self.flush()
        except errors.DispatchError as e:
            if _refused(e) and self._refused is None:
                self._refused = e  # no caller here: the next flush() raises it
            # Otherwise the records stay buffered; the next put or flush sends them.

    async def _send_before_read(self) -> None:
        """Send the buffered records before a read (so the read sees them), without
        waiting on back-pressure: a batch the queue's :class:`Backpressure` refuses now
        stays buffered for a later send (as for :meth:`flush`) and the read goes on, since
        it is the reads that free room. Other errors are raised."""
        if not (self._buffer or self._unsent):
            return
        try:
            await self._send(block=False)
        except errors.QueueFullError:
            pass

    async def _send(self, block: bool = True) -> list[int]:
        """Send the buffered records (see :meth:`flush`). ``block=False`` sends them with a
        blocking :class:`Backpressure` made rejecting: a full queue answers QueueFullError
        at once instead of holding the call."""
        params = self._bp_params
        wait = self._bp_wait
        if not block:
            params = {k: v for k, v in params.items() if k not in ("admission_block", "admission_timeout")}
            wait = 0.0
        async with self._buffer_lock:
            buf, self._buffer = self._buffer, []
            by_part: dict[str, list[bytes]] = {}
            for part, rec in buf:
                by_part.setdefault(part, []).append(rec)
            batches = self._unsent + [
                (part, chunk, self._next_put_id()) for part, recs in by_part.items() for chunk in _chunks(recs)
            ]
            self._unsent = []
        indexes: list[int] = []
        sent = 0
        taken = sum(len(b[1]) for b in batches)
        self._in_flight += taken
        try:
            for part, recs, put_id in batches:
                ans = await self._post_records({"partition": part, "put_id": put_id, **params}, {"records": recs}, wait)
                indexes.extend(int(i) for i in ans.get("indexes") or [])
                sent += 1
        except BaseException as e:
            refused = isinstance(e, errors.DispatchError) and _refused(e)
            async with self._buffer_lock:
                # An answer that was lost: nothing is lost and nothing is put twice, the
                # batch goes again, with the same put id, by the next send. A refusal: the
                # server wrote nothing of that batch and would refuse it again, so it is
                # dropped (raised once, here); the batches after it go with the next send.
                self._unsent[:0] = batches[sent + 1 :] if refused else batches[sent:]
            if refused and hasattr(e, "add_note"):  # Python 3.11+
                part, recs, _ = batches[sent]
                e.add_note(
                    f"lakeshore: the server refused a batch of {len(recs)} records to partition {part!r} and wrote "
                    "none of them; they were dropped (put them again, fixed). Other records are unaffected."
                )
            elif isinstance(e, errors.QueueFullError) and hasattr(e, "add_note"):
                n = sum(len(b[1]) for b in batches[sent:])
                e.add_note(
                    f"lakeshore: back-pressure held {n} records; they stay buffered and the next send (a put, "
                    "flush() or read on this Queue) sends them: do not put them again, or they are written twice."
                )
            raise
        finally:
            self._in_flight -= taken
        return indexes

    async def flush(self) -> None:
        """Send the buffered records and commit them to storage.

        Raises:
            DispatchError: a batch could not be sent. When the server refused it (a 4xx
                answer, e.g. :class:`~lakeshore.errors.IncompatibleTypeError` for a value the
                field's column cannot take) it wrote none of that batch's records and the
                batch is dropped: the error is raised once and later puts go through. When
                the answer was lost (a connection error, a 5xx or ``unavailable``; also a 408
                or 429, which ask for a repeat) the batch
                stays buffered and goes again, with its put id, by the next send. A refusal
                the background auto-flush met is raised by the next ``flush()``, after it
                has sent and committed the rest."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        await self._send()
        while self._in_flight:
            # Another send of this object's records (a background auto-flush) is out: what
            # it carries is committed by this flush too, so wait for its answer; a send that
            # failed put its batches back, and they go again from here.
            await asyncio.sleep(_IN_FLIGHT_POLL_SECONDS)
            if self._unsent:
                await self._send()
        try:
            await self._call("POST", "/flush", retry="safe")
        except errors.NotFoundError as e:
            # A queue nothing was ever put to (the send above had nothing) has nothing
            # to flush: a no-op, as its reads answer empty, so a producer that flushes
            # at shutdown after producing nothing does not fail.
            if not _queue_missing(e):
                raise
        self.metrics["flushes"] += 1
        refused, self._refused = self._refused, None
        if refused is not None:
            raise refused

    # -- reads ---------------------------------------------------------------------------

    async def get(
        self, limit: int = 100, offset: int | None = None, *, partition_id: str | None = None, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records as dicts: from ``offset`` (the record at that position of
        the partition, 0 the first) when given, as persisting's ``get(limit, offset)`` reads
        each time, leaving this object's cursor alone; else the next after what this object
        has read (its cursor, from the first). Sends this object's buffered records first.
        One call reads at most 10,000 records (the server's bound on one read); call again
        for the rest: the cursor continues where the page ended.

        Raises:
            InvalidError: a negative ``offset``."""
        _check_offset(offset)
        await self._send_before_read()
        part = partition_id or self.partition_id
        start = self._offsets.get(part, 0) if offset is None else offset
        recs, nxt = await self._read(start, limit, part, fields, 0.0)
        if offset is None:
            self._offsets[part] = nxt
        self.metrics["gets"] += len(recs)
        if not recs and partition_id is None and not self._told_partition:
            await self._tell_other_partitions("get()", start)
        return recs

    async def _tell_other_partitions(self, verb: str, start: int) -> None:
        """After a read (``verb``, from ``start``) of the default partition found nothing:
        log once, at WARNING, which other partitions hold records (a put with
        ``partition_id=`` and a read without it read different partitions; reads never
        span partitions)."""
        try:
            parts = (await self._call("GET", "/stats", retry="safe")).get("partitions") or {}
        except errors.DispatchError:
            return
        others = {str(p): int(n) for p, n in dict(parts).items() if str(p) != self.partition_id and int(n) > 0}
        if others:
            self._told_partition = True
            log.warning(
                "lakeshore.data: %s: %s read partition %r (this Queue's partition_id), which has no records "
                "from offset %d; records are in partitions %s: pass partition_id= to read one (reads are per partition)",
                self.name,
                verb,
                self.partition_id,
                start,
                others,
            )

    async def _tell_unknown_fields(self, fields: Sequence[str], sampler: Mapping[str, Any] | None = None) -> None:
        """Before a batch hand-out of ``fields``: log once per field, at WARNING, a name that
        is not a field of the queue's schema (so of no produced field set either): the
        hand-out waits for records that have it, so a misspelt name answers an empty batch,
        or a TimeoutError after the whole wait. Not refused: a later ``put_fields`` may add
        the field. A queue without fields yet (nothing put) tells nothing: no name to compare
        with, as a consumer may start before its producers. The schema is asked only while a
        name is neither known nor told, and a failure to ask it never fails the read. The Go
        SDK's Reader applies the same rule (``persist.UnknownFields``).

        So does a field the request's built-in ``sampler`` reads (its body; Go's
        ``persist.SamplerFields``: GRPO's ``group_field``, ``drop_zero_variance`` and
        ``time_field``, seqlen-balanced's ``length_field``), saying what a sample without
        it becomes (in no GRPO group, so never handed out; length 0; not judged)."""
        read = _sampler_fields(sampler)
        names = list(fields) + [f for _, f in read]
        unresolved = [f for f in names if f not in self._schema_fields and f not in self._told_fields]
        if not unresolved:
            return
        try:
            ans = await self._call("GET", "/schema", retry="safe")
        except errors.DispatchError:
            return  # no queue yet (nothing to compare with), or the plane is away: the read says so
        schema = [str(f.get("name")) for f in ans.get("fields") or []]
        if not schema:
            return  # nothing put yet: no field to compare with (the Go SDK's persist.UnknownFields rule)
        self._schema_fields.update(schema)
        unknown_read = [(p, f) for p, f in read if f in unresolved and f not in self._schema_fields]
        unknown = [f for f in unresolved if f not in self._schema_fields and f in fields]
        if unknown_read:
            self._told_fields.update(f for _, f in unknown_read)
            log.warning(
                "lakeshore.data: %s: the %s sampler reads fields that are in no record of the queue (its fields: "
                "%s): %s; check the spelling",
                self.name,
                str((sampler or {}).get("name")),
                sorted(self._schema_fields),
                "; ".join(f"{p}={f!r}: {_SAMPLER_FIELD_EFFECT[p]}" for p, f in unknown_read),
            )
        if unknown:
            self._told_fields.update(unknown)
            log.warning(
                "lakeshore.data: %s: fields %s are in no record of the queue (its fields: %s): a batch hands out only "
                "records that have every field asked for, so it stays empty until a put or put_fields adds them; "
                "check the spelling",
                self.name,
                unknown,
                sorted(self._schema_fields),
            )

    async def _read(
        self,
        offset: int,
        limit: int,
        partition_id: str | None,
        fields: Sequence[str] | None,
        wait: float,
        shard: tuple[int, int] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        params: dict[str, Any] = {"offset": offset, "limit": min(limit, _READ_LIMIT_MAX), "partition": partition_id or self.partition_id}
        if fields:
            params["fields"] = ",".join(fields)
        if wait > 0:
            params["wait"] = wait
        if shard is not None and shard[1] > 1:
            params["rank"], params["world_size"] = shard
        try:
            data, headers = await self._call("GET", "/records", params=params, wait=wait, raw=True, accept=ARROW, retry="safe")
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise
            # No put has created the queue yet: it reads as empty (after the wait asked for).
            if wait > 0:
                await asyncio.sleep(min(wait, _ABSENT_READ_WAIT))
            return [], offset
        recs = _records(data)
        nxt = headers.get("Lakeshore-Next-Offset")
        # Never below the offset asked for (the server's contract, docs/http-api.md; a server
        # before it answered the log's end for an offset past it): a cursor never moves back.
        return recs, max(offset, int(nxt)) if nxt else offset + len(recs)

    async def stream(
        self,
        limit: int = 1000,
        offset: int | None = None,
        wait: bool = True,
        timeout: float = 5.0,
        *,
        partition_id: str | None = None,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Batches (lists of record dicts) of up to ``limit`` records, following the queue:
        with ``wait``, block for new records, ending after ``timeout`` seconds without any;
        without, end at the tail. From ``offset`` (the global index to start at, as
        persisting's ``stream(limit, offset, wait, timeout)`` and :meth:`get` take it),
        leaving this object's cursor alone; without it, from this object's cursor, which
        it advances. Sends this object's buffered records first, as :meth:`get` does.
        ``limit`` bounds each batch, not the whole stream (persisting's bounds the whole
        stream, in batches of at most 100).

        Raises:
            InvalidError: a negative ``offset``, a NaN ``timeout``."""
        if wait and math.isnan(timeout):
            raise errors.InvalidError(f"invalid timeout {timeout!r}: use seconds", field="timeout", value=timeout, rule="seconds, not NaN")
        _check_offset(offset)
        await self._send_before_read()
        part = partition_id or self.partition_id
        position = offset
        first = self._offsets.get(part, 0) if position is None else position
        yielded = False
        last = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - last)
            if wait and left <= 0:
                break
            start = self._offsets.get(part, 0) if position is None else position
            recs, nxt = await self._read(start, limit, part, None, min(left, 30.0) if wait else 0.0)
            if position is None:
                self._offsets[part] = nxt
            else:
                position = nxt
            if recs:
                last = time.monotonic()
                yielded = True
                yield recs
            elif not wait:
                break
        if not yielded and partition_id is None and not self._told_partition:
            # Ended with nothing: say where the records are, as get() does (the persisting
            # page puts to partition_id="train_0" and streams without one).
            await self._tell_other_partitions("stream()", first)

    def reader(self, rank: int | None = None, world_size: int | None = None) -> Reader:
        """A reader for data-parallel rank ``rank`` of ``world_size`` (see :class:`Reader`).
        Defaults: ``$RANK`` and ``$WORLD_SIZE``, which distributed launchers set (torchrun,
        ``torch.distributed``, DeepSpeed), else 0 and 1.

        Raises:
            InvalidError: a rank outside ``0 ≤ rank < world_size``, or such variables that
                are not integers."""
        return Reader(self, rank, world_size)

    async def set_version(self, version: int) -> None:
        """Advance the queue's current weight version (the trainer, after an optimizer
        step). Versions never go back: a lower one raises InvalidError; the same one is a
        no-op. Staleness-bounded reads and blocked producers see it at once.

        Raises:
            InvalidError: a version that is not an integer in [0, 2^63), or below the
                current one."""
        v = _version("version", version)
        await self._call("POST", "/version", body={"version": v}, retry="safe")

    async def version(self) -> int:
        """The queue's current weight version (0 until :meth:`set_version`): rollout
        workers reload their weights when it changes."""
        try:
            ans = await self._call("GET", "/version", retry="safe")
        except errors.NotFoundError as e:
            if _queue_missing(e):
                return 0
            raise
        return int(ans.get("version") or 0)

    async def replay(
        self,
        fields: Sequence[str] | None,
        size: int,
        *,
        weight: str | None = None,
        window: int | None = None,
        partition_id: str | None = None,
        seed: int | None = None,
        format: BatchFormat = "numpy",
    ) -> Any:
        """A replay sample (``POST D/replay``; Go: ``persist.Queue.Replay``): ``size`` draws
        with replacement from the partition's records among the last ``window`` global
        indexes (default 100,000), weighted by the numeric field ``weight`` (a priority, a
        reward, a TD error; a record without it, or with a value ≤ 0, is never drawn) or
        uniform when ``weight`` is None. Nothing is consumed. The answer is a
        :class:`Batch` with one row per draw, in draw order (``global_indexes`` repeats an
        index drawn twice; pass it to :meth:`update_priorities`), empty when nothing can be
        drawn. ``fields`` None: every field; ``[]``: none (indexes only). ``seed`` repeats
        a draw. The server keeps the window's weights in memory, so a draw reads only the
        drawn records.

        One request draws at most 10,000 (the server's bound on one answer): a larger
        ``size`` is drawn in parts of at most 10,000, each from the window as it is then,
        part ``k`` (from 0) seeded ``seed + k`` (so the same ``seed`` and ``size`` repeat the
        same draws, and the first 10,000 are those of ``size=10_000``), as the Go SDK
        draws them. A part that draws nothing (the window emptied) ends the sample.

        Raises:
            InvalidError: ``size`` outside 1–1,048,576, a negative ``window``, a weight
                field that is not numeric or is a weight version.
        """
        _check_format(format)
        await self._send_before_read()
        body: dict[str, Any] = {"size": int(size), "partition": partition_id or self.partition_id}
        if fields is not None:
            body["fields"] = [str(f) for f in fields]
            if not body["fields"]:
                body["indexes_only"] = True
        if weight is not None:
            body["weight"] = weight
        if window is not None:
            body["window"] = int(window)
        if not 1 <= int(size) <= 1 << 20:
            raise errors.InvalidError(
                f"invalid size {int(size)}: a replay with size 1–1048576", field="size", value=int(size), rule="1–1048576"
            )
        answers: list[bytes] = []
        for k, (lo, hi) in enumerate(_parts(int(size))):
            body["size"] = hi - lo
            if seed is not None:
                body["seed"] = _replay_part_seed(int(seed), k)
            try:
                part, _ = await self._call("POST", "/replay", body=body, raw=True, accept=ARROW, retry="safe")
            except errors.NotFoundError as e:
                if not _queue_missing(e):
                    raise
                part = b""
            answers.append(part)
            if _arrow_rows(part) == 0:
                break  # nothing to draw from
        data = _join_arrow(answers)
        if not data:
            b = Batch()
            b.global_indexes = np.zeros(0, dtype=np.int64)
            b.table = None
            return b
        return _batch(data, fields, format, self.zerocopy_mode)

    async def update_priorities(
        self, global_indexes: Sequence[int], values: Sequence[float], *, field: str = "priority", partition_id: str | None = None
    ) -> None:
        """Set the numeric field ``field`` of the records at ``global_indexes`` to ``values``
        (one each; ``POST D/priorities``; Go: ``persist.Queue.UpdatePriorities``), for
        :meth:`replay`'s ``weight``: the next replay draws by the new values.

        Raises:
            InvalidError: lengths that differ, a weight-version field, a value that is not
                a finite number (0 or below is a weight never drawn), a value of the wrong
                kind for the field.
            NotFoundError: an index that is not a record of the partition.
        """
        idx = [int(i) for i in global_indexes]
        vals = [float(v) for v in values]
        body = {"partition": partition_id or self.partition_id, "field": field, "indexes": idx, "values": vals}
        await self._call("POST", "/priorities", body=body, retry="safe")

    async def drop_group(self, task_name: str, global_indexes: Sequence[int], partition_id: str | None = None) -> None:
        """Drop a group of records for ``task_name`` (``POST D/groups/drop``; Go:
        ``persist.Queue.DropGroup``): they are never handed to that task, and the group is
        counted once in ``stats()["groups_dropped"]`` (dropping it again does nothing) — a
        group judged useless after reading it, or a straggler given up on.

        Raises:
            InvalidError: no index, a bad task name or index.
            NotFoundError: an index that is not a record of the partition.
        """
        body = {"task": task_name, "partition": partition_id or self.partition_id, "indexes": [int(i) for i in global_indexes]}
        await self._call("POST", "/groups/drop", body=body, retry="safe")

    async def mark_consumed(self, task_name: str, global_indexes: Sequence[int], partition_id: str | None = None) -> None:
        """Mark records consumed by ``task_name`` (samplers skip them for that task). On a
        queue no put has created yet there is nothing to mark: it does nothing (as
        persisting does)."""
        body = {"task": task_name, "partition": partition_id or self.partition_id, "indexes": [int(i) for i in global_indexes]}
        try:
            await self._call("POST", "/consumption/mark", body=body, retry="safe")
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise

    async def reset_consumption(self, task_name: str, partition_id: str | None = None) -> None:
        """Forget what ``task_name`` consumed in the partition (a fresh run), with its
        rank-aware assignments. On a queue no put has created yet it does nothing."""
        try:
            await self._call("POST", "/consumption/reset", body={"task": task_name, "partition": partition_id or self.partition_id}, retry="safe")
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise

    async def get_meta(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str = "default",
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        **kw: Any,
    ) -> BatchMeta:
        """persisting's ``Queue.get_meta``: :meth:`Reader.get_meta` of this queue's reader
        for ``$RANK``/``$WORLD_SIZE`` (one reader per queue object, so its step count
        carries from call to call); it answers what is available now unless a ``timeout``
        is given (``kw``: Reader.get_meta's keywords)."""
        return await self._reader().get_meta(fields, batch_size, task_name, partition_id, sampler, **kw)

    async def get_batch(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str = "default",
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        **kw: Any,
    ) -> Any:
        """persisting's ``Queue.get_batch``: :meth:`Reader.get_batch` of this queue's reader
        (see :meth:`get_meta`)."""
        return await self._reader().get_batch(fields, batch_size, task_name, partition_id, sampler, **kw)

    def _reader(self) -> Reader:
        if self._default_reader is None:
            self._default_reader = self.reader()
        return self._default_reader

    async def consumed(self, task_name: str, partition_id: str | None = None) -> int:
        """How many records ``task_name`` consumed in the partition."""
        try:
            ans = await self._call("GET", "/consumption", params={"task": task_name, "partition": partition_id or self.partition_id}, retry="safe")
        except errors.NotFoundError as e:
            if _queue_missing(e):
                return 0
            raise
        return int(ans.get("consumed") or 0)

    async def clear_partition(self, partition_id: str) -> None:
        """Remove a partition's records. On a queue nothing was ever put to there is
        nothing to clear: a no-op."""
        try:
            await self._call("DELETE", f"/partitions/{path_segment('partition_id', partition_id)}", retry="safe")
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise

    async def clear_samples(self, global_indexes: Sequence[int], partition_id: str | None = None) -> None:
        """Remove records by global index, durably (an incomplete GRPO group whose members
        are cleared stops holding later groups back). Indexes never shift: the other
        records keep theirs, and a read skips the cleared ones. An index that is not a
        record of the partition (never put, already cleared, another partition's) is
        ignored, as is an empty list. Sends this object's buffered records first (so an
        index can name one of them). On a queue nothing was ever put to there is nothing
        to clear: a no-op.

        Raises:
            InvalidError: a negative index."""
        await self._send_before_read()
        body = {"partition": partition_id or self.partition_id, "indexes": [int(i) for i in global_indexes]}
        try:
            await self._call("POST", "/clear", body=body, retry="safe")
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise

    async def clear(self, global_indexes: Sequence[int], partition_id: str | None = None) -> None:
        """persisting's ``clear(global_indexes, partition_id)``: :meth:`clear_samples`.
        Unlike persisting's, which rewrites its dataset without them (so the records after
        them move to lower positions), the others keep their indexes."""
        await self.clear_samples(global_indexes, partition_id)

    async def stats(self) -> dict[str, Any]:
        """The server's statistics of the queue (rows, partitions, consumption by task,
        fragments, …), and this object's counters under ``"client"`` with
        ``enable_metrics``. ``consumed_by_task`` counts the samples each task is done
        with: handed out, marked consumed, or dropped by its reads (counted queue-wide in
        ``stale_dropped``, ``groups_dropped``, ``samples_unused``), not those it received."""
        try:
            ans = dict(await self._call("GET", "/stats", retry="safe"))
        except errors.NotFoundError as e:
            if not _queue_missing(e):
                raise
            # No put created it yet: the statistics of an empty queue.
            ans = {k: 0 for k in ("next_index", "len", "cleared", "tail_rows", "fragment_rows", "fragments", "fragment_bytes",
                                  "manifest_version", "pending_fragments", "puts", "gets", "flushes", "flush_failures",
                                  "compactions", "commits", "committed_ops", "recovered_fragments", "orphans_deleted",
                                  "version", "weight_version", "stale_dropped", "groups_dropped", "samples_unused")}
            ans.update(partitions={}, consumed_by_task={})
        if self.enable_metrics:
            ans["client"] = dict(self.metrics, buffered=len(self._buffer) + sum(len(b[1]) for b in self._unsent))
        return ans


class Reader:
    """Reads for one data-parallel rank (from :meth:`Queue.reader`).

    - :meth:`get` reads this rank's shard of the records (bucket of the global index mod
      ``world_size``), from its own cursor.
    - :meth:`get_meta` with :func:`RankAwareSampler`: every reader of the same ``rank``
      (the data-parallel group: e.g. the tensor-parallel ranks of one replica, each making
      ``q.reader(rank, world_size)``) gets the identical records at the same step, and
      different ranks disjoint ones. The step is counted per reader, task and partition (the
      k-th call is step k), or given as ``batch_index=``.
    """

    def __init__(self, queue: Queue, rank: int | None = None, world_size: int | None = None) -> None:
        """A reader of ``queue`` for ``rank`` of ``world_size``, as :meth:`Queue.reader`
        makes it (the same defaults: ``$RANK`` and ``$WORLD_SIZE``, else 0 and 1); also
        persisting's ``QueueReader(queue)``.

        Raises:
            InvalidError: a rank outside ``0 ≤ rank < world_size``, or such variables that
                are not integers."""
        rank = _env_int("RANK", 0) if rank is None else rank
        world_size = _env_int("WORLD_SIZE", 1) if world_size is None else world_size
        if not (isinstance(rank, int) and isinstance(world_size, int) and 0 <= rank < world_size):
            raise errors.InvalidError(
                f"invalid rank {rank!r} of world_size {world_size!r}: want 0 ≤ rank < world_size",
                field="rank",
                value=rank,
                rule="0 ≤ rank < world_size",
            )
        self.queue = queue
        self.rank = rank
        self.world_size = world_size
        self._offsets: dict[str, int] = {}  # the read cursor of each partition
        self._steps: dict[tuple[str, str], int] = {}

    def _meta_body(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str,
        partition_id: str | None,
        sampler: Sampler | None,
        wait: bool,
        batch_index: int | None,
        defer_consume: bool,
        max_staleness: int | None = None,
        stale_policy: str | None = None,
        lease: float | None = None,
    ) -> dict[str, Any]:
        part = partition_id or self.queue.partition_id
        step = self._steps.get((task_name, part), 0) if batch_index is None else _integer("batch_index", batch_index)
        body: dict[str, Any] = {
            "fields": list(fields),
            "batch_size": _integer("batch_size", batch_size),
            "task": task_name,
            "partition": part,
            "sampler": _sampler_body(sampler),
            "wait": bool(wait),
            "dp_rank": self.rank,
            "batch_index": step,
        }
        if defer_consume:
            body["defer_consume"] = True
        if max_staleness is not None:
            body["max_staleness"] = _integer("max_staleness", max_staleness)
            if stale_policy is not None:
                body["stale_policy"] = stale_policy
        elif stale_policy is not None:
            raise errors.InvalidError(
                "stale_policy needs max_staleness", field="stale_policy", value=stale_policy, rule="only with max_staleness"
            )
        if lease is not None:
            body["lease"] = _check_seconds("lease", lease, above_zero=True, maximum=LEASE_MAX_SECONDS)
        return body

    def _advance(self, body: Mapping[str, Any]) -> None:
        self._steps[(str(body["task"]), str(body["partition"]))] = int(body["batch_index"]) + 1

    async def _meta_call(self, path: str, body: dict[str, Any], timeout: float | None, **kw: Any) -> Any:
        """POST a meta request, repeating it while the server's long-poll cap ends it before
        the caller's ``timeout`` (default 30 s)."""
        q = self.queue
        await q._send_before_read()
        await q._tell_unknown_fields(body["fields"], body.get("sampler"))
        # NaN or negative: no deadline would ever pass.
        total = _check_seconds("timeout", timeout, wait=True)
        if total is None:
            total = 30.0
        deadline = time.monotonic() + total
        while True:
            # Never 0, which the server reads as its default wait (30 s): a timeout of 0 is
            # one attempt.
            left = max(0.001, deadline - time.monotonic())
            body["timeout"] = left
            try:
                return await q._call("POST", path, body=body, wait=left if body["wait"] else 0.0, retry="once", **kw)
            except errors.TimeoutError:
                if not body["wait"] or time.monotonic() >= deadline - 0.01:
                    raise
            except errors.NotFoundError as e:
                if not _queue_missing(e):
                    raise
                # No put has created the queue yet: nothing to hand out now; a waiting call
                # asks again until its deadline.
                if not body["wait"]:
                    return (b"", {}) if kw.get("raw") else {}
                left = deadline - time.monotonic()
                if left <= 0.01:
                    raise errors.TimeoutError(
                        f"no batch of {body['batch_size']} within {total:g} s: data queue {q.name!r} has no records yet"
                    ) from e
                await asyncio.sleep(min(_ABSENT_WAIT, left))

    async def get_meta(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str,
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        *,
        timeout: float | None = None,
        wait: bool | None = None,
        batch_index: int | None = None,
        defer_consume: bool = False,
        max_staleness: int | None = None,
        stale_policy: str | None = None,
        lease: float | None = None,
        stale_version: str | None = None,
    ) -> BatchMeta:
        """Pick the next ``batch_size`` records for ``task_name`` by ``sampler`` (default
        sequential) and mark them consumed by it (unless ``defer_consume``: then call
        :meth:`Queue.mark_consumed`).

        With ``wait`` it waits up to ``timeout`` seconds (default 30) for a full batch and
        raises :class:`~lakeshore.errors.TimeoutError` when none comes, handing nothing
        out; without, it returns what is ready now (possibly fewer or none: size 0 on an
        empty queue). ``wait`` defaults to whether a ``timeout`` was given: a plain call
        answers at once, as persisting's does (issue 24, semantics 5). ``batch_index`` is
        the step for :func:`RankAwareSampler` (default: this reader's count of calls for
        the task and partition).

        ``max_staleness=k`` (any sampler) serves a record produced at weight version v only
        while ``current - v ≤ k``; older ones are dropped for the task (counted in
        ``stats()["stale_dropped"]``) or, with ``stale_policy="keep"``, left for a replay
        reader. ``stale_version="newest"`` judges a partial rollout by its newest segment
        (``last_weight_version``) instead of its oldest (the default, ``"oldest"``). ``lease=``
        seconds hands the batch out leased: :meth:`commit` consumes it; if the process dies
        first, the batch is ready again when the lease expires."""
        wait = timeout is not None if wait is None else wait
        body = self._meta_body(
            fields, batch_size, task_name, partition_id, sampler, wait, batch_index, defer_consume, max_staleness, stale_policy, lease
        )
        _stale_version(body, stale_version)
        ans = await self._meta_call("/meta", body, timeout)
        self._advance(body)
        return _meta_of(ans, fields, body["partition"], task_name)

    async def get_data(self, meta: BatchMeta, partition_id: str | None = None, *, format: BatchFormat = "numpy") -> Any:
        """The columns of the records ``meta`` names, in its order: a :class:`Batch` of
        numpy arrays (views on the Arrow answer for numbers, equal-length lists and tensors
        of one dtype and shape; see ``zerocopy_mode``), of torch tensors sharing that memory
        with ``format="torch"``, or a ``tensordict.TensorDict`` with
        ``format="tensordict"``."""
        _check_meta("meta", meta)
        _check_format(format)
        answers = []
        for lo, hi in _parts(len(meta.global_indexes)):  # at most 10,000 indexes a request
            body = {
                "indexes": meta.global_indexes[lo:hi],
                "fields": meta.field_names,
                "partition": partition_id or meta.partition_id,
                "task": meta.task_name,
            }
            part, _ = await self.queue._call("POST", "/data", body=body, raw=True, accept=ARROW, retry="safe")
            answers.append(part)
        return _batch(_join_arrow(answers), meta.field_names, format, self.queue.zerocopy_mode, meta)

    async def get_batch(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str,
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        *,
        timeout: float | None = None,
        wait: bool | None = None,
        format: BatchFormat = "numpy",
        batch_index: int | None = None,
        defer_consume: bool = False,
        max_staleness: int | None = None,
        stale_policy: str | None = None,
        lease: float | None = None,
        stale_version: str | None = None,
    ) -> Any:
        """:meth:`get_meta` then :meth:`get_data` in one request (``POST D/batch``): the
        batch as ``format`` says, with ``.meta`` (a :class:`BatchMeta`) on a
        :class:`Batch`. ``wait`` defaults as :meth:`get_meta`'s; ``max_staleness``,
        ``stale_policy`` and ``lease`` as for :meth:`get_meta`. A ``batch_size`` above
        10,000 (the server's bound on one answer) is :meth:`get_meta` then
        :meth:`get_data`, which reads the records in parts."""
        _check_format(format)
        if _integer("batch_size", batch_size) > _READ_LIMIT_MAX:
            meta = await self.get_meta(
                fields, batch_size, task_name, partition_id, sampler, timeout=timeout, wait=wait, batch_index=batch_index,
                defer_consume=defer_consume, max_staleness=max_staleness, stale_policy=stale_policy, lease=lease,
                stale_version=stale_version,
            )
            return await self.get_data(meta, format=format)
        wait = timeout is not None if wait is None else wait
        body = self._meta_body(
            fields, batch_size, task_name, partition_id, sampler, wait, batch_index, defer_consume, max_staleness, stale_policy, lease
        )
        _stale_version(body, stale_version)
        data, headers = await self._meta_call("/batch", body, timeout, raw=True, accept=ARROW)
        self._advance(body)
        described: Mapping[str, Any] = {}
        with contextlib.suppress(ValueError):
            described = json.loads(headers.get("Lakeshore-Batch-Meta") or "{}")
        b = _batch(data, fields, "numpy", self.queue.zerocopy_mode)
        meta = _meta_of(
            dict(described, indexes=b.global_indexes.tolist()), fields, body["partition"], task_name
        )
        b.meta = meta
        if format == "numpy":
            return b
        if format == "torch":
            for k in list(b):
                b[k] = _torch_of(b[k])
            return b
        return _tensordict(b)

    async def reset(self, task_name: str = "default", partition_id: str | None = None) -> None:
        """Forget what ``task_name`` consumed in the partition (default: the queue's):
        :meth:`Queue.reset_consumption`, by persisting's ``QueueReader.reset`` name."""
        await self.queue.reset_consumption(task_name, partition_id)

    async def commit(self, meta: BatchMeta) -> None:
        """Consume a batch read with ``lease=`` (after the optimizer step): it is never
        handed to the task again. A trainer killed before committing gets the batch back
        once its lease expires."""
        _check_meta("meta", meta)
        await self.queue.mark_consumed(meta.task_name, meta.global_indexes, meta.partition_id)

    async def get(self, limit: int = 100, partition_id: str | None = None) -> list[dict[str, Any]]:
        """This rank's share of the records (those whose bucket belongs to ``rank`` of
        ``world_size``; all of them with world_size 1), the next ``limit`` after what this
        reader has read."""
        q = self.queue
        await q._send_before_read()
        part = partition_id or q.partition_id
        recs, nxt = await q._read(self._offsets.get(part, 0), limit, part, None, 0.0, (self.rank, self.world_size))
        self._offsets[part] = nxt
        q.metrics["gets"] += len(recs)
        return recs


class Writer:
    """A producer's view of a :class:`Queue` (from :meth:`Queue.writer`; persisting's
    ``QueueWriter``): the queue's own ``put``, ``put_batch`` and ``flush`` (the bound
    methods themselves, so the same signatures and errors), on the queue's buffer: records
    put through a writer and through the queue go out together, in order.

    Attributes:
        queue: the queue written to.
        put: :meth:`Queue.put` of ``queue``.
        put_batch: :meth:`Queue.put_batch` of ``queue``.
        flush: :meth:`Queue.flush` of ``queue``.
    """

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.put = queue.put
        self.put_batch = queue.put_batch
        self.flush = queue.flush

    def __repr__(self) -> str:
        return f"data.Writer({self.queue!r})"


QueueWriter = Writer
"""persisting's name of :class:`Writer` (``from persisting import QueueWriter``): the same
class, made the same way (``QueueWriter(q)``, or ``q.writer()``)."""

QueueReader = Reader
"""persisting's name of :class:`Reader` (``from persisting import QueueReader``): the same
class; ``QueueReader(q)`` is ``q.reader()``."""


_IN_FLIGHT_POLL_SECONDS = 0.005
"""How often :meth:`Queue.flush` looks whether another send of its queue's records has
been answered (the send may run on another event loop than the flush)."""


def _loop_running() -> bool:
    """Whether an event loop runs in this thread (a blocking call would hold it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _check_offset(offset: int | None) -> None:
    """Refuse an offset that is not a record position (None: the object's cursor)."""
    if offset is not None and (not isinstance(offset, int) or isinstance(offset, bool) or offset < 0):
        raise errors.InvalidError(
            f"invalid offset {offset!r}: a record position ≥ 0", field="offset", value=str(offset), rule="an integer ≥ 0"
        )


def _stale_version(body: dict[str, Any], stale_version: str | None) -> None:
    """Add ``stale_version`` (partial rollouts: which segment a staleness bound judges) to a
    meta body; the server checks the value."""
    if stale_version is None:
        return
    if "max_staleness" not in body:
        raise errors.InvalidError(
            "stale_version needs max_staleness", field="stale_version", value=stale_version, rule="only with max_staleness"
        )
    body["stale_version"] = stale_version


def _env_int(name: str, default: int) -> int:
    """The integer in environment variable ``name``, else ``default`` when unset."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        return int(v)
    except ValueError:
        raise errors.InvalidError(
            f"${name}={v!r} is not an integer (distributed launchers set it to the process's {name.lower()})",
            field=name,
            value=v,
            rule="an integer",
        ) from None


def _check_format(fmt: str) -> None:
    if fmt not in _FORMATS:
        raise errors.InvalidError(
            f"invalid format {fmt!r}: use 'numpy', 'torch' or 'tensordict'", field="format", value=fmt, rule="numpy|torch|tensordict"
        )


def _rows_of_columns(data: Any, n: int) -> list[dict[str, Any]]:
    """Records from columns (a mapping of field → one value per row, e.g. a TensorDict or a
    dict of arrays): row i of each column; 0-d arrays and tensors become Python scalars."""
    batch = getattr(data, "batch_size", None)
    if batch is not None and len(batch) and int(batch[0]) != n:
        raise errors.InvalidError(
            f"kv_batch_put: {n} keys and data of batch size {int(batch[0])}", field="data", rule="one row per key"
        )
    cols: dict[str, Any] = {}
    for k in data.keys():
        col = data.get_non_tensor(k) if hasattr(data, "get_non_tensor") and not _is_tensor(data.get(k)) else data[k]
        if len(col) != n:
            raise errors.InvalidError(
                f"kv_batch_put: {n} keys and column {k!r} of {len(col)} values", field="data", rule="one value per key"
            )
        cols[str(k)] = col
    rows: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {}
        for k, col in cols.items():
            v = col[i]
            if getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
                v = v.item()
            row[k] = v
        rows.append(row)
    return rows


def _is_tensor(v: Any) -> bool:
    t = type(v)
    return t.__module__.startswith("torch") and t.__name__ == "Tensor"


class KVInterface:
    """Random access by key over a data :class:`Queue`."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    async def kv_put(
        self, key: str, data: Mapping[str, Any] | None, partition_id: str | None = None, tag: Mapping[str, str] | None = None
    ) -> int:
        """Store ``data`` (a record: a map of field → value, or a TensorDict of batch size
        ``[]``) under ``key``; return its global index. Putting a key again merges its
        fields (the new value wins) and its tags; ``data=None`` with a ``tag`` is a tag-only
        update (the tag merges, the data stays), as TransferQueue's and the Go store's.

        Raises:
            InvalidError: neither data nor a tag, or data that is not a mapping."""
        if data is None:
            if not tag:
                raise errors.InvalidError(
                    f"kv_put {key!r}: nothing to put: give data, a tag, or both", field="data", rule="a record or a tag"
                )
            data = {}
        if not (isinstance(data, Mapping) or hasattr(data, "items")):
            raise errors.InvalidError(
                f"kv_put {key!r}: data is a {type(data).__name__}, want a record (a map of field → value)",
                field="data",
                rule="a map of field → value, or a TensorDict of batch size []",
            )
        return (await self.kv_batch_put([key], [dict(data.items())], partition_id, [tag] if tag else None))[0]

    async def kv_batch_put(
        self,
        keys: Sequence[str],
        data: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        partition_id: str | None = None,
        tags: Sequence[Mapping[str, str] | None] | None = None,
    ) -> list[int]:
        """Store records under ``keys``: ``data`` is a list of records, or columns with one
        row per key: a mapping of field → column (a numpy array, a torch tensor, a list) or
        a ``tensordict.TensorDict`` of batch size ``[len(keys)]``. Row i of a column is the
        value of record i (0-d rows as Python scalars). Return their global indexes."""
        if isinstance(data, Mapping) or hasattr(data, "batch_size"):
            records = _rows_of_columns(data, len(keys))
        else:
            records = [dict(r) for r in data]
        if len(records) != len(keys):
            raise errors.InvalidError(
                f"kv_batch_put: {len(keys)} keys and {len(records)} records", field="data", rule="one record per key"
            )
        body: dict[str, Any] = {
            "keys": list(keys),
            "records": [encode_value(f"record {i}", r) for i, r in enumerate(records)],
        }
        if tags:
            body["tags"] = [dict(t or {}) for t in tags]
        ans = await self.queue._call(
            "POST", "/kv", params={"partition": partition_id or self.queue.partition_id}, body=body, retry="safe"
        )
        return [int(i) for i in ans.get("indexes") or []]

    async def kv_batch_get(
        self, keys: Sequence[str], partition_id: str | None = None, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The records under ``keys``, in order. Raises NotFoundError naming missing keys
        (more than 10,000 keys are read in parts of 10,000: the first part with a missing
        key raises, naming that part's)."""
        keys = list(keys)
        out: list[dict[str, Any]] = []
        for lo, hi in _parts(len(keys)):
            body: dict[str, Any] = {"partition": partition_id or self.queue.partition_id, "keys": keys[lo:hi]}
            if fields:
                body["fields"] = list(fields)
            ans = await self.queue._call("POST", "/kv/get", body=body, retry="safe")
            out.extend(_entry_fields(e) for e in ans.get("entries") or [])
        return out

    async def kv_list(self, partition_id: str | None = None) -> list[tuple[str, dict[str, str]]]:
        """``(key, tags)`` of the partition's keys (``partition_id=""``: every partition), in
        index order, read in the server's pages of at most 10,000."""
        part = self.queue.partition_id if partition_id is None else partition_id
        # A key cleared and put again between two pages moves to a higher index, so it can
        # be on two pages: each key (of each partition) is listed once, at its latest entry.
        latest: dict[tuple[str, str], tuple[str, dict[str, str]]] = {}
        offset = 0
        while True:
            params = {"partition": part, "offset": offset, "limit": _READ_LIMIT_MAX}
            try:
                data, headers = await self.queue._call("GET", "/kv", params=params, raw=True, accept="application/json", retry="safe")
            except errors.NotFoundError as e:
                if _queue_missing(e):
                    return list(latest.values())  # no put created the queue yet
                raise
            entries = json.loads(data).get("entries") or []
            for entry in entries:
                k = (str(entry.get("partition") or ""), str(entry["key"]))
                latest.pop(k, None)  # in index order: the later entry is the latest
                latest[k] = (k[1], dict(entry.get("tags") or {}))
            nxt = headers.get("Lakeshore-Next-Offset")
            if not nxt or len(entries) < _READ_LIMIT_MAX:  # the last page (no header: a server listing all at once)
                return list(latest.values())
            offset = int(nxt)

    async def kv_clear(self, keys: Sequence[str], partition_id: str | None = None) -> None:
        """Remove ``keys``."""
        await self.queue._call(
            "POST", "/kv/clear", body={"partition": partition_id or self.queue.partition_id, "keys": list(keys)}, retry="safe"
        )


def _entry_fields(e: Mapping[str, Any]) -> dict[str, Any]:
    f = e.get("fields")
    if isinstance(f, (bytes, bytearray)):
        f = wire.decode(bytes(f))
    if not isinstance(f, Mapping):
        return {}
    return {str(k): v for k, v in f.items()}
