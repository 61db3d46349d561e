"""The one client core: an event loop on a daemon thread (the portal) and the HTTP calls.

Every verb is written once, as a coroutine. Blocking callers (:class:`~lakeshore.SyncQueue`)
run it on the portal's loop and wait for the answer; asyncio callers
(:class:`~lakeshore.Queue`) await it from their own loop, which never blocks: the I/O happens
on the portal's loop, and cancelling the caller's task cancels the call there. After
``fork`` a child makes its own portal and connections on first use (the parent's thread
does not exist in the child); what the parent's threads queued is dropped as the fork
returns (:func:`reset_in_forked_child`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import random
import re
import socket
import ssl
import threading
import time
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import anyio
import anyio.abc
import httpcore
import httpx
import msgpack

from lakeshore import _http11, errors

T = TypeVar("T")
I = TypeVar("I")

RetryClass = Literal["safe", "fenced", "once"]
"""How a call may be repeated after a failure:

- ``"safe"``: repeating changes nothing (reads, waits, submits with a client-made id): on
  connection failures, 502 and 503, within the dispatch's ``retry_for`` window.
- ``"fenced"``: carries a fencing token (settle, heartbeat): as safe, but until the call's
  own deadline (the lease's expiry).
- ``"once"``: claim, post, cancel, kill: repeated only when the request was never sent
  (connection refused) or the server refused it unread (503 ``shutting_down`` or
  ``too_many_long_polls``).
"""

LONG_POLL_MAX = 60.0
"""The longest wait one request asks the server for (the server's default cap)."""

_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# The same names as the Go side's plane.secretParams.
_SECRET_PARAMS = frozenset(
    {
        "password",
        "sslpassword",
        "passwd",
        "pwd",
        "secret",
        "token",
        "access_token",
        "sslkey",
        "secret_access_key",
        "aws_secret_access_key",
        "session_token",
    }
)


# A libpq keyword/value secret ("password=…", quoted or not) in a connection string that
# is not a URL (the Go side's plane.keywordSecret).
_KEYWORD_SECRET = re.compile(r"(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def redact_url(target: str) -> str:
    """``target`` as it may be printed: a URL's password, and the values of query
    parameters that carry secrets (``password=``, ``sslpassword=``, ``token=``, …), replaced
    by ``xxxxx``, and so a libpq keyword string's ``password=`` and a URL's with white space
    around it (as the Go side's ``plane.RedactURL``)."""
    core = target.strip()
    if core and core != target:
        i = target.index(core)
        return target[:i] + redact_url(core) + target[i + len(core) :]
    if not _URL_SCHEME.match(target):
        return _KEYWORD_SECRET.sub(r"\1=xxxxx", _redact_mistyped(target))
    try:
        u = urllib.parse.urlsplit(target)
        netloc = u.netloc
        if u.password is not None:
            userinfo, _, host = netloc.rpartition("@")
            netloc = f"{userinfo.partition(':')[0]}:xxxxx@{host}"
        query = "&".join(
            f"{k}=xxxxx" if k.lower() in _SECRET_PARAMS else (f"{k}={v}" if sep else k)
            for k, sep, v in (pair.partition("=") for pair in u.query.split("&") if pair)
        )
        out = urllib.parse.urlunsplit((u.scheme, netloc, u.path, query, u.fragment))
        if _authority_cut(u):
            # The password may run on past what urlsplit took for the authority: every byte
            # up to the last "@" is dropped too, after the query's secrets were, and what
            # follows is redacted as the URL it then reads as (a query urlsplit took for a
            # fragment) (Go: plane.URLAuthorityCut, RedactURL).
            i, j = out.index("://") + 3, out.rfind("@")
            if j >= i:
                out = redact_url(out[:i] + "xxxxx" + out[j:])
        return out
    except ValueError:
        return target.split("://", 1)[0] + "://xxxxx"


# The scheme a URL written without its "://" starts with, with the colon and slashes given
# ("postgres:/", "postgres:", "postgres//"; the Go side's plane.mistypedScheme).
_MISTYPED_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*(?::/*|/+)")


# What follows the "@" of a URL's user info: a host, an optional port of digits, then the
# end or '/', '?', '#' (the Go side's plane.mistypedHost); an image pinned by digest
# ("img:v1@sha256:e3b0…") does not match.
_MISTYPED_HOST = re.compile(r"^(\[[^\]]*\]|[A-Za-z0-9._~%-]+)(:[0-9]*)?([/?#]|$)")


def _redact_mistyped(target: str) -> str:
    """The user info of text that reads as a URL written without its "://"
    (``postgres:/u:pw@h/db``, ``postgres//u:pw@h``, ``u:pw@h/db``) dropped to ``xxxxx``, its
    scheme kept as given: text without white space holding an "@" with a ':' before it, the
    "@" the last one before the first '/', '?' or '#' after the first, a host after it (the
    Go side's ``plane.redactMistyped``); other text as given."""
    if any(c in target for c in " \t\r\n"):
        return target
    first = target.find("@")
    if first < 0:
        return target
    ends = [i for i in (target.find(c, first) for c in "/?#") if i >= 0]
    end = min(ends) if ends else len(target)
    at = target.rfind("@", 0, end)
    if ":" not in target[:at] or not _MISTYPED_HOST.match(target[at + 1 :]):
        return target
    m = _MISTYPED_SCHEME.match(target[:at])
    start = m.end() if m else 0
    return target[:start] + "xxxxx" + target[at:]


def _authority_cut(u: urllib.parse.SplitResult) -> bool:
    """Whether ``u``'s authority may have been cut inside a password holding '/', '?' or '#'
    unescaped (``postgres://u:12#x@h/db``: host ``u``, port 12, fragment ``x@h/db``): it has
    a password or a port, and an "@" follows it in the path, the fragment, a query key or
    a query value that is not a URL (as the Go side's ``plane.URLAuthorityCut``)."""
    host = u.netloc.rpartition("@")[2].rpartition("]")[2]  # an IPv6 address holds colons
    if u.password is None and ":" not in host:
        return False
    if "@" in u.path or "@" in u.fragment:
        return True
    for pair in re.split("[&;]", u.query):
        k, _, v = pair.partition("=")
        if "@" in k or ("@" in v and "://" not in urllib.parse.unquote_plus(v)):
            return True
    return False


def _name_invocation(err: errors.DispatchError, path: str) -> errors.DispatchError:
    """A ``not_found`` answer of a route addressed by invocation id names that id (the server
    names only the likely causes: its answer about another tenant's id must equal the one
    about an unknown id)."""
    if err.code == "not_found" and path.startswith("/v1/invocations/"):
        inv_id = path.split("/")[3]
        if inv_id and inv_id not in err.message:
            err.message = f"invocation {inv_id}: {err.message}"
            err.args = (err.message,)
    return err


_REQUEST_MARGIN = 30.0

_HELD = 1.0
"""Seconds a failed long-poll must have been held for its failure to restart the retry window."""

_MIN_ATTEMPTS = 3
"""Attempts a repeatable call gets even when its retry window has passed."""

_SENDING = 32
"""Long-polls of one process that connect and send at once (see HttpTransport._long_poll)."""

_SHORT_POOL_CONNECTIONS = 64
_LONG_POOLS = 16
_LONG_POOL_CONNECTIONS = 64


class Portal:
    """An asyncio event loop running on a daemon thread, started on first use."""

    def __init__(self, name: str = "lakeshore-portal") -> None:
        self._name = name
        # Reentrant: a signal handler (or a finalizer) that calls the dispatch while its
        # thread is starting the loop under this lock starts one itself (see loop).
        self._lock = threading.RLock()
        # The running loop and its thread, under the one key "loop": published with one
        # dict.setdefault and taken with one pop, each a single step a signal handler cannot
        # split (see loop).
        self._started: dict[str, tuple[asyncio.AbstractEventLoop, threading.Thread]] = {}
        self._pid = os.getpid()
        self._closed = False
        # Batchers whose waiting callers are failed when the portal closes (held weakly: a
        # batcher refers to its dispatch, which must stay collectable).
        self._batchers: weakref.WeakSet[Batcher[Any, Any]] = weakref.WeakSet()
        reset_in_forked_child(self)

    def _after_fork(self) -> None:
        # The parent's thread is gone here; its loop object must not be touched.
        self._lock = threading.RLock()
        self._started = {}
        self._pid = os.getpid()

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        started = self._started.get("loop")
        return None if started is None else started[0]

    @property
    def _thread(self) -> threading.Thread | None:
        started = self._started.get("loop")
        return None if started is None else started[1]

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The portal's loop, started on first use (again in a forked child).

        A signal handler (or a finalizer) that calls the dispatch while its own thread is
        in the middle of the start (which waits for the loop's thread under the lock)
        re-enters the lock and starts a loop itself; the interrupted start then finds that
        loop and ends its own. Before, the handler waited forever for the lock its
        interrupted frame held. The loop and its thread are published together in one step
        that also checks none was (``dict.setdefault``), so a handler run at any point of
        the start cannot leave two loops running, or the loop of one start paired with the
        thread of another."""
        if self._pid != os.getpid():
            self._after_fork()
        started = self._started.get("loop")
        if started is not None:
            return started[0]
        with self._lock:
            if self._closed:
                raise errors.DispatchError("the dispatch is closed", code="closed")
            started = self._started.get("loop")
            if started is not None:
                return started[0]
            new_loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(new_loop)
                new_loop.call_soon(ready.set)
                try:
                    new_loop.run_forever()
                finally:
                    new_loop.close()

            thread = threading.Thread(target=run, name=self._name, daemon=True)
            thread.start()
            ready.wait()
            mine = (new_loop, thread)
            started = self._started.setdefault("loop", mine)  # one step: see the docstring
            if started is not mine:  # a handler run during the start started one
                new_loop.call_soon_threadsafe(new_loop.stop)
            if self._closed:  # a handler closed the portal during the start
                taken = self._started.pop("loop", None)  # one published after its close
                if taken is not None:
                    with contextlib.suppress(RuntimeError):  # already closed
                        taken[0].call_soon_threadsafe(taken[0].stop)
                raise errors.DispatchError("the dispatch is closed", code="closed")
            return started[0]

    def in_portal(self) -> bool:
        """Whether the caller runs on the portal's thread."""
        return self._thread is not None and threading.get_ident() == self._thread.ident

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run coro on the portal's loop and block until it ends; return or raise its outcome.

        An interrupt (KeyboardInterrupt) while waiting cancels the coroutine."""
        if self.in_portal():
            coro.close()
            raise RuntimeError("a blocking lakeshore call was made on the client's own event loop thread")
        try:
            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except BaseException:
            coro.close()
            raise
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            raise errors.DispatchError("the call was cancelled (the dispatch was closed)", code="closed") from None
        except BaseException:
            fut.cancel()
            raise

    async def run_async(
        self, coro: Coroutine[Any, Any, T], orphan: Callable[[T], Coroutine[Any, Any, None]] | None = None
    ) -> T:
        """Await coro on the portal's loop from another loop without blocking that loop.

        Cancelling the awaiting task cancels the coroutine on the portal. When the coroutine
        had already produced its answer (or produces one despite the cancel), ``orphan``,
        when given, gets that answer on the portal's loop, in a task of its own that the
        cancel does not reach (a claimed job nobody will run is given back there)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - always called from a coroutine
            running = None
        loop = self.loop
        if running is loop:
            return await coro
        if orphan is None:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
        # The caller's cancel marks the concurrent future cancelled at once, while the
        # coroutine on the portal may still produce its answer (the cancel reaches its task
        # a loop turn later): the answer is handed over there, by whichever of the two
        # sides comes second, never lost between them.
        lock = threading.Lock()
        gone = False
        answer: list[T] = []
        hand_over = orphan

        def give_back(result: T) -> None:
            # Always in a task of its own: when the coroutine's task hands over (it produced
            # its answer after the caller went away), the caller's cancel is still on its way
            # to that task and would cut the hand-over short — a released job's settle
            # cancelled before it was sent, the job held until its lease expired.
            with contextlib.suppress(RuntimeError):  # the loop is closed
                asyncio.run_coroutine_threadsafe(hand_over(result), loop)

        async def keep() -> T:
            nonlocal gone
            result = await coro
            with lock:
                late = gone
                if not late:
                    answer.append(result)
            if late:
                give_back(result)
            return result

        fut = asyncio.run_coroutine_threadsafe(keep(), loop)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            with lock:
                gone = True
                done = list(answer)
            if done:
                give_back(done[0])
            raise

    def close(self, cleanup: Callable[[], Awaitable[None]] | None = None, timeout: float = 5.0) -> None:
        """Cancel what runs on the loop, run cleanup there, then stop the loop and its thread."""
        with self._lock:
            self._closed = True
            started = self._started.pop("loop", None)
        if started is None or self._pid != os.getpid():
            return
        loop, thread = started

        async def shutdown() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if cleanup is not None:
                try:
                    await cleanup()
                except Exception:
                    pass

        if thread.ident == threading.get_ident():
            loop.create_task(shutdown()).add_done_callback(lambda _: loop.stop())
            return
        fut = asyncio.run_coroutine_threadsafe(shutdown(), loop)
        try:
            fut.result(timeout)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        for b in list(self._batchers):
            b._fail_pending()


NOT_SENT: Any = object()
"""What :meth:`HttpTransport.call_blocking` returns for a call to send the portal's way."""


class _Batch:
    """The calls sent in one request of a :class:`Batcher`, and the task sending it."""

    __slots__ = ("loop", "task", "calls", "abandon")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[None], calls: list[_Call[Any]], abandon: _http11.Abandon | None
    ) -> None:
        self.loop = loop
        self.task = task
        self.calls = calls
        self.abandon = abandon

    def abandoned(self) -> None:
        """One of the calls was cancelled: once every caller stopped waiting, cancel the
        request, as a cancelled call of its own would be (or, for a batcher that drains,
        half-close its connection and read its answer: :class:`~lakeshore._http11.Abandon`)."""
        if all(c.cancelled() for c in self.calls) and not self.task.done():
            with contextlib.suppress(RuntimeError):  # the loop is closed
                if self.abandon is not None:
                    self.loop.call_soon_threadsafe(self.abandon.fire, self.task)
                else:
                    self.loop.call_soon_threadsafe(self.task.cancel)


class _Call(concurrent.futures.Future[T]):
    """The future of one call handed to a :class:`Batcher`: cancelling it drops it from
    the batch it waits for, or tells the batch it was sent in (no done-callback per call)."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__()
        self._batcher_lock = lock
        self.batch: _Batch | None = None  # set, under the batcher's lock, when sent
        self.dropped = False  # cancelled before it was sent

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        with self._batcher_lock:
            sent = self.batch
            if sent is None:
                self.dropped = True
        if sent is not None:
            sent.abandoned()
        return True


class Batcher(Generic[I, T]):
    """Coalesces calls made at once, from any thread or task, into batched calls on a
    portal's loop.

    :meth:`put` hands an item over and returns a future of its answer without a coroutine,
    a task or a loop turn of its own: the first item of a quiet moment is sent on the
    loop's next turn (alone: no added latency), and items that arrive while ``in_flight``
    batches are being sent wait and go together in the next one (up to ``max_batch``).
    ``send`` gets a list of items and returns one answer or exception per item, in order;
    an exception it raises is every item's.
    """

    def __init__(
        self,
        portal: Portal,
        send: Callable[[list[I]], Awaitable[list[T | BaseException]]],
        *,
        max_batch: int = 1000,
        in_flight: int = 2,
        orphan: Callable[[T], Awaitable[None]] | None = None,
        drain: bool = False,
    ) -> None:
        self._portal = portal
        self._send = send
        # Called on the loop with the answer of an item whose caller stopped waiting (a
        # claimed job nobody will run is released here).
        self._orphan = orphan
        # drain: a batch whose callers all stopped waiting half-closes its connection and
        # reads its answer (_http11.Abandon) instead of being cancelled, so that the
        # orphan hook gets the jobs the server claimed for it.
        self._drain = drain
        self._max_batch = max_batch
        self._max_in_flight = in_flight
        self._after_fork()
        portal._batchers.add(self)
        reset_in_forked_child(self)

    def _after_fork(self) -> None:
        # Start afresh (in a forked child: the parent's batches are not ours to answer).
        self._lock = threading.Lock()
        self._pending: list[tuple[I, _Call[T]]] = []
        self._in_flight = 0
        self._scheduled = False
        self._releases: set[asyncio.Future[None]] = set()

    def idle(self) -> bool:
        """Whether no batch is being sent and no item waits for one (a hint: read without
        the lock, it may change at once)."""
        return self._in_flight == 0 and not self._pending

    def put(self, item: I) -> concurrent.futures.Future[T]:
        """Queue item for the next batch; the future gets its answer or exception.

        Raises:
            errors.DispatchError: the portal is closed (code ``closed``)."""
        loop = self._portal.loop
        fut: _Call[T] = _Call(self._lock)
        with self._lock:
            self._pending.append((item, fut))
            wake = not self._scheduled and self._in_flight < self._max_in_flight
            if wake:
                self._scheduled = True
        if wake:
            if self._portal.in_portal():
                loop.call_soon(self._flush)  # no self-pipe write and loop wake-up for our own loop
            else:
                loop.call_soon_threadsafe(self._flush)
        return fut

    def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            self._scheduled = False
            while self._pending and self._in_flight < self._max_in_flight:
                # A call cancelled while it waited here is not sent.
                batch = [entry for entry in self._pending[: self._max_batch] if not entry[1].dropped]
                del self._pending[: self._max_batch]
                if not batch:
                    continue
                self._in_flight += 1
                abandon = _http11.Abandon() if self._drain else None
                task = loop.create_task(self._run(batch, abandon))
                sent = _Batch(loop, task, [fut for _, fut in batch], abandon)
                for _, fut in batch:
                    fut.batch = sent

    async def _run(self, batch: list[tuple[I, _Call[T]]], abandon: _http11.Abandon | None = None) -> None:
        if abandon is not None:
            _http11.abandon_var.set(abandon)  # this task's own context: seen by the pool's requests
        try:
            try:
                answers = await self._send([item for item, _ in batch])
            except asyncio.CancelledError:
                closed = errors.DispatchError("the call was cancelled (the dispatch was closed)", code="closed")
                answers = [closed] * len(batch)
            except BaseException as e:  # noqa: BLE001 - every waiting caller gets it
                answers = [e] * len(batch)
            orphans: list[T] = []
            for (_, fut), answer in zip(batch, answers):
                try:
                    # A caller on another thread may cancel between a done() check and
                    # the set: the set itself decides, and the other callers still get
                    # their answers.
                    if isinstance(answer, BaseException):
                        fut.set_exception(answer)
                    else:
                        fut.set_result(answer)
                except concurrent.futures.InvalidStateError:
                    if self._orphan is not None and not isinstance(answer, BaseException):
                        orphans.append(answer)
            if orphans:
                # In a task of their own: once every caller of the batch has gone, this
                # task may be cancelled (_abandoned), which must not cut the releases short.
                release = asyncio.ensure_future(self._release(orphans))
                self._releases.add(release)
                release.add_done_callback(self._releases.discard)
        finally:
            with self._lock:
                self._in_flight -= 1
                again = bool(self._pending) and not self._scheduled
                if again:
                    self._scheduled = True
            if again:
                self._flush()

    async def _release(self, orphans: list[T]) -> None:
        assert self._orphan is not None
        # A task of its own, whose context was copied from the batch's: its requests are
        # not the abandoned batch's.
        _http11.abandon_var.set(None)
        for answer in orphans:
            with contextlib.suppress(Exception):
                await self._orphan(answer)

    def _fail_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for _, fut in pending:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
                fut.set_exception(errors.DispatchError("the call was cancelled (the dispatch was closed)", code="closed"))


def wait_future(portal: Portal, put: Callable[[], concurrent.futures.Future[T]]) -> T:
    """Hand a call to a batcher (``put``, which calls :meth:`Batcher.put`) and block until
    its future is done; return or raise its outcome.

    Raises RuntimeError on the portal's own thread (the wait would never end), before
    ``put`` is called: a call that raised was not sent (as :meth:`Portal.run`'s)."""
    if portal.in_portal():
        raise RuntimeError("a blocking lakeshore call was made on the client's own event loop thread")
    return put().result()


_forked_resets: weakref.WeakSet[Any] = weakref.WeakSet()


def reset_in_forked_child(obj: Any) -> None:
    """Have ``obj._after_fork()`` called in a forked child, as the fork returns there
    (``os.register_at_fork``), before any thread of the child can use obj: what only the
    parent's threads could answer (the calls they queued, a lock one of them held) starts
    afresh, once. A check of the pid at obj's first use instead would run on several of the
    child's threads at once, and the second reset would drop what the first thread's
    caller had queued meanwhile, leaving that caller waiting forever."""
    _forked_resets.add(obj)


def _reset_after_fork() -> None:
    for obj in list(_forked_resets):
        obj._after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)


class UnixSocketBackend(httpcore.AnyIOBackend):
    """httpcore's anyio backend with a unix-socket connect that cannot race its timeout.

    anyio's ``connect_unix`` (4.x) waits out a refused connect (``EAGAIN``: the daemon's
    listen backlog is full, as under a burst of new connections on a loaded machine) with
    ``loop.add_writer(sock, future.set_result, None)``, and an unconnected unix socket is
    always writable, so it spins on ``connect()`` while the backlog stays full. When the
    connect timeout (``anyio.fail_after``, which delivers its cancellation once per loop turn)
    cancels that future in the turn where the writer callback is already queued, the callback
    sets a result on the cancelled future and the loop logs ``asyncio.exceptions.
    InvalidStateError: invalid state`` "from a loop callback" (seen in a daemon latency run);
    the spinning also starves the client loop. This connect retries ``connect()`` after
    short sleeps (1 ms, doubling to 50 ms) with no loop callback, and raises
    ``httpcore.ConnectTimeout`` at the timeout."""

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        from httpcore._backends.anyio import AnyIOStream  # the stream httpcore's backend makes

        deadline = None if timeout is None else time.monotonic() + timeout
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            delay = 0.001
            while True:
                try:
                    sock.connect(path)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() + delay > deadline:
                        raise httpcore.ConnectTimeout(f"connect to {path}: the listen backlog stayed full") from None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.05)
            for option in socket_options or ():
                sock.setsockopt(*option)
            stream = await anyio.abc.UNIXSocketStream.from_socket(sock)
        except OSError as e:
            sock.close()
            raise httpcore.ConnectError(str(e) or type(e).__name__) from e
        except BaseException:
            sock.close()
            raise
        return AnyIOStream(stream)


def _unix_transport(uds: str, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """An httpx transport to a unix socket through :class:`UnixSocketBackend`."""
    t = httpx.AsyncHTTPTransport(uds=uds, limits=limits, verify=False)
    # httpx takes no network backend: its pool (the private ``_pool``, the same since httpx
    # 0.18) is replaced with one that has ours.
    t._pool = httpcore.AsyncConnectionPool(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        uds=uds,
        network_backend=UnixSocketBackend(),
    )
    return t


_INT_RULE = "the number is out of range: use an integer from -9223372036854775808 to 18446744073709551615"


_UTF8_RULE = "use text that UTF-8 holds: no lone surrogates (such as '\\ud800'); send bytes as bytes"


def utf8_size(s: str) -> int | None:
    """The bytes of ``s`` in UTF-8, or None when no UTF-8 holds it (a lone surrogate such as
    ``"\\ud800"``, which Python strings may hold): a validator refuses it with its field's
    InvalidError instead of letting ``str.encode`` raise UnicodeEncodeError."""
    try:
        return len(s.encode())
    except UnicodeEncodeError:
        return None


def pack(body: Mapping[str, Any]) -> bytes:
    """Encode a request body as msgpack: bytes as bin, aware datetimes as timestamps.

    Raises:
        InvalidError: an int no msgpack integer holds (``batch_size=10**30``), or a string
            (a value or a map key) no UTF-8 holds (a lone surrogate: ``metadata={"a":
            "\\ud800"}``), naming the field as the server would (``global_indexes[0]``,
            ``metadata.a``), never msgpack's bare OverflowError or UnicodeEncodeError."""
    try:
        out = msgpack.packb(body, use_bin_type=True, datetime=True)
    except OverflowError:
        field, value = _first(body, "", _int_out_of_range)
        raise errors.InvalidError(
            f"invalid {field or 'request body'} {value}: {_INT_RULE}", field=field, value=value, rule=_INT_RULE
        ) from None
    except UnicodeEncodeError:
        field, value = _first(body, "", _not_utf8)
        raise errors.InvalidError(
            f"invalid {field or 'request body'} {value!r}: {_UTF8_RULE}", field=field, value=value, rule=_UTF8_RULE
        ) from None
    assert isinstance(out, bytes)
    return out


def _int_out_of_range(v: Any) -> bool:
    """Whether ``v`` is an int outside msgpack's range."""
    return isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**64


def _not_utf8(v: Any) -> bool:
    """Whether ``v`` is a string no UTF-8 holds (a lone surrogate)."""
    return isinstance(v, str) and utf8_size(v) is None


def _first(v: Any, path: str, bad: Callable[[Any], bool]) -> tuple[str, Any]:
    """The path (``a.b[2]``) and value of the first value or map key in ``v`` that is
    ``bad`` (a bad map key is named by its map's path); ("", None) when none is."""
    if bad(v):
        return path, v
    if isinstance(v, Mapping):
        for k, e in v.items():
            if bad(k):
                return path or "request body", k
            found = _first(e, f"{path}.{k}" if path else str(k), bad)
            if found[0] or found[1] is not None:
                return found
    elif isinstance(v, (list, tuple)):
        for i, e in enumerate(v):
            found = _first(e, f"{path}[{i}]", bad)
            if found[0] or found[1] is not None:
                return found
    return "", None


def unpack(data: bytes) -> Any:
    """Decode a msgpack answer: timestamps as aware UTC datetimes."""
    return msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)


def _close_on_its_loop(pool: _http11.Pool) -> None:
    """Close a lean pool replaced by one of another loop: on its own loop while that runs;
    a closed loop can no longer close its transports, so its connections are only dropped
    (each socket is closed when its transport is collected)."""
    if pool.loop.is_closed():
        pool.drop()
        return
    try:
        pool.loop.call_soon_threadsafe(pool.close)
    except RuntimeError:  # closed meanwhile
        pool.drop()


class _Server:
    """One server of a transport: its URL and its connection pools (made on first use, in
    the process and on the loop that use them)."""

    def __init__(self, url: str, token: str | None, connect_timeout: float, uds: str | None) -> None:
        self.url = url
        self.token = token
        self.uds = uds
        self._connect_timeout = connect_timeout
        # Short calls get a pool of their own; long-polls spread over several pools.
        # httpcore's pool does work per waiting request on every change, so one pool holding
        # a thousand long-polls would slow every other call of the process.
        self._short: httpx.AsyncClient | None = None
        self._long: list[httpx.AsyncClient] = []
        self._next_long = 0
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._client_pid = 0
        # The hot routes' lean HTTP/1.1 connections (plain http:// and unix sockets only),
        # with the same bounds on requests in flight as the httpx pools.
        self.hot_ok = uds is not None or url.startswith("http://")
        self.hot_prefix = urlsplit(url).path  # a path the server is mounted under, if any
        self._hot: _http11.Pool | None = None
        self._hot_slots: tuple[asyncio.Semaphore, asyncio.Semaphore] | None = None
        self._hot_pid = 0
        # The blocking connections, one pool per process (a forked child makes its own),
        # published with one dict.setdefault so that threads starting at once share one.
        self._blocking: dict[int, _http11.BlockingPool] = {}
        self._closed = False

    def _new_client(self, max_connections: int) -> httpx.AsyncClient:
        headers = {"Accept": "application/msgpack", "User-Agent": "lakeshore-python"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        return httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            limits=limits,
            # No TLS on a unix socket or an http:// URL: verify=False skips loading the CA
            # bundle (0.1–0.4 s per client, 17 clients per transport) for nothing.
            transport=_unix_transport(self.uds, limits)
            if self.uds
            else httpx.AsyncHTTPTransport(limits=limits, verify=False)
            if self.url.startswith("http://")
            else None,
            timeout=httpx.Timeout(_REQUEST_MARGIN, connect=self._connect_timeout, pool=None),
        )

    def http(self, long_poll: bool) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """A client and the semaphore bounding its requests in flight to its connections.

        httpcore's pool does work per queued request whenever a request starts or ends, so
        a burst of thousands queued in one pool takes quadratic time (and times out its
        connects); requests wait on the semaphore instead, in O(1)."""
        if self._short is None or self._client_pid != os.getpid():
            self._short = self._new_client(_SHORT_POOL_CONNECTIONS)
            self._long = [self._new_client(_LONG_POOL_CONNECTIONS) for _ in range(_LONG_POOLS)]
            self._slots = {
                id(c): asyncio.Semaphore(_LONG_POOL_CONNECTIONS if c is not self._short else _SHORT_POOL_CONNECTIONS)
                for c in [self._short, *self._long]
            }
            self._client_pid = os.getpid()
        if not long_poll:
            client = self._short
        else:
            self._next_long = (self._next_long + 1) % len(self._long)
            client = self._long[self._next_long]
        return client, self._slots[id(client)]

    def hot_pool(self, long_poll: bool) -> tuple[_http11.Pool, asyncio.Semaphore]:
        """The lean pool of this process and loop, and the semaphore bounding its requests
        in flight (as many as the httpx pools allow: short calls and long-polls apart)."""
        loop = asyncio.get_running_loop()
        pool = self._hot
        if pool is None or pool.loop is not loop or self._hot_pid != os.getpid():
            if pool is not None and self._hot_pid == os.getpid():
                _close_on_its_loop(pool)
            pool = self._hot = _http11.Pool(loop, self.endpoint())
            self._hot_slots = (
                asyncio.Semaphore(_SHORT_POOL_CONNECTIONS),
                asyncio.Semaphore(_LONG_POOLS * _LONG_POOL_CONNECTIONS),
            )
            self._hot_pid = os.getpid()
        assert self._hot_slots is not None
        return pool, self._hot_slots[1 if long_poll else 0]

    def endpoint(self) -> _http11.Endpoint:
        """Where this server's own HTTP/1.1 pools connect, and their fixed header lines."""
        return _http11.Endpoint.of(self.url, uds=self.uds, token=self.token, connect_timeout=self._connect_timeout)

    def blocking_pool(self) -> _http11.BlockingPool | None:
        """The blocking connections of this process for calls on the caller's thread, or
        None once the server's connections are closed."""
        pid = os.getpid()
        pool = self._blocking.get(pid)
        if pool is None:
            if self._closed:
                return None
            # One step: two threads making the first pool at once get the same one (the
            # connections of a pool that lost would be kept by no one).
            pool = self._blocking.setdefault(pid, _http11.BlockingPool(self.endpoint()))
            if self._closed:  # close_blocking ran since the check and may have missed it
                pool.close()
                return None
        return None if pool.closed else pool

    def close_blocking(self) -> None:
        """Close the blocking connections (from any thread); later blocking calls go the
        portal's way."""
        self._closed = True  # before the pool is read: a pool made after sees it
        blocking = self._blocking.get(os.getpid())
        if blocking is not None:
            blocking.close()

    async def aclose(self) -> None:
        """Close the connections (on the loop that made them)."""
        self.close_blocking()
        clients = [c for c in [self._short, *self._long] if c is not None]
        self._short, self._long = None, []
        hot, self._hot = self._hot, None
        if hot is not None and self._hot_pid == os.getpid():
            hot.close()
        if self._client_pid == os.getpid():
            for c in clients:
                await c.aclose()


def server_urls(url: str | Sequence[str]) -> list[str]:
    """The servers of ``url``: one URL, several separated by commas
    (``"http://a:7077,http://b:7077"``, replicas of one plane) or a list of URLs; each
    without a trailing slash.

    Raises:
        errors.InvalidError: an empty list, or a URL that is not http:// or https://.
    """
    parts = url.split(",") if isinstance(url, str) else list(url)
    urls = [u.strip().rstrip("/") for u in parts]
    if not urls:
        raise errors.InvalidError(
            "invalid server URL: the list is empty", field="url", value="", rule="an http:// or https:// URL"
        )
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise errors.InvalidError(
                f"invalid server URL {redact_url(u)!r}: use http://host:port or https://host:port, "
                "or several separated by commas",
                field="url",
                value=redact_url(u),
                rule="an http:// or https:// URL",
            )
    return urls


class HttpTransport:
    """The HTTP calls of one client: msgpack bodies, bearer token, retries by class.

    Several servers (replicas of one plane) may be given: calls go to one of them, and a
    connection failure or a 502, 503 or 504 answer moves every later call to the next one
    (failover); a call that its retry class allows to repeat is repeated there at once.

    Lives on a portal's loop: its ``httpx.AsyncClient`` is made there on first use."""

    def __init__(
        self,
        url: str | Sequence[str],
        token: str | None,
        *,
        retry_for: float = 10.0,
        connect_timeout: float = 5.0,
        uds: str | None = None,
        revive: Callable[[], object] | None = None,
    ) -> None:
        self._servers = [_Server(u, token, connect_timeout, uds) for u in server_urls(url)]
        self._current = 0
        self.token = token
        self.retry_for = retry_for
        self.uds = uds
        # Called (on a worker thread) when the server cannot be reached, before a retry: a
        # local dispatch restarts its daemon there.
        self.revive = revive
        self._connect_timeout = connect_timeout
        self._sending: asyncio.Semaphore | None = None
        self._sending_pid = 0

    @property
    def servers(self) -> list[_Server]:
        """The servers, in failover order."""
        return self._servers

    @property
    def url(self) -> str:
        """The URL of the server calls go to now."""
        return self._servers[self._current].url

    def _failover(self, i: int) -> None:
        """Move later calls from server ``i``, which failed, to the next server (unless an
        earlier failure moved them already)."""
        if self._current == i:
            self._current = (i + 1) % len(self._servers)

    def _sending_gate(self) -> asyncio.Semaphore:
        if self._sending is None or self._sending_pid != os.getpid():
            self._sending = asyncio.Semaphore(_SENDING)
            self._sending_pid = os.getpid()
        return self._sending

    async def _long_poll(
        self,
        client: httpx.AsyncClient,
        method: str,
        path: str,
        query: Mapping[str, str],
        content: bytes | None,
        headers: Mapping[str, str],
        wait: float,
    ) -> tuple[httpx.Response, bytes]:
        """Send a long-poll through the sending gate: at most ``_SENDING`` long-polls of the
        process connect and send at once; the gate opens again once a request is sent,
        so the holds themselves are not bounded by it.

        A thousand waits started at once would otherwise open a thousand connections on
        one loop together: on a loaded machine the loop then writes a request seconds
        after its connection was accepted (past the server's 10 s header timeout, which
        closes it unanswered: "Server disconnected without sending a response") or
        notices a finished connect after the connect timeout."""
        gate = self._sending_gate()
        await gate.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        async def trace(event: str, _info: Mapping[str, Any]) -> None:
            if event == "http11.receive_response_headers.started":
                release()

        try:
            resp = await client.request(
                method,
                path,
                params=query,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(wait + _REQUEST_MARGIN, connect=self._connect_timeout, pool=None),
                extensions={"trace": trace},
            )
            release()
            return resp, await resp.aread()
        finally:
            release()

    def close_blocking(self) -> None:
        """Close every server's blocking connections (:meth:`call_blocking`'s), from any
        thread, even when the portal's loop never started."""
        for server in self._servers:
            server.close_blocking()

    async def aclose(self) -> None:
        """Close the connections of every server (on the loop that made them)."""
        for server in self._servers:
            await server.aclose()

    def call_blocking(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        wait: float = 0.0,
    ) -> Any:
        """Make one call of a hot route on the calling thread, on a blocking keep-alive
        connection, without the portal's loop: one attempt, no retry.

        Returns the decoded answer of a 2xx, or :data:`NOT_SENT` when the call must go the
        portal's way (:meth:`call`) instead: an ``https://`` server, closed connections, a
        connection that failed (which may or may not have carried the request: only calls
        that may be repeated, such as a submit with its id, go this way) or an answer that
        :meth:`call` would retry (502, 503, 504, ``shutting_down``,
        ``too_many_long_polls``). :meth:`call` then makes the attempts, failover and daemon
        restart as always. ``wait``: the seconds the server may hold the request (a
        long-poll); each read's timeout is this plus a margin, as :meth:`call`'s.

        Raises:
            errors.DispatchError: the server's error, rebuilt from its body, when it is not
                one to retry."""
        at = self._current
        server = self._servers[at]
        if not server.hot_ok:
            return NOT_SENT
        pool = server.blocking_pool()
        if pool is None:
            return NOT_SENT
        content = None if body is None else pack(body)
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        target = server.hot_prefix + path + ("?" + urlencode(query) if query else "")
        headers = {} if content is None else {"Content-Type": "application/msgpack"}
        try:
            resp = pool.request(method, target, content, headers, wait + _REQUEST_MARGIN)
        except httpx.TransportError:
            return NOT_SENT
        status = resp.status_code
        decoded = _decode_answer(resp, resp.content)
        if 200 <= status < 300:
            return _lakeshore_answer(resp, decoded, server.url)
        if status in (502, 503, 504):
            return NOT_SENT
        err = _name_invocation(errors.error_from_body(decoded, status), path)
        if err.code in ("shutting_down", "too_many_long_polls"):
            return NOT_SENT
        raise err

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        wait: float = 0.0,
        retry: RetryClass = "safe",
        deadline: float | None = None,
        raw: bool = False,
        accept: str | None = None,
        hot: bool = False,
        content: bytes | None = None,
        content_type: str = "application/octet-stream",
    ) -> Any:
        """Make one API call and return the decoded answer, retrying by ``retry``.

        Args:
            wait: the seconds the server may hold the request (long-polls); the request's
                read timeout is this plus a margin.
            deadline: a ``time.monotonic()`` instant after which no retry starts.
            raw: return ``(body bytes, headers)`` of a 2xx answer undecoded (Arrow reads).
            accept: the Accept header (default msgpack).
            hot: a route of the queue's hot path (submit, claim, settle, wait): sent by the
                lean HTTP/1.1 client (:mod:`lakeshore._http11`) on ``http://`` and unix
                sockets, with the same timeouts, errors and retries as through httpx.
            content: a raw request body (a code archive) instead of ``body``, sent with
                ``content_type``.

        Raises:
            errors.DispatchError: the server's error, rebuilt from its body, or
                :class:`~lakeshore.errors.UnavailableError` when it could not be reached.
        """
        headers: dict[str, str] = {}
        if body is not None:
            content = pack(body)
            headers["Content-Type"] = "application/msgpack"
        elif content is not None:
            headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        resp: httpx.Response | _http11.Answer
        # The retry window starts at the first failure, not at the call: a long-poll that
        # held for a while and then dropped (the server closed the connection — e.g. a fresh
        # connection whose request an overloaded client sent after the server's header
        # timeout — or a read that timed out) is repeated as a call that failed at once is.
        first_failure: float | None = None
        attempt = 0
        while True:
            attempt += 1
            attempt_start = time.monotonic()
            at = self._current
            server = self._servers[at]
            lean: _http11.Pool | None = None
            if hot and server.hot_ok and not raw and accept is None:
                lean, slots = server.hot_pool(wait > 0)
                target = server.hot_prefix + path + ("?" + urlencode(query) if query else "")
            else:
                client, slots = server.http(wait > 0)
            retryable = False
            retry_after = 0.0
            held = False  # a long-poll that reached the server and then failed
            cause: BaseException | None = None
            try:
                async with slots:
                    if lean is not None:
                        resp = await lean.request(
                            method,
                            target,
                            content,
                            headers,
                            wait + _REQUEST_MARGIN,
                            self._sending_gate() if wait > 0 else None,
                        )
                        data = resp.content
                    elif wait > 0:
                        resp, data = await self._long_poll(client, method, path, query, content, headers, wait)
                    else:
                        resp = await client.request(
                            method,
                            path,
                            params=query,
                            content=content,
                            headers=headers,
                            timeout=httpx.Timeout(wait + _REQUEST_MARGIN, connect=self._connect_timeout, pool=None),
                        )
                        data = await resp.aread()
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                cause = e
                retryable = True  # never sent: any call may be repeated
                self._failover(at)
                where = f"the local daemon's socket {self.uds}" if self.uds else f"the Lakeshore server at {redact_url(server.url)}"
                hint = "" if self.uds else "; is `lakeshore serve` running there (check LAKESHORE_URL)?"
                if _untrusted_certificate(e):
                    # No retry makes the certificate trusted; with several servers the next
                    # one is tried, as for any failure.
                    retryable = len(self._servers) > 1
                    hint = (
                        "; the server's TLS certificate is not trusted here: to trust a self-signed "
                        "certificate or a private CA, set SSL_CERT_FILE to its PEM file (the "
                        "certificate must also name the host in the URL)"
                    )
                err: errors.DispatchError = errors.UnavailableError(
                    f"cannot reach {where}: {str(e) or type(e).__name__}{hint}",
                    code="unavailable",
                )
                if self.revive is not None:
                    try:
                        await asyncio.to_thread(self.revive)
                    except errors.DispatchError as re:
                        raise re from e
            except httpx.TransportError as e:
                cause = e
                retryable = retry != "once"
                held = wait > 0
                self._failover(at)
                err = errors.UnavailableError(
                    f"{method} {path}: the connection to {redact_url(server.url)} failed: {str(e) or type(e).__name__}",
                    code="unavailable",
                )
            else:
                status = resp.status_code
                if raw and 200 <= status < 300:
                    return data, resp.headers
                decoded = _decode_answer(resp, data)
                if 200 <= status < 300:
                    return _lakeshore_answer(resp, decoded, server.url)
                err = _name_invocation(errors.error_from_body(decoded, status), path)
                if status in (502, 503, 504):
                    self._failover(at)
                if err.code in ("shutting_down", "too_many_long_polls"):
                    retryable = True
                elif status in (502, 503, 504):
                    retryable = retry != "once"
                ra = resp.headers.get("retry-after")
                if ra:
                    try:
                        retry_after = float(ra)
                    except ValueError:
                        retry_after = 0.0
            now = time.monotonic()
            if not retryable:
                raise err from cause
            if first_failure is None or (held and now - attempt_start >= _HELD):
                # A request the server held and then dropped made progress: the window
                # starts again (only quick failures in a row use it up).
                first_failure = now
            if retry == "fenced" and deadline is not None:
                limit = deadline
            else:
                limit = first_failure + self.retry_for if deadline is None else min(first_failure + self.retry_for, deadline)
            pause = max(retry_after, min(2.0, 0.05 * (2 ** min(attempt - 1, 6))) * (0.5 + random.random() / 2))
            if len(self._servers) > 1 and attempt % len(self._servers) != 0:
                pause = 0.0  # failing over: the next server has not been tried in this round
            # A safe call gets at least _MIN_ATTEMPTS attempts before its deadline even when
            # one slow failure (a connect timeout on a loaded machine) used up the window.
            if now + pause > limit and (attempt >= _MIN_ATTEMPTS or retry == "once" or (deadline is not None and now + pause > deadline)):
                raise err from cause
            await asyncio.sleep(pause)


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _decode_answer(resp: httpx.Response | _http11.Answer, data: bytes) -> Any:
    if not data:
        return {}
    ctype = resp.headers.get("content-type", "")
    try:
        if "msgpack" in ctype:
            return unpack(data)
        if "json" in ctype:
            return json.loads(data)
    except Exception:
        return None
    return None


def _lakeshore_answer(resp: httpx.Response | _http11.Answer, decoded: Any, url: str) -> Mapping[str, Any]:
    """The decoded body of a successful answer: every Lakeshore answer is a map. Anything
    else (an HTML page, JSON that is not an object, a body that does not decode: another web
    service at the URL, a captive portal, a proxy) is a DispatchError saying so, never a
    value the caller fails on with a TypeError."""
    if isinstance(decoded, Mapping):
        return decoded
    ctype = resp.headers.get("content-type", "") or "none"
    raise errors.DispatchError(
        f"HTTP {resp.status_code} from {redact_url(url)}: not a Lakeshore answer (Content-Type {ctype}); "
        "is this a Lakeshore server's URL (check LAKESHORE_URL)?",
        code="internal",
        status=resp.status_code,
    )


def path_segment(field: str, value: str) -> str:
    """``value`` quoted as one segment of a request path (every ``/`` escaped).

    Raises:
        InvalidError: ``value`` is a string no UTF-8 holds (a lone surrogate), naming
            ``field``, never ``quote``'s UnicodeEncodeError."""
    if isinstance(value, str) and utf8_size(value) is None:
        raise errors.InvalidError(f"invalid {field} {value!r}: {_UTF8_RULE}", field=field, value=value, rule=_UTF8_RULE)
    return quote(value, safe="")


def queue_path(namespace: str, queue: str) -> str:
    """The path of a queue's routes: ``/v1/namespaces/{ns}/queues/{queue}``."""
    return f"/v1/namespaces/{path_segment('namespace', namespace)}/queues/{path_segment('queue name', queue)}"


def invocation_path(id: str) -> str:
    """The path of an invocation's routes: ``/v1/invocations/{id}``."""
    return f"/v1/invocations/{path_segment('id', id)}"


def seconds(v: float | None) -> float | None:
    """A duration for the API (seconds), or None."""
    return None if v is None else float(v)


def as_time(v: Any) -> datetime | None:
    """An answer's time field as a datetime (msgpack timestamps decode to datetimes)."""
    return v if isinstance(v, datetime) else None


def _untrusted_certificate(e: BaseException) -> bool:
    """Whether ``e`` (a connect error) comes from the TLS handshake refusing the server's
    certificate (an unknown authority, a name it does not hold, expired)."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ssl.SSLCertVerificationError):
            return True
        cur = cur.__cause__ or cur.__context__
    return False
