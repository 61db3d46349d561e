"""GRPO groups of the data queue: over-sampling, the zero-variance filter, stragglers
and drop_group (lakeshore.data; Go: persist/sampler_grpo.go, persist/groups.go) on
every plane."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from lakeshore import HttpDispatch, InvalidError, NotFoundError
from lakeshore.data import GRPOGroupNSampler, Queue

pytest.importorskip("pyarrow")



def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_filter_oversampling_stragglers_and_drop_group(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        now, old = time.time(), time.time() - 3600
        groups = {"a": [1.0, 1.0, 1.0, 1.0], "b": [0.0, 1.0, 0.0, 1.0], "c": [0.0, 0.0, 0.0, 0.0], "d": [1.0, 0.0, 0.0, 0.0]}
        for uid, rewards in groups.items():
            await q.put_batch([{"uid": uid, "reward": r, "at": now} for r in rewards])
        await q.put_batch([{"uid": "late", "reward": float(i), "at": old} for i in range(2)])
        await q.flush()
        r = q.reader()
        s = GRPOGroupNSampler(4, "uid", use=2, drop_zero_variance="reward")
        with pytest.raises(InvalidError) as leased:  # over-sampled: could not come back whole
            await r.get_meta(["uid", "reward"], 4, "train", sampler=s, wait=False, lease=60)
        assert leased.value.field == "lease"
        m = await r.get_meta(["uid", "reward"], 4, "train", sampler=s, wait=False)
        assert m.global_indexes == [4, 5, 12, 13]  # the first 2 of b and of d
        st = await q.stats()
        assert st["groups_dropped"] == 2 and st["samples_unused"] == 4
        strag = GRPOGroupNSampler(4, "uid", straggler_seconds=60, time_field="at", straggler_policy="partial")
        b = await r.get_batch(["uid", "at"], 8, "train", sampler=strag, wait=False)
        assert b.global_indexes.tolist() == [16, 17]  # the straggler, served partial
        with pytest.raises(InvalidError):
            await r.get_meta(["uid"], 4, "t", sampler=GRPOGroupNSampler(4, "uid", use=5), wait=False)
        with pytest.raises(InvalidError):
            await r.get_meta(["uid"], 4, "t", sampler=GRPOGroupNSampler(4, "uid", straggler_seconds=5), wait=False)

        await q.drop_group("eval", [0, 1, 2, 3])
        await q.drop_group("eval", [0, 1, 2, 3])  # once
        assert (await q.stats())["groups_dropped"] == 3
        m = await r.get_meta(["uid"], 4, "eval", sampler=GRPOGroupNSampler(4, "uid"), wait=False)
        assert m.global_indexes == [4, 5, 6, 7]  # a was dropped for eval
        with pytest.raises(InvalidError):
            await q.drop_group("eval", [])
        with pytest.raises(NotFoundError):
            await q.drop_group("eval", [10_000])

    run(main())
