"""What a newcomer to flow control tripped on (issue 27 from Python): a ``@udf`` submit takes
the dedup windows as it takes the concurrency key, a window out of range names the plane's
bound (366 days), not what a duration holds, and ``RateLimited`` raised in ``working()`` hands
the job back as under ``run_worker``."""

from __future__ import annotations

import asyncio

import pytest

from lakeshore import Admission, HttpDispatch, InvalidError, Queue, RateLimited, SyncQueue, udf


def test_udf_submit_takes_the_dedup_windows(every_plane: HttpDispatch, qname: str) -> None:
    @udf(queue=qname, dispatch=every_plane)
    def embed(text: str) -> int:
        return len(text)

    q = SyncQueue(qname, dispatch=every_plane)
    first = embed.submit(text="a", _key="u", _unique_for=30, _concurrency_key="tenant-1")
    assert embed.submit(text="b", _key="u", _unique_for=30) == first, "within the window: the first id"
    assert q.get(first).payload == {"text": "a"} and q.get(first).concurrency_key == "tenant-1"
    waiting = embed.submit(text="c", _key="d", _debounce=30)
    assert embed.submit(text="d", _key="d", _debounce=30) == waiting, "while it waits: the same id"
    assert q.get(waiting).payload == {"text": "d"}, "the last payload wins"
    with pytest.raises(InvalidError) as e:
        embed.submit(text="e", _unique_for=30)  # a window needs a key
    assert e.value.field == "unique_for"
    with pytest.raises(InvalidError) as e:
        embed.submit(text="f", _key="both", _unique_for=30, _debounce=30)
    assert e.value.field == "debounce"
    assert q.count("queued") == 2, "the refused submits stored nothing"


@pytest.mark.parametrize("field", ["delay", "unique_for", "debounce"])
def test_a_window_out_of_range_names_the_plane_bound(dispatch: HttpDispatch, qname: str, field: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    for bad in (-1, 366 * 24 * 3600 + 1, 1e9):
        with pytest.raises(InvalidError, match=rf"invalid {field} .*want seconds from 0 to 31622400 \(366 days\)") as e:
            q.submit(1, key="k", **{field: bad})
        assert e.value.field == field
        assert "292 years" not in str(e.value)
    assert q.submit(1, key="k", **{field: 366 * 24 * 3600}), "the bound itself is taken"
    assert q.count("queued") == 1


def test_a_window_under_a_nanosecond_is_refused(dispatch: HttpDispatch, qname: str) -> None:
    """A positive window, delay or attempt timeout under 1 ns (the shortest duration kept)
    is InvalidError naming the argument and the smallest value taken (1e-09), from a queue's
    submit and a ``@udf``'s, and nothing is stored. Before, ``unique_for=1e-12`` rounded to
    0 ns at the server: no window, so the key held until trimmed, silently. 1e-09 is a
    window (1 ns), as the Go SDK's ``UniqueFor: time.Nanosecond``."""

    @udf(queue=qname, dispatch=dispatch)
    def embed(text: str) -> int:
        return len(text)

    q = SyncQueue(qname, dispatch=dispatch)
    for field in ("unique_for", "debounce", "delay", "attempt_timeout"):
        for bad in (1e-12, 5e-10, 9.99e-10, 5e-324):
            with pytest.raises(InvalidError, match=rf"invalid {field} .*at least 1e-09 seconds \(1 ns\)") as e:
                q.submit(1, key="k", **{field: bad})
            assert e.value.field == field
    for field in ("unique_for", "debounce"):
        with pytest.raises(ValueError, match=r"at least 1e-09") as e:
            embed.submit(text="a", _key="k", **{f"_{field}": 1e-12})
        assert e.value.field == field  # type: ignore[attr-defined]
    with pytest.raises(InvalidError, match=r"invalid lease_ttl .*at least 1e-09") as e:
        q.claim(lease_ttl=1e-12)
    assert q.count("queued") == 0, "nothing was stored"
    first = q.submit(1, key="k", unique_for=1e-9)
    assert q.get(first).metadata["lakeshore.unique_for"] == "0.000000001", "1 ns is a window, not none"
    assert q.submit(1, key="k", unique_for=0) == first
    # A wait under 1 ns is no wait (what 0 means there), not an error: the time left to a
    # caller's deadline can come out that small.
    assert q.claim(wait=1e-12) is not None
    with pytest.raises(TimeoutError):  # checked once: it is running
        q.wait(first, timeout=1e-12)


def test_a_huge_concurrency_key_is_shown_short(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(InvalidError) as e:
        q.submit(1, concurrency_key="x" * 100_000)
    assert e.value.field == "concurrency_key"
    assert len(str(e.value)) < 200 and "use 1–256 bytes of UTF-8 without NUL" in str(e.value)


def test_rate_limited_in_working_hands_the_job_back(every_plane: HttpDispatch, qname: str) -> None:
    """``raise RateLimited`` inside ``q.working()`` is the "slow down" answer there too: the job
    is re-queued without consuming an attempt (a job of one attempt survives it) and its key
    is held back, and the block ends without the exception. It failed the job before, with
    the traceback as its error."""
    q = SyncQueue(qname, dispatch=every_plane)
    inv = q.submit({"x": 1}, concurrency_key="tenant-a", max_attempts=1)
    other = q.submit({"x": 2}, concurrency_key="tenant-a", max_attempts=1)
    with q.working(wait=5) as job:
        assert job is not None and job.id == inv
        raise RateLimited(retry_after=30, key=job.concurrency_key)
    got = q.get(inv)
    assert got.state == "queued" and got.attempt == 0, got
    assert got.error is not None and got.error["type"] == "rate_limited", got.error
    assert q.claim(wait=0.5) is None, "the key is held back: its other job waits too"
    assert q.get(other).state == "queued"
    # A plain nack of a RateLimited answers the same, and so does the async surface.
    q2 = SyncQueue(qname + "-2", dispatch=every_plane)
    inv2 = q2.submit(1, max_attempts=1)
    job2 = q2.claim(wait=5)
    assert job2 is not None
    q2.nack(job2, error=RateLimited(retry_after=30))
    assert q2.get(inv2).state == "queued" and q2.get(inv2).attempt == 0

    async def run_async() -> None:
        aq = Queue(qname + "-3", dispatch=every_plane)
        inv3 = await aq.submit(1, max_attempts=1)
        async with aq.working(wait=5) as job3:
            assert job3 is not None
            raise RateLimited(retry_after=30)
        got3 = await aq.get(inv3)
        assert got3.state == "queued" and got3.attempt == 0, got3

    asyncio.run(run_async())


def test_other_errors_in_working_still_fail_and_raise(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    inv = q.submit(1, max_attempts=1)
    with pytest.raises(ValueError):
        with q.working(wait=5):
            raise ValueError("boom")
    assert q.get(inv).state == "failed"


def test_concurrency_keys_show_the_keys_and_their_rate_wait(every_plane: HttpDispatch, qname: str) -> None:
    """A Python user sees what ``lakeshore queue get`` and ``GET …/stats`` show per key (it had
    only ``stats()``, counts by state): limits, weights, the bucket and the rate wait of a
    key a worker's "slow down" holds."""
    q = SyncQueue(qname, dispatch=every_plane)
    assert q.concurrency_keys() == []
    q.set_admission(Admission(concurrency_limit=2, concurrency_limits={"big": 5}, key_weights={"big": 3}, key_rate_limit=10))
    for _ in range(3):
        q.submit(1, concurrency_key="big")
    q.submit(1, concurrency_key="small")
    job = q.claim(wait=5)
    assert job is not None and job.concurrency_key is not None
    held = job.concurrency_key
    q.nack(job, error=RateLimited(retry_after=60, key=held))
    keys = {k.key: k for k in q.concurrency_keys()}
    assert set(keys) == {"big", "small"}, keys
    big, small = keys["big"], keys["small"]
    assert (big.limit, big.weight, big.rate_limit, big.burst) == (5, 3.0, 10.0, 10), big
    assert (small.limit, small.weight, small.running) == (2, 1.0, 0), small
    assert 50 < keys[held].rate_wait <= 60, keys[held]
    other = keys["small" if held == "big" else "big"]
    assert other.rate_wait < 1, other

    async def run_async() -> None:
        got = await Queue(qname, dispatch=every_plane).concurrency_keys()
        assert {k.key for k in got} == {"big", "small"}

    asyncio.run(run_async())
