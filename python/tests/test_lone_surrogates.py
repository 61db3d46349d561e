"""Strings holding lone surrogates ("\\ud800", which no UTF-8 holds) in a request are the
SDK's InvalidError naming the field, never a raw UnicodeEncodeError: a body's value (a key,
metadata), a name (a queue). A payload's is wire.EncodeError, as for any value with no wire
form."""

from __future__ import annotations

import pytest

from lakeshore import errors
from lakeshore import HttpDispatch, SyncQueue


def test_lone_surrogate_in_a_key(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(errors.InvalidError) as e:
        q.submit({"x": 1}, key="\ud800")
    assert e.value.field == "key"
    assert "UTF-8" in str(e.value)
    assert not isinstance(e.value, UnicodeError)


def test_lone_surrogate_in_metadata(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(errors.InvalidError) as e:
        q.submit({"x": 1}, metadata={"note": "a\udfffb"})
    assert e.value.field == "metadata.note"


def test_lone_surrogate_in_a_queue_name(dispatch: HttpDispatch) -> None:
    with pytest.raises(errors.InvalidError) as e:
        SyncQueue("q\ud800", dispatch=dispatch)
    assert "queue" in e.value.field


def test_lone_surrogate_in_a_concurrency_key(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(errors.InvalidError) as e:
        q.submit({"x": 1}, concurrency_key="\ud800")
    assert e.value.field == "concurrency_key"


def test_lone_surrogate_in_a_metadata_key(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(errors.InvalidError) as e:
        q.submit({"x": 1}, metadata={"\ud800": "v"})
    assert e.value.field == "metadata"


def test_pack_names_the_field() -> None:
    from lakeshore._transport import pack

    with pytest.raises(errors.InvalidError) as e:
        pack({"invocations": [{"payload": b"", "metadata": {"a": ["ok", "x\udc80"]}}]})
    assert e.value.field == "invocations[0].metadata.a[1]"
    assert e.value.value == "x\udc80"


def test_lone_surrogate_in_a_path(dispatch: HttpDispatch) -> None:
    import importlib

    from lakeshore._transport import invocation_path

    schedules = importlib.import_module("lakeshore.schedules")  # the package's schedules is a function

    with pytest.raises(errors.InvalidError) as e:
        invocation_path("\ud800")
    assert e.value.field == "id"
    with pytest.raises(errors.InvalidError) as e:
        schedules._path(dispatch, "nightly\ud800")
    assert e.value.field == "schedule name"
