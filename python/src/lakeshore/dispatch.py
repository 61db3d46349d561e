"""Planes: where the queues live. :class:`HttpDispatch` reaches a ``lakeshore serve``."""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from lakeshore import errors
from lakeshore._transport import HttpTransport, Portal

__all__ = ["Dispatch", "HttpDispatch", "LocalDispatch", "default_dispatch"]

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"


class Dispatch:
    """A dispatch plane: the queues, their invocations, journals and workers.

    ``Dispatch("http://host:7077")`` (or any ``http(s)://`` URL) is an :class:`HttpDispatch`;
    ``Dispatch(":memory:")`` (a private plane, for tests) and ``Dispatch(path)`` (a SQLite
    file) are :class:`LocalDispatch` planes, served by a ``lakeshore serve`` child process.

    A Dispatch is safe to share between threads and event loops, and survives ``fork``
    (a child makes its own connections on first use). Close it with :meth:`close` or use it
    as a context manager.
    """

    namespace: str
    _portal: Portal
    _transport: HttpTransport
    _closer: weakref.finalize[..., Any]

    def __new__(cls, target: str | None = None, *args: Any, **kwargs: Any) -> Dispatch:
        if cls is Dispatch:
            if target is None:
                raise errors.InvalidError(
                    "Dispatch needs a target: ':memory:', a SQLite file path or an http(s):// URL "
                    "(default_dispatch() picks the process default)",
                    field="target",
                    rule="':memory:', a path or a URL",
                )
            if target.startswith(("http://", "https://")):
                return super().__new__(HttpDispatch)
            return super().__new__(LocalDispatch)
        return super().__new__(cls)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the client core and block until it ends (blocking facades)."""
        return self._portal.run(coro)

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await a coroutine of the client core without blocking the caller's loop."""
        return await self._portal.run_async(coro)

    def close(self) -> None:
        """Close the connections and stop the client's thread. Calls in progress end with
        a ``closed`` DispatchError; later calls raise one."""
        self._closer()

    def __enter__(self) -> Dispatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Dispatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class HttpDispatch(Dispatch):
    """The plane behind a ``lakeshore serve``, over its HTTP API (msgpack bodies).

    Args:
        url: the server, e.g. ``"http://127.0.0.1:7077"``; default ``$LAKESHORE_URL``.
        token: the bearer token; default ``$LAKESHORE_TOKEN`` (none when unset).
        namespace: the namespace of the queues made from it (default ``"default"``).
        retry_for: seconds to keep retrying a call the server did not answer (refused
            connections, 502/503) before raising
            :class:`~lakeshore.errors.UnavailableError`; calls safe to repeat only.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        retry_for: float = 10.0,
    ) -> None:
        if url is None:
            url = os.environ.get("LAKESHORE_URL")
            if not url:
                raise errors.InvalidError(
                    "HttpDispatch needs a URL: pass one or set LAKESHORE_URL (e.g. http://127.0.0.1:7077)",
                    field="url",
                    rule="an http:// or https:// URL",
                )
        if token is None:
            token = os.environ.get("LAKESHORE_TOKEN") or None
        if not isinstance(namespace, str) or not namespace:
            raise errors.InvalidError(
                f"invalid namespace {namespace!r}: 1–128 bytes of [A-Za-z0-9._-]",
                field="namespace",
                value=namespace,
                rule="1–128 bytes of [A-Za-z0-9._-]",
            )
        self.url = url.rstrip("/")
        self.namespace = namespace
        self._transport = HttpTransport(self.url, token, retry_for=retry_for)
        self._portal = Portal()
        # A Dispatch dropped without close() still stops its thread and connections.
        self._closer = weakref.finalize(self, self._portal.close, self._transport.aclose)

    def __repr__(self) -> str:
        return f"HttpDispatch({self.url!r}, namespace={self.namespace!r})"


class LocalDispatch(HttpDispatch):
    """A plane served by a private ``lakeshore serve`` child process of this one.

    ``target`` is ``":memory:"`` (a plane that lives and dies with this Dispatch) or the path
    of a SQLite file (several processes may serve the same file; SQLite keeps them
    consistent). The server listens on a free loopback port and demands a random admin token
    that only this process knows. It stops when the Dispatch is closed, when the process
    exits, and (Linux) when the process dies, so no server is left behind.

    This is the interim form of the embedded plane: the shared daemon on a unix socket
    under ``$LAKESHORE_HOME/run`` is not built yet.

    Args:
        target: ``":memory:"`` or a file path.
        binary: the ``lakeshore`` binary; default ``$LAKESHORE_BIN``, else ``lakeshore`` on
            ``PATH``.
        namespace: as :class:`HttpDispatch`.
        start_timeout: seconds to wait for the server to answer.

    Raises:
        DispatchError: no binary (code ``not_implemented``), or the server did not start
            (its log is in the message).
    """

    def __init__(
        self,
        target: str = ":memory:",
        *,
        binary: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        start_timeout: float = 20.0,
    ) -> None:
        binary = binary or os.environ.get("LAKESHORE_BIN") or shutil.which("lakeshore")
        if not binary:
            raise errors.DispatchError(
                f"Dispatch({target!r}) needs the lakeshore binary: put it on PATH or set LAKESHORE_BIN "
                "(go build -o lakeshore ./cmd/lakeshore), or use HttpDispatch(url) with a running server",
                code="not_implemented",
            )
        if target != ":memory:":
            target = str(Path(target).expanduser().resolve())
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(32)
        env = dict(os.environ, LAKESHORE_ADMIN_TOKEN=token)
        env.pop("LAKESHORE_URL", None)
        args = [binary, "serve", "--target", target, "--addr", "127.0.0.1:0"]
        try:
            # Started from a thread that lives as long as the process: Linux sends the
            # parent-death signal when the *thread* that started the child ends.
            proc = _spawner().submit(_spawn, args, env).result()
        except OSError as e:
            raise errors.DispatchError(
                f"cannot start {binary} serve: {e}; set LAKESHORE_BIN to the lakeshore binary",
                code="not_implemented",
            ) from e
        assert proc.stderr is not None
        url, log = _read_url(proc, proc.stderr, start_timeout)
        if url is None:
            _stop(proc)
            raise errors.DispatchError(
                f"lakeshore serve --target {target} did not start: {log.strip()[-800:] or 'no output'}",
                code="unavailable",
            )
        threading.Thread(target=_drain, args=(proc.stderr,), name="lakeshore-serve-log", daemon=True).start()
        super().__init__(url, token=token, namespace=namespace)
        self.target = target
        self._process = proc
        self._owner = os.getpid()
        self._finalizer = weakref.finalize(self, _stop_if_owner, proc, self._owner)
        deadline = time.monotonic() + start_timeout
        while True:  # the port is open when the log names it; wait until the plane answers
            try:
                self.run(self._transport.call("GET", "/readyz", retry="safe"))
                break
            except errors.DispatchError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    self.close()
                    raise

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The server's process."""
        return self._process

    def close(self) -> None:
        """Close the client and stop the server (only the process that started it does)."""
        super().close()
        self._finalizer()

    def __repr__(self) -> str:
        return f"LocalDispatch({self.target!r}, url={self.url!r})"


_spawner_lock = threading.Lock()
_spawner_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    global _spawner_pool
    with _spawner_lock:
        if _spawner_pool is None:
            _spawner_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lakeshore-spawner")
        return _spawner_pool


def _spawner_after_fork() -> None:
    global _spawner_pool, _spawner_lock
    _spawner_pool, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_spawner_after_fork)


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
    )


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _read_url(proc: subprocess.Popen[bytes], stream: IO[bytes], timeout: float) -> tuple[str | None, str]:
    """Read the server's log until it names its URL (``url=http://…``)."""
    found: list[str] = []
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            m = re.search(r"url=(https?://\S+)", line)
            if m:
                found.append(m.group(1))
                done.set()
                return  # _drain reads (and closes) the rest
        stream.close()  # EOF before the URL: the server failed
        done.set()

    threading.Thread(target=read, name="lakeshore-serve-start", daemon=True).start()
    done.wait(timeout)
    return (found[0] if found else None), "".join(lines)


def _drain(stream: IO[bytes]) -> None:
    with stream:
        for _ in iter(stream.readline, b""):
            pass


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stop_if_owner(proc: subprocess.Popen[bytes], owner: int) -> None:
    if os.getpid() == owner:  # a forked child never stops its parent's server
        _stop(proc)


_default_lock = threading.Lock()
_default: Dispatch | None = None


def default_dispatch() -> Dispatch:
    """The process's plane, made on first use: an :class:`HttpDispatch` on
    ``$LAKESHORE_URL`` when it is set, else a :class:`LocalDispatch` on
    ``$LAKESHORE_HOME/lakeshore.db`` (``~/.lakeshore`` by default)."""
    global _default
    with _default_lock:
        if _default is None:
            url = os.environ.get("LAKESHORE_URL")
            if url:
                _default = HttpDispatch(url)
            else:
                home = os.environ.get("LAKESHORE_HOME") or os.path.join(os.path.expanduser("~"), ".lakeshore")
                _default = LocalDispatch(os.path.join(home, "lakeshore.db"))
        return _default


atexit.register(lambda: _default.close() if _default is not None else None)
