"""The lean HTTP/1.1 pool of an HttpDispatch (``_http11.Pool``, the hot routes' keep-alive
connections) keeps few sockets once a burst is over: at most ``IDLE_MAX`` idle ones, none
past ``KEEPALIVE_EXPIRY``, none after ``close()``. Before 2026-12-07 a burst of a thousand
concurrent waits (``test_thousand_concurrent_waits_do_not_stall_the_loop``) left a thousand
sockets open for the life of the dispatch. Counted from ``/proc``: the sockets of this
process connected to a real ``lakeshore serve``."""

from __future__ import annotations

import asyncio
import os
import time
from urllib.parse import urlsplit

import pytest

from lakeshore import HttpDispatch, Queue, SyncQueue, _http11
from tests.conftest import Server

N = 300
"""Concurrent waits of a burst: well past IDLE_MAX."""


def _sockets_to(port: int) -> int:
    """How many sockets of this process are connected to ``port`` on the loopback."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    mine = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            mine += 1
    return mine


def _burst(d: HttpDispatch, server: Server, qname: str) -> None:
    """In a fresh ``asyncio.run``: N concurrent waits on ``d``, answered by a worker on a
    dispatch of its own (closed after, so only ``d``'s sockets remain)."""
    q = Queue(qname, dispatch=d)
    worker_d = HttpDispatch(server.url, token=server.admin_token)
    worker = SyncQueue(qname, dispatch=worker_d)

    async def main() -> list[int]:
        ids = await q.submit_many(list(range(N)))
        waits = [asyncio.create_task(q.result(i, timeout=120)) for i in ids]

        def work() -> None:
            for _ in range(N):
                job = worker.claim(wait=10)
                assert job is not None
                worker.ack(job, job.payload * 2)

        await asyncio.to_thread(work)
        return list(await asyncio.gather(*waits))

    try:
        assert asyncio.run(main()) == [2 * i for i in range(N)]
    finally:
        worker_d.close()


@pytest.fixture
def port(server: Server) -> int:
    p = urlsplit(server.url).port
    assert p is not None
    return p


def test_a_burst_of_waits_leaves_at_most_idle_max_sockets_and_close_releases_them(
    server: Server, port: int, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No connection expires during the test: "the idle ones are kept" below must not
    # depend on the count coming within KEEPALIVE_EXPIRY (5 s) of the last answer, which a
    # loaded machine need not keep (expiry has a test of its own, below).
    monkeypatch.setattr(_http11, "KEEPALIVE_EXPIRY", 3600.0)
    d = HttpDispatch(server.url, token=server.admin_token)
    try:
        before = _sockets_to(port)
        _burst(d, server, qname)
        after = _sockets_to(port) - before
        assert after <= _http11.IDLE_MAX, f"{after} sockets left open after {N} concurrent waits ended"
        # A second asyncio.run on the same dispatch works, and leaves no more.
        _burst(d, server, qname)
        after = _sockets_to(port) - before
        assert after <= _http11.IDLE_MAX, f"{after} sockets left open after a second burst"
        assert after > 0  # the idle ones are kept for reuse, not closed at once
    finally:
        d.close()
    assert _sockets_to(port) == before, "close() left sockets of the dispatch open"


def test_idle_sockets_are_closed_when_they_expire(
    server: Server, port: int, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An idle dispatch holds no socket past KEEPALIVE_EXPIRY, even when no call comes to
    # notice (before, an expired connection was closed only when the pool was next used).
    monkeypatch.setattr(_http11, "KEEPALIVE_EXPIRY", 0.2)
    d = HttpDispatch(server.url, token=server.admin_token)
    try:
        before = _sockets_to(port)
        _burst(d, server, qname)
        # Wait for the expiry (a condition, not a verdict on time: the bound only keeps a
        # broken pool from hanging the suite).
        deadline = time.monotonic() + 60
        while _sockets_to(port) > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sockets_to(port) == before, f"{_sockets_to(port) - before} idle sockets outlived KEEPALIVE_EXPIRY"
        # The dispatch connects again for the next call.
        assert SyncQueue(qname, dispatch=d).count("queued") == 0
    finally:
        d.close()
