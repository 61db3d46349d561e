"""Weight versions, staleness-bounded reads, back-pressure and leased reads of the data
queue (lakeshore.data; Go: persist/rl.go) on every plane."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError, QueueFullError, Scope
from lakeshore.data import TARGET_WEIGHT_VERSION, WEIGHT_VERSION, Backpressure, Queue
from lakeshore.rl import Weights

pytest.importorskip("pyarrow")



def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_versions_and_staleness(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d)
        assert await q.version() == 0
        for v in range(3):
            await q.put_batch([{"x": 10 * v + i} for i in range(4)], weight_version=v)
        await q.flush()
        await q.set_version(2)
        await q.set_version(2)  # the same version: a no-op
        with pytest.raises(InvalidError):
            await q.set_version(1)
        assert await q.version() == 2
        r = q.reader()
        b = await r.get_batch(["x", WEIGHT_VERSION], 8, "train", max_staleness=1, wait=False)
        assert sorted(b[WEIGHT_VERSION].tolist()) == [1] * 4 + [2] * 4
        st = await q.stats()
        assert st["stale_dropped"] == 4 and st["weight_version"] == 2
        # keep: stale records stay for a replay reader.
        m = await r.get_meta(["x"], 12, "fresh", max_staleness=0, stale_policy="keep", wait=False)
        assert m.size == 4
        replay = await r.get_meta(["x"], 12, "fresh", wait=False)
        assert replay.size == 8
        with pytest.raises(InvalidError):
            await r.get_meta(["x"], 1, "t", stale_policy="drop", wait=False)
        with pytest.raises(InvalidError):
            await r.get_meta(["x"], 1, "t", max_staleness=-1, wait=False)
        with pytest.raises(InvalidError):
            await q.put({"x": 1}, weight_version=-1)

    run(main())


def test_a_null_weight_version_is_no_version(d: HttpDispatch, qname: str) -> None:
    """A record's weight_version (or target_weight_version) of None is no version, as the
    field left out and the keyword weight_version=None: the put is taken (it was refused
    as invalid) and the record has no version."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put({"x": 1, WEIGHT_VERSION: None, "target_weight_version": None})
        await q.put({"x": 2}, weight_version=None)
        await q.flush()
        rows = await q.get(10, 0)
        assert [r["x"] for r in rows] == [1, 2]
        assert [r.get(WEIGHT_VERSION) for r in rows] == [None, None]
        assert (await q.stats())["len"] == 2

    run(main())


def test_backpressure_reject_and_block(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000, auto_flush_interval_sec=0,
                  backpressure=Backpressure(task_name="train", max_unconsumed=4))
        await q.put_batch([{"x": i} for i in range(3)])
        await q.flush()
        await q.put_batch([{"x": i} for i in range(2)])
        with pytest.raises(QueueFullError):
            await q.flush()
        other = Queue(qname, dispatch=d)
        st = await other.stats()
        assert st["len"] == 3  # refused: nothing written, the batch stays buffered
        r = other.reader()
        assert (await r.get_meta(["x"], 2, "train", wait=False)).size == 2
        await q.flush()  # the buffered batch goes now
        assert (await other.stats())["len"] == 5

        blocking = Queue(qname, dispatch=d, batch_size=1000, auto_flush_interval_sec=0,
                         backpressure=Backpressure(task_name="train", max_unconsumed=4, on_full="block", timeout=60))
        await blocking.put_batch([{"x": i} for i in range(2)])
        put = asyncio.ensure_future(blocking.flush())
        await asyncio.sleep(0.2)
        assert not put.done()  # held by the trainer's unconsumed records
        assert (await r.get_meta(["x"], 3, "train", wait=False)).size == 3
        await asyncio.wait_for(put, 60)  # woken by the consumption
        assert (await other.stats())["len"] == 7

        ahead = Queue(qname, dispatch=d, backpressure=Backpressure(max_ahead=1))
        await ahead.put({"x": 1}, weight_version=0, target_weight_version=2, partition_id="v")
        with pytest.raises(QueueFullError):
            await ahead.flush()
        await q.set_version(1)
        await ahead.flush()

    run(main())


def test_blocked_put_waits_its_whole_timeout_past_the_servers_cap(d: HttpDispatch, qname: str) -> None:
    # The test server caps one long-poll at 10 s (conftest's --long-poll-max): a put blocked
    # for 15 s is sent again (its put id) until the trainer makes room at 11 s. On the old
    # code the flush raised QueueFullError once the server's cap passed.
    async def main() -> None:
        bp = Backpressure(task_name="train", max_unconsumed=1, on_full="block", timeout=25)
        q = Queue(qname, dispatch=d, batch_size=1000, auto_flush_interval_sec=0, backpressure=bp)
        await q.put({"x": 0})
        await q.flush()
        await q.put({"x": 1})
        put = asyncio.ensure_future(q.flush())
        r = Queue(qname, dispatch=d).reader()
        await asyncio.sleep(11)
        assert not put.done(), put
        assert (await r.get_meta(["x"], 1, "train", wait=False)).size == 1
        await asyncio.wait_for(put, 20)
        assert (await Queue(qname, dispatch=d).stats())["len"] == 2  # put once

    run(main())


def test_leased_reads_and_commit(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"x": i} for i in range(6)])
        await q.flush()
        r = q.reader()
        a = await r.get_batch(["x"], 2, "train", lease=3600, wait=False)
        await r.commit(a.meta)
        # A lease the next round trip surely falls inside, short enough to wait out below.
        b = await r.get_meta(["x"], 2, "train", lease=3, wait=False)
        assert b.global_indexes == [2, 3]
        c = await r.get_meta(["x"], 4, "train", lease=3600, wait=False)
        assert c.global_indexes == [4, 5]  # b is held while leased
        again: list[int] = []
        deadline = time.monotonic() + 30  # well past b's 3 s lease
        while time.monotonic() < deadline:
            again = (await r.get_meta(["x"], 4, "train", lease=3600, wait=False)).global_indexes
            if again:
                break
            await asyncio.sleep(0.05)
        assert again == [2, 3]  # b's lease expired uncommitted; a never comes back
        assert await q.consumed("train") == 2

    run(main())


def test_commit_of_no_batchmeta_is_a_typed_error_changing_nothing(d: HttpDispatch, qname: str) -> None:
    """``reader.commit(None)`` (a new user's slip) raised AttributeError from inside the
    call; now any ``meta`` that is not a BatchMeta, to commit or get_data, is an
    InvalidError naming ``meta`` and what is allowed, and nothing is consumed."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"x": i} for i in range(4)])
        await q.flush()
        r = q.reader()
        batch = await r.get_batch(["x"], 2, "train", lease=3600, wait=False)
        for bad in (None, batch, "0", [0, 1]):
            with pytest.raises(InvalidError) as e:
                await r.commit(bad)  # type: ignore[arg-type]
            assert e.value.field == "meta"
            assert "BatchMeta" in str(e.value) and "get_meta" in str(e.value)
            with pytest.raises(InvalidError) as e:
                await r.get_data(bad)  # type: ignore[arg-type]
            assert e.value.field == "meta"
        with pytest.raises(InvalidError, match=r"pass its \.meta"):
            await r.commit(batch)  # type: ignore[arg-type]
        assert await q.consumed("train") == 0, "a refused commit consumed nothing"
        await r.commit(batch.meta)
        assert await q.consumed("train") == 2

    run(main())


@pytest.mark.parametrize(
    "kwargs",
    [{"task_name": "train"}, {"task_name": "train", "max_unconsumed": 0}, {"task_name": "train", "on_full": "block"}, {}],
)
def test_a_backpressure_bounding_nothing_is_refused(kwargs: dict[str, Any]) -> None:
    """``Backpressure(task_name=...)`` with no bound was taken and held nothing back; now
    it is an InvalidError naming ``max_unconsumed`` and saying which bounds to give, as
    Go's persist.CheckAdmission, the HTTP put and ``data put`` refuse it."""
    with pytest.raises(InvalidError) as e:
        Backpressure(**kwargs)
    assert e.value.field == "max_unconsumed"
    assert "max_unconsumed > 0" in str(e.value) and "max_ahead ≥ 0" in str(e.value)
    assert Backpressure(task_name="train", max_ahead=0).params()["max_ahead"] == "0", "max_ahead 0 is a bound"


def test_backpressure_refused_put_does_not_block_reads(d: HttpDispatch, qname: str) -> None:
    # A trainer holding one handle: a put refused by back-pressure stays buffered, but
    # the handle's reads go on, and the read that frees room lets the next flush go.
    async def main() -> None:
        for on_full in ("reject", "block"):
            name = f"{qname}-{on_full}"
            q = Queue(name, dispatch=d, batch_size=1000, auto_flush_interval_sec=0,
                      backpressure=Backpressure(task_name="train", max_unconsumed=2, on_full=on_full, timeout=0.2))
            await q.put_batch([{"x": 0}, {"x": 1}])
            await q.flush()
            await q.put({"x": 2})
            with pytest.raises(QueueFullError):
                await q.flush()
            b = await asyncio.wait_for(q.reader().get_batch(["x"], 2, "train"), 10)
            assert b["x"].tolist() == [0, 1]
            assert (await q.stats())["len"] == 2  # still refused: buffered, not written
            await q.flush()  # the read freed room: the buffered record goes now
            assert (await q.stats())["len"] == 3
            b = await q.get_batch(["x"], 2, "train")
            assert b["x"].tolist() == [2]

    run(main())


def test_queue_full_from_put_says_the_records_stay_buffered(d: HttpDispatch, qname: str) -> None:
    """QueueFullError from put() carries a note that its records stay buffered and go
    with the next send, so they must not be put again (found by a trial: a producer that
    put again on QueueFullError wrote duplicates)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=2, auto_flush_interval_sec=0,
                  backpressure=Backpressure(task_name="train", max_unconsumed=2))
        await q.put_batch([{"x": 0}, {"x": 1}])
        with pytest.raises(QueueFullError) as e:
            await q.put_batch([{"x": 2}, {"x": 3}])
        notes = " ".join(getattr(e.value, "__notes__", []))
        assert "stay buffered" in notes and "do not put them again" in notes and "2 records" in notes, notes
        assert len(q._unsent) == 1
        b = await q.reader().get_batch(["x"], 4, "train")
        assert b["x"].tolist() == [0, 1]
        await q.flush()  # the held records go now, once
        b = await q.reader().get_batch(["x"], 4, "train")
        assert b["x"].tolist() == [2, 3]

    run(main())


def test_bounds_are_typed_errors_naming_the_field(d: HttpDispatch, qname: str) -> None:
    # Both bounds refuse a negative value alike; max_unconsumed names the missing task;
    # every lease out of range gets the one message.
    # (Refused by the Backpressure itself since it checks its fields when made.)
    bounds: tuple[tuple[dict[str, Any], str], ...] = (
        ({"task_name": "t", "max_unconsumed": -1}, "max_unconsumed"),
        ({"max_ahead": -1}, "max_ahead"),
        ({"max_unconsumed": 1}, "task_name"),
    )
    for kwargs, field in bounds:
        with pytest.raises(InvalidError) as e:
            Queue(qname, dispatch=d, backpressure=Backpressure(**kwargs))
        assert field in str(e.value)

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"x": 1}])
        await q.flush()
        messages = set()
        for lease in (86401.0, 90000.0, 1e20):
            with pytest.raises(InvalidError) as e:
                await q.reader().get_batch(["x"], 1, "train", lease=lease)
            messages.add(str(e.value).replace(repr(lease), "L").replace(f"{lease:g}", "L"))
        assert len(messages) == 1, messages
        assert "lease" in messages.pop()

    run(main())


def test_non_integer_counts_and_bad_versions_are_invalid_naming_the_field(d: HttpDispatch, qname: str) -> None:
    """max_staleness=1.5 and batch_size=2.9 are refused, not truncated; lease="5" is an
    InvalidError, not a bare TypeError; set_version(-1) says ≥ 0 and set_version(2**63)
    names version (found by a trial)."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"x": 1}, {"x": 2}, {"x": 3}])
        await q.flush()
        r = q.reader()
        for kw, field in (
            ({"max_staleness": 1.5}, "max_staleness"),
            ({"lease": "5"}, "lease"),
            ({"batch_index": 1.0}, "batch_index"),
        ):
            with pytest.raises(InvalidError) as e:
                await r.get_batch(["x"], 2, "t", **kw)
            assert e.value.field == field and field in str(e.value)
        with pytest.raises(InvalidError) as e:
            await r.get_meta(["x"], 2.9, "t")  # type: ignore[arg-type]
        assert e.value.field == "batch_size"
        assert await q.consumed("t") == 0  # nothing was handed out
        for v in (-1, 2**63, 1.5):
            with pytest.raises(InvalidError) as e:
                await q.set_version(v)  # type: ignore[arg-type]
            assert e.value.field == "version", e.value
            assert "current" not in str(e.value)
        with pytest.raises(InvalidError) as e:
            await q.put({"x": 4}, weight_version=2**63)
        assert e.value.field == "weight_version"
        await q.set_version(1)
        assert await q.version() == 1

    run(main())


def test_numpy_integer_versions_are_taken_by_every_version_argument(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    """A version that is a numpy integer — what a batch's weight_version column holds
    (``batch[WEIGHT_VERSION].max()``) — is an integer to every argument that takes a
    version, as it was to set_version and max_staleness: put/put_batch's
    weight_version and target_weight_version, put_partial, patch_partial and Weights'
    publish/exists/load. Before 2026-12-07 put(weight_version=np.int64(3)) was refused as
    "want an integer", Weights.publish(np.int64(3), …) too, and patch_partial truncated a
    float version (2.5 → 2) instead of refusing it."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put({"x": 1}, weight_version=np.int64(1))
        await q.put_batch([{"x": 2}], weight_version=np.int32(1), target_weight_version=np.uint8(2))
        await q.flush()
        idx = await q.put_partial([{"x": 3}], np.int64(1))
        await q.patch_partial(idx, None, np.int64(2), complete=True)
        with pytest.raises(InvalidError) as e:
            await q.patch_partial(idx, None, 2.5)  # type: ignore[arg-type]
        assert e.value.field == "weight_version", e.value
        for bad in (np.int64(-1), True):
            with pytest.raises(InvalidError) as e:
                await q.put({"x": 4}, weight_version=bad)  # type: ignore[arg-type]
            assert e.value.field == "weight_version", e.value
        rows = await q.get(10)
        assert [(r["x"], r[WEIGHT_VERSION], r.get(TARGET_WEIGHT_VERSION)) for r in rows] == [(1, 1, None), (2, 1, 2), (3, 1, None)]
        w = Weights(q, Scope(qname, store=str(tmp_path)))
        await w.publish(np.int64(3), {"bias": 1.0})
        assert w.exists(np.int64(3)) and w.load(np.int64(3)) == {"bias": 1.0}
        assert await q.version() == 3

    run(main())


def test_integers_beyond_64_bits_are_invalid_naming_the_field(d: HttpDispatch, qname: str) -> None:
    """An int no msgpack integer holds (batch_size=10**30, an index of 10**30, a rank of
    10**30) raises InvalidError naming the field, as one of 2**63 does (the server's words,
    "the number is out of range"); before, msgpack's bare OverflowError ("Integer value out
    of range") came out of the request's encoding."""

    async def main() -> None:
        q = Queue(qname, dispatch=d)
        await q.put_batch([{"x": 1}, {"x": 2}])
        await q.flush()
        r = q.reader()
        for big in (2**63, 10**30):
            with pytest.raises(InvalidError) as e:
                await r.get_meta(["x"], big, "t")
            assert e.value.field == "batch_size" and "out of range" in str(e.value), e.value
        with pytest.raises(InvalidError) as e:
            await q.mark_consumed("t", global_indexes=[0, 10**30])
        assert e.value.field == "indexes[1]" and "out of range" in str(e.value), e.value
        with pytest.raises(InvalidError) as e:
            await q.reader(10**30, world_size=10**31).get_batch(["x"], 1, "t")
        assert "out of range" in str(e.value), e.value
        assert await q.consumed("t") == 0  # nothing was handed out or marked

    run(main())


def test_a_waiting_reads_timeout_of_zero_nan_or_below_zero_never_waits_the_servers_default(d: HttpDispatch, qname: str) -> None:
    """``timeout=0`` is one attempt (TimeoutError at once when no full batch is ready), a
    NaN or negative timeout is refused: found by a trial, 0 and -1 were sent as a wait of
    0, which the server reads as its 30 s default, and NaN asked again for ever."""
    from lakeshore import TimeoutError as LakeshoreTimeout

    async def main() -> None:
        q = Queue(qname, storage_path="./data", dispatch=d)
        await q.put({"x": 1})
        await q.flush()
        r = q.reader()
        for read in (r.get_meta, r.get_batch):
            t0 = time.monotonic()
            with pytest.raises(LakeshoreTimeout):
                await asyncio.wait_for(read(["x"], 5, "t", timeout=0), 20)
            assert time.monotonic() - t0 < 5
            for bad in (float("nan"), -1.0):
                with pytest.raises(InvalidError) as e:
                    await asyncio.wait_for(read(["x"], 5, "t", timeout=bad), 20)
                assert e.value.field == "timeout"
        assert (await r.get_meta(["x"], 1, "t", timeout=0)).global_indexes == [0]  # nothing was handed out

    asyncio.run(main())


@pytest.mark.parametrize("bad", [-1.0, float("nan"), 0, 0.0, "5"])
def test_a_blocking_backpressures_timeout_is_checked_when_the_queue_is_made(d: HttpDispatch, qname: str, bad: Any) -> None:
    """A blocking Backpressure's timeout that is not seconds > 0 is refused by the Queue's
    constructor, with the other bad arguments of a Backpressure (found by a trial: -1
    was taken, then the server refused every batch, which was dropped; NaN failed each
    flush with a bare ValueError; 0 was sent as a wait of 0, which the server reads as its
    default wait, so a put blocked up to 30 s)."""
    with pytest.raises(InvalidError) as e:
        Queue(qname, storage_path="./data", dispatch=d, backpressure=Backpressure(task_name="t", max_unconsumed=1, on_full="block", timeout=bad))
    assert e.value.field == "timeout"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"task_name": "train", "max_unconsumed": 16, "on_full": "wait"}, "on_full"),
        ({"max_unconsumed": 16}, "task_name"),
        ({"task_name": "train", "max_unconsumed": -2}, "max_unconsumed"),
        ({"task_name": "train", "max_unconsumed": 2, "on_full": "block", "timeout": -1}, "timeout"),
    ],
)
def test_a_bad_backpressure_is_refused_where_it_is_made(kwargs: dict[str, Any], field: str) -> None:
    """A Backpressure with a bad field raises when it is made, naming the field (found by
    a new user's trial: ``Backpressure(on_full="wait")`` was taken, and so was a
    ``@rollout`` given it, whose every job then ran its generator and failed at the put
    with the InvalidError, three attempts each; only a Queue's constructor checked it)."""
    with pytest.raises(InvalidError) as e:
        Backpressure(**kwargs)
    assert e.value.field == field
