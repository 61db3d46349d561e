"""The data queue: append-only, persistent records for training pipelines (package ``persist``
of the Go engine, over the data routes of the HTTP API, ``docs/http-api.md``)::

    import asyncio
    from lakeshore.data import Queue, GRPOGroupNSampler

    async def main() -> None:
        q = Queue("events")
        await q.put({"step": 1, "reward": 0.5})
        await q.flush()
        records = await q.get(limit=100)
        batch = await q.reader().get_batch(
            fields=["reward"], batch_size=32, task_name="train", sampler=GRPOGroupNSampler(n_samples_per_prompt=4)
        )
        batch["reward"]        # a numpy array, zero-copy from the Arrow answer

    asyncio.run(main())

Reads answer Arrow IPC; :meth:`Reader.get_data` returns the columns as numpy arrays without
a Python object per row (``pyarrow`` is needed for reads: ``pip install 'lakeshore[data]'``).
Records are maps of field name to a wire value (int, float, bool, str, bytes, lists of
numbers, numpy arrays as tensors; anything else is stored encoded).

The plane is the dispatch's (``dispatch=``, else the process default: ``$LAKESHORE_URL``
or the embedded daemon); the server keeps the data under its data directory
(``serve --data-dir``), so ``storage_path`` is accepted for the seed's signature and
recorded, but the server decides where the data lives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np

from lakeshore import errors
from lakeshore.dispatch import Dispatch, default_dispatch
from lakeshore.queue import _check_name, encode_value

__all__ = [
    "Queue",
    "Reader",
    "BatchMeta",
    "Batch",
    "Sampler",
    "SequentialSampler",
    "RankAwareSampler",
    "GRPOGroupNSampler",
    "SeqlenBalancedSampler",
    "KVInterface",
]

ARROW = "application/vnd.apache.arrow.stream"


# ------------------------------------------------------------------------------ samplers


@dataclasses.dataclass(frozen=True)
class Sampler:
    """Which records a reader's :meth:`~Reader.get_meta` picks (the server's samplers)."""

    name: str = "sequential"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The ``sampler`` field of a meta request."""
        out: dict[str, Any] = {"name": self.name}
        if self.params:
            out["params"] = dict(self.params)
        return out


def SequentialSampler() -> Sampler:
    """Records in index order, each once per task."""
    return Sampler("sequential")


def RankAwareSampler() -> Sampler:
    """Each data-parallel rank gets its own records (``reader(rank, world_size)``)."""
    return Sampler("rank-aware")


def GRPOGroupNSampler(n_samples_per_prompt: int, group_field: str | None = None) -> Sampler:
    """Whole groups of ``n_samples_per_prompt`` records of one prompt (GRPO); the batch size
    must be a multiple of it. ``group_field`` names the prompt's field (server default)."""
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


class Batch(dict[str, Any]):
    """Columns by field name (numpy arrays, or torch tensors with ``format="torch"``), with
    ``global_indexes`` (a numpy int64 array) and ``table`` (the pyarrow Table)."""

    global_indexes: np.ndarray[Any, Any]
    table: Any

    def __len__(self) -> int:
        return int(len(self.global_indexes))


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise errors.DispatchError(
            "data queue reads need pyarrow: pip install 'lakeshore[data]' (or pyarrow)", code="not_implemented"
        ) from e
    return pyarrow


def _column(col: Any, fmt: str) -> Any:
    """One Arrow column as numpy (zero-copy for primitive columns without nulls)."""
    pa = _pyarrow()
    arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    t = arr.type
    out: Any
    if pa.types.is_struct(t) and {f.name for f in t} >= {"dtype", "shape", "data"}:
        # tensor: {dtype, shape, data}: one ndarray per row, stacked when shapes agree
        dtypes = arr.field("dtype").to_pylist()
        shapes = arr.field("shape").to_pylist()
        datas = arr.field("data").to_pylist()
        items = [
            None if d is None else np.frombuffer(d, dtype=np.dtype(dt).newbyteorder("<")).reshape(sh)
            for dt, sh, d in zip(dtypes, shapes, datas)
        ]
        full = [i for i in items if i is not None]
        if items and len(full) == len(items) and len({(i.dtype, i.shape) for i in full}) == 1:
            out = np.stack(full)
        else:
            out = np.array(items + [None], dtype=object)[:-1]
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and arr.null_count == 0:
        lengths = np.diff(arr.offsets.to_numpy())
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths == lengths[0]).all():
            out = flat.reshape(len(lengths), int(lengths[0]))  # a 2-D array, no copy
        else:
            out = np.array(np.split(flat, np.cumsum(lengths)[:-1]) + [None], dtype=object)[:-1]
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        out = np.array(arr.to_pylist() + [None], dtype=object)[:-1]
    else:
        out = arr.to_numpy(zero_copy_only=False)
    if fmt == "torch" and isinstance(out, np.ndarray) and out.dtype != object:
        import torch

        out = torch.from_numpy(out)
    return out


def _table(data: bytes) -> Any:
    pa = _pyarrow()
    if not data:
        return pa.table({})
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _batch(data: bytes, fields: Sequence[str] | None, fmt: str) -> Batch:
    table = _table(data)
    b = Batch()
    names = [n for n in table.column_names if not n.startswith("_")]
    for n in fields or names:
        if n in table.column_names:
            b[n] = _column(table.column(n), fmt)
    b.global_indexes = (
        table.column("_index").to_numpy() if "_index" in table.column_names else np.zeros(0, dtype=np.int64)
    )
    b.table = table
    return b


def _records(data: bytes) -> list[dict[str, Any]]:
    """Rows as dicts of field values (no null fields, no _index/_partition)."""
    from lakeshore import wire

    table = _table(data)
    names = [n for n in table.column_names if not n.startswith("_")]
    kinds = {}
    for f in table.schema:
        md = f.metadata or {}
        kinds[f.name] = md.get(b"lakeshore.kind", b"").decode()
    rows = table.select(names).to_pylist() if names else [{} for _ in range(table.num_rows)]
    out = []
    for r in rows:
        rec: dict[str, Any] = {}
        for k, v in r.items():
            if v is None:
                continue
            if kinds.get(k) == "codec" and isinstance(v, bytes):
                v = wire.decode(v)
            elif kinds.get(k) == "tensor" and isinstance(v, dict):
                v = np.frombuffer(v["data"], dtype=np.dtype(v["dtype"]).newbyteorder("<")).reshape(v["shape"])
            rec[k] = v
        out.append(rec)
    return out


def _put_id() -> str:
    """A new idempotency id for one put batch (the put_id parameter): 26 random
    characters, as the Go SDK's ULIDs are long."""
    return secrets.token_hex(13)


# ------------------------------------------------------------------------------ the queue


class Queue:
    """A persistent, append-only data queue.

    Args:
        name: the queue, 1–128 bytes of ``[A-Za-z0-9._-]``.
        storage_path: accepted for the seed's signature; the plane's server keeps the data
            under its data directory (see the module's doc).
        batch_size: puts are buffered and sent when this many accumulate.
        auto_flush_interval_sec: or after this many seconds (buffered records are sent and
            committed).
        enable_metrics: count this object's puts, gets and flushes in :meth:`stats`.
        dispatch: the plane (default: the process default).
        partition_id: the partition puts and reads use by default (``"default"``).
    """

    def __init__(
        self,
        name: str,
        storage_path: str | None = None,
        batch_size: int = 100,
        auto_flush_interval_sec: float = 1.0,
        enable_metrics: bool = False,
        *,
        dispatch: Dispatch | None = None,
        partition_id: str = "default",
    ) -> None:
        _check_name("queue name", name)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise errors.InvalidError(
                f"invalid batch_size {batch_size!r}: want an integer ≥ 1", field="batch_size", value=batch_size, rule="≥ 1"
            )
        self.name = name
        self.storage_path = storage_path
        self.batch_size = batch_size
        self.auto_flush_interval_sec = auto_flush_interval_sec
        self.enable_metrics = enable_metrics
        self.partition_id = partition_id
        self._d = dispatch or default_dispatch()
        self.path = f"/v1/namespaces/{quote(self._d.namespace, safe='')}/data/{quote(name, safe='')}"
        self._buffer: list[tuple[str, bytes]] = []
        # Batches sent without an answer (a dropped connection, a killed server), with
        # their put ids: sent again, first, by the next send, so the server answers a
        # repeat with the first put's indexes instead of appending twice.
        self._unsent: list[tuple[str, list[bytes], str]] = []
        self._buffer_lock = asyncio.Lock()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._offset = 0
        self.metrics = {"puts": 0, "gets": 0, "flushes": 0}

    def __repr__(self) -> str:
        return f"data.Queue({self.name!r}, dispatch={self._d!r})"

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self._d.run_async(self._d._transport.call(method, self.path + path, **kw))

    # -- writes --------------------------------------------------------------------------

    async def put(self, record: Mapping[str, Any], *, partition_id: str | None = None) -> None:
        """Buffer one record (a map of field → value); sent at ``batch_size`` or after
        ``auto_flush_interval_sec``. Raises EncodeError for a value with no wire form."""
        await self.put_batch([record], partition_id=partition_id)

    async def put_batch(self, records: Sequence[Mapping[str, Any]], *, partition_id: str | None = None) -> None:
        """Buffer several records (sent as :meth:`put`'s)."""
        part = partition_id or self.partition_id
        encoded = []
        for i, r in enumerate(records):
            if not isinstance(r, Mapping):
                raise TypeError(f"record {i} is a {type(r).__name__}; a record is a map of field name → value")
            encoded.append((part, encode_value(f"record {i}", dict(r))))
        async with self._buffer_lock:
            self._buffer.extend(encoded)
            self.metrics["puts"] += len(encoded)
            full = len(self._buffer) >= self.batch_size
        if full:
            await self._send()
        elif self._flush_timer is None and self.auto_flush_interval_sec > 0:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(
                self.auto_flush_interval_sec, lambda: loop.create_task(self._auto_flush())
            )

    async def _auto_flush(self) -> None:
        self._flush_timer = None
        try:
            await self.flush()
        except errors.DispatchError:
            pass  # the records stay buffered; the next put or flush sends them

    async def _send(self) -> list[int]:
        async with self._buffer_lock:
            buf, self._buffer = self._buffer, []
            by_part: dict[str, list[bytes]] = {}
            for part, rec in buf:
                by_part.setdefault(part, []).append(rec)
            batches = self._unsent + [(part, recs, _put_id()) for part, recs in by_part.items()]
            self._unsent = []
        indexes: list[int] = []
        sent = 0
        try:
            for part, recs, put_id in batches:
                ans = await self._call(
                    "POST", "/records", params={"partition": part, "put_id": put_id}, body={"records": recs}, retry="safe"
                )
                indexes.extend(int(i) for i in ans.get("indexes") or [])
                sent += 1
        except BaseException:
            async with self._buffer_lock:
                # Nothing is lost and nothing is put twice: sent again, with the same
                # put ids, by the next send.
                self._unsent[:0] = batches[sent:]
            raise
        return indexes

    async def flush(self) -> None:
        """Send the buffered records and commit them to storage."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        await self._send()
        await self._call("POST", "/flush", retry="safe")
        self.metrics["flushes"] += 1

    # -- reads ---------------------------------------------------------------------------

    async def get(self, limit: int = 100, *, partition_id: str | None = None, fields: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The next ``limit`` records after what this object has read (from the first), as
        dicts. Sends this object's buffered records first."""
        if self._buffer or self._unsent:
            await self._send()
        recs, nxt = await self._read(self._offset, limit, partition_id, fields, 0.0)
        self._offset = nxt
        self.metrics["gets"] += len(recs)
        return recs

    async def _read(
        self, offset: int, limit: int, partition_id: str | None, fields: Sequence[str] | None, wait: float
    ) -> tuple[list[dict[str, Any]], int]:
        params: dict[str, Any] = {"offset": offset, "limit": limit, "partition": partition_id or self.partition_id}
        if fields:
            params["fields"] = ",".join(fields)
        if wait > 0:
            params["wait"] = wait
        data, headers = await self._call("GET", "/records", params=params, wait=wait, raw=True, accept=ARROW, retry="safe")
        recs = _records(data)
        nxt = headers.get("Lakeshore-Next-Offset")
        return recs, int(nxt) if nxt else offset + len(recs)

    async def stream(
        self, limit: int = 1000, wait: bool = True, timeout: float = 5.0, *, partition_id: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Batches of up to ``limit`` records, following the queue: with ``wait``, block for
        new records, ending after ``timeout`` seconds without any; without, end at the tail."""
        last = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - last)
            if wait and left <= 0:
                return
            recs, nxt = await self._read(self._offset, limit, partition_id, None, min(left, 30.0) if wait else 0.0)
            self._offset = nxt
            if recs:
                last = time.monotonic()
                yield recs
            elif not wait:
                return

    def reader(self, rank: int = 0, world_size: int = 1) -> Reader:
        """A reader for data-parallel rank ``rank`` of ``world_size``."""
        return Reader(self, rank, world_size)

    async def mark_consumed(self, task_name: str, global_indexes: Sequence[int], partition_id: str | None = None) -> None:
        """Mark records consumed by ``task_name`` (samplers skip them for that task)."""
        body = {"task": task_name, "partition": partition_id or self.partition_id, "indexes": [int(i) for i in global_indexes]}
        await self._call("POST", "/consumption/mark", body=body, retry="safe")

    async def reset_consumption(self, task_name: str, partition_id: str | None = None) -> None:
        """Forget what ``task_name`` consumed in the partition (a fresh run)."""
        await self._call("POST", "/consumption/reset", body={"task": task_name, "partition": partition_id or self.partition_id}, retry="safe")

    async def consumed(self, task_name: str, partition_id: str | None = None) -> int:
        """How many records ``task_name`` consumed in the partition."""
        ans = await self._call("GET", "/consumption", params={"task": task_name, "partition": partition_id or self.partition_id}, retry="safe")
        return int(ans.get("consumed") or 0)

    async def clear_partition(self, partition_id: str) -> None:
        """Remove a partition's records."""
        await self._call("DELETE", f"/partitions/{quote(partition_id, safe='')}", retry="safe")

    async def stats(self) -> dict[str, Any]:
        """The server's statistics of the queue (rows, partitions, consumption by task,
        fragments, …), and this object's counters under ``"client"`` with
        ``enable_metrics``."""
        ans = dict(await self._call("GET", "/stats", retry="safe"))
        if self.enable_metrics:
            ans["client"] = dict(self.metrics, buffered=len(self._buffer) + sum(len(b[1]) for b in self._unsent))
        return ans


class Reader:
    """Reads for one data-parallel rank (from :meth:`Queue.reader`)."""

    def __init__(self, queue: Queue, rank: int, world_size: int) -> None:
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

    async def get_meta(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str,
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        *,
        timeout: float | None = None,
        wait: bool = True,
    ) -> BatchMeta:
        """Pick the next ``batch_size`` records for ``task_name`` (marked consumed by it)
        by ``sampler`` (default sequential), waiting up to ``timeout`` seconds (server
        default 30) for enough of them. Raises TimeoutError when they do not come."""
        q = self.queue
        body: dict[str, Any] = {
            "fields": list(fields),
            "batch_size": int(batch_size),
            "task": task_name,
            "partition": partition_id or q.partition_id,
            "sampler": (sampler or SequentialSampler()).body(),
            "wait": bool(wait),
        }
        if self.world_size > 1:
            body["dp_rank"] = self.rank
        if timeout is not None:
            body["timeout"] = float(timeout)
        if q._buffer or q._unsent:
            await q._send()
        ans = await q._call("POST", "/meta", body=body, wait=timeout or 30.0, retry="once")
        return BatchMeta(
            size=int(ans.get("size") or 0),
            global_indexes=[int(i) for i in ans.get("indexes") or []],
            field_names=list(fields),
            partition_id=str(ans.get("partition") or body["partition"]),
            task_name=str(ans.get("task") or task_name),
            fields=list(ans.get("fields") or []),
        )

    async def get_data(self, meta: BatchMeta, partition_id: str | None = None, *, format: str = "numpy") -> Batch:
        """The columns of the records ``meta`` names, in its order: numpy arrays (zero-copy
        from Arrow for primitive columns without nulls; fixed-size lists as 2-D arrays,
        tensors stacked), or torch tensors with ``format="torch"``."""
        body = {
            "indexes": meta.global_indexes,
            "fields": meta.field_names,
            "partition": partition_id or meta.partition_id,
            "task": meta.task_name,
        }
        data, _ = await self.queue._call("POST", "/data", body=body, raw=True, accept=ARROW, retry="safe")
        return _batch(data, meta.field_names, format)

    async def get_batch(
        self,
        fields: Sequence[str],
        batch_size: int,
        task_name: str,
        partition_id: str | None = None,
        sampler: Sampler | None = None,
        *,
        timeout: float | None = None,
        format: str = "numpy",
    ) -> Batch:
        """:meth:`get_meta` then :meth:`get_data`."""
        meta = await self.get_meta(fields, batch_size, task_name, partition_id, sampler, timeout=timeout)
        return await self.get_data(meta, partition_id, format=format)

    async def get(self, limit: int = 100, partition_id: str | None = None) -> list[dict[str, Any]]:
        """As :meth:`Queue.get`, this rank's share."""
        return await self.queue.get(limit, partition_id=partition_id)


class KVInterface:
    """Random access by key over a data :class:`Queue`."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    async def kv_put(
        self, key: str, data: Mapping[str, Any], partition_id: str | None = None, tag: Mapping[str, str] | None = None
    ) -> int:
        """Store ``data`` (a record) under ``key``; return its global index."""
        return (await self.kv_batch_put([key], [data], partition_id, [tag] if tag else None))[0]

    async def kv_batch_put(
        self,
        keys: Sequence[str],
        data: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]],
        partition_id: str | None = None,
        tags: Sequence[Mapping[str, str] | None] | None = None,
    ) -> list[int]:
        """Store records under ``keys``: ``data`` is a list of records, or columns (a map of
        field → one value per key)."""
        if isinstance(data, Mapping):
            records = [{f: col[i] for f, col in data.items()} for i in range(len(keys))]
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
        """The records under ``keys``, in order. Raises NotFoundError naming missing keys."""
        body: dict[str, Any] = {"partition": partition_id or self.queue.partition_id, "keys": list(keys)}
        if fields:
            body["fields"] = list(fields)
        ans = await self.queue._call("POST", "/kv/get", body=body, retry="safe")
        return [_entry_fields(e) for e in ans.get("entries") or []]

    async def kv_list(self, partition_id: str | None = None) -> list[tuple[str, dict[str, str]]]:
        """``(key, tags)`` of the partition's keys (``partition_id=""``: every partition)."""
        part = self.queue.partition_id if partition_id is None else partition_id
        ans = await self.queue._call("GET", "/kv", params={"partition": part}, retry="safe")
        return [(str(e["key"]), dict(e.get("tags") or {})) for e in ans.get("entries") or []]

    async def kv_clear(self, keys: Sequence[str], partition_id: str | None = None) -> None:
        """Remove ``keys``."""
        await self.queue._call(
            "POST", "/kv/clear", body={"partition": partition_id or self.queue.partition_id, "keys": list(keys)}, retry="safe"
        )


def _entry_fields(e: Mapping[str, Any]) -> dict[str, Any]:
    from lakeshore import wire

    f = e.get("fields")
    if isinstance(f, (bytes, bytearray)):
        f = wire.decode(bytes(f))
    if not isinstance(f, Mapping):
        return {}
    return {str(k): v for k, v in f.items()}
