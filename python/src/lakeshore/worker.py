"""Workers: ``@udf`` binds a function to a queue; ``run_worker`` runs the bound functions.

::

    from lakeshore import lifecycle, udf, run_worker

    @lifecycle.on_host_setup                 # once per worker process, before its first body
    def load():
        MODELS["embed"] = load_model()

    @udf(queue="embed")
    def embed(text: str) -> list[float]:
        return MODELS["embed"].encode(text)

    inv = embed.submit(text="hello", _key="doc-1")   # a durable id
    vec = embed.call(text="hello")                    # submit + result

    run_worker(queues=["embed"])                      # in the worker process

The payload of a bound function's invocation is the map of its keyword arguments; the
worker calls ``fn(**payload)``. The body kind is chosen once, at decoration, with
:mod:`inspect`:

- a plain function: its return value is the result;
- a generator: each ``yield`` posts a VALUE frame (``q.stream(inv)`` reads them live); its
  ``return`` value is the result, or without one (``None``) the yields' key manifest as
  dreamlake-lakeshore makes it (see :class:`_Manifest`);
- a coroutine function: awaited on the worker's event loop; its return value is the result;
- an async generator: as a generator (its result: the key manifest), on the worker's event
  loop.

Sync bodies run on threads of the worker, async ones on its event loop; leases are
heartbeated from the client's own thread, so a CPU-bound body does not lose its job. A
killed (or otherwise lost) job is stopped: an async body's task is cancelled, a generator
is closed at its next ``yield``, and a plain function gets :class:`JobStopped` raised in its
thread at the next Python bytecode (a C call that never returns to Python cannot be
interrupted).
"""

from __future__ import annotations

import asyncio
import concurrent.futures.thread
import contextlib
import contextvars
import ctypes
import dataclasses
import inspect
import logging
import os
import queue as stdqueue
import random
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Generic, Literal, ParamSpec, TypeVar, cast

from lakeshore import _fabric, _offers, errors, lifecycle, wire
from lakeshore._ids import new_ulid
from lakeshore._transport import path_segment
from lakeshore.dispatch import Dispatch, default_dispatch
from lakeshore.queue import (
    Job,
    Queue,
    QueueCore,
    SettleClaim,
    SyncQueue,
    _error_info,
    _heartbeat_interval,
    _lease_deadline,
    _lease_ends_before_next_beat,
    _placement,
    _UndecodablePayloadError,
    encode_value,
)

__all__ = ["udf", "UDF", "run_worker", "JobStopped", "BodyKind", "registry", "dreamlake_envelope"]

log = logging.getLogger("lakeshore.worker")

P = ParamSpec("P")
R = TypeVar("R")

BodyKind = Literal["sync", "generator", "async", "async_generator"]
"""The four body kinds of a bound function."""


# The directories of the frames that run a body rather than belong to it: this package (the
# worker's execute, _run_sync, _run_body, the call of the function with its keyword
# arguments) and the standard library's thread pool and event loop that carry the call.
_MACHINERY_DIRS = tuple(
    os.path.dirname(os.path.abspath(f)) + os.sep
    for f in (__file__, concurrent.futures.thread.__file__, asyncio.__file__)
)


# How long the heartbeat keeper sleeps when no running job's beat is due sooner (none runs,
# or a beat is in flight, its next due unknown until it is answered: _beat wakes the keeper
# then). A job whose beats come more often than this wakes the keeper when it is handed over.
_KEEPER_IDLE_SECONDS = 1.0

# The job whose body runs in this context (a body's thread, or an async body's task), for
# code of the package that must know it: lakeshore.rl derives the put ids of a rollout's
# records from the job's id, so a retried attempt does not write them twice. None outside a
# body (a function called locally).
_running_job: contextvars.ContextVar[Job | None] = contextvars.ContextVar("lakeshore_running_job", default=None)


def _hide_machinery_frames(e: BaseException) -> None:
    """Drop the leading frames of ``e``'s traceback that are the worker's machinery, so
    that the traceback a failed job carries (``InvocationFailedError.traceback``, ``lakeshore
    result``, ``lakeshore get``) and the worker's log line start at the body's own code, as
    a traceback of the function called directly would. The innermost frame is always kept
    (a ``TypeError`` raised by the call itself, such as an unexpected keyword argument,
    still shows the call); frames after the body's first one are kept whatever they are."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_MACHINERY_DIRS):
        tb = tb.tb_next
    e.__traceback__ = tb


def _log_failure(job: Job, e: BaseException) -> None:
    """Log a failed attempt of ``job`` at WARNING with its traceback, its id, its attempt and
    whether the plane will retry it (as Celery, RQ and Ray do): a failing body is never
    silent."""
    limit = job.max_attempts
    if limit and job.attempt >= limit:
        fate = f"no retry: it was the last of {limit} attempts, the job fails"
    elif limit:
        fate = f"it will be retried ({limit - job.attempt} attempts left)"
    else:
        fate = "it will be retried"
    log.warning(
        "lakeshore worker: job %s (queue %s) attempt %d failed: %s: %s; %s",
        job.id,
        job.queue,
        job.attempt,
        type(e).__name__,
        e,
        fate,
        exc_info=(type(e), e, e.__traceback__),
    )


def _log_rate_limited(job: Job, e: errors.RateLimited) -> None:
    """Log a handler's "slow down" answer as what it is: one INFO line, no traceback — the
    job is re-queued and its attempt kept, nothing failed."""
    log.info(
        "lakeshore worker: job %s (queue %s) rate limited: re-queued after %g s, attempt %d kept%s",
        job.id,
        job.queue,
        errors.rate_limited_delay(e.retry_after),
        job.attempt,
        f"; key {e.key!r} held back as long" if e.key else "",
    )



async def all_schedules(transport: Any, namespace: str | None) -> list[dict[str, Any]]:
    """Every schedule of ``namespace`` (None: every namespace the token covers) as the server
    answers them (wire dicts), ordered by namespace then name: ``GET /v1/schedules`` page by
    page (1,000 each), following ``next`` until the server gives none. A page through a
    scoped token may hold fewer schedules than asked, even none, with a ``next``."""
    out: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        ans = await transport.call(
            "GET", "/v1/schedules", params={"namespace": namespace, "after": after, "limit": 1000}, retry="safe"
        )
        out.extend(ans.get("schedules") or [])
        nxt = ans.get("next")
        if not nxt or nxt == after:
            return out
        after = nxt

class JobStopped(BaseException):
    """Raised inside a body whose job was killed or whose lease was lost (a BaseException, so
    that ``except Exception`` in the body does not swallow it)."""


def body_kind(fn: Callable[..., Any]) -> BodyKind:
    """The body kind of ``fn``, by :mod:`inspect`."""
    if inspect.isasyncgenfunction(fn):
        return "async_generator"
    if inspect.iscoroutinefunction(fn):
        return "async"
    if inspect.isgeneratorfunction(fn):
        return "generator"
    return "sync"


_registry_lock = threading.Lock()
registry: dict[str, UDF[Any, Any]] = {}
"""The bound functions of this process, by queue name (what ``run_worker()`` runs)."""


class UDF(Generic[P, R]):
    """A function bound to a queue (made by :func:`udf`). Calling it runs it here;
    :meth:`submit`, :meth:`call`, :meth:`map` and :meth:`stream` run it on a worker."""

    def __init__(
        self,
        fn: Callable[P, R],
        queue: str,
        *,
        dispatch: Dispatch | None = None,
        kind: str = "fifo",
        max_attempts: int | None = None,
        attempt_timeout: float | None = None,
        lease_ttl: float | None = None,
        mode: str | None = None,
        requires: Mapping[str, Any] | str | None = None,
    ) -> None:
        self.fn = fn
        self.mode = mode
        self.queue_name = queue
        self.kind = body_kind(fn)
        self._dispatch = dispatch
        self._queue_kind = kind
        self._lease_ttl = lease_ttl
        self._options: dict[str, Any] = {}
        if max_attempts is not None:
            self._options["max_attempts"] = max_attempts
        if attempt_timeout is not None:
            self._options["attempt_timeout"] = attempt_timeout
        if requires is not None:
            self._options["requires"] = requires
        self._signature = inspect.signature(fn)
        self._queues: dict[int, SyncQueue] = {}
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", "udf")
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<udf {self.__name__} queue={self.queue_name!r} kind={self.kind}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def local(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here, in this process (dreamlake-lakeshore's name; the same as
        calling the UDF)."""
        return self.fn(*args, **kwargs)

    def queue(self, dispatch: Dispatch | None = None) -> SyncQueue:
        """The bound queue on ``dispatch`` (default: the decorator's, else the process default)."""
        d = dispatch or self._dispatch or default_dispatch()
        q = self._queues.get(id(d))
        if q is None or q.dispatch is not d:
            q = SyncQueue(self.queue_name, dispatch=d, kind=self._queue_kind, lease_ttl=self._lease_ttl)
            self._queues[id(d)] = q
        return q

    def payload(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The invocation payload for a call with ``args`` and ``kwargs``: the map of the
        keyword arguments (positional ones named by the signature).

        Raises:
            TypeError: the arguments do not fit the function's signature."""
        bound = self._signature.bind(*args, **kwargs)
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            p = self._signature.parameters[name]
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    raise TypeError(f"{self.__name__}: *{name} cannot be submitted; pass keyword arguments")
            else:
                out[name] = value
        return out

    def submit(
        self,
        *args: Any,
        _key: str | None = None,
        _dispatch: Dispatch | None = None,
        _mode: str | None = None,
        _concurrency_key: str | None = None,
        _unique_for: float | None = None,
        _debounce: float | None = None,
        _priority: float = 0.0,
        **kwargs: Any,
    ) -> str:
        """Enqueue a run with these arguments and return its invocation id (a ULID string).

        ``_key`` makes the submit idempotent: resubmitting it returns the first id.
        ``_priority`` orders ``priority`` and ``boltzmann`` claims (higher first), as
        ``SyncQueue.submit``'s ``priority=``.
        ``_unique_for`` and ``_debounce`` (seconds, with ``_key``) are the key's dedup and
        debounce windows, as ``SyncQueue.submit``'s ``unique_for=`` and ``debounce=``
        (docs/semantics.md, "Dedup windows").
        ``_concurrency_key`` groups the run (a tenant, a user) for the queue's concurrency
        limits and fair share (docs/semantics.md, "Concurrency keys and fair share").
        ``_mode`` names the compute mode (default: the decorator's ``mode``).

        Raises:
            lakeshore.config.ConfigError: no project file or no such mode.
            lakeshore.code.CodeError: the mode ships code that cannot be shipped."""
        q = self.queue(_dispatch)
        options = self.submit_options(_mode, q)
        for name, value in (("concurrency_key", _concurrency_key), ("unique_for", _unique_for), ("debounce", _debounce)):
            if value is not None:
                options = {**options, name: value}
        return q.submit(self.payload(args, kwargs), key=_key, priority=_priority, **options)

    def submit_options(self, mode: str | None, q: SyncQueue) -> dict[str, Any]:
        """The options of a submit: the decorator's, and a mode's run declaration
        (:mod:`lakeshore.config`; its code shipped once per digest, :mod:`lakeshore.code`)."""
        name = mode or self.mode
        if not name:
            return self._options
        extra = _fabric.submit_options(name, self.fn, self.queue_name, q.dispatch)
        for explicit in ("attempt_timeout", "requires"):  # the decorator's win over the mode's
            if explicit in self._options:
                extra.pop(explicit, None)
        return {**self._options, **extra}

    def call(
        self, *args: Any, _timeout: float | None = 300.0, _key: str | None = None, _dispatch: Dispatch | None = None,
        **kwargs: Any,
    ) -> Any:
        """Submit and wait for the result (``_timeout`` seconds, None: no limit)."""
        q = self.queue(_dispatch)
        return q.result(self.submit(*args, _key=_key, _dispatch=_dispatch, **kwargs), timeout=_timeout)

    def remote(
        self, *args: Any, _timeout: float | None = 300.0, _key: str | None = None, _dispatch: Dispatch | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run it on a worker and return the result: dreamlake-lakeshore's name for
        :meth:`call` (the same arguments)."""
        return self.call(*args, _timeout=_timeout, _key=_key, _dispatch=_dispatch, **kwargs)

    def stream(self, *args: Any, _timeout: float | None = 300.0, _dispatch: Dispatch | None = None, **kwargs: Any) -> Iterator[Any]:
        """Submit and iterate over the values the body yields, live."""
        q = self.queue(_dispatch)
        inv = self.submit(*args, _dispatch=_dispatch, **kwargs)
        return q.stream(inv, timeout=_timeout)

    def map(
        self,
        inputs: Iterable[Any],
        *,
        order_outputs: bool = True,
        return_exceptions: bool = False,
        timeout: float | None = None,
        _dispatch: Dispatch | None = None,
    ) -> Iterator[Any]:
        """Run the function over ``inputs`` on the workers and yield the results.

        Each input is a mapping (keyword arguments), a tuple (positional arguments) or one
        value (the first parameter). All are submitted in batches first; results come in
        input order (``order_outputs=True``) or as they finish. A failed run raises its
        :class:`~lakeshore.errors.InvocationError` unless ``return_exceptions``, which yields
        the error instead. ``timeout`` bounds the wait for each result."""
        q = self.queue(_dispatch)
        options = self.submit_options(None, q)
        payloads: list[Any] = []
        for item in inputs:
            if isinstance(item, Mapping):
                payloads.append(self.payload((), item))
            elif isinstance(item, tuple):
                payloads.append(self.payload(item, {}))
            else:
                payloads.append(self.payload((item,), {}))
        ids: list[str] = []
        for i in range(0, len(payloads), 500):
            from lakeshore.queue import Envelope

            ids.extend(q.submit_many([Envelope(payload=p, **options) for p in payloads[i : i + 500]]))
        return _map_results(q, ids, order_outputs, return_exceptions, timeout)


def _map_results(
    q: SyncQueue, ids: list[str], order_outputs: bool, return_exceptions: bool, timeout: float | None
) -> Iterator[Any]:
    if order_outputs:
        for inv in ids:
            try:
                yield q.result(inv, timeout=timeout)
            except errors.InvocationError as e:
                if not return_exceptions:
                    raise
                yield e
        return
    # As they finish: every wait runs on the client's loop; answers arrive on a queue.
    done: stdqueue.SimpleQueue[tuple[Any, BaseException | None]] = stdqueue.SimpleQueue()

    async def one(inv: str) -> None:
        try:
            done.put((await q._core.result(inv, timeout), None))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            done.put((None, e))

    loop = q._d._portal.loop
    futures = [asyncio.run_coroutine_threadsafe(one(inv), loop) for inv in ids]
    try:
        for _ in ids:
            value, err = done.get()
            if err is None:
                yield value
            elif return_exceptions and isinstance(err, errors.InvocationError):
                yield err
            else:
                raise err
    finally:
        for f in futures:
            f.cancel()


def udf(
    fn: Callable[P, R] | None = None,
    *,
    queue: str | None = None,
    dispatch: Dispatch | None = None,
    kind: str = "fifo",
    max_attempts: int | None = None,
    attempt_timeout: float | None = None,
    lease_ttl: float | None = None,
    mode: str | None = None,
    requires: Mapping[str, Any] | str | None = None,
) -> Any:
    """Bind a function to a queue (default: the function's name): ``@udf(queue="gpu")``.

    The body kind (sync, generator, async, async generator) is chosen once, here. The
    binding is registered so that ``run_worker()`` runs it. ``max_attempts``,
    ``attempt_timeout`` and ``requires`` (what each run needs from its worker: the
    mapping of :class:`~lakeshore.queue.Envelope`'s ``requires``) apply to every
    submit; ``lease_ttl`` to the worker's claims. ``mode`` names a compute mode of the
    project's ``lakeshore.yaml`` (:mod:`lakeshore.config`): each submit carries its run
    declaration, its time limit as the attempt timeout and its resources as the
    requirement (unless ``attempt_timeout`` or ``requires`` are given here), and, when the
    mode ships code, the digest of the submitter's code, which a worker started anywhere
    fetches and imports the function from (docs/fabric.md)."""

    def bind(f: Callable[P, R]) -> UDF[P, R]:
        u = UDF(
            f,
            queue or str(getattr(f, "__name__", "udf")),
            dispatch=dispatch,
            kind=kind,
            max_attempts=max_attempts,
            attempt_timeout=attempt_timeout,
            lease_ttl=lease_ttl,
            mode=mode,
            requires=requires,
        )
        with _registry_lock:
            registry[u.queue_name] = u
        return u

    return bind(fn) if fn is not None else bind


# ------------------------------------------------------------------------------ the worker


@dataclasses.dataclass
class _Running:
    job: Job
    core: QueueCore
    stopped: threading.Event
    task: asyncio.Task[Any] | None = None
    thread_id: int | None = None
    lost: bool = False  # the plane took the job back (killed, lease lost): nothing to settle
    started: bool = False  # the body began (a job stopped before it is given back unrun)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    due: float | None = None  # the monotonic instant of the next heartbeat (None: one is in flight)


IDLE_POLL = 0.05
"""Seconds an ``exit_when_idle`` worker whose claims came back empty waits before claiming
again while a body runs or another claim is in flight (Go's ``idlePoll``)."""

EXIT_IDLE_POLL = 0.2
"""Seconds an ``exit_when_idle`` worker whose claims came back empty while a job is due but
held back by its concurrency key waits before claiming and counting again (Go's
``exitIdlePoll``)."""

# A finished job's settle, sent with the slot's next claim: (the job's core, the settle
# body, the fenced call's deadline, the job).
_Pending = tuple[QueueCore, dict[str, Any], float | None, Job]


@dataclasses.dataclass
class _Turned:
    """A finished job whose settle the body's thread sent with the slot's next claim
    (:meth:`_Worker._turn`): the settle, and the answer — (the settle's error or None, the
    claimed job's fields or None), or the exception the request ended with."""

    settled: _Pending
    answer: tuple[BaseException | None, Mapping[str, Any] | None] | BaseException


@dataclasses.dataclass
class _Handed:
    """A job the body's thread claimed with its last job's settle and began itself
    (:meth:`_Worker._run_sync`), handed to the slot on the worker's loop to finish as
    :meth:`_Worker.execute` would: its async body to run (``body``), or what its run on the
    thread ended with — the exception its set-up or sync body raised (``error``), or the
    result of a body whose job was stopped or lost meanwhile (``result``)."""

    running: _Running
    body: tuple[BodyKind, Callable[[], Any]] | None = None
    error: BaseException | None = None
    result: Any = None


def _offers_or_env(offers: Mapping[str, Any] | str | None) -> Mapping[str, Any] | str | None:
    """The worker's offers: those given, else ``$LAKESHORE_OFFERS`` read in ``--offers`` form
    (docs/providers.md, "Launching by shape"), else None."""
    if offers is None and os.environ.get(_offers.ENV_OFFERS, "").strip():
        return _offers.parse_offers(os.environ[_offers.ENV_OFFERS])
    return offers


def _claim_refused(e: errors.DispatchError) -> bool:
    """Whether ``e``, a claim's error, refuses every claim of this worker alike, so it
    stops the worker (raised from run_worker) rather than be retried: the token may not
    consume here or is refused (forbidden, unauthorized), or the server refused the claim
    as invalid (its queue names, worker id, lease, offers, …: the next claim would send
    the same). A payload that does not decode here is not a refusal: that job is failed
    and the worker claims on. Go's ``Worker.claimLoop`` stops on the same errors."""
    if isinstance(e, _UndecodablePayloadError):
        return False
    return isinstance(e, (errors.ForbiddenError, errors.UnauthorizedError, errors.InvalidError))


CLAIM_RETRY_MIN = 0.25
"""The first wait (seconds) before a worker claims again after a claim failed for a
transient reason (the server unreachable, busy, stopping; Go ``claimRetryMin``)."""

CLAIM_RETRY_MAX = 10.0
"""The longest wait (seconds) between a worker's claims while they keep failing (Go
``claimRetryMax``)."""


def _claim_retry_delay(failures: int) -> float:
    """The wait before the next claim after ``failures`` (≥ 1) claims in a row failed for a
    transient reason: CLAIM_RETRY_MIN doubled per failure up to CLAIM_RETRY_MAX, of which
    a random half (jitter: workers that failed together do not come back together). Go's
    ``claimRetryDelay``."""
    full = min(CLAIM_RETRY_MAX, CLAIM_RETRY_MIN * 2.0 ** min(max(failures, 1) - 1, 32))
    return full / 2 + random.random() * full / 2


def _refuses_outright(e: errors.DispatchError) -> bool:
    """Whether ``e`` says the plane refused a registration and stored nothing: the token
    may not register (forbidden, unauthorized), the registration is invalid or over the
    namespace's cap, or the plane has no registry."""
    return isinstance(e, (errors.ForbiddenError, errors.UnauthorizedError, errors.InvalidError, errors.LimitExceededError)) or e.code in (
        "not_implemented",
        "route_not_found",
    )


CLAIM_QUEUES_LIMIT = 64
"""The most queues one claim may name (Go ``plane.ClaimQueuesLimit``; the plane refuses more)."""


def _refuses_offers(e: errors.DispatchError) -> bool:
    """Whether ``e`` is the server's refusal of the worker's offers or warm host keys."""
    field = getattr(e, "field", "") or ""
    return isinstance(e, errors.InvalidError) and (
        field in ("offers", "warm_host_keys") or field.startswith(("offers.", "offers["))
    )


class _Worker:
    """The slots of ``run_worker`` on the worker's event loop.

    Per job: one request that settles the slot's previous job and claims its next one
    (``POST …/settle-and-claim`` with no wait, coalesced with the other slots' turns into
    one request); a long-poll claim only when that found the queues empty. The queues of
    one claim order are claimed together (one claim over all of them, its ``queues``),
    so a long-poll waits on every queue at once. Leases are kept
    by one keeper task on the client's loop for all running jobs (no task per job)."""

    def __init__(
        self,
        dispatch: Dispatch,
        handlers: dict[str, Callable[..., Any]],
        *,
        concurrency: int,
        once: bool,
        wait: float,
        lease_ttl: float | None,
        worker_id: str,
        queue_kinds: dict[str, str],
        exit_when_idle: bool = False,
        max_jobs: int = 0,
        launch_id: str = "",
        provider: str = "",
        register_interval: float = 10.0,
        offers: Mapping[str, Any] | str | None = None,
        warm_host_keys: Sequence[str] = (),
        trust_declarations: bool = False,
    ) -> None:
        self.d = dispatch
        self.handlers = handlers
        self.cores = {
            name: QueueCore(name, dispatch, queue_kinds.get(name, "fifo"), 1.0, lease_ttl) for name in handlers
        }
        # One claim per claim order over its queues: it waits on them at once and takes
        # from whichever has work first, fair across them (the claim's ``queues``), at most
        # CLAIM_QUEUES_LIMIT queues a claim (the plane refuses more), so a worker of more
        # queues of one order has one claim per group of them, taken in turn. Its core
        # holds the jobs it claims, whichever queue they come from. Before 2026-12-07 one
        # claim named every queue: a process of more than 64 @udf functions ran a worker
        # whose every claim was refused, in a loop that took nothing and never returned.
        by_kind: dict[str, list[QueueCore]] = {}
        for name, core in self.cores.items():
            groups = by_kind.setdefault(core.kind, [])
            if groups and len(groups[-1].also) + 1 < CLAIM_QUEUES_LIMIT:
                groups[-1].also.append(name)
            else:
                groups.append(core)
        self.claimers = [core for groups in by_kind.values() for core in groups]
        self.offers = _placement("offers", offers) if offers else None
        self.warm_given = list(warm_host_keys)
        for core in self.claimers:
            core.offers = self.offers
            core.warm = self.warm_host_keys
        self.concurrency = concurrency
        self.once = once
        self.wait = wait
        self.worker_id = worker_id
        self.draining = False
        self.stop_reason = "stopped"
        # exit_when_idle: each claimer's last plain claim came back empty (Go's
        # claimGroup.empty), the slots whose claim (plain or with a settle) is in flight —
        # a job it brings back is not in ``running`` yet, so the worker is not idle while
        # one is — and whether a slot is reading the queues' stats for the others.
        self.exit_when_idle = exit_when_idle
        self.empty = [False] * len(self.claimers)
        # exit_when_idle: the jobs a body answered "slow down" (RateLimited), by id: the core
        # to read them with, their queue and when their delay ends (monotonic), until this
        # worker claims them again (_keep) or _handed_back_waits finds them claimed or
        # ended (Go's Worker.handedBack).
        self.handed_back: dict[str, tuple[QueueCore, str, float]] = {}
        self.claiming = 0
        self.idle_checking = False
        # The last idle check found nothing due; the worker drains only when the claims made
        # after it come back empty too: a schedule fire submitted between an empty claim and
        # the check is claimable but invisible to it (Go's checkedEmpty in runworker.go).
        self.checked_empty = False
        # max_jobs (0: no limit): the jobs claimed or being claimed against it, of those the
        # ones whose claims are still in flight (some may come back empty and give their
        # share back), and the event set when one resolves or the worker drains (Go's
        # reserved, pending and budgetWake).
        self.max_jobs = max_jobs
        self.reserved = 0
        self.reserving = 0
        self.budget_wake: asyncio.Event | None = None
        self.running: dict[str, _Running] = {}
        self.done = 0
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="lakeshore-body")
        # One slot over one claim order, with no budget nor idle exit to count claims against:
        # the body's thread settles a succeeded sync job and claims the next one itself
        # (_turn), without handing the job back to this loop and the turn to the client's.
        self.turns_on_thread = concurrency == 1 and not once and not max_jobs and not exit_when_idle and len(self.claimers) == 1
        self.claims: set[asyncio.Task[Any]] = set()
        self.keeper_wake: asyncio.Event | None = None
        # The registrar's wake (on the client's loop) and the warm keys last registered: a
        # run whose set-up made the worker warm for a new key is registered at once, not at
        # the next refresh.
        self.register_wake: asyncio.Event | None = None
        self.registered_warm: list[str] = []
        # The worker registry (as the Go worker's): who runs, for `lakeshore workers` and
        # for a provider's supervisor, which matches launches to registered workers by the
        # launch id it put in the environment.
        self.started_at = datetime.now(timezone.utc)
        self.idle_at = self.started_at
        self.launch_id = launch_id
        self.provider = provider
        self.register_interval = register_interval
        self.registry = True  # False once the plane said it has no registry
        self.register_warned = False
        # Whether some registration may have been stored (one succeeded, or failed without
        # saying it was refused): only then does the worker remove it when it stops, as
        # Go's worker does. A worker whose token may not register has nothing to remove.
        self.may_be_registered = False
        self.preparer = _fabric.Preparer(dispatch, trust_declarations)

        self.worker_path = f"/v1/namespaces/{path_segment('namespace', dispatch.namespace)}/workers/{path_segment('worker_id', worker_id)}"

    def warm_host_keys(self) -> list[str]:
        """The host keys this worker is warm for: those given to ``run_worker``, then those
        whose set-up its runs did (most recent first), at most 16 (the plane's limit)."""
        out: list[str] = []
        for k in [*self.warm_given, *self.preparer.warm]:
            if k and k not in out:
                out.append(k)
        return out[:16]

    async def run(self) -> int:
        slots = 1 if self.once else self.concurrency
        await self.d.run_async(self._register())
        portal = self.d._portal.loop
        keeper = asyncio.run_coroutine_threadsafe(self.keeper(), portal)
        registrar = asyncio.run_coroutine_threadsafe(self.registrar(), portal)
        try:
            await asyncio.gather(*(self.slot(i) for i in range(slots)))
        finally:
            keeper.cancel()
            registrar.cancel()
            self.pool.shutdown(wait=True)
            deregister = self._deregister()
            try:
                await self.d.run_async(deregister)
            except (errors.DispatchError, RuntimeError):
                deregister.close()  # never scheduled (a closed client): not left unawaited
        return self.done

    def _registration(self) -> dict[str, Any]:
        running = len(self.running)
        body: dict[str, Any] = {
            "host": (socket.gethostname() or "localhost")[:255],
            "pid": os.getpid(),
            "queues": list(self.handlers),
            "started_at": self.started_at,
            "running": running,
        }
        if running == 0:
            body["idle_since"] = self.idle_at
        if self.provider:
            body["provider"] = self.provider
        if self.launch_id:
            body["launch_id"] = self.launch_id
        if self.offers:
            body["offers"] = self.offers
        warm = self.warm_host_keys()
        if warm:
            body["warm_host_keys"] = warm
        return body

    async def _register(self) -> None:
        """Register or refresh the worker in the plane's registry (on the client's loop).
        Failures are logged once and retried at the next refresh; a plane without a
        registry is not asked again."""
        if not self.registry:
            return
        warm = self.warm_host_keys()
        try:
            await self.d._transport.call("PUT", self.worker_path, body=self._registration(), retry="safe")
            self.registered_warm = warm
            self.may_be_registered = True
        except errors.DispatchError as e:
            if not _refuses_outright(e):
                self.may_be_registered = True  # a timeout or outage may hide a stored one
            if e.code in ("not_implemented", "route_not_found"):
                self.registry = False
                return
            if _refuses_offers(e):
                return  # no retry would help: the first claim fails the worker with the same refusal
            if not self.register_warned:
                self.register_warned = True
                log.warning("lakeshore worker: registration as %s failed (retried every %.0f s): %s", self.worker_id, self.register_interval, e)
        else:
            self.register_warned = False

    async def registrar(self) -> None:
        """On the client's loop: refresh the registration (running jobs, idle time) every
        ``register_interval`` seconds."""
        wake = self.register_wake = asyncio.Event()
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), self.register_interval)
            wake.clear()
            await self._register()

    async def _deregister(self) -> None:
        if not self.registry or not self.may_be_registered:
            return
        try:
            await self.d._transport.call("DELETE", self.worker_path, retry="safe")
        except errors.DispatchError as e:
            if e.code not in ("not_implemented", "route_not_found", "closed"):
                log.warning("lakeshore worker: deregistration of %s failed: %s", self.worker_id, e)

    def drain(self) -> None:
        """Claim nothing more; running jobs finish."""
        self.draining = True
        lifecycle._set_phase("draining")
        for t in list(self.claims):
            t.cancel()
        if self.budget_wake is not None:
            self.budget_wake.set()  # a slot waiting on the max_jobs budget looks again, and stops

    def _reserve(self) -> bool:
        """Take one job of the ``max_jobs`` budget for a claim (always, without a limit);
        False when none is free. The claim reports what it got with :meth:`_resolve`."""
        if not self.max_jobs:
            return True
        if self.reserved >= self.max_jobs:
            return False
        self.reserved += 1
        self.reserving += 1
        return True

    def _resolve(self, got: bool) -> None:
        """End a claim that reserved one job of the budget: give it back unless the claim
        ``got`` a job, and wake the slots waiting on the budget."""
        if not self.max_jobs:
            return
        self.reserving -= 1
        if not got:
            self.reserved -= 1
        if self.budget_wake is not None:
            self.budget_wake.set()
        self.budget_wake = asyncio.Event()

    async def _budget_spent(self) -> bool:
        """For a slot whose :meth:`_reserve` got nothing: True when ``max_jobs`` jobs were
        claimed (none of the budget is free nor held by a claim in flight), else False once
        it should look again — at once when some budget is free, else when a claim in
        flight resolved (it may come back empty and give its share back) or the worker
        drains."""
        if self.reserved >= self.max_jobs and self.reserving == 0:
            return True
        if self.reserved < self.max_jobs:
            return False
        if self.budget_wake is None:
            self.budget_wake = asyncio.Event()
        await self.budget_wake.wait()
        return False

    def _idle(self) -> bool:
        """Whether every claimer's last claim came back empty while no body runs and no
        claim is in flight."""
        return all(self.empty) and not self.running and self.claiming == 0

    async def _drained(self, claimer: int) -> bool:
        """``exit_when_idle``, after the plain claim of ``claimers[claimer]`` came back
        empty: True when the worker is idle (:meth:`_idle`) and no queue it serves has a
        job due now that a concurrency key holds back (:meth:`_queues_empty`) — the slot
        then drains the worker and returns. Else False after a short pause: another
        claimer, a running body or a claim in flight may still bring work (0.05 s), or a
        held-back job will be claimable soon (0.2 s)."""
        self.empty[claimer] = True
        if not all(self.empty):
            return False  # the next turn claims the claimer not known to be empty
        if not self._idle() or self.idle_checking:
            self.checked_empty = False
            await asyncio.sleep(IDLE_POLL)
            return False
        self.idle_checking = True
        try:
            empty = await self.d.run_async(self._queues_empty())
        except errors.DispatchError as e:
            if e.code == "closed":
                return True  # the dispatch was closed: nothing more to claim
            log.warning("lakeshore worker: could not read the stats of its queues (to tell whether it is idle): %s", e)
            empty = False
        finally:
            self.idle_checking = False
        if empty and self._idle():
            if self.checked_empty:
                self.drain()
                return True
            self.checked_empty = True
            self.empty = [False] * len(self.empty)  # every queue is claimed once more
            return False
        self.checked_empty = False
        await asyncio.sleep(EXIT_IDLE_POLL)
        return False

    async def _queues_empty(self) -> bool:
        """Whether no queue the worker serves (a paused one aside: nothing claims its jobs)
        has a job due now that a concurrency key holds back — its rate limit or "slow
        down" hold, or the key at its concurrency limit (``KeyStats.queued`` of the queue's
        stats; delayed jobs and those in a retry's backoff are not counted) — nor a schedule
        with a tick due that the plane's maintenance has not fired yet (it submits the fire
        within its interval: ``next_fire`` not after now, not paused), nor a job a body
        answered "slow down" still waiting out its delay (:meth:`_handed_back_waits`). What
        ``exit_when_idle`` waits for besides empty claims: Go's ``Worker.queuesEmpty``."""
        served = set()
        for name, core in self.cores.items():
            ans = await core._call("GET", core.path + "/stats", retry="safe")
            if ans.get("paused"):
                continue
            if any(int(k.get("queued") or 0) > 0 for k in ans.get("keys") or []):
                return False
            served.add(name)
        if not served:
            return True
        now = datetime.now(timezone.utc)
        for sc in await all_schedules(self.d._transport, self.d.namespace):
            due = sc.get("next_fire")
            if sc.get("queue") in served and not sc.get("paused") and isinstance(due, datetime) and due <= now:
                return False
        return not await self._handed_back_waits(served)

    async def _handed_back_waits(self, served: set[str]) -> bool:
        """Whether a job a body answered "slow down" (RateLimited) still waits out its
        delay: the worker's unfinished work, not an idle queue, so ``exit_when_idle`` waits
        for it. It waits while the job reads as queued (before its due time, and after
        while the plane's clock is behind or its key at its limit). One claimed since (by
        any worker) or ended (cancelled, deleted, trimmed) is forgotten at once, whatever
        its due time, so a job cancelled during a long "slow down" does not keep the
        worker; one the token may not read waits until its due time alone. One of a queue
        not in ``served`` (paused: no claim takes it until it is resumed) does not count.
        An entry also ends when this worker claims the job again (:meth:`_keep`). Go's
        ``Worker.handedBackWaits``."""
        now = time.monotonic()
        waiting = {id: entry for id, entry in self.handed_back.items() if entry[1] in served}
        for id, entry in waiting.items():  # the first that still waits answers: one read per poll
            core = entry[0]
            try:
                inv = await core.get(id)
                if inv.state == "queued":
                    return True
            except (errors.ForbiddenError, errors.UnauthorizedError):
                if now < entry[2]:
                    return True
            except errors.NotFoundError:
                pass
            if self.handed_back.get(id) is entry:  # not handed back again since the read
                self.handed_back.pop(id, None)  # (_keep may pop it meanwhile, on a body's thread)
        return False

    def stop_running(self, reason: str = "stopped by the worker's shutdown") -> int:
        """Stop the running jobs (they are released for a retry); ``reason`` is what their
        error says ("stopped by SIGINT"). Returns how many it stopped."""
        self.stop_reason = reason
        self.drain()
        running = list(self.running.values())
        for r in running:
            self._stop(r)
        return len(running)

    async def slot(self, i: int) -> None:
        claimers = self.claimers
        turn = i
        deadline = time.monotonic() + self.wait
        pending: _Pending | None = None
        ready: Job | None = None  # claimed by the body's thread with the last job's settle
        failures = 0  # long-poll claims failed in a row for a transient reason (backoff)
        job: Job | None
        try:
            while not self.draining:
                index = turn % len(claimers)
                core = claimers[index]
                name = ",".join([core.name, *core.also])
                if ready is not None:
                    job, ready = ready, None
                    turn += 1
                elif not self._reserve():
                    # max_jobs: the budget is claimed, or held by claims in flight. Settle
                    # the finished job alone, then stop or wait for a share to come back.
                    if pending is not None:
                        settled, pending = pending, None
                        await self._settle_now(settled[0], settled)
                    if await self._budget_spent():
                        return
                    continue
                else:
                    turn += 1
                    got = False  # whether the claim reserved above got a job
                    if pending is not None:
                        # Settle the finished job and claim the next one in one request.
                        settled, pending = pending, None
                        self.claiming += 1
                        try:
                            job = await self._settle_and_claim(core, settled, claim=not self.draining)
                            got = job is not None
                        except errors.DispatchError as e:
                            if _claim_refused(e):
                                log.error("lakeshore worker: claim from %s refused, the worker stops: %s", name, e)
                                raise
                            if isinstance(e, _UndecodablePayloadError):
                                continue  # a payload that does not decode: failed already
                            job = None
                        finally:
                            self.claiming -= 1
                            self._resolve(got)
                        if job is None:
                            continue  # the queue is empty: the next turn long-polls
                    else:
                        if self.exit_when_idle:
                            wait = 0.0  # an empty answer is what tells it is idle
                        elif self.once:
                            # Several claims (claim orders, groups of queues) are taken in
                            # turn: each waits briefly, so a job on another's queues is not
                            # held back for the whole wait.
                            wait = max(0.0, deadline - time.monotonic())
                            if len(claimers) > 1:
                                wait = min(wait, 0.5)
                        else:
                            wait = 5.0 if len(claimers) == 1 else 0.5
                        claim = asyncio.ensure_future(self._claim(core, wait))
                        self.claims.add(claim)
                        self.claiming += 1
                        try:
                            job = await claim
                            got = job is not None
                        except asyncio.CancelledError:
                            if self.draining:
                                return
                            raise
                        except errors.DispatchError as e:
                            if isinstance(e, _UndecodablePayloadError):
                                failures = 0
                                continue  # a payload that does not decode: failed by claim() already
                            if e.code == "closed":
                                return  # the dispatch was closed: nothing more to claim
                            if _claim_refused(e):
                                # Every claim would be refused alike: fail the worker, as
                                # Go's does, rather than claim again (at once, for ever).
                                log.error("lakeshore worker: claim from %s refused, the worker stops: %s", name, e)
                                raise
                            failures += 1
                            delay = _claim_retry_delay(failures)
                            log.warning("lakeshore worker: claim from %s failed (claiming again in %.2f s): %s", name, delay, e)
                            retry = asyncio.ensure_future(asyncio.sleep(delay))
                            self.claims.add(retry)  # a drain cancels the wait with the claims
                            try:
                                await retry
                            except asyncio.CancelledError:
                                if self.draining:
                                    return
                                raise
                            finally:
                                self.claims.discard(retry)
                            continue
                        finally:
                            self.claims.discard(claim)
                            self.claiming -= 1
                            self._resolve(got)
                        failures = 0
                        if job is None:
                            if self.exit_when_idle:
                                if await self._drained(index):
                                    return
                                continue
                            if self.once and time.monotonic() >= deadline and turn % len(claimers) == 0:
                                return
                            continue
                self.empty[index] = False
                self.checked_empty = False
                if self.draining:
                    # Claimed as the drain began: give it back for another worker now, unrun
                    # (outcome "released": its attempt is not counted).
                    await self._settle_and_claim(core, (core, _released_body(job, "the worker is draining"), _lease_deadline(job), job), claim=False)
                    return
                ran = await self.execute(core, job)
                self.done += 1
                while isinstance(ran, _Handed):
                    # A job the body's thread claimed and began: finished here, drain or not.
                    ran = await self.execute(ran.running.core, ran.running.job, ran)
                    self.done += 1
                if isinstance(ran, _Turned):
                    # Settled, and the next job claimed, on the body's thread.
                    try:
                        if isinstance(ran.answer, BaseException):
                            raise ran.answer
                        ready = await self._turn_answered(core, ran.settled, ran.answer)
                    except errors.DispatchError as e:
                        if _claim_refused(e):  # else a payload that does not decode: failed already
                            log.error("lakeshore worker: claim from %s refused, the worker stops: %s", name, e)
                            raise
                    ran = None
                pending = ran
                if self.once:
                    return
        finally:
            if pending is not None:
                with contextlib.suppress(errors.DispatchError):
                    await self._settle_and_claim(pending[0], pending, claim=False)
            if ready is not None:
                # Claimed with the last settle as the drain began: give it back unrun.
                back = (claimers[0], _released_body(ready, "the worker is draining"), _lease_deadline(ready), ready)
                with contextlib.suppress(errors.DispatchError):
                    await self._settle_and_claim(claimers[0], back, claim=False)

    async def _settle_and_claim(self, core: QueueCore, settled: _Pending | None, *, claim: bool) -> Job | None:
        """Send a finished job's settle and (with ``claim``) claim one job without waiting.

        Raises:
            errors.InvalidError: the claimed job's payload does not decode (it is failed).
            errors.DispatchError: the claim failed."""
        item = SettleClaim(
            settle=settled[1] if settled else None,
            deadline=settled[2] if settled else None,
            claim=claim,
            lease_ttl=core.lease_ttl,
            worker=self.worker_id,
        )
        return await self._turn_answered(core, settled, await asyncio.wrap_future(core.settle_and_claim_future(item)))

    async def _turn_answered(
        self, core: QueueCore, settled: _Pending | None, answer: tuple[BaseException | None, Mapping[str, Any] | None]
    ) -> Job | None:
        """After a settle-and-claim turn of ``core`` was answered: report its settle's error,
        and return the claimed job (None: none).

        Raises:
            errors.InvalidError: the claimed job's payload does not decode (it is failed)."""
        settle_error, d = answer
        if settled is not None:
            job = settled[3]
            settled[0].held.pop(job.id, None)
            if isinstance(settle_error, errors.LeaseLostError):
                if await self._killed(settled[0], job):
                    # The expected end of a kill (a RolloutPool's stop, an operator's kill)
                    # that the body outran: nothing was lost that anyone still wants.
                    log.info("lakeshore worker: job %s was killed before its outcome settled; the outcome is dropped", job.id)
                else:
                    log.warning("lakeshore worker: job %s: the lease was lost before it settled (fenced off)", job.id)
            elif isinstance(settle_error, errors.InvalidError):
                await self._settle_refused(settled, settle_error)
            elif settle_error is not None:
                log.warning("lakeshore worker: job %s: settle failed: %s", job.id, settle_error)
        if d is None:
            return None
        return await core.job_from(d)

    async def _settle_refused(self, settled: _Pending, refusal: errors.InvalidError) -> None:
        """The plane refused a job's settle as invalid: fail the attempt instead (a retry
        while attempts remain; failed at once when the settle did not retry), its error
        the handler's and the refusal (type ``settle_refused``), rather than leave the job
        running until its lease expires; a refused ack fails the job (a retry would store
        the same result). The rule of Go's worker."""
        core, body, deadline, job = settled
        log.warning("lakeshore worker: job %s: the plane refused its settle (%s); the attempt fails instead", job.id, refusal)
        error = body.get("error") or {}
        message = f"{error.get('message') or 'the handler outcome'} (its settle was refused: {refusal})"
        outcome = "failed" if body.get("outcome") in ("failed", "succeeded") else "retry"
        fallback = _settle_body(job, outcome, None, {"type": "settle_refused", "message": message, "attempt": job.attempt})
        try:
            await self.d.run_async(core._settle_one(fallback, deadline))
        except errors.DispatchError as e:
            log.warning("lakeshore worker: job %s: settle failed: %s", job.id, e)

    async def _killed(self, core: QueueCore, job: Job) -> bool:
        """Whether a job this worker lost was killed (asked once, after the loss): a kill is
        said at INFO, any other loss (an expired lease, a claim by another worker) at
        WARNING. False when the plane cannot say."""
        try:
            inv = await self.d.run_async(core.get(job.id))
        except errors.DispatchError:
            return False
        return inv.state == "killed" and inv.attempt == job.attempt

    async def _claim(self, core: QueueCore, wait: float) -> Job | None:
        # The claim's coroutine is made here, so a task cancelled before it starts leaves
        # no coroutine unawaited.
        return await self.d.run_async(core.claim(wait, None, self.worker_id))

    def _stop(self, r: _Running) -> None:
        r.stopped.set()
        if r.task is not None:
            loop = r.task.get_loop()
            loop.call_soon_threadsafe(r.task.cancel)
        with r.lock:
            if r.thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(r.thread_id), ctypes.py_object(JobStopped))

    async def keeper(self) -> None:
        """On the client's loop: heartbeat every running job when its turn comes; stop the
        body of one whose lease is lost. One task for the worker, whatever runs."""
        wake = self.keeper_wake = asyncio.Event()
        while True:
            now = time.monotonic()
            next_at = now + _KEEPER_IDLE_SECONDS
            for r in list(self.running.values()):
                due = r.due
                if due is None:
                    continue
                if due <= now:
                    r.due = None
                    asyncio.ensure_future(self._beat(r))
                else:
                    next_at = min(next_at, due)
            wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), max(0.005, next_at - now))

    async def _beat(self, r: _Running) -> None:
        if r.job.id not in r.core.held:
            return
        try:
            await r.core.heartbeat(r.job)
        except (errors.LeaseLostError, errors.NotFoundError, errors.InvocationError):
            if r.job.id not in r.core.held:
                return  # settled while this beat was in flight: its lease ended with it
            if await self._killed(r.core, r.job):
                log.info("lakeshore worker: job %s was killed: stopping its body", r.job.id)
            else:
                log.warning("lakeshore worker: job %s was killed or lost its lease: stopping its body", r.job.id)
            r.lost = True
            self._stop(r)
            return
        except errors.DispatchError:
            if _lease_ends_before_next_beat(r.job):
                # The plane did not answer and the lease ends before another beat: it
                # re-queues the job for another worker, and nothing this body does can be
                # settled. Stop it rather than run on beside the next attempt.
                log.warning(
                    "lakeshore worker: job %s: the plane did not answer its heartbeats before its lease ended: stopping its body",
                    r.job.id,
                )
                r.lost = True
                self._stop(r)
                return
        r.due = time.monotonic() + _heartbeat_interval(r.job)
        if self.keeper_wake is not None:
            # The keeper went to sleep while this beat was in flight (its due unknown), for
            # up to _KEEPER_IDLE_SECONDS: longer than a short lease (lease_ttl=1 beats every
            # 0.33 s).
            self.keeper_wake.set()

    def _keep(self, r: _Running) -> None:
        """Hand a running job to the keeper (no thread hop unless its first beat is sooner
        than the keeper's next wake)."""
        interval = _heartbeat_interval(r.job)
        r.due = time.monotonic() + interval
        self.running[r.job.id] = r
        # Claimed again: no longer waited for (_handed_back_waits); so the record holds only
        # jobs handed back and not claimed since, however long the worker runs.
        self.handed_back.pop(r.job.id, None)
        wake = self.keeper_wake
        if interval < _KEEPER_IDLE_SECONDS and wake is not None:
            with contextlib.suppress(RuntimeError):
                self.d._portal.loop.call_soon_threadsafe(wake.set)

    def _let_go(self, r: _Running) -> None:
        """Undo :meth:`_keep` on the body's thread, and the job's hold: no more heartbeats,
        no longer running nor held (its settle, or the loop's give-back, ends it)."""
        r.due = None
        self.running.pop(r.job.id, None)
        r.core.held.pop(r.job.id, None)

    async def execute(self, core: QueueCore, job: Job, handed: _Handed | None = None) -> _Pending | _Turned | _Handed | None:
        """Run the job's body; return its settle (sent with the slot's next claim), or None
        when the plane took the job back, or (:attr:`turns_on_thread`, a sync body that
        succeeded) what the body's thread did after it: the settle it sent with the next
        claim and its answer (a :class:`_Turned`), or the next job it claimed and began (a
        :class:`_Handed`, for the slot to finish). With ``handed``: finish that job, begun
        on the body's thread."""
        fn = self.handlers[job.queue]  # core claims for several queues: the job names its own
        if handed is None:
            r = _Running(job, core, threading.Event())
            self._keep(r)
        else:
            r = handed.running
        outcome: tuple[str, Any] = ("nack", None)
        try:
            if handed is not None and handed.error is not None:
                raise handed.error
            if handed is not None and handed.body is None:
                result = handed.result
            else:
                kind, call = handed.body if handed is not None and handed.body is not None else await self._ready(fn, job, r)
                if kind in ("async", "async_generator"):
                    r.task = asyncio.ensure_future(self._run_async(kind, call, r))
                    result = await r.task
                else:
                    loop = asyncio.get_running_loop()
                    try:
                        result = await loop.run_in_executor(self.pool, self._run_sync, kind, call, r, self.turns_on_thread)
                    except asyncio.CancelledError:
                        # The slot is cancelled: a body's thread that goes on turning jobs
                        # (_run_sync) claims nothing more and begins no other job.
                        self.draining = True
                        raise
                    if isinstance(result, (_Turned, _Handed)):
                        return result
            outcome = ("ack", result)
        except (asyncio.CancelledError, JobStopped) as e:
            if r.stopped.is_set():
                outcome = ("stopped", e)
            else:
                outcome = ("nack", e)
                if isinstance(e, asyncio.CancelledError):
                    self.running.pop(job.id, None)
                    await self._settle_now(core, self._settle_of(core, job, outcome, r.lost, r.started))
                    raise
        except errors.RateLimited as e:
            outcome = ("nack", e)
            _log_rate_limited(job, e)
        except Exception as e:
            _hide_machinery_frames(e)
            outcome = ("nack", e)
            _log_failure(job, e)
        finally:
            self.running.pop(job.id, None)
            self.preparer.release(job.id)
            if not self.running:
                self.idle_at = datetime.now(timezone.utc)
        if r.lost:
            await self._confirm_released(core, job)
        return self._settle_of(core, job, outcome, r.lost, r.started)

    async def _ready(self, fn: Callable[..., Any], job: Job, r: _Running) -> tuple[BodyKind, Callable[[], Any]]:
        """On the worker's loop: :meth:`_ready_blocking`, off the loop unless the run
        declares nothing and takes the context gate at once."""
        if not self._before_body_needed(job) and self.preparer.try_enter_plain(job.id):
            return _prepare(fn, job.payload)
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._ready_blocking, fn, job, r)

    def _ready_blocking(self, fn: Callable[..., Any], job: Job, r: _Running) -> tuple[BodyKind, Callable[[], Any]]:
        """In a worker thread (it may block): the run's code, set-up and hooks
        (:meth:`_before_body`), or, for a run that declares nothing, the context gate —
        waiting while a declared run's env and code root are set (docs/fabric.md, "One
        context at a time"); then the job's body (of ``fn``, the queue's handler, unless the
        run ships its own)."""
        if self._before_body_needed(job):
            shipped = self._before_body(job, r.stopped)
            if shipped is not None:
                fn = shipped
            self._register_if_warmer()
        elif not self.preparer.try_enter_plain(job.id):
            self._enter_plain(job, r.stopped)
        return _prepare(fn, job.payload)

    def _before_body_needed(self, job: Job) -> bool:
        """Whether the job's run has code or set-up to prepare, or hooks to run, before its
        body (:meth:`_before_body`)."""
        return self.preparer.needed(job.metadata) or lifecycle.pending_host_setup() or lifecycle.has_run_setup()

    def _register_if_warmer(self) -> None:
        """After a run's set-up (any thread): wake the registrar when the worker became warm
        for a host key it has not registered yet."""
        wake = self.register_wake
        if wake is not None and self.registry and self.warm_host_keys() != self.registered_warm:
            with contextlib.suppress(RuntimeError):
                self.d._portal.loop.call_soon_threadsafe(wake.set)

    async def _confirm_released(self, core: QueueCore, job: Job) -> None:
        """Post that the body of a job whose lease was lost (killed, or the lease expired)
        has returned: one value on the queue's topic ``lakeshore.released.<id>``, which
        ``lakeshore kill --wait`` (Go: ``Queue.WaitReleased``) waits for — the Go worker's
        confirmation, same value."""
        value = {"id": job.id, "attempt": job.attempt, "worker": self.worker_id}
        try:
            await self.d.run_async(core.post_topic(RELEASED_TOPIC_PREFIX + job.id, value, False))
        except errors.DispatchError as e:
            log.warning("lakeshore worker: could not confirm the release of lost job %s: %s", job.id, e)

    def _before_body(self, job: Job, stopped: threading.Event) -> Callable[..., Any] | None:
        """In a worker thread: prepare a run that carries a declaration (its code, setup,
        env, run_setup; the function it ships), then the lifecycle hooks. A declared
        command still running when the job is stopped (``stopped`` set) is killed and the
        job's outcome is JobStopped."""
        fn = None
        if self.preparer.needed(job.metadata):
            # A queue served by name (thunks) or by an @udf runs its submitters' code by
            # design; one given a callable of the worker's own runs only that, unless its
            # owner trusts the submitters (docs/fabric.md, "Who may run commands on a worker").
            handler = self.handlers.get(job.queue)
            own = not (handler is _run_thunk or isinstance(handler, UDF))
            try:
                fn = self.preparer.prepare(job.namespace, job.queue, job.metadata, own_handler=own, stopped=stopped, job_id=job.id)
            except _fabric.CommandStopped:
                raise JobStopped(job.id) from None
        else:
            self._enter_plain(job, stopped)
        lifecycle.run_host_setup()
        lifecycle.run_run_setup()
        return fn

    def _enter_plain(self, job: Job, stopped: threading.Event) -> None:
        """In a worker thread: take the context gate for a run that declares nothing
        (Preparer.enter_plain); JobStopped when the job is stopped while it waits."""
        try:
            self.preparer.enter_plain(job.id, stopped)
        except _fabric.CommandStopped:
            raise JobStopped(job.id) from None

    async def _settle_now(self, core: QueueCore, settled: _Pending | None) -> None:
        if settled is not None:
            with contextlib.suppress(errors.DispatchError):
                await self._settle_and_claim(core, settled, claim=False)

    def _settle_of(self, core: QueueCore, job: Job, outcome: tuple[str, Any], lost: bool, started: bool = True) -> _Pending | None:
        what, value = outcome
        deadline = _lease_deadline(job)
        if what == "ack":
            try:
                data = encode_value("result", value)
            except (wire.EncodeError, errors.InvalidError) as e:
                # The result cannot be stored: fail the job (no retry would change it).
                log.warning("lakeshore worker: job %s: the result cannot be stored, the job fails: %s", job.id, e)
                return core, _settle_body(job, "failed", None, _error_info(e, job.attempt)), deadline, job
            return core, _settle_body(job, "succeeded", data, None), deadline, job
        if what == "stopped":
            if not lost and job.id in core.held:
                if not started:
                    # Stopped before its body began: give it back unrun, the attempt kept.
                    return core, _released_body(job, f"{self.stop_reason} before the job began"), deadline, job
                # Stopped by a signal (not by the plane): release it for a retry.
                reason = f"{self.stop_reason}, released for retry"
                return core, _settle_body(job, "retry", None, _error_info(reason, job.attempt), 0.0), deadline, job
            core.held.pop(job.id, None)
            return None
        if isinstance(value, errors.RateLimited):
            # "Slow down": back to the queue after retry_after, the attempt not counted.
            info = _error_info(value, job.attempt)
            info["type"] = "rate_limited"
            # Clamped again here: the attributes may have been changed after the error was built.
            body = _settle_body(job, "rate_limited", None, info, max(errors.rate_limited_delay(value.retry_after), 0.001))
            if value.key:
                body["rate_limit_key"] = value.key
            if self.exit_when_idle:
                self.handed_back[job.id] = (core, job.queue, time.monotonic() + body["retry_delay"])
            return core, body, deadline, job
        return core, _settle_body(job, "retry", None, _error_info(value, job.attempt)), deadline, job

    def _run_sync(self, kind: str, call: Callable[[], Any], r: _Running, turn: bool = False) -> Any:
        """In the body's thread: run a sync body and return its result. With ``turn``
        (:attr:`turns_on_thread`), a body that succeeded is settled with the slot's next
        claim from this thread (:meth:`_turn`), and the job claimed runs here too while it
        can (:meth:`_next_on_thread`): job after job, none going back to the worker's loop.
        Returned then: the last turn (a :class:`_Turned`, for the loop to finish: its
        settle's error, the job it claimed), or a job begun here that the loop finishes (a
        :class:`_Handed`), or r's ``result`` itself when r was stopped or lost meanwhile."""
        result = self._run_body(kind, call, r)
        first = True
        while turn:
            if r.lost or r.stopped.is_set():
                # The loop settles it (released for a retry, or nothing when lost) and
                # confirms a lost job's release, as for any job.
                return result if first else _Handed(r, result=result)
            turned = self._turn(r, result)
            self.preparer.release(r.job.id)
            if not first:
                self.done += 1  # the first is counted by its slot
                if not self.running:
                    self.idle_at = datetime.now(timezone.utc)
            following = self._next_on_thread(r.core, turned)
            if not isinstance(following, tuple):
                return turned if following is None else following
            first = False
            r, kind, call = following
            try:
                result = self._run_body(kind, call, r)
            except BaseException as e:  # noqa: BLE001 — the loop's execute handles it (logs, settles, re-raises)
                return _Handed(r, error=e)
        return result

    def _turn(self, r: _Running, result: Any) -> _Turned:
        """In the body's thread, after r's sync body returned ``result`` (r neither stopped
        nor lost): send the job's settle with the slot's next claim as one blocking request
        from this thread (:meth:`QueueCore.settle_and_claim_blocking`), and return it with
        its answer. This spares the job's way back to the loop and the turn's to the
        client's loop and back."""
        core, job = r.core, r.job
        # No more heartbeats (the settle ends the lease), and not held from now on (the
        # loop's turn drops it once answered; nothing reads it before): a beat answered
        # "lease lost" while the settle is in flight is no loss.
        self._let_go(r)
        settled = self._settle_of(core, job, ("ack", result), False)
        assert settled is not None  # an ack always settles
        item = SettleClaim(
            settle=settled[1], deadline=settled[2], claim=not self.draining, lease_ttl=core.lease_ttl, worker=self.worker_id
        )
        answer: tuple[BaseException | None, Mapping[str, Any] | None] | BaseException
        try:
            answer = core.settle_and_claim_blocking(item)
        except Exception as e:  # noqa: BLE001 — the slot handles it as the loop's turn would
            answer = e
        return _Turned(settled, answer)

    def _next_on_thread(
        self, core: QueueCore, turned: _Turned
    ) -> tuple[_Running, BodyKind, Callable[[], Any]] | _Handed | None:
        """In the body's thread, after a turn: the job it claimed, made ready to run here
        (its lease kept, its set-up and hooks run, its body prepared): (its _Running, the
        body's kind and call) for a sync body; a :class:`_Handed` for the loop to finish
        when its body is async or its set-up or preparation raised. None — the loop
        finishes the turn as before — when the turn settled with an error (logged there,
        after asking whether the job was killed), claimed nothing, failed, or claimed a job
        whose payload does not decode (failed there), or when the worker drains (the job
        is given back unrun there)."""
        answer = turned.answer
        if isinstance(answer, BaseException) or answer[0] is not None or answer[1] is None or self.draining:
            return None
        try:
            job = core.claimed_job(answer[1])
        except errors.InvalidError:
            return None
        fn = self.handlers[job.queue]
        r = _Running(job, core, threading.Event())
        self._keep(r)
        if self.draining:
            # The drain began as the lease was handed to the keeper: a second signal's
            # stop may not have seen the job; it is not begun, and given back there.
            self._let_go(r)
            return None
        try:
            kind, call = self._ready_blocking(fn, job, r)
        except BaseException as e:  # noqa: BLE001 — the loop's execute handles it
            return _Handed(r, error=e)
        if kind in ("async", "async_generator"):
            return _Handed(r, body=(kind, call))
        return r, kind, call

    def _run_body(self, kind: str, call: Callable[[], Any], r: _Running) -> Any:
        with r.lock:
            r.thread_id = threading.get_ident()
        running = _running_job.set(r.job)
        try:
            if r.stopped.is_set():
                raise JobStopped(r.job.id)
            r.started = True
            if kind == "sync":
                return call()
            gen = call()
            manifest = _Manifest()
            try:
                while True:
                    try:
                        value = next(gen)
                    except StopIteration as stop:
                        return manifest.result() if stop.value is None else stop.value
                    manifest.add(value)
                    if r.stopped.is_set():
                        gen.close()
                        raise JobStopped(r.job.id)
                    try:
                        self.d.run(r.core.post(r.job, value, False))
                    except (errors.LeaseLostError, errors.JournalClosedError):  # killed: its journal is closed
                        r.lost = True
                        r.stopped.set()
                        gen.close()
                        raise JobStopped(r.job.id) from None
            finally:
                gen.close()
        finally:
            _running_job.reset(running)
            # A JobStopped scheduled before this line is raised in this function, never
            # in the pool's thread after it.
            with r.lock:
                r.thread_id = None

    async def _run_async(self, kind: str, call: Callable[[], Any], r: _Running) -> Any:
        _running_job.set(r.job)  # this task's own context (ensure_future copied the loop's)
        if r.stopped.is_set():
            raise JobStopped(r.job.id)
        r.started = True
        if kind == "async":
            return await call()
        agen = call()
        manifest = _Manifest()
        try:
            async for value in agen:
                manifest.add(value)
                if r.stopped.is_set():
                    raise JobStopped(r.job.id)
                try:
                    await self.d.run_async(r.core.post(r.job, value, False))
                except (errors.LeaseLostError, errors.JournalClosedError):  # killed: its journal is closed
                    r.lost = True
                    r.stopped.set()
                    raise JobStopped(r.job.id) from None
        finally:
            await agen.aclose()
        return manifest.result()


class _Manifest:
    """The result of a generator body that returns nothing, as dreamlake-lakeshore makes it
    (issue 24, semantics 2; checked against the package): when every yield is a key — a
    ``str``, a list or tuple of ``str``, or a ``dict`` of ``str`` to ``str`` — the keys
    concatenated in order (``["k0"], ["k1"]`` → ``["k0", "k1"]``; named keys alone stay a
    dict, after plain keys they add their values), else ``None`` (a data stream: the values
    are its frames, not kept)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.named: dict[str, str] = {}
        self.data = False

    def add(self, item: Any) -> None:
        if self.data:
            return
        if isinstance(item, str):
            self.keys.append(item)
        elif isinstance(item, (list, tuple)) and all(isinstance(x, str) for x in item):
            self.keys.extend(item)
        elif isinstance(item, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in item.items()):
            self.named.update(item)
        else:
            self.data, self.keys, self.named = True, [], {}

    def result(self) -> list[str] | dict[str, str] | None:
        if self.data:
            return None
        if self.named and not self.keys:
            return dict(self.named)
        return self.keys + list(self.named.values()) if self.keys else None


def _released_body(job: Job, reason: str) -> dict[str, Any]:
    """The settle that gives back a job this worker claimed but never ran: outcome
    "released" — claimable again at once, its attempt not counted, no key held back."""
    return _settle_body(job, "released", None, {"type": "released", "message": reason, "attempt": job.attempt})


def _settle_body(
    job: Job, outcome: str, result: bytes | None, error: Mapping[str, Any] | None, retry_delay: float | None = None
) -> dict[str, Any]:
    """The settle of a held job (the body of POST /v1/settle's items)."""
    body: dict[str, Any] = {"id": job.id, "token": job.token, "outcome": outcome}
    if result is not None:
        body["result"] = result
    if error is not None:
        body["error"] = dict(error)
    if retry_delay is not None:
        body["retry_delay"] = retry_delay
    return body


def _prepare(fn: Callable[..., Any], payload: Any) -> tuple[BodyKind, Callable[[], Any]]:
    """The body kind and a no-argument call of ``fn`` (or of a thunk payload) with the payload."""
    if fn is _run_thunk and _is_version1_thunk(payload):
        # A job stored before wire version 2: its thunk (then ext 5) now reads as the tuple
        # (language, data). A thunks-only queue takes no tuples, so it cannot be one.
        payload = wire.Thunk(payload[0], payload[1])
    if isinstance(payload, wire.Thunk):
        target = payload.load()
        if not callable(target):
            raise TypeError(f"the thunk payload is a {type(target).__name__}, not a callable")
        return body_kind(target), cast(Callable[[], Any], target)
    envelope = _seed_envelope(payload)
    if envelope is not None:
        return _prepare_envelope(fn, envelope)
    if isinstance(fn, UDF):
        f = fn.fn
        kind = fn.kind
    else:
        f = fn
        kind = body_kind(fn)
    if isinstance(payload, Mapping) and all(isinstance(k, str) for k in payload):
        kw = dict(payload)
        return kind, lambda: f(**kw)
    if payload is None:
        return kind, lambda: f()
    return kind, lambda: f(payload)


_ENVELOPE_KEYS = frozenset({"v", "id", "fn", "args", "kwargs", "prefix", "key", "cfg", "parent"})


def _seed_envelope(payload: Any) -> Mapping[str, Any] | None:
    """The payload when it is the dreamlake-lakeshore package's ``Envelope`` (docs/wire.md,
    "Envelope": its ``@udf`` and function jobs), else None."""
    if not isinstance(payload, Mapping) or set(payload) != _ENVELOPE_KEYS:
        return None
    ok = (
        isinstance(payload["v"], int)
        and isinstance(payload["fn"], Mapping)
        and isinstance(payload["args"], (bytes, bytearray))
        and isinstance(payload["kwargs"], (bytes, bytearray))
    )
    return payload if ok else None


def dreamlake_envelope(fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The payload of a job that runs ``fn(*args, **kwargs)`` on a dreamlake-lakeshore
    worker as well as on ours (a mixed fleet, issue 24): the package's ``Envelope``
    (docs/wire.md) naming ``fn`` by reference, ``{kind: "ref", module, qualname}``, with the
    arguments packed. ``fn`` is a module-level function or :class:`UDF` (its module and
    qualified name), or a ``"module:qualname"`` string; the worker imports it, so it must
    be importable there. Submit it with any queue's ``submit``; ``result`` is what ``fn``
    returned.

    Raises:
        InvalidError: ``fn`` names no importable module (``__main__``, a lambda, a
            nested function) or is not a ``module:qualname`` string."""
    if isinstance(fn, str):
        module, _, qualname = fn.partition(":")
    else:
        target = fn.fn if isinstance(fn, UDF) else fn
        module, qualname = getattr(target, "__module__", "") or "", getattr(target, "__qualname__", "") or ""
    if not module or not qualname or module == "__main__" or "<" in qualname:
        raise errors.InvalidError(
            f"cannot name {fn!r} by reference: want a module-level function of an importable module, or 'module:qualname'",
            field="fn",
            value=str(fn),
            rule="an importable module:qualname",
        )
    return {
        "v": 1,
        "id": "",
        "fn": {"kind": "ref", "module": module, "qualname": qualname},
        "args": wire.encode(list(args)),
        "kwargs": wire.encode(dict(kwargs)),
        "prefix": "",
        "key": None,
        "cfg": {},
        "parent": None,
    }


def _prepare_envelope(fn: Callable[..., Any], env: Mapping[str, Any]) -> tuple[BodyKind, Callable[[], Any]]:
    """The body kind and call of a job the dreamlake-lakeshore package submitted (a mixed
    fleet, issue 24): ``fn`` (the queue's function) with the envelope's packed ``args`` and
    ``kwargs``; on a thunks-only queue the function the envelope names by reference
    (``{kind: "ref", module, qualname}``, imported here). Pickled functions are refused, as
    the package's own HTTP workers refuse them by default."""
    args = wire.decode(bytes(env["args"])) if env["args"] else []
    kwargs = wire.decode(bytes(env["kwargs"])) if env["kwargs"] else {}
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, Mapping):
        raise TypeError("the envelope's args are not a list or its kwargs not a map")
    if fn is _run_thunk:
        ref = env["fn"]
        if ref.get("kind", "ref") != "ref":
            raise TypeError(
                f"the envelope's function is {ref.get('kind')!r}: this worker runs functions by reference only "
                "(module:qualname), never pickled code"
            )
        import importlib

        module, qualname = str(ref.get("module") or ""), str(ref.get("qualname") or "")
        if not module or module == "__main__":
            raise TypeError(f"the envelope's function {qualname!r} has no importable module ({module!r})")
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        target = getattr(target, "local", None) or getattr(target, "fn", None) or target
        if not callable(target):
            raise TypeError(f"{module}:{qualname} is a {type(target).__name__}, not a callable")
        f: Callable[..., Any] = target
        kind = body_kind(target)
    elif isinstance(fn, UDF):
        f, kind = fn.fn, fn.kind
    else:
        f, kind = fn, body_kind(fn)
    a, kw = list(args), dict(kwargs)
    return kind, lambda: f(*a, **kw)


def _is_version1_thunk(payload: Any) -> bool:
    """Whether payload has the shape of a wire version 1 thunk read as version 2: a tuple of
    a non-empty language and the code's bytes."""
    return (
        type(payload) is tuple
        and len(payload) == 2
        and isinstance(payload[0], str)
        and payload[0] != ""
        and isinstance(payload[1], bytes)
    )


RELEASED_TOPIC_PREFIX = "lakeshore.released."
"""The topic (of the job's queue) on which a worker confirms that the body of a job whose
lease it lost has returned (the Go SDK's ``ReleasedTopicPrefix``)."""


def _run_thunk(*_: Any, **__: Any) -> Any:
    raise TypeError(
        "this worker has no function for the queue (it serves it by name: thunks only) and the job is not a thunk: "
        "submit lakeshore.thunk(callable), ship a function (@udf(mode=…) with code), or run a worker with the "
        "queue's function (@udf(queue=…) or run_worker(queues={name: function}))"
    )


def _check_limits(*, once: bool, wait: float, exit_when_idle: bool, max_jobs: int | None) -> None:
    """Refuse bad ``exit_when_idle`` and ``max_jobs`` arguments of :func:`run_worker`.

    Raises:
        InvalidError: ``max_jobs`` is not None or an integer ≥ 1, or is other than 1 with
            ``once``; ``exit_when_idle`` is not a bool, or comes with a ``wait`` > 0."""
    if not isinstance(exit_when_idle, bool):
        raise errors.InvalidError(
            f"invalid exit_when_idle {exit_when_idle!r}: want True or False",
            field="exit_when_idle",
            value=exit_when_idle,
            rule="a bool",
        )
    if max_jobs is not None:
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise errors.InvalidError(
                f"invalid max_jobs {max_jobs!r}: want an integer ≥ 1, or None for no limit",
                field="max_jobs",
                value=max_jobs,
                rule="an integer ≥ 1, or None",
            )
        if once and max_jobs != 1:
            raise errors.InvalidError(
                f"invalid max_jobs {max_jobs!r} with once=True: once runs one job (leave max_jobs None, or drop once)",
                field="max_jobs",
                value=max_jobs,
                rule="None or 1 with once",
            )
    if exit_when_idle and wait:
        raise errors.InvalidError(
            f"invalid wait {wait!r} with exit_when_idle=True: its claims do not wait (it returns once the queues are drained)",
            field="wait",
            value=wait,
            rule="0 with exit_when_idle",
        )


def _stop_test(stop: threading.Event | Callable[[], bool] | None) -> Callable[[], bool] | None:
    """The test run_worker's ``stop`` means: an event's ``is_set``, or the function itself.
    Anything else is an InvalidError now, not a worker that never stops."""
    if stop is None:
        return None
    is_set = getattr(stop, "is_set", None)
    if callable(is_set):
        return cast(Callable[[], bool], is_set)
    if callable(stop):
        return stop
    raise errors.InvalidError(
        f"invalid stop {type(stop).__name__}: want a threading.Event or a function of no arguments that returns true to stop",
        field="stop",
        rule="threading.Event or callable",
    )


def _wake_loop_on_signals(loop: asyncio.AbstractEventLoop) -> tuple[socket.socket, socket.socket, int]:
    """Make a signal wake ``loop`` (on the main thread, before it runs): the signal module's
    wakeup fd, a socket the loop reads. Returns what :func:`_stop_waking_loop` undoes.

    A Python signal handler runs on the main thread between two bytecodes: the C handler
    only notes the signal, and the main thread runs the Python one when it next executes
    bytecode. A loop with nothing to do (a body or its set-up running on the pool) sleeps in
    ``epoll_wait`` with no timeout, so a signal whose C handler did not interrupt that sleep
    — the kernel gave it to another thread (the body's, the client's), or it came while the
    main thread was between its last bytecode and the ``epoll_wait`` (a loaded machine
    preempts it there) — was handled only once something else woke the loop: when the set-up
    or body ended. A drain then came after the body began, and a stop after it ran
    (test_a_job_stopped_before_its_body_began_keeps_its_attempt failed so under CI's load:
    its SIGTERM, sent as the set-up began, was handled when the set-up ended; the body ran,
    and the SIGINT stopped no job). The C handler writes the signal's number to the wakeup
    fd, which wakes the loop at once, whenever it goes to sleep; its main thread then runs
    the handler."""
    rsock, wsock = socket.socketpair()
    rsock.setblocking(False)
    wsock.setblocking(False)
    # A full buffer loses only bytes: one is enough to wake the loop, which reads them all.
    previous = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    loop.add_reader(rsock.fileno(), _pass_on_signals, rsock, previous)
    return rsock, wsock, previous


def _pass_on_signals(rsock: socket.socket, previous: int) -> None:
    """Read the signal numbers the wakeup socket holds and write them to ``previous``, the
    wakeup fd the caller had (-1: none), as the C handler did before the worker put its own
    in place: an asyncio loop of the same process (``add_signal_handler``) reads its
    signals there when it runs again. Best effort, as the C handler's own write (a full or
    closed fd loses them)."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while data := rsock.recv(4096):
            if previous != -1:
                with contextlib.suppress(OSError):
                    os.write(previous, data)


def _stop_waking_loop(loop: asyncio.AbstractEventLoop, wakeup: tuple[socket.socket, socket.socket, int]) -> None:
    """Undo :func:`_wake_loop_on_signals`: the previous wakeup fd again (the signals that
    came meanwhile passed on to it), the sockets closed."""
    rsock, wsock, previous = wakeup
    signal.set_wakeup_fd(previous)
    loop.remove_reader(rsock.fileno())
    _pass_on_signals(rsock, previous)
    rsock.close()
    wsock.close()


def run_worker(
    dispatch: Dispatch | SyncQueue | Queue | None = None,
    *,
    queues: Sequence[str | UDF[Any, Any]] | Mapping[str, Callable[..., Any]] | None = None,
    once: bool = False,
    concurrency: int = 1,
    wait: float = 0.0,
    lease_ttl: float | None = None,
    handle_signals: bool = True,
    worker_id: str | None = None,
    stop: threading.Event | Callable[[], bool] | None = None,
    launch_id: str | None = None,
    provider: str | None = None,
    offers: Mapping[str, Any] | str | None = None,
    warm_host_keys: Sequence[str] | None = None,
    trust_declarations: bool | None = None,
    exit_when_idle: bool = False,
    max_jobs: int | None = None,
) -> int:
    """Run the functions bound to ``queues`` in this process until stopped (or, with
    ``exit_when_idle`` or ``max_jobs``, until its queues are drained or it ran its share);
    return the number of jobs run.

    Args:
        dispatch: the plane (default: each function's, else the process default), or a
            ``SyncQueue``/``Queue``: its plane, and its queue when ``queues`` is not given
            (``run_worker(q, once=True)``, as dreamlake-lakeshore takes it: the queue's
            ``@udf`` function, else its thunk and envelope payloads).
        queues: queue names (their ``@udf`` functions; a name with no function runs
            thunk payloads), ``UDF`` objects, or a mapping of queue name to callable.
            Default: every ``@udf`` of the process.
        once: run at most one job and return: the one claimable now (or within ``wait``
            seconds), else return 0 at once (issue 24: the page's "drain exactly one job and
            return", as dreamlake-lakeshore does).
        concurrency: jobs at once (sync bodies run on that many threads; async ones on the
            worker's event loop).
        wait: with ``once`` (and without ``exit_when_idle``), how long to wait for a job
            (default 0: no waiting).
        lease_ttl: seconds of a claim's lease between heartbeats (default: the server's).
        handle_signals: on the main thread, the first SIGTERM/SIGINT drains (nothing new is
            claimed; running jobs finish), the second stops the running jobs (released for
            a retry) and returns.
        worker_id: the worker's id on the plane (default ``<host>-<pid>-<ULID>``).
        stop: an event another thread sets to drain the worker (as a first SIGTERM), or a
            function of no arguments that returns true when the worker should drain (as
            dreamlake-lakeshore's ``stop=`` takes it), asked every 50 ms on the worker's
            event loop (keep it quick: a slow one holds up that loop, its async bodies and next
            claims, though not the heartbeats); a function that raises drains the worker
            too (logged).
        launch_id: the provider's launch id the worker registers with (default
            ``$LAKESHORE_LAUNCH_ID``, which a provider sets; ``""`` when started by hand).
        provider: the provider that launched it (default ``$LAKESHORE_PROVIDER``).
        offers: what this worker offers (placement, docs/semantics.md): ``cpus_milli``,
            ``memory_bytes``, ``gpus``, ``gpu_type``, ``labels`` (or a string in
            ``lakeshore worker --offers`` form, ``"gpus=1,gpu_type=a100"``); it takes the jobs whose
            ``requires`` these satisfy, and jobs without one. Default None: only jobs
            without a requirement, so a GPU job never lands on a worker that did not say it
            has a GPU. When None and ``$LAKESHORE_OFFERS`` is set (a provider sets it for a
            worker it launches for a shape, in ``lakeshore worker --offers`` form), those.
        warm_host_keys: host keys (``lakeshore.host_key`` of a compute mode's runs) this
            worker is warm for: their jobs go first, within a minute of the claim order
            (docs/semantics.md, "Placement"). The worker adds by itself the host key of
            every run whose set-up it did (most recent first; 16 in all at most), so a
            worker that prepared a mode keeps taking that mode's jobs first.
        trust_declarations: run the ``setup``/``run_setup`` commands and ``env`` a run
            declares (a compute mode's, in its ``lakeshore.run`` metadata) even when the run
            ships no code. Default None: ``$LAKESHORE_TRUST_DECLARATIONS`` (``1``/``true``),
            else False — such a run's attempt fails with a ``PermissionError`` saying so,
            since the submit right alone would otherwise run shell commands on this worker.
            Runs that ship their code always run their declaration (their submitter runs
            their own code here anyway). docs/fabric.md, "Who may run commands on a worker".
        exit_when_idle: return once the queues are drained (default False: wait for work
            until stopped): a claim of every queue came back empty while no body was
            running and no claim was in flight, and no queue it serves (a paused one
            aside) has a job due now that only its concurrency key holds back (the key's
            rate limit or "slow down" hold, or the key at its concurrency limit) — such a
            job is work, so the worker claims again every 0.2 s until it runs it rather
            than leave it with no worker. So does a job a body answered "slow down"
            (``raise RateLimited``): only delayed, it runs again when its delay ends (one
            cancelled or deleted meanwhile no longer counts). A
            job submitted with a delay or waiting out a retry's backoff, or in a paused
            queue, does not keep it. Its claims do not wait (``wait`` must be 0). Go's
            ``WorkerOptions.ExitWhenIdle``, ``lakeshore worker --exit-when-idle``.
        max_jobs: return after this many jobs were claimed and settled (default None: no
            limit; an integer ≥ 1). The worker never claims beyond it, whatever the
            ``concurrency``: each claim takes one job of what is left of the budget, and a
            claim that comes back empty gives its share back, so nothing is claimed that
            it would not run and the rest stays queued for other workers. A job whose
            payload does not decode is failed by its claim and not run: it does not count
            (as ``once`` goes on to the next job), so the number returned is ``max_jobs``
            when that many jobs were there to run. With ``exit_when_idle``, whichever comes
            first. ``once`` is ``max_jobs=1`` with ``concurrency`` 1 (and its ``wait``).
            Go's ``WorkerOptions.MaxJobs``, ``lakeshore worker --max-jobs``.

    The worker registers in the plane's worker registry as the Go worker does (``PUT
    /v1/namespaces/{ns}/workers/{id}``: host, pid, queues, start, launch id, provider, jobs
    running or the time it became idle, its offers and warm host keys), refreshes that every third of the lease
    (``lease_ttl``, default 30 s: every 10 s) and removes it when it returns, so
    ``lakeshore workers`` lists it and a provider's supervisor counts it as live (a launch
    that never registers is stopped after the policy's ``register_timeout``). Over HTTP
    registering needs the ``consume`` permission on the namespace (a failure is logged and
    retried; the jobs still run).

    Raises:
        InvalidError: (a ``ValueError``) a bad argument, before anything is claimed:
            ``concurrency`` below 1; ``max_jobs`` not an integer ≥ 1 (None: no limit; 0 is
            refused rather than read as Go's "no limit"), or other than 1 with ``once``;
            ``exit_when_idle`` not a bool, or with a ``wait`` (its claims do not wait);
            nothing to run.
    """
    if concurrency < 1:
        raise errors.InvalidError(
            f"invalid concurrency {concurrency!r}: want an integer ≥ 1", field="concurrency", value=concurrency, rule="≥ 1"
        )
    _check_limits(once=once, wait=wait, exit_when_idle=exit_when_idle, max_jobs=max_jobs)
    stopped = _stop_test(stop)
    if isinstance(dispatch, (SyncQueue, Queue)):
        queues = [dispatch.name] if queues is None else queues
        dispatch = dispatch._core.dispatch
    handlers: dict[str, Callable[..., Any]] = {}
    kinds: dict[str, str] = {}
    if queues is None:
        with _registry_lock:
            handlers = dict(registry)
        if not handlers:
            raise errors.InvalidError(
                "run_worker has nothing to run: bind functions with @udf(queue=...) or pass queues=",
                field="queues",
                rule="at least one queue",
            )
    elif isinstance(queues, Mapping):
        handlers = dict(queues)
    else:
        for q in queues:
            if isinstance(q, UDF):
                handlers[q.queue_name] = q
            elif callable(q):
                name = getattr(q, "__name__", "fn")
                raise errors.InvalidError(
                    f"invalid queues entry {name!r}: a function that is not an @udf names no queue; pass "
                    f"queues={{'QUEUE': {name}}}, or bind it with @udf(queue='QUEUE')",
                    field="queues",
                    rule="queue names, @udf functions, or a mapping of queue name to callable",
                )
            else:
                with _registry_lock:
                    handlers[q] = registry.get(q) or _run_thunk
    d = dispatch
    for name, h in handlers.items():
        if isinstance(h, UDF):
            kinds[name] = h._queue_kind
            d = d or h._dispatch
            if lease_ttl is None:
                lease_ttl = h._lease_ttl
    d = d or default_dispatch()
    wid = worker_id or f"{socket.gethostname()}-{os.getpid()}-{new_ulid()[-8:]}"
    w = _Worker(
        d,
        handlers,
        concurrency=concurrency,
        once=once,
        wait=wait,
        exit_when_idle=exit_when_idle,
        max_jobs=0 if once else (max_jobs or 0),  # once stops after its one job by itself
        lease_ttl=lease_ttl,
        worker_id=wid,
        queue_kinds=kinds,
        launch_id=os.environ.get("LAKESHORE_LAUNCH_ID", "") if launch_id is None else launch_id,
        provider=os.environ.get("LAKESHORE_PROVIDER", "") if provider is None else provider,
        register_interval=(lease_ttl or 30.0) / 3,
        offers=_offers_or_env(offers),
        warm_host_keys=list(warm_host_keys or ()),
        trust_declarations=(
            os.environ.get("LAKESHORE_TRUST_DECLARATIONS", "").strip().lower() in ("1", "true", "yes")
            if trust_declarations is None
            else trust_declarations
        ),
    )
    # What the bodies start dies with this worker, even when it is SIGKILLed.
    _fabric.guard_children()
    # Host set-up before any claim: a hook that raises fails the start, not the jobs.
    lifecycle._set_phase("setup")
    lifecycle.run_host_setup()
    lifecycle._set_phase("ready")
    lifecycle._shutdown_done = False
    loop = asyncio.new_event_loop()
    signals = 0

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            # Set here too, not only by drain on the loop's next turn: a sync body that ends
            # on its own thread reads it for the claim sent with its settle, and the loop
            # may run that callback only after (this handler runs on the loop's thread,
            # between two of its steps).
            w.draining = True
            log.warning("lakeshore worker: %s: draining (running jobs finish); signal again to stop them", signal.Signals(signum).name)
            loop.call_soon_threadsafe(w.drain)
        else:
            loop.call_soon_threadsafe(stop_now, signal.Signals(signum).name)

    def stop_now(name: str) -> None:
        # Said once the running jobs are marked stopped: a body not begun yet never begins.
        count = w.stop_running(f"stopped by {name}")
        log.warning("lakeshore worker: %s again: stopping running jobs: %d stopped (they will be retried)", name, count)

    previous: dict[signal.Signals, Any] = {}
    wakeup: tuple[socket.socket, socket.socket, int] | None = None
    if handle_signals and threading.current_thread() is threading.main_thread():
        wakeup = _wake_loop_on_signals(loop)  # first: a failure here leaves no handler behind
        for s in (signal.SIGTERM, signal.SIGINT):
            previous[s] = signal.signal(s, on_signal)
    async def main() -> int:
        watcher = None
        if stopped is not None:

            async def watch() -> None:
                try:
                    while not stopped():
                        await asyncio.sleep(0.05)
                except Exception:
                    log.exception("lakeshore worker: the stop function raised: draining")
                w.drain()

            watcher = asyncio.ensure_future(watch())
        try:
            return await w.run()
        finally:
            if watcher is not None:
                watcher.cancel()

    try:
        return loop.run_until_complete(main())
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if wakeup is not None:
            _stop_waking_loop(loop, wakeup)
        loop.close()
        if not once:
            lifecycle._set_phase("draining")
            lifecycle.run_shutdown()
