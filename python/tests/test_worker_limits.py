"""``run_worker(exit_when_idle=…, max_jobs=…)``: drain the queues and return, or stop after
N jobs — Go's ``WorkerOptions.ExitWhenIdle`` and ``MaxJobs`` (runworker.go; settler_test.go's
``MaxJobsExact``), ``lakeshore worker --exit-when-idle --max-jobs N``. The worker never claims
beyond ``max_jobs``, whatever its concurrency: the jobs it did not run stay queued, never
claimed (no ``started_at``, no ``released`` error), and none is left running."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from lakeshore import Admission, HttpDispatch, InvalidError, RateLimited, SyncQueue, run_worker, udf
from lakeshore.schedules import remove_schedule, schedules, set_schedule

from .conftest import Server
from .test_bad_results import UNHOLDABLE


class Bodies:
    """A body that counts its calls and the most bodies running at once."""

    def __init__(self, sleep: float = 0.0) -> None:
        self.sleep = sleep
        self.lock = threading.Lock()
        self.calls: list[Any] = []
        self.active = 0
        self.peak = 0

    def __call__(self, i: Any) -> Any:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.sleep)
            return i
        finally:
            with self.lock:
                self.active -= 1
                self.calls.append(i)


def never_claimed(q: SyncQueue) -> None:
    """Every queued job of ``q`` was never claimed: no start time, no error (a job claimed
    and given back unrun keeps both)."""
    page = q.list(state="queued", limit=1000)
    assert not page.next
    for listed in page.invocations:
        inv = q.get(listed.id)
        assert inv.state == "queued" and inv.started_at is None and inv.error is None, inv


@pytest.mark.parametrize("concurrency", [1, 4])
def test_exit_when_idle_drains_the_queue_and_returns_the_count(
    every_plane: HttpDispatch, qname: str, concurrency: int
) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    ids = [q.submit(i) for i in range(25)]
    body = Bodies(sleep=0.01)
    n = run_worker(every_plane, queues={qname: body}, concurrency=concurrency, exit_when_idle=True, handle_signals=False)
    assert n == 25
    assert sorted(body.calls) == list(range(25)), "each job ran once"
    assert body.peak <= concurrency
    assert [q.result(i, timeout=5) for i in ids] == list(range(25))
    stats = q.stats()
    assert stats["succeeded"] == 25 and stats["queued"] == 0 and stats["running"] == 0, stats


def test_exit_when_idle_on_an_empty_queue_returns_at_once(dispatch: HttpDispatch, qname: str) -> None:
    start = time.monotonic()
    assert run_worker(dispatch, queues={qname: lambda x: x}, concurrency=4, exit_when_idle=True, handle_signals=False) == 0
    assert time.monotonic() - start < 5


def test_exit_when_idle_leaves_delayed_jobs_queued(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    late = q.submit("late", delay=3600)
    now = q.submit("now")
    body = Bodies()
    assert run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False) == 1
    assert body.calls == ["now"] and q.get(now).state == "succeeded"
    assert q.get(late).state == "queued", "a delayed job is not work now"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_exit_when_idle_waits_for_jobs_a_key_rate_limit_holds_back(
    dispatch: HttpDispatch, qname: str, concurrency: int
) -> None:
    # One start per 0.2 s for the key: the claims come back empty between starts, with
    # nothing running, yet the key's jobs are due: the worker runs them all before it returns.
    q = SyncQueue(qname, dispatch=dispatch)
    q.set_admission(Admission(key_rate_limit=5, key_burst=1))
    for i in range(4):
        q.submit(i, concurrency_key="tenant")
    body = Bodies()
    assert run_worker(dispatch, queues={qname: body}, concurrency=concurrency, exit_when_idle=True, handle_signals=False) == 4
    assert sorted(body.calls) == [0, 1, 2, 3]
    assert q.count("queued") == 0 and q.count("succeeded") == 4


@pytest.mark.parametrize("key", [None, "tenant"])
def test_exit_when_idle_waits_for_a_job_it_slowed_down(dispatch: HttpDispatch, qname: str, key: str | None) -> None:
    """A job the body answered "slow down" (RateLimited, with a key or without) is only
    delayed: the worker runs it again when the delay ends, then returns. Before, it
    returned at its next empty claim and left the job queued with no worker. Go:
    TestRunWorker/ExitWhenIdleWaitsForItsSlowDown."""
    q = SyncQueue(qname, dispatch=dispatch)
    inv = q.submit("x", concurrency_key="tenant", max_attempts=1)
    runs: list[str] = []

    def body(x: str) -> str:
        runs.append(x)
        if len(runs) == 1:
            raise RateLimited(0.3, key=key)
        return "ok"

    assert run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False) == 2
    assert runs == ["x", "x"] and q.get(inv).state == "succeeded"


def test_exit_when_idle_leaves_a_slowed_down_job_of_a_paused_queue(dispatch: HttpDispatch, qname: str) -> None:
    """In a queue paused meanwhile a slowed-down job does not keep the worker, as no other
    job of a paused queue does (nothing claims it until the queue is resumed)."""
    q = SyncQueue(qname, dispatch=dispatch)
    inv = q.submit("x", max_attempts=1)
    runs: list[str] = []

    def body(x: str) -> str:
        runs.append(x)
        q.pause()
        raise RateLimited(0.3)

    assert run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False) == 1
    assert runs == ["x"] and q.get(inv).state == "queued", "left for a resume"


def test_exit_when_idle_leaves_a_slowed_down_job_cancelled_meanwhile(dispatch: HttpDispatch, qname: str) -> None:
    """A job cancelled while it waits out a long "slow down" is no work: the worker returns
    without waiting for the delay's end. Before, the job was not read until its due time, so
    the worker claimed for the hour it was told to slow down for. Go:
    TestRunWorker/ExitWhenIdleWaitsForItsSlowDown."""
    q = SyncQueue(qname, dispatch=dispatch)
    first = q.submit(0, max_attempts=1)
    q.submit(1, max_attempts=1)  # FIFO: runs after the first was handed back
    runs: list[int] = []

    def body(n: int) -> str:
        runs.append(n)
        if n == 0:
            raise RateLimited(3600)
        q.cancel(first)
        return "ok"

    stop = threading.Event()
    result: list[int] = []
    t = threading.Thread(
        target=lambda: result.append(
            run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False, stop=stop)
        ),
        daemon=True,
    )
    t.start()
    t.join(60)  # a bound for a worker that never returns on its own, not a speed verdict
    returned = not t.is_alive()
    stop.set()
    t.join(60)
    assert returned, "the worker waited for a cancelled job's slow down"
    assert runs == [0, 1] and result == [2]
    assert q.get(first).state == "cancelled"


def test_exit_when_idle_forgets_a_slowed_down_job_claimed_again(
    dispatch: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's record of a job it slowed down ends when it claims that job again, so
    a long-running worker whose claims never come back empty (the only time the idle check
    pruned it) does not keep an entry for every job ever slowed down. Before, the entry
    stayed while the job ran again and after it ended. Go:
    TestHandedBackForgottenWhenClaimedAgain."""
    from lakeshore import worker

    original = worker._Worker._keep
    sizes: list[int] = []

    def noted_keep(self: Any, r: Any) -> None:
        original(self, r)
        sizes.append(len(self.handed_back))

    monkeypatch.setattr(worker._Worker, "_keep", noted_keep)
    q = SyncQueue(qname, dispatch=dispatch)
    q.submit("x", max_attempts=1)
    runs: list[str] = []

    def body(x: str) -> str:
        runs.append(x)
        if len(runs) == 1:
            raise RateLimited(0.001)
        return "ok"

    assert run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False) == 2
    assert runs == ["x", "x"]
    assert sizes == [0, 0], "no entry once the slowed-down job was claimed again"


def test_exit_when_idle_claims_after_its_check(
    dispatch: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fire that lands between an empty claim and the idle check (the plane's maintenance
    firing a due tick just then) is claimable, yet the check cannot see it (the tick is no
    longer due): the worker claims once more after an empty check and runs it. Before, it
    returned with the fire queued (test_exit_when_idle_runs_a_due_schedule_tick failed so
    under load). The check is wrapped to submit the "fire" at its first call, in that
    window; Go: TestRunWorker/ExitWhenIdleClaimsAfterItsCheck."""
    from lakeshore import worker

    q = SyncQueue(qname, dispatch=dispatch)
    original = worker._Worker._queues_empty
    fired: list[str] = []

    async def fire_at_first_check(self: Any) -> bool:
        if not fired:
            fired.append("fire")
            await asyncio.to_thread(q.submit, "fire")  # the check runs on the dispatch's loop
        return await original(self)

    monkeypatch.setattr(worker._Worker, "_queues_empty", fire_at_first_check)
    body = Bodies()
    n = run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False)
    assert fired, "the check ran"
    assert n == 1 and body.calls == ["fire"], "the fire that landed between the empty claim and the check ran"


def test_exit_when_idle_runs_a_due_schedule_tick(server: Server, dispatch: HttpDispatch, qname: str) -> None:
    # A worker started just after a tick, before the plane's maintenance (every 0.25 s)
    # fired it, found its claim empty and returned with the tick's job still to come; the
    # due tick is work, as Go's worker has it. Three rounds, each started 10 ms after a tick.
    # After each round a maintenance pass fires every tick due by then: what is left queued
    # is a fire of a tick later than the round's start (the schedule fires every second
    # while the test runs on). Checked by each fire's tick, not by an empty queue after the
    # rounds, which the next tick filled whenever a loaded machine ran the test a second
    # late after its worker returned.
    q = SyncQueue(qname, dispatch=dispatch)
    names = {kind: f"{qname}-{kind}" for kind in ("tick", "later", "paused")}
    set_schedule(names["tick"], qname, every=1, payload="tick", dispatch=dispatch)
    set_schedule(names["later"], qname, every=3600, payload="later", dispatch=dispatch)
    set_schedule(names["paused"], qname, every=1, payload="paused", paused=True, dispatch=dispatch)
    try:
        body = Bodies()
        for round in range(3):
            (info,) = [s for s in schedules(dispatch.namespace, dispatch=dispatch) if s.name == names["tick"]]
            assert info.next_fire is not None
            time.sleep(max(0.0, info.next_fire.timestamp() - time.time()) + 0.01)
            started = datetime.now(timezone.utc)
            n = run_worker(dispatch, queues={qname: body}, exit_when_idle=True, handle_signals=False)
            assert n >= 1, f"round {round}: the tick due when the worker started ran"
            r = httpx.post(f"{server.url}/v1/maintain", headers={"Authorization": f"Bearer {server.admin_token}"})
            assert r.status_code == 200, r.text
            left = [
                inv.metadata["schedule_tick"]
                for inv in q.list(state="queued", limit=1000).invocations
                if datetime.fromisoformat(inv.metadata["schedule_tick"]) <= started
            ]
            assert left == [], f"round {round}: fires of ticks due when the worker started were left queued"
        assert set(body.calls) == {"tick"}
    finally:
        for name in names.values():
            remove_schedule(name, dispatch=dispatch)


def test_exit_when_idle_drains_queues_of_two_claim_orders(dispatch: HttpDispatch, qname: str) -> None:
    # Two claim orders: two claims, each must come back empty before the worker is idle.
    ran: list[str] = []
    lock = threading.Lock()

    def note(tag: str) -> None:
        with lock:
            ran.append(tag)

    @udf(queue=qname + "-fifo", dispatch=dispatch)
    def first(tag: str) -> None:
        note(tag)

    @udf(queue=qname + "-prio", dispatch=dispatch, kind="priority")
    def second(tag: str) -> None:
        note(tag)

    for i in range(6):
        first.submit(f"f{i}")
        second.submit(f"p{i}")
    assert run_worker(dispatch, queues=[first, second], concurrency=3, exit_when_idle=True, handle_signals=False) == 12
    assert sorted(ran) == sorted([f"f{i}" for i in range(6)] + [f"p{i}" for i in range(6)])


@pytest.mark.parametrize("concurrency", [1, 4])
def test_max_jobs_runs_exactly_that_many_and_leaves_the_rest_queued(
    every_plane: HttpDispatch, qname: str, concurrency: int
) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    for i in range(40):
        q.submit(i)
    body = Bodies(sleep=0.02)
    n = run_worker(every_plane, queues={qname: body}, concurrency=concurrency, max_jobs=13, handle_signals=False)
    assert n == 13
    assert len(body.calls) == 13 and len(set(body.calls)) == 13
    assert body.peak <= concurrency
    stats = q.stats()
    assert stats["succeeded"] == 13, stats
    assert stats["queued"] == 27, f"nothing claimed beyond max_jobs is left running: {stats}"
    assert stats["running"] == 0, stats
    never_claimed(q)


def test_max_jobs_below_the_concurrency(dispatch: HttpDispatch, qname: str) -> None:
    # More slots than budget: only two claims are ever sent, the other slots stop.
    q = SyncQueue(qname, dispatch=dispatch)
    for i in range(10):
        q.submit(i)
    body = Bodies(sleep=0.05)
    assert run_worker(dispatch, queues={qname: body}, concurrency=8, max_jobs=2, handle_signals=False) == 2
    stats = q.stats()
    assert stats["succeeded"] == 2 and stats["queued"] == 8 and stats["running"] == 0, stats
    never_claimed(q)


def test_max_jobs_waits_for_jobs_without_exit_when_idle(dispatch: HttpDispatch, qname: str) -> None:
    # A budget of 3 with 1 job queued: the worker long-polls for the other two (the empty
    # claims give their share back) and returns once the third has run.
    q = SyncQueue(qname, dispatch=dispatch)
    q.submit(0)
    body = Bodies()
    got: list[int] = []
    t = threading.Thread(
        target=lambda: got.append(run_worker(dispatch, queues={qname: body}, concurrency=4, max_jobs=3, handle_signals=False))
    )
    t.start()
    deadline = time.monotonic() + 10
    while not body.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert t.is_alive(), "one job of three: it waits for more"
    for i in range(1, 6):
        q.submit(i)
    t.join(20)
    assert not t.is_alive() and got == [3]
    stats = q.stats()
    assert stats["succeeded"] == 3 and stats["queued"] == 3 and stats["running"] == 0, stats
    never_claimed(q)


@pytest.mark.parametrize("queued, expected", [(5, 5), (30, 12)])
def test_max_jobs_with_exit_when_idle_stops_at_whichever_comes_first(
    dispatch: HttpDispatch, qname: str, queued: int, expected: int
) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    for i in range(queued):
        q.submit(i)
    body = Bodies(sleep=0.01)
    n = run_worker(dispatch, queues={qname: body}, concurrency=4, exit_when_idle=True, max_jobs=12, handle_signals=False)
    assert n == expected and len(body.calls) == expected
    stats = q.stats()
    assert stats["succeeded"] == expected and stats["queued"] == queued - expected and stats["running"] == 0, stats
    never_claimed(q)


def test_max_jobs_does_not_count_a_payload_that_does_not_decode(server: Server, dispatch: HttpDispatch, qname: str) -> None:
    # A poison job is failed by its claim and not run: it gives its share back, as once=True
    # goes on to the next job (test_bad_results.py, whose payload this is).
    q = SyncQueue(qname, dispatch=dispatch)
    r = httpx.post(
        f"{server.url}/v1/namespaces/default/queues/{qname}/invocations",
        json={"payload": UNHOLDABLE},
        headers={"Authorization": f"Bearer {server.admin_token}"},
    )
    assert r.status_code == 200, r.text
    poison = str(r.json()["id"])
    time.sleep(0.005)  # the good jobs' ids (this client's) sort after the poison one's (the server's)
    for i in range(3):
        q.submit(i)
    body = Bodies()
    assert run_worker(dispatch, queues={qname: body}, max_jobs=3, exit_when_idle=True, handle_signals=False) == 3
    assert sorted(body.calls) == [0, 1, 2]
    inv = q.get(poison)
    assert inv.state == "failed" and inv.error is not None and inv.error["type"] == "invalid_payload", inv


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"max_jobs": -1}, "max_jobs"),
        ({"max_jobs": 0}, "max_jobs"),
        ({"max_jobs": 2.5}, "max_jobs"),
        ({"max_jobs": "3"}, "max_jobs"),
        ({"max_jobs": True}, "max_jobs"),
        ({"max_jobs": 2, "once": True}, "max_jobs"),
        ({"exit_when_idle": "yes"}, "exit_when_idle"),
        ({"exit_when_idle": 1}, "exit_when_idle"),
        ({"exit_when_idle": True, "once": True, "wait": 5}, "wait"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    dispatch: HttpDispatch, qname: str, kwargs: dict[str, Any], field: str
) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    inv = q.submit(1)
    ran: list[Any] = []
    with pytest.raises(InvalidError) as e:
        run_worker(dispatch, queues={qname: ran.append}, handle_signals=False, **kwargs)
    assert isinstance(e.value, ValueError)
    assert e.value.field == field, e.value
    assert field in str(e.value)
    assert ran == [] and q.get(inv).state == "queued" and q.get(inv).started_at is None
    assert dispatch.workers() == [] or all(qname not in w.queues for w in dispatch.workers()), "it never registered"


def test_once_with_max_jobs_1_and_exit_when_idle(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    for i in range(3):
        q.submit(i)
    body = Bodies()
    assert run_worker(dispatch, queues={qname: body}, once=True, max_jobs=1, exit_when_idle=True, handle_signals=False) == 1
    assert body.calls == [0] and q.count("queued") == 2
    never_claimed(q)
    assert run_worker(SyncQueue(qname + "-empty", dispatch=dispatch), once=True, exit_when_idle=True, handle_signals=False) == 0


def test_a_drain_stops_slots_waiting_on_the_max_jobs_budget(
    dispatch: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty queue, max_jobs=2 at concurrency 4: two slots long-poll with the budget, the
    # other two wait on it. A drain (stop=, as a first SIGTERM) ends them all: the worker
    # returns without any claim being answered after the drain began, so it waited neither
    # for the long-polls to end on their own (5 s each) nor for a budget that came back
    # only when they did. The verdict is the order of events on the worker's loop, not a
    # time (the test used to bound the drain by 5 s, which a drain that waited out a
    # long-poll begun 0.5 s before it also met); the stop is set once the four slots are
    # in place (it used to sleep 0.5 s).
    from lakeshore import worker

    events: list[str] = []
    placed = threading.Event()
    claim, spent, drain = worker._Worker._claim, worker._Worker._budget_spent, worker._Worker.drain

    def note(event: str) -> None:
        events.append(event)
        if events.count("claim") >= 2 and events.count("budget wait") >= 2:
            placed.set()

    async def noted_claim(self: Any, core: Any, wait: float) -> Any:
        note("claim")
        job = await claim(self, core, wait)
        note("answered")
        return job

    async def noted_spent(self: Any) -> bool:
        note("budget wait")
        return await spent(self)

    def noted_drain(self: Any) -> None:
        note("drain")
        drain(self)

    monkeypatch.setattr(worker._Worker, "_claim", noted_claim)
    monkeypatch.setattr(worker._Worker, "_budget_spent", noted_spent)
    monkeypatch.setattr(worker._Worker, "drain", noted_drain)
    stop = threading.Event()
    got: list[int] = []
    t = threading.Thread(
        target=lambda: got.append(
            run_worker(dispatch, queues={qname: lambda x: x}, concurrency=4, max_jobs=2, stop=stop, handle_signals=False)
        )
    )
    t.start()
    try:
        assert placed.wait(60), f"the slots never took their places: {events}"
    finally:
        stop.set()
        t.join(60)  # a bound on a hang only: the verdict is the events' order
    assert not t.is_alive() and got == [0]
    after = events[events.index("drain") :]
    assert "answered" not in after, f"the drain waited for a claim to be answered: {events}"
    q = SyncQueue(qname, dispatch=dispatch)
    assert q.count("queued") == 0 and q.count("running") == 0
