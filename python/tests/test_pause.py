"""Issue 29 item 18 from Python: pause and resume a queue on every plane. A paused queue
accepts submits and gives claims nothing; a worker waiting on it gets the job on resume;
over HTTP a token without admin may not pause."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lakeshore import ForbiddenError, HttpDispatch, Queue, SyncQueue

from .conftest import Planes


def test_pause_and_resume(every_plane: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    inv = q.submit({"x": 1})
    assert q.pause() is True
    assert q.pause() is False
    assert q.paused() is True
    later = q.submit({"x": 2})  # a paused queue accepts submits
    assert q.count("queued") == 2
    assert q.claim(wait=0) is None
    # A worker waiting on the paused queue gets the job when the queue resumes.
    got: list[str] = []
    t = threading.Thread(target=lambda: got.extend(j.id for j in [q.claim(wait=20)] if j is not None))
    t.start()
    time.sleep(0.3)
    assert not got
    resumed = time.monotonic()
    assert q.resume() is True
    t.join(20)
    # Woken by the resume, not answered at the end of its 20 s wait: the bound is half the
    # wait, the behaviour's margin, not a verdict on the machine's speed.
    assert got == [inv] and time.monotonic() - resumed < 10
    assert q.resume() is False and q.paused() is False
    job = q.claim(wait=5)
    assert job is not None and job.id == later


def test_pause_async(every_plane: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=every_plane)
        assert await q.pause() is True
        assert await q.paused() is True
        assert await q.resume() is True

    asyncio.run(main())


def test_pause_needs_admin(planes: Planes, qname: str) -> None:
    q = SyncQueue(qname, dispatch=planes.token("serve", "submit,consume,read"))
    with pytest.raises(ForbiddenError):
        q.pause()
