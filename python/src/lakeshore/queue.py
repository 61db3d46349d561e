"""Queues: :class:`SyncQueue` (blocking), :class:`Queue` (asyncio) and their topics.

Both classes are thin facades over one implementation, :class:`QueueCore`, whose verbs are
coroutines run on the dispatch's client thread: a blocking call waits for the coroutine,
an awaited one never blocks the caller's event loop.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import dataclasses
import logging
import math
import numbers
import os
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from lakeshore import errors, wire
from lakeshore._ids import is_ulid, new_ulid
from lakeshore._transport import (
    LONG_POLL_MAX,
    NOT_SENT,
    Batcher,
    invocation_path,
    queue_path,
    reset_in_forked_child,
    utf8_size,
    wait_future,
)
from lakeshore.dispatch import Dispatch, default_dispatch, is_name

log = logging.getLogger("lakeshore.queue")

__all__ = [
    "KINDS",
    "STATES",
    "FROM_START",
    "MAX_VALUE_BYTES",
    "Envelope",
    "Job",
    "Frame",
    "Invocation",
    "InvocationPage",
    "Admission",
    "KeyStats",
    "Resources",
    "LaunchPolicy",
    "Provider",
    "QueueCore",
    "SyncQueue",
    "Queue",
    "Topic",
    "AsyncTopic",
]

KINDS = ("fifo", "filo", "priority", "boltzmann")
"""The orders a worker may claim in; the queue's ``kind`` picks one."""

STATES = ("queued", "running", "succeeded", "failed", "cancelled", "killed", "timeout")
"""The states of an invocation: two live, five terminal."""

FROM_START = -1
"""The cursor that reads a journal from its first frame."""

MAX_VALUE_BYTES = 16 << 20
"""The largest encoded payload, result or frame value the server takes (16 MiB)."""

MAX_ATTEMPTS_MAX = 10_000
"""The largest ``max_attempts`` the server takes (Go ``plane.MaxAttemptsMax``); 0 is its
default (3)."""

_MAX_ATTEMPTS_RULE = "use 1 to 10000 attempts, or 0 for the default (3)"  # plane.MaxAttemptsRule

StateName = Literal["queued", "running", "succeeded", "failed", "cancelled", "killed", "timeout"]


# ------------------------------------------------------------------------------ data types


# What submit's envelope= takes.
_ENVELOPE_RULE = "a lakeshore.Envelope, or a payload's wire bytes (wire.encode)"


@dataclasses.dataclass
class Envelope:
    """A payload with its submit options, for ``submit(envelope=…)``.

    Attributes:
        payload: any wire value (see :mod:`lakeshore.wire`), or a :class:`~lakeshore.wire.Thunk`.
        key: idempotency key, unique per queue: resubmitting it returns the existing id.
        priority: orders ``priority`` and ``boltzmann`` claims, higher first; finite.
        max_attempts: claims before the invocation fails for good (server default 3): an
            integer from 1 to MAX_ATTEMPTS_MAX (10,000), or 0 for the default (a float, or
            one out of that range, is InvalidError, not truncated nor sent).
        attempt_timeout: seconds one attempt may run.
        deadline: an aware datetime after which a still-queued invocation ends as timeout.
        metadata: free-form string headers, carried to the worker's :class:`Job`: str keys
            and str values (InvalidError otherwise, as from the server).
        delay: seconds before the invocation may be claimed (≥ 0).
        not_before: an aware datetime before which it may not be claimed.
        id: a client-made ULID (made for you when None), so a repeated submit is harmless.
        unique_for: seconds of the key's dedup window: within it a resubmit of the key
            returns the first id; after it a new invocation takes the key over (needs
            ``key``; default: the key holds until its invocation is trimmed). A positive
            window is at least 1e-09 (1 ns; a smaller one is InvalidError, not rounded to
            0, no window); as every duration here.
        debounce: seconds of the key's debounce window: the invocation is due this long
            after the submit, and a resubmit of the key while it still waits replaces its
            payload and metadata and restarts the wait, returning its id (the last wins;
            needs ``key``; not with ``unique_for``).
        concurrency_key: groups the invocation (a tenant, a user) for the queue's
            concurrency limits and fair share (:class:`Admission`'s ``concurrency_limit``,
            ``concurrency_limits``, ``key_weights``): 1–256 bytes of UTF-8 without NUL;
            ``""`` is no key, as None (as on every other surface).
        requires: what the invocation needs from its worker (placement, docs/semantics.md):
            a mapping of ``cpus_milli`` (CPUs × 1000), ``memory_bytes``, ``gpus``,
            ``gpu_type`` and ``labels`` (a str → str mapping); only a worker whose offers
            satisfy it takes it (``lakeshore worker --offers``, Go ``WorkerOptions.Offers``).
            Not with ``concurrency_key``. The server checks the values (InvalidError naming
            the field). Or a string in the CLI's ``--requires`` form,
            ``"gpus=1,gpu_type=a100,label.zone=east"`` (names ``cpus``, ``memory``,
            ``gpus``, ``gpu_type``, ``label.KEY``).
    """

    payload: Any = None
    key: str | None = None
    priority: float = 0.0
    max_attempts: int | None = None
    attempt_timeout: float | None = None
    deadline: datetime | None = None
    metadata: Mapping[str, str] | None = None
    delay: float | None = None
    not_before: datetime | None = None
    id: str | None = None
    unique_for: float | None = None
    debounce: float | None = None
    concurrency_key: str | None = None
    requires: Mapping[str, Any] | str | None = None


_REQUIREMENT_FIELDS = ("cpus_milli", "memory_bytes", "gpus", "gpu_type", "labels")


@dataclasses.dataclass
class Job:
    """A claimed invocation, as its worker sees it.

    Attributes:
        id: the invocation id.
        payload: the decoded payload.
        attempt: this attempt, 1-based.
        queue: the queue's name.
        namespace: the queue's namespace.
        key: the idempotency key, or None.
        concurrency_key: the concurrency key, or None.
        metadata: the submit's headers.
        priority: the submit's priority.
        max_attempts: the invocation's attempt limit.
        lease_expires_at: when the lease ends unless heartbeated.
        result: what :meth:`SyncQueue.working` acks the job with (set it in the body).
    """

    id: str
    payload: Any
    attempt: int
    queue: str
    namespace: str = "default"
    key: str | None = None
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    priority: float = 0.0
    max_attempts: int = 0
    concurrency_key: str | None = None
    lease_expires_at: datetime | None = None
    result: Any = None
    token: str = dataclasses.field(default="", repr=False)
    # The time.monotonic() instant the lease ends as this process reckons it: the claim's
    # answer, or the sending of the last heartbeat the server accepted, plus the lease TTL
    # (as Go's worker reckons it). Never lease_expires_at against this machine's wall clock,
    # which may be off from the server's. None: not reckoned (a Job made by hand).
    _held_until: float | None = dataclasses.field(default=None, repr=False, compare=False)


LEASE_TTL_DEFAULT = 30.0
"""The lease of a claim or heartbeat that names none: the server's default (Go's
plane.LeaseTTLDefault)."""


def _lease_seconds(ttl: float | None) -> float:
    """The lease a claim or heartbeat asking for ``ttl`` gets: None and 0 both ask for the
    server's default (HTTP's ``lease_ttl`` 0, Go's ``cmp.Or(ttl, LeaseTTLDefault)``)."""
    return ttl or LEASE_TTL_DEFAULT


@dataclasses.dataclass(frozen=True)
class Frame:
    """One VALUE frame of a journal.

    Attributes:
        seq: its position in the journal, 0-based: pass it as ``since`` to resume after it.
        value: the decoded value.
        attempt: the invocation attempt that posted it (0 on topics).
        time: when the plane appended it.
    """

    seq: int
    value: Any
    attempt: int = 0
    time: datetime | None = None


@dataclasses.dataclass(frozen=True)
class Invocation:
    """An invocation's row (payload and result stay encoded until asked for).

    Attributes:
        id, namespace, queue, key, state, priority, attempt, max_attempts, metadata,
        concurrency_key: as submitted and as it runs.
        requirement: what it waits for a worker to offer (``cpus_milli``, ``memory_bytes``,
            ``gpus``, ``gpu_type``, ``labels``), or None; shape: its shape key, or None.
        capable_workers: for a queued invocation with a requirement (as ``get`` reads it),
            how many live registered workers of its queue offer what it requires — 0: no
            capable worker, it waits —; None otherwise.
        error: ``{type, message, attempt}`` of a failed attempt, or None.
        created_at, started_at, finished_at, available_at: its times (None when unset).
    """

    id: str
    namespace: str
    queue: str
    state: str
    key: str | None = None
    priority: float = 0.0
    attempt: int = 0
    max_attempts: int = 0
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    error: Mapping[str, Any] | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    available_at: datetime | None = None
    raw_payload: bytes | None = dataclasses.field(default=None, repr=False)
    raw_result: bytes | None = dataclasses.field(default=None, repr=False)
    concurrency_key: str | None = None
    requirement: Mapping[str, Any] | None = None
    shape: str | None = None
    capable_workers: int | None = None

    @property
    def terminal(self) -> bool:
        """Whether the invocation has ended (succeeded, failed, cancelled, killed, timeout)."""
        return self.state not in ("queued", "running")

    @property
    def payload(self) -> Any:
        """The decoded payload (None in listings, which carry none)."""
        return None if self.raw_payload is None else wire.decode(self.raw_payload)

    @property
    def result(self) -> Any:
        """The decoded result (None until it succeeded)."""
        return None if self.raw_result is None else wire.decode(self.raw_result)

    def error_for_state(self) -> errors.InvocationError | None:
        """The error its terminal state means (None while live or when it succeeded)."""
        if self.state in ("queued", "running", "succeeded"):
            return None
        return errors.invocation_error(self.id, self.state, self.error)


@dataclasses.dataclass(frozen=True)
class InvocationPage:
    """One page of a listing: ``invocations`` and the cursor ``next`` ("" on the last page)."""

    invocations: list[Invocation]
    next: str


@dataclasses.dataclass(frozen=True)
class Admission:
    """A queue's admission limits (None: no limit of that kind).

    Attributes:
        max_depth: most live (queued + running) invocations.
        on_full: ``"reject"`` (QueueFullError at once) or ``"block"`` (the submit waits).
        rate_limit: submits per second, with ``burst``.
        burst: the token bucket's size.
        deadline_cutoff: seconds; refuses submits whose deadline is nearer than this.
        concurrency_limit: most running invocations per concurrency key (applied at
            claim; docs/semantics.md, "Concurrency keys and fair share").
        concurrency_limits: ``{key: limit}`` overrides of ``concurrency_limit``.
        key_weights: ``{key: weight}``, each from 0.000001 to 1,000,000: the keys' shares
            of claims (default 1, round-robin).
        key_rate_limit: starts per second of each concurrency key (a token bucket per key
            in the plane, of size ``key_burst``).
        key_burst: each key's bucket size (default: ``key_rate_limit`` rounded up).
        key_rate_limits: ``{key: starts per second}`` overrides of ``key_rate_limit``
            (0: no rate limit for that key; its bucket holds its rate rounded up unless
            ``key_bursts`` names it).
        key_bursts: ``{key: bucket size}`` (each ≥ 1) overrides of a key's bucket size.

    In the four per-key maps a value of None is no override: that key takes the queue's
    default (as ``lakeshore queue set --key-weight KEY=-``), and the stored block leaves it
    out.
    """

    max_depth: int | None = None
    on_full: str | None = None
    rate_limit: float | None = None
    burst: int | None = None
    deadline_cutoff: float | None = None
    concurrency_limit: int | None = None
    concurrency_limits: Mapping[str, int | None] | None = None
    key_weights: Mapping[str, float | None] | None = None
    key_rate_limit: float | None = None
    key_burst: int | None = None
    key_rate_limits: Mapping[str, float | None] | None = None
    key_bursts: Mapping[str, int | None] | None = None


@dataclasses.dataclass(frozen=True)
class KeyStats:
    """A concurrency key of a queue with jobs claimable or running now, or held back by
    a worker's "slow down" (``rate_wait`` > 0) (Go
    ``lakeshore.KeyStats``, HTTP ``GET …/stats``'s ``keys``, ``lakeshore queue get``).

    Attributes:
        key: the concurrency key.
        queued: its claimable jobs (a job waiting out a delay or a retry's backoff is not).
        running: its jobs holding a lease.
        limit: its concurrency limit (0: none).
        weight: its fair-share weight.
        rate_limit: its starts per second, or None without a token bucket.
        burst: its bucket size, or None without one.
        rate_wait: seconds from the read until its bucket has a token or a worker's "slow
            down" hold ends (0: it may start a job now).
    """

    key: str
    queued: int
    running: int
    limit: int
    weight: float
    rate_limit: float | None = None
    burst: int | None = None
    rate_wait: float = 0.0


def _key_stats(k: Mapping[str, Any]) -> KeyStats:
    rate_limit, burst = k.get("rate_limit"), k.get("burst")
    return KeyStats(
        key=str(k.get("key", "")),
        queued=int(k.get("queued") or 0),
        running=int(k.get("running") or 0),
        limit=int(k.get("limit") or 0),
        weight=float(k.get("weight") or 1.0),
        rate_limit=float(rate_limit) if rate_limit is not None else None,
        burst=int(burst) if burst is not None else None,
        rate_wait=float(k.get("rate_wait") or 0.0),
    )


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one launch of a provider asks for (zero: nothing). The SLURM and exec providers
    honour them; the local provider ignores them.

    Attributes:
        cpus: CPUs per worker.
        gpus: GPUs per worker.
        memory_mb: memory per worker, in MiB.
        time_limit: seconds a worker may run (SLURM's ``--time``).
        partition: the SLURM partition (or the exec program's equivalent).
    """

    cpus: int = 0
    gpus: int = 0
    memory_mb: int = 0
    time_limit: float = 0.0
    partition: str = ""


@dataclasses.dataclass(frozen=True)
class LaunchPolicy:
    """How a provider's supervisor follows a queue's backlog with workers
    (``docs/providers.md``, "The launch policy"). Zero values take the plane's defaults.

    Attributes:
        command: the worker's argv, e.g. ``["python", "worker.py"]`` (a script calling
            :func:`~lakeshore.run_worker`, which registers with the launch id); required.
        min_workers: kept running even with an empty queue (default 0: scale to zero).
        max_workers: workers running or launching, at most (default 1).
        jobs_per_worker: the target backlog per worker (default 1).
        scale_up_step: launches per tick, at most (default 0: no cap).
        cooldown: seconds between scale-downs (default 5).
        idle_timeout: seconds without a job after which a worker is stopped (default 60).
        register_timeout: seconds a launch may take to register (default 120).
        env: added to the worker's environment.
        resources: asked of the provider per launch.
    """

    command: Sequence[str]
    min_workers: int = 0
    max_workers: int = 0
    jobs_per_worker: int = 0
    scale_up_step: int = 0
    cooldown: float = 0.0
    idle_timeout: float = 0.0
    register_timeout: float = 0.0
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    resources: Resources = dataclasses.field(default_factory=Resources)


@dataclasses.dataclass(frozen=True)
class Provider:
    """The provider attached to a queue and its launch policy.

    Attributes:
        name: ``"local"``, ``"slurm"``, ``"exec:PROGRAM"``, ``"ssh:NAME"`` or
            ``"kubernetes:NAME"`` (NAME declared in the supervisor's ``lakeshore.yaml``).
        policy: the launch policy, with the plane's defaults filled in.
    """

    name: str
    policy: LaunchPolicy


def _provider_body(name: str, policy: LaunchPolicy) -> dict[str, Any]:
    if not isinstance(policy, LaunchPolicy):
        raise TypeError(f"policy is a {type(policy).__name__}; pass a lakeshore.LaunchPolicy (or its fields as keywords)")
    if isinstance(policy.command, (str, bytes)):
        raise TypeError("policy.command is a string; pass the argv as a list, e.g. ['python', 'worker.py']")
    p: dict[str, Any] = {"command": [str(c) for c in policy.command]}
    for f in ("min_workers", "max_workers", "jobs_per_worker", "scale_up_step"):
        if getattr(policy, f):
            p[f] = int(getattr(policy, f))
    for f in ("cooldown", "idle_timeout", "register_timeout"):
        if getattr(policy, f):
            p[f] = float(getattr(policy, f))
    if policy.env:
        p["env"] = {str(k): str(v) for k, v in policy.env.items()}
    r = {k: v for k, v in dataclasses.asdict(policy.resources).items() if v}
    if r:
        p["resources"] = r
    return {"name": name, "policy": p}


def _provider(a: Mapping[str, Any] | None) -> Provider | None:
    if not a:
        return None
    p = a.get("policy") or {}
    r = p.get("resources") or {}
    return Provider(
        name=str(a.get("name") or ""),
        policy=LaunchPolicy(
            command=list(p.get("command") or []),
            min_workers=int(p.get("min_workers") or 0),
            max_workers=int(p.get("max_workers") or 0),
            jobs_per_worker=int(p.get("jobs_per_worker") or 0),
            scale_up_step=int(p.get("scale_up_step") or 0),
            cooldown=float(p.get("cooldown") or 0.0),
            idle_timeout=float(p.get("idle_timeout") or 0.0),
            register_timeout=float(p.get("register_timeout") or 0.0),
            env=dict(p.get("env") or {}),
            resources=Resources(
                cpus=int(r.get("cpus") or 0),
                gpus=int(r.get("gpus") or 0),
                memory_mb=int(r.get("memory_mb") or 0),
                time_limit=float(r.get("time_limit") or 0.0),
                partition=str(r.get("partition") or ""),
            ),
        ),
    )


def _policy_of(policy: LaunchPolicy | None, fields: Mapping[str, Any]) -> LaunchPolicy:
    if policy is not None and fields:
        raise TypeError("set_provider takes a LaunchPolicy or its fields as keywords, not both")
    if policy is not None:
        return policy
    try:
        return LaunchPolicy(**fields)
    except TypeError as e:
        raise TypeError(f"set_provider: {e} (the fields of lakeshore.LaunchPolicy)") from None


def _invocation(d: Mapping[str, Any]) -> Invocation:
    def t(k: str) -> datetime | None:
        v = d.get(k)
        return v if isinstance(v, datetime) else None

    payload = d.get("payload")
    result = d.get("result")
    return Invocation(
        id=str(d.get("id", "")),
        namespace=str(d.get("namespace", "")),
        queue=str(d.get("queue", "")),
        state=str(d.get("state", "")),
        key=d.get("key") or None,
        concurrency_key=d.get("concurrency_key") or None,
        requirement=dict(d.get("requirement") or {}) or None,
        shape=d.get("shape") or None,
        capable_workers=int(d["capable_workers"]) if d.get("capable_workers") is not None else None,
        priority=float(d.get("priority") or 0.0),
        attempt=int(d.get("attempt") or 0),
        max_attempts=int(d.get("max_attempts") or 0),
        metadata=dict(d.get("metadata") or {}),
        error=d.get("error") or None,
        created_at=t("created_at"),
        started_at=t("started_at"),
        finished_at=t("finished_at"),
        available_at=t("available_at"),
        raw_payload=bytes(payload) if isinstance(payload, (bytes, bytearray)) else None,
        raw_result=bytes(result) if isinstance(result, (bytes, bytearray)) else None,
    )


# ------------------------------------------------------------------------------ validation


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise errors.InvalidError(
            f"unknown queue kind {kind!r}; use fifo|filo|priority|boltzmann",
            field="kind",
            value=kind,
            rule="fifo|filo|priority|boltzmann",
        )


def _check_name(what: str, name: Any) -> None:
    if not is_name(name, not_first=".-"):
        raise errors.InvalidError(
            f"invalid {what} {name!r}: 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'",
            field=what,
            value=name,
            rule="1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'",
        )


def _check_id(id: Any) -> str:
    if not is_ulid(id):
        raise errors.InvalidError(
            f"invalid invocation id {id!r}: want the ULID (26 characters) that submit returned",
            field="id",
            value=id,
            rule="a ULID",
        )
    assert isinstance(id, str)
    return id


# The longest duration a field in seconds may have, as the server's: what Go's
# time.Duration holds (about 292 years).
_MAX_SECONDS = float((2**63 - 1) // 10**9)


# The longest delay, dedup or debounce window the plane takes (Go plane.DelayMax, 366
# days): those fields are refused beyond it, by this bound, as the server refuses them.
_MAX_DELAY_SECONDS = 366 * 24 * 3600.0


# The shortest positive duration (1 ns, what Go's time.Duration keeps): a positive number
# of seconds below it would round to 0 at the server, which means none (no dedup or
# debounce window, no lease, the default attempt timeout), so it is refused, not dropped,
# with the server's rule (server belowNanosecondRule). 1e-9 itself is taken.
_MIN_SECONDS = 1e-9
_MIN_SECONDS_RULE = (
    "a positive duration must be at least 1e-09 seconds (1 ns), the shortest one kept; "
    "a shorter one would round to 0, which means none: use 0 for none, or at least 1e-09"
)


def _check_seconds(
    what: str,
    v: float | None,
    *,
    allow_none: bool = True,
    maximum: float = _MAX_SECONDS,
    above_zero: bool = False,
    wait: bool = False,
) -> float | None:
    """``v`` as float seconds, or InvalidError naming ``what``: not a real number (a bool
    is not one), negative (or 0 with ``above_zero``), positive but under _MIN_SECONDS
    (1 ns: it would round to 0, none; not refused for a ``wait``, how long a call may
    wait, where 0 means what it would: do not wait, and where the time left to a
    caller's deadline can come out that small), not finite or beyond ``maximum``
    (default _MAX_SECONDS, what a duration holds; an int too large for a float included).
    The message gives the bound: "(366 days)" for _MAX_DELAY_SECONDS, "(about 292 years)"
    for _MAX_SECONDS. The one check of the SDK's durations (the data queue's too)."""
    if v is None:
        if allow_none:
            return None
    elif isinstance(v, numbers.Real) and not isinstance(v, bool) and (0 < v if above_zero else 0 <= v) and v <= maximum:
        # Comparing first keeps a huge int away from float() (OverflowError) and NaN out.
        if 0 < v < _MIN_SECONDS and not wait:
            raise errors.InvalidError(
                f"invalid {what} {v!r}: {_MIN_SECONDS_RULE}", field=what, value=v, rule=_MIN_SECONDS_RULE
            )
        return float(v)
    huge = isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30
    shown = f"an integer of {len(str(abs(int(v or 0))))} digits" if huge else repr(v)
    bound = "366 days" if maximum == _MAX_DELAY_SECONDS else "about 292 years" if maximum == _MAX_SECONDS else f"{maximum:g} s"
    lowest = "above 0" if above_zero else "from 0"
    raise errors.InvalidError(
        f"invalid {what} {shown}: want seconds {lowest} to {int(maximum)} ({bound})" + (" or None" if allow_none else ""),
        field=what,
        value=shown if huge else v,
        rule=f"seconds {lowest} to {int(maximum)}",
    )


def _check_concurrency_key(ck: object) -> str:
    """``ck`` as a concurrency key (1–256 bytes of UTF-8 without NUL; the caller leaves out
    None and ``""``, which mean none), else InvalidError naming ``concurrency_key``, as the
    server's: a submit's and a schedule's key (set_schedule) are checked here, once, before
    a key that is not UTF-8 (a lone surrogate) fails to encode."""
    if not isinstance(ck, str) or (size := utf8_size(ck)) is None or size > 256 or "\x00" in ck:
        shown = repr(ck)
        shown = shown if len(shown) <= 100 else shown[:99] + "…"  # as the server's
        raise errors.InvalidError(
            f"invalid concurrency_key {shown}: use 1–256 bytes of UTF-8 without NUL",
            field="concurrency_key",
            value=ck,
            rule="1–256 bytes of UTF-8 without NUL",
        )
    return ck


def _check_max_attempts(v: Any) -> int:
    """``v`` as an int from 0 to MAX_ATTEMPTS_MAX, or InvalidError naming max_attempts with
    the server's rule: an integer (numpy's too), never a float or a string silently
    truncated (max_attempts=1.5 was sent as 1), nor one the server refuses."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise errors.InvalidError(
            f"invalid max_attempts {v!r}: want an integer: {_MAX_ATTEMPTS_RULE}",
            field="max_attempts",
            value=v,
            rule=_MAX_ATTEMPTS_RULE,
        )
    n = int(v)
    if not 0 <= n <= MAX_ATTEMPTS_MAX:
        shown: Any = n if abs(n) < 10**30 else f"an integer of {len(str(abs(n)))} digits"
        raise errors.InvalidError(
            f"invalid max_attempts {shown}: {_MAX_ATTEMPTS_RULE}",
            field="max_attempts",
            value=shown,
            rule=_MAX_ATTEMPTS_RULE,
        )
    return n


def _check_since(since: int) -> int:
    if not isinstance(since, int) or isinstance(since, bool) or since < FROM_START:
        raise errors.InvalidError(
            f"invalid since {since!r}: use a frame seq ≥ 0, or -1 for the whole journal",
            field="since",
            value=since,
            rule="a frame seq ≥ 0, or -1",
        )
    return since


def _check_time(what: str, v: datetime | None) -> datetime | None:
    if v is None:
        return None
    if not isinstance(v, datetime) or v.tzinfo is None or v.utcoffset() is None:
        raise errors.InvalidError(
            f"invalid {what} {v!r}: want an aware datetime (e.g. with tzinfo=timezone.utc)",
            field=what,
            value=str(v),
            rule="an aware datetime",
        )
    return v.astimezone(timezone.utc)


def encode_value(what: str, value: Any) -> bytes:
    """Encode a payload, result or frame value, naming it in errors.

    Raises:
        wire.EncodeError: the value has no wire form (a TypeError: a programming error).
        errors.InvalidError: the encoding is larger than 16 MiB."""
    try:
        data = wire.encode(value)
    except wire.EncodeError as e:
        raise wire.EncodeError(what + e.path[1:], e.type_name, e.reason) from None
    if len(data) > MAX_VALUE_BYTES:
        raise errors.InvalidError(
            f"{what} is {len(data)} bytes encoded; at most {MAX_VALUE_BYTES} (16 MiB) ride the wire: "
            "store large data in files and send their keys",
            field=what,
            value=len(data),
            rule="at most 16 MiB encoded",
        )
    return data


class _UndecodablePayloadError(errors.InvalidError):
    """A claimed job's payload that does not decode here (an :class:`~lakeshore.errors.InvalidError`
    with code ``invalid``): raised by this client, not a refusal of the server, so a
    worker fails that one job and claims on, whereas an ``invalid`` answer of the server to
    its claim refuses every claim alike and stops the worker (docs/python.md)."""


def decode_value(what: str, data: Any, error: type[errors.InvalidError] = errors.InvalidError) -> Any:
    """Decode a value from an answer; a value that does not decode is an InvalidError
    (of class ``error``)."""
    if data is None:
        return None
    if not isinstance(data, (bytes, bytearray)):
        raise errors.DispatchError(f"{what}: the server sent {type(data).__name__}, not wire bytes", code="internal")
    try:
        return wire.decode(data)
    except wire.DecodeError as e:
        if "unknown ext type" in e.reason:
            fix = (
                "it holds an extension type this lakeshore package does not know: it was written by a newer "
                "Lakeshore; upgrade this package (pip install -U lakeshore-queue) to the server's version"
            )
        elif "cannot be decoded here" in e.reason:
            fix = (
                "it is a valid wire value that this Python process cannot hold (numpy's size limits or "
                "memory): send a shape numpy can make, or read it with the Go SDK"
            )
        else:
            fix = (
                "the stored bytes are not one valid wire value (truncated or corrupt): the writer sent bytes "
                "of its own instead of a value encoded by a Lakeshore SDK (docs/wire.md)"
            )
        raise error(f"{what} does not decode ({e}); {fix}", field=what, rule="a valid wire value (docs/wire.md)") from e


def _error_info(error: BaseException | str | None, attempt: int) -> dict[str, Any]:
    if error is None:
        return {"type": "error", "message": "nack", "attempt": attempt}
    if isinstance(error, BaseException):
        text = str(error) or type(error).__name__
        if error.__traceback__ is not None:
            text += "\n\n" + "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
        return {"type": type(error).__name__, "message": text, "attempt": attempt}
    return {"type": "error", "message": str(error), "attempt": attempt}


# ------------------------------------------------------------------------------ the core


@dataclasses.dataclass(frozen=True)
class SettleClaim:
    """One worker slot's turn for :meth:`QueueCore.settle_and_claim_future`: the settle of
    its finished job (a settle body, or None) and whether it wants a next job."""

    settle: dict[str, Any] | None
    deadline: float | None
    claim: bool
    lease_ttl: float | None
    worker: str | None



def _settle_claim_answers(
    items: list[SettleClaim], ans: Mapping[str, Any]
) -> list[tuple[BaseException | None, Mapping[str, Any] | None] | BaseException]:
    """Each turn's answer in a ``POST …/settle-and-claim`` answer ``ans`` to items: its
    settle's error (or None) and the fields of the job it claimed (or None)."""
    results = ans.get("results") or []
    jobs = list(ans.get("jobs") or [])
    out: list[tuple[BaseException | None, Mapping[str, Any] | None] | BaseException] = []
    k = 0
    for it in items:
        err = None
        if it.settle is not None:
            r = results[k] if k < len(results) else None
            k += 1
            e = r.get("error") if isinstance(r, Mapping) else None
            err = errors.error_from_body(e) if e else None
        job = jobs.pop(0) if it.claim and jobs else None
        out.append((err, job))
    return out


def _result_of(id: str, inv: Invocation) -> Any:
    """The decoded result of ended invocation ``inv``, or the error its terminal state
    means (InvocationFailedError, …)."""
    err = inv.error_for_state()
    if err is not None:
        raise err
    return decode_value(f"result of {id}", inv.raw_result)


_COMBINED_MAX = 1000
"""Submits one combined blocking request carries at most (as the submit batcher's)."""


class _CombinedSubmit:
    """One blocking submit of :meth:`QueueCore.submit_blocking`: its body, then its answer
    (an id, the server's error, or ``own_way``: to be sent :meth:`QueueCore.submit_future`'s
    way), or the batch its caller is to send (``lead``) and how many callers of the batch
    just answered may join it (``expect``)."""

    __slots__ = ("body", "wake", "id", "error", "own_way", "lead", "expect")

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.wake = threading.Lock()  # held until answered or handed a batch
        self.wake.acquire()
        self.id: str | None = None
        self.error: errors.DispatchError | None = None
        self.own_way = False
        self.lead: list[_CombinedSubmit] | None = None
        self.expect = 0


_GATHER_SECONDS = 0.0005
"""How long after a combined request's answer the next one waits for the callers it answered
to submit again (QueueCore._gather): eight threads submitting in a row are all back in
0.2–0.35 ms (the median gap between requests on the shared 2-core machine), and each
request they join spares the daemon a request and a commit (docs/benchmarks-python.md,
"Eight threads: the next request waits for the callers just answered")."""


_submitting = threading.local()
"""``cores`` is the set of the queues (:class:`QueueCore` objects, by ``id``) whose
:meth:`QueueCore.submit_blocking` a thread is inside: a submit from a signal handler (or a
finalizer) is refused when it interrupted a submit of the same queue object, whose
combining lock and submit batcher the interrupted frame may hold; a submit to another
queue shares nothing with it that a frame holds (the blocking connections are kept without
a lock, the client loop's start under a reentrant one) and goes as usual."""


class _Combining:
    """The blocking submits of one queue: whether a request is in flight or being gathered
    (``sending``), the submits waiting for the next, and, between a batch's answer and the
    next request, how many of the callers just answered the next request waits for."""

    def __init__(self) -> None:
        self._after_fork()
        reset_in_forked_child(self)

    def _after_fork(self) -> None:
        # Start afresh (in a forked child: the parent's requests are not ours to answer).
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)  # notified as a submit joins waiting
        self.sending = False
        self.waiting: list[_CombinedSubmit] = []
        # The callers of the batch just answered when none waited: the next submit leads the
        # next request and waits for the others of them (sending stays set meanwhile).
        self.vacant = 0
        self.answered = 0.0  # time.monotonic() of the last answer
        # While a lead gathers (_gather): the number of waiting submits it waits for, else 0.
        self.gathering = 0


class QueueCore:
    """The verbs of a queue, as coroutines run on the dispatch's client loop.

    :class:`SyncQueue` and :class:`Queue` call these; use them directly only to build
    another facade."""

    def __init__(self, name: str, dispatch: Dispatch, kind: str, temperature: float, lease_ttl: float | None) -> None:
        _check_name("queue name", name)
        _check_kind(kind)
        if not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature <= 0:
            raise errors.InvalidError(
                f"invalid temperature {temperature!r}: want a finite number > 0",
                field="temperature",
                value=temperature,
                rule="a finite number > 0",
            )
        self.name = name
        self.dispatch = dispatch
        self.kind = kind
        self.temperature = float(temperature)
        self.lease_ttl = _check_seconds("lease_ttl", lease_ttl)
        self.path = queue_path(dispatch.namespace, name)
        self.held: dict[str, Job] = {}  # jobs claimed here and not yet settled, by id
        # Further queues of the namespace this core's claims take from (one long-poll
        # over all of them, fair across them: the claim's ``queues``); a job claimed from
        # one of them is held here too, and names its queue.
        self.also: list[str] = []
        # What this core's claims offer (placement, docs/semantics.md): the claim's
        # ``offers``; None takes only jobs without a requirement. Set by run_worker.
        self.offers: dict[str, Any] | None = None
        # The host keys this core's claims are warm for (the claim's ``warm_host_keys``),
        # read at each claim; None: no preference. Set by run_worker.
        self.warm: Callable[[], list[str]] | None = None
        # Submits made at once (from many threads or tasks) go as one batched request.
        self._submits: Batcher[dict[str, Any], str] = Batcher(dispatch._portal, self._send_submits)
        # Blocking submits (submit_blocking) combine on their callers' threads: one request
        # in flight, the submits made meanwhile waiting to go together in the next.
        self._combined = _Combining()
        # Settles made at once go as one POST /v1/settle; claims made at once (a worker's
        # idle slots) as one claim of as many jobs.
        self._settles: Batcher[tuple[dict[str, Any], float | None], None] = Batcher(
            dispatch._portal, self._send_settles
        )
        # Long-polling claims coalesce behind the one in flight; claims that do not wait are
        # never held behind a long-poll.
        self._claims: Batcher[tuple[float, float | None, str | None], Mapping[str, Any] | None] = Batcher(
            dispatch._portal, self._send_claims, in_flight=1, orphan=self._release, drain=True
        )
        self._claims_now: Batcher[tuple[float, float | None, str | None], Mapping[str, Any] | None] = Batcher(
            dispatch._portal, self._send_claims, in_flight=4, orphan=self._release, drain=True
        )

        # A worker's finished jobs settle in the request that claims its next ones
        # (POST …/settle-and-claim, no wait): one request per turn of a worker's slots.
        self._settle_claims: Batcher[SettleClaim, tuple[BaseException | None, Mapping[str, Any] | None]] = Batcher(
            dispatch._portal, self._send_settle_claims, in_flight=1, orphan=self._release_answer, drain=True
        )

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self.dispatch._transport.call(method, path, **kw)

    # -- producer ------------------------------------------------------------------------

    def submit_body(
        self,
        payload: Any,
        envelope: Envelope | bytes | None,
        key: str | None,
        priority: float,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The body of one submit (encodes the payload; raises on bad arguments)."""
        if envelope is None and key is None and not priority and not options:
            # A bare payload (the common case): the body the general path below makes.
            return {"id": new_ulid(), "payload": encode_value("payload", payload)}
        if envelope is not None and payload is not None:
            raise errors.InvalidError(
                "submit takes a payload or an envelope, not both", field="envelope", rule="payload or envelope"
            )
        if isinstance(envelope, (bytes, bytearray, memoryview)):
            # dreamlake-lakeshore's submit(envelope=…) takes a payload already packed by its
            # wire codec (the same bytes ours reads): the job's payload is what they decode to.
            try:
                envelope = Envelope(payload=wire.decode(bytes(envelope)))
            except wire.DecodeError as e:
                raise errors.InvalidError(
                    f"invalid envelope: bytes that are not a wire value ({e})", field="envelope", rule=_ENVELOPE_RULE
                ) from None
        elif envelope is not None and not isinstance(envelope, Envelope):
            raise errors.InvalidError(
                f"invalid envelope {type(envelope).__name__}: want {_ENVELOPE_RULE}", field="envelope", rule=_ENVELOPE_RULE
            )
        env = dataclasses.replace(envelope) if envelope is not None else Envelope(payload=payload)
        if key is not None:
            env.key = key
        if priority:
            env.priority = priority
        for k, v in options.items():
            if not hasattr(env, k) or k == "payload":
                raise TypeError(f"submit() got an unexpected keyword argument {k!r}")
            setattr(env, k, v)
        body: dict[str, Any] = {"id": env.id or new_ulid(), "payload": encode_value("payload", env.payload)}
        if env.key is not None:
            if not isinstance(env.key, str) or not env.key or (size := utf8_size(env.key)) is None or size > 512 or "\x00" in env.key:
                raise errors.InvalidError(
                    f"invalid key {env.key!r}: 1–512 bytes of UTF-8 without NUL",
                    field="key",
                    value=env.key,
                    rule="1–512 bytes of UTF-8 without NUL",
                )
            body["key"] = env.key
        if env.priority:
            checked: float | None = None
            if isinstance(env.priority, (int, float)) and not isinstance(env.priority, bool):
                try:
                    checked = float(env.priority)  # an int past float's range overflows
                except OverflowError:
                    pass
            if checked is None or not math.isfinite(checked):
                shown = repr(env.priority)
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                raise errors.InvalidError(
                    f"invalid priority {shown}: want a finite number",
                    field="priority",
                    value=shown,
                    rule="a finite number",
                )
            body["priority"] = checked
        if env.max_attempts is not None:
            body["max_attempts"] = _check_max_attempts(env.max_attempts)
        if env.attempt_timeout is not None:
            body["attempt_timeout"] = _check_seconds("attempt_timeout", env.attempt_timeout)
        if env.deadline is not None:
            body["deadline"] = _check_time("deadline", env.deadline)
        if env.metadata:
            # str keys and values, as the server takes them: None was sent as "None", 1 as "1".
            for k, v in env.metadata.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise errors.InvalidError(
                        f"invalid metadata[{k!r}] {v!r}: want str keys and str values (convert a number yourself)",
                        field=f"metadata[{k!r}]",
                        value=v,
                        rule="str keys and str values",
                    )
            body["metadata"] = dict(env.metadata)
        if env.delay is not None:
            body["delay"] = _check_seconds("delay", env.delay, maximum=_MAX_DELAY_SECONDS)
        if env.not_before is not None:
            body["not_before"] = _check_time("not_before", env.not_before)
        if env.unique_for is not None:
            body["unique_for"] = _check_seconds("unique_for", env.unique_for, maximum=_MAX_DELAY_SECONDS)
        if env.debounce is not None:
            body["debounce"] = _check_seconds("debounce", env.debounce, maximum=_MAX_DELAY_SECONDS)
        # "" is no concurrency key, as None (and as Go's zero value, HTTP's "" and the CLI's
        # --concurrency-key ""): docs/semantics.md, "Concurrency keys and fair share".
        if env.concurrency_key is not None and env.concurrency_key != "":
            body["concurrency_key"] = _check_concurrency_key(env.concurrency_key)
        if env.requires:
            body["requirement"] = _placement("requires", env.requires)
        return body

    def submit_future(self, body: dict[str, Any]) -> concurrent.futures.Future[str]:
        """Submit one invocation (a body from :meth:`submit_body`): a future of its id.

        Callable from any thread. Submits made while others are being sent are coalesced
        into one batched request (``…/invocations/batch``, all-or-nothing); when the server
        refuses a batch of several (one bad item, a full queue), each of its submits is
        sent again alone, so every caller gets its own answer. The ids are made here, so a
        repeated submit never enqueues twice."""
        return self._submits.put(body)

    def submit_blocking(self, body: dict[str, Any]) -> str:
        """Submit one invocation (a body from :meth:`submit_body`) from a thread that may
        block, and return its id.

        Blocking submits are sent on their callers' threads, without the two thread hops
        through the client's loop, one request of this queue at a time: a submit made while
        none is in flight goes at once, alone (``POST …/invocations``); the submits other
        threads make while it is in flight wait and go together in the next request
        (``…/invocations/batch``, all-or-nothing), sent by the first of them as soon as the
        one in flight is answered (:meth:`~lakeshore._transport.HttpTransport.call_blocking`).
        A request the blocking call could not finish (a failed connection, an answer to
        retry) and a batch the server refused as a whole send each of their submits
        :meth:`submit_future`'s way with the same id, so a submit never enqueues twice and
        every caller gets its own answer.

        Raises:
            RuntimeError: called on the client loop's own thread, or on a thread whose own
                blocking submit to this queue object it interrupted (a signal handler, or
                a finalizer, run in the middle of it): that submit may hold this queue's
                combining lock or its batcher's, or be the request in flight this one
                would wait behind, and it goes on only once the handler returns. Raised at
                once, sending nothing. A submit to another queue object from such a
                handler is sent as usual."""
        portal = self.dispatch._portal
        if portal.in_portal():
            return wait_future(portal, lambda: self.submit_future(body))  # raises RuntimeError, sends nothing
        cores: set[int] | None = getattr(_submitting, "cores", None)
        if cores is None:
            cores = _submitting.cores = set()
        me = id(self)
        if me in cores:
            raise RuntimeError(
                f"submit to queue {self.name!r} from a signal handler (or a finalizer) that interrupted a "
                "submit to this queue on the same thread: it would wait for that submit, which goes on only once the "
                "handler returns; set a flag in the handler and submit after it returns, or have another "
                "thread submit without waiting for it in the handler"
            )
        try:
            cores.add(me)  # inside the try: an interrupt right after it clears it
            return self._submit_combined(body)
        finally:
            cores.discard(me)

    def _submit_combined(self, body: dict[str, Any]) -> str:
        """:meth:`submit_blocking` on a thread of its caller's (not in a submit already)."""
        portal = self.dispatch._portal
        combined = self._combined
        me = _CombinedSubmit(body)
        with combined.lock:
            if not combined.sending:
                combined.sending = True
                batch = [me]
            elif combined.vacant:
                me.expect, combined.vacant = combined.vacant - 1, 0
                batch = [me]
            else:
                combined.waiting.append(me)
                if combined.gathering and len(combined.waiting) >= combined.gathering:
                    combined.arrived.notify()  # once: the lead wakes when all it waits for came
                batch = None
        if batch is None:
            try:
                me.wake.acquire()  # released once answered, or handed the next batch to send
            except BaseException:
                # An interrupt (KeyboardInterrupt on the main thread): a submit not yet
                # taken into a batch is dropped, unsent; one taken into a batch in flight
                # is answered there (nobody reads it); one handed the next batch (lead,
                # set under the lock) sends it for its other callers before the interrupt
                # goes on. Neither waits on its wake again: the interrupt may have come
                # just after the acquire took it (a second acquire would never return), or
                # a second interrupt during that wait would leave the handed batch unsent,
                # and with it every later blocking submit of the queue waiting forever.
                with combined.lock:
                    if me in combined.waiting:
                        combined.waiting.remove(me)
                        raise
                    handed = me.lead
                if handed is not None:
                    self._send_combined(handed)
                raise
            batch = me.lead
        if batch is not None:
            self._send_combined(batch, me.expect)
        if me.own_way:
            return wait_future(portal, lambda: self.submit_future(body))
        if me.error is not None:
            raise me.error
        assert me.id is not None
        return me.id

    def _send_combined(self, batch: list[_CombinedSubmit], expect: int = 0) -> None:
        """Send batch (the caller's own submit first) as one request on this thread, hand
        the submits that waited meanwhile to the first of them to send next, and answer
        batch's other callers.

        expect: how many callers of the batch answered last may submit again and join this
        one; it waits for them at most _GATHER_SECONDS."""
        combined = self._combined
        ids: list[str] | None = None
        error: errors.DispatchError | None = None
        try:
            if expect:
                self._gather(batch, expect)
            if len(batch) == 1:
                ans = self.dispatch._transport.call_blocking("POST", self.path + "/invocations", batch[0].body)
                if ans is not NOT_SENT:
                    ids = [str(ans["id"])]
            else:
                keys = [c.body["key"] for c in batch if "key" in c.body]
                if len(keys) == len(set(keys)):  # else each goes alone, as _send_submits sends them
                    ans = self.dispatch._transport.call_blocking(
                        "POST", self.path + "/invocations/batch", {"invocations": [c.body for c in batch]}
                    )
                    if ans is not NOT_SENT:
                        ids = [str(r["id"]) for r in ans["results"]]
        except errors.DispatchError as e:
            error = e
        finally:
            # Whatever happened above (an interrupt of this thread included), the next
            # batch is handed over and every caller of this one answered: a submit without
            # an id or an error of its own goes submit_future's way.
            with combined.lock:
                following = combined.waiting[:_COMBINED_MAX]
                del combined.waiting[:_COMBINED_MAX]
                combined.answered = time.monotonic()
                if following:
                    following[0].lead, following[0].expect = following, len(batch)
                elif len(batch) > 1:
                    combined.vacant = len(batch)
                else:
                    combined.sending = False
            if following:
                following[0].wake.release()
            for i, c in enumerate(batch):
                if ids is not None and len(ids) == len(batch):
                    c.id = ids[i]
                elif error is not None and len(batch) == 1:
                    c.error = error  # the server's answer to this submit alone
                else:
                    c.own_way = True
                if i:
                    c.wake.release()

    def _gather(self, batch: list[_CombinedSubmit], expect: int) -> None:
        """Add to batch the submits that join the waiting list until expect of them came
        or _GATHER_SECONDS passed since the last answer (a caller that leads long after it
        does not wait)."""
        combined = self._combined
        with combined.lock:
            deadline = combined.answered + _GATHER_SECONDS
            combined.gathering = expect
            try:
                while len(combined.waiting) < expect:
                    left = deadline - time.monotonic()
                    if left <= 0 or not combined.arrived.wait(left):
                        break
            finally:
                combined.gathering = 0
            room = _COMBINED_MAX - len(batch)
            batch.extend(combined.waiting[:room])
            del combined.waiting[:room]

    async def submit(self, body: dict[str, Any]) -> str:
        """Submit one invocation (a body from :meth:`submit_body`) and return its id."""
        return await asyncio.wrap_future(self.submit_future(body))

    async def _submit_one(self, body: Mapping[str, Any]) -> str:
        ans = await self._call("POST", self.path + "/invocations", body=body, retry="safe", hot=True)
        return str(ans["id"])

    async def _send_submits(self, bodies: list[dict[str, Any]]) -> list[str | BaseException]:
        if len(bodies) == 1:
            return [await self._submit_one(bodies[0])]
        keys = [b["key"] for b in bodies if "key" in b]
        if len(keys) == len(set(keys)):
            try:
                return list(await self.submit_many(bodies))
            except errors.UnavailableError:
                raise
            except errors.DispatchError:
                pass  # refused as a whole: each alone below gets its own answer
        answers = await asyncio.gather(*(self._submit_one(b) for b in bodies), return_exceptions=True)
        return list(answers)

    async def submit_many(self, bodies: list[dict[str, Any]]) -> list[str]:
        """Submit a batch in one request; return the ids in order."""
        ans = await self._call(
            "POST", self.path + "/invocations/batch", body={"invocations": bodies}, retry="safe", hot=True
        )
        return [str(r["id"]) for r in ans["results"]]

    async def get(self, id: str) -> Invocation:
        """The invocation's row. Raises NotFoundError."""
        ans = await self._call("GET", invocation_path(_check_id(id)), retry="safe")
        return _invocation(ans)

    async def wait(self, id: str, timeout: float | None) -> Invocation:
        """Wait until the invocation is terminal (any state) and return it.

        Raises:
            errors.TimeoutError: ``timeout`` seconds passed first (None: no limit)."""
        _check_id(id)
        _check_seconds("timeout", timeout, wait=True)
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            chunk = LONG_POLL_MAX if end is None else min(LONG_POLL_MAX, max(0.0, end - time.monotonic()))
            # Idempotent: a dropped long-poll is repeated (within the transport's retry
            # window from the failure), never past the caller's own deadline.
            ans = await self._call(
                "GET",
                invocation_path(id) + "/wait",
                params={"timeout": chunk},
                wait=chunk,
                retry="safe",
                deadline=end,
                hot=True,
            )
            if ans.get("done"):
                return _invocation(ans["invocation"])
            if end is not None and time.monotonic() >= end:
                raise errors.TimeoutError(f"result {id}: waited {timeout:g} s and it has not ended", status=None)

    async def result(self, id: str, timeout: float | None) -> Any:
        """Wait for the invocation to end and return its decoded result, or raise the
        error its terminal state means (InvocationFailedError, …)."""
        return _result_of(id, await self.wait(id, timeout))

    def wait_blocking(self, id: str, timeout: float | None) -> Invocation:
        """:meth:`wait` from a thread that may block: each long-poll is a request on the
        calling thread (:meth:`~lakeshore._transport.HttpTransport.call_blocking`), without
        the two thread hops through the client's loop; one the blocking call could not
        finish is made the loop's way (:meth:`wait`, with its retries) for the time left.

        Raises:
            errors.TimeoutError: ``timeout`` seconds passed first (None: no limit).
            RuntimeError: called on the client loop's own thread."""
        _check_id(id)
        _check_seconds("timeout", timeout, wait=True)
        portal = self.dispatch._portal
        end = None if timeout is None else time.monotonic() + timeout
        if not portal.in_portal():
            transport = self.dispatch._transport
            while True:
                chunk = LONG_POLL_MAX if end is None else min(LONG_POLL_MAX, max(0.0, end - time.monotonic()))
                ans = transport.call_blocking("GET", invocation_path(id) + "/wait", params={"timeout": chunk}, wait=chunk)
                if ans is NOT_SENT:
                    break
                if ans.get("done"):
                    return _invocation(ans["invocation"])
                if end is not None and time.monotonic() >= end:
                    raise errors.TimeoutError(f"result {id}: waited {timeout:g} s and it has not ended", status=None)
        return portal.run(self.wait(id, None if end is None else max(0.0, end - time.monotonic())))

    def result_blocking(self, id: str, timeout: float | None) -> Any:
        """:meth:`result` from a thread that may block (:meth:`wait_blocking`)."""
        return _result_of(id, self.wait_blocking(id, timeout))

    async def cancel(self, id: str) -> bool:
        """Cancel a queued invocation; whether it did."""
        ans = await self._call("POST", invocation_path(_check_id(id)) + "/cancel", retry="once")
        return bool(ans.get("changed"))

    async def kill(self, id: str) -> bool:
        """Kill an invocation, running or queued; whether it did."""
        ans = await self._call("POST", invocation_path(_check_id(id)) + "/kill", retry="once")
        return bool(ans.get("changed"))

    async def count(self, state: str) -> int:
        """The number of the queue's invocations in ``state``."""
        if state not in STATES:
            raise errors.InvalidError(
                f"invalid state {state!r}: use one of {', '.join(STATES)}",
                field="state",
                value=state,
                rule="|".join(STATES),
            )
        ans = await self._call("GET", self.path + "/count", params={"state": state}, retry="safe")
        return int(ans["count"])

    async def stats(self) -> dict[str, int]:
        """The queue's counts by state."""
        ans = await self._call("GET", self.path + "/stats", retry="safe")
        return {str(k): int(v) for k, v in (ans.get("counts") or {}).items()}

    async def concurrency_keys(self) -> list[KeyStats]:
        """The queue's concurrency keys with jobs claimable or running, or held back by a
        worker's "slow down", most running first (at most 100, those with jobs claimable
        kept before those that only run some)."""
        ans = await self._call("GET", self.path + "/stats", retry="safe")
        return [_key_stats(k) for k in ans.get("keys") or []]

    async def list_page(
        self, state: str | None, key_prefix: str | None, limit: int, after: str | None, oldest: bool
    ) -> InvocationPage:
        """One page of the queue's invocations, newest first unless ``oldest``."""
        if state is not None and state not in STATES:
            raise errors.InvalidError(
                f"invalid state {state!r}: use one of {', '.join(STATES)}, or None for all",
                field="state",
                value=state,
                rule="|".join(STATES),
            )
        params = {
            "state": state,
            "key_prefix": key_prefix,
            "limit": limit,
            "after": after or None,
            "order": "oldest" if oldest else "newest",
        }
        ans = await self._call("GET", self.path + "/invocations", params=params, retry="safe")
        return InvocationPage([_invocation(i) for i in ans.get("invocations") or []], str(ans.get("next") or ""))

    async def admission(self) -> Admission | None:
        """The queue's admission limits, or None."""
        ans = await self._call("GET", self.path + "/admission", retry="safe")
        a = ans.get("admission")
        return _admission(a) if a else None

    async def set_admission(self, a: Admission) -> Admission:
        """Set the queue's admission limits (needs an admin token); return them."""
        ans = await self._call("PUT", self.path + "/admission", body=_admission_body(a), retry="safe")
        return _admission(ans.get("admission") or {})

    async def clear_admission(self) -> bool:
        """Remove the queue's admission limits; whether there were any."""
        ans = await self._call("DELETE", self.path + "/admission", retry="safe")
        return bool(ans.get("changed"))

    async def provider(self) -> Provider | None:
        """The queue's provider, or None (its workers are started by hand)."""
        ans = await self._call("GET", self.path + "/provider", retry="safe")
        return _provider(ans.get("provider"))

    async def set_provider(self, name: str, policy: LaunchPolicy) -> Provider:
        """Attach a provider (replacing any); return it as stored."""
        body = _provider_body(name, policy)
        ans = await self._call("PUT", self.path + "/provider", body=body, retry="safe")
        got = _provider(ans.get("provider"))
        return got if got is not None else Provider(name, policy)

    async def remove_provider(self) -> bool:
        """Detach the queue's provider; whether there was one."""
        ans = await self._call("DELETE", self.path + "/provider", retry="safe")
        return bool(ans.get("changed"))

    async def set_paused(self, paused: bool) -> bool:
        """Pause (PUT) or resume (DELETE) the queue; whether that changed it."""
        ans = await self._call("PUT" if paused else "DELETE", self.path + "/pause", retry="safe")
        return bool(ans.get("changed"))

    async def paused(self) -> bool:
        """Whether the queue is paused."""
        ans = await self._call("GET", self.path + "/stats", retry="safe")
        return bool(ans.get("paused"))

    # -- journals ------------------------------------------------------------------------

    async def frames(
        self, journal: str, since: int, wait: float, limit: int | None = None
    ) -> tuple[list[Mapping[str, Any]], bool]:
        """Read frames after ``since`` of a journal path, waiting up to ``wait`` seconds."""
        params: dict[str, Any] = {"since": since, "wait": wait}
        if limit is not None:
            params["limit"] = limit
        ans = await self._call("GET", journal + "/frames", params=params, wait=wait, retry="safe")
        return list(ans.get("frames") or []), bool(ans.get("closed"))

    async def stream(
        self, journal: str, invocation: str | None, since: int, timeout: float | None
    ) -> AsyncIterator[Frame]:
        """The VALUE frames of a journal after ``since``, live, until END; an ERROR frame (or
        an invocation that ended without success) raises its error, ``timeout`` seconds of
        silence raise TimeoutError (None: no limit)."""
        _check_since(since)
        _check_seconds("timeout", timeout, wait=True)
        last = time.monotonic()
        while True:
            wait = LONG_POLL_MAX
            if timeout is not None:
                wait = timeout - (time.monotonic() - last)
                if wait <= 0:
                    if invocation is not None:
                        inv = await self.get(invocation)
                        err = inv.error_for_state()
                        if err is not None:
                            raise err
                        if inv.terminal:
                            return
                    what = invocation or journal.rsplit("/", 1)[-1]
                    raise errors.TimeoutError(f"stream {what}: no frame for {timeout:g} s")
                wait = min(wait, LONG_POLL_MAX)
            frames, closed = await self.frames(journal, since, wait)
            for f in frames:
                since = int(f["seq"])
                kind = f.get("kind")
                if kind == "VALUE":
                    yield Frame(
                        seq=since,
                        value=decode_value(f"frame {since}", f.get("value")),
                        attempt=int(f.get("attempt") or 0),
                        time=f.get("time") if isinstance(f.get("time"), datetime) else None,
                    )
                elif kind == "END":
                    return
                elif kind == "ERROR":
                    # The invocation's own error (cancelled, killed, timed out, failed with
                    # its traceback) when its row can be read; else the frame's, as failed.
                    # (Raised outside the suppress: an InvocationError is a DispatchError.)
                    own: errors.InvocationError | None = None
                    if invocation is not None:
                        with contextlib.suppress(errors.DispatchError):
                            own = (await self.get(invocation)).error_for_state()
                    if own is not None:
                        raise own
                    info = _frame_error(f.get("value"))
                    raise errors.invocation_error(invocation or "", "failed", info)
                else:
                    raise errors.DispatchError(f"journal frame {since}: unknown kind {kind!r}", code="internal")
            if frames:
                last = time.monotonic()
                continue
            if closed:
                if invocation is not None:
                    inv = await self.get(invocation)
                    err = inv.error_for_state()
                    if err is not None:
                        raise err
                return

    async def listen(self, journal: str, since: int, timeout: float | None) -> Frame | None:
        """The first VALUE frame after ``since``, or None when none came within ``timeout``.

        Raises JournalClosedError when the next frame is the END (no value will come)."""
        _check_since(since)
        _check_seconds("timeout", timeout, wait=True)
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = LONG_POLL_MAX
            if end is not None:
                wait = min(LONG_POLL_MAX, end - time.monotonic())
                if wait <= 0:
                    return None
            frames, closed = await self.frames(journal, since, wait, limit=1)
            if not frames:
                if closed:
                    raise errors.JournalClosedError(f"listen to {journal.rsplit('/', 1)[-1]}: the journal is closed")
                continue
            f = frames[0]
            if f.get("kind") != "VALUE":
                raise errors.JournalClosedError(
                    f"listen to {journal.rsplit('/', 1)[-1]} after {since}: the journal is closed"
                )
            seq = int(f["seq"])
            return Frame(seq, decode_value(f"frame {seq}", f.get("value")), int(f.get("attempt") or 0), f.get("time"))

    async def post_topic(self, topic: str, value: Any, final: bool) -> int:
        """Append a frame to a topic of the queue; return its seq."""
        body: dict[str, Any] = {"value": encode_value("value", value)}
        if final:
            body["final"] = True
        ans = await self._call("POST", self.topic_path(topic) + "/frames", body=body, retry="once")
        return int(ans["seq"])

    def topic_path(self, topic: str) -> str:
        """The path of a topic's routes."""
        return f"{self.path}/topics/{topic}"

    # -- worker --------------------------------------------------------------------------

    async def claim(self, wait: float, lease_ttl: float | None, worker: str | None) -> Job | None:
        """Claim one job in the queue's kind, waiting up to ``wait`` seconds for one."""
        _check_seconds("wait", wait, allow_none=False, wait=True)
        end = time.monotonic() + wait
        ttl = _check_seconds("lease_ttl", lease_ttl) if lease_ttl is not None else self.lease_ttl
        while True:
            chunk = min(LONG_POLL_MAX, max(0.0, end - time.monotonic()))
            claims = self._claims if chunk > 0 else self._claims_now
            fut = claims.put((chunk, ttl, worker))
            try:
                d = await asyncio.wrap_future(fut)
            except asyncio.CancelledError:
                # Cancelled after the answer came (it is not the batcher's orphan then): a
                # caller that went away takes no job, so give it back at once.
                if fut.done() and not fut.cancelled() and fut.exception() is None and fut.result() is not None:
                    asyncio.run_coroutine_threadsafe(self._release(fut.result()), self.dispatch._portal.loop)
                raise
            if d is not None:
                job = await self._job(d)
                job._held_until = time.monotonic() + _lease_seconds(ttl)
                return job
            if time.monotonic() >= end:
                return None

    async def _send_claims(
        self, items: list[tuple[float, float | None, str | None]]
    ) -> list[Mapping[str, Any] | None | BaseException]:
        # Claims of the same lease and worker go as one claim of len(group) jobs, waiting as
        # long as the shortest of them; a caller left without a job claims again (claim()'s
        # loop) until its own wait is over.
        groups: dict[tuple[float | None, str | None], list[int]] = {}
        for i, (_, ttl, worker) in enumerate(items):
            groups.setdefault((ttl, worker), []).append(i)
        answers: list[Mapping[str, Any] | None | BaseException] = [None] * len(items)

        async def claim(ttl: float | None, worker: str | None, idx: list[int]) -> None:
            wait = min(items[i][0] for i in idx)
            body: dict[str, Any] = {"kind": self.kind, "max": len(idx), "wait": wait}
            if self.kind == "boltzmann":
                body["temperature"] = self.temperature
            if ttl is not None:
                body["lease_ttl"] = ttl
            if worker:
                body["worker"] = worker
            if self.also:
                body["queues"] = self.also
            if self.offers:
                body["offers"] = self.offers
            if self.warm is not None and (warm := self.warm()):
                body["warm_host_keys"] = warm
            try:
                ans = await self._call("POST", self.path + "/claim", body=body, wait=wait, retry="once", hot=True)
            except errors.DispatchError as e:
                for i in idx:
                    answers[i] = e
                return
            for i, job in zip(idx, ans.get("jobs") or []):
                answers[i] = job

        await asyncio.gather(*(claim(ttl, worker, idx) for (ttl, worker), idx in groups.items()))
        return answers

    def settle_and_claim_future(
        self, item: SettleClaim
    ) -> concurrent.futures.Future[tuple[BaseException | None, Mapping[str, Any] | None]]:
        """Hand a settle and/or a claim of one job (no wait) to the settle-and-claim batcher.

        Callable from any thread; the future's answer is ``(settle error or None, claimed
        job's fields or None)`` (:meth:`job_from` makes the Job). Items arriving together go
        as one ``POST …/settle-and-claim``."""
        return self._settle_claims.put(item)

    async def _send_settle_claims(
        self, items: list[SettleClaim]
    ) -> list[tuple[BaseException | None, Mapping[str, Any] | None] | BaseException]:
        settles = [(it.settle, it.deadline) for it in items if it.settle is not None]
        wanting = [i for i, it in enumerate(items) if it.claim]
        out: list[tuple[BaseException | None, Mapping[str, Any] | None] | BaseException] = [(None, None)] * len(items)
        if not wanting:
            errs = await self._settles_each(settles)
            k = 0
            for i, it in enumerate(items):
                if it.settle is not None:
                    out[i] = (errs[k], None)
                    k += 1
            return out
        claim = self._settle_claim_claim(items[wanting[0]], len(wanting))
        deadlines = [d for _, d in settles if d is not None]
        try:
            ans = await self._call(
                "POST",
                self.path + "/settle-and-claim",
                body={"settles": [b for b, _ in settles], "claim": claim},
                retry="once",
                deadline=min(deadlines) if deadlines else None,
                hot=True,
            )
        except errors.DispatchError:
            # Refused as a whole (one settle the server cannot read) or not answered: the
            # settles go again on their own route (per item when refused; fenced, so a
            # repeat of a done settle is answered, not applied twice), and the claims with
            # them.
            errs = await self._settles_each(settles)
            k = 0
            claims = await self._send_claims([(0.0, it.lease_ttl, it.worker) for it in items if it.claim])
            c = 0
            for i, it in enumerate(items):
                err: BaseException | None = None
                if it.settle is not None:
                    err = errs[k]
                    k += 1
                job: Mapping[str, Any] | None = None
                if it.claim:
                    got = claims[c]
                    c += 1
                    if isinstance(got, BaseException):
                        if err is None and it.settle is None:
                            out[i] = got
                            continue
                    else:
                        job = got
                out[i] = (err, job)
            return out
        return _settle_claim_answers(items, ans)

    def _settle_claim_claim(self, first: SettleClaim, n: int) -> dict[str, Any]:
        """The ``claim`` of a ``POST …/settle-and-claim`` for n turns that want a job, the
        first of them ``first`` (its lease and worker stand for all)."""
        claim: dict[str, Any] = {"kind": self.kind, "max": n, "wait": 0.0}
        if self.kind == "boltzmann":
            claim["temperature"] = self.temperature
        if first.lease_ttl is not None:
            claim["lease_ttl"] = first.lease_ttl
        if first.worker:
            claim["worker"] = first.worker
        if self.also:
            claim["queues"] = self.also
        if self.offers:
            claim["offers"] = self.offers
        if self.warm is not None and (warm := self.warm()):
            claim["warm_host_keys"] = warm
        return claim

    def settle_and_claim_blocking(self, item: SettleClaim) -> tuple[BaseException | None, Mapping[str, Any] | None]:
        """:meth:`settle_and_claim_future`'s turn, made on the calling thread and waited for
        there: a turn that claims goes as one ``POST …/settle-and-claim`` on a blocking
        keep-alive connection (:meth:`~lakeshore._transport.HttpTransport.call_blocking`),
        without the two thread hops through the client's loop. A request that could not be
        made that way (``NOT_SENT``: an ``https://`` server, a failed connection, an answer
        to retry) or that the server refused as a whole goes :meth:`settle_and_claim_future`'s
        way, which makes the attempts and sends each settle on its own route when refused;
        a settle is fenced by its token, so one that went twice is answered, not applied
        twice. A turn that only settles goes that way too (it has its own route).

        Raises:
            RuntimeError: called on the client loop's own thread."""
        portal = self.dispatch._portal
        if item.claim and not portal.in_portal():
            body = {"settles": [] if item.settle is None else [item.settle], "claim": self._settle_claim_claim(item, 1)}
            try:
                ans = self.dispatch._transport.call_blocking("POST", self.path + "/settle-and-claim", body)
            except errors.DispatchError:
                ans = NOT_SENT  # refused as a whole: the loop's way sends the settle on its own
            if ans is not NOT_SENT:
                answer = _settle_claim_answers([item], ans)[0]
                assert not isinstance(answer, BaseException)
                return answer
        return wait_future(portal, lambda: self.settle_and_claim_future(item))

    async def _settles_each(self, settles: list[tuple[dict[str, Any], float | None]]) -> list[BaseException | None]:
        if not settles:
            return []
        try:
            return await self._send_settles(settles)
        except errors.DispatchError as e:
            return [e] * len(settles)

    async def _release_answer(self, answer: tuple[BaseException | None, Mapping[str, Any] | None]) -> None:
        await self._release(answer[1])

    async def job_from(self, d: Mapping[str, Any]) -> Job:
        """The Job of a claimed job's fields (its payload decoded; held here).

        Raises:
            _UndecodablePayloadError: the payload does not decode (the invocation is failed)."""
        return await self._job(d)

    async def release_job(self, job: Job | None) -> None:
        """Give back ``job``, claimed for a caller that stopped waiting (see :meth:`_release`)."""
        if job is None:
            return
        self.held.pop(job.id, None)
        await self._release({"id": job.id, "token": job.token, "attempt": job.attempt})

    async def _release(self, d: Mapping[str, Any] | None) -> None:
        # A job claimed for a caller that stopped waiting (a cancelled claim): give it back
        # for another worker now rather than at its lease's expiry. Outcome "released": it
        # never ran, so its attempt is not counted and it is claimable again at once.
        if d is None:
            return
        body = {
            "id": str(d["id"]),
            "token": str(d.get("token") or ""),
            "outcome": "released",
            "error": {"type": "released", "message": "claimed for a caller that stopped waiting", "attempt": int(d.get("attempt") or 0)},
        }
        try:
            await self._send_settles([(body, None)])
        except Exception as e:
            # Nobody awaits this give-back: say so, since the job now waits out its lease.
            log.warning(
                "could not give back job %s, claimed for a caller that stopped waiting: %s; "
                "it is claimable again when its lease expires",
                body["id"],
                e,
            )
            raise

    def claimed_job(self, d: Mapping[str, Any]) -> Job:
        """:meth:`job_from` on the calling thread, for a job whose payload decodes (held
        here); any thread, no request.

        Raises:
            _UndecodablePayloadError: the payload does not decode (nothing is held nor
                failed: :meth:`job_from` fails it)."""
        job = self._unheld_job(d)
        job.payload = decode_value(f"payload of {job.id}", d.get("payload"), _UndecodablePayloadError)
        self.held[job.id] = job
        return job

    async def _job(self, d: Mapping[str, Any]) -> Job:
        try:
            return self.claimed_job(d)
        except _UndecodablePayloadError as e:
            # A payload no run can read: fail the invocation now rather than retry it.
            with contextlib.suppress(errors.DispatchError):
                await self.settle(self._unheld_job(d), "failed", None, {"type": "invalid_payload", "message": str(e)})
            raise

    def _unheld_job(self, d: Mapping[str, Any]) -> Job:
        """The Job of a claimed job's fields, its payload not decoded yet."""
        return Job(
            id=str(d["id"]),
            payload=None,
            attempt=int(d.get("attempt") or 0),
            queue=str(d.get("queue") or self.name),
            namespace=str(d.get("namespace") or self.dispatch.namespace),
            key=d.get("key") or None,
            concurrency_key=d.get("concurrency_key") or None,
            metadata=dict(d.get("metadata") or {}),
            priority=float(d.get("priority") or 0.0),
            max_attempts=int(d.get("max_attempts") or 0),
            lease_expires_at=d.get("lease_expires_at") if isinstance(d.get("lease_expires_at"), datetime) else None,
            token=str(d.get("token") or ""),
            # Claimed with this queue's lease (a claim naming another sets its own).
            _held_until=time.monotonic() + _lease_seconds(self.lease_ttl),
        )

    def _held(self, job: Job | str) -> Job:
        if isinstance(job, Job):
            return job
        held = self.held.get(job) if isinstance(job, str) else None
        if held is None:
            raise errors.InvalidError(
                f"no job {job!r} is held here: pass the Job that claim() returned (or the id of one "
                "this queue object claimed and has not settled)",
                field="job",
                value=str(job),
                rule="a Job from claim()",
            )
        return held

    async def settle(
        self,
        job: Job,
        outcome: str,
        result: bytes | None,
        error: Mapping[str, Any] | None,
        retry_delay: float | None = None,
        rate_limit_key: str | None = None,
    ) -> None:
        """Settle a job: ``succeeded``, ``retry``, ``failed``, ``timed_out`` or
        ``rate_limited`` (with ``rate_limit_key``, the concurrency key held back)."""
        body: dict[str, Any] = {"id": job.id, "token": job.token, "outcome": outcome}
        if result is not None:
            body["result"] = result
        if error is not None:
            body["error"] = dict(error)
        if retry_delay is not None:
            body["retry_delay"] = retry_delay
        if rate_limit_key:
            body["rate_limit_key"] = rate_limit_key
        try:
            await asyncio.wrap_future(self._settles.put((body, _lease_deadline(job))))
        finally:
            self.held.pop(job.id, None)

    async def _settle_one(self, body: Mapping[str, Any], deadline: float | None) -> None:
        b = dict(body)
        id = str(b.pop("id"))
        await self._call("POST", invocation_path(id) + "/settle", body=b, retry="fenced", deadline=deadline, hot=True)

    async def _send_settles(self, items: list[tuple[dict[str, Any], float | None]]) -> list[None | BaseException]:
        # Several settles go as one POST /v1/settle (one transaction, one answer per settle);
        # a batch refused as a whole (one bad item) is sent again one settle at a time.
        if len(items) == 1:
            await self._settle_one(*items[0])
            return [None]
        deadlines = [d for _, d in items if d is not None]
        try:
            ans = await self._call(
                "POST",
                "/v1/settle",
                body={"settles": [b for b, _ in items]},
                retry="fenced",
                deadline=min(deadlines) if deadlines else None,
                hot=True,
            )
        except errors.UnavailableError:
            raise
        except errors.DispatchError:
            answers = await asyncio.gather(*(self._settle_one(b, d) for b, d in items), return_exceptions=True)
            return [a if isinstance(a, BaseException) else None for a in answers]
        out: list[None | BaseException] = []
        for r in ans.get("results") or []:
            e = r.get("error") if isinstance(r, Mapping) else None
            out.append(errors.error_from_body(e) if e else None)
        return out

    async def ack(self, job: Job | str, result: Any) -> None:
        """Settle a held job as succeeded with ``result``."""
        j = self._held(job)
        try:
            data = encode_value("result", result)
        except (wire.EncodeError, errors.InvalidError) as e:
            # The result cannot be stored: fail the job (no retry would change it), then raise.
            with contextlib.suppress(errors.DispatchError):
                await self.settle(j, "failed", None, _error_info(e, j.attempt))
            raise
        await self.settle(j, "succeeded", data, None)

    async def nack(self, job: Job | str, error: BaseException | str | None, retry: bool) -> None:
        """Settle a held job as a failed attempt (retried while attempts remain with
        ``retry``), carrying the error's type, message and traceback. A
        :class:`~lakeshore.errors.RateLimited` error with ``retry`` is the "slow down" answer,
        settled as ``run_worker`` settles it: re-queued after its ``retry_after`` without
        consuming an attempt, its ``key`` held back as long."""
        j = self._held(job)
        if retry and isinstance(error, errors.RateLimited):
            info = _error_info(error, j.attempt)
            info["type"] = "rate_limited"
            # Clamped here, as the worker does: the attributes may have changed since it was built.
            delay = max(errors.rate_limited_delay(error.retry_after), 0.001)
            await self.settle(j, "rate_limited", None, info, delay, error.key)
            return
        await self.settle(j, "retry" if retry else "failed", None, _error_info(error, j.attempt))

    async def heartbeat(self, job: Job | str, lease_ttl: float | None = None) -> datetime | None:
        """Extend a held job's lease; return its new expiry. Raises LeaseLostError."""
        j = self._held(job)
        body: dict[str, Any] = {"token": j.token}
        ttl = lease_ttl if lease_ttl is not None else self.lease_ttl
        if ttl is not None:
            body["lease_ttl"] = ttl
        sent = time.monotonic()
        ans = await self._call(
            "POST", invocation_path(j.id) + "/heartbeat", body=body, retry="fenced", deadline=_lease_deadline(j)
        )
        j._held_until = sent + _lease_seconds(ttl)
        exp = ans.get("lease_expires_at")
        if isinstance(exp, datetime):
            j.lease_expires_at = exp
        return j.lease_expires_at

    async def post(self, job: Job | str, value: Any, final: bool) -> int:
        """Append a VALUE frame to a held job's journal (with ``final`` the END frame, which
        ends the journal; the job stays held until its ``ack``); return the frame's seq."""
        j = self._held(job)
        body: dict[str, Any] = {"token": j.token, "value": encode_value("value", value)}
        if final:
            body["final"] = True
        ans = await self._call("POST", invocation_path(j.id) + "/frames", body=body, retry="once")
        return int(ans["seq"])

    async def keep_alive(self, job: Job, interval: float) -> None:
        """Heartbeat ``job`` every ``interval`` seconds until cancelled or the lease is lost."""
        while True:
            await asyncio.sleep(interval)
            if job.id not in self.held:
                return
            try:
                await self.heartbeat(job)
            except errors.LeaseLostError:
                return
            except errors.DispatchError:
                continue


def _lease_left(job: Job) -> float | None:
    """Seconds until the job's lease ends as this process reckons it (``Job._held_until``,
    on the monotonic clock); for a Job without one, ``lease_expires_at`` against this
    machine's clock. None: unknown."""
    if job._held_until is not None:
        return job._held_until - time.monotonic()
    if job.lease_expires_at is None:
        return None
    return (job.lease_expires_at - datetime.now(timezone.utc)).total_seconds()


def _lease_deadline(job: Job) -> float | None:
    """The monotonic instant the job's lease ends (retries of fenced calls stop there)."""
    left = _lease_left(job)
    if left is None:
        return None
    return time.monotonic() + max(left, 1.0)


def _heartbeat_interval(job: Job) -> float:
    left = _lease_left(job)
    if left is None:
        return 10.0
    return max(0.2, left / 3)


def _lease_ends_before_next_beat(job: Job) -> bool:
    """Whether the job's lease (as the plane last extended it) ends before the next
    heartbeat (:func:`_heartbeat_interval`) could extend it: a worker whose heartbeats the
    plane does not answer stops the body then (Go's ``execution.unrenewed``)."""
    left = _lease_left(job)
    if left is None:
        return False
    return left <= _heartbeat_interval(job)


def _frame_error(v: Any) -> Mapping[str, Any] | None:
    if isinstance(v, (bytes, bytearray)):
        try:
            d = wire.decode(v)
        except wire.DecodeError:
            return None
        return d if isinstance(d, Mapping) else None
    return v if isinstance(v, Mapping) else None


# The admission fields the server reads as floats (maps: their values).
_ADMISSION_FLOATS = ("rate_limit", "deadline_cutoff", "key_rate_limit", "key_weights", "key_rate_limits")


def _as_float(v: Any) -> Any:
    """An int ``v`` as float (the wire wants floats there); anything else, or an int too
    large for a float, as given, for the server to refuse naming the field."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**1023:
        return float(v)
    return v


def _admission_body(a: Admission) -> dict[str, Any]:
    """The body of PUT …/admission: the fields set, floats where the server wants them
    (``Admission(key_rate_limit=5)`` is sent as 5.0)."""
    body: dict[str, Any] = {}
    for k, v in dataclasses.asdict(a).items():
        if v is None:
            continue
        if isinstance(v, Mapping):
            v = {key: _as_float(x) for key, x in v.items()} if k in _ADMISSION_FLOATS else dict(v)
        elif k in _ADMISSION_FLOATS:
            v = _as_float(v)
        body[k] = v
    return body


def _admission(a: Mapping[str, Any]) -> Admission:
    return Admission(
        max_depth=a.get("max_depth"),
        on_full=a.get("on_full"),
        rate_limit=a.get("rate_limit"),
        burst=a.get("burst"),
        deadline_cutoff=a.get("deadline_cutoff"),
        concurrency_limit=a.get("concurrency_limit"),
        concurrency_limits=a.get("concurrency_limits"),
        key_weights=a.get("key_weights"),
        key_rate_limit=a.get("key_rate_limit"),
        key_burst=a.get("key_burst"),
        key_rate_limits=a.get("key_rate_limits"),
        key_bursts=a.get("key_bursts"),
    )


async def _anext(agen: AsyncIterator[Frame]) -> Frame:
    return await agen.__anext__()


async def _aclose(agen: Any) -> None:
    await agen.aclose()


# ------------------------------------------------------------------------------ facades


class SyncQueue:
    """A named queue on a plane, with blocking verbs.

    Args:
        name: the queue, 1–128 bytes of ``[A-Za-z0-9._-]``.
        dispatch: the plane; default :func:`~lakeshore.default_dispatch` (``$LAKESHORE_URL``).
        kind: the order workers claim in: ``"fifo"`` (default), ``"filo"``, ``"priority"``
            or ``"boltzmann"`` (priority-weighted draw at ``temperature``).
        temperature: the boltzmann temperature (> 0, default 1.0).
        lease_ttl: seconds a claimed job's lease lasts between heartbeats (default: the
            server's, 30 s).

    Raises:
        InvalidError: a bad name, kind or temperature (``unknown queue kind '…'; use
            fifo|filo|priority|boltzmann``).
    """

    def __init__(
        self,
        name: str,
        *,
        dispatch: Dispatch | None = None,
        kind: str = "fifo",
        temperature: float = 1.0,
        lease_ttl: float | None = None,
    ) -> None:
        self._core = QueueCore(name, dispatch or default_dispatch(), kind, temperature, lease_ttl)
        self._d = self._core.dispatch

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._core.name

    @property
    def kind(self) -> str:
        """The claim order."""
        return self._core.kind

    @property
    def dispatch(self) -> Dispatch:
        """The plane."""
        return self._d

    def __repr__(self) -> str:
        return f"SyncQueue({self.name!r}, kind={self.kind!r}, dispatch={self._d!r})"

    # -- producer ------------------------------------------------------------------------

    def submit(
        self,
        payload: Any = None,
        *,
        envelope: Envelope | bytes | None = None,
        key: str | None = None,
        priority: float = 0.0,
        **options: Any,
    ) -> str:
        """Enqueue ``payload`` (any wire value or a Thunk) and return the invocation id.

        ``envelope`` is an :class:`Envelope` (the payload with its options), or a payload's
        wire bytes (``wire.encode(value)``, as dreamlake-lakeshore takes a packed one).
        ``key`` makes the submit idempotent per queue. Other options are the fields of
        :class:`Envelope`: ``delay=``, ``not_before=``, ``max_attempts=``,
        ``attempt_timeout=``, ``deadline=``, ``metadata=``, ``id=``, ``unique_for=``,
        ``debounce=``.

        Raises:
            wire.EncodeError: the payload has no wire form (a TypeError).
            InvalidError: a bad option, or a payload over 16 MiB.
            QueueFullError, RateLimitedError: the queue's admission refused it.
        """
        body = self._core.submit_body(payload, envelope, key, priority, options)
        return self._core.submit_blocking(body)

    def submit_many(self, payloads: builtins.list[Any]) -> list[str]:
        """Enqueue several payloads (or Envelopes) in one request; return their ids."""
        bodies = [
            self._core.submit_body(None, p, None, 0.0, {})
            if isinstance(p, Envelope)
            else self._core.submit_body(p, None, None, 0.0, {})
            for p in payloads
        ]
        return self._d.run(self._core.submit_many(bodies))

    def result(self, inv_id: str, *, timeout: float | None = 30.0) -> Any:
        """Wait until invocation ``inv_id`` ends and return its decoded result.

        Raises:
            InvocationFailedError, InvocationCancelledError, InvocationKilledError,
                InvocationTimedOutError: it ended without success.
            TimeoutError: ``timeout`` seconds passed first (None: wait without limit).
            NotFoundError: no such invocation.
        """
        return self._core.result_blocking(inv_id, timeout)

    def call(self, payload: Any = None, *, timeout: float | None = 30.0, **kw: Any) -> Any:
        """Submit ``payload`` and wait for its result (``kw``: as :meth:`submit`)."""
        return self.result(self.submit(payload, **kw), timeout=timeout)

    def get(self, inv_id: str) -> Invocation:
        """The invocation's row (state, attempts, times, error)."""
        return self._d.run(self._core.get(inv_id))

    def wait(self, inv_id: str, *, timeout: float | None = 30.0) -> Invocation:
        """Wait until the invocation ends, in whatever state, and return its row."""
        return self._core.wait_blocking(inv_id, timeout)

    def stream(self, inv_id: str, *, since: int = FROM_START, timeout: float | None = 30.0) -> Iterator[Any]:
        """The values the invocation's worker posts, live: an iterator that stops at END.

        ``since`` resumes after that frame seq (see :meth:`frames` for the seqs). An ERROR
        frame raises the invocation's error; ``timeout`` seconds of silence raise
        TimeoutError."""
        for f in self.frames(inv_id, since=since, timeout=timeout):
            yield f.value

    def frames(self, inv_id: str, *, since: int = FROM_START, timeout: float | None = 30.0) -> Iterator[Frame]:
        """As :meth:`stream`, yielding :class:`Frame` values (seq, value, attempt, time)."""
        _check_id(inv_id)
        return _sync_iter(self._d, self._core.stream(invocation_path(inv_id), inv_id, since, timeout))

    def cancel(self, inv_id: str) -> bool:
        """Cancel a queued invocation; whether it did (a running one finishes: see kill)."""
        return self._d.run(self._core.cancel(inv_id))

    def kill(self, inv_id: str) -> bool:
        """Kill an invocation, queued or running (its worker loses the lease); whether it did."""
        return self._d.run(self._core.kill(inv_id))

    def count(self, state: StateName = "queued") -> int:
        """The number of the queue's invocations in ``state``."""
        return self._d.run(self._core.count(state))

    def __len__(self) -> int:
        return self.count()

    def stats(self) -> dict[str, int]:
        """The queue's counts by state."""
        return self._d.run(self._core.stats())

    def concurrency_keys(self) -> builtins.list[KeyStats]:
        """The queue's concurrency keys with jobs claimable or running now, or held back by
        a worker's "slow down" (a key whose only job waits out the hold too), the most
        running first (at most 100, those with jobs claimable kept before those that only
        run some): each one's queued and running jobs, limit, weight, token bucket
        and ``rate_wait``, the seconds until its rate limit or a worker's "slow down" hold
        lets it start a job (docs/semantics.md, "Rate limits per key")."""
        return self._d.run(self._core.concurrency_keys())

    def list(
        self,
        *,
        state: StateName | None = None,
        key_prefix: str | None = None,
        limit: int = 100,
        after: str | None = None,
        oldest: bool = False,
    ) -> InvocationPage:
        """One page (``limit`` 1–1000) of the queue's invocations, newest first; pass the
        page's ``next`` as ``after`` for the next one."""
        return self._d.run(self._core.list_page(state, key_prefix, limit, after, oldest))

    def admission(self) -> Admission | None:
        """The queue's admission limits, or None."""
        return self._d.run(self._core.admission())

    def set_admission(self, admission: Admission) -> Admission:
        """Replace the queue's admission block with ``admission`` (needs an admin token): a
        field left None is no limit, whatever the stored block had (``lakeshore queue set``
        merges instead). To change one field keep the others:
        ``q.set_admission(dataclasses.replace(q.admission() or Admission(), concurrency_limit=8))``."""
        return self._d.run(self._core.set_admission(admission))

    def clear_admission(self) -> bool:
        """Remove the queue's admission limits; whether there were any."""
        return self._d.run(self._core.clear_admission())

    def provider(self) -> Provider | None:
        """The queue's provider and launch policy, or None when it has none (its workers
        are started by hand). Any token of the queue may read it."""
        return self._d.run(self._core.provider())

    def set_provider(self, name: str, policy: LaunchPolicy | None = None, **fields: Any) -> Provider:
        """Attach a provider to the queue (replacing any): from then on a supervisor
        (``lakeshore provider run`` or ``lakeshore serve --providers``) launches and stops
        its workers to follow the policy (``docs/providers.md``). Pass a
        :class:`LaunchPolicy` or its fields as keywords::

            q.set_provider("local", command=["python", "worker.py"], max_workers=4, idle_timeout=30)

        Returns the provider as stored (defaults filled in).

        Raises:
            InvalidError: an unknown provider, a policy out of range or without a command
                (nothing is stored).
            ForbiddenError: over HTTP, the token is not the server's admin token (a tenant
                token may not choose the command a supervisor runs).
        """
        return self._d.run(self._core.set_provider(name, _policy_of(policy, fields)))

    def remove_provider(self) -> bool:
        """Detach the queue's provider; whether there was one. Running workers keep running
        until they exit or are stopped. Over HTTP it needs the server's admin token."""
        return self._d.run(self._core.remove_provider())

    def pause(self) -> bool:
        """Pause the queue: it still accepts submits, but no worker claims its invocations
        until :meth:`resume` (running ones finish as usual). Returns whether it was running.
        Needs an admin token over HTTP (``ForbiddenError`` otherwise). The CLI's ``lakeshore
        queue pause``, the dashboard's Pause button and ``PUT …/pause`` do the same."""
        return self._d.run(self._core.set_paused(True))

    def resume(self) -> bool:
        """Resume a paused queue: its queued invocations are claimable at once and waiting
        workers take them. Returns whether it was paused."""
        return self._d.run(self._core.set_paused(False))

    def paused(self) -> bool:
        """Whether the queue is paused."""
        return self._d.run(self._core.paused())

    def topic(self, name: str | None = None) -> Topic:
        """A topic of the queue (auto-named ``topic-<ULID>`` when ``name`` is None)."""
        return Topic(self, name)

    # -- worker --------------------------------------------------------------------------

    def claim(self, *, wait: float = 0.0, lease_ttl: float | None = None, worker: str | None = None) -> Job | None:
        """Claim one job in the queue's kind, or None when none came within ``wait`` seconds."""
        return self._d.run(self._core.claim(wait, lease_ttl, worker))

    def ack(self, job: Job | str, result: Any = None) -> None:
        """Settle a claimed job as succeeded. Raises LeaseLostError when fenced off."""
        self._d.run(self._core.ack(job, result))

    def nack(self, job: Job | str, *, error: BaseException | str | None, retry: bool = True) -> None:
        """Settle a claimed job as a failed attempt: re-queued (after a backoff) while
        attempts remain with ``retry``, else failed. A :class:`~lakeshore.errors.RateLimited`
        ``error`` (with ``retry``) hands the job back instead, as a handler's does under
        ``run_worker``: claimable after its ``retry_after``, the attempt not counted, its
        ``key`` held back as long. Raises LeaseLostError when fenced off."""
        self._d.run(self._core.nack(job, error, retry))

    def heartbeat(self, job: Job | str) -> datetime | None:
        """Extend a claimed job's lease; return the new expiry."""
        return self._d.run(self._core.heartbeat(job))

    def post(self, inv_id: Job | str, value: Any, *, final: bool = False) -> int:
        """Append a VALUE frame to the journal of a job this queue object claimed and return
        its seq. With ``final`` the frame is END (``value``, often None, is its body): it ends
        the journal, so streams stop there and later posts raise JournalClosedError, but it
        does not settle the job: ``ack`` does (as in dreamlake-lakeshore: the journal is
        derived data, the invocation is the truth)."""
        return self._d.run(self._core.post(inv_id, value, final))

    @contextlib.contextmanager
    def working(self, *, wait: float = 0.0) -> Iterator[Job | None]:
        """Claim one job and settle it when the block ends: ack with ``job.result`` on
        success, nack with retry on an exception (which is re-raised). Yields None when
        nothing was claimable within ``wait``. The lease is heartbeated on the client's
        thread while the block runs, so a CPU-bound body does not lose it.

        A :class:`~lakeshore.errors.RateLimited` raised in the block is the "slow down"
        answer, not a failure: the job goes back to the queue after its ``retry_after``
        without consuming an attempt (its ``key`` held back as long), as under
        ``run_worker``, and the block ends without an exception, so a loop of ``working()``
        blocks goes on."""
        job = self.claim(wait=wait)
        if job is None:
            yield None
            return
        keeper = asyncio.run_coroutine_threadsafe(
            self._core.keep_alive(job, _heartbeat_interval(job)), self._d._portal.loop
        )
        try:
            yield job
        except errors.RateLimited as e:
            keeper.cancel()
            self.nack(job, error=e, retry=True)  # a settle that fails raises, from e
        except BaseException as e:
            keeper.cancel()
            try:
                self.nack(job, error=e, retry=True)
            except errors.DispatchError as ne:
                if hasattr(e, "add_note"):
                    e.add_note(f"lakeshore: the nack of {job.id} failed too: {ne}")
            raise
        else:
            keeper.cancel()
            self.ack(job, job.result)


def _sync_iter(d: Dispatch, agen: AsyncIterator[Frame]) -> Iterator[Frame]:
    try:
        while True:
            try:
                f = d.run(_anext(agen))
            except StopAsyncIteration:
                return
            yield f
    finally:
        with contextlib.suppress(Exception):
            d.run(_aclose(agen))


async def _async_iter(d: Dispatch, agen: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
    try:
        while True:
            try:
                f = await d.run_async(_anext(agen))
            except StopAsyncIteration:
                return
            yield f
    finally:
        with contextlib.suppress(Exception):
            await d.run_async(_aclose(agen))


class Queue:
    """The asyncio sibling of :class:`SyncQueue`: the same verbs, awaitable, and
    :meth:`stream` an async iterator. ``Queue(name, **kw)`` takes SyncQueue's arguments;
    :attr:`sync` is the blocking queue sharing the same binding. Awaiting a verb never
    blocks the event loop; cancelling the awaiting task cancels the call."""

    def __init__(self, name: str, **kw: Any) -> None:
        self.sync = SyncQueue(name, **kw)
        self._core = self.sync._core
        self._d = self.sync._d

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._core.name

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, kind={self._core.kind!r}, dispatch={self._d!r})"

    async def submit(
        self,
        payload: Any = None,
        *,
        envelope: Envelope | bytes | None = None,
        key: str | None = None,
        priority: float = 0.0,
        **options: Any,
    ) -> str:
        """See :meth:`SyncQueue.submit`."""
        body = self._core.submit_body(payload, envelope, key, priority, options)
        return await asyncio.wrap_future(self._core.submit_future(body))

    async def submit_many(self, payloads: builtins.list[Any]) -> list[str]:
        """See :meth:`SyncQueue.submit_many`."""
        bodies = [
            self._core.submit_body(None, p, None, 0.0, {})
            if isinstance(p, Envelope)
            else self._core.submit_body(p, None, None, 0.0, {})
            for p in payloads
        ]
        return await self._d.run_async(self._core.submit_many(bodies))

    async def result(self, inv_id: str, *, timeout: float | None = 30.0) -> Any:
        """See :meth:`SyncQueue.result`."""
        return await self._d.run_async(self._core.result(inv_id, timeout))

    async def call(self, payload: Any = None, *, timeout: float | None = 30.0, **kw: Any) -> Any:
        """See :meth:`SyncQueue.call`."""
        return await self.result(await self.submit(payload, **kw), timeout=timeout)

    async def get(self, inv_id: str) -> Invocation:
        """See :meth:`SyncQueue.get`."""
        return await self._d.run_async(self._core.get(inv_id))

    async def wait(self, inv_id: str, *, timeout: float | None = 30.0) -> Invocation:
        """See :meth:`SyncQueue.wait`."""
        return await self._d.run_async(self._core.wait(inv_id, timeout))

    async def stream(self, inv_id: str, *, since: int = FROM_START, timeout: float | None = 30.0) -> AsyncIterator[Any]:
        """See :meth:`SyncQueue.stream`: ``async for value in q.stream(inv_id)``."""
        async for f in self.frames(inv_id, since=since, timeout=timeout):
            yield f.value

    def frames(self, inv_id: str, *, since: int = FROM_START, timeout: float | None = 30.0) -> AsyncIterator[Frame]:
        """See :meth:`SyncQueue.frames`."""
        _check_id(inv_id)
        return _async_iter(self._d, self._core.stream(invocation_path(inv_id), inv_id, since, timeout))

    async def cancel(self, inv_id: str) -> bool:
        """See :meth:`SyncQueue.cancel`."""
        return await self._d.run_async(self._core.cancel(inv_id))

    async def kill(self, inv_id: str) -> bool:
        """See :meth:`SyncQueue.kill`."""
        return await self._d.run_async(self._core.kill(inv_id))

    async def count(self, state: StateName = "queued") -> int:
        """See :meth:`SyncQueue.count`."""
        return await self._d.run_async(self._core.count(state))

    async def stats(self) -> dict[str, int]:
        """See :meth:`SyncQueue.stats`."""
        return await self._d.run_async(self._core.stats())

    async def concurrency_keys(self) -> builtins.list[KeyStats]:
        """See :meth:`SyncQueue.concurrency_keys`."""
        return await self._d.run_async(self._core.concurrency_keys())

    async def list(
        self,
        *,
        state: StateName | None = None,
        key_prefix: str | None = None,
        limit: int = 100,
        after: str | None = None,
        oldest: bool = False,
    ) -> InvocationPage:
        """See :meth:`SyncQueue.list`."""
        return await self._d.run_async(self._core.list_page(state, key_prefix, limit, after, oldest))

    async def admission(self) -> Admission | None:
        """See :meth:`SyncQueue.admission`."""
        return await self._d.run_async(self._core.admission())

    async def set_admission(self, admission: Admission) -> Admission:
        """See :meth:`SyncQueue.set_admission`."""
        return await self._d.run_async(self._core.set_admission(admission))

    async def clear_admission(self) -> bool:
        """See :meth:`SyncQueue.clear_admission`."""
        return await self._d.run_async(self._core.clear_admission())

    async def provider(self) -> Provider | None:
        """See :meth:`SyncQueue.provider`."""
        return await self._d.run_async(self._core.provider())

    async def set_provider(self, name: str, policy: LaunchPolicy | None = None, **fields: Any) -> Provider:
        """See :meth:`SyncQueue.set_provider`."""
        return await self._d.run_async(self._core.set_provider(name, _policy_of(policy, fields)))

    async def remove_provider(self) -> bool:
        """See :meth:`SyncQueue.remove_provider`."""
        return await self._d.run_async(self._core.remove_provider())

    async def pause(self) -> bool:
        """See :meth:`SyncQueue.pause`."""
        return await self._d.run_async(self._core.set_paused(True))

    async def resume(self) -> bool:
        """See :meth:`SyncQueue.resume`."""
        return await self._d.run_async(self._core.set_paused(False))

    async def paused(self) -> bool:
        """See :meth:`SyncQueue.paused`."""
        return await self._d.run_async(self._core.paused())

    def topic(self, name: str | None = None) -> AsyncTopic:
        """See :meth:`SyncQueue.topic`."""
        return AsyncTopic(self.sync.topic(name))

    async def claim(
        self, *, wait: float = 0.0, lease_ttl: float | None = None, worker: str | None = None
    ) -> Job | None:
        """See :meth:`SyncQueue.claim`. A claim cancelled after its job arrived gives the job
        back at once (a caller that went away takes no job)."""
        return await self._d.run_async(self._core.claim(wait, lease_ttl, worker), self._core.release_job)

    async def ack(self, job: Job | str, result: Any = None) -> None:
        """See :meth:`SyncQueue.ack`."""
        await self._d.run_async(self._core.ack(job, result))

    async def nack(self, job: Job | str, *, error: BaseException | str | None, retry: bool = True) -> None:
        """See :meth:`SyncQueue.nack`."""
        await self._d.run_async(self._core.nack(job, error, retry))

    async def heartbeat(self, job: Job | str) -> datetime | None:
        """See :meth:`SyncQueue.heartbeat`."""
        return await self._d.run_async(self._core.heartbeat(job))

    async def post(self, inv_id: Job | str, value: Any, *, final: bool = False) -> int:
        """See :meth:`SyncQueue.post`."""
        return await self._d.run_async(self._core.post(inv_id, value, final))

    @contextlib.asynccontextmanager
    async def working(self, *, wait: float = 0.0) -> AsyncIterator[Job | None]:
        """``async with q.working() as job``: see :meth:`SyncQueue.working` (a
        :class:`~lakeshore.errors.RateLimited` hands the job back, unraised). The lease is
        heartbeated on the client's own loop, so a body that blocks this loop keeps it."""
        job = await self.claim(wait=wait)
        if job is None:
            yield None
            return
        keeper = asyncio.run_coroutine_threadsafe(
            self._core.keep_alive(job, _heartbeat_interval(job)), self._d._portal.loop
        )
        try:
            yield job
        except errors.RateLimited as e:
            keeper.cancel()
            await asyncio.shield(self.nack(job, error=e, retry=True))
        except BaseException as e:
            keeper.cancel()
            try:
                await asyncio.shield(self.nack(job, error=e, retry=True))
            except errors.DispatchError as ne:
                if hasattr(e, "add_note"):
                    e.add_note(f"lakeshore: the nack of {job.id} failed too: {ne}")
            raise
        else:
            keeper.cancel()
            await self.ack(job, job.result)


class Topic:
    """A publish/subscribe channel of a queue: a journal without an invocation.

    Anyone may post; readers get every value after their cursor; posting ``final=True``
    (the END frame) closes it for everyone, for good. Make one with :meth:`SyncQueue.topic`.
    """

    def __init__(self, queue: SyncQueue, name: str | None = None) -> None:
        if name is None:
            name = "topic-" + new_ulid()
        _check_name("topic name", name)
        self.name = name
        self.queue = queue
        self._core = queue._core
        self._path = self._core.topic_path(name)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, queue={self.queue.name!r})"

    def post(self, value: Any, *, final: bool = False) -> int:
        """Append ``value`` (END with ``final``) and return its seq.
        Raises JournalClosedError once the topic was closed."""
        return self.queue._d.run(self._core.post_topic(self.name, value, final))

    def close(self) -> int:
        """Post the END frame: readers' streams end; later posts raise JournalClosedError."""
        return self.post(None, final=True)

    def listen(self, since: int = FROM_START, timeout: float | None = 5.0) -> Any:
        """The next value after ``since``, or None when none came within ``timeout``.
        Raises JournalClosedError when the topic is closed before another value."""
        f = self.queue._d.run(self._core.listen(self._path, since, timeout))
        return None if f is None else f.value

    def listen_frame(self, since: int = FROM_START, timeout: float | None = 5.0) -> Frame | None:
        """As :meth:`listen`, returning the :class:`Frame` (with its seq) or None."""
        return self.queue._d.run(self._core.listen(self._path, since, timeout))

    def stream(self, since: int = FROM_START, timeout: float | None = 5.0) -> Iterator[Any]:
        """The values after ``since``, live, until END; ``timeout`` seconds of silence
        raise TimeoutError."""
        for f in self.frames(since, timeout):
            yield f.value

    def frames(self, since: int = FROM_START, timeout: float | None = 5.0) -> Iterator[Frame]:
        """As :meth:`stream`, yielding :class:`Frame` values."""
        return _sync_iter(self.queue._d, self._core.stream(self._path, None, since, timeout))


class AsyncTopic:
    """The asyncio sibling of :class:`Topic` (made by :meth:`Queue.topic`)."""

    def __init__(self, topic: Topic) -> None:
        self.sync = topic
        self.name = topic.name
        self._core = topic._core
        self._d = topic.queue._d
        self._path = topic._path

    async def post(self, value: Any, *, final: bool = False) -> int:
        """See :meth:`Topic.post`."""
        return await self._d.run_async(self._core.post_topic(self.name, value, final))

    async def close(self) -> int:
        """See :meth:`Topic.close`."""
        return await self.post(None, final=True)

    async def listen(self, since: int = FROM_START, timeout: float | None = 5.0) -> Any:
        """See :meth:`Topic.listen`."""
        f = await self._d.run_async(self._core.listen(self._path, since, timeout))
        return None if f is None else f.value

    async def stream(self, since: int = FROM_START, timeout: float | None = 5.0) -> AsyncIterator[Any]:
        """See :meth:`Topic.stream`."""
        async for f in _async_iter(self._d, self._core.stream(self._path, None, since, timeout)):
            yield f.value


def _resource_names(field: str, fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """``fields`` with a compute mode's resource names (``cpus``: a count such as 4, 0.5
    or "500m"; ``memory``: bytes or a size such as "64GiB"; docs/fabric.md) turned into the
    wire's (``cpus_milli``, ``memory_bytes``); an InvalidError for a bad value or for both
    names of one resource."""
    if "cpus" not in fields and "memory" not in fields:
        return fields
    from lakeshore import config  # noqa: PLC0415 (config imports nothing of the queue)

    out = dict(fields)
    for alias, wire_name, parse in (("cpus", "cpus_milli", config.parse_cpus), ("memory", "memory_bytes", config.parse_memory)):
        if alias not in out:
            continue
        v = out.pop(alias)
        if wire_name in out:
            raise errors.InvalidError(
                f"invalid {field}: give {alias} or {wire_name}, not both", field=f"{field}.{alias}", value=v, rule=f"{alias} or {wire_name}"
            )
        try:
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise ValueError("want a number or a string")
            out[wire_name] = parse(format(v, "f").rstrip("0").rstrip(".") if isinstance(v, float) else str(v))
        except ValueError as e:
            raise errors.InvalidError(f"invalid {field}.{alias} {v!r}: {e}", field=f"{field}.{alias}", value=v, rule=str(e)) from None
    return out


def _placement(field: str, fields: Mapping[str, Any] | str) -> dict[str, Any]:
    """A requirement or offers as the wire's fields (``cpus_milli``, ``memory_bytes``,
    ``gpus``, ``gpu_type``, ``labels``), from a mapping or a string in the CLI's
    ``--offers``/``--requires`` form (``"gpus=1,gpu_type=a100"``); an unknown field, or
    anything else, is an InvalidError on ``field`` (the server checks the values)."""
    if isinstance(fields, str):
        # The CLI's form, as $LAKESHORE_OFFERS: before, a string was iterated as keys and
        # run_worker(offers="gpus=1") said "invalid offers key '1'".
        from lakeshore import _offers  # noqa: PLC0415

        return _placement(field, _offers.parse_offers(fields, field))
    if not isinstance(fields, Mapping):
        raise errors.InvalidError(
            f"invalid {field} {fields!r}: want a mapping such as {{'gpus': 1, 'gpu_type': 'a100'}} "
            f"or a string such as 'gpus=1,gpu_type=a100'",
            field=field,
            value=repr(fields)[:40],
            rule="a mapping of cpus_milli (or cpus), memory_bytes (or memory), gpus, gpu_type, labels; or NAME=VALUE pairs",
        )
    fields = _resource_names(field, fields)
    unknown = sorted(str(k) for k in fields if k not in _REQUIREMENT_FIELDS)
    if unknown:
        raise errors.InvalidError(
            f"invalid {field} key {unknown[0]!r}: use {', '.join(_REQUIREMENT_FIELDS)}",
            field=field,
            value=unknown[0],
            rule=", ".join(_REQUIREMENT_FIELDS),
        )
    out = dict(fields)
    for name in ("cpus_milli", "memory_bytes", "gpus"):
        v = out.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            # Too large for the wire's integers: the server would never see it to say so.
            raise errors.InvalidError(
                f"invalid {field}.{name} {v}: out of range (the server's limits: docs/semantics.md, Placement)",
                field=f"{field}.{name}",
                value=v,
                rule="out of range",
            )
    if "labels" in out:
        labels = out["labels"]
        if labels is not None and not isinstance(labels, Mapping):
            raise errors.InvalidError(
                f"invalid {field}.labels {labels!r}: want a mapping of label to value, e.g. {{'zone': 'east'}}",
                field=f"{field}.labels",
                value=labels,
                rule="a mapping of label to value",
            )
        for k, v in dict(labels or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise errors.InvalidError(
                    f"invalid {field}.labels entry {k!r}: {v!r}: want a string label and a string value",
                    field=f"{field}.labels",
                    value=repr(k)[:40],
                    rule="string labels with string values, as the server requires",
                )
        out["labels"] = dict(labels or {})
    return out
