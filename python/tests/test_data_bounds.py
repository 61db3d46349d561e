"""Reads larger than one answer of the server (Go's persist.ScanLimitMax, 10,000 rows:
persist.CheckAnswerCount): the server refuses one request over the bound, naming the
field and the range, and the SDK splits its callers' larger reads (get_data, get_batch,
replay, kv_batch_get, kv_list) into requests it accepts, returning everything in order."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError
from lakeshore.data import _READ_LIMIT_MAX, ARROW, KVInterface, Queue, _replay_part_seed

pytest.importorskip("pyarrow")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_server_refuses_one_answer_over_the_bound(dispatch: HttpDispatch, qname: str) -> None:
    """The SDK's bound is the server's: one more is refused, naming the field and range."""

    async def main() -> None:
        q = Queue(qname, dispatch=dispatch)
        await q.put_batch([{"x": 1}])
        await q.flush()
        over = _READ_LIMIT_MAX + 1
        for path, body, field in [
            ("/replay", {"size": over}, "size"),
            ("/batch", {"fields": ["x"], "batch_size": over, "task": "t"}, "batch_size"),
            ("/data", {"indexes": [0] * over}, "indexes"),
            ("/kv/get", {"keys": ["k"] * over}, "keys"),
        ]:
            with pytest.raises(InvalidError) as e:
                await q._call("POST", path, body=body, raw=True, accept=ARROW)
            assert e.value.field == field
            assert f"–{_READ_LIMIT_MAX}" in str(e.value), str(e.value)
        with pytest.raises(InvalidError) as e:
            await q._call("GET", "/kv", params={"limit": over})
        assert e.value.field == "limit"

    run(main())


def test_large_reads_split_past_the_bound(dispatch: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=dispatch, batch_size=5000)
        n = 2 * _READ_LIMIT_MAX + 7
        keys = [f"k{i:05d}" for i in range(n)]
        kv = KVInterface(q)
        await kv.kv_batch_put(keys, data={"x": list(range(n))})
        everything = list(range(n))

        # kv_batch_get and kv_list of more keys than one answer holds.
        got = await kv.kv_batch_get(keys)
        assert [g["x"] for g in got] == everything
        assert [k for k, _ in await kv.kv_list()] == keys

        # get_batch larger than one answer: get_meta, then get_data in parts.
        r = q.reader()
        b = await r.get_batch(["x"], n + 10, "train")
        assert b.global_indexes.tolist() == everything
        assert np.asarray(b["x"]).tolist() == everything
        assert b.meta.global_indexes == everything
        assert len(await r.get_batch(["x"], 1, "train")) == 0  # every sample was handed out

        # get_data of more indexes than one answer holds, in a chosen order with repeats.
        m = await r.get_meta(["x"], n, "other")
        m = dataclasses.replace(m, global_indexes=m.global_indexes[::-1] + [0, 5, 0])
        d = await r.get_data(m)
        assert d.global_indexes.tolist() == m.global_indexes
        assert np.asarray(d["x"]).tolist() == m.global_indexes

        # replay larger than one answer: parts of at most 10,000 draws, part k seeded
        # seed + k; the same seed repeats, and its first part is the one-request draw.
        size = 2 * _READ_LIMIT_MAX + 3
        rs = await q.replay(["x"], size, seed=42)
        assert len(rs.global_indexes) == size
        assert np.asarray(rs["x"]).tolist() == rs.global_indexes.tolist()
        again = await q.replay([], size, seed=42)
        assert again.global_indexes.tolist() == rs.global_indexes.tolist()
        one = await q.replay([], _READ_LIMIT_MAX, seed=42)
        assert one.global_indexes.tolist() == rs.global_indexes[:_READ_LIMIT_MAX].tolist()
        with pytest.raises(InvalidError):
            await q.replay([], (1 << 20) + 1)

    run(main())


def test_replay_part_seed_matches_go() -> None:
    """Go's persist.ReplayPartSeed: seed + k modulo 2^64, never 0 unless the seed is 0."""
    assert _replay_part_seed(7, 0) == 7
    assert _replay_part_seed(7, 2) == 9
    assert _replay_part_seed(0, 3) == 0
    assert _replay_part_seed((1 << 64) - 1, 0) == (1 << 64) - 1
    assert _replay_part_seed((1 << 64) - 1, 1) == 1
    assert _replay_part_seed((1 << 64) - 2, 3) == 2


def test_kv_list_key_put_again_between_pages(dispatch: HttpDispatch, qname: str) -> None:
    """A key cleared and put again between two of the server's pages (a new, higher index)
    is listed once, not once from each page (fails on the code before); the same key in
    two partitions is two keys of the list of every partition."""

    async def main() -> None:
        q = Queue(qname, dispatch=dispatch)
        n = _READ_LIMIT_MAX + 1
        keys = [f"k{i:05d}" for i in range(n)]
        kv = KVInterface(q)
        await kv.kv_batch_put(keys, data={"x": list(range(n))})
        call = q._call
        pages = 0

        async def hooked(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            nonlocal pages
            res = await call(method, path, *args, **kwargs)
            if method == "GET" and path == "/kv":
                pages += 1
                if pages == 1:
                    await kv.kv_clear(["k00000"])
                    await kv.kv_batch_put(["k00000"], data={"x": [-1]})
            return res

        q._call = hooked  # type: ignore[method-assign]
        listed = [k for k, _ in await kv.kv_list()]
        assert pages >= 2
        assert len(listed) == len(set(listed)) == n
        assert listed[-1] == "k00000"  # at its latest index, after the rest
        q._call = call  # type: ignore[method-assign]

        await kv.kv_batch_put(["k00000"], data={"x": [7]}, partition_id="other")
        assert len(await kv.kv_list("")) == n + 1

    run(main())


def test_get_batch_refuses_a_batch_size_that_is_not_an_integer(dispatch: HttpDispatch, qname: str) -> None:
    """get_batch compared batch_size with the bound before checking it, so a string or
    None raised a bare TypeError ('>' not supported) instead of the InvalidError naming
    batch_size that get_meta and a float batch_size give (found by break12)."""

    async def main() -> None:
        q = Queue(qname, dispatch=dispatch)
        await q.put_batch([{"x": 1}])
        await q.flush()
        for bad in ["3", None, 1.5]:
            with pytest.raises(InvalidError) as e:
                await q.reader().get_batch(["x"], bad, "t")  # type: ignore[arg-type]
            assert e.value.field == "batch_size", str(e.value)
        assert await q.stats() is not None

    run(main())
