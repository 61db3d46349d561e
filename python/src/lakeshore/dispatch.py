"""Planes: where the queues live. :class:`HttpDispatch` reaches a ``lakeshore serve``."""

from __future__ import annotations

import atexit
import dataclasses
import os
import re
import subprocess
import threading
import unicodedata
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, TypeVar

from lakeshore import _daemon, errors
from lakeshore._transport import HttpTransport, Portal, redact_url

__all__ = ["Dispatch", "HttpDispatch", "LocalDispatch", "WorkerInfo", "default_dispatch", "resolve_namespace"]

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"
"""The namespace when neither ``namespace=`` nor ``$LAKESHORE_NAMESPACE`` names one."""

ENV_NAMESPACE = "LAKESHORE_NAMESPACE"
"""The environment variable of the default namespace, as the Go SDK and CLI read it (a
provider sets it for the workers it launches)."""

_NAME_RULE = "1–128 bytes of [A-Za-z0-9._-], not starting with '.', '_' or '-'"


def resolve_namespace(namespace: str | None) -> str:
    """The namespace a Dispatch uses: ``namespace`` when given, else
    ``$LAKESHORE_NAMESPACE`` when set and not empty, else ``"default"`` (Go's
    ``Config.Namespace`` default).

    Raises:
        InvalidError: the name (given, or from the environment: the error says so) breaks
            the rule of namespaces (1–128 bytes of ``[A-Za-z0-9._-]``, not starting with
            ``.``, ``_`` or ``-``: names starting with ``_`` are the server's own)."""
    source = "namespace"
    if namespace is None:
        namespace = os.environ.get(ENV_NAMESPACE)
        if not namespace:
            return DEFAULT_NAMESPACE
        source = f"namespace ${ENV_NAMESPACE}"
    if not is_name(namespace, not_first="._-"):
        raise errors.InvalidError(
            f"invalid {source} {namespace!r}: {_NAME_RULE}", field="namespace", value=namespace, rule=_NAME_RULE
        )
    return namespace


def is_name(name: Any, *, not_first: str) -> bool:
    """Whether ``name`` is a name of the server's rule for namespaces, queues and data
    queues: 1–128 bytes of ``[A-Za-z0-9._-]``, its first character none of ``not_first``.
    The characters are checked first: the rule holds only ASCII, so a string no UTF-8
    holds (a lone surrogate) is refused here, and its length in characters is its length
    in bytes."""
    return (
        isinstance(name, str)
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
        and 1 <= len(name) <= 128
        and name[0] not in not_first
    )


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A live worker in the plane's registry (``run_worker`` and the Go worker register and
    refresh themselves; ``lakeshore workers`` lists them).

    Attributes:
        id: the worker's id (its claims carry it).
        namespace: the namespace of its queues.
        host, pid: where it runs.
        queues: the queues it serves.
        started_at: when it started.
        last_seen: its last registration (the plane's clock).
        provider: the provider that launched it (``""`` when started by hand).
        launch_id: the provider's launch id (``""`` when started by hand).
        running: the jobs it ran at its last registration.
        idle_since: when its last job ended (or it started) while ``running`` is 0; None
            while a job runs.
        offers: what it offers (``cpus_milli``, ``memory_bytes``, ``gpus``, ``gpu_type``,
            ``labels``); None: nothing, so it runs only jobs without a requirement.
        warm_host_keys: the host keys it is warm for (its claims prefer their jobs).
    """

    id: str
    namespace: str
    host: str
    pid: int
    queues: list[str]
    started_at: datetime | None
    last_seen: datetime | None
    provider: str = ""
    launch_id: str = ""
    running: int = 0
    idle_since: datetime | None = None
    offers: dict[str, Any] | None = None
    warm_host_keys: list[str] = dataclasses.field(default_factory=list)


def _worker_info(w: Mapping[str, Any]) -> WorkerInfo:
    def t(k: str) -> datetime | None:
        v = w.get(k)
        return v if isinstance(v, datetime) else None

    return WorkerInfo(
        id=str(w.get("id") or ""),
        namespace=str(w.get("namespace") or ""),
        host=str(w.get("host") or ""),
        pid=int(w.get("pid") or 0),
        queues=[str(q) for q in w.get("queues") or []],
        started_at=t("started_at"),
        last_seen=t("last_seen"),
        provider=str(w.get("provider") or ""),
        launch_id=str(w.get("launch_id") or ""),
        running=int(w.get("running") or 0),
        idle_since=t("idle_since"),
        offers=dict(w["offers"]) if isinstance(w.get("offers"), Mapping) else None,
        warm_host_keys=[str(k) for k in w.get("warm_host_keys") or []],
    )


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# A libpq keyword/value connection string ("host=db port=5432 user=lake password=…"), which
# as a target would read as a file path (the Go side's keywordTargetRE).
_KEYWORD_TARGET = re.compile(r"(?i)^(host|hostaddr|port|dbname|user|password|sslmode|service)\s*=")

# The scheme of a PostgreSQL or HTTP URL written without its "//" ("postgres:user:pw@db",
# "http:127.0.0.1:7077"), which as a target would read as a file path (the Go side's
# schemeNoSlashesRE).
_SCHEME_NO_SLASHES = re.compile(r"(?i)^(postgres|postgresql|http|https):")


def is_url(target: str) -> bool:
    """Whether ``target`` starts with a ``scheme://``."""
    return _SCHEME.match(target) is not None


TOKEN_RULE = (
    "a token is one line of printable characters: no newline or other control character "
    "(a token pasted or echoed with its line end: strip it; the token is not shown)"
)
"""What a bearer token may hold: what one line of an HTTP header carries (Go's
``plane.TokenRule``)."""


def check_token(token: str | None) -> None:
    """Refuse a bearer token (``token=``, ``$LAKESHORE_TOKEN``) that no HTTP
    ``Authorization`` header can carry: one holding a newline, carriage return, tab or any
    other control character (Unicode category Cc, as Go's ``plane.ValidateToken``). Raises
    :class:`~lakeshore.errors.InvalidError` for field ``token`` that never shows the token
    (a secret)."""
    if token and any(unicodedata.category(c) == "Cc" for c in token):
        raise errors.InvalidError(f"invalid token: {TOKEN_RULE}", field="token", rule=TOKEN_RULE)


def _without_password(shown: str) -> str:
    """``shown``, a redacted URL, with its masked password left out (``u:xxxxx@`` → ``u@``):
    the command a hint suggests must not carry one."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):xxxxx@", r"\1@", shown)


def check_target(target: str, field: str, *, http: bool) -> None:
    """Refuse a plane target this client cannot serve, instead of taking it for a file
    path: any ``scheme://`` but ``http://`` and ``https://`` (``postgres://``,
    ``redis://``, …), a target with white space around it, a libpq keyword/value
    connection string (``host=db password=…``), and with ``http=True`` anything but those
    two URLs. Raises
    :class:`~lakeshore.errors.InvalidError` naming what is accepted (the value redacted)."""
    shown = redact_url(target)
    if http:
        accepted = "an http:// or https:// URL of a `lakeshore serve`"
    else:
        accepted = "':memory:', a SQLite file path, or an http:// or https:// URL of a `lakeshore serve`"
    if target.strip() != target:
        raise errors.InvalidError(
            f"{field} {shown!r}: remove the leading or trailing white space (it takes {accepted})",
            field=field,
            value=shown,
            rule=accepted,
        )
    m = _SCHEME.match(target)
    scheme = m.group(1).lower() if m else ""
    if not scheme and not http and _KEYWORD_TARGET.match(target):
        raise errors.InvalidError(
            f"{field} {shown!r} is a libpq keyword/value connection string, which would be a SQLite file "
            "of that name: to use PostgreSQL from Python, run `lakeshore serve --target "
            "postgres://user@host:port/database` with the password in PGPASSWORD or ~/.pgpass "
            "and pass its http:// URL",
            field=field,
            value=shown,
            rule=accepted,
        )
    if not scheme and (m := _SCHEME_NO_SLASHES.match(target)):
        missing = m.group(1).lower()
        hint = ""
        if missing.startswith("postgres"):
            hint = (
                "; to use PostgreSQL from Python, run `lakeshore serve --target postgres://user@host:port/database` "
                "with the password in PGPASSWORD or ~/.pgpass and pass its http:// URL"
            )
        raise errors.InvalidError(
            f"{field} {shown!r}: a {missing} URL needs \"://\" after its scheme (as a file "
            f"path, it would be a SQLite file of that name); it takes {accepted}{hint}",
            field=field,
            value=shown,
            rule=accepted,
        )
    if scheme in ("http", "https") or (not scheme and not http):
        return
    hint = ""
    if scheme in ("postgres", "postgresql"):
        hint = (
            f"; to use PostgreSQL from Python, run `lakeshore serve --target {_without_password(shown)}` "
            "with the password in PGPASSWORD or ~/.pgpass (a command line is read by every user of "
            "the machine; serve never reads LAKESHORE_URL) and pass its http:// URL"
        )
    raise errors.InvalidError(
        f"{field} {shown!r} is not a plane the Python client opens: it takes {accepted}{hint}",
        field=field,
        value=shown,
        rule=accepted,
    )


class Dispatch:
    """A dispatch plane: the queues, their invocations, journals and workers.

    ``Dispatch("http://host:7077")`` (or any ``http(s)://`` URL) is an :class:`HttpDispatch`;
    ``Dispatch(":memory:")`` (a private plane, for tests) and ``Dispatch(path)`` (a SQLite
    file) are :class:`LocalDispatch` planes, served by the local daemon (``lakeshore daemon``).
    Every form takes ``namespace=`` (default ``$LAKESHORE_NAMESPACE``, else ``"default"``):
    the namespace of the queues made from it.

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
            check_target(target, "target", http=False)
            if target.lower().startswith(("http://", "https://")):
                return super().__new__(HttpDispatch)
            return super().__new__(LocalDispatch)
        return super().__new__(cls)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the client core and block until it ends (blocking facades)."""
        return self._portal.run(coro)

    async def run_async(
        self, coro: Coroutine[Any, Any, T], orphan: Callable[[T], Coroutine[Any, Any, None]] | None = None
    ) -> T:
        """Await a coroutine of the client core without blocking the caller's loop (see
        :meth:`~lakeshore._transport.Portal.run_async` for ``orphan``)."""
        return await self._portal.run_async(coro, orphan)

    def close(self) -> None:
        """Close the connections and stop the client's thread. Calls in progress end with
        a ``closed`` DispatchError; later calls raise one."""
        self._closer()

    def workers(self, namespace: str | None = None, *, seen_within: float | None = None) -> list[WorkerInfo]:
        """The live workers of the plane (of ``namespace``; every namespace the token
        covers by default) that registered within ``seen_within`` seconds (default 60)."""
        params: dict[str, Any] = {"namespace": namespace, "seen_within": seen_within}
        ans = self.run(self._transport.call("GET", "/v1/workers", params=params, retry="safe"))
        return [_worker_info(w) for w in ans.get("workers") or []]

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
        url: the server, e.g. ``"http://127.0.0.1:7077"``, or several replicas of one plane,
            as a list or separated by commas (``"http://a:7077,http://b:7077"``): calls go to
            one, and a connection failure or a 502/503/504 answer moves them to the next
            (failover, with the retry rules below); default ``$LAKESHORE_URL``.
        token: the bearer token; default ``$LAKESHORE_TOKEN`` (none when unset). A token
            holding a newline or another control character is refused (:func:`check_token`).
        namespace: the namespace of the queues, data queues and worker registrations made
            from it; default ``$LAKESHORE_NAMESPACE`` when set (a provider sets it for the
            workers it launches), else ``"default"``.
        retry_for: seconds to keep retrying a call the server did not answer (refused
            connections, 502/503) before raising
            :class:`~lakeshore.errors.UnavailableError`; calls safe to repeat only.
    """

    def __init__(
        self,
        url: str | Sequence[str] | None = None,
        token: str | None = None,
        *,
        namespace: str | None = None,
        retry_for: float = 10.0,
    ) -> None:
        namespace = resolve_namespace(namespace)
        if url is None:
            url = os.environ.get("LAKESHORE_URL")
            if not url:
                raise errors.InvalidError(
                    "HttpDispatch needs a URL: pass one or set LAKESHORE_URL (e.g. http://127.0.0.1:7077)",
                    field="url",
                    rule="an http:// or https:// URL",
                )
        urls = url.split(",") if isinstance(url, str) else list(url)
        for one in urls:
            check_target(one.strip(), "url", http=True)
        if token is None:
            token = os.environ.get("LAKESHORE_TOKEN") or None
        check_token(token)
        self._transport = HttpTransport(urls, token, retry_for=retry_for)
        self.url = ",".join(server.url for server in self._transport.servers)
        """The server URLs, separated by commas."""
        self.namespace = namespace
        self._portal = Portal()
        # A Dispatch dropped without close() still stops its thread and connections.
        self._closer = weakref.finalize(self, _close_http, self._portal, self._transport)

    def __repr__(self) -> str:
        shown = ",".join(redact_url(server.url) for server in self._transport.servers)
        return f"HttpDispatch({shown!r}, namespace={self.namespace!r})"


class LocalDispatch(HttpDispatch):
    """A plane served by the local daemon (``lakeshore daemon``) on a unix socket.

    ``target`` is ``":memory:"`` or the path of a SQLite file:

    - ``":memory:"``: a private daemon, a child of this process on a socket in a fresh
      temporary directory. It stops when the Dispatch is closed, at exit, and when this
      process dies (even by SIGKILL: it reads a pipe from this process and exits at EOF).
    - a file: the shared daemon of that file, one per file on the machine, on
      ``$LAKESHORE_HOME/run/<name>-<hash>/daemon.sock``. Directories made on the way (the
      file's, ``$LAKESHORE_HOME``, its ``run/``) are mode 0700 and a database file made here
      0600, as the CLI makes them: payloads and results are the owner's only. The first client starts it under a
      file lock; every client attaches (a shared lock on ``clients.lock``) until it closes
      or exits; the daemon exits after ``idle_exit`` seconds with no client attached. A
      daemon of another protocol or binary is replaced when no client is attached. If the
      daemon dies, the next call starts a new one.

    No Go runtime runs in this process. After ``fork`` a child reconnects on first use (and
    shares the parent's attachment); it never stops its parent's private daemon.

    Args:
        target: ``":memory:"`` or a file path.
        binary: the ``lakeshore`` binary; default ``$LAKESHORE_BIN``, else the one shipped in
            the wheel, else ``lakeshore`` on ``PATH``.
        namespace: as :class:`HttpDispatch`.
        ns: dreamlake-lakeshore's name for ``namespace`` (its ``Dispatch(path, ns=…)``);
            giving both with different values is an InvalidError.
        start_timeout: seconds to wait for a daemon to answer.
        idle_exit: seconds a shared daemon this client starts stays up with no client.

    Raises:
        DispatchError: no binary, a binary without the daemon or of another protocol, a
            daemon that does not start (its log is in the message).
        InvalidError: the socket path is too long (set ``LAKESHORE_HOME`` shorter).
    """

    def __init__(
        self,
        target: str = ":memory:",
        *,
        binary: str | None = None,
        namespace: str | None = None,
        start_timeout: float = 20.0,
        idle_exit: float = _daemon.IDLE_EXIT,
        ns: str | None = None,
    ) -> None:
        if ns is not None:
            if namespace is not None and namespace != ns:
                raise errors.InvalidError(
                    f"namespace={namespace!r} and ns={ns!r} differ: ns is another name for namespace; give one",
                    field="ns",
                    value=ns,
                    rule="the same as namespace, or namespace not given",
                )
            namespace = ns
        namespace = resolve_namespace(namespace)
        binary = _daemon.find_binary(binary)
        self._private: _daemon.PrivateDaemon | None = None
        self._shared: _daemon.SharedDaemon | None = None
        if target == ":memory:":
            self._private = _daemon.PrivateDaemon(binary, start_timeout)
            socket_path, revive = self._private.socket, None
            self.info = self._private.info
        else:
            check_target(str(target), "target", http=False)
            if is_url(str(target)):
                raise errors.InvalidError(
                    f"LocalDispatch serves ':memory:' or a SQLite file, not the URL {redact_url(str(target))!r}: "
                    "use Dispatch(url) or HttpDispatch(url) for a server",
                    field="target",
                    value=redact_url(str(target)),
                    rule="':memory:' or a SQLite file path",
                )
            target = str(Path(target).expanduser().resolve())
            if Path(target).is_dir():
                raise errors.InvalidError(
                    f"{target} is a directory; name a database file, e.g. {os.path.join(target, 'lakeshore.db')}",
                    field="target",
                    value=target,
                    rule="a SQLite file path",
                )
            # The database holds payloads and results: a directory made here is 0700 (as
            # the CLI makes $LAKESHORE_HOME) and a file made here 0600.
            _daemon.make_private_dirs(Path(target).parent)
            _daemon.create_private_file(Path(target))
            self._shared = _daemon.SharedDaemon(binary, target, start_timeout, idle_exit)
            socket_path = self._shared.socket
            revive = self._shared.attach
            self.info = self._shared.info
        self.target = target
        self.socket = socket_path
        self.url = "http://lakeshore"
        self.namespace = namespace
        self._transport = HttpTransport(self.url, None, uds=socket_path, revive=revive)
        self._portal = Portal()
        self._closer = weakref.finalize(
            self, _close_local, self._portal, self._transport, self._private, self._shared
        )

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The private daemon's process (``:memory:``), or None for a shared daemon."""
        return None if self._private is None else self._private.proc

    def close(self) -> None:
        """Close the client; stop a private daemon (only the process that started it does),
        detach from a shared one."""
        self._closer()

    def __repr__(self) -> str:
        return f"LocalDispatch({self.target!r}, socket={self.socket!r}, namespace={self.namespace!r})"


def _close_http(portal: Portal, transport: HttpTransport) -> None:
    transport.close_blocking()  # the portal's loop may never have started
    portal.close(transport.aclose)


def _close_local(
    portal: Portal,
    transport: HttpTransport,
    private: _daemon.PrivateDaemon | None,
    shared: _daemon.SharedDaemon | None,
) -> None:
    _close_http(portal, transport)
    if private is not None:
        private.stop()
    if shared is not None:
        shared.detach()


_default_lock = threading.Lock()
_default: Dispatch | None = None


def default_dispatch() -> Dispatch:
    """The process's plane, made on first use: an :class:`HttpDispatch` on
    ``$LAKESHORE_URL`` when it is set, else the embedded plane: a :class:`LocalDispatch` on
    ``$LAKESHORE_HOME/lakeshore.db`` (``~/.lakeshore`` by default), served by the shared
    daemon of that file. Its namespace is ``$LAKESHORE_NAMESPACE``, else ``"default"``
    (read when it is made)."""
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
