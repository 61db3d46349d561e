"""Partial rollouts of the data queue: put, patched with segments at later weight
versions, the complete flag and staleness by the oldest or newest segment
(lakeshore.data; Go: persist/partial.go) on every plane."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lakeshore import HttpDispatch, InvalidError, QueueFullError
from lakeshore.data import WEIGHT_VERSION, Backpressure, Queue

pytest.importorskip("pyarrow")



def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_partial_rollouts(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d)
        idx = await q.put_partial([{"tokens": [1, 2]}, {"tokens": [3]}], 0)
        done = await q.put_partial([{"tokens": [9]}], 2, complete=True)
        assert idx == [0, 1] and done == [2]
        await q.set_version(1)
        await q.patch_partial(idx, [{"tokens": [1, 2, 4]}, {"more": 1}], 1)
        await q.set_version(3)
        await q.patch_partial(idx[:1], None, 3, complete=True)
        r = q.reader()
        b = await r.get_data(
            await r.get_meta(["tokens", "segment_versions", "last_weight_version", WEIGHT_VERSION], 3, "look", defer_consume=True)
        )
        assert b["segment_versions"][0].tolist() == [0, 1, 3] and b["segment_versions"][1].tolist() == [0, 1]
        assert b[WEIGHT_VERSION].tolist() == [0, 0, 2] and b["last_weight_version"].tolist() == [3, 1, 2]
        # Only complete rollouts when the reader asks for the flag.
        m = await r.get_meta(["tokens", "complete"], 8, "complete", defer_consume=True)
        assert m.global_indexes == [0, 2]
        # Staleness by the oldest segment (default), or the newest.
        m = await r.get_meta(["tokens"], 8, "oldest", max_staleness=1, stale_policy="keep")
        assert m.global_indexes == [2]
        m = await r.get_meta(["tokens"], 8, "newest", max_staleness=1, stale_policy="keep", stale_version="newest")
        assert m.global_indexes == [0, 2]
        with pytest.raises(InvalidError):
            await q.patch_partial(idx[1:], None, 0)  # segments go forward
        with pytest.raises(InvalidError):
            await q.patch_partial(idx[1:], [{WEIGHT_VERSION: 9}], 9)
        with pytest.raises(InvalidError):
            await r.get_meta(["tokens"], 1, "t", stale_version="newest")
        with pytest.raises(InvalidError):
            await r.get_meta(["tokens"], 1, "t", max_staleness=1, stale_version="middle")
        with pytest.raises(InvalidError):
            await q.put_partial([{"tokens": [1]}], -1)

    run(main())


def test_a_put_partial_refused_after_its_first_request_names_what_it_wrote(d: HttpDispatch, qname: str) -> None:
    """A put_partial over the server's body limit goes as several requests; when
    back-pressure refuses a later one, the error names the records the earlier ones wrote
    (``written_indexes``), which stay patchable. Before, it said nothing was written and
    their indexes were lost, so they could never be patched."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, backpressure=Backpressure(task_name="train", max_unconsumed=17))
        big = "x" * 1_000_000  # 20 of them: two requests, 16 records and 4
        with pytest.raises(QueueFullError) as e:
            await q.put_partial([{"text": big, "i": i} for i in range(20)], 0)
        written = e.value.written_indexes
        assert written == list(range(16)), written
        assert "16 of its 20 records were written" in str(e.value)
        await q.patch_partial(written, None, 1, complete=True)
        r = q.reader()
        m = await r.get_meta(["i", "complete"], 32, "look", defer_consume=True)
        assert m.global_indexes == written
        # A single request's refusal wrote nothing, and says nothing of written records.
        with pytest.raises(QueueFullError) as e2:
            await q.put_partial([{"text": "y", "i": 98}, {"text": "y", "i": 99}], 0)
        assert e2.value.written_indexes is None

    run(main())
