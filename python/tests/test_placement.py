"""Issue 25 item 2 from Python: a submit's ``requires=`` is the invocation's requirement,
shown by ``get`` with its shape; a claim without offers never takes it (a GPU job never
lands on a worker that did not say it has a GPU); a bad requirement is refused."""

from __future__ import annotations

import pytest

from lakeshore import HttpDispatch, InvalidError, SyncQueue


def test_requires_is_the_requirement(every_plane: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=every_plane)
    gpu = q.submit("gpu", requires={"gpus": 1, "gpu_type": "a100", "labels": {"zone": "east"}})
    plain = q.submit("plain")
    inv = q.get(gpu)
    assert inv.state == "queued"
    assert dict(inv.requirement or {}) == {"gpus": 1, "gpu_type": "a100", "labels": {"zone": "east"}}
    assert inv.shape is not None and inv.shape.startswith("sh1_")
    assert q.get(plain).requirement is None and q.get(plain).shape is None
    assert inv.capable_workers == 0, "no live worker offers it: no capable worker, shown"
    assert q.get(plain).capable_workers is None
    job = q.claim(wait=1)
    assert job is not None and job.id == plain, "a claim without offers takes only jobs without a requirement"
    assert q.claim(wait=0) is None, "the GPU job waits for a worker that offers a GPU"
    assert q.count("queued") == 1


def test_mode_resource_names(dispatch: HttpDispatch, qname: str) -> None:
    """``cpus`` and ``memory``, as lakeshore.yaml and the CLI name them, are taken in
    ``requires=`` and ``offers=`` beside the wire's ``cpus_milli`` and ``memory_bytes``."""
    q = SyncQueue(qname, dispatch=dispatch)
    inv = q.get(q.submit(1, requires={"cpus": 0.5, "memory": "1GiB"}))
    assert dict(inv.requirement or {}) == {"cpus_milli": 500, "memory_bytes": 1 << 30}
    assert dict(q.get(q.submit(1, requires={"cpus": "250m", "memory": 4096})).requirement or {}) == {"cpus_milli": 250, "memory_bytes": 4096}
    for bad, match in (({"cpus": "many"}, "requires.cpus"), ({"cpus": 1, "cpus_milli": 1000}, "not both"), ({"memory": "lots"}, "requires.memory")):
        with pytest.raises(InvalidError, match=match):
            q.submit(1, requires=bad)


def test_requires_is_checked(dispatch: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=dispatch)
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires={"gpus": -1})
    assert "gpus" in e.value.field
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires={"gpu": 1})
    assert e.value.field == "requires"
    with pytest.raises(InvalidError):
        q.submit(1, requires={"gpus": 1}, concurrency_key="tenant")
    # Labels that are not a mapping were a bare ValueError ("dictionary update sequence
    # element #0 …"), an integer past the wire's range an OverflowError from the encoder.
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires={"labels": "zone=east"})
    assert e.value.field == "requires.labels"
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires={"memory_bytes": 2**70})
    assert e.value.field == "requires.memory_bytes"
    # A label value that is not a string is refused as over HTTP (it was sent as its str()).
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires={"labels": {"rack": 1}})
    assert e.value.field == "requires.labels"
    with pytest.raises(InvalidError, match="concurrency_key") as e:
        q.submit(1, requires={"gpus": 1}, concurrency_key="tenant")
    assert e.value.field == "concurrency_key"
    assert q.count("queued") == 0


def test_run_worker_offers(every_plane: HttpDispatch, qname: str) -> None:
    from lakeshore import run_worker

    q = SyncQueue(qname, dispatch=every_plane)
    gpu = q.submit("gpu", requires={"gpus": 1, "gpu_type": "a100"})
    plain = q.submit("plain")
    ran: list[str] = []
    assert run_worker(every_plane, queues={qname: lambda x: ran.append(x)}, once=True, wait=1, handle_signals=False) == 1
    assert ran == ["plain"], "a worker without offers takes only jobs without a requirement"
    assert run_worker(every_plane, queues={qname: lambda x: ran.append(x)}, once=True, handle_signals=False) == 0
    assert q.get(gpu).state == "queued"
    n = run_worker(
        every_plane,
        queues={qname: lambda x: ran.append(x)},
        once=True,
        wait=1,
        handle_signals=False,
        offers={"gpus": 2, "gpu_type": "a100", "labels": {"zone": "east"}},
    )
    assert n == 1 and ran == ["plain", "gpu"]
    assert q.get(gpu).state == "succeeded" and q.get(plain).state == "succeeded"
    with pytest.raises(InvalidError) as e:
        run_worker(every_plane, queues={qname: lambda x: x}, once=True, handle_signals=False, offers={"gpu": 1})
    assert e.value.field == "offers"


def test_run_worker_bad_offers_value_fails(every_plane: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    """An offers value the server refuses (``gpus=-1``) fails run_worker with the server's
    InvalidError naming the field; it used to be taken for a payload that does not decode
    and the worker re-sent the refused claim in a tight loop, taking nothing, forever. Its
    registration, refused alike, logs no "retried" warning for a worker that then fails."""
    import threading

    from lakeshore import run_worker

    q = SyncQueue(qname, dispatch=every_plane)
    q.submit("plain")
    stop = threading.Event()
    timer = threading.Timer(10.0, stop.set)  # without the fix: the worker drains here, having raised nothing
    timer.start()
    try:
        with pytest.raises(InvalidError) as e:
            run_worker(every_plane, queues={qname: lambda x: x}, handle_signals=False, stop=stop, offers={"gpus": -1})
    finally:
        timer.cancel()
    assert e.value.field.startswith("offers"), e.value.field
    assert not stop.is_set(), "run_worker must fail at its first claim, not run until stopped"
    assert q.count("queued") == 1
    assert not [r for r in caplog.records if "registration" in r.getMessage()], caplog.text


HOST_KEY = "hk1_" + "b" * 32


def test_run_worker_warm_host_keys(every_plane: HttpDispatch, qname: str) -> None:
    """A worker warm for a host key takes that key's job before an older cold one; it
    registers its offers and warm keys; a bad key fails the worker naming the field."""
    import threading

    from lakeshore import run_worker

    q = SyncQueue(qname, dispatch=every_plane)
    q.submit("cold")
    q.submit("warm", metadata={"lakeshore.host_key": HOST_KEY})
    ran: list[str] = []
    seen: list[object] = []

    def body(x: str) -> None:
        ran.append(x)
        seen.extend(w for w in every_plane.workers() if w.queues == [qname])

    n = run_worker(
        every_plane, queues={qname: body}, once=True, wait=1, handle_signals=False, warm_host_keys=[HOST_KEY], offers={"gpus": 1}
    )
    assert n == 1 and ran == ["warm"], "the warm job goes before the older cold one"
    assert seen, "the worker registered before its body ran"
    w = seen[0]
    assert w.warm_host_keys == [HOST_KEY] and w.offers == {"gpus": 1}  # type: ignore[attr-defined]
    assert run_worker(every_plane, queues={qname: ran.append}, once=True, wait=1, handle_signals=False) == 1
    assert ran == ["warm", "cold"]
    stop = threading.Event()
    timer = threading.Timer(10.0, stop.set)
    timer.start()
    try:
        with pytest.raises(InvalidError) as e:
            run_worker(every_plane, queues={qname: ran.append}, handle_signals=False, stop=stop, warm_host_keys=["a key"])
    finally:
        timer.cancel()
    assert e.value.field == "warm_host_keys"


def test_a_new_warm_key_is_registered_at_once(every_plane: HttpDispatch, qname: str) -> None:
    """A run that makes the worker warm for a new host key is registered right after its
    preparation, not at the next refresh (every 10 s by default): `lakeshore workers` and
    the placement of the next jobs see it while the run's body still runs (found by a trial
    as a new user)."""
    import json
    import time

    from lakeshore import config, run_worker

    decl = {"gpus": 1}
    key = config.declaration_host_key(decl)
    q = SyncQueue(qname, dispatch=every_plane)
    q.submit("x", metadata={"lakeshore.run": json.dumps(decl)})
    seen: list[bool] = []

    def body(x: str) -> None:
        deadline = time.monotonic() + 5  # half the refresh interval
        while time.monotonic() < deadline:
            ws = [w for w in every_plane.workers() if w.queues == [qname]]
            if ws and key in (ws[0].warm_host_keys or []):  # type: ignore[attr-defined]
                seen.append(True)
                return
            time.sleep(0.05)

    assert run_worker(every_plane, queues={qname: body}, once=True, wait=1, handle_signals=False) == 1
    assert seen, "the new warm key was not registered while the body ran"


def test_worker_is_warm_after_setup(dispatch: HttpDispatch, qname: str) -> None:
    """The host key of a run whose set-up a worker did is one of its warm keys, most recent
    first, after those given to run_worker."""
    import json

    from lakeshore import _fabric, config, worker

    w = worker._Worker(dispatch, {qname: lambda x: x}, concurrency=1, once=True, wait=0, lease_ttl=None,
                       worker_id="w1", queue_kinds={}, warm_host_keys=["hk1_" + "a" * 32])
    assert isinstance(w.preparer, _fabric.Preparer)
    # The key is computed from the declared set-up (never the host_key a declaration states).
    one, two = {"gpus": 1, "host_key": HOST_KEY}, {"gpus": 2}
    for decl in (one, two, one):
        w.preparer.prepare(dispatch.namespace, qname, {"lakeshore.run": json.dumps(decl)})
    k1, k2 = config.declaration_host_key(one), config.declaration_host_key(two)
    assert HOST_KEY not in (k1, k2)
    assert w.warm_host_keys() == ["hk1_" + "a" * 32, k1, k2]
    assert w.cores[qname].warm is not None and w.cores[qname].warm() == w.warm_host_keys()


def test_requires_and_offers_take_the_cli_form(dispatch: HttpDispatch, qname: str) -> None:
    """``requires=`` and ``offers=`` take a string in the CLI's ``--requires``/``--offers``
    form (as ``$LAKESHORE_OFFERS``) besides a mapping; anything else is refused saying
    both forms. Found by a new user's trial: ``run_worker(offers="gpus=1")`` was iterated
    as keys and said ``invalid offers key '1'``."""
    from lakeshore import run_worker

    q = SyncQueue(qname, dispatch=dispatch)
    gpu = q.submit("gpu", requires="gpus=1,gpu_type=a100,label.zone=east")
    assert dict(q.get(gpu).requirement or {}) == {"gpus": 1, "gpu_type": "a100", "labels": {"zone": "east"}}
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires="gpu=1")
    assert e.value.field == "requires" and "unknown name" in str(e.value)
    with pytest.raises(InvalidError) as e:
        q.submit(1, requires=["gpus", 1])  # type: ignore[arg-type]
    assert e.value.field == "requires" and "gpus=1,gpu_type=a100" in str(e.value)
    ran: list[str] = []
    n = run_worker(dispatch, queues={qname: lambda x: ran.append(x)}, once=True, wait=1, handle_signals=False,
                   offers="cpus=4,memory=8GiB,gpus=2,gpu_type=a100,label.zone=east")
    assert n == 1 and ran == ["gpu"]
    with pytest.raises(InvalidError) as e:
        run_worker(dispatch, queues={qname: lambda x: x}, once=True, handle_signals=False, offers="gpus=1,gpu=2")
    assert e.value.field == "offers" and "unknown name" in str(e.value)
