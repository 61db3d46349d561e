"""A long-poll the server drops after holding it (closed without an answer: a fresh
connection whose request an overloaded client sent after the server's header timeout, a
proxy's idle cut) is repeated: a wait is idempotent. A real server does not drop them on
demand, so a stub on loopback plays one that drops every wait's first request."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import msgpack
import pytest

from lakeshore import HttpDispatch, Queue, SyncQueue
from lakeshore._ids import new_ulid

HOLD = 1.0  # seconds the stub holds a wait before dropping it: longer than retry_for


class _Stub:
    """GET /v1/invocations/{id}/wait: the first request of each id is held HOLD seconds
    and its connection closed without an answer; later ones answer done with the id's
    number doubled."""

    def __init__(self, hold: float = HOLD) -> None:
        self.hold = hold
        self.seen: set[str] = set()
        self.dropped = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()

        async def start() -> None:
            self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0, backlog=2048)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.create_task(start())
            self.loop.run_forever()

        self.server: asyncio.Server
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode().split("?")[0]
                id = path.split("/")[3]
                if id not in self.seen:
                    self.seen.add(id)
                    await asyncio.sleep(self.hold)
                    self.dropped += 1
                    writer.close()
                    return
                inv = {"id": id, "queue": "q", "state": "succeeded", "result": msgpack.packb(2 * int(id[-3:]))}
                body = msgpack.packb({"done": True, "invocation": inv}, use_bin_type=True)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: %d\r\n\r\n" % len(body) + body
                )
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


@pytest.fixture
def stub() -> Iterator[_Stub]:
    s = _Stub()
    yield s
    s.close()


def _id(n: int) -> str:
    # A valid ULID whose last three characters are digits (the stub's answer).
    return new_ulid()[:-3] + f"{n:03d}"


def test_a_dropped_wait_is_repeated(stub: _Stub) -> None:
    d = HttpDispatch(f"http://127.0.0.1:{stub.port}", retry_for=0.3)
    try:
        t0 = time.monotonic()
        assert SyncQueue("q", dispatch=d).result(_id(21), timeout=30) == 42
        assert stub.dropped == 1 and time.monotonic() - t0 >= HOLD
    finally:
        d.close()


def test_a_thousand_concurrent_waits_all_dropped_once() -> None:
    # A retry window (2 s) shorter than the hold (3 s), wide enough for a loaded machine's
    # reconnects.
    stub = _Stub(hold=3.0)
    d = HttpDispatch(f"http://127.0.0.1:{stub.port}", retry_for=2.0)
    try:
        ids = [_id(i) for i in range(1000)]

        async def main() -> list[int]:
            q = Queue("q", dispatch=d)
            return list(await asyncio.gather(*(q.result(i, timeout=120) for i in ids)))

        assert asyncio.run(main()) == [2 * i for i in range(1000)]
        assert stub.dropped == 1000
    finally:
        d.close()
        stub.close()
