"""A worker's claim that fails: refused for good (the server answers ``invalid``,
``forbidden``, ``unauthorized``) it stops the worker, raised from run_worker, after one
claim; failed for a transient reason (``unavailable``) it is claimed again after a bounded
exponential backoff with jitter, never at once. Against a real ``lakeshore serve``, its
claims counted by a forwarding proxy of the test's own (docs/python.md, "Claim errors")."""

from __future__ import annotations

import http.client
import http.server
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from lakeshore import HttpDispatch, SyncQueue, run_worker
from lakeshore import worker as worker_mod
from lakeshore.errors import InvalidError
from tests.conftest import Server

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "content-length"}


class _Proxy:
    """Forwards every request to ``upstream``; counts the claims (``…/claim`` and
    ``…/settle-and-claim``), noting when each came, and answers the first ``refuse`` of
    them itself with 503 ``unavailable``."""

    def __init__(self, upstream: str, refuse: int = 0) -> None:
        self.upstream = urlsplit(upstream)
        self.refuse = refuse
        self.claims: list[float] = []
        self.cond = threading.Condition()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                if self.command == "POST" and (path.endswith("/claim") or path.endswith("/settle-and-claim")):
                    with proxy.cond:
                        proxy.claims.append(time.monotonic())
                        n = len(proxy.claims)
                        proxy.cond.notify_all()
                    if n <= proxy.refuse:
                        out = json.dumps({"code": "unavailable", "message": "the test's proxy refuses this claim"}).encode()
                        self.send_response(503)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(out)))
                        self.end_headers()
                        self.wfile.write(out)
                        return
                conn = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1", proxy.upstream.port, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def proxied(server: Server) -> Iterator[tuple[_Proxy, HttpDispatch]]:
    p = _Proxy(server.url)
    d = HttpDispatch(p.url, token=server.admin_token)
    try:
        yield p, d
    finally:
        d.close()
        p.close()


def test_a_claim_the_server_refuses_as_invalid_stops_the_worker_after_one_claim(
    proxied: tuple[_Proxy, HttpDispatch], qname: str
) -> None:
    # A worker id over 128 bytes: the server refuses every claim of it ("invalid", field
    # "worker"). The worker used to take that for a payload that does not decode and claim
    # again at once, for ever: thousands of claims a second.
    proxy, d = proxied
    outcome: list[BaseException | int] = []

    def work() -> None:
        try:
            outcome.append(run_worker(d, queues={qname: lambda x: x}, worker_id="w" * 200, handle_signals=False))
        except BaseException as e:  # noqa: BLE001 — reported to the test's thread
            outcome.append(e)
        with proxy.cond:
            proxy.cond.notify_all()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    with proxy.cond:
        # Until the worker ends, or has claimed far more than a refused worker may.
        proxy.cond.wait_for(lambda: bool(outcome) or len(proxy.claims) >= 20)
    claims = len(proxy.claims)
    if not outcome:
        d.close()  # the old busy loop: end it (a closed dispatch stops the worker)
    t.join(30)
    assert claims == 1, f"{claims} claims: a refused claim was claimed again"
    assert len(outcome) == 1 and isinstance(outcome[0], InvalidError), outcome
    assert outcome[0].field == "worker" and "128 bytes" in str(outcome[0])


def test_a_claim_failed_for_a_transient_reason_is_retried_after_a_growing_backoff(
    server: Server, qname: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The proxy answers the first four claims 503 "unavailable": the worker claims again
    # after waits that grow (each a random share of CLAIM_RETRY_MIN·2ⁿ), then takes the job.
    monkeypatch.setattr(worker_mod, "CLAIM_RETRY_MIN", 0.05)
    admin = HttpDispatch(server.url, token=server.admin_token)
    proxy = _Proxy(server.url, refuse=4)
    d = HttpDispatch(proxy.url, token=server.admin_token)
    try:
        SyncQueue(qname, dispatch=admin).submit(7)
        ran: list[Any] = []
        with caplog.at_level(logging.WARNING, logger="lakeshore"):
            run_worker(d, queues={qname: lambda x: ran.append(x)}, once=True, handle_signals=False)
        assert ran == [7]
        assert len(proxy.claims) == 5, proxy.claims
        said = [float(m) for m in re.findall(r"claiming again in ([0-9.]+) s", caplog.text)]
        assert len(said) == 4, caplog.text
        for n, delay in enumerate(said, 1):
            full = 0.05 * 2 ** (n - 1)
            assert full / 2 - 0.01 <= delay <= full + 0.01, (n, said)  # logged to 2 decimals
        gaps = [b - a for a, b in zip(proxy.claims, proxy.claims[1:])]
        for n, gap in enumerate(gaps, 1):
            assert gap >= 0.05 * 2 ** (n - 1) / 2 - 0.01, (n, gaps)  # never sooner than the backoff
    finally:
        d.close()
        admin.close()
        proxy.close()


def test_claim_retry_delay_is_bounded_exponential_with_jitter() -> None:
    for n in range(1, 40):
        full = min(worker_mod.CLAIM_RETRY_MAX, worker_mod.CLAIM_RETRY_MIN * 2 ** (n - 1))
        for _ in range(20):
            assert full / 2 <= worker_mod._claim_retry_delay(n) <= full
    assert worker_mod._claim_retry_delay(10**6) <= worker_mod.CLAIM_RETRY_MAX
