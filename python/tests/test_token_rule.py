"""A bearer token no HTTP header can carry (a newline, a carriage return, a tab or any
other control character: a token pasted or echoed with its line end) is refused when the
client is made, as the Go client refuses it (plane.ValidateToken): InvalidError naming
``token`` that never shows the token. Before, ``HttpDispatch(url, token="a\\nb")`` was
made, and its calls put the token raw into their header lines (``_http11.Endpoint``)."""

from __future__ import annotations

import pytest

import lakeshore.data
import lakeshore.dispatch
from lakeshore import errors
from lakeshore.dispatch import HttpDispatch

URL = "http://127.0.0.1:9"  # never dialled: the client is refused when it is made

BAD = ["secret-a\nb", "secret-a\r\n", "secret\tb", "secret\x00", "secret\x7f", "secret\x85"]


def _require_refused(err: errors.InvalidError, token: str) -> None:
    assert err.field == "token"
    assert err.code == "invalid"
    assert err.value is None, "the token is a secret: not kept on the error"
    assert "secret" not in str(err) and token not in str(err) and token not in repr(err)
    assert "control character" in str(err)


@pytest.mark.parametrize("token", BAD)
def test_http_dispatch_refuses_a_token_with_a_control_character(token: str) -> None:
    with pytest.raises(errors.InvalidError) as e:
        HttpDispatch(URL, token=token)
    _require_refused(e.value, token)


def test_token_from_the_environment_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKESHORE_TOKEN", "secret-from-env\n")
    with pytest.raises(errors.InvalidError) as e:
        HttpDispatch(URL)
    _require_refused(e.value, "secret-from-env\n")


def test_data_queue_on_the_default_plane_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A data queue takes its token from its dispatch: here the process default, made from
    # $LAKESHORE_URL and $LAKESHORE_TOKEN.
    monkeypatch.setattr(lakeshore.dispatch, "_default", None)
    monkeypatch.setenv("LAKESHORE_URL", URL)
    monkeypatch.setenv("LAKESHORE_TOKEN", "secret-data\n")
    with pytest.raises(errors.InvalidError) as e:
        lakeshore.data.Queue("events")
    _require_refused(e.value, "secret-data\n")
    assert lakeshore.dispatch._default is None, "no default plane is kept from the refusal"


@pytest.mark.parametrize("token", ["plain-token", "with space and ünïcödé", ""])
def test_printable_tokens_are_taken(token: str) -> None:
    d = HttpDispatch(URL, token=token)
    d.close()
