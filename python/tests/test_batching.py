"""Calls made at once are coalesced into batched requests (submits, settles, claims):
every caller still gets its own answer, a bad item fails only its own caller, and a
caller that stops waiting leaves nothing claimed behind."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lakeshore import HttpDispatch, Queue, SyncQueue, errors, run_worker


def test_submits_from_many_threads_each_get_their_id(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    ids: list[str] = []
    lock = threading.Lock()

    def run(t: int) -> None:
        for i in range(40):
            inv = q.submit({"t": t, "i": i})
            with lock:
                ids.append(inv)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 640 and len(set(ids)) == 640
    assert q.count("queued") == 640
    seen = set()
    while (job := q.claim()) is not None:
        seen.add((job.payload["t"], job.payload["i"]))
        q.ack(job)
    assert seen == {(t, i) for t in range(16) for i in range(40)}


def test_one_bad_submit_fails_only_its_caller(dispatch: HttpDispatch, qname: str) -> None:
    q = Queue(qname, dispatch=dispatch)

    async def main() -> list[object]:
        # The bad item is refused by the server (a delay over its limit), not by the client.
        subs = [q.submit(i) for i in range(20)] + [q.submit(99, delay=10**9)]
        return await asyncio.gather(*subs, return_exceptions=True)

    out = asyncio.run(main())
    assert all(isinstance(x, str) for x in out[:20]), out
    assert isinstance(out[20], errors.InvalidError), out[20]
    assert q.sync.count("queued") == 20


def test_concurrent_keyed_submits_agree(dispatch: HttpDispatch, qname: str) -> None:
    q = Queue(qname, dispatch=dispatch)

    async def main() -> list[str]:
        return await asyncio.gather(*(q.submit(i, key=f"k{i % 3}") for i in range(30)))

    ids = asyncio.run(main())
    assert len(set(ids)) == 3
    assert q.sync.count("queued") == 3


def test_settles_at_once_each_land(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    invs = q.submit_many(list(range(24)))
    jobs = [q.claim() for _ in range(24)]
    assert all(j is not None for j in jobs)
    barrier = threading.Barrier(24)

    def settle(j: object) -> None:
        barrier.wait()
        assert j is not None
        q.ack(j, j.payload * 2)  # type: ignore[attr-defined]

    threads = [threading.Thread(target=settle, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [q.result(inv, timeout=30) for inv in invs] == [i * 2 for i in range(24)]


def test_a_stale_settle_in_a_batch_fails_alone(dispatch: HttpDispatch, qname: str) -> None:
    q = Queue(qname, dispatch=dispatch)
    q.sync.submit_many([1, 2])
    a = q.sync.claim()
    b = q.sync.claim()
    assert a is not None and b is not None
    assert q.sync.kill(b.id)

    async def main() -> list[object]:
        return await asyncio.gather(q.ack(a, "ok"), q.ack(b, "late"), return_exceptions=True)

    out = asyncio.run(main())
    assert out[0] is None
    assert isinstance(out[1], errors.DispatchError), out[1]
    assert q.sync.result(a.id, timeout=30) == "ok"


def test_a_cancelled_claim_leaves_no_job_held(dispatch: HttpDispatch, qname: str) -> None:
    q = Queue(qname, dispatch=dispatch)

    async def main() -> None:
        waiting = asyncio.ensure_future(q.claim(wait=5.0))
        await asyncio.sleep(0.3)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
    inv = q.sync.submit("x")
    # Claimable at once by another caller: the cancelled long-poll did not take it.
    deadline = time.monotonic() + 30
    job = None
    while job is None and time.monotonic() < deadline:
        job = q.sync.claim(wait=1.0)
    assert job is not None and job.id == inv


def test_a_cancelled_claim_racing_a_submit_leaves_no_job_held(dispatch: HttpDispatch, qname: str) -> None:
    """100 times: a long-poll claim is cancelled while a submit lands, both let go at the
    same moment with their own jitter of up to 2 ms. Whichever wins, the job is claimable
    by a live caller at once: the cancelled claim half-closes its connection and reads the
    answer, and a job in it is given back (not held until its lease expires)."""
    import random

    async def main() -> None:
        won = 0
        for i in range(100):
            q = Queue(f"{qname}-{i}", dispatch=dispatch)
            waiting = asyncio.ensure_future(q.claim(wait=5.0))
            await asyncio.sleep(random.uniform(0.005, 0.015))  # most likely parked on the server by now

            async def cancel() -> None:
                await asyncio.sleep(random.uniform(0, 0.002))
                waiting.cancel()

            async def submit() -> str:
                await asyncio.sleep(random.uniform(0, 0.002))
                return await q.submit("x")

            _, inv = await asyncio.gather(cancel(), submit())
            try:
                job = await waiting
            except asyncio.CancelledError:
                job = None
            if job is not None:  # the claim won before it was cancelled: a live caller
                won += 1
                assert job.id == inv
                await q.ack(job, None)
                continue
            start = time.monotonic()
            again = await q.claim(wait=10.0)
            assert again is not None and again.id == inv, f"iteration {i}: the job stays held by the cancelled claim"
            assert time.monotonic() - start < 10.0
            await q.ack(again, None)
        print(f"the claim won the race {won} times of 100")

    asyncio.run(main())


def test_a_worker_runs_every_job_once_with_batched_claims(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    invs = q.submit_many(list(range(60)))
    ran: list[int] = []
    stop = threading.Event()

    def body(i: int) -> int:
        ran.append(i)
        return i + 1

    def watch() -> None:
        deadline = time.monotonic() + 60
        while q.count("succeeded") < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    run_worker(dispatch, queues={qname: body}, concurrency=8, stop=stop, handle_signals=False)
    assert sorted(ran) == list(range(60))
    assert [q.result(inv, timeout=30) for inv in invs] == [i + 1 for i in range(60)]
