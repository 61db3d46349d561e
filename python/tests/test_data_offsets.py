"""Where a read continues: the server's ``Lakeshore-Next-Offset`` is never below the offset
a read asked for (docs/http-api.md, "Reading a large queue"), so a cursor past the end of
the log stays where it is, and ``stream`` and ``get`` never deliver records below it again."""

from __future__ import annotations

import asyncio

import pytest

from lakeshore import HttpDispatch
from lakeshore.data import Queue

pytest.importorskip("pyarrow")


def test_a_cursor_past_the_end_does_not_move_back(d: HttpDispatch, qname: str) -> None:
    """A Queue whose cursor is past the end of the log (here set by hand, as a queue removed
    and put to again leaves a client's) reads nothing and keeps its cursor, then reads only
    the records from its cursor on once they exist (fails on the code before: the server
    answered the log's end, 3, and the stream then read records 3–9 that the cursor had
    passed)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"i": i} for i in range(3)])
        await q.flush()
        reader = Queue(qname, dispatch=d)
        reader._offsets[reader.partition_id] = 10
        assert [b async for b in reader.stream(limit=100, wait=False)] == []
        assert reader._offsets[reader.partition_id] == 10
        assert await reader.get(limit=100) == []
        assert reader._offsets[reader.partition_id] == 10
        await q.put_batch([{"i": i} for i in range(3, 13)])
        await q.flush()
        got = [r["i"] for b in [b async for b in reader.stream(limit=100, wait=False)] for r in b]
        assert got == [10, 11, 12]
        assert reader._offsets[reader.partition_id] == 13

    asyncio.run(main())


def test_a_bad_meta_request_to_a_queue_never_put_is_refused(d: HttpDispatch, qname: str) -> None:
    """A get_meta / get_batch whose request every store refuses (batch size 0, no fields)
    is refused as invalid naming the field when no put has created the queue, as on a
    queue that exists (fails on the code before: the server answered the missing queue
    first and the SDK took it for an empty queue, an empty batch)."""
    from lakeshore import errors

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        with pytest.raises(errors.InvalidError) as e:
            await q.get_meta(["x"], 0, "train")
        assert e.value.field == "batch_size"
        with pytest.raises(errors.InvalidError) as e:
            await q.get_batch([], 1, "train")
        assert e.value.field == "fields"
        meta = await q.get_meta(["x"], 1, "train")
        assert meta.global_indexes == []

    asyncio.run(main())
