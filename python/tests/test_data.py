"""The data queue (lakeshore.data) on every plane: ``Dispatch(":memory:")``, the embedded
daemon of a file (``Dispatch(path)``) and ``lakeshore serve`` with a tenant token of the
data permissions (``every_plane``, the session's planes in conftest.py); then the
TransferQueue sampler edge cases, the read layouts (no Python object per row), torch and
TensorDict, ``storage_path`` and the persisting-queue seed page as written."""

from __future__ import annotations

import asyncio
import time
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from lakeshore import HttpDispatch, IncompatibleTypeError, InvalidError, NotFoundError, UnavailableError
from lakeshore import TimeoutError as LakeshoreTimeout
from lakeshore.data import (
    Batch,
    GRPOGroupNSampler,
    KVInterface,
    Queue,
    RankAwareSampler,
    SeqlenBalancedSampler,
    SequentialSampler,
)
from tests.conftest import Server

pytest.importorskip("pyarrow")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_seed_put_flush_get(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, storage_path="./data", dispatch=d)
        await q.put({"step": 1, "reward": 0.5})
        await q.put({"step": 2, "reward": 0.8})
        await q.flush()
        records = await q.get(limit=100)
        assert records == [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.8}]
        assert await q.get(limit=100) == []  # this object read them
        await q.put({"step": 3, "obs": np.arange(3, dtype=np.float32), "toks": [1, 2]})
        (r,) = await q.get(limit=10)  # a get sends the buffer first
        assert r["step"] == 3 and r["toks"] == [1, 2]
        assert r["obs"].dtype == np.float32 and r["obs"].tolist() == [0.0, 1.0, 2.0]

    run(main())


def test_auto_flush_batch_size_and_stats(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=3, auto_flush_interval_sec=0.2, enable_metrics=True)
        await q.put_batch([{"i": i} for i in range(3)])  # a full batch is sent at once
        other = Queue(qname, dispatch=d)
        assert len(await other.get(limit=10)) == 3
        await q.put({"i": 3})
        # The interval sends it: no flush here, and a get on q would send its buffer, so
        # only the other reader polls (the send and commit take what the machine allows).
        got: list[int] = []
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline, "the auto-flush interval never sent the buffered record"
            got = [r["i"] for r in await other.get(limit=10)]
            if not got:
                await asyncio.sleep(0.05)
        assert got == [3]
        st = await q.stats()
        assert st["len"] == 4 and st["client"]["puts"] == 4
        assert st["client"]["buffered"] == 0  # emptied by the timer

    run(main())


def test_stream(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1)

        async def produce() -> None:
            for i in range(5):
                await q.put({"i": i})
                await asyncio.sleep(0.03)

        p = asyncio.create_task(produce())
        # Delivery while the puts go on: an idle timeout no put gap comes near (a slow put
        # on a loaded machine must not end it), left once every record came.
        seen: list[int] = []
        async for batch in Queue(qname, dispatch=d).stream(limit=1000, wait=True, timeout=30):
            seen.extend(r["i"] for r in batch)
            if len(seen) >= 5:
                break
        await p
        assert seen == list(range(5))
        # The idle end, on a stream with no producer: it reads what is there, then ends
        # once no record came for its timeout.
        idle: list[int] = []

        async def drain() -> None:
            async for batch in Queue(qname, dispatch=d).stream(limit=1000, wait=True, timeout=0.5):
                idle.extend(r["i"] for r in batch)

        await asyncio.wait_for(drain(), timeout=30)
        assert idle == list(range(5))
        # Without wait the stream ends at the tail.
        assert [len(b) async for b in Queue(qname, dispatch=d).stream(limit=2, wait=False)] == [2, 2, 1]

    run(main())


def test_an_empty_stream_says_where_the_records_are(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    """The persisting page puts to ``partition_id="train_0"`` and then streams with
    ``q.stream(limit=1000, wait=True, timeout=5.0)``, which reads this Queue's partition
    (``default``): it ended with nothing, in silence, where get() logs which partitions
    hold the records. An empty stream now logs the same line once; one that yields, or
    names its partition, does not."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"a": i} for i in range(3)], partition_id="train_0")
        with caplog.at_level("WARNING", logger="lakeshore.data"):
            assert [b async for b in q.stream(limit=10, wait=False)] == []
            assert [b async for b in Queue(qname, dispatch=d).stream(limit=10, wait=False, partition_id="train_0")] != []
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1, warned
        assert "stream()" in warned[0] and "'train_0': 3" in warned[0] and "partition_id=" in warned[0]

    run(main())


def test_meta_data_batches_and_consumption(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch(
            [{"prompt": f"p{p}", "reward": float(i), "ids": [p, i, 7]} for p in range(4) for i in range(4)],
            partition_id="train_0",
        )
        await q.flush()
        reader = q.reader()
        meta = await reader.get_meta(
            fields=["ids", "reward"], batch_size=8, task_name="actor_train", partition_id="train_0", sampler=SequentialSampler()
        )
        assert meta.size == 8 and meta.global_indexes == list(range(8)) and meta.field_names == ["ids", "reward"]
        assert {f["name"]: f["kind"] for f in meta.fields} == {"ids": "list<int64>", "reward": "float64"}
        batch = await reader.get_data(meta, partition_id="train_0")
        assert batch["reward"].dtype == np.float64 and batch["reward"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
        assert not batch["reward"].flags["OWNDATA"]  # a view on the Arrow buffer: zero-copy
        assert batch["ids"].shape == (8, 3) and batch["ids"].dtype == np.int64  # equal-length lists: one 2-D array
        assert batch.global_indexes.tolist() == list(range(8))
        rest = await reader.get_batch(fields=["reward"], batch_size=8, task_name="actor_train", partition_id="train_0")
        assert rest.global_indexes.tolist() == list(range(8, 16))  # consumed ones are skipped
        assert rest.meta is not None and rest.meta.global_indexes == list(range(8, 16)) and rest.meta.task_name == "actor_train"
        assert await q.consumed("actor_train", "train_0") == 16
        await q.reset_consumption("actor_train", partition_id="train_0")
        again = await reader.get_batch(fields=["reward"], batch_size=4, task_name="actor_train", partition_id="train_0")
        assert again.global_indexes.tolist() == [0, 1, 2, 3]
        await q.mark_consumed("other", global_indexes=[0, 1, 2, 3], partition_id="train_0")
        nxt = await reader.get_batch(fields=["reward"], batch_size=4, task_name="other", partition_id="train_0")
        assert nxt.global_indexes.tolist() == [4, 5, 6, 7]
        # defer_consume: handed out, not consumed until marked.
        held = await reader.get_meta(["reward"], 2, "late", "train_0", defer_consume=True)
        assert await q.consumed("late", "train_0") == 0
        await q.mark_consumed("late", held.global_indexes, "train_0")
        assert await q.consumed("late", "train_0") == 2
        with pytest.raises(InvalidError):
            q.reader(2, 2)

    run(main())


def test_kv_interface(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d)
        kv = KVInterface(q)
        await kv.kv_put("sess-42", data={"reward": 1.5, "t": np.ones(2)}, partition_id="prod", tag={"status": "complete"})
        await kv.kv_batch_put(["sess-43", "sess-44"], data={"reward": [0.1, 0.2]}, partition_id="prod")
        got = await kv.kv_batch_get(["sess-42", "sess-43"], partition_id="prod")
        assert got[0]["reward"] == 1.5 and got[0]["t"].tolist() == [1.0, 1.0] and got[1] == {"reward": 0.1}
        pairs = dict(await kv.kv_list("prod"))
        assert pairs == {"sess-42": {"status": "complete"}, "sess-43": {}, "sess-44": {}}
        await kv.kv_clear(["sess-42"], partition_id="prod")
        assert set(dict(await kv.kv_list("prod"))) == {"sess-43", "sess-44"}
        with pytest.raises(NotFoundError):
            await kv.kv_batch_get(["sess-42"], partition_id="prod")
        # Columns: numpy arrays, one row per key; 0-d rows are scalars.
        await kv.kv_batch_put(
            ["a", "b"], data={"obs": np.arange(6, dtype=np.float32).reshape(2, 3), "r": np.array([0.5, 1.5])}, partition_id="cols"
        )
        a, b = await kv.kv_batch_get(["a", "b"], partition_id="cols")
        assert a["obs"].tolist() == [0, 1, 2] and b["obs"].tolist() == [3, 4, 5] and (a["r"], b["r"]) == (0.5, 1.5)
        assert type(a["r"]) is float
        with pytest.raises(InvalidError):
            await kv.kv_batch_put(["a", "b", "c"], data={"r": np.array([0.5, 1.5])}, partition_id="cols")

    run(main())


def test_a_nul_byte_in_a_field_name_or_a_key_is_invalid_naming_it(d: HttpDispatch, qname: str) -> None:
    """A field name or a KV key holding a NUL byte is InvalidError naming "record field
    name" or "key" (the stores' one check; the SDK has none of its own), nothing written:
    they were taken (found by review)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, auto_flush_interval_sec=0)
        await q.put({"x": 1})
        await q.flush()
        await q.put({"a\x00b": 1})
        with pytest.raises(InvalidError) as e:
            await q.flush()
        assert e.value.field == "record field name", e.value
        kv = KVInterface(q)
        for call in (
            kv.kv_put("k\x00", data={"x": 2}),
            kv.kv_batch_get(["k\x00"]),
            kv.kv_clear(["\x00"]),
        ):
            with pytest.raises(InvalidError) as e:
                await call
            assert e.value.field == "key", e.value
        assert (await q.stats())["len"] == 1

    run(main())


# ------------------------------------------------------------------------------ samplers (TransferQueue's edge cases)


def test_rank_aware_ranks_of_one_group_get_the_same_records(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch([{"x": float(i)} for i in range(12)])
        await q.flush()
        # Two data-parallel groups of two tensor-parallel ranks each: every process makes
        # its reader of its group's rank.
        g0 = [q.reader(0, 2), q.reader(0, 2)]
        g1 = [q.reader(1, 2), q.reader(1, 2)]
        sampler = RankAwareSampler()
        steps: list[tuple[list[int], list[int]]] = []
        for _ in range(2):
            a0, b0 = [
                (await r.get_batch(fields=["x"], batch_size=3, task_name="dp", sampler=sampler)).global_indexes.tolist()
                for r in g0
            ]
            a1, b1 = [
                (await r.get_batch(fields=["x"], batch_size=3, task_name="dp", sampler=sampler)).global_indexes.tolist()
                for r in g1
            ]
            assert a0 == b0 and a1 == b1  # identical within a group
            assert len(a0) == 3 and not set(a0) & set(a1)  # disjoint across groups
            steps.append((a0, a1))
        (s0g0, s0g1), (s1g0, s1g1) = steps
        assert not (set(s0g0) | set(s0g1)) & (set(s1g0) | set(s1g1))  # the next step is new records
        assert sorted(s0g0 + s0g1 + s1g0 + s1g1) == list(range(12))
        # A late rank of group 0 asking for step 0 gets the stored assignment, whoever
        # consumed it: the same records as its peers.
        late = await q.reader(0, 2).get_meta(["x"], 3, "dp", sampler=sampler, batch_index=0)
        assert late.global_indexes == s0g0
        # The values are the same records too.
        b = await q.reader(0, 2).get_batch(["x"], 3, "dp", sampler=sampler, batch_index=1)
        assert b["x"].tolist() == [float(i) for i in s1g0]

    run(main())


def test_grpo_incomplete_groups_and_batch_sizes(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        # p1 has 3 of its 4 samples (a failed generation); p0 and p2 are complete.
        rows = [{"uid": "p0", "r": 0.0}] * 4 + [{"uid": "p1", "r": 1.0}] * 3 + [{"uid": "p2", "r": 2.0}] * 4
        await q.put_batch(rows)
        await q.flush()
        grpo = GRPOGroupNSampler(n_samples_per_prompt=4, group_field="uid")
        reader = q.reader()
        b = await reader.get_batch(fields=["uid"], batch_size=8, task_name="grpo", sampler=grpo, timeout=2)
        assert b["uid"].tolist() == ["p0"] * 4 + ["p2"] * 4  # the incomplete group is skipped, not split
        # A batch size that is not a multiple of n is refused, saying so.
        with pytest.raises(InvalidError) as e:
            await reader.get_batch(fields=["uid"], batch_size=6, task_name="grpo6", sampler=grpo)
        assert "batch_size" in str(e.value)
        # Only the incomplete group is left: a wait ends in a timeout and hands nothing out.
        with pytest.raises(LakeshoreTimeout):
            await reader.get_batch(fields=["uid"], batch_size=4, task_name="grpo", sampler=grpo, timeout=0.3)
        assert await q.consumed("grpo") == 8
        # Without wait: nothing complete is ready, so an empty batch.
        empty = await reader.get_batch(fields=["uid"], batch_size=4, task_name="grpo", sampler=grpo, wait=False)
        assert len(empty) == 0
        # The missing sample arrives: the group completes and is handed out whole.
        await q.put({"uid": "p1", "r": 1.0})
        await q.flush()
        done = await reader.get_batch(fields=["uid", "r"], batch_size=4, task_name="grpo", sampler=grpo, timeout=2)
        assert done["uid"].tolist() == ["p1"] * 4 and done["r"].tolist() == [1.0] * 4
        # Without group_field: aligned blocks of n consecutive samples of the partition.
        q2 = Queue(qname + "-blocks", dispatch=d, batch_size=1000)
        await q2.put_batch([{"i": i} for i in range(6)])
        await q2.flush()
        blocks = await q2.reader().get_batch(["i"], 4, "g", sampler=GRPOGroupNSampler(2))
        assert blocks["i"].tolist() == [0, 1, 2, 3]
        with pytest.raises(InvalidError):
            GRPOGroupNSampler(n_samples_per_prompt=0)

    run(main())


def test_not_enough_data_before_the_timeout(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch([{"i": i} for i in range(3)])
        await q.flush()
        reader = q.reader()
        with pytest.raises(LakeshoreTimeout):
            await reader.get_meta(["i"], 5, "t", timeout=0.3)
        assert await q.consumed("t") == 0  # a wait that ended handed nothing out
        partial = await reader.get_meta(["i"], 5, "t", wait=False)
        assert partial.global_indexes == [0, 1, 2]

        # A wait that the data fills in time returns the full batch.
        async def later() -> None:
            await asyncio.sleep(0.2)
            await q.put_batch([{"i": i} for i in range(3, 8)])
            await q.flush()

        t = asyncio.create_task(later())
        full = await reader.get_meta(["i"], 5, "t", timeout=5)
        await t
        assert full.global_indexes == [3, 4, 5, 6, 7]

    run(main())


def test_a_misspelt_field_is_warned_once(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    """A batch hand-out of a field in no record (a misspelt name) answered an empty batch in
    silence (and, waiting, a TimeoutError after the whole wait); it is not refused (a later
    put_fields may add the field), but logged once per queue and field at WARNING, as get()
    does for an unknown partition. A real field is not."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        with caplog.at_level("WARNING", logger="lakeshore.data"):
            await q.put_batch([{}])  # a record without fields: the queue exists, its schema is empty
            b = await q.get_batch(fields=["a"], batch_size=2, task_name="t")
            assert len(b.global_indexes) == 0
            assert not caplog.records, "a queue with no field yet tells nothing (a consumer may start first)"
        await q.put_batch([{"a": i} for i in range(4)])
        await q.flush()
        with caplog.at_level("WARNING", logger="lakeshore.data"):
            b = await q.get_batch(fields=["a"], batch_size=2, task_name="t")
            assert len(b.global_indexes) == 2
            assert not caplog.records, "a field of the queue is not warned about"
            b = await q.get_batch(fields=["nope"], batch_size=2, task_name="t")
            assert len(b.global_indexes) == 0  # not refused
            meta = await q.reader().get_meta(["nope", "a"], 2, "u")
            assert meta.global_indexes == []
            await q.get_meta(["nope"], 2, "t")
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1, warned
        assert qname in warned[0] and "'nope'" in warned[0] and "'a'" in warned[0]

    run(main())


def test_a_misspelt_sampler_field_is_warned_once(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    """A field a built-in sampler reads (GRPO's group_field, drop_zero_variance and
    time_field, seqlen-balanced's length_field) that no record has is warned about once,
    as a misspelt field asked for is: GRPO hands out no sample without a group value, so
    group_field="promt" made a trainer time out with a message that named no cause, and a
    misspelt length_field balanced nothing, in silence (found by a scratch RL loop,
    2026-12-07). Not refused: a later put may add the field."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"prompt": f"p{i // 4}", "x": i, "n": i} for i in range(16)])
        await q.flush()
        with caplog.at_level("WARNING", logger="lakeshore.data"):
            b = await q.get_batch(["x"], 4, "ok", sampler=GRPOGroupNSampler(4, group_field="prompt"))
            assert len(b.global_indexes) == 4
            assert not caplog.records, "a sampler field of the queue is not warned about"
            for task in ("t", "u"):
                b = await q.get_batch(["x"], 4, task, sampler=GRPOGroupNSampler(4, group_field="promt"))
                assert len(b.global_indexes) == 0  # not refused
            await q.get_batch(["x"], 4, "v", sampler=SeqlenBalancedSampler("lenght", groups=2))
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 2, warned
        assert "'promt'" in warned[0] and "group_field" in warned[0] and "'prompt'" in warned[0], warned[0]
        assert "'lenght'" in warned[1] and "length_field" in warned[1], warned[1]

    run(main())


def test_seqlen_balanced_sampler(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        lengths = [9, 1, 8, 2, 7, 3, 6, 4]
        await q.put_batch([{"tokens": list(range(n)), "n": n} for n in lengths] + [{"tokens": [0], "n": 1}] * 4)
        await q.flush()
        b = await q.reader().get_batch(["n"], 8, "seq", sampler=SeqlenBalancedSampler("tokens", groups=2))
        got = b["n"].tolist()
        assert sorted(got) == sorted(lengths)  # the first 8 ready samples
        assert sum(got[:4]) == sum(got[4:]) == 20  # two equal-count parts, balanced
        with pytest.raises(InvalidError):
            await q.reader().get_batch(["n"], 3, "seq2", sampler=SeqlenBalancedSampler("tokens", groups=2))

    run(main())


def test_a_python_sampler_object_is_invalid_naming_the_samplers(d: HttpDispatch, qname: str) -> None:
    """persisting's custom samplers are BaseSampler subclasses (an object with
    ``sample(ready_indexes, batch_size)``); ours run in the store's transaction and are named
    by a Sampler. Such an object passed as ``sampler=`` is an InvalidError (field sampler)
    that names the samplers allowed, and hands nothing out. Before, it was an
    AttributeError ('… has no attribute body')."""

    class Evens:  # what a persisting BaseSampler subclass looks like
        def sample(self, ready: list[int], batch_size: int, *a: Any, **k: Any) -> tuple[list[int], list[int]]:
            s = [i for i in ready if i % 2 == 0][:batch_size]
            return s, s

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"step": i} for i in range(4)])
        await q.flush()
        r = q.reader()
        for call in (r.get_meta, r.get_batch, q.get_meta, q.get_batch):
            with pytest.raises(InvalidError) as e:
                await call(["step"], 2, "t", sampler=Evens())  # type: ignore[arg-type]
            assert e.value.field == "sampler" and e.value.value == "Evens", e.value
            assert "SequentialSampler()" in str(e.value) and "Sampler(name, params)" in str(e.value), e.value
        # Nothing was handed out: the task's first batch is the first two records.
        assert (await r.get_batch(["step"], 2, "t"))["step"].tolist() == [0, 1]

    run(main())


def test_reader_get_reads_its_ranks_shard(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch([{"i": i} for i in range(40)])
        await q.flush()
        r0, r1 = q.reader(0, 2), q.reader(1, 2)
        got0 = [r["i"] for r in await r0.get(limit=100)]
        got1 = [r["i"] for r in await r1.get(limit=100)]
        assert got0 and got1 and not set(got0) & set(got1)
        assert sorted(got0 + got1) == list(range(40))  # the shards cover the queue
        assert await r0.get(limit=100) == []  # each reader has its own cursor
        assert [r["i"] for r in await q.reader(0, 2).get(limit=100)] == got0  # the same shard again
        assert len(await q.reader().get(limit=100)) == 40  # world size 1: everything

    run(main())


# ------------------------------------------------------------------------------ read layouts


def test_tensor_columns_without_an_object_per_row(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        obs = np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3)
        await q.put_batch([{"obs": obs[i], "id": i, "mask": np.ones(5, dtype=np.int8) * i} for i in range(4)])
        await q.flush()
        b = await q.reader().get_batch(["obs", "mask", "id"], 4, "t")
        assert isinstance(b, Batch)
        assert b["obs"].dtype == np.float32 and b["obs"].shape == (4, 2, 3)  # stacked: one array
        np.testing.assert_array_equal(b["obs"], obs)
        assert not b["obs"].flags["OWNDATA"] and b["obs"].flags["WRITEABLE"]  # a writable view on the answer
        assert b["mask"].dtype == np.int8 and b["mask"].shape == (4, 5)
        assert b["id"].dtype == np.int64 and b["id"].tolist() == [0, 1, 2, 3]
        # Shapes that differ: one array per row, in an object array.
        await q.put_batch([{"obs": np.zeros(2, dtype=np.float32)}, {"obs": np.zeros(3, dtype=np.float32)}])
        await q.flush()
        ragged = await q.reader().get_batch(["obs"], 2, "t")
        assert ragged["obs"].dtype == object and [a.shape for a in ragged["obs"]] == [(2,), (3,)]
        # Ragged lists: one 1-D view per row.
        await q.put_batch([{"toks": [1, 2, 3]}, {"toks": [4]}])
        await q.flush()
        lists = await q.reader().get_batch(["toks"], 2, "t")
        assert [a.tolist() for a in lists["toks"]] == [[1, 2, 3], [4]]
        # zerocopy_mode="off": every column its own copy.
        await q.reset_consumption("t")
        off = Queue(qname, dispatch=d, zerocopy_mode="off")
        c = await off.reader().get_batch(["obs", "id"], 4, "t")
        assert c["obs"].flags["OWNDATA"] and c["id"].flags["OWNDATA"]
        np.testing.assert_array_equal(c["obs"], obs)

    run(main())


def test_bfloat16_and_complex_tensors(d: HttpDispatch, qname: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        bf = np.array([[1.5, -2.0], [0.25, 8.0]], dtype=ml_dtypes.bfloat16)
        cx = np.array([[1 + 2j], [3 - 4j]], dtype=np.complex64)
        await q.put_batch([{"bf": bf[i], "cx": cx[i]} for i in range(2)])
        await q.flush()
        b = await q.reader().get_batch(["bf", "cx"], 2, "t")
        assert b["bf"].dtype == bf.dtype and b["bf"].shape == (2, 2) and b["bf"].tolist() == bf.tolist()
        assert b["cx"].dtype == np.complex64 and b["cx"].tolist() == cx.tolist()

    run(main())


def test_torch_and_tensordict_formats(d: HttpDispatch, qname: str) -> None:
    torch = pytest.importorskip("torch")

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch(
            [{"input_ids": torch.arange(4) + i, "reward": float(i), "text": f"t{i}"} for i in range(3)]
        )
        await q.flush()
        b = await q.reader().get_batch(["input_ids", "reward", "text"], 3, "t", format="torch")
        assert isinstance(b["input_ids"], torch.Tensor) and b["input_ids"].shape == (3, 4)
        assert b["input_ids"].dtype == torch.int64 and b["input_ids"][2].tolist() == [2, 3, 4, 5]
        assert b["reward"].tolist() == [0.0, 1.0, 2.0] and b["text"].tolist() == ["t0", "t1", "t2"]
        b["input_ids"][0, 0] = 99  # writable memory of its own answer
        with pytest.raises(InvalidError):
            await q.reader().get_batch(["reward"], 1, "t2", format="pandas")  # type: ignore[arg-type]
        tensordict = pytest.importorskip("tensordict")
        await q.reset_consumption("t")
        td = await q.reader().get_batch(["input_ids", "reward", "text"], 3, "t", format="tensordict")
        assert isinstance(td, tensordict.TensorDict) and td.batch_size == torch.Size([3])
        assert td["input_ids"].shape == (3, 4) and td["_index"].tolist() == [0, 1, 2]
        assert td.get_non_tensor("text") == ["t0", "t1", "t2"]
        # kv_batch_put takes a TensorDict of columns, one row per key.
        kv = KVInterface(q)
        cols = tensordict.TensorDict({"obs": torch.ones(2, 3), "r": torch.tensor([0.5, 1.5])}, batch_size=[2])
        await kv.kv_batch_put(["s-1", "s-2"], data=cols, partition_id="kv")
        one, two = await kv.kv_batch_get(["s-1", "s-2"], partition_id="kv")
        assert one["r"] == 0.5 and two["r"] == 1.5 and one["obs"].tolist() == [1.0, 1.0, 1.0]

    run(main())


def test_queue_arguments() -> None:
    with pytest.raises(InvalidError) as e:
        Queue("q", zerocopy_mode="sometimes", dispatch=object())  # type: ignore[arg-type]
    assert "auto" in str(e.value) and "off" in str(e.value)
    with pytest.raises(InvalidError):
        Queue("q", batch_size=0, dispatch=object())  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ storage_path and the seed page


@pytest.fixture
def short_home(lakeshore_bin: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh directory as cwd and LAKESHORE_HOME (short: daemon sockets live there), the
    session's binary, no LAKESHORE_URL; its daemons are stopped at the end."""
    from lakeshore import _daemon, data

    h = Path(tempfile.mkdtemp(prefix="ls-sp-"))
    monkeypatch.setenv("LAKESHORE_HOME", str(h / "home"))
    monkeypatch.setenv("LAKESHORE_BIN", lakeshore_bin)
    monkeypatch.delenv("LAKESHORE_URL", raising=False)
    monkeypatch.chdir(h)
    yield h
    data._close_storage_planes()
    for sock in h.glob("home/run/*/daemon.sock"):
        _daemon._request(str(sock), "POST", "/v1/daemon/stop")


def test_storage_path_is_the_embedded_plane_of_that_directory(short_home: Path) -> None:
    async def main() -> None:
        q = Queue("events", storage_path="./data")
        assert q.dispatch.target == str(short_home / "data" / "lakeshore.db")  # type: ignore[attr-defined]
        await q.put({"step": 1})
        await q.flush()
        assert Queue("events", storage_path=short_home / "data").dispatch is q.dispatch  # one plane per directory
        assert (short_home / "data" / "data" / "default" / "events").is_dir()  # the data is under storage_path
        other = Queue("events", storage_path="./elsewhere")
        assert await other.get(limit=10) == []  # another directory, another plane
        assert await Queue("events", storage_path="./data").get(limit=10) == [{"step": 1}]

    run(main())
    (short_home / "afile").write_text("x")
    with pytest.raises(InvalidError):
        Queue("events", storage_path="./afile")


SEED_PAGE = '''
import asyncio
import numpy as np
from lakeshore.data import Queue, SequentialSampler, KVInterface, RankAwareSampler, GRPOGroupNSampler

async def main():
    q = Queue("events", storage_path="./data")

    await q.put({"step": 1, "reward": 0.5})
    await q.put({"step": 2, "reward": 0.8})
    await q.flush()

    records = await q.get(limit=100)
    print(f"Read {len(records)} records")  # Read 2 records

asyncio.run(main())

q = Queue("events",
    storage_path="./data",
    batch_size=100,                # flush when 100 records accumulate
    auto_flush_interval_sec=1.0,   # or every second, whichever comes first
    enable_metrics=True,           # track put/get/flush counts
)

reader_0 = q.reader()   # under Pulsing: rank=0, world_size=2
reader_1 = q.reader()   # under Pulsing: rank=1, world_size=2

q = Queue("events", zerocopy_mode="auto")   # avoids pickle + copy for tensor data

async def batches():
    q = Queue("training_data", storage_path="./data")
    # (not on the page: the records it reads)
    await q.put_batch([{"input_ids": np.arange(8) + i, "attention_mask": np.ones(8, dtype=np.int8),
                        "labels": np.int64(i)} for i in range(64)], partition_id="train_0")
    await q.flush()
    reader = q.reader()

    # Phase 1: what's available?
    meta = await reader.get_meta(
        fields=["input_ids", "attention_mask", "labels"],
        batch_size=32,
        task_name="actor_train",
        partition_id="train_0",
        sampler=SequentialSampler(),
    )
    # meta.size, meta.global_indexes, meta.field_names
    print("meta", meta.size, meta.global_indexes[:3], meta.field_names)

    # Phase 2: pull the actual tensors
    batch = await reader.get_data(meta, partition_id="train_0")
    print("data", batch["input_ids"].shape, batch["labels"][:3].tolist())

    # Or do both in one call
    batch = await reader.get_batch(
        fields=["input_ids", "attention_mask"],
        batch_size=32,
        task_name="actor_train",
        partition_id="train_0",
        sampler=SequentialSampler(),
    )
    print("batch", batch["attention_mask"].shape, batch.global_indexes[:2].tolist())

async def kv_page():
    q = Queue("kv_store", storage_path="./data")
    kv = KVInterface(q)
    tensor_dict = {"obs": np.zeros(3, dtype=np.float32)}             # (not on the page)
    two_session_batch = {"obs": np.ones((2, 3), dtype=np.float32)}   # (not on the page)

    # Put by key
    await kv.kv_put("sess-42", data=tensor_dict, partition_id="prod",
        tag={"status": "complete", "model": "llama-70b"})

    # Batch put
    await kv.kv_batch_put(
        ["sess-43", "sess-44"],
        data=two_session_batch,
        partition_id="prod",
    )

    # Retrieve by keys
    data = await kv.kv_batch_get(["sess-42", "sess-43"], partition_id="prod")
    print("kv", [d["obs"].tolist() for d in data])

    # List keys and their tags
    pairs = await kv.kv_list("prod")
    # → [("sess-42", {"status": "complete", ...}), ("sess-43", {}), ...]
    print("pairs", pairs)

    # Clean up
    await kv.kv_clear(["sess-42"], partition_id="prod")

async def consumption():
    q = Queue("training_data", storage_path="./data")
    # Mark records as processed by this task
    await q.mark_consumed("actor_train", global_indexes=[1, 2, 3], partition_id="train_0")

    # Reset consumption state for a fresh training run
    await q.reset_consumption("actor_train", partition_id="train_0")
    print("consumed", await q.consumed("actor_train", partition_id="train_0"))

    # Simple: consume in order
    seq = SequentialSampler()

    # Distributed training: each rank gets independent shards
    rank = RankAwareSampler()

    # GRPO: sample N items from each prompt group
    grpo = GRPOGroupNSampler(n_samples_per_prompt=4)

    process = lambda batch: print("stream", len(batch))
    q = Queue("events", storage_path="./data")   # (not on the page: which queue)
    async for batch in q.stream(limit=1000, wait=True, timeout=0.5):
        process(batch)

asyncio.run(batches())
asyncio.run(kv_page())
asyncio.run(consumption())
'''


def test_the_persisting_queue_seed_page_as_written(short_home: Path) -> None:
    """The seed page's snippets (docs: persisting-queue), run in order in a fresh process with
    ``from persisting import`` made ``from lakeshore.data import``; the Pulsing lines are
    not ours (no cluster), and the page's undefined ``tensor_dict``/``two_session_batch``
    and the records it reads are supplied, marked ``(not on the page)``."""
    script = short_home / "seed_page.py"
    script.write_text(textwrap.dedent(SEED_PAGE))
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(script)], cwd=short_home, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "Read 2 records"
    assert "meta 32 [0, 1, 2] ['input_ids', 'attention_mask', 'labels']" in out
    assert "data (32, 8) [0, 1, 2]" in out
    assert "batch (32, 8) [32, 33]" in out
    assert "kv [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]" in out
    assert any(line.startswith("pairs [('sess-42', {") for line in out)
    assert "consumed 0" in out
    assert "stream 2" in out
    assert (short_home / "data" / "data" / "default" / "training_data").is_dir()


def test_rl_loop_example(server: Server) -> None:
    script = Path(__file__).resolve().parents[2] / "examples" / "python" / "rl_loop.py"
    env = dict(os.environ, LAKESHORE_URL=server.url, LAKESHORE_TOKEN=server.admin_token)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("32 samples, tokens (32, 16)") == 4


def test_lost_put_answer_is_not_put_twice(d: HttpDispatch, qname: str) -> None:
    """A batch whose answer was lost (the server committed it, the connection broke) is
    sent again, with its put id, by the next send: the server answers the first put's
    indexes, so the queue holds the batch once and no record is lost."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100)
        real = q._call
        lost = {"n": 0}

        async def lose_first_answer(method: str, path: str, **kw: object) -> object:
            ans = await real(method, path, **kw)
            if path == "/records" and method == "POST" and lost["n"] == 0:
                lost["n"] += 1
                raise httpx.RemoteProtocolError("the server went away before answering")
            return ans

        q._call = lose_first_answer  # type: ignore[method-assign]
        await q.put_batch([{"i": 0}, {"i": 1}])
        with pytest.raises(httpx.RemoteProtocolError):
            await q.flush()
        await q.put({"i": 2})
        await q.flush()  # the lost batch first, with its put id, then the new one
        other = Queue(qname, dispatch=d)
        got = await other.get(limit=10)
        assert [r["i"] for r in got] == [0, 1, 2]

    asyncio.run(main())


def test_a_refused_batch_is_dropped_and_raised_once(d: HttpDispatch, qname: str) -> None:
    """A batch the server refused (a 4xx: it wrote none of it) is raised once and dropped,
    not sent again by every later send; the batches after it still go."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        await q.put({"a": 1})
        await q.flush()
        await q.put({"a": "s"})  # a string into the int64 column
        await q.put({"a": 3}, partition_id="other")  # a second batch of the same send
        with pytest.raises(IncompatibleTypeError) as e:
            await q.flush()
        assert e.value.code == "incompatible_type" and e.value.status == 400
        assert e.value.field == "a" and e.value.have and e.value.got, e.value.details
        assert isinstance(e.value, TypeError)
        assert any("wrote none of them; they were dropped" in n for n in getattr(e.value, "__notes__", []))
        assert [len(b[1]) for b in q._unsent] == [1]  # the refused batch is gone, the other kept
        await q.put({"a": 2})
        await q.flush()  # no error: the refusal was raised once
        await q.flush()
        other = Queue(qname, dispatch=d)
        assert [r["a"] for r in await other.get(limit=10)] == [1, 2]
        assert [r["a"] for r in await Queue(qname, dispatch=d).get(limit=10, partition_id="other")] == [3]

    asyncio.run(main())


def test_a_refusal_met_by_the_auto_flush_is_raised_by_the_next_flush(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0.05)
        await q.put({"a": 1})
        await q.flush()
        await q.put({"a": "s"})
        for _ in range(100):  # the interval sends it (and meets the refusal)
            await asyncio.sleep(0.02)
            if q._refused is not None:
                break
        assert q._buffer == [] and q._unsent == []
        await q.put({"a": 2})
        with pytest.raises(IncompatibleTypeError):
            await q.flush()  # raised after the rest was sent and committed
        await q.flush()
        assert [r["a"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [1, 2]

    asyncio.run(main())


def test_a_lost_answer_of_a_5xx_is_sent_again(d: HttpDispatch, qname: str) -> None:
    """A 5xx (unavailable) is an answer that was lost, not a refusal: the batch stays and
    goes again with its put id."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        real = q._call
        failures = {"n": 0}

        async def busy_once(method: str, path: str, **kw: object) -> object:
            if path == "/records" and method == "POST" and failures["n"] == 0:
                failures["n"] += 1
                raise UnavailableError("the served plane could not be reached", code="unavailable", status=502)
            return await real(method, path, **kw)

        q._call = busy_once  # type: ignore[method-assign]
        await q.put_batch([{"i": 0}, {"i": 1}])
        with pytest.raises(UnavailableError):
            await q.flush()
        assert [len(b[1]) for b in q._unsent] == [2]
        await q.flush()
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [0, 1]

    asyncio.run(main())


def test_reads_of_a_queue_no_put_created(d: HttpDispatch, qname: str) -> None:
    """The server creates a data queue at its first put only and answers reads of a missing
    one 404 (creating nothing); the SDK reads it as empty, as the Go HTTP store does, so a
    consumer may start before its producers."""

    async def main() -> None:
        q = Queue(qname + "-absent", dispatch=d)
        assert await q.get(limit=10) == []
        assert [b async for b in q.stream(wait=False)] == []
        st = await q.stats()
        assert st["len"] == 0 and st["partitions"] == {}
        assert await q.consumed("t") == 0
        assert await KVInterface(q).kv_list() == []
        meta = await q.reader().get_meta(["x"], 2, "t", wait=False)
        assert meta.size == 0 and meta.global_indexes == []
        with pytest.raises(TimeoutError):
            await q.reader().get_meta(["x"], 2, "t", timeout=0.3)
        # A consumer that waits gets the records of a producer that starts after it.
        waiter = asyncio.create_task(q.reader().get_meta(["x"], 2, "t", timeout=10))
        await asyncio.sleep(0.2)
        await q.put_batch([{"x": 1}, {"x": 2}])
        await q.flush()
        meta = await waiter
        assert meta.size == 2

    run(main())


def test_persisting_semantics(d: HttpDispatch, qname: str) -> None:
    """Issue 24, semantics 5, as persisting 0.3.0 does: ``get(limit, offset)`` reads from
    ``offset`` each time; ``get_meta`` answers what is available now (size 0 on an empty
    queue, the page's "Phase 1: what's available?"); consumption calls on a queue without
    records do nothing. A ``None`` field is the documented difference (docs/python.md)."""

    async def main() -> None:
        empty = Queue(qname + "-empty", dispatch=d)
        t0 = time.monotonic()
        meta = await empty.get_meta(["x"], 4)
        assert meta.size == 0 and meta.global_indexes == []
        assert (await empty.reader().get_meta(["x"], 4, "t")).size == 0
        assert time.monotonic() - t0 < 5, "no wait without a timeout"
        await empty.mark_consumed("t", [])
        await empty.mark_consumed("t", [3])
        await empty.reset_consumption("t")
        with pytest.raises(TimeoutError):
            await empty.reader().get_meta(["x"], 4, "t", timeout=0.3)  # a timeout asks to wait

        q = Queue(qname, dispatch=d)
        await q.put_batch([{"i": i} for i in range(6)])
        await q.flush()
        assert [r["i"] for r in await q.get(2, 0)] == [0, 1]
        assert [r["i"] for r in await q.get(2, 0)] == [0, 1], "an offset reads from there each time"
        assert [r["i"] for r in await q.get(3, offset=4)] == [4, 5]
        assert [r["i"] for r in await q.get(4)] == [0, 1, 2, 3], "without one: this object's cursor"
        assert [r["i"] for r in await q.get(4)] == [4, 5]
        with pytest.raises(InvalidError):
            await q.get(1, -1)
        first = await q.get_meta(["i"], 4, task_name="a")
        assert first.global_indexes == [0, 1, 2, 3]
        partial = await q.get_meta(["i"], 4, task_name="a")
        assert partial.global_indexes == [4, 5], "what is ready now, fewer than asked"
        assert (await q.get_batch(["i"], 2, task_name="b"))["i"].tolist() == [0, 1]

        nones = Queue(qname + "-none", dispatch=d)
        await nones.put_batch([{"a": 1, "b": None}, {"a": 2}])
        await nones.flush()
        # persisting keeps {"a": 1, "b": None}; ours reads a null field as absent.
        assert await nones.get(10, 0) == [{"a": 1}, {"a": 2}]

    run(main())


def test_a_batch_over_the_body_limit_is_split_not_wedged(d: HttpDispatch, qname: str) -> None:
    """100 records of 200 KB with the default batch_size (a 20 MB buffer, over the
    server's 17 MiB body limit) go in several requests under the limit, each with its own
    put id; nothing stays unsent and every record is written once."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, auto_flush_interval_sec=0)
        sizes: list[int] = []
        put_ids: list[str] = []
        real = q._call

        async def spy(method: str, path: str, **kw: Any) -> Any:
            if method == "POST" and path == "/records":
                sizes.append(sum(len(r) + 5 for r in kw["body"]["records"]))
                put_ids.append(kw["params"]["put_id"])
            return await real(method, path, **kw)

        q._call = spy  # type: ignore[method-assign]
        for i in range(100):
            await q.put({"blob": os.urandom(200_000), "i": i})
        await q.flush()
        assert q._unsent == [] and q._buffer == []
        assert len(sizes) >= 2 and max(sizes) <= 16 << 20, sizes
        assert len(set(put_ids)) == len(put_ids)
        got = [r["i"] for r in await Queue(qname, dispatch=d).get(limit=200, fields=["i"])]
        assert got == list(range(100))

    asyncio.run(main())


def test_a_413_refusal_drops_the_batch_once(dispatch: HttpDispatch) -> None:
    """A 413 (a body over the server's limit, e.g. a server configured below the default)
    is a refusal: the batch is dropped and raised once with the note, never resent."""
    from lakeshore.data import _chunks

    assert [len(c) for c in _chunks([b"x" * 10] * 5, limit=30)] == [2, 2, 1]
    assert [len(c) for c in _chunks([b"x" * 100, b"y"], limit=30)] == [1, 1]  # never below one record

    async def main() -> None:
        q = Queue("wedge413", dispatch=dispatch, batch_size=100, auto_flush_interval_sec=0)
        calls: list[str] = []

        async def too_large(method: str, path: str, **kw: Any) -> Any:
            calls.append(path)
            if path == "/records":
                raise InvalidError("invalid request body: larger than 1024 bytes", field="request body", status=413)
            return {}

        q._call = too_large  # type: ignore[method-assign]
        await q.put_batch([{"i": i} for i in range(3)])
        with pytest.raises(InvalidError) as e:
            await q.flush()
        assert any("they were dropped" in n for n in getattr(e.value, "__notes__", []))
        assert q._unsent == [] and q._buffer == []
        calls.clear()
        await q.flush()  # raised once: nothing is sent again
        assert calls == ["/flush"]

    asyncio.run(main())


def test_batch_reads_decode_codec_fields_as_get_does(d: HttpDispatch, qname: str) -> None:
    """Values stored wire-encoded (a nested dict, a list of strings, a mixed list) come
    back decoded from get_batch and get_meta + get_data, as get() returns them, not as
    raw wire bytes (found by a trial)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        recs = [
            {"i": 0, "obj": {"k": [1, "x"]}, "names": ["a", "b"], "mixed": [1, "a", None]},
            {"i": 1, "obj": {"k": []}, "names": ["c"], "mixed": [3, "b"]},
        ]
        await q.put_batch(recs)
        await q.flush()
        got = await Queue(qname, dispatch=d).get(limit=10)
        assert got == recs
        fields = ["obj", "names", "mixed"]
        r = q.reader()
        b = await r.get_batch(fields, 2, "t")
        meta = await r.get_meta(fields, 2, "u")
        b2 = await r.get_data(meta)
        for batch in (b, b2):
            for f in fields:
                assert list(batch[f]) == [rec[f] for rec in recs], (f, batch[f])

    run(main())


def test_flush_and_clear_partition_of_a_queue_never_put_to_are_no_ops(d: HttpDispatch, qname: str) -> None:
    """flush() and clear_partition() on a queue nothing was ever put to do nothing (as
    its reads answer empty) instead of raising NotFoundError, and create nothing (found
    by a trial: a producer that flushed at shutdown after producing nothing crashed)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.flush()
        await q.clear_partition("p")
        assert await q.get(limit=5) == []
        with pytest.raises(NotFoundError) as e:  # still not created: a read of it is empty
            await q._call("GET", "/schema", retry="safe")
        assert e.value.details.get("queue")
        await q.put({"x": 1})
        await q.flush()
        assert [r["x"] for r in await Queue(qname, dispatch=d).get(limit=5)] == [1]

    run(main())


def test_read_larger_than_the_servers_page(d: HttpDispatch, qname: str) -> None:
    """A read with a limit above the server's bound on one answer (10,000 records: the server
    refuses a larger limit, as it reads an answer into memory whole) reads a page of that
    many; the cursor continues after it, so repeated reads and ``stream`` read every record
    once (fails on the code that sent the caller's limit: the server answered invalid)."""
    total = 10_005

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"i": i} for i in range(total)])
        await q.flush()
        first = await q.get(limit=1 << 31)
        assert [r["i"] for r in first] == list(range(10_000))
        rest = await q.get(limit=1 << 31)
        assert [r["i"] for r in rest] == list(range(10_000, total))
        assert await q.get(limit=1 << 31) == []
        pages = [[r["i"] for r in page] async for page in Queue(qname, dispatch=d).stream(limit=1 << 31, wait=False)]
        assert [len(p) for p in pages] == [10_000, 5]
        assert [i for p in pages for i in p] == list(range(total))
        assert len(await Queue(qname, dispatch=d).reader(0, 1).get(limit=1 << 31)) == 10_000

    run(main())


def test_a_stream_with_a_nan_timeout_is_refused(d: HttpDispatch, qname: str) -> None:
    """A NaN idle timeout is refused at once as InvalidError naming ``timeout`` (found by
    a trial: the transport raised a bare ``ValueError: deadline must not be NaN``, naming
    no argument of the call)."""

    async def main() -> None:
        q = Queue(qname, storage_path="./data", dispatch=d)
        await q.put({"x": 1})
        await q.flush()

        async def drain() -> None:
            async for _ in q.stream(timeout=float("nan")):
                pass

        with pytest.raises(InvalidError) as e:
            await asyncio.wait_for(drain(), 10)
        assert e.value.field == "timeout"

    run(main())


def test_len_counts_every_partition_and_the_buffer(d: HttpDispatch, qname: str) -> None:
    """persisting's ``len(q)``: 0 on a queue nothing was put to; the store's records (every
    partition, minus cleared ones) plus what this object still buffers. A blocking call
    that also works inside a coroutine (it runs on the dispatch's client thread). An empty
    queue object is still true: ``if q:`` asks the plane nothing."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        assert len(q) == 0 and bool(q)
        await q.put_batch([{"i": i} for i in range(3)])
        assert len(q) == 3  # buffered, counted
        assert len(Queue(qname, dispatch=d)) == 0  # another object: nothing sent yet
        await q.flush()
        await q.put({"i": 3}, partition_id="other")
        await q.flush()
        assert len(q) == len(Queue(qname, dispatch=d)) == 4 == (await q.stats())["len"]
        await q.clear([0])
        assert len(q) == 3

    run(main())


def test_close_sends_the_buffer_and_later_puts_go_at_once(d: HttpDispatch, qname: str) -> None:
    """persisting's ``close()``: the records still buffered are sent (another object reads
    them), a second close is a no-op, and a put after it is sent at once instead of
    buffered with no timer left to send it (persisting's buffers it and loses it)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=30)
        await q.put_batch([{"i": 0}, {"i": 1}])
        assert q._flush_timer is not None
        assert q.close() is None
        assert q._flush_timer is None and q._buffer == []
        q.close()
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [0, 1]
        await q.put({"i": 2})
        assert q._buffer == [] and q._flush_timer is None
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [0, 1, 2]
        assert [r["i"] for r in await q.get(limit=10)] == [0, 1, 2]  # still reads

    run(main())


def test_close_raises_a_refusal_and_closes(d: HttpDispatch, qname: str) -> None:
    """A buffered batch the server refuses is raised by ``close()`` (as by ``flush()``),
    never dropped silently; nothing is left buffered, so the queue is closed."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        await q.put({"a": 1})
        await q.flush()
        await q.put({"a": "s"})  # a string into the int64 column
        with pytest.raises(IncompatibleTypeError):
            q.close()
        assert q._closed and q._buffer == []
        q.close()  # nothing left: no error

    run(main())


def test_close_while_a_send_is_in_flight_raises_and_loses_nothing(d: HttpDispatch, qname: str) -> None:
    """A ``close()`` in a coroutine while a background auto-flush's send is held (by
    back-pressure or a slow server) raises and changes nothing; the send then finishes and
    every record is there. Before, close() saw nothing buffered, closed the queue, and the
    send, cancelled when the loop ended, put its batch back where nothing sent it again."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0.01)
        gate = asyncio.Event()
        entered = asyncio.Event()
        post = q._post_records

        async def held(params: dict[str, str], body: dict[str, Any], wait: float) -> Any:
            entered.set()
            await gate.wait()
            return await post(params, body, wait)

        q._post_records = held  # type: ignore[method-assign]
        await q.put({"i": 1})
        await asyncio.wait_for(entered.wait(), 30)
        with pytest.raises(RuntimeError, match="in flight"):
            q.close()
        assert not q._closed
        gate.set()
        await q.flush()
        q.close()
        assert q._closed
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [1]

    run(main())


def test_close_without_a_running_loop(d: HttpDispatch, qname: str) -> None:
    """``close()`` after ``asyncio.run`` returned (the usual end of a program) sends what
    the object still buffers."""

    async def fill() -> Queue:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        await q.put({"i": 7})
        return q

    q = run(fill())
    assert len(q) == 1
    q.close()

    async def read() -> list[dict[str, Any]]:
        return await Queue(qname, dispatch=d).get(limit=10)

    assert run(read()) == [{"i": 7}]


def test_clear_of_a_queue_never_put_to_is_a_no_op(d: HttpDispatch, qname: str) -> None:
    """persisting's ``clear(indexes)`` (our ``clear_samples``) on a queue nothing was put to
    does nothing, as persisting's does, and ``clear_partition`` (fails on the old code:
    ``clear_samples`` raised NotFoundError); an empty list or an index never put is
    ignored; a buffered record is sent first, so its index can be cleared. Indexes do not
    shift: a read from offset 2 after clearing 1 starts at the record put third."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        await q.clear([0])
        await q.clear_samples([3], partition_id="p")
        assert await q.get(limit=5, offset=0) == []
        await q.put_batch([{"i": i} for i in range(4)])
        await q.clear([])
        await q.clear([1, 99])  # 1 is buffered: sent first, then cleared
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [0, 2, 3]
        assert [r["i"] for r in await q.get(limit=10, offset=2)] == [2, 3]
        with pytest.raises(InvalidError):
            await q.clear([-1])

    run(main())


def test_writer_shares_the_queues_buffer(d: HttpDispatch, qname: str) -> None:
    """persisting's ``q.writer()``: put, put_batch (a positional partition) and flush on
    the queue's own buffer, in order with the queue's puts."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        w = q.writer()
        assert w.queue is q
        await w.put({"i": 0})
        await q.put({"i": 1})
        await w.put_batch([{"i": 2}, {"i": 3}], "default")
        assert len(q._buffer) == 4
        await w.flush()
        assert q._buffer == []
        assert [r["i"] for r in await Queue(qname, dispatch=d).get(limit=10)] == [0, 1, 2, 3]

    run(main())


def test_persisting_s_queuewriter_and_queuereader_names_are_ours(d: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """persisting 0.3.0 exports ``QueueWriter`` and ``QueueReader`` from its top level (in
    its ``__all__``, as ``Queue.writer()``'s and ``Queue.reader()``'s types, made as
    ``QueueWriter(q)`` and ``QueueReader(q)``): ours are the same classes, ``Writer`` and
    ``Reader``, under those names too, so a program's imports, annotations and isinstance
    checks carry over (fails on the old code: ImportError)."""
    import lakeshore.data as data
    from lakeshore.data import QueueReader, QueueWriter

    assert QueueWriter is data.Writer and QueueReader is data.Reader
    assert {"QueueWriter", "QueueReader"} <= set(data.__all__)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        w = QueueWriter(q)
        assert isinstance(q.writer(), QueueWriter) and w.queue is q
        await w.put({"i": 0})
        await w.flush()
        r = QueueReader(q)  # persisting's constructor: the queue alone, rank as q.reader()'s
        assert isinstance(q.reader(), QueueReader) and (r.queue, r.rank, r.world_size) == (q, 0, 1)
        assert [x["i"] for x in await r.get(limit=10)] == [0]
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert (QueueReader(q).rank, QueueReader(q).world_size) == (1, 2)
        assert (QueueReader(q, 0, 3).rank, QueueReader(q, 0, 3).world_size) == (0, 3)
        with pytest.raises(InvalidError):
            QueueReader(q, 2, 2)

    run(main())


def test_stream_from_an_offset_leaves_the_cursor(d: HttpDispatch, qname: str) -> None:
    """persisting's ``stream(limit, offset, wait, timeout)``, positionally too: from the
    offset, this object's cursor untouched; a negative offset is InvalidError naming it.
    A stream sends this object's buffered records first, as get does (fails on the old
    code: a stream without wait missed them)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100, auto_flush_interval_sec=0)
        await q.put_batch([{"i": i} for i in range(5)])
        got = [[r["i"] for r in b] async for b in q.stream(2, 1, False)]
        assert got == [[1, 2], [3, 4]]
        assert [[r["i"] for r in b] async for b in q.stream(offset=9, wait=False)] == []
        assert [r["i"] for r in await q.get(limit=10)] == [0, 1, 2, 3, 4]  # the cursor was at 0
        assert [b async for b in q.stream(wait=False)] == []  # the cursor is at the end now
        with pytest.raises(InvalidError) as e:
            async for _ in q.stream(offset=-1, wait=False):
                pass
        assert e.value.field == "offset"

    run(main())
