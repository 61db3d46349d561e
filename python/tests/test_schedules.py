"""Schedules from Python on every plane: the ``@schedule`` decorator stores a schedule,
``schedules()`` lists it with its next fire, pause/resume/remove act on it by name, bad
rules raise InvalidError naming the field, and a stored interval schedule really fires (a
job with the schedule's key and payload reaches its queue)."""

from __future__ import annotations

import time
from typing import cast

import pytest

from lakeshore import (
    Admission,
    HttpDispatch,
    InvalidError,
    NotFoundError,
    ScheduleInfo,
    SyncQueue,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    schedule,
    schedules,
    set_schedule,
)
from lakeshore import worker as lakeshore_worker


def test_schedule_decorator_list_pause_remove(every_plane: HttpDispatch, qname: str) -> None:
    d = every_plane

    @schedule("0 3 * * *", queue=qname, name=qname + "-nightly", payload={"suite": "full"}, time_zone="Europe/Paris", dispatch=d)
    def nightly(suite: str) -> None:
        pass

    info = nightly.schedule  # type: ignore[attr-defined]
    assert info.name == qname + "-nightly"
    assert info.queue == qname
    assert info.cron == "0 3 * * *" and info.time_zone == "Europe/Paris"
    assert info.next_fire is not None and not info.paused

    mine = [s for s in schedules(d.namespace, dispatch=d) if s.name == qname + "-nightly"]
    assert len(mine) == 1 and mine[0].catch_up == "once"

    paused = pause_schedule(qname + "-nightly", dispatch=d)
    assert paused.paused and paused.next_fire is None and paused.changed is True
    again = pause_schedule(qname + "-nightly", dispatch=d)
    assert again.paused and again.changed is False, "a second pause says it was already paused"
    resumed = resume_schedule(qname + "-nightly", dispatch=d)
    assert not resumed.paused and resumed.next_fire is not None and resumed.changed is True
    again = resume_schedule(qname + "-nightly", dispatch=d)
    assert not again.paused and again.changed is False, "a second resume says it was not paused"
    assert again.next_fire == resumed.next_fire
    assert mine[0].changed is None, "only pause and resume answer changed"
    with pytest.raises(NotFoundError, match="not found"):
        pause_schedule(qname + "-missing", dispatch=d)
    assert remove_schedule(qname + "-nightly", dispatch=d)
    assert not remove_schedule(qname + "-nightly", dispatch=d)


def test_schedule_invalid(every_plane: HttpDispatch, qname: str) -> None:
    d = every_plane
    with pytest.raises(InvalidError, match="cron"):
        set_schedule(qname, qname, cron="0 3 * *", dispatch=d)
    with pytest.raises(InvalidError, match="time_zone"):
        set_schedule(qname, qname, cron="0 3 * * *", time_zone="Mars/Olympus", dispatch=d)
    with pytest.raises(InvalidError, match="catch_up"):
        set_schedule(qname, qname, every=60, catch_up="never", dispatch=d)  # type: ignore[arg-type]
    with pytest.raises(InvalidError):
        schedule(queue=qname, dispatch=d)  # neither cron nor every
    for bad in (-1, 10_001, 2**40, 1.5):
        with pytest.raises(InvalidError, match="invalid max_attempts .*use 1 to 10000 attempts") as e:
            set_schedule(qname, qname, every=60, max_attempts=bad, dispatch=d)  # type: ignore[arg-type]
        assert e.value.field == "max_attempts"
    # The plane sets "schedule" and "schedule_tick" on every fire: metadata holding either
    # is refused, not stored and silently replaced at each fire (before 2026-12-07).
    for key in ("schedule", "schedule_tick"):
        with pytest.raises(InvalidError, match=f'invalid metadata key "{key}": .*set on every fire') as e:
            set_schedule(qname, qname, every=60, metadata={"team": "a", key: "x"}, dispatch=d)
        assert e.value.field == "metadata key"
    assert not [s for s in schedules(d.namespace, dispatch=d) if s.name == qname]


def test_none_where_a_value_is_required_says_null(every_plane: HttpDispatch, qname: str) -> None:
    """A None the server refuses is named null (what Python users and JSON call it), never
    "nil": before, msgpack bodies (the SDK's) were answered "want a string, got nil", Go's
    word leaking into a Python error."""
    d = every_plane
    for kw, field in (({"queue": None}, "queue"), ({"metadata": {"team": None}}, "metadata.team")):
        args = {"queue": qname, "every": 60, "dispatch": d, **kw}
        with pytest.raises(InvalidError, match=r"want a string, got null") as e:
            set_schedule(qname, **args)  # type: ignore[arg-type]
        assert e.value.field == field and "nil" not in str(e.value)
    assert not [s for s in schedules(d.namespace, dispatch=d) if s.name == qname]


def test_interval_schedule_fires(every_plane: HttpDispatch, qname: str) -> None:
    d = every_plane
    info = set_schedule(qname, qname, {"n": 1}, every=1, dispatch=d)
    try:
        q = SyncQueue(qname, dispatch=d)
        job = q.claim(wait=10)
        assert job is not None, "a fire within a few seconds"
        assert (job.key or "").startswith(f"schedule/{qname}/")
        assert job.payload == {"n": 1}
        q.ack(job)
        assert info.next_fire is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            last = [s for s in schedules(d.namespace, dispatch=d) if s.name == qname][0]
            if last.last_id:
                break
            time.sleep(0.05)
        assert last.last_fire is not None and last.last_id
    finally:
        remove_schedule(qname, dispatch=d)


def test_schedule_concurrency_key(every_plane: HttpDispatch, qname: str) -> None:
    """A schedule's ``concurrency_key`` is every fire's (a schedule per tenant, each under its
    key's limit): stored, listed, carried by the fire's job; a bad key is refused naming it.
    Before 2026-12-07 set_schedule and @schedule had no such argument."""
    d = every_plane
    with pytest.raises(InvalidError, match="concurrency_key") as e:
        set_schedule(qname, qname, every=60, concurrency_key="k" * 257, dispatch=d)
    assert e.value.field == "concurrency_key"
    # Checked as a submit's, by the one check: a key that is not UTF-8 (a lone surrogate)
    # or not a string is an InvalidError naming it, as at submit (before: a
    # UnicodeEncodeError from the msgpack encoder, and a server refusal worded otherwise).
    for bad in ("\ud800", 5):
        with pytest.raises(InvalidError, match="concurrency_key") as e:
            set_schedule(qname, qname, every=60, concurrency_key=cast(str, bad), dispatch=d)
        assert e.value.field == "concurrency_key"
        with pytest.raises(InvalidError) as submitted:
            SyncQueue(qname, dispatch=d).submit(1, concurrency_key=cast(str, bad))
        assert str(e.value) == str(submitted.value), "one wording for a submit's and a schedule's key"
    info = set_schedule(qname, qname, {"n": 1}, every=1, concurrency_key="tenant-a", dispatch=d)
    try:
        assert info.concurrency_key == "tenant-a"
        assert [s.concurrency_key for s in schedules(d.namespace, dispatch=d) if s.name == qname] == ["tenant-a"]
        q = SyncQueue(qname, dispatch=d)
        job = q.claim(wait=10)
        assert job is not None, "a fire within a few seconds"
        assert (job.key or "").startswith(f"schedule/{qname}/")
        assert q.get(job.id).concurrency_key == "tenant-a", "the fire carries the schedule's key"
        q.ack(job)
    finally:
        remove_schedule(qname, dispatch=d)


def test_schedule_decorator_runs_on_worker(every_plane: HttpDispatch, qname: str) -> None:
    """The documented example end to end (a fresh attacker's trial found it failing with
    ``TypeError: _run_thunk() got an unexpected keyword argument 'p'``): ``@schedule`` binds
    the function as its queue's handler, as ``@udf`` does, so ``run_worker(queues=[queue],
    once=True)`` runs a fire of the schedule through the decorated function."""
    d = every_plane
    seen: list[int] = []

    @schedule(every=1, queue=qname, name=qname, payload={"p": 1}, dispatch=d)
    def tick(p: int) -> int:
        seen.append(p)
        return p + 41

    try:
        assert tick.schedule.queue == qname  # type: ignore[attr-defined]
        assert lakeshore_worker.registry[qname] is tick
        ran = lakeshore_worker.run_worker(d, queues=[qname], once=True, wait=15, handle_signals=False)
        assert ran == 1 and seen == [1]
        assert tick(2) == 43  # calling the binding runs the function here
    finally:
        remove_schedule(qname, dispatch=d)
        with lakeshore_worker._registry_lock:
            lakeshore_worker.registry.pop(qname, None)


def test_schedule_decorator_keeps_pause(every_plane: HttpDispatch, qname: str) -> None:
    """A new user's trial: importing a module with ``@schedule`` again (a worker redeploy)
    undid an operator's ``lakeshore schedule pause``. The decorator declares the schedule
    (``keep_state``): an existing schedule keeps its paused flag and, with the same rule,
    its next fire; a changed rule fires at its own next tick, still paused or not as it
    was; a plain ``set_schedule`` replaces it all."""
    d = every_plane

    def declare(every: float) -> ScheduleInfo:
        @schedule(every=every, queue=qname, name=qname, payload={"x": 1}, catch_up="all", dispatch=d)
        def hourly(x: int) -> int:
            return x

        return cast(ScheduleInfo, hourly.schedule)  # type: ignore[attr-defined]

    try:
        first = declare(3600)
        assert not first.paused and first.next_fire is not None
        assert pause_schedule(qname, dispatch=d).paused
        again = declare(3600)  # the module imported again
        assert again.paused and again.next_fire is None, "the operator's pause survives"
        listed = [s for s in schedules(d.namespace, dispatch=d) if s.name == qname]
        assert listed[0].paused
        resumed = resume_schedule(qname, dispatch=d)
        assert declare(3600).next_fire == resumed.next_fire, "the same rule keeps its next fire"
        moved = declare(7200)
        assert not moved.paused and moved.every == 7200
        assert moved.next_fire is not None and moved.next_fire.timestamp() % 7200 == 0, "the new rule's tick"
        assert pause_schedule(qname, dispatch=d).paused
        assert declare(60).paused, "a changed rule keeps the pause too"
        assert not set_schedule(qname, qname, every=60, dispatch=d).paused, "a plain set replaces it"
    finally:
        remove_schedule(qname, dispatch=d)
        with lakeshore_worker._registry_lock:
            lakeshore_worker.registry.pop(qname, None)


def test_full_queue_skips_tick(every_plane: HttpDispatch, qname: str) -> None:
    """A fire meets the queue's depth limit: a full queue skips the tick (never grows past
    the limit), and the listing shows the skip with its reason."""
    d = every_plane
    q = SyncQueue(qname, dispatch=d)
    q.set_admission(Admission(max_depth=1, on_full="reject"))
    q.submit(1)
    set_schedule(qname, qname, {"n": 1}, every=1, dispatch=d)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            info = [s for s in schedules(d.namespace, dispatch=d) if s.name == qname][0]
            if info.skipped:
                break
            time.sleep(0.05)
        assert info.skipped >= 1 and info.last_skip is not None
        assert "max depth 1" in info.last_skip_reason
        assert not info.last_id, "nothing fired into the full queue"
        assert q.count("queued") == 1, "the queue stays at its limit"
    finally:
        remove_schedule(qname, dispatch=d)


def test_submit_unique_for(every_plane: HttpDispatch, qname: str) -> None:
    """``unique_for=`` is the key's dedup window: the first id within it; a key without a
    window holds; a window without a key is refused."""
    q = SyncQueue(qname, dispatch=every_plane)
    first = q.submit(1, key="daily", unique_for=30)
    assert q.submit(2, key="daily", unique_for=30) == first
    with pytest.raises(InvalidError, match="unique_for"):
        q.submit(3, unique_for=30)


def test_submit_debounce(every_plane: HttpDispatch, qname: str) -> None:
    """``debounce=`` is the key's debounce window: a resubmit while the invocation waits
    returns its id with the last payload; a window without a key, or with ``unique_for``,
    is refused."""
    q = SyncQueue(qname, dispatch=every_plane)
    first = q.submit({"v": 1}, key="reindex", debounce=60)
    assert q.submit({"v": 2}, key="reindex", debounce=60) == first
    inv = q.get(first)
    assert inv.state == "queued" and inv.payload == {"v": 2}, "the last payload wins"
    assert q.claim(wait=0) is None, "it waits for quiet"
    with pytest.raises(InvalidError, match="debounce"):
        q.submit(3, debounce=1)
    with pytest.raises(InvalidError, match="debounce"):
        q.submit(3, key="other", debounce=1, unique_for=1)


def test_schedules_lists_every_page(every_plane: HttpDispatch, qname: str) -> None:
    """``schedules()`` follows the server's ``next`` cursor: 105 schedules are more than the
    server's default page (100), and every one is listed, once, in byte order of name (a
    client that read one page saw 100)."""
    d = every_plane
    names = [f"{qname}-p{i:03d}" for i in range(105)]
    for name in names:
        set_schedule(name, qname, every=3600, dispatch=d)
    mine = [s.name for s in schedules(d.namespace, dispatch=d) if s.name.startswith(qname + "-p")]
    assert mine == names
    for name in names:
        remove_schedule(name, dispatch=d)
