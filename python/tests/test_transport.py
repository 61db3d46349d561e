"""The client's unix-socket connect (``lakeshore._transport.UnixSocketBackend``) under a full
listen backlog: the race that logged ``asyncio.exceptions.InvalidStateError: invalid state``
from a loop callback in a daemon latency run, the busy spin, the timeout, and the connect
once the backlog has room again — on a real unix socket whose backlog is filled by a
connection that is never accepted."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpcore
import pytest

from lakeshore import UnavailableError
from lakeshore._transport import HttpTransport, UnixSocketBackend


@pytest.fixture
def full_backlog() -> Iterator[tuple[str, socket.socket]]:
    """A listening unix socket whose backlog (0) is full: a nonblocking connect gets EAGAIN."""
    d = tempfile.mkdtemp(prefix="ls-bl-")
    path = os.path.join(d, "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(0)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler.connect(path)  # queued, never accepted: the backlog is full
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        with pytest.raises(BlockingIOError):
            probe.connect(path)
        yield path, srv
    finally:
        probe.close()
        filler.close()
        srv.close()
        shutil.rmtree(d, ignore_errors=True)


def test_a_connect_cancelled_from_another_thread_logs_no_invalid_state(full_backlog: tuple[str, socket.socket]) -> None:
    # The transport's calls are cancelled from other threads (a caller's task cancelled on
    # its own loop, a batch whose callers all left): that cancel lands in a loop turn ahead
    # of the turn's I/O callbacks. anyio's connect_unix then had its queued writer callback
    # set a result on the cancelled future (170 of 200 tries here logged the error).
    path, _ = full_backlog
    seen: list[Any] = []
    transport = HttpTransport("http://lakeshore", None, uds=path, connect_timeout=5.0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
        for i in range(60):
            task = asyncio.ensure_future(transport.call("GET", "/v1/daemon", retry="once"))
            await asyncio.sleep(0.002 + (i % 5) * 0.0005)
            threading.Thread(target=loop.call_soon_threadsafe, args=(task.cancel,)).start()
            with pytest.raises(asyncio.CancelledError):
                await task
        await asyncio.sleep(0.05)  # callbacks still queued run
        await transport.aclose()

    asyncio.run(main())
    assert not seen, [c.get("message") or repr(c.get("exception")) for c in seen]


def test_a_full_backlog_is_waited_out_without_spinning_then_times_out(full_backlog: tuple[str, socket.socket]) -> None:
    path, srv = full_backlog
    backend = UnixSocketBackend()

    async def main() -> None:
        cpu, t0 = time.process_time(), time.monotonic()
        with pytest.raises(httpcore.ConnectTimeout):
            await backend.connect_unix_socket(path, timeout=0.4)
        wall, cpu = time.monotonic() - t0, time.process_time() - cpu
        assert 0.3 < wall < 3
        assert cpu < 0.15, f"the connect spun: {cpu:.2f} s of CPU in {wall:.2f} s"
        # The backlog gets room (the queued connection is accepted): the connect succeeds.
        conn, _ = await asyncio.to_thread(srv.accept)
        try:
            stream = await backend.connect_unix_socket(path, timeout=2)
            await stream.write(b"ping")
            await stream.aclose()
        finally:
            conn.close()

    asyncio.run(main())


def test_the_transport_turns_a_full_backlog_into_unavailable(full_backlog: tuple[str, socket.socket]) -> None:
    path, _ = full_backlog
    transport = HttpTransport("http://lakeshore", None, uds=path, connect_timeout=0.2, retry_for=0.3)

    async def main() -> None:
        try:
            with pytest.raises(UnavailableError, match="cannot reach the local daemon's socket"):
                await transport.call("GET", "/v1/daemon", retry="safe")
        finally:
            await transport.aclose()

    asyncio.run(main())
