"""The Queue API page's snippets (the user-facing API documents), run as written except for the
import (``import lakeshore as dls``) and a worker thread that answers the jobs they wait for.

The Task queue page's worker snippets (``run_worker(q, once=True)``, ``@udf``, ``_key=``) are
at the end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import lakeshore as dls
from lakeshore import DispatchError, Queue, SyncQueue

from .conftest import Server


@pytest.fixture
def plane(server: Server, lakeshore_bin: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dls.Dispatch]:
    """``dls.Dispatch(":memory:")`` made the process default, as the seed's tests do."""
    monkeypatch.setenv("LAKESHORE_BIN", lakeshore_bin)
    d = dls.Dispatch(":memory:")
    monkeypatch.setattr(dls.dispatch, "_default", d)
    yield d
    d.close()


def echo_worker(name: str, n: int, fn: Any = lambda p: p) -> threading.Thread:
    """A worker thread that answers n jobs of queue name with fn(payload)."""

    def run() -> None:
        q = SyncQueue(name)
        for _ in range(n):
            with q.working(wait=30) as job:
                assert job is not None
                payload = job.payload
                job.result = payload() if isinstance(payload, dls.Thunk) else fn(payload)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def finish(w: threading.Thread) -> None:
    """Wait for a worker thread to return. The last result can arrive before the worker's
    ack call has returned: closing the plane under it (the fixture's teardown) would fail
    that call in the thread."""
    w.join(60)
    assert not w.is_alive(), "the worker thread did not finish its jobs"


def test_blocking_surface(plane: dls.Dispatch) -> None:
    w = echo_worker("gpu", 1, lambda p: {"got": p})
    q = SyncQueue("gpu")  # blocking surface
    inv = q.submit({"x": 1}, key="scene7/x")  # -> durable string id
    val = q.result(inv, timeout=60.0)
    assert val == {"got": {"x": 1}}
    finish(w)


def test_async_surface(plane: dls.Dispatch) -> None:
    w = echo_worker("gpu", 1)

    async def main() -> list[Any]:
        q = Queue("gpu")  # async surface
        inv = await q.submit({"x": 1})
        val = await q.result(inv)
        frames = [frame async for frame in q.stream(inv)]
        assert val == {"x": 1}
        return frames

    assert asyncio.run(main()) == []
    finish(w)


def test_producer_verbs(plane: dls.Dispatch) -> None:
    q = SyncQueue("gpu")
    inv = q.submit({"seed": 42})
    assert q.submit({"seed": 42}, key="sweep/42") == q.submit({"seed": 42}, key="sweep/42")  # idempotent per queue
    q.submit({"seed": 42}, priority=9.0)
    thunk_inv = q.submit(dls.thunk(lambda: 40 + 2))  # ad-hoc callable, by value
    assert len(q) == 4 and q.count() == 4
    assert q.cancel(inv) is True and q.count("cancelled") == 1
    finish(echo_worker("gpu", 3))
    assert q.result(thunk_inv) == 42


def test_call(plane: dls.Dispatch) -> None:
    w = echo_worker("gpu", 1, lambda p: "hi " + p["prompt"])
    q = SyncQueue("gpu")
    answer = q.call({"prompt": "hello"}, timeout=10.0)
    assert answer == "hi hello"
    finish(w)


def test_kinds(plane: dls.Dispatch) -> None:
    for kind in ("fifo", "priority", "filo", "boltzmann"):
        SyncQueue("gpu", kind=kind)
    with pytest.raises(DispatchError, match="unknown queue kind 'lifo'"):
        SyncQueue("gpu", kind="lifo")


def test_worker_verbs_and_streaming(plane: dls.Dispatch) -> None:
    q = SyncQueue("gpu")
    inv = q.submit({"frames": 3})
    job = q.claim()
    assert job is not None and job.id == inv and job.attempt == 1 and job.queue == "gpu"
    for i in range(job.payload["frames"]):
        assert q.post(inv, {"manifest": i}) == i
    q.post(inv, None, final=True)
    manifests = [manifest for manifest in q.stream(inv)]  # SyncQueue -> Iterator
    assert manifests == [{"manifest": 0}, {"manifest": 1}, {"manifest": 2}]
    with q.working() as job:
        assert job is None  # yields None when the queue is empty


def test_topics(plane: dls.Dispatch) -> None:
    q = SyncQueue("gpu")
    t = q.topic("progress")
    assert q.topic().name.startswith("topic-")  # auto-named "topic-<ULID>"
    t.post({"step": 1})  # -> seq
    t.post(None, final=True)  # END frame closes the topic
    assert t.listen(since=-1, timeout=5.0) == {"step": 1}
    assert [v for v in t.stream(since=-1, timeout=5.0)] == [{"step": 1}]  # values until END


def test_fan_out(plane: dls.Dispatch) -> None:
    w = echo_worker("gpu", 20, lambda p: p["seed"] * 2)

    async def main() -> list[Any]:
        q = Queue("gpu")
        ids = [await q.submit({"seed": i}) for i in range(20)]
        return await asyncio.gather(*(q.result(i, timeout=300) for i in ids))

    assert asyncio.run(main()) == [2 * i for i in range(20)]
    finish(w)


def test_task_queue_page_running_a_worker(lakeshore_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # "The whole plane fits in one process when you want to test."
    monkeypatch.setenv("LAKESHORE_BIN", lakeshore_bin)
    q = dls.Dispatch(":memory:")  # a full plane, in-process

    @dls.udf(queue="f", dispatch=q)
    def f(x: int) -> int:
        return x + 1

    inv = f.submit(x=1)  # -> "01JD2K7Q...": a string, persist it anywhere
    assert isinstance(inv, str) and len(inv) == 26
    dls.run_worker(q, once=True)  # drain exactly one job and return
    result = f.queue().result(inv)  # poll from this process, or any other, later
    assert result == 2
    # Idempotent submits: the same key returns the existing invocation id.
    assert f.submit(x=1, _key="nightly-2026-08-06") == f.submit(x=1, _key="nightly-2026-08-06")
    q.close()
