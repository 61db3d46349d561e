"""Failover between replicas (issue 29 item 10): an HttpDispatch given several URLs of one
plane keeps working when the server it uses dies."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeshore import HttpDispatch, SyncQueue, run_worker
from lakeshore.errors import InvalidError

from .conftest import Server, start_server, stop_server


@pytest.fixture
def replicas(lakeshore_bin: str) -> Iterator[list[Server]]:
    """Two ``lakeshore serve`` processes on one SQLite file, with one admin token."""
    root = Path(tempfile.mkdtemp(prefix="lakeshore-failover-"))
    token = "adm-" + secrets.token_hex(16)
    servers: list[Server] = []
    try:
        for name in ("a", "b"):
            home = root / name
            home.mkdir()
            servers.append(start_server(lakeshore_bin, home, token, target=str(root / "plane.db")))
        yield servers
    finally:
        for s in servers:
            if s.process.poll() is None:
                stop_server(s)
        shutil.rmtree(root, ignore_errors=True)


def test_several_urls_are_parsed_and_shown() -> None:
    d = HttpDispatch("http://a:7077, http://b:7077/", token="t")
    try:
        assert d.url == "http://a:7077,http://b:7077"
        assert "http://a:7077,http://b:7077" in repr(d)
    finally:
        d.close()
    d = HttpDispatch(["http://a:7077", "http://b:7077"], token="t")
    d.close()
    with pytest.raises(InvalidError, match="not a plane"):
        HttpDispatch("http://a:7077,postgres://u:secret@db/x")


def test_a_worker_and_a_producer_fail_over_when_their_server_dies(replicas: list[Server], qname: str) -> None:
    a, b = replicas
    urls = f"{a.url},{b.url}"
    producer = HttpDispatch(urls, token=a.admin_token)
    worker_plane = HttpDispatch([a.url, b.url], token=a.admin_token)
    q = SyncQueue(qname, dispatch=producer, lease_ttl=2.0)
    ran: list[int] = []

    def body(i: int) -> int:
        ran.append(i)
        time.sleep(0.005)
        return i * 2

    stop = threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(worker_plane,),
        kwargs={"queues": {qname: body}, "concurrency": 4, "stop": stop, "handle_signals": False, "lease_ttl": 2.0},
        daemon=True,
    )
    worker.start()
    try:
        jobs = 120
        ids: list[str] = []
        for i in range(jobs):
            ids.append(q.submit(i))
            if i == jobs // 3:
                deadline = time.monotonic() + 30
                while len(ran) < jobs // 4 and time.monotonic() < deadline:
                    time.sleep(0.01)
                a.process.kill()  # SIGKILL the server both clients use, mid-run
                a.process.wait()
        results = [q.result(inv, timeout=60) for inv in ids]
        assert results == [i * 2 for i in range(jobs)]
        assert worker_plane._transport.url == b.url
        assert producer._transport.url == b.url
    finally:
        stop.set()
        worker.join(30)
        producer.close()
        worker_plane.close()
