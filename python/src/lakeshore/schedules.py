"""Durable schedules: a payload submitted to a queue at each tick of a cron expression or an
interval, once per tick, by the plane (``docs/semantics.md``, "Schedules").

>>> @lakeshore.schedule("0 3 * * *", queue="eval", payload={"suite": "full"})  # doctest: +SKIP
... def nightly(suite): ...

stores the schedule ``nightly`` in the plane when the module is imported (replacing the rule,
payload and options of one of that name, but keeping its paused flag and, with the same
rule, its next fire: an operator's pause survives a worker restart) and binds ``nightly`` as the handler of queue ``eval``, as ``@udf`` does; :func:`schedules` lists the stored ones with their last and next fire.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Callable, Literal, TypeVar, cast

from lakeshore import errors
from lakeshore._transport import path_segment
from lakeshore.dispatch import Dispatch, default_dispatch
from lakeshore.queue import _check_concurrency_key, _check_max_attempts, encode_value
from lakeshore.worker import all_schedules, udf

__all__ = [
    "ScheduleInfo",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
    "schedule",
    "schedules",
    "set_schedule",
]

CatchUp = Literal["once", "skip", "all"]
"""What a schedule does with the ticks it missed while no maintenance ran: ``"once"`` fires
the latest (the default), ``"skip"`` fires only ticks at most a minute old, ``"all"`` fires
each."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class ScheduleInfo:
    """A stored schedule.

    Attributes:
        namespace, name: its identity.
        queue: the queue every fire is submitted to.
        cron: the cron expression (``""`` for an interval schedule).
        every: the interval in seconds (0 for a cron schedule).
        time_zone: the IANA zone ``cron`` is read in (``""``: UTC).
        catch_up: the missed-tick policy.
        paused: whether it fires.
        next_fire: the next tick it fires (None while paused).
        last_fire: the tick it last fired (None: never); ``last_id`` that fire's invocation.
        priority, max_attempts, attempt_timeout, metadata: the options of every fire.
        concurrency_key: every fire's concurrency key (None: none).
        skipped: the ticks skipped because the queue was at its max depth since the
            schedule was last set; ``last_skip`` the last one (None: none) and
            ``last_skip_reason`` why.
        changed: in the answer of :func:`pause_schedule` and :func:`resume_schedule`, whether
            the call paused (resumed) it: False when it already was paused (was not
            paused). None elsewhere.
    """

    namespace: str
    name: str
    queue: str
    cron: str = ""
    every: float = 0.0
    time_zone: str = ""
    catch_up: str = "once"
    paused: bool = False
    next_fire: datetime | None = None
    last_fire: datetime | None = None
    last_id: str = ""
    priority: float = 0.0
    max_attempts: int = 0
    attempt_timeout: float = 0.0
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    concurrency_key: str | None = None
    skipped: int = 0
    last_skip: datetime | None = None
    last_skip_reason: str = ""
    changed: bool | None = None


def _info(a: Mapping[str, Any]) -> ScheduleInfo:
    def t(k: str) -> datetime | None:
        v = a.get(k)
        return v if isinstance(v, datetime) else None

    return ScheduleInfo(
        namespace=str(a.get("namespace") or ""),
        name=str(a.get("name") or ""),
        queue=str(a.get("queue") or ""),
        cron=str(a.get("cron") or ""),
        every=float(a.get("every") or 0),
        time_zone=str(a.get("time_zone") or ""),
        catch_up=str(a.get("catch_up") or "once"),
        paused=bool(a.get("paused")),
        next_fire=t("next_fire"),
        last_fire=t("last_fire"),
        last_id=str(a.get("last_id") or ""),
        priority=float(a.get("priority") or 0),
        max_attempts=int(a.get("max_attempts") or 0),
        attempt_timeout=float(a.get("attempt_timeout") or 0),
        metadata=dict(a.get("metadata") or {}),
        concurrency_key=str(a["concurrency_key"]) if a.get("concurrency_key") else None,
        skipped=int(a.get("skipped") or 0),
        last_skip=t("last_skip"),
        last_skip_reason=str(a.get("last_skip_reason") or ""),
        changed=bool(a["changed"]) if a.get("changed") is not None else None,
    )


def _path(d: Dispatch, name: str) -> str:
    """The path of a schedule's routes: ``/v1/namespaces/{ns}/schedules/{name}``."""
    return f"/v1/namespaces/{path_segment('namespace', d.namespace)}/schedules/{path_segment('schedule name', name)}"


def set_schedule(
    name: str,
    queue: str,
    payload: Any = None,
    *,
    cron: str | None = None,
    every: float | None = None,
    time_zone: str | None = None,
    catch_up: CatchUp | None = None,
    paused: bool = False,
    priority: float = 0.0,
    max_attempts: int = 0,
    attempt_timeout: float | None = None,
    metadata: Mapping[str, str] | None = None,
    concurrency_key: str | None = None,
    keep_state: bool = False,
    dispatch: Dispatch | None = None,
) -> ScheduleInfo:
    """Store schedule ``name`` (replacing one of that name) in the dispatch's namespace: at
    each tick of ``cron`` (five fields, or ``@hourly`` … ``@yearly``, read in ``time_zone``,
    default UTC) or of ``every`` seconds (at least 1; ticks at its multiples since the Unix
    epoch), the plane submits ``payload`` to ``queue`` once, with the key
    ``schedule/NAME/TICK``. Returns the schedule as stored (``next_fire`` set).

    With ``concurrency_key`` (a tenant, say; None or ``""``: none) every fire carries that
    key, as a submit's ``concurrency_key``: the queue's per-key limits, weights and rates
    apply to the fires (a schedule per tenant, each tenant's fires under its key's limit).

    With ``keep_state=True`` (a declaration, as :func:`schedule` makes at import) an
    existing schedule of the name keeps the plane's state of it: its paused flag (``paused``
    then applies only when this call creates it), its skip record and, when the rule
    (``cron``, ``every``, ``time_zone``) is unchanged, its next fire, so ticks missed
    meanwhile still follow ``catch_up``; a changed rule fires next at its own first tick
    after now. The plane reads and writes the schedule in one transaction, so a concurrent
    pause is never undone.

    Raises:
        InvalidError: a bad rule, zone, name or option (the message names it); nothing is
            stored."""
    d = dispatch or default_dispatch()
    body: dict[str, Any] = {"queue": queue, "payload": encode_value("payload", payload)}
    for k, v in (
        ("cron", cron),
        ("every", float(every) if every is not None else None),
        ("time_zone", time_zone),
        ("catch_up", catch_up),
        ("attempt_timeout", float(attempt_timeout) if attempt_timeout is not None else None),
        ("metadata", dict(metadata) if metadata else None),
        # "" or None: none; else checked as a submit's key (a lone surrogate cannot encode).
        ("concurrency_key", _check_concurrency_key(concurrency_key) if concurrency_key not in (None, "") else None),
    ):
        if v:
            body[k] = v
    if paused:
        body["paused"] = True
    if keep_state:
        body["keep_state"] = True
    if priority:
        body["priority"] = float(priority)
    if max_attempts:
        body["max_attempts"] = _check_max_attempts(max_attempts)
    ans = d.run(d._transport.call("PUT", _path(d, name), body=body, retry="safe"))
    return _info(ans)


def schedules(namespace: str | None = None, *, dispatch: Dispatch | None = None) -> list[ScheduleInfo]:
    """The stored schedules of ``namespace`` (default: every namespace the token covers),
    ordered by namespace then name, with their last and next fire: every page of ``GET
    /v1/schedules``, following its ``next`` cursor."""
    d = dispatch or default_dispatch()
    return [_info(a) for a in d.run(all_schedules(d._transport, namespace))]


def remove_schedule(name: str, *, dispatch: Dispatch | None = None) -> bool:
    """Delete schedule ``name`` of the dispatch's namespace; True when there was one. The
    jobs it submitted stay."""
    d = dispatch or default_dispatch()
    ans = d.run(d._transport.call("DELETE", _path(d, name), retry="once"))
    return bool(ans.get("changed"))


def pause_schedule(name: str, *, dispatch: Dispatch | None = None) -> ScheduleInfo:
    """Pause schedule ``name``: it fires nothing until resumed. The answer's ``changed`` is
    False when it was already paused.

    Raises:
        NotFoundError: no such schedule."""
    d = dispatch or default_dispatch()
    return _info(d.run(d._transport.call("POST", _path(d, name) + "/pause", retry="safe")))


def resume_schedule(name: str, *, dispatch: Dispatch | None = None) -> ScheduleInfo:
    """Resume schedule ``name`` from its first tick after now (the ticks missed while paused
    are skipped). The answer's ``changed`` is False when it was not paused (its next fire
    is then kept).

    Raises:
        NotFoundError: no such schedule."""
    d = dispatch or default_dispatch()
    return _info(d.run(d._transport.call("POST", _path(d, name) + "/resume", retry="safe")))


def schedule(
    cron: str | None = None,
    *,
    every: float | None = None,
    queue: str | None = None,
    name: str | None = None,
    payload: Any = None,
    time_zone: str | None = None,
    catch_up: CatchUp | None = None,
    paused: bool = False,
    priority: float = 0.0,
    max_attempts: int = 0,
    attempt_timeout: float | None = None,
    metadata: Mapping[str, str] | None = None,
    concurrency_key: str | None = None,
    dispatch: Dispatch | None = None,
) -> Callable[[F], F]:
    """Decorate a handler to declare a schedule for it when the decorator runs (at import):
    ``name`` and ``queue`` default to the function's ``__name__``; the other arguments are
    :func:`set_schedule`'s. The declaration is :func:`set_schedule` with ``keep_state=True``:
    importing the module again (a worker restart or redeploy) replaces an existing
    schedule's rule, payload and options but leaves its paused flag (``lakeshore schedule
    pause`` survives; ``paused`` applies only when the schedule is created), its skip record
    and, when the rule is unchanged, its next fire alone; a changed rule fires next at its
    own first tick after now, paused or not as before. The function is bound to the queue as its handler exactly as
    :func:`~lakeshore.udf` binds it (registered, so ``run_worker()`` or
    ``run_worker(queues=[queue])`` runs it; each fire calls it with the payload's keys as
    keyword arguments, or with no argument when the payload is None). The returned
    :class:`~lakeshore.UDF` carries the stored :class:`ScheduleInfo` as its ``schedule``
    attribute; calling it runs the function here.

    Raises:
        InvalidError: as :func:`set_schedule` (neither or both of ``cron`` and ``every``
            included)."""
    if (cron is None) == (every is None):
        raise errors.InvalidError(
            "schedule: give a cron expression or every=SECONDS, exactly one",
            field="cron",
            value=cron,
            rule="exactly one of cron and every",
        )

    def wrap(fn: F) -> F:
        bound = udf(fn, queue=queue or fn.__name__, dispatch=dispatch)
        info = set_schedule(
            name or fn.__name__,
            queue or fn.__name__,
            payload,
            cron=cron,
            every=every,
            time_zone=time_zone,
            catch_up=catch_up,
            paused=paused,
            priority=priority,
            max_attempts=max_attempts,
            attempt_timeout=attempt_timeout,
            metadata=metadata,
            concurrency_key=concurrency_key,
            keep_state=True,
            dispatch=dispatch,
        )
        setattr(bound, "schedule", info)  # noqa: B010 (an attribute of the binding)
        return cast(F, bound)

    return wrap
