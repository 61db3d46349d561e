"""A lean HTTP/1.1 client for the queue's hot routes (submit, claim, settle, wait).

httpx's async stack (httpx, httpcore, h11, anyio) costs about 0.3 ms of CPU per request; a
busy client spends most of its time there. This module sends the same requests with one
``transport.write`` and parses the answer in one ``data_received`` pass: an
:class:`asyncio.Protocol` per keep-alive connection, on the portal's loop.

It behaves as the httpx path does where :meth:`~lakeshore._transport.HttpTransport.call`
can tell: it raises httpx's exception types (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``RemoteProtocolError``, ``ReadError``), applies the connect timeout and a
read timeout per read, keeps idle connections for :data:`KEEPALIVE_EXPIRY` seconds (httpx's
default) and drops one the server closed as soon as the loop sees the close. It speaks plain
``http://`` and unix sockets only; ``https://`` goes through httpx.

:class:`BlockingPool` sends the same requests on blocking sockets from the calling thread
(the sync surface's lone calls), with the same parser.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import select
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

KEEPALIVE_EXPIRY = 5.0
"""Seconds an idle connection is kept for reuse (httpx's default ``keepalive_expiry``)."""

IDLE_MAX = 64
"""The most idle connections a :class:`Pool` keeps for reuse (httpx's
``max_keepalive_connections`` of one pool): a connection put back past that is closed, so a
burst of a thousand long-polls (concurrent waits) leaves at most this many sockets open
once it is over, not a thousand."""

_MAX_HEAD = 64 << 10
"""The most bytes of status line and headers an answer may have."""


CLAIM_ANSWER_WAIT = 5.0
"""Seconds a claim whose callers all stopped waiting waits, after half-closing its
connection, for the server's answer before the request is cancelled (the server answers at
once when it reads the EOF; this bounds one that does not)."""


class Abandon:
    """The connections of a batch's requests in flight, for a batch whose callers all
    stopped waiting (:meth:`_Batch.abandoned`) while its answer may carry claimed jobs.

    Cancelling such a request would close its connection under an answer the server may
    already have sent, leaving the jobs in it held until their lease expires. Instead
    :meth:`fire` half-closes each connection (``write_eof``): the server reads the EOF,
    ends the long-poll and gives back whatever it claims after that, and the answer is
    still read to the end, its jobs given back by the batcher's orphan hook. The lean
    HTTP/1.1 pool registers its connections here (:data:`abandon_var`); a request that has
    none to register (the httpx path) is cancelled as before."""

    __slots__ = ("fired", "conns", "sent")

    def __init__(self) -> None:
        self.fired = False
        self.conns: set[_Connection] = set()  # registered while their exchange is in flight
        self.sent = False  # a request went out on a lean connection

    def fire(self, task: asyncio.Task[None]) -> None:
        """Half-close the batch's connections (on the loop); cancel ``task`` when it sent
        nothing on them (a request yet to be sent is not: the pool sends nothing for a
        fired batch), or when no answer came within :data:`CLAIM_ANSWER_WAIT`. A batch
        whose answer already arrived is left to finish: its jobs go to the orphan hook."""
        self.fired = True
        if task.done():
            return
        if not self.conns:
            if not self.sent:
                task.cancel()
            return
        for conn in list(self.conns):
            conn.half_close()
        asyncio.get_running_loop().call_later(CLAIM_ANSWER_WAIT, self._give_up, task)

    def _give_up(self, task: asyncio.Task[None]) -> None:
        """:data:`CLAIM_ANSWER_WAIT` after :meth:`fire`: cancel ``task`` if an answer is
        still awaited. One that has come (its connection's waiter answered) is left to
        finish, even when it came in this very loop turn and the task has not resumed yet:
        cancelling then would drop the jobs it carries, held until their lease expires."""
        if not task.done() and any(conn.waiter is not None for conn in self.conns):
            task.cancel()


abandon_var: contextvars.ContextVar[Abandon | None] = contextvars.ContextVar("lakeshore_abandon", default=None)
"""The :class:`Abandon` of the batch whose request the current task sends, if it drains."""


class Answer:
    """One HTTP answer: its status, headers (by lower-case name) and body."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content


class _Parser:
    """The parser of one HTTP/1.1 answer at a time, fed bytes as they arrive."""

    def __init__(self) -> None:
        self.keep = False  # the connection may carry the next exchange
        self._buf = bytearray()
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._length = 0  # the body's length; -1: chunked; -2: until the connection closes
        self._body = bytearray()
        self._chunk = -1  # bytes left of the current chunk (-1: a size line is next)
        self._head_request = False

    def _reset(self, head_request: bool) -> None:
        """Get ready for a new answer (``head_request``: to a HEAD, so without a body)."""
        self.keep = False
        self._buf.clear()
        self._status = 0
        self._headers = None
        self._length = 0
        self._body = bytearray()
        self._chunk = -1
        self._head_request = head_request

    def _parse(self) -> Answer | None:
        buf = self._buf
        while self._headers is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("the answer's headers are too long")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            version, _, rest = lines[0].partition(" ")
            code = rest[:3]
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
            status = int(code)
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise httpx.RemoteProtocolError(f"a malformed header line: {line[:80]!r}")
                name = name.strip().lower()
                value = value.strip()
                headers[name] = headers[name] + ", " + value if name in headers else value
            if 100 <= status < 200:
                continue  # an informational answer: the real one follows
            self._status = status
            self._headers = headers
            self.keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
            if self._head_request or status in (204, 304):
                self._length = 0
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                self._length = -1
            elif "content-length" in headers:
                try:
                    self._length = int(headers["content-length"])
                except ValueError:
                    raise httpx.RemoteProtocolError("a malformed Content-Length") from None
                if self._length < 0:
                    raise httpx.RemoteProtocolError("a malformed Content-Length")
            else:
                self._length = -2
                self.keep = False
        if self._length >= 0:
            if len(buf) < self._length:
                return None
            body = bytes(buf[: self._length])
            del buf[: self._length]
            return Answer(self._status, self._headers, body)
        if self._length == -2:
            self._body += buf
            buf.clear()
            return None
        return self._parse_chunks()

    def _parse_chunks(self) -> Answer | None:
        buf = self._buf
        while True:
            if self._chunk < 0:
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        raise httpx.RemoteProtocolError("a malformed chunk size")
                    return None
                size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"a malformed chunk size {size_text[:20]!r}") from None
                if size == 0:
                    # The last chunk: trailers (ignored) end with an empty line.
                    if buf[end + 2 : end + 4] == b"\r\n":
                        del buf[: end + 4]
                    else:
                        trailers = buf.find(b"\r\n\r\n", end + 2)
                        if trailers < 0:
                            return None
                        del buf[: trailers + 4]
                    assert self._headers is not None
                    return Answer(self._status, self._headers, bytes(self._body))
                del buf[: end + 2]
                self._chunk = size
            if len(buf) < self._chunk + 2:
                return None
            self._body += buf[: self._chunk]
            if buf[self._chunk : self._chunk + 2] != b"\r\n":
                raise httpx.RemoteProtocolError("a chunk not ended by CRLF")
            del buf[: self._chunk + 2]
            self._chunk = -1


class _Connection(_Parser, asyncio.Protocol):
    """One keep-alive connection: one exchange at a time, the answer parsed as it arrives."""

    def __init__(self, pool: Pool) -> None:
        super().__init__()
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.waiter: asyncio.Future[Answer] | None = None
        self.last_read = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.half_closed = False  # its write side shut: never reused


    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            # Bytes nobody asked for (or after an abandoned exchange): the connection's
            # state is unknown, so it is not reused.
            self.close()
            return
        self.last_read = self.pool.loop.time()
        self._buf += data
        try:
            answer = self._parse()
        except httpx.RemoteProtocolError as e:
            self.close()
            waiter.set_exception(e)
            return
        if answer is not None:
            if self._buf:
                self.keep = False  # bytes past the answer: not a connection to reuse
            self.waiter = None
            waiter.set_result(answer)

    def eof_received(self) -> bool | None:
        # The server closed its side: never reuse the connection (connection_lost follows,
        # and answers an exchange in progress).
        self.closed = True
        self.pool._lost(self)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._lost(self)
        waiter, self.waiter = self.waiter, None
        if waiter is None or waiter.done():
            return
        if self._headers is not None and self._length == -2:
            # A body that runs until the connection closes has ended.
            waiter.set_result(Answer(self._status, self._headers, bytes(self._body)))
            return
        if exc is not None:
            err: Exception = httpx.ReadError(str(exc) or type(exc).__name__)
        elif self._headers is None and not self._buf:
            err = httpx.RemoteProtocolError("Server disconnected without sending a response.")
        else:
            err = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
        waiter.set_exception(err)

    # -- the exchange

    def start(self, waiter: asyncio.Future[Answer], head_request: bool) -> None:
        """Reset the parser for a new answer that ``waiter`` will get."""
        self.waiter = waiter
        self._reset(head_request)
        self.last_read = self.pool.loop.time()

    def close(self) -> None:
        """Close the connection (an exchange in progress fails)."""
        if not self.closed:
            self.closed = True
            self.pool._lost(self)
            if self.transport is not None:
                self.transport.close()

    def half_close(self) -> None:
        """Shut the connection's write side (the server reads EOF) and keep reading the
        answer in progress; the connection is not reused."""
        self.half_closed = True
        if self.transport is not None and not self.closed and self.transport.can_write_eof():
            self.transport.write_eof()

    def abort(self) -> None:
        """Drop the connection at once (an exchange abandoned midway)."""
        self.waiter = None
        if self.transport is not None:
            self.transport.abort()
        self.closed = True
        self.pool._lost(self)

@dataclass(frozen=True)
class Endpoint:
    """Where the pools of one server connect, and the header lines every request to it
    carries (``Host``, ``Accept``, ``User-Agent`` and the token's ``Authorization``).

    Attributes:
        host: the server's host name or address.
        port: its TCP port.
        uds: a Unix socket path to connect to instead, or None.
        connect_timeout: seconds a connection may take to open.
        fixed: the encoded header lines, each ending in CRLF.
    """

    host: str
    port: int
    uds: str | None
    connect_timeout: float
    fixed: bytes

    @classmethod
    def of(cls, url: str, *, uds: str | None, token: str | None, connect_timeout: float) -> Endpoint:
        """The endpoint of the server at ``url`` (http://host[:port]; port 80 by default)."""
        parts = urlsplit(url)
        headers = {"Accept": "application/msgpack", "User-Agent": "lakeshore-python"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return cls.with_headers(parts.hostname or "", parts.port or 80, uds, parts.netloc, headers, connect_timeout)

    @classmethod
    def with_headers(
        cls, host: str, port: int, uds: str | None, host_header: str, headers: dict[str, str], connect_timeout: float
    ) -> Endpoint:
        """An endpoint with exactly these header lines after ``Host: host_header``."""
        fixed = f"Host: {host_header}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return cls(host, port, uds, connect_timeout, fixed.encode("latin-1"))

    def head(self, method: str, target: str, headers: dict[str, str], content: bytes | None) -> bytes:
        """A request's head, for both pools: its request line, the fixed header lines, then
        ``headers``, and with ``content`` its ``Content-Length``; ends with the blank line."""
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self.fixed
        if headers:
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
        if content is not None:
            head += b"Content-Length: %d\r\n\r\n" % len(content)
        else:
            head += b"\r\n"
        return head


class Pool:
    """The keep-alive connections of one server, on one loop.

    Callers bound the exchanges in flight themselves (the transport's semaphores); the
    pool opens a connection when none is idle."""

    def __init__(self, loop: asyncio.AbstractEventLoop, endpoint: Endpoint, idle_max: int = IDLE_MAX) -> None:
        self.loop = loop
        self._endpoint = endpoint
        self._idle_max = idle_max
        # Idle connections in the order they were put back (a dict as an ordered set: the
        # newest is reused first, a lost one leaves in O(1)).
        self._idle: dict[_Connection, None] = {}
        self._busy: set[_Connection] = set()
        # The timer that closes idle connections once they expire (one per pool, set while
        # any is idle): an idle pool holds no socket past KEEPALIVE_EXPIRY.
        self._sweep: asyncio.TimerHandle | None = None
        self.closed = False

    def _lost(self, conn: _Connection) -> None:
        self._idle.pop(conn, None)

    async def _connect(self) -> _Connection:
        try:
            if self._endpoint.uds is not None:
                coro: Any = self.loop.create_unix_connection(lambda: _Connection(self), self._endpoint.uds)
            else:
                coro = self.loop.create_connection(lambda: _Connection(self), self._endpoint.host, self._endpoint.port)
            _, conn = await asyncio.wait_for(coro, self._endpoint.connect_timeout)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"no connection within {self._endpoint.connect_timeout:g} s") from None
        except OSError as e:
            raise httpx.ConnectError(str(e) or type(e).__name__) from e
        assert isinstance(conn, _Connection)
        return conn

    def _checkout(self) -> _Connection | None:
        idle = self._idle
        now = self.loop.time()
        while idle:
            conn, _ = idle.popitem()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > KEEPALIVE_EXPIRY:
                conn.close()
                continue
            return conn
        return None

    def _checkin(self, conn: _Connection) -> None:
        if self.closed:
            conn.close()  # an exchange that ended after close(): nothing is kept
            return
        now = self.loop.time()
        conn.idle_since = now
        self._idle[conn] = None
        # The oldest idle connection, once expired or past IDLE_MAX, is closed now.
        oldest = next(iter(self._idle))
        if now - oldest.idle_since > KEEPALIVE_EXPIRY or len(self._idle) > self._idle_max:
            self._idle.pop(oldest, None)
            oldest.close()
        if self._sweep is None:
            self._sweep = self.loop.call_later(KEEPALIVE_EXPIRY, self._expire)

    def _expire(self) -> None:
        """Close the idle connections past KEEPALIVE_EXPIRY; look again when the oldest
        left expires."""
        self._sweep = None
        now = self.loop.time()
        idle = self._idle
        while idle:
            oldest = next(iter(idle))
            left = oldest.idle_since + KEEPALIVE_EXPIRY - now
            if left > 0:
                self._sweep = self.loop.call_later(left, self._expire)
                return
            idle.pop(oldest, None)
            oldest.close()

    async def request(
        self,
        method: str,
        target: str,
        content: bytes | None,
        headers: dict[str, str],
        timeout: float,
        gate: asyncio.Semaphore | None = None,
    ) -> Answer:
        """Send one request and return its answer.

        ``target`` is the path with its query; ``timeout`` bounds each read (as httpx's
        read timeout); ``gate``, when given, is held from before connecting until the
        request is written.

        Raises:
            httpx.ConnectError, httpx.ConnectTimeout: no connection (nothing was sent).
            httpx.ReadTimeout: no byte of the answer for ``timeout`` seconds.
            httpx.RemoteProtocolError, httpx.ReadError: the connection failed or the
                answer is not HTTP/1.1.
        """
        head = self._endpoint.head(method, target, headers, content)
        if gate is not None:
            await gate.acquire()
        abandon = abandon_var.get()
        try:
            conn = self._checkout()
            if conn is None:
                conn = await self._connect()
            if abandon is not None and abandon.fired:
                # The callers went away before it was sent: send nothing.
                self._checkin(conn)
                raise asyncio.CancelledError
            waiter: asyncio.Future[Answer] = self.loop.create_future()
            conn.start(waiter, method == "HEAD")
            transport = conn.transport
            assert transport is not None
            if content:
                transport.writelines((head, content))
            else:
                transport.write(head)
        finally:
            if gate is not None:
                gate.release()
        self._busy.add(conn)
        if abandon is not None:
            abandon.conns.add(conn)
            abandon.sent = True
        conn.timer = self.loop.call_later(timeout, self._read_timeout, conn, waiter, timeout)
        try:
            answer = await waiter
        except BaseException:
            conn.abort()
            raise
        finally:
            if conn.timer is not None:
                conn.timer.cancel()
                conn.timer = None
            self._busy.discard(conn)
            if abandon is not None:
                abandon.conns.discard(conn)
        if conn.keep and not conn.closed and not conn.half_closed:
            self._checkin(conn)
        else:
            conn.close()
        return answer

    def _read_timeout(self, conn: _Connection, waiter: asyncio.Future[Answer], timeout: float) -> None:
        if waiter.done():
            return
        left = conn.last_read + timeout - self.loop.time()
        if left > 0:
            # A read came since the timer was set: wait for the rest of its timeout.
            conn.timer = self.loop.call_later(left, self._read_timeout, conn, waiter, timeout)
            return
        conn.waiter = None
        waiter.set_exception(httpx.ReadTimeout(f"no answer within {timeout:g} s"))

    def close(self) -> None:
        """Close every connection (exchanges in progress fail); a connection put back
        later is closed, not kept. On the pool's loop."""
        self.closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in list(self._idle) + list(self._busy):
            conn.close()
        self._idle.clear()

    def drop(self) -> None:
        """Forget every connection of a pool whose loop is closed (no transport can be
        closed there any more: each socket is closed when its transport is collected);
        any thread."""
        self.closed = True
        self._sweep = None
        self._idle.clear()
        self._busy.clear()


class _BlockingConnection(_Parser):
    """One keep-alive connection on a blocking socket, used by one calling thread at a time."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.idle_since = 0.0

    def stale(self, now: float) -> bool:
        """Whether the connection cannot carry a request: idle past
        :data:`KEEPALIVE_EXPIRY`, or the server closed it (or sent bytes nobody asked for)."""
        if now - self.idle_since > KEEPALIVE_EXPIRY:
            return True
        poller = select.poll()  # not select.select: any descriptor number
        try:
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))  # an EOF, an error or bytes nobody asked for
        except (OSError, ValueError):
            return True


class BlockingPool:
    """The keep-alive connections of one server for calls made on the caller's own thread
    with blocking sockets (:meth:`~lakeshore._transport.HttpTransport.call_blocking`): a
    blocking call then costs one ``send`` and one ``recv`` on its thread instead of two
    thread hops through the portal's loop.

    The connections are shared by the threads of one process (one exchange each at a
    time); a forked child makes its own. Same headers and timeouts as :class:`Pool`.

    The idle connections are kept without a lock (a deque, whose ``append`` and ``pop``
    are atomic), so a call can never wait for another to give them back: a signal handler
    (or a finalizer) that makes a blocking call while its thread is in the middle of one
    takes an idle connection or opens one of its own, and both calls are answered. With a
    lock, a handler run while its thread held it waited for it forever (that thread goes
    on only once the handler returns)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._idle: collections.deque[_BlockingConnection] = collections.deque()
        self.closed = False
        self.pid = os.getpid()

    def _connect(self) -> _BlockingConnection:
        try:
            if self._endpoint.uds is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(self._endpoint.connect_timeout)
                    sock.connect(self._endpoint.uds)
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((self._endpoint.host, self._endpoint.port), timeout=self._endpoint.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's connections
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection within {self._endpoint.connect_timeout:g} s") from None
        except OSError as e:
            raise httpx.ConnectError(str(e) or type(e).__name__) from e
        return _BlockingConnection(sock)

    def _checkout(self) -> _BlockingConnection | None:
        now = time.monotonic()
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return None
            if not conn.stale(now):
                return conn
            conn.sock.close()

    def _checkin(self, conn: _BlockingConnection) -> None:
        conn.idle_since = time.monotonic()
        if self.closed:
            conn.sock.close()
            return
        self._idle.append(conn)
        if self.closed:
            self._close_idle()  # close() ran between the check and the append

    def _close_idle(self) -> None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return
            conn.sock.close()

    def request(self, method: str, target: str, content: bytes | None, headers: dict[str, str], timeout: float) -> Answer:
        """Send one request on the calling thread and return its answer.

        ``target`` is the path with its query; ``timeout`` bounds each read (as httpx's
        read timeout).

        Raises:
            httpx.ConnectError, httpx.ConnectTimeout: no connection (nothing was sent).
            httpx.ReadTimeout: no byte of the answer for ``timeout`` seconds.
            httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError: the connection
                failed or the answer is not HTTP/1.1.
        """
        head = self._endpoint.head(method, target, headers, content)
        conn = self._checkout()
        if conn is None:
            conn = self._connect()
        sock = conn.sock
        try:
            sock.settimeout(timeout)
            try:
                sock.sendall(head + content if content else head)
            except OSError as e:
                raise httpx.WriteError(str(e) or type(e).__name__) from e
            conn._reset(method == "HEAD")
            while True:
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    raise httpx.ReadTimeout(f"no answer within {timeout:g} s") from None
                except OSError as e:
                    raise httpx.ReadError(str(e) or type(e).__name__) from e
                if not data:
                    if conn._headers is not None and conn._length == -2:
                        # A body that runs until the connection closes has ended.
                        answer = Answer(conn._status, conn._headers, bytes(conn._body))
                        conn.keep = False
                        break
                    if conn._headers is None and not conn._buf:
                        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
                conn._buf += data
                parsed = conn._parse()
                if parsed is not None:
                    answer = parsed
                    if conn._buf:
                        conn.keep = False  # bytes past the answer: not a connection to reuse
                    break
        except BaseException:
            sock.close()
            raise
        if conn.keep:
            self._checkin(conn)
        else:
            sock.close()
        return answer

    def close(self) -> None:
        """Close the idle connections; one in use is closed when its exchange ends."""
        self.closed = True  # before the idle ones are taken: a check-in after sees it
        self._close_idle()
