"""A worker bound to several queues waits on all of them with one long-poll claim (the
claim's ``queues``), starts whichever has work first, and serves them fairly (issue 29,
item 6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lakeshore import HttpDispatch, SyncQueue, run_worker
from lakeshore.queue import QueueCore


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[str]]]]:
    """The claims the client sends: (path, the body's ``queues``), recorded on the way out
    of the real client."""
    seen: list[tuple[str, list[str]]] = []
    call = QueueCore._call

    async def spy(self: QueueCore, method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/claim") or path.endswith("/settle-and-claim"):
            body = kw.get("body") or {}
            claim = body.get("claim", body) if path.endswith("/settle-and-claim") else body
            seen.append((path, list(claim.get("queues") or [])))
        return await call(self, method, path, **kw)

    monkeypatch.setattr(QueueCore, "_call", spy)
    yield seen


def _stop_when(done: Any, stop: threading.Event, timeout: float = 60.0) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_once_starts_work_on_the_second_queue_at_once(
    dispatch: HttpDispatch, qname: str, claims: list[tuple[str, list[str]]]
) -> None:
    first, second = f"{qname}-first", f"{qname}-second"
    ran: list[str] = []
    got: list[int] = []

    def run() -> None:
        got.append(
            run_worker(
                dispatch,
                queues={first: lambda x: ran.append(f"first {x}"), second: lambda x: ran.append(f"second {x}")},
                once=True,
                wait=30.0,
                handle_signals=False,
            )
        )

    t = threading.Thread(target=run)
    start = time.monotonic()
    t.start()
    time.sleep(0.3)  # most likely long-polling by now; either way it must get the job
    SyncQueue(second, dispatch=dispatch).submit(7)
    t.join(60)
    assert got == [1] and ran == ["second 7"]
    # The one claim waited on both queues: not on the empty first for its whole wait.
    assert time.monotonic() - start < 15.0
    assert claims and all(sorted([p.split("/")[-2], *qs]) == sorted([first, second]) for p, qs in claims)


def test_a_long_lived_worker_claims_every_queue_in_one_long_poll(
    dispatch: HttpDispatch, qname: str, claims: list[tuple[str, list[str]]]
) -> None:
    names = [f"{qname}-{i}" for i in range(10)]
    ran: list[int] = []
    handlers = {n: (lambda x: ran.append(x)) for n in names}
    last = SyncQueue(names[-1], dispatch=dispatch)
    stop = threading.Event()
    invs: list[str] = []

    def feed() -> None:
        # One job at a time, on the last queue only: each must start without a wait on
        # the nine empty ones.
        for i in range(20):
            inv = last.submit(i)
            invs.append(inv)
            last.result(inv, timeout=30)
        stop.set()

    threading.Thread(target=feed, daemon=True).start()
    _stop_when(lambda: stop.is_set(), stop)
    start = time.monotonic()
    run_worker(dispatch, queues=handlers, stop=stop, handle_signals=False)
    assert sorted(ran) == list(range(20))
    assert claims, "the worker claimed"
    for path, queues in claims:
        assert sorted([path.split("/")[-2], *queues]) == sorted(names), f"a claim of some queues only: {path} {queues}"
    print(f"20 jobs one at a time on the last of ten queues: {time.monotonic() - start:.2f} s")


def test_a_hot_queue_does_not_starve_a_cold_one(dispatch: HttpDispatch, qname: str) -> None:
    hot, cold = f"{qname}-hot", f"{qname}-cold"
    SyncQueue(hot, dispatch=dispatch).submit_many(list(range(30)))
    SyncQueue(cold, dispatch=dispatch).submit_many([100, 101, 102])
    order: list[str] = []
    stop = threading.Event()
    _stop_when(lambda: len(order) >= 33, stop)
    run_worker(
        dispatch,
        queues={hot: lambda x: order.append("hot"), cold: lambda x: order.append("cold")},
        stop=stop,
        handle_signals=False,
    )
    assert order.count("cold") == 3
    # Each claim tries the other queue first: the cold jobs take turns with the hot ones
    # instead of waiting until the hot queue runs dry.
    assert [i for i, q in enumerate(order) if q == "cold"][-1] < 8, order


def test_a_worker_of_more_queues_than_one_claim_names_claims_them_in_groups(
    dispatch: HttpDispatch, qname: str, claims: list[tuple[str, list[str]]]
) -> None:
    # A claim names at most 64 queues (the plane refuses more: Go plane.ClaimQueuesLimit).
    # Before 2026-12-07 a worker of more queues of one claim order sent them all in one
    # claim, refused every time, in a loop that took nothing and never returned: a process
    # of more than 64 @udf functions could not run a worker (the seed page's
    # run_worker(q, once=True), which serves every @udf of the process, hung).
    names = [f"{qname}-{i}" for i in range(150)]
    ran: list[str] = []
    SyncQueue(names[-1], dispatch=dispatch).submit(7)
    got: list[int] = []

    def run() -> None:
        got.append(
            run_worker(
                dispatch,
                queues={n: (lambda x, n=n: ran.append(f"{n} {x}")) for n in names},
                once=True,
                wait=30.0,
                handle_signals=False,
            )
        )

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)  # a bound on a failure (the old worker never returned), not a wait
    assert not t.is_alive(), "the worker of 150 queues never returned"
    assert got == [1] and ran == [f"{names[-1]} 7"]
    named = [sorted([p.split("/")[-2], *qs]) for p, qs in claims]
    assert all(len(group) <= 64 for group in named), [len(g) for g in named]
    assert sorted({q for group in named for q in group}) == sorted(names)  # every queue claimed from
