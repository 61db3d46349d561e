"""Fixtures: a real ``lakeshore serve`` on loopback, started by the tests.

The binary is ``$LAKESHORE_BIN`` when set, else one built from this repository with
``go build ./cmd/lakeshore`` (once per session). Tests that need a server are skipped, with
the reason, when neither works or the server does not speak the HTTP API the client is
written against (docs/http-api.md: routes under /v1/namespaces/{ns}/queues/{queue}).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Container, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakeshore import HttpDispatch
from lakeshore.dispatch import LocalDispatch

from . import pgserver

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    """A running ``lakeshore serve``."""

    url: str
    admin_token: str
    process: subprocess.Popen[bytes]
    home: Path

    def token(self, queue: str, permissions: str = "submit,consume,read", namespace: str = "default") -> str:
        """Make an access token for one queue with the admin token."""
        r = httpx.post(
            self.url + "/v1/tokens",
            json={"namespace": namespace, "queue": queue, "permissions": permissions.split(",")},
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        r.raise_for_status()
        return str(r.json()["secret"])


def _binary(tmp: Path) -> tuple[str | None, str]:
    env_bin = os.environ.get("LAKESHORE_BIN")
    if env_bin:
        if not os.access(env_bin, os.X_OK):
            return None, f"LAKESHORE_BIN={env_bin} is not an executable file"
        return env_bin, ""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        return None, "no LAKESHORE_BIN and no Go toolchain to build ./cmd/lakeshore"
    out = tmp / "lakeshore"
    r = subprocess.run([go, "build", "-o", str(out), "./cmd/lakeshore"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"go build ./cmd/lakeshore failed: {r.stderr.strip()[-500:]}"
    return str(out), ""


def start_server(binary: str, home: Path, admin_token: str, target: str = ":memory:") -> Server:
    """Start ``lakeshore serve`` on a free loopback port and wait until it is ready."""
    env = dict(os.environ, LAKESHORE_HOME=str(home), LAKESHORE_ADMIN_TOKEN=admin_token)
    env.pop("LAKESHORE_URL", None)
    with open(home / "serve.log", "wb") as err:
        proc = subprocess.Popen(
            [binary, "serve", "--target", target, "--addr", "127.0.0.1:0", "--long-poll-max", "10s"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 20
    url = None
    while time.monotonic() < deadline:
        text = (home / "serve.log").read_text(errors="replace")
        m = re.search(r"url=(http://127\.0\.0\.1:\d+)", text)
        if m:
            url = m.group(1)
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if url is None:
        proc.kill()
        raise RuntimeError(f"lakeshore serve did not start: {(home / 'serve.log').read_text(errors='replace')}")
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return Server(url, admin_token, proc, home)


def stop_server(s: Server) -> None:
    s.process.terminate()
    try:
        s.process.wait(10)
    except subprocess.TimeoutExpired:
        s.process.kill()
        s.process.wait()


def heartbeats_answered(monkeypatch: pytest.MonkeyPatch, n: int, job_ids: Container[str] | None = None) -> threading.Event:
    """An event set once the plane answered n heartbeats (QueueCore.heartbeat; only those of
    job_ids, read at each beat, when given). A body that runs until then outlives its lease
    by as many beats however late a loaded machine runs it, where one of a fixed length
    raced its heartbeats against the machine's scheduling."""
    from lakeshore.queue import QueueCore

    answered = threading.Event()
    count = 0
    real = QueueCore.heartbeat

    async def counted(self: QueueCore, job: Any, lease_ttl: float | None = None) -> Any:
        nonlocal count
        got = await real(self, job, lease_ttl)
        if job_ids is None or getattr(job, "id", job) in job_ids:
            count += 1
            if count >= n:
                answered.set()
        return got

    monkeypatch.setattr(QueueCore, "heartbeat", counted)
    return answered


def drain_then_stop(w: subprocess.Popen[str]) -> None:
    """Signal a worker process twice as an operator stops one: SIGTERM (drain), then, once
    its stderr (a pipe) says it drains, SIGINT (stop its running jobs). The second signal
    waits for the first to be handled: two pending at once would be handled in CPython's
    order, SIGINT first."""
    assert w.stderr is not None
    w.send_signal(signal.SIGTERM)
    for line in w.stderr:
        if "SIGTERM: draining" in line:
            break
    else:
        raise AssertionError("the worker ended without saying it drains")
    w.send_signal(signal.SIGINT)


@pytest.fixture(scope="session")
def lakeshore_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The lakeshore binary, or a skip with the reason."""
    path, reason = _binary(tmp_path_factory.mktemp("bin"))
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[pgserver.PgServer]:
    """A private PostgreSQL server for the session (tests/pgserver.py, as internal/pgtest
    starts one for Go's tests). Skips where PostgreSQL is not installed; fails then with
    ``CI=true``."""
    try:
        pg = pgserver.start()
    except pgserver.NotInstalled as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{e} (CI=true: a missing server fails the run)")
        pytest.skip(str(e))
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def postgres_url(postgres_server: pgserver.PgServer) -> str:
    """The URL of a fresh schema on the session's PostgreSQL server (``schema=`` of
    pgplane.ParseURL; ``lakeshore serve`` creates it)."""
    return postgres_server.url("t_" + secrets.token_hex(6))


@pytest.fixture(scope="session")
def server(lakeshore_bin: str) -> Iterator[Server]:
    """One ``lakeshore serve --target :memory:`` with an admin token, for the session."""
    home = Path(tempfile.mkdtemp(prefix="lakeshore-pytest-"))
    s = start_server(lakeshore_bin, home, "adm-" + secrets.token_hex(16))
    try:
        probe = httpx.get(
            s.url + "/v1/namespaces/default/queues/probe/count",
            headers={"Authorization": f"Bearer {s.admin_token}"},
        )
        if probe.status_code == 404:
            pytest.skip(
                f"{lakeshore_bin} does not serve the redesigned HTTP API (issue 10: routes under "
                "/v1/namespaces/{ns}/queues/{queue}); set LAKESHORE_BIN to a binary built from a tree that has it"
            )
        yield s
    finally:
        stop_server(s)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def dispatch(server: Server) -> Iterator[HttpDispatch]:
    """An HttpDispatch with the admin token."""
    d = HttpDispatch(server.url, token=server.admin_token)
    yield d
    d.close()


_counter = 0


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name no other test uses."""
    global _counter
    _counter += 1
    base = re.sub(r"[^A-Za-z0-9]", "-", request.node.name)[:80].strip("-")
    return f"{base}-{_counter}"


PLANES = ("memory", "embedded", "serve")
"""The three planes every verb is tested on: ``Dispatch(":memory:")`` (a private daemon), the
embedded default's kind ``Dispatch(path)`` (the shared daemon of a SQLite file) and a real
``lakeshore serve`` over loopback with bearer-token auth."""


@dataclass
class Planes:
    """The session's planes, made on first use and shared by every test of the session (one
    daemon or server each, so parametrizing over them costs requests, not start-ups)."""

    binary: str
    server: Server
    home: Path
    made: dict[str, HttpDispatch]

    def get(self, kind: str) -> HttpDispatch:
        """The plane of kind ``memory``, ``embedded`` or ``serve``."""
        d = self.made.get(kind)
        if d is None:
            if kind == "memory":
                d = LocalDispatch(":memory:", binary=self.binary)
            elif kind == "embedded":
                with pytest.MonkeyPatch.context() as mp:
                    mp.setenv("LAKESHORE_HOME", str(self.home))
                    mp.delenv("LAKESHORE_URL", raising=False)
                    d = LocalDispatch(str(self.home / "lakeshore.db"), binary=self.binary)
            elif kind == "serve":
                d = HttpDispatch(self.server.url, token=self.server.admin_token)
            else:
                raise ValueError(kind)
            self.made[kind] = d
        return d

    def token(self, kind: str, permissions: str) -> HttpDispatch:
        """A plane of ``kind`` whose calls carry a tenant token of ``permissions`` on every
        queue (serve); the local planes have no tokens (the socket is the owner's)."""
        if kind != "serve":
            return self.get(kind)
        key = f"serve:{permissions}"
        d = self.made.get(key)
        if d is None:
            d = HttpDispatch(self.server.url, token=self.server.token("*", permissions))
            self.made[key] = d
        return d


@pytest.fixture(scope="session")
def planes(lakeshore_bin: str, server: Server) -> Iterator[Planes]:
    """The session's three planes (see :data:`PLANES`)."""
    home = Path(tempfile.mkdtemp(prefix="ls-planes-"))
    p = Planes(lakeshore_bin, server, home, {})
    try:
        yield p
    finally:
        for d in p.made.values():
            d.close()
        from lakeshore import _daemon

        for sock in home.glob("run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(params=PLANES)
def every_plane(request: pytest.FixtureRequest, planes: Planes) -> HttpDispatch:
    """Each of the three planes in turn (the test runs once per plane)."""
    return planes.get(str(request.param))


DATA_PERMISSIONS = "data:put,data:read"


@pytest.fixture(params=PLANES)
def d(request: pytest.FixtureRequest, planes: Planes) -> HttpDispatch:
    """Each of the three planes in turn for the data queue's tests; on serve, a token that
    grants only the data permissions (a module may override it)."""
    return planes.token(str(request.param), DATA_PERMISSIONS)
