"""A forked child's first calls from several threads at once (no server: a fake send).

The state the parent's threads left (the submits they queued, a request in flight) must be
reset in the child once, before any thread of the child runs, never by the first call of
each thread: a second thread that saw the parent's state and reset it after the first had
queued a call dropped that call, and its caller waited forever. Each test makes that
interleaving happen for certain: the second thread's first ``os.getpid()`` (the pid check
of the old code, which had read the parent's pid just before) returns only once the third
caller's call is queued behind the first's request."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from lakeshore import HttpDispatch, SyncQueue
from lakeshore._transport import Batcher, Portal

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _in_child(body: Callable[[], int], timeout: float = 30.0) -> int:
    """Run body in a forked child; its exit status (body's answer), or -1 if it hung."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1


class _Interleave:
    """Threads A, B and C making their first calls in the child: B is held in its first
    ``os.getpid()`` until C's call is queued behind A's request (``queued``), which is held
    until B has gone on (``release``)."""

    def __init__(self, call: Callable[[str], Any], queued: Callable[[], bool]) -> None:
        self.call = call
        self.queued = queued
        self.b_in_getpid = threading.Event()
        self.b_go = threading.Event()
        self.sending = threading.Event()  # the first request has started
        self.release = threading.Event()
        self.answers: dict[str, Any] = {}
        real = os.getpid

        def getpid() -> int:
            if threading.current_thread().name == "B" and not self.b_go.is_set():
                self.b_in_getpid.set()
                self.b_go.wait(5)
            return real()

        os.getpid = getpid  # in the child only

    def _run(self, name: str) -> threading.Thread:
        def go() -> None:
            try:
                self.answers[name] = self.call(name)
            except BaseException as e:  # noqa: BLE001 - reported through the exit status
                self.answers[name] = e

        t = threading.Thread(target=go, name=name, daemon=True)
        t.start()
        return t

    @staticmethod
    def _until(cond: Callable[[], bool], seconds: float = 5.0) -> bool:
        end = time.monotonic() + seconds
        while not cond():
            if time.monotonic() > end:
                return False
            time.sleep(0.002)
        return True

    def run(self) -> int:
        b = self._run("B")
        self._until(lambda: self.b_in_getpid.is_set() or self.sending.is_set())
        a = self._run("A")
        self._until(self.sending.is_set)
        c = self._run("C")
        self._until(self.queued)
        self.b_go.set()
        b.join(1)  # the old code: B resets, sends its own call alone and is answered
        self.release.set()
        for t in (a, b, c):
            t.join(5)
        hung = [t.name for t in (a, b, c) if t.is_alive()]
        if hung:
            print("hung:", hung, flush=True)
            return 1
        if self.answers != {n: n for n in "ABC"}:
            print("answers:", self.answers, flush=True)
            return 2
        return 0


def test_a_forked_childs_first_blocking_submits_from_several_threads_are_all_answered() -> None:
    # The combined blocking submits (QueueCore.submit_blocking) of a queue the parent used.
    d = HttpDispatch("http://127.0.0.1:9", token="t0k")  # never reached: the send is fake
    q = SyncQueue("q", dispatch=d)
    core = q._core
    try:

        def child() -> int:
            box: list[_Interleave] = []

            def call_blocking(method: str, path: str, body: dict[str, Any] | None = None, **_: Any) -> Any:
                assert body is not None
                it = box[0]
                if not it.sending.is_set():
                    it.sending.set()
                    it.release.wait(5)
                if "invocations" in body:
                    return {"results": [{"id": b["id"]} for b in body["invocations"]]}
                return {"id": body["id"]}

            d._transport.call_blocking = call_blocking  # type: ignore[method-assign,assignment]
            names: dict[str, str] = {}

            def submit(name: str) -> str:
                inv = q.submit(name)
                names[inv] = name
                return names[inv]

            def c_queued() -> bool:
                return any(msgpack.unpackb(s.body["payload"]) == "C" for s in core._combined.waiting)

            box.append(_Interleave(submit, c_queued))
            return box[0].run()

        assert _in_child(child) == 0
    finally:
        d.close()


class _Held:
    """A batcher's send that holds the first batch until ``release`` is set."""

    def __init__(self) -> None:
        self.sending = threading.Event()
        self.release = threading.Event()

    async def __call__(self, items: list[str]) -> list[str | BaseException]:
        if not self.sending.is_set():
            self.sending.set()
            while not self.release.is_set():
                await asyncio.sleep(0.005)
        return list(items)


def test_a_forked_childs_first_batched_calls_from_several_threads_are_all_answered() -> None:
    # The Batcher (submits, settles and claims of the loop's way) of a portal the parent used.
    portal = Portal("test-fork")
    send = _Held()
    b: Batcher[str, str] = Batcher(portal, send, in_flight=1)
    send.release.set()
    assert b.put("parent").result(5) == "parent"  # the parent's loop thread exists
    try:

        def child() -> int:
            send.sending.clear()
            send.release.clear()
            it = _Interleave(lambda name: b.put(name).result(10), lambda: len(b._pending) >= 1)
            it.sending, it.release = send.sending, send.release
            return it.run()

        assert _in_child(child) == 0
    finally:
        portal.close()
