"""A value from the server that this client cannot decode: a clear error naming the value
and the fix, and nothing left half-done. A real server validates every value it stores, so
most answers come from a stub on loopback that plays a newer (or broken) server; the last test
sends a real server a valid value numpy cannot hold."""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from lakeshore import DispatchError, HttpDispatch, Queue, SyncQueue
from lakeshore._ids import new_ulid
from lakeshore.errors import InvalidError

UNKNOWN_EXT = msgpack.packb(msgpack.ExtType(9, b"\x00\x01"))  # ext 9: no such type (yet)
TRUNCATED = b"\x92\x01"  # an array of two with one element
GOOD = msgpack.packb(42)


class _Stub(http.server.BaseHTTPRequestHandler):
    results: dict[str, bytes] = {}
    jobs: list[dict[str, Any]] = []
    settles: list[tuple[str, dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, body: Any) -> None:
        data = msgpack.packb(body, use_bin_type=True)
        self.send_response(200)
        self.send_header("Content-Type", "application/msgpack")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _invocation(self, id: str) -> dict[str, Any]:
        return {"id": id, "namespace": "default", "queue": "q", "state": "succeeded", "attempt": 1, "result": self.results[id]}

    def do_GET(self) -> None:
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "invocations"] and len(parts) >= 3 and parts[2] in self.results:
            inv = self._invocation(parts[2])
            self._answer({"done": True, "invocation": inv} if parts[3:] == ["wait"] else inv)
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = msgpack.unpackb(self.rfile.read(int(self.headers.get("Content-Length") or 0)), raw=False)
        path = self.path.split("?")[0]
        if path.endswith("/claim"):
            jobs, _Stub.jobs = _Stub.jobs, []
            self._answer({"jobs": jobs})
        elif path.endswith("/settle"):
            _Stub.settles.append((path.split("/")[3], body))
            self._answer({})
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture
def stub() -> Iterator[HttpDispatch]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    d = HttpDispatch(f"http://127.0.0.1:{srv.server_address[1]}", retry_for=1.0)
    try:
        yield d
    finally:
        d.close()
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    ("data", "says"),
    [(UNKNOWN_EXT, "upgrade this package"), (TRUNCATED, "truncated or corrupt")],
    ids=["unknown-extension", "truncated"],
)
def test_a_result_that_does_not_decode(stub: HttpDispatch, data: bytes, says: str) -> None:
    bad, good = new_ulid(), new_ulid()
    _Stub.results.update({bad: data, good: GOOD})
    q = SyncQueue("q", dispatch=stub)
    with pytest.raises(InvalidError) as e:
        q.result(bad, timeout=5)
    assert isinstance(e.value, DispatchError)
    msg = str(e.value)
    assert f"result of {bad} does not decode" in msg and says in msg, msg
    assert "docs/wire.md" in msg or "pip install" in msg
    # The same from asyncio, and the client is left usable: the next result comes.
    aq = Queue("q", dispatch=stub)

    async def both() -> Any:
        with pytest.raises(InvalidError, match="does not decode"):
            await aq.result(bad, timeout=5)
        return await aq.result(good, timeout=5)

    assert asyncio.run(both()) == 42
    assert q.result(good, timeout=5) == 42


def test_a_claimed_payload_that_does_not_decode_is_failed_not_left_leased(stub: HttpDispatch) -> None:
    id = new_ulid()
    _Stub.settles.clear()
    _Stub.jobs = [{"id": id, "token": "t1", "attempt": 1, "queue": "q", "payload": TRUNCATED}]
    q = SyncQueue("q", dispatch=stub)
    with pytest.raises(InvalidError, match=f"payload of {id} does not decode"):
        q.claim()
    # The invocation was failed at once (no retry would read it), not left to its lease.
    assert [(i, b["outcome"], b["token"], b["error"]["type"]) for i, b in _Stub.settles] == [(id, "failed", "t1", "invalid_payload")]
    assert id not in q._core.held


UNHOLDABLE = {"$ndarray": {"dtype": "float32", "shape": [0, 9223372036854775807], "data": ""}}
"""A payload a real server accepts (a valid wire array of zero elements) that numpy cannot
make: no Python worker can read it."""


def test_an_unholdable_payload_from_a_real_server_fails_its_job_and_spares_the_worker(server: Any, qname: str) -> None:
    import httpx

    from lakeshore import run_worker

    def submit() -> str:
        r = httpx.post(
            f"{server.url}/v1/namespaces/default/queues/{qname}/invocations",
            json={"payload": UNHOLDABLE},
            headers={"Authorization": f"Bearer {server.admin_token}"},
        )
        assert r.status_code == 200, r.text  # the server takes it: it is valid
        return str(r.json()["id"])

    d = HttpDispatch(server.url, token=server.admin_token)
    try:
        q = SyncQueue(qname, dispatch=d)

        def failed_invalid(id: str) -> None:
            inv = q.get(id)
            assert inv.state == "failed" and inv.error is not None, inv
            assert inv.error["type"] == "invalid_payload" and "cannot be held by numpy" in inv.error["message"], inv.error

        a = submit()
        with pytest.raises(InvalidError, match=f"payload of {a} does not decode.*cannot be held by numpy"):
            q.claim()
        failed_invalid(a)

        b = submit()
        with pytest.raises(InvalidError, match=f"payload of {b}"), q.working():
            pass
        failed_invalid(b)

        # A worker: the poison job is failed and the worker goes on to the next one.
        c = submit()
        # The good job's id (made by this client) must sort after the poison one's (made by
        # the server): fifo across clients follows their ids' milliseconds, and two ids of
        # one millisecond order at random.
        time.sleep(0.005)
        good = q.submit(3)

        def double(x: int) -> int:
            return 2 * x

        assert run_worker(d, queues={qname: double}, once=True, wait=5, handle_signals=False) == 1
        failed_invalid(c)
        assert q.result(good, timeout=5) == 6
        assert q.count("running") == 0 and q.count("queued") == 0
    finally:
        d.close()


class _WebPage(http.server.BaseHTTPRequestHandler):
    """Another web service at the URL (a captive portal, a proxy's page, a wrong port):
    every request answered 200 with an HTML page, or JSON that is not an object."""

    body = b"<html><body>Welcome</body></html>"
    content_type = "text/html"

    def log_message(self, *args: Any) -> None:
        pass

    def _page(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = do_PUT = do_DELETE = _page


class _JSONList(_WebPage):
    body = b"[1, 2]"
    content_type = "application/json"


@pytest.mark.parametrize("handler", [_WebPage, _JSONList], ids=["html", "json-list"])
def test_an_answer_that_is_not_lakeshore_is_a_dispatch_error(handler: type[_WebPage]) -> None:
    # Before: TypeError "'NoneType' object is not subscriptable" from submit and
    # AttributeError "'NoneType' object has no attribute 'get'" from get: the client read
    # the page as an answer (found by pointing LAKESHORE_URL at another web server).
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    d = HttpDispatch(f"http://127.0.0.1:{srv.server_address[1]}", retry_for=1.0)
    try:
        q = SyncQueue("q", dispatch=d)
        calls = {
            "submit": lambda: q.submit(1),
            "get": lambda: q.get(new_ulid()),
            "result": lambda: q.result(new_ulid(), timeout=2),
            "count": lambda: q.count("queued"),
        }
        for name, call in calls.items():
            with pytest.raises(DispatchError) as e:
                call()
            msg = str(e.value)
            assert "not a Lakeshore answer" in msg and "LAKESHORE_URL" in msg, (name, msg)
            assert e.value.status == 200, name
    finally:
        d.close()
        srv.shutdown()
        srv.server_close()
