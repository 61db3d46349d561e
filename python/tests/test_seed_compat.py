"""The real dreamlake-lakeshore 0.5.0 client against our ``lakeshore serve`` (issue 24 item 2).

Its ``HttpDispatch`` speaks the compatibility routes of server/compat (docs/http-api.md,
"Compatibility routes"). The package runs in its own virtual environment (``SEED_VENV``,
default /tmp/lakeshore-seed-venv; scripts/test.sh makes it): each test runs a script there
against a real ``lakeshore serve`` on a SQLite file and on PostgreSQL (a private server,
tests/pgserver.py), and values cross between the two
processes as wire bytes, so both codecs are exercised. Without the venv the tests skip with
the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError, SyncQueue, run_worker, wire
from lakeshore.queue import QueueCore

from .conftest import Server, start_server, stop_server


def _real_python() -> str:
    venv = Path(os.environ.get("SEED_VENV", "/tmp/lakeshore-seed-venv"))
    py = venv / "bin" / "python"
    why = ""
    if not py.exists():
        why = f"no {py}"
    else:
        r = subprocess.run([str(py), "-c", "import dreamlake.lakeshore, numpy"], capture_output=True, text=True)
        if r.returncode != 0:
            why = f"{py} cannot import dreamlake.lakeshore and numpy: {r.stderr.strip()[-300:]}"
    if why:
        msg = f"{why}: run sh scripts/test.sh (it makes the venv) or set SEED_VENV to one with dreamlake-lakeshore==0.5.0 and numpy"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return str(py)


@pytest.fixture(scope="module")
def real_python() -> str:
    return _real_python()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def compat_server(request: pytest.FixtureRequest, lakeshore_bin: str) -> Iterator[Server]:
    """``lakeshore serve`` with an admin token on a SQLite file, then on a schema of the
    session's private PostgreSQL server (``postgres_server``): every test of this module
    runs on both planes."""
    home = Path(tempfile.mkdtemp(prefix="lakeshore-compat-"))
    if request.param == "sqlite":
        target = str(home / "plane.db")
    else:
        pg = request.getfixturevalue("postgres_server")
        target = pg.url("compat_" + secrets.token_hex(6))
    s = start_server(lakeshore_bin, home, "adm-" + secrets.token_hex(16), target=target)
    try:
        yield s
    finally:
        stop_server(s)
        shutil.rmtree(home, ignore_errors=True)


_PRELUDE = """\
import os, sys, time
import dreamlake.lakeshore as dls
from dreamlake.lakeshore import wire
from dreamlake.lakeshore.http_dispatch import HttpDispatch
from dreamlake.lakeshore.dispatch import DispatchError
dp = HttpDispatch(os.environ["COMPAT_URL"], token=os.environ.get("COMPAT_TOKEN") or None,
                  namespace=os.environ.get("COMPAT_NS", "default"))
ARG = wire.unpack(bytes.fromhex(sys.stdin.read().strip() or "c0"))
def out(v):
    print(wire.pack(v).hex(), flush=True)
"""


def real(
    python: str,
    server: Server | None,
    script: str,
    arg: Any = None,
    *,
    token: str | None = "admin",
    namespace: str = "default",
    cwd: Path | None = None,
) -> list[Any]:
    """Run script with the real package (after _PRELUDE: ``dp``, ``ARG``, ``out``) and
    return the values it printed with ``out``, decoded by our codec. Without a server, ``dp``
    points nowhere (for scripts that use the package's local plane)."""
    env = dict(os.environ, COMPAT_URL=server.url if server else "http://127.0.0.1:1", COMPAT_NS=namespace)
    env["COMPAT_TOKEN"] = (server.admin_token if server else "") if token == "admin" else (token or "")
    env.pop("LAKESHORE_URL", None)
    r = subprocess.run(
        [python, "-c", _PRELUDE + textwrap.dedent(script)],
        input=wire.encode(arg).hex(),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return [wire.decode(bytes.fromhex(line)) for line in r.stdout.split()]


def same(want: Any, got: Any) -> bool:
    """want == got, with arrays compared by dtype and values and tuples kept tuples."""
    if isinstance(want, np.ndarray):
        return isinstance(got, np.ndarray) and want.dtype == got.dtype and want.shape == got.shape and bool(np.array_equal(want, got))
    if type(want) is not type(got):
        return False
    if isinstance(want, (list, tuple)):
        return len(want) == len(got) and all(same(a, b) for a, b in zip(want, got))
    if isinstance(want, dict):
        # Our encoder sorts a plain dict's keys (a wire.Map keeps its order): compare as maps.
        return set(want) == set(got) and all(same(want[k], got[k]) for k in want)
    return bool(want == got)


def payloads() -> list[Any]:
    """Values both codecs carry."""
    return [
        None,
        True,
        7,
        -(2**63),
        2**64 - 1,
        1.5,
        "héllo",
        b"\x00\xff",
        [1, "a", [2.5]],
        (1, (2, "b"), ()),
        {"k": (1, 2), "n": None, "zeta": 1, "alpha": 2},
        np.arange(6, dtype=np.int32).reshape(2, 3),
        np.array([1.5, -2.5]),
        {"mask": np.array([True, False]), "img": np.zeros((2, 2, 3), dtype=np.uint8)},
    ]


def test_sync_queue_submit_claim_post_ack_result_stream(real_python: str, compat_server: Server) -> None:
    """SyncQueue end to end over HttpDispatch: every payload arrives byte-for-byte, the
    posted frames stream back, the ack's result comes back, and the claim is fenced."""
    got = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-basic", dispatch=dp)
        results, streams = [], []
        for p in ARG:
            inv = q.submit(p, key=None)
            job = dp.claim("rq-basic", "worker-1")
            assert job is not None and job.id == inv and job.attempt == 1, job
            assert job.envelope == wire.pack(p), (p, job.envelope)  # stored byte-exact
            payload = wire.unpack(job.envelope)
            q.post(job.id, ("frame", payload))
            q.post(job.id, 2)
            dp.ack(job.id, "worker-1", result=wire.pack({"echo": payload}))
            assert dp.result(inv) == wire.pack({"echo": payload})  # the result too
            results.append(q.result(inv, timeout=10))
            streams.append(list(q.stream(inv, timeout=10)))
        out(results)
        out(streams)
        out(q.claim())  # the queue is empty
        """,
        payloads(),
    )
    results, streams, empty = got
    assert empty is None
    for p, r, s in zip(payloads(), results, streams):
        assert same({"echo": p}, r), (p, r)
        assert same([("frame", p), 2], s), (p, s)


def test_stream_reconnects_with_since(real_python: str, compat_server: Server) -> None:
    """The stream's cursor: since=N replays the frames after N, then live frames, and the
    stream ends after the ack (the journal closes with the invocation)."""
    got = real(
        real_python,
        compat_server,
        """
        import threading
        q = dls.SyncQueue("rq-since", dispatch=dp)
        inv = q.submit("go")
        job = q.claim()
        for i in range(3):
            q.post(job.id, i)
        def finish():
            time.sleep(0.5)
            q.post(job.id, 3)
            q.ack(job, "done")
        threading.Thread(target=finish).start()
        out([seq for seq, _ in dp.journal_read(inv, since=-1, timeout=10)])
        out(list(q.stream(inv, since=1, timeout=10)))
        out(q.result(inv))
        """,
    )
    assert got == [[0, 1, 2, 3, 4], [2, 3], "done"]


def test_topics_by_name(real_python: str, compat_server: Server) -> None:
    """Topic.post / stream / listen over the journal, named by the real package's names."""
    got = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-topic", dispatch=dp)
        t = q.topic("progress-1")
        for v in ARG:
            t.post(v)
        out(t.listen(since=-1, timeout=5))
        out(t.listen(since=0, timeout=5))
        t.post(None, final=True)
        out(list(t.stream(timeout=5)))
        anon = q.topic()
        anon.post({"step": 1})
        anon.post(None, final=True)
        out(list(anon.stream(timeout=5)))
        """,
        [1, (2, "x"), {"k": [3]}],
    )
    assert got[0] == 1 and got[1] == (2, "x")
    assert got[2] == [1, (2, "x"), {"k": [3]}]
    assert got[3] == [{"step": 1}]


def test_run_worker_runs_udfs_and_thunks(real_python: str, compat_server: Server, tmp_path: Path) -> None:
    """@udf (sync, generator, raising) and a thunk submitted by the real package and run by
    its run_worker against serve; a generator's frames stream; a failure reaches result and
    stream; run_worker(once=True) on the empty queue returns 0 at once."""
    (tmp_path / "compatjobs.py").write_text(
        textwrap.dedent(
            """
            import dreamlake.lakeshore as dls

            @dls.udf(queue="rq-udf")
            def add(a, b):
                return (a + b, "sum")

            @dls.udf(queue="rq-udf")
            def count(n):
                for i in range(n):
                    yield [f"k{i}"]

            @dls.udf(queue="rq-udf")
            def boom():
                raise ValueError("nope")
            """
        )
    )
    got = real(
        real_python,
        compat_server,
        """
        import compatjobs
        q = dls.SyncQueue("rq-udf", dispatch=dp)
        a = compatjobs.add.submit(2, 3, _dispatch=dp)
        g = compatjobs.count.submit(3, _dispatch=dp)
        b = compatjobs.boom.submit(_dispatch=dp)
        t = q.submit(dls.thunk(lambda: 40 + 2))
        ran = [dls.run_worker(q, once=True), dls.run_worker(q, once=True),
               dls.run_worker(q, once=True, retries=0), dls.run_worker(q, once=True, allow_pickled=True)]
        out(ran)
        out(q.result(a, timeout=10))
        out([q.result(g, timeout=10), list(q.stream(g, timeout=10))])
        out(q.result(t, timeout=10))
        try:
            q.result(b, timeout=10)
            out("no error")
        except DispatchError as e:
            out(str(e))
        try:
            list(q.stream(b, timeout=10))
            out("no error")
        except DispatchError as e:
            out(str(e))
        start = time.monotonic()
        out([dls.run_worker(q, once=True), time.monotonic() - start])
        """,
        cwd=tmp_path,
    )
    ran, added, (gen_result, gen_frames), thunked, failed, stream_failed, (empty, took) = got
    assert ran == [1, 1, 1, 1]
    assert added == (5, "sum")
    assert gen_result == ["k0", "k1", "k2"] and gen_frames == [["k0"], ["k1"], ["k2"]]
    assert thunked == 42
    assert "ValueError: nope" in failed
    assert "ValueError: nope" in stream_failed
    assert empty == 0 and took < 5  # one poll of timeout_s=1


def test_async_queue(real_python: str, compat_server: Server) -> None:
    """The async spelling (dls.Queue) over HttpDispatch."""
    got = real(
        real_python,
        compat_server,
        """
        import asyncio
        async def main():
            q = dls.Queue("rq-async", dispatch=dp)
            inv = await q.submit((1, "a"))
            sq = dls.SyncQueue("rq-async", dispatch=dp)
            job = sq.claim()
            sq.ack(job, [job.payload, "ok"])
            return await q.result(inv, timeout=10)
        out(asyncio.run(main()))
        """,
    )
    assert got == [[(1, "a"), "ok"]]


def test_real_producer_with_our_worker(real_python: str, compat_server: Server) -> None:
    """A mixed fleet: the real package submits every shared payload type; our Python worker
    (over our own routes) runs them; the real package reads the results."""
    queue = "rq-mixed-ours"
    ids = real(
        real_python,
        compat_server,
        f"""
        q = dls.SyncQueue("{queue}", dispatch=dp)
        out([q.submit(p) for p in ARG])
        """,
        payloads(),
    )[0]
    seen: list[Any] = []

    def handler(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0] if args else (kwargs if kwargs else None))
        return ["ours", list(args), kwargs]

    d = HttpDispatch(compat_server.url, token=compat_server.admin_token)
    try:
        for _ in ids:
            assert run_worker(d, queues={queue: handler}, once=True, wait=10, handle_signals=False) == 1
    finally:
        d.close()
    for p, s in zip(payloads(), seen):
        assert same(p, s), (p, s)
    results = real(real_python, compat_server, "q = dls.SyncQueue(%r, dispatch=dp)\nout([q.result(i, timeout=10) for i in ARG])\n" % queue, ids)[0]
    for p, r in zip(payloads(), results):
        if isinstance(p, dict):
            want: Any = ["ours", [], p]
        elif p is None:
            want = ["ours", [], {}]
        else:
            want = ["ours", [p], {}]
        assert same(want, r), (p, r)


def test_our_producer_with_real_worker(real_python: str, compat_server: Server) -> None:
    """The other mixed fleet: our SyncQueue submits every shared payload type; the real
    package claims, posts a frame and acks each; our side reads results and streams."""
    queue = "rq-mixed-real"
    d = HttpDispatch(compat_server.url, token=compat_server.admin_token)
    try:
        q = SyncQueue(queue, dispatch=d)
        ids = [q.submit(p) for p in payloads()]
        done = real(
            real_python,
            compat_server,
            f"""
            q = dls.SyncQueue("{queue}", dispatch=dp)
            n, deadline = 0, time.monotonic() + 30
            while n < ARG and time.monotonic() < deadline:
                job = q.claim()
                if job is None:
                    continue
                q.post(job.id, ("seen", job.payload))
                q.ack(job, ["real", job.payload])
                n += 1
            out(n)
            """,
            len(ids),
        )
        assert done == [len(ids)]
        for p, inv in zip(payloads(), ids):
            assert same(["real", p], q.result(inv, timeout=10)), p
            assert same([("seen", p)], list(q.stream(inv, timeout=10))), p
    finally:
        d.close()


def test_fencing_and_auth(real_python: str, compat_server: Server) -> None:
    """The ack is fenced by the poll's token: a job killed while held answers lease_lost
    (409) to the real worker's ack. Tokens: none is 401; a namespace's token submits and
    works in its namespace (the daemon routes take the token's namespace) and cannot read
    another namespace's invocation."""
    admin = {"Authorization": f"Bearer {compat_server.admin_token}"}
    # The kill happens between the claim and the ack: run the two halves as two scripts,
    # the ack half with a fresh HttpDispatch (the server, not the client, holds the token).
    inv = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-fence", dispatch=dp)
        inv = q.submit(1)
        job = dp.claim("rq-fence", "worker-a")
        assert job.id == inv
        out(inv)
        """,
    )[0]
    r = httpx.post(f"{compat_server.url}/v1/invocations/{inv}/kill", headers=admin)
    assert r.status_code == 200, r.text
    acked = real(
        real_python,
        compat_server,
        """
        try:
            dp.ack(ARG, "worker-a", result=wire.pack("late"))
            out("acked")
        except DispatchError as e:
            out(str(e))
        """,
        inv,
    )[0]
    assert "409" in acked and "lease_lost" in acked

    never = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-fence", dispatch=dp)
        inv = q.submit(2)
        try:
            dp.ack(inv, "w", result=wire.pack("unclaimed"))
            out("acked")
        except DispatchError as e:
            out(str(e))
        """,
    )[0]
    assert "409" in never

    unauth = real(
        real_python,
        compat_server,
        """
        try:
            dls.SyncQueue("rq-auth", dispatch=dp).submit(1)
            out("submitted")
        except DispatchError as e:
            out(str(e))
        """,
        token=None,
    )[0]
    assert "401" in unauth

    team = compat_server.token("*", "submit,consume,read", namespace="team")
    own = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-team", dispatch=dp)
        inv = q.submit({"team": 1})
        job = q.claim()
        q.ack(job, job.payload)
        out([inv, q.result(inv, timeout=10)])
        """,
        token=team,
        namespace="team",
    )[0]
    assert own[1] == {"team": 1}
    r = httpx.get(f"{compat_server.url}/v1/invocations/{own[0]}", headers=admin)
    assert r.status_code == 200 and r.json()["namespace"] == "team", r.text

    other = compat_server.token("*", "submit,consume,read", namespace="other")
    leaked = real(
        real_python,
        compat_server,
        """
        for ns in ("other", "team"):
            d = HttpDispatch(os.environ["COMPAT_URL"], token=os.environ["COMPAT_TOKEN"], namespace=ns)
            try:
                out(d.get(ARG))
            except DispatchError as e:
                out(str(e))
        """,
        own[0],
        token=other,
    )
    assert all("404" in answer for answer in leaked), leaked


def test_a_busy_real_worker_keeps_its_job(real_python: str, compat_server: Server) -> None:
    """A job claimed through poll holds a lease the real worker never heartbeats; the job
    stays running (not re-queued) while the worker is busy and acks fine afterwards. (The
    extension on poll and post past a short lease: server/compat's TestLeaseExtendedByPollAndPost.)"""
    got = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-lease", dispatch=dp)
        inv = q.submit("slow")
        job = q.claim()
        for i in range(3):
            q.post(job.id, i)
            time.sleep(0.2)
        out(dp.get(inv)["state"])
        q.ack(job, "ok")
        out(q.result(inv, timeout=10))
        """,
    )
    assert got == ["running", "ok"]


def test_routes_answer_typed_errors(compat_server: Server) -> None:
    """Bad bodies are 400 with our error body, never a 5xx."""
    admin = {"Authorization": f"Bearer {compat_server.admin_token}", "Content-Type": "application/x-msgpack"}
    for path, body in [
        ("/v1/namespaces/default/producer/submit", b"\x01"),
        ("/v1/namespaces/default/producer/submit", wire.encode({"queue": "bad queue!", "args_blob": b"\xc0"})),
        ("/v1/daemon/result-chunk", wire.encode({"invocation_id": "topic-x", "seq": 0, "bytes": b"\x93\x00\x00\x00"})),
        ("/v1/daemon/ack", wire.encode({"invocation_id": "nope", "state": "succeeded"})),
    ]:
        r = httpx.post(compat_server.url + path, content=body, headers=admin)
        assert r.status_code == 400, (path, r.status_code, r.text)
        error = wire.decode(r.content) if "msgpack" in r.headers["content-type"] else r.json()
        assert error["code"] == "invalid", error


def test_once_on_an_empty_queue_returns_at_once(
    real_python: str, every_plane: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24 semantics 3, side by side: ``run_worker(…, once=True)`` on an empty queue
    returns 0 at once in the real package (its local plane) and in ours (every plane); a job
    already queued is still run."""
    got = real(
        real_python,
        None,
        """
        import tempfile
        local = dls.Dispatch(os.path.join(tempfile.mkdtemp(), "plane.db"))
        start = time.monotonic()
        out([dls.run_worker(dls.SyncQueue("idle", dispatch=local), once=True), time.monotonic() - start])
        """,
        token=None,
    )[0]
    assert got[0] == 0 and got[1] < 1, got

    def never() -> None:
        raise AssertionError("never called")

    # One claim without a long-poll (the real package: 0.00 s): seen in the wait the claim
    # asks for, not in how fast a loaded machine answers it.
    waits: list[float] = []
    claim = QueueCore.claim

    async def spy(self: QueueCore, wait: float, lease_ttl: float | None, worker: str | None) -> Any:
        waits.append(wait)
        return await claim(self, wait, lease_ttl, worker)

    monkeypatch.setattr(QueueCore, "claim", spy)
    assert run_worker(every_plane, queues={qname: never}, once=True, handle_signals=False) == 0
    assert waits == [0], waits
    monkeypatch.undo()
    SyncQueue(qname, dispatch=every_plane).submit(None)
    assert run_worker(every_plane, queues={qname: lambda: "ran"}, once=True, handle_signals=False) == 1


_GENERATORS = """
def keys():
    yield ["k0"]
    yield "k1"
    yield ("k2", "k3")

def named():
    yield {"a": "x"}
    yield {"b": "y"}

def keys_then_named():
    yield "k0"
    yield {"b": "y"}

def data():
    yield 0
    yield 1

def keys_then_data():
    yield "k0"
    yield 1

def nothing():
    return
    yield

async def async_keys():
    yield ["k0"]
    yield "k1"
"""
_GENERATOR_NAMES = ["keys", "named", "keys_then_named", "data", "keys_then_data", "nothing", "async_keys"]


def test_a_generator_result_is_its_key_manifest(real_python: str, every_plane: HttpDispatch, qname: str, tmp_path: Path) -> None:
    """Issue 24 semantics 2, side by side: a generator body that returns nothing has the
    real package's result — its yields' key manifest, or None for a data stream — in both
    SDKs; ours keeps a generator's own ``return`` value."""
    (tmp_path / "compatgens.py").write_text(
        "import dreamlake.lakeshore as dls\n"
        + _GENERATORS.replace("\ndef ", "\n@dls.udf(queue='gens')\ndef ").replace("\nasync def ", "\n@dls.udf(queue='gens')\nasync def ")
    )
    theirs = real(
        real_python,
        None,
        f"""
        import tempfile, compatgens
        local = dls.Dispatch(os.path.join(tempfile.mkdtemp(), "plane.db"))
        q = dls.SyncQueue("gens", dispatch=local)
        results = []
        for name in {_GENERATOR_NAMES!r}:
            inv = getattr(compatgens, name).submit(_dispatch=local)
            assert dls.run_worker(q, once=True) == 1
            results.append(q.result(inv, timeout=10))
        out(results)
        """,
        token=None,
        cwd=tmp_path,
    )[0]
    namespace: dict[str, Any] = {}
    exec(_GENERATORS, namespace)
    ours = []
    q = SyncQueue(qname, dispatch=every_plane)
    for name in _GENERATOR_NAMES:
        inv = q.submit(None)
        assert run_worker(every_plane, queues={qname: namespace[name]}, once=True, wait=10, handle_signals=False) == 1
        ours.append(q.result(inv, timeout=10))
    assert theirs == [["k0", "k1", "k2", "k3"], {"a": "x", "b": "y"}, ["k0", "y"], None, None, None, ["k0", "k1"]]
    assert ours == theirs

    def returns() -> Generator[str, None, str]:
        yield "k0"
        return "returned"

    inv = q.submit(None)
    assert run_worker(every_plane, queues={qname: returns}, once=True, wait=10, handle_signals=False) == 1
    assert q.result(inv, timeout=10) == "returned"


def test_two_replicas_on_one_postgres(real_python: str, lakeshore_bin: str, postgres_server: Any) -> None:
    """Two ``lakeshore serve`` processes on one PostgreSQL schema serve the real client as
    one: a job polled on one replica is streamed (its END ends the journal) and acked on the
    other, because the poll's lease is kept in the plane (server/compat's LeaseQueue), not
    in the memory of the replica that took it."""
    target = postgres_server.url("replicas_" + secrets.token_hex(6))
    admin = "adm-" + secrets.token_hex(16)
    homes = [Path(tempfile.mkdtemp(prefix="lakeshore-replica-")) for _ in range(2)]
    servers = [start_server(lakeshore_bin, home, admin, target=target) for home in homes]
    try:
        a, b = servers
        inv = real(
            real_python,
            a,
            """
            q = dls.SyncQueue("rq-replicas", dispatch=dp)
            inv = q.submit({"n": 2})
            job = dp.claim("rq-replicas", "worker-a")
            assert job.id == inv
            out(inv)
            """,
        )[0]
        got = real(
            real_python,
            b,  # the other replica: frames, END and the ack
            """
            inv = ARG
            for seq, v in enumerate(["s0", "s1"]):
                dp.journal_append(inv, seq, wire.Frame(wire.FrameKind.VALUE, seq, v).to_bytes())
            dp.journal_append(inv, 2, wire.Frame(wire.FrameKind.END, 2).to_bytes(), final=True)
            dp.ack(inv, "worker-a", result=wire.pack("done"))
            q = dls.SyncQueue("rq-replicas", dispatch=dp)
            out([wire.unpack(dp.result(inv, timeout=10)), list(q.stream(inv))])
            """,
            inv,
        )[0]
        assert got == ["done", ["s0", "s1"]]
        streamed = real(real_python, a, "q = dls.SyncQueue('rq-replicas', dispatch=dp)\nout(list(q.stream(ARG)))\n", inv)[0]
        assert streamed == ["s0", "s1"]
    finally:
        for s in servers:
            stop_server(s)
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def test_real_udf_jobs_run_on_our_worker(real_python: str, compat_server: Server, tmp_path: Path) -> None:
    """A mixed fleet with functions (issue 24): the real package's ``@udf`` submits its
    Envelope (docs/wire.md) and our ``run_worker`` runs it with the envelope's args and
    kwargs on the function bound to the queue; the real client reads the result (a tuple
    stays a tuple) and the journal of a generator body."""
    (tmp_path / "compatudfs.py").write_text(
        textwrap.dedent(
            """
            import dreamlake.lakeshore as dls

            @dls.udf(queue="rq-udf-ours")
            def add(a, b, scale=1):
                return (a + b) * scale

            @dls.udf(queue="rq-udf-ours-gen")
            def count(n):
                for i in range(n):
                    yield [f"k{i}"]
            """
        )
    )
    ids = real(
        real_python,
        compat_server,
        """
        import compatudfs
        out([compatudfs.add.submit(2, 3, scale=10, _dispatch=dp), compatudfs.add.submit((1,), (2,), _dispatch=dp),
             compatudfs.count.submit(2, _dispatch=dp)])
        """,
        cwd=tmp_path,
    )[0]

    def ours_add(a: Any, b: Any, scale: int = 1) -> Any:
        return a + b if scale == 1 else (a + b) * scale

    def ours_count(n: int) -> Iterator[list[str]]:
        for i in range(n):
            yield [f"k{i}"]

    d = HttpDispatch(compat_server.url, token=compat_server.admin_token)
    try:
        for _ in range(2):
            assert run_worker(d, queues={"rq-udf-ours": ours_add}, once=True, wait=10, handle_signals=False) == 1
        assert run_worker(d, queues={"rq-udf-ours-gen": ours_count}, once=True, wait=10, handle_signals=False) == 1
    finally:
        d.close()
    got = real(
        real_python,
        compat_server,
        """
        q = dls.SyncQueue("rq-udf-ours", dispatch=dp)
        g = dls.SyncQueue("rq-udf-ours-gen", dispatch=dp)
        out([q.result(ARG[0], timeout=10), q.result(ARG[1], timeout=10), list(g.stream(ARG[2], timeout=10))])
        """,
        ids,
    )[0]
    assert got[0] == 50 and got[1] == (1, 2) and type(got[1]) is tuple
    assert got[2] == [["k0"], ["k1"]]


def test_our_envelope_jobs_run_on_both_workers(
    real_python: str, compat_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other direction (issue 24): our producer submits ``dreamlake_envelope(fn, …)``
    (the package's Envelope, ``fn`` by module and qualname) and the real ``run_worker``
    runs it; the same payload runs on our own worker's thunks-only queue too."""
    (tmp_path / "ourfns.py").write_text("def mul(a, b, tag='x'):\n    return (a * b, tag)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from lakeshore import dreamlake_envelope

    d = HttpDispatch(compat_server.url, token=compat_server.admin_token)
    try:
        q = SyncQueue("rq-env-real", dispatch=d)
        theirs = q.submit(dreamlake_envelope("ourfns:mul", 6, 7, tag="real"))
        ran = real(
            real_python,
            compat_server,
            "q = dls.SyncQueue('rq-env-real', dispatch=dp)\nout(dls.run_worker(q, once=True))\n",
            cwd=tmp_path,
        )[0]
        assert ran == 1
        assert q.result(theirs, timeout=10) == (42, "real")
        ours = SyncQueue("rq-env-ours", dispatch=d)
        mine = ours.submit(dreamlake_envelope("ourfns:mul", 2, 3))
        assert run_worker(d, queues=["rq-env-ours"], once=True, wait=10, handle_signals=False) == 1
        assert ours.result(mine, timeout=10) == (6, "x")
    finally:
        d.close()
    with pytest.raises(InvalidError):
        dreamlake_envelope(lambda: 1)
