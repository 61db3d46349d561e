"""The local daemon: ``lakeshore daemon`` serving a plane on a unix socket.

The Go binary is the engine and runs in its own process, so no Go runtime is loaded into
Python (which must survive ``fork``). Two kinds:

- the **shared daemon** of a SQLite file (the embedded default ``$LAKESHORE_HOME/lakeshore.db``
  or any ``Dispatch(path)``): one per file, listening on
  ``$LAKESHORE_HOME/run/<name>-<hash>/daemon.sock``. A client takes ``start.lock`` there,
  checks the daemon's handshake (``GET /v1/daemon``), starts one when none answers, and
  attaches by holding ``clients.lock`` shared for as long as it is open. A daemon of another
  protocol or binary is replaced when no client is attached. The daemon exits after its idle
  time with no client attached (``cmd/lakeshore/daemon.go`` holds the other half).
- the **private daemon** of ``Dispatch(":memory:")``: a child of this process on a socket in a
  private temporary directory, reading a pipe from this process: it exits when the pipe
  closes, so it dies with its Dispatch and with this process, even killed by SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshore import errors

PROTOCOL = 1
"""The daemon protocol this client speaks (``DaemonProtocol`` in cmd/lakeshore/daemon.go)."""

IDLE_EXIT = float(os.environ.get("LAKESHORE_IDLE_EXIT") or 60.0)
"""Seconds a shared daemon stays up with no client attached (``$LAKESHORE_IDLE_EXIT``, else 60)."""

MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103
"""The longest unix socket path the system takes, in bytes."""


def find_binary(binary: str | None = None) -> str:
    """The ``lakeshore`` binary: ``binary``, else ``$LAKESHORE_BIN``, else the one shipped in
    the wheel (``lakeshore/_bin/lakeshore``), else ``lakeshore`` on ``PATH``.

    Raises:
        DispatchError: none found, or the named file is not executable."""
    named = binary or os.environ.get("LAKESHORE_BIN")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise errors.DispatchError(
                f"the lakeshore binary {named!r} (from {'binary=' if binary else 'LAKESHORE_BIN'}) is not an "
                "executable file: build it with `go build -o lakeshore ./cmd/lakeshore` and point LAKESHORE_BIN at it",
                code="not_implemented",
            )
        return named
    shipped = Path(__file__).parent / "_bin" / "lakeshore"
    if shipped.is_file() and os.access(shipped, os.X_OK):
        return str(shipped)
    found = shutil.which("lakeshore")
    if found:
        return found
    raise errors.DispatchError(
        "the embedded plane needs the lakeshore binary and none was found: the wheel ships one, "
        "else set LAKESHORE_BIN or put lakeshore on PATH (go build -o lakeshore ./cmd/lakeshore), "
        "or use HttpDispatch(url) / LAKESHORE_URL with a running server",
        code="not_implemented",
    )


def binary_identity(binary: str) -> str:
    """``<size>-<mtime ns>`` of the binary file, as the daemon reports its own."""
    st = os.stat(os.path.realpath(binary))
    return f"{st.st_size}-{st.st_mtime_ns}"


def home_dir() -> Path:
    """``$LAKESHORE_HOME``, else ``~/.lakeshore``."""
    return Path(os.environ.get("LAKESHORE_HOME") or Path.home() / ".lakeshore")


def make_private_dirs(path: Path) -> None:
    """Create the directory ``path`` and every missing parent with mode 0700, as Go's
    ``os.MkdirAll(path, 0o700)`` does (the CLI's ``$LAKESHORE_HOME`` and run directories):
    what they hold (payloads, results, the daemon's socket) is its owner's only. Existing
    directories are left as they are."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made by another process meanwhile
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 when it does not exist (an existing file is left
    as it is). A SQLite file made so keeps that mode, and SQLite gives its -wal and -shm
    files the mode of the database file."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    except OSError:
        pass  # not ours to make (read-only, no permission): the daemon says what it cannot open


def socket_for(home: Path, target: str) -> str:
    """The shared daemon's socket for a SQLite file (``DaemonSocketFor`` in Go)."""
    digest = hashlib.sha256(target.encode()).hexdigest()[:12]
    name = os.path.splitext(os.path.basename(target))[0][:16]
    return str(home / "run" / f"{name}-{digest}" / "daemon.sock")


def check_socket_path(path: str) -> None:
    """Raise InvalidError when ``path`` is too long for a unix socket."""
    n = len(os.fsencode(path))
    if n > MAX_SOCKET_PATH:
        raise errors.InvalidError(
            f"the daemon's socket path {path} is {n} bytes; unix sockets allow at most {MAX_SOCKET_PATH}: "
            "set LAKESHORE_HOME to a shorter directory (e.g. /tmp/lakeshore-$USER)",
            field="socket",
            value=path,
            rule=f"at most {MAX_SOCKET_PATH} bytes",
        )


@dataclass(frozen=True)
class DaemonInfo:
    """A daemon's handshake (``GET /v1/daemon``)."""

    protocol: int
    version: str
    binary: str
    pid: int
    target: str
    socket: str


def _request(sock_path: str, method: str, path: str, timeout: float = 2.0) -> tuple[int, bytes] | None:
    """One HTTP/1.0 request over the unix socket; None when nothing listens there."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(sock_path)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        s.sendall(f"{method} {path} HTTP/1.0\r\nHost: lakeshore\r\nContent-Length: 0\r\n\r\n".encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    except OSError:
        return None
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None
    return status, body


def handshake(sock_path: str) -> DaemonInfo | None:
    """The daemon's handshake, or None when no daemon answers on ``sock_path``.

    Raises:
        DispatchError: something answers that is not a lakeshore daemon."""
    ans = _request(sock_path, "GET", "/v1/daemon")
    if ans is None:
        return None
    status, body = ans
    try:
        d: Any = json.loads(body) if status == 200 else None
    except ValueError:
        d = None
    if not isinstance(d, dict) or not isinstance(d.get("protocol"), int):
        raise errors.DispatchError(
            f"{sock_path} answers but not as a lakeshore daemon (HTTP {status}): a lakeshore binary of another "
            "version is running there; stop it, or set LAKESHORE_HOME to another directory",
            code="unavailable",
        )
    return DaemonInfo(
        protocol=int(d["protocol"]),
        version=str(d.get("version", "")),
        binary=str(d.get("binary", "")),
        pid=int(d.get("pid", 0)),
        target=str(d.get("target", "")),
        socket=str(d.get("socket", "")),
    )


def _flock(path: Path, how: int) -> int | None:
    """Open path and flock it; the fd, or None when LOCK_NB and it is held elsewhere."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _log_tail(path: Path | None) -> str:
    text = ""
    if path is not None:
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2000))
                text = f.read().decode("utf-8", "replace")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-4:]) or "no output"


def _not_a_daemon_binary(binary: str, log: str) -> errors.DispatchError:
    if "unknown command" in log:
        return errors.DispatchError(
            f"{binary} has no `daemon` verb (a lakeshore binary older than this client, which speaks daemon "
            f"protocol {PROTOCOL}): rebuild it (go build -o lakeshore ./cmd/lakeshore) or set LAKESHORE_BIN",
            code="not_implemented",
        )
    return errors.DispatchError(f"{binary} daemon did not start: {log}", code="unavailable")


def _wait_ready(
    sock_path: str, proc: subprocess.Popen[bytes], timeout: float, log: Path | None, binary: str
) -> DaemonInfo:
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        info = handshake(sock_path)
        if info is not None:
            return info
        if proc.poll() is not None:
            raise _not_a_daemon_binary(binary, _log_tail(log))
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise errors.DispatchError(
                f"{binary} daemon did not answer on {sock_path} within {timeout:g} s: {_log_tail(log)}",
                code="unavailable",
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _check_protocol(info: DaemonInfo, binary: str) -> None:
    if info.protocol != PROTOCOL:
        raise errors.DispatchError(
            f"the lakeshore daemon from {binary} speaks protocol {info.protocol}, this client {PROTOCOL}: "
            "install matching versions of the lakeshore package and binary (or set LAKESHORE_BIN)",
            code="not_implemented",
        )


class PrivateDaemon:
    """The private daemon of a ``:memory:`` plane: a child process on a socket in a fresh
    temporary directory, stopped by :meth:`stop` and when this process dies (its stdin is a
    pipe from this process)."""

    def __init__(self, binary: str, start_timeout: float) -> None:
        self.dir = tempfile.mkdtemp(prefix="lakeshore-mem-")
        self.socket = os.path.join(self.dir, "daemon.sock")
        self.owner = os.getpid()
        args = [binary, "daemon", "--target", ":memory:", "--socket", self.socket, "--idle-exit", "0"]
        args.append("--exit-on-stdin-eof")
        # Its log goes to a file, not a pipe: a write to a pipe nobody reads any more (this
        # process died) would kill it by SIGPIPE before it removed its socket.
        self.log = Path(self.dir) / "daemon.log"
        try:
            check_socket_path(self.socket)
            with open(self.log, "wb") as logf:
                self.proc = subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=logf,
                    env=_child_env(),
                )
        except BaseException as e:
            shutil.rmtree(self.dir, ignore_errors=True)
            if isinstance(e, OSError):
                raise errors.DispatchError(
                    f"cannot start {binary} daemon: {e}; set LAKESHORE_BIN to the lakeshore binary",
                    code="not_implemented",
                ) from e
            raise
        try:
            self.info = _wait_ready(self.socket, self.proc, start_timeout, self.log, binary)
            _check_protocol(self.info, binary)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the daemon (only in the process that started it) and remove its directory."""
        if os.getpid() != self.owner:
            return  # a forked child never stops its parent's daemon
        proc = self.proc if hasattr(self, "proc") else None
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # EOF: the daemon shuts down gracefully
        if proc is not None and proc.poll() is None:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LAKESHORE_URL", None)
    env.pop("LAKESHORE_ADMIN_TOKEN", None)
    # A daemon is no part of a worker's jobs: a worker's guard (lakeshore._fabric) must not
    # take it for something a body left running.
    env.pop("LAKESHORE_COMMAND_GUARD", None)
    return env


class SharedDaemon:
    """An attachment to the shared daemon of a SQLite file (started when none runs).

    Holds ``clients.lock`` shared until :meth:`detach`; a forked child shares the parent's
    attachment (the lock is on the open file, which the child inherits)."""

    def __init__(self, binary: str, target: str, start_timeout: float, idle_exit: float) -> None:
        self.binary = binary
        self.target = target
        self.start_timeout = start_timeout
        self.idle_exit = idle_exit
        self.socket = socket_for(home_dir(), target)
        check_socket_path(self.socket)
        self.run_dir = Path(self.socket).parent
        self._clients_fd: int | None = None
        self._lock = threading.Lock()
        _shared.add(self)
        self._last_attach = 0.0
        self.info = self.attach()

    def attach(self) -> DaemonInfo:
        """Make sure a compatible daemon answers, starting or replacing one, and hold
        ``clients.lock`` shared. Safe to call again (after the daemon died)."""
        with self._lock:
            if self._clients_fd is not None and time.monotonic() - self._last_attach < 0.5:
                info = handshake(self.socket)
                if info is not None:
                    return info
            make_private_dirs(self.run_dir)
            start_fd = _flock(self.run_dir / "start.lock", fcntl.LOCK_EX)
            assert start_fd is not None
            try:
                info = self._ensure()
            finally:
                os.close(start_fd)
            self._last_attach = time.monotonic()
            return info

    def _ensure(self) -> DaemonInfo:
        if self._clients_fd is None:
            self._clients_fd = os.open(self.run_dir / "clients.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fd = self._clients_fd
        info = handshake(self.socket)
        want = binary_identity(self.binary)
        if info is not None and (info.protocol != PROTOCOL or info.binary != want or info.target != self.target):
            # A daemon of another protocol or build: replace it when no client is attached.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
            if alone:
                _request(self.socket, "POST", "/v1/daemon/stop")
                self._wait_gone()
                info = None
            elif info.protocol != PROTOCOL:
                raise errors.DispatchError(
                    f"the lakeshore daemon serving {self.target} (pid {info.pid}, version {info.version}) speaks "
                    f"protocol {info.protocol}, this client {PROTOCOL}, and other clients are attached to it: "
                    "stop them (the daemon then exits) or install matching versions",
                    code="not_implemented",
                )
            # else: another build of the same protocol, in use by other clients: use it.
        if info is None:
            owner = _flock(self.run_dir / "daemon.lock", fcntl.LOCK_EX | fcntl.LOCK_NB)
            if owner is None:
                # A daemon owns the directory but does not answer yet: starting, or stopping.
                info = self._wait_answer_or_gone()
            else:
                os.close(owner)
            if info is None:
                info = self._start()
        _check_protocol(info, self.binary)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return info

    def _wait_gone(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            owner = _flock(self.run_dir / "daemon.lock", fcntl.LOCK_EX | fcntl.LOCK_NB)
            if owner is not None:
                os.close(owner)
                return
            time.sleep(0.02)
        raise errors.DispatchError(
            f"the lakeshore daemon of {self.run_dir} did not stop within {self.start_timeout:g} s", code="unavailable"
        )

    def _wait_answer_or_gone(self) -> DaemonInfo | None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            info = handshake(self.socket)
            if info is not None:
                return info
            owner = _flock(self.run_dir / "daemon.lock", fcntl.LOCK_EX | fcntl.LOCK_NB)
            if owner is not None:
                os.close(owner)
                return None
            time.sleep(0.02)
        pid = ""
        with contextlib.suppress(OSError):
            pid = (self.run_dir / "daemon.lock").read_text().strip()
        raise errors.DispatchError(
            f"a lakeshore daemon (pid {pid or '?'}) owns {self.run_dir} but does not answer on {self.socket}: "
            f"kill it, or see {self.run_dir / 'daemon.log'}",
            code="unavailable",
        )

    def _start(self) -> DaemonInfo:
        log = self.run_dir / "daemon.log"
        args = [
            self.binary,
            "daemon",
            "--target",
            self.target,
            "--socket",
            self.socket,
            "--idle-exit",
            f"{self.idle_exit:g}s",
        ]
        with open(log, "ab") as logf:
            if logf.tell() > 1 << 20:
                logf.truncate(0)
            try:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=logf,
                    env=_child_env(),
                    start_new_session=True,  # outlives this process; no terminal signal reaches it
                )
            except OSError as e:
                raise errors.DispatchError(
                    f"cannot start {self.binary} daemon: {e}; set LAKESHORE_BIN to the lakeshore binary",
                    code="not_implemented",
                ) from e
        info = _wait_ready(self.socket, proc, self.start_timeout, log, self.binary)
        # Reap it when it exits (while this process lives); it is not this process's child
        # to stop: other clients may use it.
        threading.Thread(target=proc.wait, name="lakeshore-daemon-reaper", daemon=True).start()
        return info

    def detach(self) -> None:
        """Release ``clients.lock`` (the daemon may then exit when idle)."""
        with self._lock:
            if self._clients_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._clients_fd)
                self._clients_fd = None


_shared: weakref.WeakSet[SharedDaemon] = weakref.WeakSet()


def _after_fork() -> None:
    # A lock held by another thread of the parent at fork would never be released here.
    for d in list(_shared):
        d._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
