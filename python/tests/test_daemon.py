"""The local daemon: Dispatch(":memory:"), Dispatch(path) and the embedded default.

Every test runs the real ``lakeshore daemon`` (the binary of the ``lakeshore_bin`` fixture).
"""

from __future__ import annotations

import multiprocessing
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lakeshore
from lakeshore import DispatchError, InvalidError, SyncQueue
from lakeshore import _daemon


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, lakeshore_bin: str) -> Iterator[Path]:
    """A short, fresh $LAKESHORE_HOME (unix socket paths are short), LAKESHORE_BIN set."""
    h = Path(tempfile.mkdtemp(prefix="ls-"))
    monkeypatch.setenv("LAKESHORE_HOME", str(h))
    monkeypatch.setenv("LAKESHORE_BIN", lakeshore_bin)
    monkeypatch.delenv("LAKESHORE_URL", raising=False)
    monkeypatch.setattr(lakeshore.dispatch, "_default", None)
    yield h
    for sock in h.glob("run/*/daemon.sock"):
        _daemon._request(str(sock), "POST", "/v1/daemon/stop")
    shutil.rmtree(h, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_memory_dispatch_is_a_private_plane(home: Path) -> None:
    d = lakeshore.Dispatch(":memory:")  # the seed's test plane
    assert isinstance(d, lakeshore.LocalDispatch)
    assert d.info.protocol == _daemon.PROTOCOL and d.info.target == ":memory:"
    q = SyncQueue("gpu", dispatch=d)
    inv = q.submit({"x": 1})
    with q.working() as job:
        assert job is not None
        job.result = job.payload["x"] + 1
    assert q.result(inv) == 2
    other = lakeshore.Dispatch(":memory:")  # another, empty plane
    assert other.socket != d.socket
    assert len(SyncQueue("gpu", dispatch=other)) == 0
    other.close()
    proc = d.process
    assert proc is not None
    sock_dir = os.path.dirname(d.socket)
    assert oct(os.stat(d.socket).st_mode & 0o777) == oct(0o600)
    d.close()
    assert proc.wait(10) is not None  # the daemon is gone with its Dispatch
    assert not os.path.exists(sock_dir)  # and its socket
    with pytest.raises(DispatchError):
        q.count()


def test_a_killed_client_takes_its_private_daemon_along(lakeshore_bin: str) -> None:
    code = (
        "import lakeshore, sys; d = lakeshore.Dispatch(':memory:'); "
        "print(d.process.pid, d.socket, flush=True); sys.stdin.read()"
    )
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin)
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) as client:
        assert client.stdout is not None
        pid_s, sock = client.stdout.readline().decode().split()
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
    assert _wait_gone(int(pid_s)), "the daemon outlived its SIGKILLed client"
    assert not os.path.exists(sock)  # it removed its socket on the way out
    shutil.rmtree(os.path.dirname(sock), ignore_errors=True)


def test_embedded_default_one_daemon_per_home(home: Path, lakeshore_bin: str) -> None:
    # Four processes race to start the daemon of the default plane: exactly one starts it.
    # Each stays attached until all four have printed the daemon they use: on a loaded
    # machine a process whose interpreter starts a second late could otherwise find the
    # daemon gone idle (LAKESHORE_IDLE_EXIT=1) after the others left, and rightly start a
    # second one — which is not the race this test is about.
    code = (
        "import lakeshore, sys; q = lakeshore.SyncQueue('race'); q.submit(sys.argv[1]); "
        "print(q.dispatch.info.pid, flush=True); sys.stdin.read()"
    )
    env = dict(os.environ, LAKESHORE_HOME=str(home), LAKESHORE_BIN=lakeshore_bin, LAKESHORE_IDLE_EXIT="1")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        for i in range(4)
    ]
    deadline = time.monotonic() + 60
    pids = set()
    for p in procs:
        assert p.stdout is not None and p.stdin is not None
        # poll, not select.select: this test process may hold descriptors past FD_SETSIZE.
        poller = select.poll()
        poller.register(p.stdout, select.POLLIN)
        ready = poller.poll(max(0, int((deadline - time.monotonic()) * 1000)))
        assert ready, "a racing client printed no daemon pid within 60 s"
        pids.add(int(p.stdout.readline()))
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=60)
        assert p.stdout is not None
        p.stdout.close()
    assert all(p.returncode == 0 for p in procs)
    assert len(pids) == 1, f"several daemons served one home: {pids}"
    (pid,) = pids
    # The clients are gone: the daemon exits after its idle time and removes its socket.
    assert _wait_gone(pid, 15), "the daemon did not exit when idle"
    socks = list(home.glob("run/*/daemon.sock"))
    assert socks == []
    # The plane is the file: a new daemon serves what the first one stored.
    q = SyncQueue("race")
    assert isinstance(q.dispatch, lakeshore.LocalDispatch)
    assert q.dispatch.target == str(home / "lakeshore.db")
    assert q.count() == 4
    assert q.dispatch.info.pid != pid


def test_an_attached_client_keeps_the_daemon(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = lakeshore.LocalDispatch(str(home / "a.db"), idle_exit=0.3)
    pid = d.info.pid
    time.sleep(1.5)
    assert _alive(pid), "the daemon exited while a client was attached"
    assert SyncQueue("q", dispatch=d).submit(1)
    d.close()
    assert _wait_gone(pid, 10)


def test_a_dead_daemon_is_restarted(home: Path) -> None:
    d = lakeshore.Dispatch(str(home / "b.db"))
    q = SyncQueue("jobs", dispatch=d)
    inv = q.submit("kept")
    os.kill(d.info.pid, signal.SIGKILL)
    assert _wait_gone(d.info.pid)
    # The next call finds no daemon, starts one (under the lock) and carries on.
    assert q.get(inv).state == "queued"
    assert q.count() == 1
    d.close()


def test_a_stale_daemon_is_replaced_when_no_client_is_attached(home: Path, tmp_path: Path) -> None:
    old_bin = tmp_path / "old-lakeshore"
    shutil.copy(os.environ["LAKESHORE_BIN"], old_bin)
    os.utime(old_bin, ns=(1_000_000_000, 1_000_000_000))  # another build
    target = str(home / "c.db")
    old = lakeshore.LocalDispatch(target, binary=str(old_bin))
    old_pid = old.info.pid
    # While a client is attached, a new client of the same protocol uses the running daemon.
    new = lakeshore.LocalDispatch(target)
    assert new.info.pid == old_pid
    new.close()
    old.close()
    # No client attached: the next client replaces the other build's daemon.
    fresh = lakeshore.LocalDispatch(target)
    assert fresh.info.pid != old_pid
    assert fresh.info.binary == _daemon.binary_identity(os.environ["LAKESHORE_BIN"])
    assert _wait_gone(old_pid)
    fresh.close()


def test_bad_binaries_and_paths(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No binary at all.
    monkeypatch.delenv("LAKESHORE_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DispatchError, match="LAKESHORE_BIN") as info:
        SyncQueue("q")
    assert info.value.code == "not_implemented"
    d = lakeshore.Dispatch("http://127.0.0.1:1")  # HTTP needs no binary
    assert isinstance(d, lakeshore.HttpDispatch)
    d.close()
    monkeypatch.setenv("LAKESHORE_BIN", str(tmp_path / "missing"))
    with pytest.raises(DispatchError, match="not an executable file"):
        lakeshore.Dispatch(":memory:")
    # A lakeshore of another version, without the daemon verb.
    old = tmp_path / "lakeshore"
    old.write_text("#!/bin/sh\necho 'lakeshore: unknown command \"daemon\" for \"lakeshore\"' >&2\nexit 2\n")
    old.chmod(0o755)
    monkeypatch.setenv("LAKESHORE_BIN", str(old))
    before = set(Path(tempfile.gettempdir()).glob("lakeshore-mem-*"))
    with pytest.raises(DispatchError, match="no `daemon` verb"):
        lakeshore.Dispatch(":memory:")
    with pytest.raises(DispatchError, match="no `daemon` verb"):
        lakeshore.Dispatch(str(home / "d.db"))
    assert list(home.glob("run/*/daemon.sock")) == []
    assert set(Path(tempfile.gettempdir()).glob("lakeshore-mem-*")) == before  # the private daemon's directory went
    # A socket path longer than unix sockets allow.
    monkeypatch.setenv("LAKESHORE_HOME", str(tmp_path / ("x" * 120)))
    with pytest.raises(InvalidError, match="set LAKESHORE_HOME to a shorter directory"):
        lakeshore.Dispatch(str(home / "e.db"))
    assert not (tmp_path / ("x" * 120)).exists()


def _child_uses(d: lakeshore.Dispatch, queue: str, value: Any) -> None:
    SyncQueue(queue, dispatch=d).submit(value)


@pytest.mark.parametrize("target", [":memory:", "file"])
def test_fork_children_keep_using_the_dispatch(home: Path, target: str) -> None:
    d = lakeshore.Dispatch(":memory:" if target == ":memory:" else str(home / "f.db"))
    q = SyncQueue("fork", dispatch=d)
    q.submit("parent")  # the parent's connections and thread exist before the fork
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            q.submit("os.fork child")
            code = 0 if q.count() == 2 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_child_uses, args=(d, "fork", f"mp {i}")) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert q.count() == 4
    assert d.process is None or d.process.poll() is None  # the children did not stop it
    d.close()


def _mode(p: Path) -> int:
    return p.stat().st_mode & 0o777


def test_a_home_made_by_python_is_private(home: Path, lakeshore_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """$LAKESHORE_HOME and its run/ directory made by Python are 0700, as the CLI makes them,
    and the database (with its -wal and -shm) 0600: other local users read no payloads."""
    old = os.umask(0o022)  # the common umask, under which mkdir's default gives 0755
    try:
        new_home = home / "parent" / "home"
        monkeypatch.setenv("LAKESHORE_HOME", str(new_home))
        d = lakeshore.default_dispatch()
        try:
            SyncQueue("private", dispatch=d).submit({"secret": 1})
        finally:
            d.close()
        assert (_mode(home / "parent"), _mode(new_home)) == (0o700, 0o700)
        run = new_home / "run"
        assert _mode(run) == 0o700 and [_mode(p) for p in run.iterdir()] == [0o700]
        for name in ("lakeshore.db", "lakeshore.db-wal", "lakeshore.db-shm"):  # the daemon still runs: WAL open
            assert _mode(new_home / name) == 0o600, name
        # The CLI makes a home the same way (the Go side's os.MkdirAll(home, 0o700)).
        go_home = home / "go-parent" / "home"
        env = dict(os.environ, LAKESHORE_HOME=str(go_home))
        subprocess.run([lakeshore_bin, "count", "q"], env=env, check=True, capture_output=True)
        assert (_mode(home / "go-parent"), _mode(go_home)) == (0o700, 0o700)
        # An existing directory is left as it is; what is made inside it is private.
        shared = home / "shared"
        shared.mkdir(mode=0o755)
        monkeypatch.setenv("LAKESHORE_HOME", str(shared))
        with lakeshore.Dispatch(str(shared / "db" / "q.db")) as d2:
            SyncQueue("private", dispatch=d2).submit(1)
        assert _mode(shared) == 0o755
        assert (_mode(shared / "run"), _mode(shared / "db"), _mode(shared / "db" / "q.db")) == (0o700, 0o700, 0o600)
    finally:
        os.umask(old)
        for sock in home.glob("**/run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
