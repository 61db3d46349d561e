"""What a newcomer to flow control tripped on (issue 27 from Python): a ``@udf`` submit takes
the dedup windows as it takes the concurrency key, and a window out of range names the
plane's bound (366 days), not what a duration holds."""

from __future__ import annotations

import pytest

from lakeshore import HttpDispatch, InvalidError, SyncQueue, udf


def test_udf_submit_takes_the_dedup_windows(every_plane: HttpDispatch, qname: str) -> None:
    @udf(queue=qname, dispatch=every_plane)
    def embed(text: str) -> int:
        return len(text)

    q = SyncQueue(qname, dispatch=every_plane)
    first = embed.submit(text="a", _key="u", _unique_for=30, _concurrency_key="tenant-1")
    assert embed.submit(text="b", _key="u", _unique_for=30) == first, "within the window: the first id"
    assert q.get(first).payload == {"text": "a"} and q.get(first).concurrency_key == "tenant-1"
    waiting = embed.submit(text="c", _key="d", _debounce=30)
    assert embed.submit(text="d", _key="d", _debounce=30) == waiting, "while it waits: the same id"
    assert q.get(waiting).payload == {"text": "d"}, "the last payload wins"
    with pytest.raises(InvalidError) as e:
        embed.submit(text="e", _unique_for=30)  # a window needs a key
    assert e.value.field == "unique_for"
    with pytest.raises(InvalidError) as e:
        embed.submit(text="f", _key="both", _unique_for=30, _debounce=30)
    assert e.value.field == "debounce"
    assert q.count("queued") == 2, "the refused submits stored nothing"


@pytest.mark.parametrize("field", ["delay", "unique_for", "debounce"])
def test_a_window_out_of_range_names_the_plane_bound(dispatch: HttpDispatch, qname: str, field: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    for bad in (-1, 366 * 24 * 3600 + 1, 1e9):
        with pytest.raises(InvalidError, match=rf"invalid {field} .*want seconds from 0 to 31622400 \(366 days\)") as e:
            q.submit(1, key="k", **{field: bad})
        assert e.value.field == field
        assert "292 years" not in str(e.value)
    assert q.submit(1, key="k", **{field: 366 * 24 * 3600}), "the bound itself is taken"
    assert q.count("queued") == 1


def test_a_huge_concurrency_key_is_shown_short(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(InvalidError) as e:
        q.submit(1, concurrency_key="x" * 100_000)
    assert e.value.field == "concurrency_key"
    assert len(str(e.value)) < 200 and "use 1–256 bytes of UTF-8 without NUL" in str(e.value)
