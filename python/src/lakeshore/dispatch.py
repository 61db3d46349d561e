"""Planes: where the queues live. :class:`HttpDispatch` reaches a ``lakeshore serve``."""

from __future__ import annotations

import os
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from lakeshore import errors
from lakeshore._transport import HttpTransport, Portal

__all__ = ["Dispatch", "HttpDispatch", "default_dispatch"]

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"


class Dispatch:
    """A dispatch plane: the queues, their invocations, journals and workers.

    ``Dispatch("http://host:7077")`` (or any ``http(s)://`` URL) is an :class:`HttpDispatch`.
    The embedded planes of the seed documents, ``Dispatch(":memory:")`` and
    ``Dispatch(path)`` served by a local daemon, are not built yet: they raise
    :class:`~lakeshore.errors.DispatchError` with code ``not_implemented``.

    A Dispatch is safe to share between threads and event loops, and survives ``fork``
    (a child makes its own connections on first use). Close it with :meth:`close` or use it
    as a context manager.
    """

    namespace: str
    _portal: Portal
    _transport: HttpTransport

    def __new__(cls, target: str | None = None, *args: Any, **kwargs: Any) -> Dispatch:
        if cls is Dispatch:
            if target is not None and target.startswith(("http://", "https://")):
                return super().__new__(HttpDispatch)
            raise errors.DispatchError(
                f"the embedded plane ({target or '$LAKESHORE_HOME'}) is not built yet in the Python SDK; "
                "run `lakeshore serve` (e.g. `lakeshore serve --target :memory:`) and use "
                "HttpDispatch('http://127.0.0.1:7077'), or set LAKESHORE_URL",
                code="not_implemented",
            )
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
        self._portal.close(self._transport.aclose)

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

    def __repr__(self) -> str:
        return f"HttpDispatch({self.url!r}, namespace={self.namespace!r})"


_default_lock = threading.Lock()
_default: Dispatch | None = None


def default_dispatch() -> Dispatch:
    """The process's plane, made on first use: an :class:`HttpDispatch` on
    ``$LAKESHORE_URL`` when it is set. (The embedded plane under ``$LAKESHORE_HOME``, the
    seed's default without it, is not built yet.)"""
    global _default
    with _default_lock:
        if _default is None:
            url = os.environ.get("LAKESHORE_URL")
            if not url:
                raise errors.DispatchError(
                    "no plane: set LAKESHORE_URL to a `lakeshore serve` (e.g. http://127.0.0.1:7077) or pass "
                    "dispatch=HttpDispatch(url); the embedded plane under $LAKESHORE_HOME is not built yet "
                    "in the Python SDK",
                    code="not_implemented",
                )
            _default = HttpDispatch(url)
        return _default
