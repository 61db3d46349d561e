"""Error bodies of docs/http-api.md rebuilt into the typed errors, without a server."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from lakeshore import errors

CASES: list[tuple[str, int, type[errors.DispatchError]]] = [
    ("not_found", 404, errors.NotFoundError),
    ("lease_lost", 409, errors.LeaseLostError),
    ("journal_closed", 409, errors.JournalClosedError),
    ("queue_full", 429, errors.QueueFullError),
    ("rate_limited", 429, errors.RateLimitedError),
    ("invalid", 400, errors.InvalidError),
    ("unauthorized", 401, errors.UnauthorizedError),
    ("forbidden", 403, errors.ForbiddenError),
    ("unavailable", 502, errors.UnavailableError),
    ("closed", 503, errors.UnavailableError),
    ("shutting_down", 503, errors.UnavailableError),
    ("too_many_long_polls", 503, errors.UnavailableError),
    ("timeout", 408, errors.TimeoutError),
    ("failed", 409, errors.InvocationFailedError),
    ("cancelled", 409, errors.InvocationCancelledError),
    ("timed_out", 409, errors.InvocationTimedOutError),
    ("incompatible_type", 400, errors.IncompatibleTypeError),
    ("unsupported_value", 400, errors.UnsupportedValueError),
    ("corrupt", 500, errors.CorruptError),
    ("put_id_reused", 409, errors.PutIDReusedError),
    ("internal", 500, errors.DispatchError),
    ("not_implemented", 501, errors.DispatchError),
    ("route_not_found", 404, errors.DispatchError),
    ("changed", 412, errors.ChangedError),
    ("limit_exceeded", 409, errors.LimitExceededError),
    ("something_new", 500, errors.DispatchError),
]


@pytest.mark.parametrize("code,status,cls", CASES, ids=[c[0] for c in CASES])
def test_every_code_has_its_class(code: str, status: int, cls: type[errors.DispatchError]) -> None:
    err = errors.error_from_body({"code": code, "message": f"the {code} text"}, status)
    assert type(err) is cls
    assert err.code == code and err.status == status and str(err) == f"the {code} text"
    assert isinstance(err, errors.DispatchError)


def test_terminal_errors_carry_the_remote_error() -> None:
    tb = 'Traceback (most recent call last):\n  File "w.py", line 3, in run\nValueError: bad seed'
    body: dict[str, Any] = {
        "code": "failed",
        "message": "invocation 01J failed (attempt 3): bad seed",
        "details": {"id": "01J", "state": "failed", "info": {"type": "ValueError", "message": "bad seed\n\n" + tb, "attempt": 3}},
    }
    err = errors.error_from_body(body, 409)
    assert isinstance(err, errors.InvocationFailedError)
    assert (err.id, err.state, err.error_type, err.attempt) == ("01J", "failed", "ValueError", 3)
    assert err.traceback == tb and err.error_message.startswith("bad seed")
    killed = errors.error_from_body(
        {"code": "cancelled", "message": "m", "details": {"id": "01J", "state": "killed", "info": {"type": "killed"}}}
    )
    assert type(killed) is errors.InvocationKilledError and isinstance(killed, errors.InvocationCancelledError)
    assert killed.code == "cancelled"
    timed = errors.invocation_error("01K", "timeout", {"type": "lease_expired", "message": "lease expired", "attempt": 1})
    assert type(timed) is errors.InvocationTimedOutError and timed.code == "timed_out"
    assert str(timed) == "invocation 01K timeout (attempt 1): lease expired"
    assert errors.invocation_error("01K", "failed", None).traceback == ""


def test_invalid_and_admission_details() -> None:
    inv = errors.error_from_body(
        {"code": "invalid", "message": "invalid priority: finite", "details": {"field": "priority", "value": "NaN", "rule": "finite"}},
        400,
    )
    assert isinstance(inv, errors.InvalidError) and isinstance(inv, ValueError)
    assert (inv.field, inv.value, inv.rule) == ("priority", "NaN", "finite")
    full = errors.error_from_body(
        {"code": "rate_limited", "message": "m", "details": {"queue": "default/q", "retry_after": 0.4, "detail": "5/s"}}
    )
    assert isinstance(full, errors.RateLimitedError) and isinstance(full, errors.AdmissionError)
    assert (full.queue, full.retry_after, full.detail) == ("default/q", 0.4, "5/s")


def test_timeout_is_also_the_builtin() -> None:
    err = errors.TimeoutError("waited 1 s")
    assert isinstance(err, builtins.TimeoutError) and isinstance(err, errors.DispatchError)
    with pytest.raises(builtins.TimeoutError):
        raise err


def test_bodies_that_are_not_lakeshore_errors() -> None:
    err = errors.error_from_body(None, 502)
    assert isinstance(err, errors.UnavailableError) and "502" in str(err)
    err = errors.error_from_body("<html>", 500)
    assert type(err) is errors.DispatchError and err.code == "internal"


def test_data_errors_carry_their_details() -> None:
    err = errors.error_from_body(
        {"code": "incompatible_type", "message": "m", "details": {"field": "a", "have": "int64", "got": "string"}}, 400
    )
    assert isinstance(err, errors.IncompatibleTypeError) and isinstance(err, TypeError)
    assert (err.field, err.have, err.got, err.reason) == ("a", "int64", "string", "")
    err = errors.error_from_body(
        {"code": "unsupported_value", "message": "m", "details": {"field": "x", "go_type": "complex128", "reason": "r"}}, 400
    )
    assert isinstance(err, errors.UnsupportedValueError) and isinstance(err, TypeError)
    assert (err.field, err.go_type, err.reason) == ("x", "complex128", "r")


def test_every_code_of_the_http_api_doc_is_known() -> None:
    # docs/http-api.md's error table and its data errors: each code has a class here, or is
    # one of the defects the module documents as a plain DispatchError.
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    section = text[text.index("\n## Errors\n") : text.index("\n## Authentication")]
    rows = re.findall(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \|", section, re.M)
    table_codes = {c for row in rows for c in re.findall(r"`([a-z_]+)`", row)}
    data = text[text.index("### Data errors") : text.index("## Errors")]
    data_codes = set(re.findall(r"`([a-z_]+)` \d{3}", data))
    plain = {"internal", "not_implemented", "route_not_found", "method_not_allowed", "unsupported_media_type"}
    codes = table_codes | data_codes
    assert {"incompatible_type", "corrupt", "lease_lost", "journal_closed"} <= codes, codes
    for code in codes - plain:
        assert type(errors.error_from_body({"code": code, "message": "m"}, 400)) is not errors.DispatchError, code
