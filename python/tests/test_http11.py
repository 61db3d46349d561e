"""The lean HTTP/1.1 client of the hot routes (lakeshore._http11) against a stub server on
loopback that answers as a real server may: chunked bodies, informational answers,
``Connection: close``, idle connections closed by the server, answers that never come,
bytes that are not HTTP. What the caller sees must be what the httpx path gives: the
answer, or the same retry-by-class behaviour and UnavailableError."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import httpx
import msgpack
import pytest

import lakeshore.queue
from lakeshore import HttpDispatch, Queue, SyncQueue, errors
from lakeshore import _http11
from lakeshore._http11 import Endpoint, Pool
from lakeshore._ids import new_ulid

from .signals import handlers, interrupt_main

Handler = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class _Stub:
    """A loopback server whose ``handler`` gets each request's head (the body is read by
    Content-Length) and writes the answer; it returns whether to keep the connection."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.bodies: list[bytes] = []  # each request's body, in order
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def start() -> None:
            self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.create_task(start())
            self.loop.run_forever()

        self.server: asyncio.Server
        self.port = 0
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                body = b""
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        body = await reader.readexactly(int(line.split(b":")[1]))
                self.requests.append(head)
                self.bodies.append(body)
                if not await self.handler(head, reader, writer):
                    writer.close()
                    return
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _answer(body: object, *, extra: bytes = b"", chunked: bool = False) -> bytes:
    data = msgpack.packb(body, use_bin_type=True)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\n" + extra
    if not chunked:
        return head + b"Content-Length: %d\r\n\r\n" % len(data) + data
    # Two chunks (one with an extension), then the last chunk with a trailer.
    a, b = data[:3], data[3:]
    return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n%x;x=1\r\n%s\r\n0\r\nX-T: 1\r\n\r\n" % (len(a), a, len(b), b)


@pytest.fixture
def stubs() -> Iterator[list[_Stub]]:
    made: list[_Stub] = []
    yield made
    for s in made:
        s.close()


def _dispatch(stubs: list[_Stub], handler: Handler, retry_for: float = 0.3) -> tuple[_Stub, HttpDispatch]:
    s = _Stub(handler)
    stubs.append(s)
    return s, HttpDispatch(f"http://127.0.0.1:{s.port}", token="t0k", retry_for=retry_for)


# The sync surface sends a lone submit as a blocking request on the caller's thread
# (_http11.BlockingPool); the async surface through the portal's loop (_http11.Pool): the
# stub's answers must read the same both ways.
SURFACES = ["sync", "async"]


def _submitter(d: HttpDispatch, surface: str) -> Callable[[object], str]:
    if surface == "sync":
        return SyncQueue("q", dispatch=d).submit
    q = Queue("q", dispatch=d)
    return lambda payload: asyncio.run(q.submit(payload))


@pytest.mark.parametrize("surface", SURFACES)
def test_answers_by_length_chunked_and_after_an_informational_one(stubs: list[_Stub], surface: str) -> None:
    n = 0

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        nonlocal n
        n += 1
        ids = {"id": f"{n:026d}"}
        if n % 3 == 1:
            w.write(_answer(ids))
        elif n % 3 == 2:
            w.write(_answer(ids, chunked=True))
        else:
            w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            w.write(_answer(ids))
        return True

    s, d = _dispatch(stubs, handler)
    try:
        submit = _submitter(d, surface)
        assert [submit(i) for i in range(6)] == [f"{i:026d}" for i in range(1, 7)]
        assert s.connections == 1  # one keep-alive connection for all
        if surface == "sync":
            assert d._portal._loop is None  # sent on the caller's thread: no loop started
        head = s.requests[0].decode()
        assert head.startswith("POST /v1/namespaces/default/queues/q/invocations HTTP/1.1\r\n")
        for h in ["Host: 127.0.0.1:", "Authorization: Bearer t0k", "Content-Type: application/msgpack",
                  "Accept: application/msgpack", "User-Agent: lakeshore-python"]:
            assert h in head
    finally:
        d.close()


def _wait_until(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for ``done`` (a state another thread makes), up to ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, what
        time.sleep(0.005)


def _idle_close_seen(d: HttpDispatch, surface: str) -> bool:
    """Whether the client has seen the server close its idle connection: the blocking pool
    of the sync surface finds it stale (its socket reads EOF), the async surface's loop has
    dropped it from its pool (eof_received)."""
    server = d._transport._servers[0]
    if surface == "sync":
        blocking = server._blocking.get(os.getpid())
        assert blocking is not None and len(blocking._idle) == 1
        return blocking._idle[0].stale(time.monotonic())
    hot = server._hot
    assert hot is not None
    return not hot._idle


@pytest.mark.parametrize("surface", SURFACES)
def test_connection_close_no_length_and_a_server_closed_idle_connection_reconnect(stubs: list[_Stub], surface: str) -> None:
    n = 0

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        nonlocal n
        n += 1
        if n == 1:
            w.write(_answer({"id": "a" * 26}, extra=b"Connection: close\r\n"))
            return False
        if n == 3:
            # No length: the body runs until the server closes the connection.
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\n\r\n")
            w.write(msgpack.packb({"id": "c" * 26}))
            return False
        w.write(_answer({"id": "b" * 26}))
        return n != 2  # after the second answer the server closes the idle connection

    s, d = _dispatch(stubs, handler)
    try:
        submit = _submitter(d, surface)
        assert submit(1) == "a" * 26
        assert submit(2) == "b" * 26
        # The server closes the idle connection; the client must see it before the next
        # submit, or that submit meets the close instead (its retry, bounded by a 0.3 s
        # retry_for, is another test's path, and a stall past 0.3 s failed it).
        _wait_until(lambda: _idle_close_seen(d, surface), "the client sees the server close its idle connection")
        assert submit(3) == "c" * 26
        assert submit(4) == "b" * 26
        assert s.connections == 4
    finally:
        d.close()


@pytest.mark.parametrize("surface", SURFACES)
def test_a_dropped_call_is_retried_by_class_and_bad_bytes_are_unavailable(stubs: list[_Stub], surface: str) -> None:
    n = 0

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        nonlocal n
        n += 1
        if b"/claim" in head:
            w.write(b"SMTP ready\r\n\r\n")  # not HTTP
            return True
        if n == 1:
            return False  # closed without an answer: a safe call (submit) is repeated
        w.write(_answer({"id": "c" * 26}))
        return True

    s, d = _dispatch(stubs, handler)
    try:
        q = SyncQueue("q", dispatch=d)
        assert _submitter(d, surface)(1) == "c" * 26
        assert [r.split(b" ")[1] for r in s.requests] == [s.requests[0].split(b" ")[1]] * 2  # the same submit again
        with pytest.raises(errors.UnavailableError, match="not an HTTP/1.1 answer"):
            q.claim()  # "once": not repeated
        assert sum(b"/claim" in r for r in s.requests) == 1
    finally:
        d.close()


def test_a_blocking_result_wait_polls_again_and_hands_a_503_to_the_loop(stubs: list[_Stub]) -> None:
    inv_id = new_ulid()
    n = 0

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        nonlocal n
        n += 1
        if n == 1:
            w.write(_answer({"done": False}))  # a long-poll chunk that ended: poll again
        elif n == 2:
            body = msgpack.packb({"error": {"code": "unavailable", "message": "busy"}})
            w.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/msgpack\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        else:
            w.write(_answer({"done": True, "invocation": {"id": inv_id, "state": "succeeded"}}))
        return True

    s, d = _dispatch(stubs, handler, retry_for=5.0)
    try:
        inv = SyncQueue("q", dispatch=d).wait(inv_id, timeout=10)
        assert (inv.id, inv.state) == (inv_id, "succeeded")
        assert len(s.requests) == 3
        for r in s.requests:
            assert r.startswith(f"GET /v1/invocations/{inv_id}/wait?timeout=".encode())
        # The first two on the caller's thread (one blocking connection), the third the
        # loop's way (a connection of the loop's pool).
        assert s.connections == 2
        assert d._portal._loop is not None
    finally:
        d.close()


def _echo_ids(head: bytes, body: bytes) -> bytes:
    """A submit's answer naming the ids its body carries (one, or a batch's)."""
    sent = msgpack.unpackb(body)
    if b"/invocations/batch " in head:
        return _answer({"results": [{"id": b["id"]} for b in sent["invocations"]]})
    return _answer({"id": sent["id"]})


def _holding_the_first(stubs: list[_Stub]) -> tuple[_Stub, HttpDispatch, threading.Event, threading.Event]:
    """A stub that answers each submit with the ids it carries, holding the first request
    (``held`` set as it comes) until ``release`` is set (at most 30 s): the dispatch, held
    and release."""
    held = threading.Event()
    release = threading.Event()

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        mine = len(s.requests) - 1  # this request's body (later ones may come while it is held)
        if mine == 0:
            held.set()
            end = time.monotonic() + 30
            while not release.is_set() and time.monotonic() < end:
                await asyncio.sleep(0.005)
        w.write(_echo_ids(head, s.bodies[mine]))
        return True

    s, d = _dispatch(stubs, handler)
    return s, d, held, release


def _submit_from_threads(q: SyncQueue, n: int, first_sent: Callable[[], bool]) -> list[str | BaseException]:
    """n threads submit one payload each: the first alone, the others once its request
    reached the server (first_sent) and while it is held there."""
    out: list[str | BaseException] = [""] * n

    def run(i: int) -> None:
        try:
            out[i] = q.submit(i)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    threads[0].start()
    end = time.monotonic() + 10
    while not first_sent() and time.monotonic() < end:
        time.sleep(0.005)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(30)
    return out


def _dispatch_holding_the_first(stubs: list[_Stub], held: asyncio.Event) -> tuple[_Stub, HttpDispatch]:
    """A stub that answers submits with their ids, holding the first request 0.5 s (held is
    set when it came: the other threads submit meanwhile)."""

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        if len(s.requests) == 1:
            held.set()
            await asyncio.sleep(0.5)
        w.write(_echo_ids(head, s.bodies[len(s.requests) - 1]))
        return True

    s, d = _dispatch(stubs, handler)
    return s, d


def test_blocking_submits_made_meanwhile_go_together_on_a_callers_thread(stubs: list[_Stub]) -> None:
    # Seven submits made while the first is in flight wait, and one of their callers sends
    # them as one batch once it is answered: two requests for eight submits, no loop.
    held = asyncio.Event()
    s, d = _dispatch_holding_the_first(stubs, held)
    try:
        out = _submit_from_threads(SyncQueue("q", dispatch=d), 8, held.is_set)
        sent = [msgpack.unpackb(b) for b in s.bodies]
        assert [r.split(b" ")[1].rsplit(b"/", 1)[1] for r in s.requests] == [b"invocations", b"batch"]
        assert sorted(b["payload"] for b in sent[1]["invocations"]) == sorted(
            msgpack.packb(i) for i in range(1, 8)
        )
        assert out[0] == sent[0]["id"]
        assert sorted(map(str, out[1:])) == sorted(b["id"] for b in sent[1]["invocations"])
        assert d._portal._loop is None  # every request sent on a caller's thread
    finally:
        d.close()


def test_the_next_combined_request_waits_for_the_callers_just_answered(
    stubs: list[_Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first thread submits twice in a row; its second submit is made after its first
    # was answered, and joins the seven that waited meanwhile: one batch of eight, not
    # seven then one (the old behaviour: three requests).
    monkeypatch.setattr(lakeshore.queue, "_GATHER_SECONDS", 30.0)  # the wait ends when it comes
    held = asyncio.Event()
    s, d = _dispatch_holding_the_first(stubs, held)
    try:
        q = SyncQueue("q", dispatch=d)
        second: list[str] = []
        original = q.submit

        def twice(payload: object) -> str:
            first = original(payload)
            if payload == 0:
                second.append(original(100))
            return first

        monkeypatch.setattr(q, "submit", twice)
        start = time.monotonic()
        out = _submit_from_threads(q, 8, held.is_set)
        assert time.monotonic() - start < 20  # the wait ended when the caller came, not at 30 s
        sent = [msgpack.unpackb(b) for b in s.bodies]
        assert len(sent) == 2, [r.split(b" ")[1] for r in s.requests]
        assert sorted(msgpack.unpackb(b["payload"]) for b in sent[1]["invocations"]) == [*range(1, 8), 100]
        assert second == [b["id"] for b in sent[1]["invocations"] if b["payload"] == msgpack.packb(100)]
        assert sorted(map(str, out[1:])) == sorted(
            b["id"] for b in sent[1]["invocations"] if b["payload"] != msgpack.packb(100)
        )
    finally:
        d.close()


def test_a_blocking_submit_waits_to_gather_only_right_after_an_answer(
    stubs: list[_Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One thread submitting in a row never waits (each of its requests answered it alone);
    # after a batch of two answered with nothing waiting, a submit made once the wait has
    # passed goes at once, not waiting for the batch's callers (who are not coming). The
    # wait is 30 s, so "at once" is "under half of it", not a guess at how fast a loaded
    # machine runs five requests (0.9 s of a 1 s wait was); the last answer is moved back
    # past it rather than slept past.
    monkeypatch.setattr(lakeshore.queue, "_GATHER_SECONDS", 30.0)
    held = asyncio.Event()

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        if len(s.requests) == 6:
            held.set()
            # Answered once the two other threads' submits wait for the next request, not
            # after 0.3 s that a loaded machine may not have run them in.
            end = time.monotonic() + 30
            while len(q._core._combined.waiting) < 2 and time.monotonic() < end:
                await asyncio.sleep(0.005)
        w.write(_echo_ids(head, s.bodies[len(s.requests) - 1]))
        return True

    s, d = _dispatch(stubs, handler)
    try:
        q = SyncQueue("q", dispatch=d)
        start = time.monotonic()
        ids = [q.submit(i) for i in range(5)]
        assert time.monotonic() - start < 15
        assert ids == [msgpack.unpackb(b)["id"] for b in s.bodies]
        # The batch of two waits for request 6's caller, just answered, to come back: 1 s.
        monkeypatch.setattr(lakeshore.queue, "_GATHER_SECONDS", 1.0)
        out = _submit_from_threads(q, 3, held.is_set)  # request 6 alone, then one of two
        assert all(isinstance(i, str) for i in out), out
        assert sorted(msgpack.unpackb(b["payload"]) for b in msgpack.unpackb(s.bodies[6])["invocations"]) == [1, 2]
        monkeypatch.setattr(lakeshore.queue, "_GATHER_SECONDS", 30.0)
        combined = q._core._combined
        with combined.lock:
            combined.answered -= 60  # past the wait for the batch's callers
        start = time.monotonic()
        q.submit(7)
        assert time.monotonic() - start < 15
        assert msgpack.unpackb(s.bodies[-1])["payload"] == msgpack.packb(7)
    finally:
        d.close()


@pytest.mark.parametrize("how", ["dropped", "refused"])
def test_a_combined_batch_dropped_or_refused_sends_each_submit_its_own_way(stubs: list[_Stub], how: str) -> None:
    # The batch is dropped without an answer, or refused as a whole (one bad item): each of
    # its submits is sent again the loop's way with its own id, and gets its own answer.
    held = asyncio.Event()
    batches = 0

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        nonlocal batches
        body = s.bodies[len(s.requests) - 1]
        if len(s.requests) == 1:
            held.set()
            await asyncio.sleep(0.5)
        elif b"/invocations/batch " in head:
            batches += 1
            if how == "dropped" and batches == 1:
                return False  # closed without an answer
            if how == "refused":
                err = msgpack.packb({"code": "invalid", "message": "invocations[0].payload: bad"})
                w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/msgpack\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(err), err))
                return True
        elif how == "refused" and msgpack.unpackb(body)["payload"] == msgpack.packb(3):  # the bad item, alone
            err = msgpack.packb({"code": "invalid", "message": "payload: bad"})
            w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/msgpack\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(err), err))
            return True
        w.write(_echo_ids(head, body))
        return True

    s, d = _dispatch(stubs, handler, retry_for=5.0)
    try:
        out = _submit_from_threads(SyncQueue("q", dispatch=d), 8, held.is_set)
        sent = [msgpack.unpackb(b) for b in s.bodies]
        assert b"/invocations/batch " in s.requests[1]
        first_batch = {msgpack.unpackb(b["payload"]): b["id"] for b in sent[1]["invocations"]}
        assert set(first_batch) == set(range(1, 8))
        for i in range(1, 8):
            if how == "refused" and i == 3:
                assert isinstance(out[i], errors.InvalidError), out[i]
            else:
                assert out[i] == first_batch[i]  # the same id, sent again: never enqueued twice
        # Every later request carries only ids of that batch.
        later = [b for r in sent[2:] for b in (r["invocations"] if "invocations" in r else [r])]
        assert {b["id"] for b in later} <= set(first_batch.values())
    finally:
        d.close()


def test_an_interrupted_waiting_submit_is_not_sent_and_the_others_go_on(stubs: list[_Stub]) -> None:
    # Ctrl-C on the main thread while its submit waits behind another thread's request: it
    # is dropped unsent (KeyboardInterrupt), and the queue's submits go on afterwards.
    # The first request is held until the interrupt was seen (not for a fixed time: on a
    # loaded machine the interrupted submit could start after a timed hold had ended, and
    # then go through uninterrupted).
    s, d, held, release = _holding_the_first(stubs)
    # SIGINT must raise KeyboardInterrupt here whatever handler the process has now.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        q = SyncQueue("q", dispatch=d)
        first: list[str] = []
        leader = threading.Thread(target=lambda: first.append(q.submit(0)))
        leader.start()
        end = time.monotonic() + 10
        while not held.is_set() and time.monotonic() < end:
            time.sleep(0.005)
        try:
            with pytest.raises(KeyboardInterrupt):
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
                q.submit(99)
        finally:
            release.set()
        leader.join(10)
        assert first and first[0] == msgpack.unpackb(s.bodies[0])["id"]
        assert q.submit(1) == msgpack.unpackb(s.bodies[-1])["id"]
        assert all(msgpack.packb(99) != msgpack.unpackb(b)["payload"] for b in s.bodies)
        assert len(s.requests) == 2
    finally:
        signal.signal(signal.SIGINT, previous)
        d.close()


def test_a_blocking_submit_on_the_client_loops_thread_raises_and_sends_nothing(stubs: list[_Stub]) -> None:
    # A blocking call made on the client's own loop thread (a callback of one of its
    # futures) could never be answered: it raises RuntimeError, and, as every other blocking
    # verb there, sends nothing. Before, the submit was handed to the loop first, so the job
    # was made although the call raised.
    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        w.write(_echo_ids(head, s.bodies[len(s.requests) - 1]))
        return True

    s, d = _dispatch(stubs, handler)
    try:
        q = SyncQueue("q", dispatch=d)
        ran: list[BaseException | str] = []
        done = threading.Event()

        def on_loop() -> None:
            try:
                ran.append(q.submit("on the loop"))
            except BaseException as e:  # noqa: BLE001 - the test reads it
                ran.append(e)
            done.set()

        d._portal.loop.call_soon_threadsafe(on_loop)
        assert done.wait(10)
        assert isinstance(ran[0], RuntimeError), ran
        time.sleep(0.3)  # a request handed to the loop would have reached the stub by now
        assert not [r for r in s.requests if b"/invocations" in r], s.requests
    finally:
        d.close()


def test_a_submit_interrupted_twice_as_it_is_handed_the_next_batch_sends_it(
    stubs: list[_Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The main thread's submit waits behind another thread's request, is taken as the first
    # of the next batch (its caller to send it), and a Ctrl-C comes as its wake is released,
    # then a second one. It raises KeyboardInterrupt, but only once the batch it was handed
    # is sent: the other caller of that batch gets its id, and the queue's blocking submits
    # go on. Before, the second interrupt left the batch unsent and its callers, and every
    # later blocking submit of the queue, waiting forever.
    s, d, held, release = _holding_the_first(stubs)
    interrupted = threading.current_thread()

    class _Interrupted:
        """The interrupted caller's wake: its first acquire is interrupted once the lock
        was released to it (then left released, as by an interrupt that came just after),
        the second at once (a second Ctrl-C); later ones acquire."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.calls = 0

        def acquire(self) -> bool:
            self.calls += 1
            if self.calls == 1:
                self.lock.acquire()
                self.lock.release()
                raise KeyboardInterrupt
            if self.calls == 2:
                raise KeyboardInterrupt
            return self.lock.acquire()

        def release(self) -> None:
            self.lock.release()

    original = lakeshore.queue._CombinedSubmit.__init__

    def init(self: lakeshore.queue._CombinedSubmit, body: dict[str, object]) -> None:
        original(self, body)
        if threading.current_thread() is interrupted:
            wake = _Interrupted()
            wake.lock.acquire()  # held until answered or handed a batch, as the real wake
            self.wake = wake  # type: ignore[assignment]

    monkeypatch.setattr(lakeshore.queue._CombinedSubmit, "__init__", init)
    try:
        q = SyncQueue("q", dispatch=d)
        out: dict[str, str] = {}
        leader = threading.Thread(target=lambda: out.update(first=q.submit(0)), daemon=True)
        leader.start()
        end = time.monotonic() + 10
        while not held.is_set() and time.monotonic() < end:
            time.sleep(0.005)
        other = threading.Thread(target=lambda: out.update(other=q.submit(2)), daemon=True)

        def queue_the_other() -> None:
            # Once the main thread's submit waits, another thread's joins it, then the
            # first request is answered.
            while not q._core._combined.waiting and time.monotonic() < end:
                time.sleep(0.005)
            other.start()
            while len(q._core._combined.waiting) < 2 and time.monotonic() < end:
                time.sleep(0.005)
            release.set()

        threading.Thread(target=queue_the_other, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            q.submit(1)
        other.join(10)
        leader.join(10)
        assert not other.is_alive(), "the other caller of the handed batch was never answered"
        sent = [msgpack.unpackb(b) for b in s.bodies]
        assert len(sent) == 2 and b"/invocations/batch " in s.requests[1]
        batch = {msgpack.unpackb(b["payload"]): b["id"] for b in sent[1]["invocations"]}
        assert sorted(batch) == [1, 2]
        assert out == {"first": sent[0]["id"], "other": batch[2]}
        assert q.submit(3) == msgpack.unpackb(s.bodies[-1])["id"]  # the queue's submits go on
    finally:
        release.set()
        d.close()


def _signal_main_when(held: threading.Event) -> None:
    """Send SIGUSR1 to the main thread once ``held`` is set (its request held by the
    server): a real signal, sent to the main thread, as os.kill may wake another thread
    instead and leave the main thread's read uninterrupted."""
    main = threading.main_thread().ident
    assert main is not None
    if held.wait(10):
        signal.pthread_kill(main, signal.SIGUSR1)


def test_a_submit_from_a_signal_handler_during_a_submit_raises_at_once(stubs: list[_Stub]) -> None:
    # A SIGUSR1 handler (user code, as a SIGTERM handler that submits a last job) submits
    # while the main thread's own blocking submit is in flight, its request held by the
    # server. The handler's submit cannot wait for the submit it interrupted (that one goes
    # on only once the handler returns), so it raises RuntimeError at once, sending
    # nothing, and the interrupted submit then gets its id. Before, the handler's submit
    # queued behind the request its own thread was sending and waited forever (here a
    # watchdog's SIGUSR2 after 10 s ends the wait with Hung).
    s, d, held, release = _holding_the_first(stubs)
    q = SyncQueue("q", dispatch=d)
    got: dict[str, object] = {}

    def on_usr1() -> None:
        started = time.monotonic()
        try:
            got["nested"] = q.submit(2)
        except RuntimeError as e:
            got["error"] = e
        finally:
            got["seconds"] = time.monotonic() - started
            release.set()

    with handlers(on_usr1, "the handler's submit waited for the submit it interrupted", until=release):
        threading.Thread(target=_signal_main_when, args=(held,), daemon=True).start()
        first = q.submit(1)
        assert "nested" not in got, got
        assert isinstance(got.get("error"), RuntimeError), got
        assert "signal handler" in str(got["error"]) and "'q'" in str(got["error"]), got["error"]
        assert isinstance(got["seconds"], float) and got["seconds"] < 1, got
        assert len(s.bodies) == 1, "the handler's submit sent nothing"
        assert first == msgpack.unpackb(s.bodies[0])["id"]
        assert q.submit(3) == msgpack.unpackb(s.bodies[-1])["id"]  # the queue's submits go on
        # A handler that interrupts no submit of its thread submits as usual.
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler runs before this returns
        assert got.get("nested") == msgpack.unpackb(s.bodies[-1])["id"], got
        release.set()
        d.close()


def test_a_submit_to_another_queue_from_a_signal_handler_during_a_submit_is_sent(stubs: list[_Stub]) -> None:
    # The refusal above is for the queue whose submit the handler interrupted (its
    # combining lock and batcher may be held by the interrupted frame): a handler's submit
    # to another queue shares nothing the interrupted frame holds (the blocking connections
    # are kept without a lock) and is sent and answered while the interrupted request is
    # still held; a submit to the interrupted queue from the same handler is still refused.
    # Before, every submit from the handler was refused, whichever queue it named.
    s, d, held, release = _holding_the_first(stubs)
    q = SyncQueue("q", dispatch=d)
    other = SyncQueue("other", dispatch=d)
    got: dict[str, object] = {}

    def on_usr1() -> None:
        try:
            got["other"] = other.submit(2)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            got["other_error"] = e
        try:
            got["same"] = q.submit(3)
        except RuntimeError as e:
            got["same_error"] = e
        finally:
            release.set()

    try:
        with handlers(on_usr1, "the handler's submit waited for the submit it interrupted", until=release):
            threading.Thread(target=_signal_main_when, args=(held,), daemon=True).start()
            first = q.submit(1)
            assert "other_error" not in got, got
            assert len(s.bodies) == 2, "the handler's submit to the other queue was sent, the same queue's not"
            assert got.get("other") == msgpack.unpackb(s.bodies[1])["id"], got
            assert b"/queues/other/" in s.requests[1], s.requests[1]
            assert "same" not in got and isinstance(got.get("same_error"), RuntimeError), got
            assert "'q'" in str(got["same_error"]), got["same_error"]
            assert first == msgpack.unpackb(s.bodies[0])["id"]
    finally:
        d.close()


class _SignalOnPop:
    """Stands in for a BlockingPool's idle connections: the first ``pop`` takes one, then
    sends ``signum`` to the main thread (the caller's own) and returns only once its
    handler ran, so the handler runs in the middle of the pool's checkout (in the old
    pool, under its lock)."""

    def __init__(self, idle: Iterable[object], signum: int, ran: threading.Event) -> None:
        self.idle = list(idle)
        self.signum = signum
        self.ran = ran
        self.fired = False

    def pop(self) -> object:
        conn = self.idle.pop()
        if not self.fired:
            self.fired = True
            interrupt_main(self.signum, self.ran)
        return conn

    def append(self, conn: object) -> None:
        self.idle.append(conn)

    def clear(self) -> None:
        self.idle.clear()

    def __len__(self) -> int:
        return len(self.idle)

    def __iter__(self) -> Iterator[object]:
        return iter(self.idle)


@pytest.mark.parametrize("verb", ["wait", "result"])
def test_a_wait_from_a_signal_handler_in_the_middle_of_a_checkout_is_answered(stubs: list[_Stub], verb: str) -> None:
    # A SIGUSR1 handler (user code: a SIGTERM handler that waits for a last result) calls
    # SyncQueue.wait/result while the main thread's own blocking wait is taking a
    # connection from the shared blocking connections. The handler's call is answered on
    # a connection of its own, and then the interrupted wait is. Before, the pool's
    # checkout held a lock, and the handler's call waited for it forever (here a
    # watchdog's SIGUSR2 after 10 s ends the wait with Hung).
    def done(inv_id: str) -> bytes:
        return _answer({"done": True, "invocation": {"id": inv_id, "state": "succeeded", "result": msgpack.packb(inv_id)}})

    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        w.write(done(head.split(b"/")[3].decode()))
        return True

    s, d = _dispatch(stubs, handler)
    q = SyncQueue("q", dispatch=d)
    call = q.wait if verb == "wait" else q.result
    got: dict[str, object] = {}
    ran = threading.Event()
    finished = threading.Event()

    def on_usr1() -> None:
        try:
            got["nested"] = call(inner, timeout=30)
        finally:
            ran.set()

    outer, inner = new_ulid(), new_ulid()
    try:
        with handlers(on_usr1, "the handler's call waited for the checkout it interrupted", until=finished):
            first = new_ulid()
            assert q.wait(first, timeout=30).id == first  # leaves one idle blocking connection
            pool = d._transport._servers[0].blocking_pool()
            assert pool is not None and len(pool._idle) == 1
            pool._idle = _SignalOnPop(pool._idle, signal.SIGUSR1, ran)  # type: ignore[assignment]
            answer = call(outer, timeout=30)
            finished.set()
            assert ran.is_set()
            if verb == "wait":
                assert isinstance(answer, lakeshore.Invocation) and answer.id == outer
                assert isinstance(got["nested"], lakeshore.Invocation) and got["nested"].id == inner, got
            else:
                assert (answer, got["nested"]) == (outer, inner), got
            # The handler's request went while the interrupted wait was taking its connection.
            assert [r.split(b"/")[3].decode() for r in s.requests] == [first, inner, outer], s.requests
            assert s.connections == 2, "the handler's call went on a connection of its own"
            assert q.wait(first, timeout=30).id == first  # the connections go on serving
    finally:
        d.close()


def test_a_call_from_a_signal_handler_while_the_client_loop_starts_is_answered(
    stubs: list[_Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The main thread's first call of a dispatch starts the client's loop (Portal.loop); a
    # SIGUSR1 handler that calls the dispatch while that start is under way (here: as its
    # loop is made) is answered, on a loop the handler starts, and the interrupted start then
    # uses that loop and ends its own: one loop thread is left. Before, the start held a
    # lock across its waits (the thread's start, the loop's readiness), and the handler's
    # call waited for it forever (here a watchdog's SIGUSR2 after 10 s ends it with Hung).
    async def handler(head: bytes, _r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        w.write(_answer({"id": head.split(b" ")[1].split(b"/")[3].decode(), "state": "queued"}))
        return True

    s, d = _dispatch(stubs, handler)
    q = SyncQueue("q", dispatch=d)
    got: dict[str, object] = {}
    ran = threading.Event()
    finished = threading.Event()
    outer, inner = new_ulid(), new_ulid()

    def on_usr1() -> None:
        try:
            got["nested"] = q.get(inner)
        finally:
            ran.set()

    made = asyncio.new_event_loop
    fired: list[bool] = []

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = made()
        if not fired:
            fired.append(True)
            interrupt_main(signal.SIGUSR1, ran)
        return loop

    def loop_threads() -> int:
        return sum(t.name == d._portal._name for t in threading.enumerate())

    before = loop_threads()
    monkeypatch.setattr(asyncio, "new_event_loop", new_event_loop)
    try:
        with handlers(on_usr1, "the handler's call waited for the loop's start it interrupted", until=finished):
            assert d._portal._loop is None
            answer = q.get(outer)
            finished.set()
            assert ran.is_set() and answer.id == outer
            nested = got["nested"]
            assert isinstance(nested, lakeshore.Invocation) and nested.id == inner, got
            _wait_until(lambda: loop_threads() == before + 1, "the interrupted start's own loop to end")
            assert q.get(outer).id == outer  # the dispatch goes on, on the one loop
    finally:
        d.close()


def test_refused_connections_are_unavailable() -> None:
    # The port stays bound by a socket that never listens (Go's internal/porttest): Linux
    # refuses every connection to it and no other socket can take it while the test runs.
    # A closed socket's port could be taken by another process (CI runs the Go packages'
    # servers beside this suite) before the dial, which then reached that process.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        d = HttpDispatch(f"http://127.0.0.1:{port}", retry_for=0.2)
        try:
            with pytest.raises(errors.UnavailableError, match="cannot reach the Lakeshore server"):
                SyncQueue("q", dispatch=d).submit(1)
        finally:
            d.close()


def test_the_read_timeout_is_per_read() -> None:
    async def main() -> None:
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                await r.readuntil(b"\r\n\r\n")
                if not served:
                    served.append(1)
                    data = _answer({"ok": True})
                    for i in range(len(data)):  # a byte every 0.1 s: each read within the timeout
                        w.write(data[i : i + 1])
                        await w.drain()
                        await asyncio.sleep(0.1 if i < 4 else 0)
                await r.read()  # the second request is never answered
            finally:
                w.close()

        served: list[int] = []
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Pool(asyncio.get_running_loop(), Endpoint.with_headers("127.0.0.1", port, None, f"127.0.0.1:{port}", {}, 1.0))
        try:
            t0 = time.monotonic()
            answer = await pool.request("GET", "/slow", None, {}, 0.25)
            assert answer.status_code == 200 and msgpack.unpackb(answer.content) == {"ok": True}
            assert time.monotonic() - t0 >= 0.4  # longer than one timeout, no read later than it
            with pytest.raises(httpx.ReadTimeout):
                await pool.request("GET", "/never", None, {}, 0.2)
        finally:
            pool.close()
            server.close()

    asyncio.run(main())


def test_an_abandoned_claims_answer_that_comes_as_its_wait_ends_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose callers all went away half-closes its connection and waits
    CLAIM_ANSWER_WAIT for the answer (its jobs go to the orphan hook). An answer that
    arrives in the same loop turn as that bound (the loop busy meanwhile) is kept, not
    cancelled away with the jobs in it (they would stay held until their lease expires)."""
    monkeypatch.setattr(_http11, "CLAIM_ANSWER_WAIT", 0.2)
    answered = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            while conn.recv(65536):  # the body, then the client's half-close (EOF)
                pass
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nclaimed")
            answered.set()

    server = threading.Thread(target=serve, daemon=True)
    server.start()

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        pool = Pool(loop, Endpoint.of(f"http://127.0.0.1:{port}", uds=None, token=None, connect_timeout=5))
        abandon = _http11.Abandon()

        async def claim() -> _http11.Answer:
            _http11.abandon_var.set(abandon)
            return await pool.request("POST", "/v1/claim", b"{}", {}, 30)

        task = asyncio.ensure_future(claim())
        while not abandon.sent:
            await asyncio.sleep(0.001)
        abandon.fire(task)  # every caller went away: half-close, wait for the answer
        # The loop is busy until the answer is in the socket and the bound has passed: both
        # are ready in its next turn.
        assert answered.wait(10)
        time.sleep(0.4)
        answer = await task
        pool.close()
        return answer.content

    try:
        assert asyncio.run(main()) == b"claimed"
    finally:
        listener.close()
        server.join(5)


def test_a_loop_start_interrupted_at_any_bytecode_leaves_one_loop_on_its_own_thread() -> None:
    # A signal handler runs between two bytecodes of the thread it interrupts. Here the
    # handler's work (starting the portal's loop, as any dispatch call does) is run from an
    # opcode tracer at each bytecode boundary of the main thread's Portal.loop in turn, the
    # same point a real signal handler may run at. Whatever the boundary, one loop must be
    # left running, and the portal's thread must be that loop's (in_portal true on it).
    # Before, the start checked for a loop, then stored its thread, then its loop: a handler
    # run between those stores left the handler's thread paired with the start's loop
    # (in_portal false on the portal's own loop, so a blocking call made there hung instead
    # of raising), and one run between the check and the stores left its loop running for
    # ever, unreachable.
    def one_loop(boundary: int, loop: object, handlers: object, portal: Any, made: list[asyncio.AbstractEventLoop]) -> None:
        try:
            assert handlers is loop, f"boundary {boundary}: the handler and the start use different loops"
            assert isinstance(loop, asyncio.AbstractEventLoop), f"boundary {boundary}: the start got {loop!r}"

            async def on_loop() -> bool:
                return bool(portal.in_portal())

            assert asyncio.run_coroutine_threadsafe(on_loop(), loop).result(10), (
                f"boundary {boundary}: the portal's thread is not its loop's"
            )
            for other in made:
                if other is not loop:
                    # The start that lost stops its loop; a loop left running is leaked.
                    _wait_until(lambda: other.is_closed(), f"boundary {boundary}: a second loop to end")
        finally:
            portal.close()

    assert _at_each_loop_start_boundary(lambda portal: portal.loop, one_loop) > 10


def _at_each_loop_start_boundary(inner: Callable[[Any], object], check: Callable[[int, object, object, Any, list[asyncio.AbstractEventLoop]], None]) -> int:
    """:func:`_at_each_boundary` over the start of a fresh Portal's loop (``Portal.loop``),
    with ``inner(portal)`` run at each boundary and every loop ``asyncio.new_event_loop``
    makes meanwhile recorded. ``check`` gets the boundary, what the start returned (its loop,
    or the code of the DispatchError it raised), what ``inner`` returned, the portal and the
    loops made. Every portal is closed at the end. Returns the number of boundaries tried."""
    from lakeshore._transport import Portal

    portals: list[Portal] = []
    made: list[asyncio.AbstractEventLoop] = []
    real_new = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        made.append(real_new())
        return made[-1]

    def start() -> object:
        made.clear()
        portals.append(Portal(name="lakeshore-portal-bytecode-test"))
        try:
            return portals[-1].loop
        except errors.DispatchError as e:
            return e.code

    asyncio.new_event_loop = new_event_loop
    try:
        code = Portal.loop.fget.__code__  # type: ignore[attr-defined]
        return _at_each_boundary(
            code, start, lambda: inner(portals[-1]), lambda boundary, got, fired: check(boundary, got, fired, portals[-1], made)
        )
    finally:
        asyncio.new_event_loop = real_new
        for p in portals:
            p.close()


def _at_each_boundary(code: Any, outer: Callable[[], Any], inner: Callable[[], Any], check: Callable[[int, Any, Any], None]) -> int:
    """Run ``outer`` once per bytecode boundary of its frame of ``code``, with ``inner`` run
    at that boundary (from an opcode tracer, on the same thread): the point at which a
    signal handler, or another thread switched to by the interpreter, may run. ``check``
    gets the boundary and both outcomes. Returns the number of boundaries tried."""
    boundary = 0
    while True:
        count = 0
        fired: list[Any] = []

        def local(frame: Any, event: str, _arg: Any) -> Any:
            nonlocal count
            if event == "opcode":
                if count == boundary and not fired:
                    fired.append(inner())
                count += 1
            return local

        def tracer(frame: Any, event: str, _arg: Any) -> Any:
            if frame.f_code is code and not fired and count == 0:
                frame.f_trace_opcodes = True
                return local
            return None

        sys.settrace(tracer)
        try:
            got = outer()
        finally:
            sys.settrace(None)
        if not fired:
            return boundary
        check(boundary, got, fired[0])
        boundary += 1


def test_blocking_pools_made_at_once_are_one_and_a_close_at_any_point_closes_them() -> None:
    # The blocking connections' pool is made on first use (again in a forked child). Two
    # threads making it at once must get the same pool: before, each stored its own and the
    # one overwritten kept its connections out of close_blocking's reach. A close_blocking
    # run at any point of the making must leave no open pool behind: before, one run between
    # the making's closed check and its store found no pool to close, and the pool stored
    # after was handed out and kept open connections after the close.
    from lakeshore._transport import _Server

    code = _Server.blocking_pool.__code__
    servers: list[_Server] = []

    def fresh() -> _Server:
        servers.append(_Server("http://127.0.0.1:9", None, 1.0, None))
        return servers[-1]

    def same_pool(boundary: int, outer: Any, inner: Any) -> None:
        assert outer is inner, f"boundary {boundary}: two pools for one process"

    n = _at_each_boundary(code, lambda: fresh().blocking_pool(), lambda: servers[-1].blocking_pool(), same_pool)
    assert n > 5

    def closed_after(boundary: int, outer: Any, _inner: Any) -> None:
        assert outer is None or outer.closed, f"boundary {boundary}: an open pool handed out after the close"
        assert servers[-1].blocking_pool() is None

    n = _at_each_boundary(code, lambda: fresh().blocking_pool(), lambda: servers[-1].close_blocking(), closed_after)
    assert n > 5


def test_a_close_run_at_any_bytecode_of_the_loop_start_leaves_no_loop_running() -> None:
    # A handler (or a finalizer) that closes the dispatch while its thread is starting the
    # portal's loop: whatever the boundary, the start raises closed or returns a loop the
    # close then stops, and no loop is left running. Before, a close run between the
    # start's check and its stores found no loop to stop, and the start then published one
    # on a closed portal that nothing would ever stop.
    def none_running(boundary: int, got: object, _inner: object, _portal: Any, made: list[asyncio.AbstractEventLoop]) -> None:
        # No close again here: a second close would stop a loop the first one missed.
        for loop in made:
            _wait_until(lambda: loop.is_closed(), f"boundary {boundary}: a loop left running ({got!r})")

    assert _at_each_loop_start_boundary(lambda portal: portal.close(), none_running) > 10


def test_a_blocking_pool_close_at_any_bytecode_of_a_check_in_leaves_no_socket_open() -> None:
    # The lock-free pool's close (BlockingPool.close: closed, then the idle ones taken) and a
    # check-in (append, then closed checked again) run at each other's every bytecode
    # boundary, as another thread or a signal handler may: the connection checked in is
    # closed at the end either way, and the pool keeps none.
    def pair() -> tuple[_http11.BlockingPool, socket.socket]:
        a, b = socket.socketpair()
        b.close()
        return _http11.BlockingPool(Endpoint.of("http://127.0.0.1:9", uds=None, token=None, connect_timeout=1.0)), a

    pools: list[tuple[_http11.BlockingPool, socket.socket]] = []

    def check_in() -> None:
        pools.append(pair())
        pool, sock = pools[-1]
        pool._checkin(_http11._BlockingConnection(sock))

    def close_first() -> None:
        pools.append(pair())
        pools[-1][0].close()

    def none_open(boundary: int, _outer: object, _inner: object) -> None:
        pool, sock = pools[-1]
        assert sock.fileno() == -1 and not pool._idle, f"boundary {boundary}: a connection kept after close"

    try:
        assert _at_each_boundary(_http11.BlockingPool._checkin.__code__, check_in, lambda: pools[-1][0].close(), none_open) > 5
    finally:
        for pool, sock in pools:
            pool.close()
            sock.close()

    def check_in_now() -> None:
        _a, sock = pools[-1]
        pools[-1][0]._checkin(_http11._BlockingConnection(sock))

    try:
        assert _at_each_boundary(_http11.BlockingPool.close.__code__, close_first, check_in_now, none_open) > 2
    finally:
        for pool, sock in pools:
            pool.close()
            sock.close()
