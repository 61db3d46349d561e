"""The errors of the Lakeshore client, one class per stable code of the server.

Every error a plane reports is a :class:`DispatchError` whose :attr:`~DispatchError.code` is
the server's stable code (``"not_found"``, ``"invalid"``, …, the codes of
``docs/http-api.md``); the subclass says which, so ``except NotFoundError`` works like the Go
SDK's ``errors.Is(err, lakeshore.ErrNotFound)``:

==========================  ====================  =========================================
class                       code                  meaning
==========================  ====================  =========================================
:class:`NotFoundError`      ``not_found``         unknown or trimmed invocation
:class:`InvocationFailedError`  ``failed``        the invocation failed; carries the remote
                                                  error type, message and traceback text
:class:`InvocationCancelledError`  ``cancelled``  the invocation was cancelled
:class:`InvocationKilledError`  ``cancelled``     … killed (state ``killed``)
:class:`InvocationTimedOutError`  ``timed_out``   the invocation itself timed out
:class:`LeaseLostError`     ``lease_lost``        this worker no longer holds the job
:class:`JournalClosedError` ``journal_closed``    a frame after the END or ERROR frame
:class:`QueueFullError`     ``queue_full``        admission: the queue is at max depth
:class:`RateLimitedError`   ``rate_limited``      admission: the rate limit refused it
:class:`InvalidError`       ``invalid``           a bad argument; says which and the rule
:class:`UnauthorizedError`  ``unauthorized``      no token, or an unknown/expired/revoked one
:class:`ForbiddenError`     ``forbidden``         the token lacks this permission here
:class:`ChangedError`       ``changed``           a conditional set (``If-Match``) found the
                                                  state changed since it was read
:class:`LimitExceededError` ``limit_exceeded``    a namespace's cap (schedules, data
                                                  queues, code bytes, admission blocks)
                                                  reached; nothing written
:class:`UnavailableError`   ``unavailable`` …     the server could not be reached or is
                                                  busy or stopping (also ``closed``,
                                                  ``shutting_down``, ``too_many_long_polls``)
:class:`TimeoutError`       ``timeout``           the caller's own wait ended first
:class:`IncompatibleTypeError`  ``incompatible_type``  data queue: a value the field's
                                                  column type cannot take (nothing written)
:class:`UnsupportedValueError`  ``unsupported_value``  data queue: a value of a type that
                                                  cannot be stored (nothing written)
:class:`CorruptError`       ``corrupt``           data queue: on-disk state does not match
                                                  its manifest
==========================  ====================  =========================================

Other codes (``internal``, ``not_implemented``, ``route_not_found``,
``method_not_allowed``, ``unsupported_media_type``: a client or server defect, not a
condition to handle) are plain :class:`DispatchError` values with that code.
:class:`TimeoutError` is also the builtin ``TimeoutError``, :class:`InvalidError` also a
``ValueError``, :class:`IncompatibleTypeError` and :class:`UnsupportedValueError` also a
``TypeError``.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

__all__ = [
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
    "InvalidError",
    "UnauthorizedError",
    "ForbiddenError",
    "ChangedError",
    "LimitExceededError",
    "UnavailableError",
    "TimeoutError",
    "IncompatibleTypeError",
    "UnsupportedValueError",
    "CorruptError",
    "PutIDReusedError",
    "error_from_body",
]


class DispatchError(Exception):
    """An error reported by a Lakeshore plane (or about reaching one).

    Attributes:
        code: the stable code, e.g. ``"not_found"``; ``"internal"`` when unknown.
        message: the human-readable text (also ``str(err)``).
        status: the HTTP status it came with, or None when it did not come over HTTP.
        details: the error body's ``details`` (typed fields by code), possibly empty.
        written_indexes: for a data put that went as several requests (over the server's
            body limit: ``lakeshore.data.Queue.put_partial``) and failed after its first:
            the global indexes of the records its earlier requests wrote, in order (the
            rest were not written); None for every other error.
    """

    code: str = "internal"
    written_indexes: list[int] | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.status = status
        self.details: Mapping[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return self.message


class NotFoundError(DispatchError):
    """Unknown or trimmed invocation id (or one of a queue the token does not cover)."""

    code = "not_found"


class InvocationError(DispatchError):
    """The invocation ended without success; the base of the terminal-state errors.

    Attributes:
        id: the invocation id.
        state: its terminal state: ``failed``, ``cancelled``, ``killed`` or ``timeout``.
        error_type: the type the worker reported (e.g. ``"ValueError"``, ``"panic"``,
            ``"lease_expired"``), ``""`` when none.
        error_message: the worker's error text, ``""`` when none.
        attempt: the attempt (1-based) that ended it, 0 when unknown.
    """

    def __init__(
        self,
        message: str,
        *,
        id: str = "",
        state: str = "",
        error_type: str = "",
        error_message: str = "",
        attempt: int = 0,
        code: str | None = None,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, details=details)
        self.id = id
        self.state = state
        self.error_type = error_type
        self.error_message = error_message
        self.attempt = attempt


class InvocationFailedError(InvocationError):
    """The invocation failed: the remote error's type, message and traceback text."""

    code = "failed"

    @property
    def traceback(self) -> str:
        """The remote traceback text, when the worker sent one (Python workers do)."""
        marker = "Traceback (most recent call last):"
        i = self.error_message.find(marker)
        return self.error_message[i:] if i >= 0 else ""


class InvocationCancelledError(InvocationError):
    """The invocation was cancelled (or killed: see :class:`InvocationKilledError`)."""

    code = "cancelled"


class InvocationKilledError(InvocationCancelledError):
    """The invocation was killed while it ran (state ``killed``, code ``cancelled``)."""


class InvocationTimedOutError(InvocationError):
    """The invocation itself timed out: per-attempt timeout, lease expiry without attempts
    left, or a deadline passed before it ran (state ``timeout``)."""

    code = "timed_out"


class LeaseLostError(DispatchError):
    """This worker no longer holds the job's lease (killed, expired or claimed again);
    nothing changed."""

    code = "lease_lost"


class JournalClosedError(DispatchError):
    """A frame was posted after the journal's END or ERROR frame (a closed topic)."""

    code = "journal_closed"


class AdmissionError(DispatchError):
    """The queue's admission refused the submit.

    Attributes:
        queue: ``namespace/queue`` that refused.
        retry_after: seconds after which a retry may succeed (0 when unknown).
        detail: the admission's own explanation.
    """

    @property
    def queue(self) -> str:
        """``namespace/queue`` that refused the submit."""
        return str(self.details.get("queue", ""))

    @property
    def retry_after(self) -> float:
        """Seconds after which a retry may succeed (0 when unknown)."""
        v = self.details.get("retry_after", 0)
        return float(v) if isinstance(v, (int, float)) else 0.0

    @property
    def detail(self) -> str:
        """The admission's own explanation."""
        return str(self.details.get("detail", ""))


class QueueFullError(AdmissionError):
    """The queue is at its maximum depth (admission ``max_depth``)."""

    code = "queue_full"


class RateLimitedError(AdmissionError):
    """The queue's rate limit refused the submit; see :attr:`retry_after`."""

    code = "rate_limited"


RATE_LIMITED_DELAY_DEFAULT = 1.0
"""Seconds a :class:`RateLimited` without a usable ``retry_after`` (0, negative, NaN) waits:
the plane's default, as Go's ``lakeshore.RateLimited(key, 0)``."""

RATE_LIMITED_DELAY_MAX = 366 * 24 * 3600.0
"""The longest wait of a :class:`RateLimited` (366 days, the plane's maximum delay); a longer
``retry_after`` is cut to it."""


def rate_limited_delay(retry_after: float) -> float:
    """The wait a ``RateLimited(retry_after=…)`` settles: 0, negative or NaN →
    :data:`RATE_LIMITED_DELAY_DEFAULT` (1 s); above :data:`RATE_LIMITED_DELAY_MAX` (or
    infinite) → that maximum; else ``retry_after``. The rule of Go's
    ``RateLimitedError.Delay``."""
    if retry_after != retry_after or retry_after <= 0:  # NaN compares unequal to itself
        return RATE_LIMITED_DELAY_DEFAULT
    return min(retry_after, RATE_LIMITED_DELAY_MAX)


class RateLimited(Exception):
    """Raised by a job's handler to say "slow down": what it calls is rate limited.

    The worker hands the job back instead of failing the attempt: it is re-queued,
    claimable after ``retry_after`` seconds, without consuming an attempt; with ``key``, a
    concurrency key of the job's queue (usually ``job.concurrency_key``), no claim takes from
    that key for as long either (docs/semantics.md, "Rate limits per key").

    ``retry_after`` is clamped as Go's ``lakeshore.RateLimited`` does: 0, negative or NaN
    means 1 s; more than 366 days means 366 days. The worker logs the answer as one INFO
    line (no traceback: the job did not fail).

    Attributes:
        retry_after: the seconds the job waits, clamped (default 1).
        key: the concurrency key to hold back, or None (``""`` is None).

    Raises:
        InvalidError: ``key`` is not 1–256 bytes of UTF-8 without NUL (a ``ValueError``),
            or ``retry_after`` is not a number (a ``TypeError`` from ``float``).
    """

    def __init__(self, retry_after: float = RATE_LIMITED_DELAY_DEFAULT, key: str | None = None) -> None:
        delay = rate_limited_delay(float(retry_after))
        if key is not None and key != "":
            rule = "use 1–256 bytes of UTF-8 without NUL"
            try:
                encoded = key.encode("utf-8") if isinstance(key, str) else None
            except UnicodeEncodeError:
                encoded = None
            if encoded is None or len(encoded) > 256 or b"\x00" in encoded:
                raise InvalidError(f"invalid rate limit key {key!r}: {rule}", field="key", value=key, rule=rule)
        super().__init__(f"rate limited: retry after {delay:g} s" + (f" (key {key!r})" if key else ""))
        self.retry_after = delay
        self.key = key or None


class InvalidError(DispatchError, ValueError):
    """A bad argument: which field, the value given, and what is allowed.

    Attributes:
        field: the argument, e.g. ``"queue name"`` or ``"payload"``.
        value: what was given (may be None).
        rule: what is allowed.
    """

    code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        value: Any = None,
        rule: str = "",
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, status=status, details=details)
        self.field = field
        self.value = value
        self.rule = rule


class PutIDReusedError(InvalidError):
    """A data-queue put whose ``put_id`` names an earlier put of another batch (another
    partition or number of records; Go: ``persist.ErrPutIDReused``, HTTP 409
    ``put_id_reused``). Nothing was written; the earlier put's records stand. An
    :class:`InvalidError` too (on field ``put_id``); a ``put_id`` refused for its form is a
    plain :class:`InvalidError`, never this."""

    code = "put_id_reused"


class UnauthorizedError(DispatchError):
    """The server refused the credentials: no token, or one unknown, expired or revoked.
    Retrying does not help; set ``token=`` or ``LAKESHORE_TOKEN``."""

    code = "unauthorized"


class ForbiddenError(DispatchError):
    """The token does not grant this permission on this namespace and queue."""

    code = "forbidden"


class ChangedError(DispatchError):
    """A conditional set (HTTP ``If-Match``, e.g. an admission block's tag from its ``ETag``)
    found the state changed since it was read; nothing was written. Read again, redo the
    change and retry."""

    code = "changed"


class LimitExceededError(DispatchError):
    """The call would take a namespace past one of its caps: the plane's (its number of
    schedules: 10,000 by default) or the server's (its data queues, bytes of code archives
    and admission blocks; docs/http-api.md, "Per-namespace caps"); nothing was written.
    Retrying does not help until something is removed or the cap raised (Go:
    ``lakeshore.ErrLimitExceeded``)."""

    code = "limit_exceeded"


class UnavailableError(DispatchError):
    """The plane could not be reached, or is stopping or busy, within the call's time.

    Whether a call that is not safe to repeat took effect is unknown; submits carry
    client-made ids, so the client repeats them safely itself."""

    code = "unavailable"


class TimeoutError(DispatchError, builtins.TimeoutError):
    """The caller's own wait (``timeout=``) ended before the awaited event; nothing changed.

    Also a builtin ``TimeoutError``, so ``except TimeoutError`` catches it either way."""

    code = "timeout"


class IncompatibleTypeError(DispatchError, builtins.TypeError):
    """A data-queue put whose value for :attr:`field` has a kind (:attr:`got`) that the
    field's column (:attr:`have`) cannot take (Go: ``persist.ErrSchema``). The put wrote
    nothing. Also a builtin ``TypeError``."""

    code = "incompatible_type"

    @property
    def field(self) -> str:
        """The record field."""
        return str(self.details.get("field", ""))

    @property
    def have(self) -> str:
        """The column's kind, e.g. ``"int64"``."""
        return str(self.details.get("have", ""))

    @property
    def got(self) -> str:
        """The value's kind, e.g. ``"string"``."""
        return str(self.details.get("got", ""))

    @property
    def reason(self) -> str:
        """Why they do not widen when they usually would (``""`` when they never do)."""
        return str(self.details.get("reason", ""))


class UnsupportedValueError(DispatchError, builtins.TypeError):
    """A data-queue put of a value of a type that cannot be stored (Go:
    ``persist.ErrUnsupportedValue``). The put wrote nothing. Also a builtin ``TypeError``."""

    code = "unsupported_value"

    @property
    def field(self) -> str:
        """The record field."""
        return str(self.details.get("field", ""))

    @property
    def go_type(self) -> str:
        """The value's type as the server saw it."""
        return str(self.details.get("go_type", ""))

    @property
    def reason(self) -> str:
        """What is allowed instead."""
        return str(self.details.get("reason", ""))


class CorruptError(DispatchError):
    """A data queue's on-disk state does not match its manifest (a missing or unreadable
    fragment): the server's storage needs attention (Go: ``persist.ErrCorrupt``)."""

    code = "corrupt"


_BY_CODE: dict[str, type[DispatchError]] = {
    "not_found": NotFoundError,
    "failed": InvocationFailedError,
    "cancelled": InvocationCancelledError,
    "timed_out": InvocationTimedOutError,
    "lease_lost": LeaseLostError,
    "journal_closed": JournalClosedError,
    "queue_full": QueueFullError,
    "rate_limited": RateLimitedError,
    "invalid": InvalidError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "changed": ChangedError,
    "limit_exceeded": LimitExceededError,
    "unavailable": UnavailableError,
    "closed": UnavailableError,
    "shutting_down": UnavailableError,
    "too_many_long_polls": UnavailableError,
    "timeout": TimeoutError,
    "incompatible_type": IncompatibleTypeError,
    "unsupported_value": UnsupportedValueError,
    "corrupt": CorruptError,
    "put_id_reused": PutIDReusedError,
}


def invocation_error(
    id: str,
    state: str,
    info: Mapping[str, Any] | None,
    *,
    status: int | None = None,
    details: Mapping[str, Any] | None = None,
    message: str | None = None,
) -> InvocationError:
    """The error of an invocation that ended in ``state`` with error ``info``
    (``{type, message, attempt}``), as Go's ``*plane.TerminalError`` prints it."""
    info = info or {}
    etype = str(info.get("type") or "")
    emsg = str(info.get("message") or "")
    attempt = info.get("attempt") or 0
    attempt = attempt if isinstance(attempt, int) else 0
    if message is None:
        message = f"invocation {id} {state}"
        if emsg:
            message += f" (attempt {attempt}): {emsg}"
    cls: type[InvocationError]
    if state == "failed":
        cls = InvocationFailedError
    elif state == "killed":
        cls = InvocationKilledError
    elif state == "cancelled":
        cls = InvocationCancelledError
    elif state == "timeout":
        cls = InvocationTimedOutError
    else:
        cls = InvocationError
    return cls(
        message,
        id=id,
        state=state,
        error_type=etype,
        error_message=emsg,
        attempt=attempt,
        status=status,
        details=details,
    )


def error_from_body(body: Any, status: int | None = None) -> DispatchError:
    """Rebuild the error an error body ``{code, message, details}`` describes.

    A body that is not such a map (a proxy's HTML page, say) gives a :class:`DispatchError`
    with code ``"internal"`` naming the status."""
    if not isinstance(body, Mapping) or not isinstance(body.get("code"), str):
        text = f"HTTP {status}: the server answered without a Lakeshore error body"
        if status in (502, 503, 504):
            return UnavailableError(text, code="unavailable", status=status)
        return DispatchError(text, code="internal", status=status)
    code: str = body["code"]
    message = str(body.get("message") or code)
    raw_details = body.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, Mapping) else {}
    if code in ("failed", "cancelled", "timed_out") and details.get("state"):
        info = details.get("info")
        return invocation_error(
            str(details.get("id", "")),
            str(details["state"]),
            info if isinstance(info, Mapping) else None,
            status=status,
            details=details,
            message=message,
        )
    if code in ("invalid", "put_id_reused"):
        return (PutIDReusedError if code == "put_id_reused" else InvalidError)(
            message,
            field=str(details.get("field", "")),
            value=details.get("value"),
            rule=str(details.get("rule", "")),
            status=status,
            details=details,
        )
    cls = _BY_CODE.get(code, DispatchError)
    return cls(message, code=code, status=status, details=details)
