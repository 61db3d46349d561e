"""The Batcher on its own (no server): calls that wait behind a batch in flight go
together; a call cancelled while it waits is never sent; a batch whose callers all stopped
waiting has its request cancelled, one with a caller left is not. And the portal's
``run_async``: an answer produced for a caller that went away reaches its orphan hook whole."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterator

import pytest

from lakeshore._transport import Batcher, Portal


class _Send:
    """A send that records each batch and answers it when ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.cancelled: list[list[int]] = []
        self.release = threading.Event()
        self.started = threading.Event()

    async def __call__(self, items: list[int]) -> list[int | BaseException]:
        self.batches.append(items)
        self.started.set()
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            self.cancelled.append(items)
            raise
        return [2 * i for i in items]


@pytest.fixture
def portal() -> Iterator[Portal]:
    p = Portal("test-batcher")
    yield p
    p.close()


def test_calls_waiting_behind_a_batch_go_together_without_the_cancelled_one(portal: Portal) -> None:
    send = _Send()
    b: Batcher[int, int] = Batcher(portal, send, in_flight=1)
    first = b.put(1)
    assert send.started.wait(5)
    waiting = [b.put(i) for i in (2, 3, 4)]
    assert waiting[1].cancel()  # 3 is dropped before it is sent
    send.release.set()
    assert first.result(5) == 2
    assert [waiting[0].result(5), waiting[2].result(5)] == [4, 8]
    assert send.batches == [[1], [2, 4]]
    assert waiting[1].cancelled() and not send.cancelled


def test_a_batch_is_cancelled_only_when_all_its_callers_stop_waiting(portal: Portal) -> None:
    send = _Send()
    b: Batcher[int, int] = Batcher(portal, send, in_flight=1)
    lone = b.put(7)
    assert send.started.wait(5)
    pair = [b.put(8), b.put(9)]
    assert lone.cancel()
    deadline = time.monotonic() + 5
    while len(send.batches) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert send.cancelled == [[7]]  # its only caller left: the request is cancelled
    assert len(send.batches) == 2  # the next batch went out once the cancelled one ended
    assert pair[0].cancel()  # one of two callers left: the request goes on
    send.release.set()
    assert pair[1].result(5) == 18
    assert send.batches == [[7], [8, 9]] and send.cancelled == [[7]]
    with pytest.raises(concurrent.futures.CancelledError):
        pair[0].result(0)


def test_an_answer_produced_after_its_caller_went_away_is_handed_over_whole(portal: Portal) -> None:
    """The interleaving behind test_release_unrun's rare failure under load: a claim's answer
    came (the portal's loop busy with it) while its caller was cancelled. The caller's cancel
    reaches the coroutine's task a loop turn after the answer, so a hand-over run in that task
    was cancelled at its first await — the released job's settle never sent, the job held
    until its lease expired. The hand-over must run in a task the cancel does not reach."""
    started = threading.Event()
    proceed = threading.Event()
    handed: list[str] = []
    finished = threading.Event()

    async def produce() -> str:
        await asyncio.sleep(0)
        started.set()
        # Blocks the portal's loop in the coroutine's last step: the caller's cancel, queued
        # to the coroutine's task meanwhile, runs only after the answer is out.
        proceed.wait(5)
        return "job"

    async def hand_over(answer: str) -> None:
        await asyncio.sleep(0.05)  # a request on its way (the give-back's settle)
        handed.append(answer)
        finished.set()

    async def main() -> None:
        task = asyncio.ensure_future(portal.run_async(produce(), hand_over))
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        proceed.set()

    asyncio.run(main())
    assert finished.wait(5), "the hand-over was cancelled with the caller"
    assert handed == ["job"]
