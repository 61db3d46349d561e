"""Replay sampling and priorities of the data queue (lakeshore.data.Queue.replay and
update_priorities; Go: persist/replay.go) on every plane."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError
from lakeshore.data import Queue

pytest.importorskip("pyarrow")



def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_replay_weighted_with_replacement_consumes_nothing(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        assert len(await q.replay(["x"], 4, weight="priority")) == 0  # no queue yet: nothing
        await q.put_batch([{"x": i, "priority": 0.0} for i in range(10)])
        await q.put_batch([{"x": 100 + i, "priority": 1.0} for i in range(5)], partition_id="other")
        await q.flush()
        b = await q.replay(["x"], 20, weight="priority")
        assert len(b) == 0  # every weight of the partition is 0
        for bad in (math.nan, math.inf, -math.inf):  # refused, nothing stored (it was stored, never drawn)
            with pytest.raises(InvalidError, match=r"values\[1\].*a finite number"):
                await q.update_priorities([8, 9], [1.0, bad])
        b = await q.replay(["x"], 20, weight="priority")
        assert len(b) == 0
        await q.update_priorities([8, 9], [1.0, 3.0])
        b = await q.replay(["x", "priority"], 400, weight="priority", seed=5)
        assert len(b) == 400
        n = Counter(b.global_indexes.tolist())
        assert set(n) == {8, 9}, n
        assert n[9] > 2 * n[8], n
        # One row per draw, in draw order: the columns follow the indexes.
        assert b["x"].tolist() == b.global_indexes.tolist()
        again = await q.replay(["x"], 400, weight="priority", seed=5)
        assert again.global_indexes.tolist() == b.global_indexes.tolist()  # the seed repeats the draw
        # Uniform over a window of the last 12 indexes (the partition's 3..9).
        u = await q.replay([], 50, window=12)
        assert list(u) == [] and set(u.global_indexes.tolist()) <= set(range(3, 10))
        # Retrieval is not consumption.
        r = q.reader()
        m = await r.get_meta(["x"], 4, "train", wait=False)
        assert m.global_indexes == [0, 1, 2, 3]
        # Updates move the draw at once (the server's weights follow).
        await q.update_priorities([8, 9, 2], [0.0, 0.0, 7.0])
        t = await q.replay(None, 10, weight="priority")
        assert t.global_indexes.tolist() == [2] * 10
        assert t["x"].tolist() == [2] * 10
        assert np.asarray(t["priority"]).tolist() == [7.0] * 10

        with pytest.raises(InvalidError):
            await q.replay(["x"], 0)
        with pytest.raises(InvalidError):
            await q.replay(["x"], 1, window=-1)
        with pytest.raises(InvalidError):
            await q.replay(["x"], 1, weight="weight_version")
        with pytest.raises(InvalidError):
            await q.update_priorities([0, 1], [1.0])
        with pytest.raises(InvalidError):
            await q.update_priorities([0], [1.0], field="weight_version")

    run(main())
