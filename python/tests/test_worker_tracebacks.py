"""The traceback a failed job carries starts at the body's own code.

Found by a new user: a body raising ``ValueError`` reached ``InvocationFailedError.traceback``,
``lakeshore result`` and the worker's log with five frames of the worker's machinery before
the user's (``worker.py`` ``execute``, ``concurrent/futures/thread.py``, ``_run_sync``,
``_run_body``, the ``lambda: f(**kw)`` call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from lakeshore import HttpDispatch, InvocationFailedError, run_worker, udf
from tests.conftest import Planes

MACHINERY = ("lakeshore/worker.py", "concurrent/futures/thread.py", "asyncio/")


@pytest.fixture
def d(planes: Planes) -> HttpDispatch:
    return planes.get("memory")


def _failed_traceback(d: HttpDispatch, f: Any, inv: str) -> str:
    assert run_worker(d, queues=[f], once=True, wait=5, handle_signals=False) == 1
    with pytest.raises(InvocationFailedError) as info:
        f.queue().result(inv, timeout=30)
    return info.value.traceback or ""


def test_a_sync_body_traceback_starts_at_the_body(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    @udf(queue=qname, dispatch=d, max_attempts=1)
    def broken(x: int) -> int:
        raise ValueError(f"bad input {x}")

    inv = broken.submit(x=7)
    with caplog.at_level(logging.WARNING, logger="lakeshore"):
        tb = _failed_traceback(d, broken, inv)
    assert tb.startswith("Traceback (most recent call last):")
    assert "in broken" in tb and 'raise ValueError(f"bad input {x}")' in tb
    for part in MACHINERY:
        assert part not in tb, tb
        assert part not in caplog.text, caplog.text
    assert "in broken" in caplog.text, "the log line keeps the body's frame"


def test_generator_and_async_bodies_too(d: HttpDispatch, qname: str) -> None:
    @udf(queue=qname, dispatch=d, max_attempts=1)
    def gen(n: int) -> Iterator[int]:
        yield n
        raise KeyError("gone")

    tb = _failed_traceback(d, gen, gen.submit(n=1))
    assert "in gen" in tb and not any(part in tb for part in MACHINERY), tb

    @udf(queue=qname + "-async", dispatch=d, max_attempts=1)
    async def coro(n: int) -> int:
        await asyncio.sleep(0)
        raise RuntimeError("async boom")

    tb = _failed_traceback(d, coro, coro.submit(n=1))
    assert "in coro" in tb and not any(part in tb for part in MACHINERY), tb


def test_a_call_that_does_not_fit_keeps_the_call(d: HttpDispatch, qname: str) -> None:
    """A TypeError of the call itself (a payload key the function does not take) raises in
    the worker's own frame: that one frame stays, so the traceback is never empty."""

    @udf(queue=qname, dispatch=d, max_attempts=1)
    def takes_x(x: int) -> int:
        return x

    inv = takes_x.queue().submit({"y": 1}, max_attempts=1)
    tb = _failed_traceback(d, takes_x, inv)
    assert "unexpected keyword argument 'y'" in tb
    assert tb.count('  File "') == 1, tb
