"""Issue 27 items 1 and 3 from Python: a submit carries a concurrency key; the queue's
admission block limits the running jobs of each key and weighs the keys' shares; claims
rotate across keys so a key with most of the backlog cannot starve another."""

from __future__ import annotations

import pytest

from lakeshore import Admission, HttpDispatch, InvalidError, SyncQueue, udf


def test_concurrency_limit_and_fair_share(every_plane: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    got = q.set_admission(Admission(concurrency_limit=2, concurrency_limits={"small": 1}))
    assert got.concurrency_limit == 2 and dict(got.concurrency_limits or {}) == {"small": 1}
    for i in range(6):
        q.submit({"i": i}, concurrency_key="big")
    for i in range(3):
        q.submit({"i": i}, concurrency_key="small")
    first = q.claim(wait=5)
    second = q.claim(wait=5)
    assert first is not None and second is not None
    assert {first.concurrency_key, second.concurrency_key} == {"big", "small"}, "claims rotate across keys"
    third = q.claim(wait=5)
    assert third is not None and third.concurrency_key == "big"
    assert q.claim(wait=0) is None, "both keys are at their limits"
    assert q.count("queued") == 6
    q.ack(third, None)
    job = q.claim(wait=5)
    assert job is not None and job.concurrency_key == "big", "an ack frees its key's slot"
    assert q.get(job.id).concurrency_key == "big"


def test_empty_concurrency_key_is_none(dispatch: HttpDispatch, qname: str) -> None:
    """``concurrency_key=""`` is no key, as None, as Go's zero value, HTTP's ``""`` and the
    CLI's ``--concurrency-key ""`` (one rule, plane.ConcurrencyKeyRule). Before, Python alone
    refused it with InvalidError."""
    q = SyncQueue(qname, dispatch=dispatch)
    q.set_admission(Admission(concurrency_limit=1))
    first = q.submit(1, concurrency_key="")
    second = q.submit(2, concurrency_key="")
    assert q.get(first).concurrency_key is None and q.get(second).concurrency_key is None

    @udf(queue=qname, dispatch=dispatch)
    def work(x: int) -> int:
        return x

    assert q.get(work.submit(3, _concurrency_key="")).concurrency_key is None
    a, b = q.claim(wait=5), q.claim(wait=5)
    assert a is not None and b is not None, "jobs without a key are never limited"
    assert q.concurrency_keys() == []


def test_concurrency_key_is_checked(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(InvalidError) as e:
        q.submit(1, concurrency_key="x" * 300)
    assert e.value.field == "concurrency_key"
    with pytest.raises(InvalidError):
        q.set_admission(Admission(key_weights={"k": 0}))


def test_null_key_override_is_the_default(every_plane: HttpDispatch, qname: str) -> None:
    """A None in a per-key override map is no override: the key takes the queue's default
    (as the CLI's ``KEY=-``), and the stored block leaves it out. Before, the server refused
    it ("want a float, got nil") over msgpack and read it as 0 over JSON."""
    q = SyncQueue(qname, dispatch=every_plane)
    got = q.set_admission(
        Admission(
            concurrency_limit=2,
            concurrency_limits={"a": None, "b": 5},
            key_weights={"a": None, "b": 2},
            key_rate_limits={"a": None, "b": 3},
            key_bursts={"a": None, "b": 4},
        )
    )
    assert dict(got.concurrency_limits or {}) == {"b": 5}
    assert dict(got.key_weights or {}) == {"b": 2}
    assert dict(got.key_rate_limits or {}) == {"b": 3}
    assert dict(got.key_bursts or {}) == {"b": 4}
    q.submit(1, concurrency_key="a")
    (key,) = q.concurrency_keys()
    assert key.key == "a" and key.weight == 1 and key.limit == 2, "the default weight and limit"


def test_key_rate_limit_overrides(every_plane: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    got = q.set_admission(
        Admission(key_rate_limit=0.001, key_burst=1, key_rate_limits={"fast": 1000, "free": 0}, key_bursts={"fast": 3})
    )
    assert dict(got.key_rate_limits or {}) == {"fast": 1000, "free": 0}
    assert dict(got.key_bursts or {}) == {"fast": 3}
    for key in ("slow", "fast", "free"):
        for i in range(4):
            q.submit({"i": i}, concurrency_key=key)
    started: dict[str, int] = {}
    while (job := q.claim(wait=0)) is not None:
        started[job.concurrency_key or ""] = started.get(job.concurrency_key or "", 0) + 1
    assert started["slow"] == 1, "the default bucket of 1 at 0.001/s"
    assert started["fast"] >= 3, "its own bucket of 3 (refilling at 1000/s)"
    assert started["free"] == 4, "rate 0: no limit for that key"
    with pytest.raises(InvalidError):
        q.set_admission(Admission(key_rate_limits={"k": -1}))
    with pytest.raises(InvalidError):
        q.set_admission(Admission(key_bursts={"k": 0}))
    got = q.set_admission(Admission(rate_limit=5, key_rate_limit=2, key_weights={"k": 3}))
    assert got.rate_limit == 5 and got.key_rate_limit == 2 and dict(got.key_weights or {}) == {"k": 3}, (
        "whole numbers in the float fields are sent as floats"
    )


def test_udf_submit_carries_the_key(dispatch: HttpDispatch, qname: str) -> None:
    @udf(queue=qname, dispatch=dispatch)
    def work(x: int) -> int:
        return x

    inv = work.submit(1, _concurrency_key="tenant-7")
    assert SyncQueue(qname, dispatch=dispatch).get(inv).concurrency_key == "tenant-7"


def test_rate_limited_hands_the_job_back(every_plane: HttpDispatch, qname: str) -> None:
    from lakeshore import RateLimited, run_worker

    calls: list[int] = []

    @udf(queue=qname, dispatch=every_plane, max_attempts=1)
    def call_api(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise RateLimited(retry_after=0.2, key="upstream")
        return x * 2

    q = SyncQueue(qname, dispatch=every_plane)
    inv = call_api.submit(21, _concurrency_key="upstream")
    run_worker(every_plane, queues=[call_api], once=True, handle_signals=False)
    got = q.get(inv)
    assert got.state == "queued" and got.attempt == 0, "no attempt consumed"
    assert (got.error or {}).get("type") == "rate_limited"
    run_worker(every_plane, queues=[call_api], once=True, wait=10, handle_signals=False)
    assert q.result(inv, timeout=10) == 42
    assert q.get(inv).attempt == 1
