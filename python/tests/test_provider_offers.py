"""Issue 25 item 5 from Python: a worker a provider launches for a shape gets
``$LAKESHORE_OFFERS`` (``lakeshore worker --offers`` form), and ``run_worker`` without
``offers=`` offers them, so the shape's jobs are claimed by it (docs/providers.md, "Launching
by shape")."""

from __future__ import annotations

import pytest

from lakeshore import HttpDispatch, InvalidError, SyncQueue, run_worker
from lakeshore._offers import parse_offers


def test_parse_offers() -> None:
    assert parse_offers("") == {}
    assert parse_offers("cpus=8000m,memory=68719476736,gpus=1,gpu_type=a100,label.zone=us-east,label.arch=x=86") == {
        "cpus_milli": 8000,
        "memory_bytes": 64 << 30,
        "gpus": 1,
        "gpu_type": "a100",
        "labels": {"zone": "us-east", "arch": "x=86"},
    }
    assert parse_offers("cpus=0.5,memory=2GiB") == {"cpus_milli": 500, "memory_bytes": 2 << 30}
    assert parse_offers("memory=3GB") == {"memory_bytes": 3 * 10**9}
    for bad in ("gpus", "gpus=x", "cpus=1.2345", "gpu=1", "gpus=1,gpus=2"):
        with pytest.raises(InvalidError) as e:
            parse_offers(bad)
        assert e.value.field == "$LAKESHORE_OFFERS", bad


def test_run_worker_offers_from_env(every_plane: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    gpu = q.submit("gpu", requires={"gpus": 1, "gpu_type": "a100"})
    ran: list[str] = []
    monkeypatch.setenv("LAKESHORE_OFFERS", "gpus=1,gpu_type=a100")
    assert run_worker(every_plane, queues={qname: lambda x: ran.append(x)}, once=True, wait=1, handle_signals=False) == 1
    assert ran == ["gpu"] and q.get(gpu).state == "succeeded"
    # offers= given wins over the environment.
    other = q.submit("other", requires={"gpus": 1, "gpu_type": "a100"})
    assert run_worker(every_plane, queues={qname: lambda x: ran.append(x)}, once=True, handle_signals=False, offers={}) == 0
    assert q.get(other).state == "queued"
    monkeypatch.setenv("LAKESHORE_OFFERS", "gpus=one")
    with pytest.raises(InvalidError) as e:
        run_worker(every_plane, queues={qname: lambda x: x}, once=True, handle_signals=False)
    assert e.value.field == "$LAKESHORE_OFFERS"


def test_parse_offers_says_what_a_value_may_be() -> None:
    """As Go's ParseOffers (TestParseOffersSaysWhatAValueMayBe): a bad value says what the
    name's value may be ("a bad gpus value" before), an unknown name that it is unknown."""
    for bad, want in {
        "gpus=one": "gpus is a whole number (1); use NAME=VALUE pairs",
        "cpus=lots": "cpus is a number of CPUs with at most three decimals (8, 0.5) or millicpus (500m); use",
        "memory=64Gb": "memory is a number of bytes with an optional unit (64GiB, 512MiB, 2G); use",
        "colour=red": 'unknown name "colour"; use NAME=VALUE pairs separated by commas: cpus, memory, gpus, gpu_type, label.KEY',
    }.items():
        with pytest.raises(InvalidError) as e:
            parse_offers(bad)
        assert str(e.value).startswith(f"invalid $LAKESHORE_OFFERS {bad!r}: {want}"), (bad, str(e.value))
