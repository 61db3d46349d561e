"""Lakeshore for Python: a durable job queue and data queue for ML work.

The Go binary is the engine; this package is its Python client::

    from lakeshore import HttpDispatch, SyncQueue

    d = HttpDispatch("http://127.0.0.1:7077")
    q = SyncQueue("gpu", dispatch=d)
    inv = q.submit({"x": 1}, key="scene7/x")    # a durable string id
    value = q.result(inv, timeout=60.0)

Planes (:class:`Dispatch`: ``:memory:``, a file, the embedded default, ``http(s)://``),
:class:`SyncQueue`, :class:`Queue` (asyncio), :class:`Topic`, workers (:func:`udf`,
:func:`run_worker`), scopes (:func:`scope`, :data:`run`), the wire codec
(:mod:`lakeshore.wire`) and the errors (:mod:`lakeshore.errors`). See ``docs/python.md``.
"""

from __future__ import annotations

from lakeshore import errors, wire
from lakeshore.dispatch import Dispatch, HttpDispatch, LocalDispatch, WorkerInfo, default_dispatch
from lakeshore.errors import (
    AdmissionError,
    CorruptError,
    DispatchError,
    ForbiddenError,
    ChangedError,
    IncompatibleTypeError,
    LimitExceededError,
    InvalidError,
    InvocationCancelledError,
    InvocationError,
    InvocationFailedError,
    InvocationKilledError,
    InvocationTimedOutError,
    JournalClosedError,
    LeaseLostError,
    NotFoundError,
    PutIDReusedError,
    QueueFullError,
    RateLimited,
    RateLimitedError,
    TimeoutError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedValueError,
)
from lakeshore.queue import (
    FROM_START,
    KINDS,
    STATES,
    Admission,
    AsyncTopic,
    Envelope,
    Frame,
    Invocation,
    InvocationPage,
    Job,
    KeyStats,
    LaunchPolicy,
    Provider,
    Queue,
    Resources,
    SyncQueue,
    Topic,
)
from lakeshore.schedules import (
    ScheduleInfo,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    schedule,
    schedules,
    set_schedule,
)
from lakeshore.scopes import Scope, run, scope
from lakeshore.wire import Thunk, thunk
from lakeshore.worker import UDF, JobStopped, dreamlake_envelope, run_worker, udf

__all__ = [
    "errors",
    "wire",
    "Dispatch",
    "HttpDispatch",
    "LocalDispatch",
    "default_dispatch",
    "SyncQueue",
    "Queue",
    "Topic",
    "AsyncTopic",
    "Job",
    "Frame",
    "Envelope",
    "Invocation",
    "InvocationPage",
    "Admission",
    "KeyStats",
    "Provider",
    "LaunchPolicy",
    "Resources",
    "WorkerInfo",
    "ScheduleInfo",
    "schedule",
    "schedules",
    "set_schedule",
    "pause_schedule",
    "resume_schedule",
    "remove_schedule",
    "FROM_START",
    "KINDS",
    "STATES",
    "Thunk",
    "thunk",
    "udf",
    "UDF",
    "run_worker",
    "dreamlake_envelope",
    "JobStopped",
    "scope",
    "Scope",
    "run",
    "DispatchError",
    "NotFoundError",
    "InvocationError",
    "InvocationFailedError",
    "InvocationCancelledError",
    "InvocationKilledError",
    "InvocationTimedOutError",
    "LeaseLostError",
    "JournalClosedError",
    "AdmissionError",
    "QueueFullError",
    "RateLimitedError",
    "RateLimited",
    "InvalidError",
    "UnauthorizedError",
    "ForbiddenError",
    "ChangedError",
    "LimitExceededError",
    "UnavailableError",
    "IncompatibleTypeError",
    "UnsupportedValueError",
    "CorruptError",
    "PutIDReusedError",
]
# lakeshore.TimeoutError (a subclass of the builtin) is left out of __all__ so that a star
# import does not shadow the builtin TimeoutError.

__version__ = "0.1.0.dev0"
