"""Rollouts as jobs (lakeshore.rl) on every plane, and the end-to-end example examples/rl/
with its trainer SIGKILLed mid-run and restarted (issue 26, items 8 and 9)."""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError, PutIDReusedError, Scope, run_worker, udf
from lakeshore.data import WEIGHT_VERSION, Backpressure, KVInterface, Queue
from lakeshore.rl import Policy, RolloutPool, Weights, _written_before, rollout
from tests.conftest import PLANES, Planes, Server

pytest.importorskip("pyarrow")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=PLANES)
def d(request: pytest.FixtureRequest, planes: Planes) -> HttpDispatch:
    return planes.get(str(request.param))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_rollout_jobs_tag_their_version_and_reload_weights(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    store = Scope(qname, store=str(tmp_path))
    loads: list[int] = []

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store)
    def play(policy: Policy, n: int, tag: str) -> Iterator[dict[str, Any]]:
        loads.append(policy.version)
        for i in range(n):
            yield {"tag": tag, "i": i, "scale": float(policy.weights["scale"][0])}

    q = Queue(f"{qname}-traj", dispatch=d)
    weights = Weights(q, store)

    async def publish(v: int, scale: float) -> None:
        await weights.publish(v, {"scale": np.array([scale])})

    run(publish(0, 1.0))
    assert weights.exists(0) and not weights.exists(1)
    play.submit(n=3, tag="a")
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    run(publish(1, 2.0))
    run(publish(1, 2.0))  # a restarted trainer's repeat: harmless
    with pytest.raises(InvalidError):
        run(publish(0, 9.0))  # versions never go back
    for tag in ("b", "c"):
        play.submit(n=2, tag=tag)
        assert run_worker(d, queues=[play], once=True, wait=10) == 1

    async def read() -> Any:
        return await q.reader().get_batch(["tag", "scale", WEIGHT_VERSION], 16, "t", wait=False)

    b = run(read())
    assert b["tag"].tolist() == ["a"] * 3 + ["b"] * 2 + ["c"] * 2
    assert b[WEIGHT_VERSION].tolist() == [0, 0, 0, 1, 1, 1, 1]  # tagged with the job's version
    assert b["scale"].tolist() == [1.0] * 3 + [2.0] * 4  # the weights of that version
    assert run(weights.current()).version == 1
    assert loads == [0, 1, 1]
    # The results say what each job put.
    jq = play.queue(d)
    results = [jq.result(i.id, timeout=10) for i in jq.list(state="succeeded", oldest=True).invocations]
    assert results == [{"records": 3, "weight_version": 0}, {"records": 2, "weight_version": 1}, {"records": 2, "weight_version": 1}]


def test_an_async_rollout_and_flush_every(planes: Planes, qname: str, tmp_path: Path) -> None:
    d = planes.get("memory")
    store = Scope(qname, store=str(tmp_path))
    sizes: list[int] = []

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store, flush_every=2,
             partition_id="rollouts")
    async def play(policy: Policy, n: int) -> Any:
        q = Queue(f"{qname}-traj", dispatch=d)
        for i in range(n):
            sizes.append(int((await q.stats())["len"]))  # what earlier yields already put
            yield {"i": i}

    run(Weights(Queue(f"{qname}-traj", dispatch=d), store).publish(4, b"raw bytes"))
    inv = play.submit(n=5)
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    assert play.queue(d).result(inv, timeout=10) == {"records": 5, "weight_version": 4}
    assert sizes == [0, 0, 2, 2, 4]  # sent every 2 records (the fifth at the end)

    async def read() -> Any:
        return await Queue(f"{qname}-traj", dispatch=d).get(10, partition_id="rollouts")

    assert [(r["i"], r[WEIGHT_VERSION]) for r in run(read())] == [(i, 4) for i in range(5)]


def test_a_retried_rollout_does_not_put_its_records_twice(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    # Attempt 1 puts its first chunk (flush_every=2), then dies; attempt 2 runs fn again.
    # Each chunk's put id is the job's id and the chunk's number, so the chunk attempt 1
    # wrote is answered with its indexes, not written again: every record once. Before
    # 2026-12-07 each attempt drew random put ids and records 0 and 1 were written twice.
    store = Scope(qname, store=str(tmp_path))
    attempts: list[int] = []

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store, flush_every=2,
             max_attempts=2)
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        attempts.append(seed)
        for i in range(5):
            yield {"seed": seed, "i": i}
            if i == 2 and len(attempts) == 1:
                raise RuntimeError("worker lost after its first put")

    q = Queue(f"{qname}-traj", dispatch=d)
    run(Weights(q, store).publish(0, b"w"))
    inv = play.submit(seed=7)
    assert run_worker(d, queues=[play], once=True, wait=10) == 1  # attempt 1: fails
    assert run(q.stats())["len"] == 2  # its first chunk was written
    assert run_worker(d, queues=[play], once=True, wait=30) == 1  # attempt 2
    assert play.queue(d).result(inv, timeout=10) == {"records": 5, "weight_version": 0}

    async def read() -> Any:
        return await q.get(100)

    assert [r["i"] for r in run(read())] == [0, 1, 2, 3, 4]


def test_rollouts_called_inline_by_another_job_write_every_record(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    # A job of another queue that calls a rollout inline twice (UDF.__call__ runs it here):
    # the put ids of a rollout job's own puts (rollout.{job id}.{k}) were taken from the
    # running job whatever it was, so both calls put under rollout.{driver job}.0 and the
    # second was answered with the first's index: its record was never written, and the
    # call reported it put.
    store = Scope(qname, store=str(tmp_path))

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store)
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        yield {"seed": seed}

    @udf(queue=f"{qname}-drive", dispatch=d)
    def drive() -> list[Any]:
        return [play(seed=1), play(seed=2)]

    q = Queue(f"{qname}-traj", dispatch=d)
    run(Weights(q, store).publish(0, b"w"))
    inv = drive.submit()
    assert run_worker(d, queues=[drive], once=True, wait=10) == 1
    assert drive.queue(d).result(inv, timeout=10) == [{"records": 1, "weight_version": 0}] * 2

    async def read() -> Any:
        return await q.get(100)

    assert sorted(r["seed"] for r in run(read())) == [1, 2]


_SELF_KILLING_ROLLOUT = """
import os, signal, sys
from pathlib import Path
from lakeshore import HttpDispatch, Scope, run_worker
from lakeshore.rl import rollout

url, token, qname, blobs, marker = sys.argv[1:6]
d = HttpDispatch(url, token=token)

@rollout(queue=qname + "-jobs", data_queue=qname + "-traj", dispatch=d, scope=Scope(qname, store=blobs),
         flush_every=2, max_attempts=3, lease_ttl=1)
def play(policy, seed):
    for i in range(5):
        yield {"seed": seed, "i": i}
        if i == 2 and not Path(marker).exists():
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)  # records 0 and 1 are put: killed mid-job

print(run_worker(d, queues=[play], once=True, wait=30, handle_signals=False))
"""


def test_a_rollout_worker_sigkilled_after_a_put_writes_no_record_twice(
    lakeshore_bin: str, server: Server, qname: str, tmp_path: Path
) -> None:
    """A rollout worker process SIGKILLed after its job's first chunk was put, on a
    ``lakeshore serve``: the job's retry (after the dead worker's lease) in a second worker
    process writes the rest, and every record is in the data queue once."""
    d = HttpDispatch(server.url, token=server.admin_token)
    store = Scope(qname, store=str(tmp_path / "blobs"))
    q = Queue(f"{qname}-traj", dispatch=d)
    run(Weights(q, store).publish(0, b"w"))
    args = [sys.executable, "-c", _SELF_KILLING_ROLLOUT, server.url, server.admin_token, qname, str(tmp_path / "blobs"),
            str(tmp_path / "killed")]
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, PYTHONPATH=os.pathsep.join(sys.path))

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store)
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        yield {}  # only to submit: the children run the jobs

    inv = play.submit(seed=3)
    first = subprocess.run(args, env=env, capture_output=True, timeout=120)
    assert first.returncode == -signal.SIGKILL, first.stderr.decode()
    assert run(q.stats())["len"] == 2  # the first chunk was written before the kill
    second = subprocess.run(args, env=env, capture_output=True, timeout=120)
    assert second.returncode == 0 and second.stdout.strip() == b"1", second.stderr.decode()
    assert play.queue(d).result(inv, timeout=10) == {"records": 5, "weight_version": 0}

    async def read() -> Any:
        return await q.get(100)

    assert [(r["seed"], r["i"]) for r in run(read())] == [(3, i) for i in range(5)]
    d.close()


def test_a_rollout_whose_retry_puts_another_count_keeps_the_first_attempts_chunk(
    d: HttpDispatch, qname: str, tmp_path: Path
) -> None:
    # A rollout whose records vary between attempts (an episode of another length): the
    # chunk attempt 1 wrote stands, the retry's chunk of the same number is not written
    # (the server refuses a put id repeated with another count), and the job succeeds.
    store = Scope(qname, store=str(tmp_path))
    attempts: list[int] = []

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store, flush_every=3,
             max_attempts=2)
    def play(policy: Policy) -> Iterator[dict[str, Any]]:
        attempts.append(1)
        first = len(attempts) == 1
        for i in range(3 if first else 2):
            yield {"attempt": len(attempts), "i": i}
        if first:
            raise RuntimeError("lost after its put")

    q = Queue(f"{qname}-traj", dispatch=d)
    run(Weights(q, store).publish(0, b"w"))
    inv = play.submit()
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    assert run_worker(d, queues=[play], once=True, wait=30) == 1
    assert play.queue(d).result(inv, timeout=10) == {"records": 2, "weight_version": 0}

    async def read() -> Any:
        return await q.get(100)

    assert [(r["attempt"], r["i"]) for r in run(read())] == [(1, 0), (1, 1), (1, 2)]


def test_only_a_reused_put_id_counts_as_written_before(d: HttpDispatch, qname: str) -> None:
    # @rollout drops a batch the server refused only when its put id names an earlier put
    # of another count (put_id_reused: an earlier attempt's records stand). Before
    # 2026-12-07 it took any invalid put_id so, and a put id refused for its form (too
    # long, bad characters) dropped the records while the job reported them written.
    q = Queue(f"{qname}-traj", dispatch=d, batch_size=1 << 30, auto_flush_interval_sec=0)

    async def flush_with(put_id: str, n: int) -> None:
        q._next_put_id = lambda: put_id
        for i in range(n):
            await q.put({"i": i})
        await q.flush()

    run(flush_with("rollout.J.0", 2))
    with pytest.raises(InvalidError) as reused:
        run(flush_with("rollout.J.0", 3))
    assert isinstance(reused.value, PutIDReusedError) and reused.value.code == "put_id_reused"
    assert reused.value.status == 409 and reused.value.field == "put_id" and reused.value.value == "rollout.J.0"
    assert _written_before(reused.value)
    for bad in ("r" * 129, "rollout.a b.0"):
        with pytest.raises(InvalidError) as refused:
            run(flush_with(bad, 1))
        assert not isinstance(refused.value, PutIDReusedError) and refused.value.field == "put_id"
        assert not _written_before(refused.value), bad
    assert run(q.stats())["len"] == 2


def test_a_rollout_held_by_backpressure_waits_for_the_trainer(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    @rollout(
        queue=f"{qname}-jobs",
        data_queue=f"{qname}-traj",
        dispatch=d,
        scope=Scope(qname, store=str(tmp_path)),
        backpressure=Backpressure(task_name="train", max_unconsumed=4, on_full="block", timeout=3600),
        lease_ttl=3.0,  # heartbeats every second: a kill is noticed within one
    )
    def play(policy: Policy, n: int) -> Iterator[dict[str, Any]]:
        for i in range(n):
            yield {"i": i}

    q = Queue(f"{qname}-traj", dispatch=d)
    play.submit(n=4)
    assert run_worker(d, queues=[play], once=True, wait=10) == 1  # an empty buffer: admitted
    inv = play.submit(n=2)
    done = threading.Event()
    t = threading.Thread(target=lambda: (run_worker(d, queues=[play], once=True, wait=10), done.set()), daemon=True)
    t.start()
    jq = play.queue(d)
    deadline = time.monotonic() + 30
    while jq.get(inv).state != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    # Held past several of the put's block timeouts: still running, not failed.
    time.sleep(1.0)
    assert jq.get(inv).state == "running" and not done.is_set()
    assert run(q.stats())["len"] == 4

    async def consume() -> int:
        return (await q.reader().get_meta(["i"], 4, "train", wait=False)).size

    assert run(consume()) == 4
    assert jq.result(inv, timeout=30) == {"records": 2, "weight_version": 0}
    t.join(30)
    assert run(q.stats())["len"] == 6

    # A held rollout that is killed stops about a second after its worker notices (at the
    # next heartbeat): its put waits on the server a second at a time, though its
    # Backpressure's timeout is an hour.
    held = play.submit(n=3)  # 2 unconsumed + 3 > 4: held
    t = threading.Thread(target=run_worker, args=(d,), kwargs={"queues": [play], "once": True, "wait": 10}, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while jq.get(held).state != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jq.kill(held)
    t.join(8)
    assert not t.is_alive(), "the killed rollout's body did not stop"
    assert run(q.stats())["len"] == 6


def test_rollout_pool_keeps_n_in_flight(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=Scope(qname, store=str(tmp_path)))
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        yield {"seed": seed}

    pool = RolloutPool.for_window(play, max_unconsumed=100, records_per_job=32, payload=lambda i: {"seed": i})
    assert pool.in_flight == 3
    assert RolloutPool.for_window(play, max_unconsumed=8, records_per_job=32, payload=lambda i: {"seed": i}).in_flight == 1
    with pytest.raises(InvalidError):
        RolloutPool(play, 0, lambda i: {"seed": i})
    with pytest.raises(InvalidError):
        RolloutPool.for_window(play, 8, 0, lambda i: {"seed": i})

    async def top_up() -> list[str]:
        return await pool.top_up()

    assert len(run(top_up())) == 3
    assert run(top_up()) == []  # already 3 in flight
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    assert len(run(top_up())) == 1  # the finished one is replaced, as job 3
    assert run(pool.live()) == (3, 4)
    assert sorted(play.queue(d).get(i.id).key for i in play.queue(d).list().invocations) == [f"rollout-{i}" for i in range(4)]
    assert run(pool.stop()) == 3
    assert run(pool.live())[0] == 0


def test_rollout_pool_numbers_jobs_on_past_trimmed_ones(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    # After finished jobs are trimmed (POST /v1/trim, or the plane's retention) the next job's
    # number goes on from the highest one. On the old code it was the count of the queue's
    # jobs, which the trim had lowered: job 1's payload (its seed) was submitted again.
    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=Scope(qname, store=str(tmp_path)))
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        yield {"seed": seed}

    pool = RolloutPool(play, 2, lambda i: {"seed": i})
    assert len(run(pool.top_up())) == 2
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    assert len(run(pool.top_up())) == 2  # rollout-2 and rollout-3
    assert run_worker(d, queues=[play], once=True, wait=10) == 1
    trim = {"namespace": d.namespace, "queue": f"{qname}-jobs", "finished_before": datetime.datetime(2999, 1, 1, tzinfo=datetime.timezone.utc)}
    ans = run(d.run_async(d._transport.call("POST", "/v1/trim", body=trim)))
    assert ans["deleted"] == 3
    (new,) = run(pool.top_up())
    assert play.queue(d).get(new).key == "rollout-4"


def test_rollout_takes_a_compute_mode_and_requirements(d: HttpDispatch, qname: str, tmp_path: Path) -> None:
    """@rollout forwards mode= and requires= to its udf, as @udf takes them (docs/fabric.md):
    a rollout that needs a GPU worker, or runs in a compute mode that ships its code, is
    declared where it is bound. Before 2026-12-07 @rollout took neither (a TypeError), and
    only each submit's _mode= could say it."""
    store = Scope(qname, store=str(tmp_path))

    @rollout(queue=f"{qname}-jobs", data_queue=f"{qname}-traj", dispatch=d, scope=store, requires="cpus=2")
    def play(policy: Policy) -> Iterator[dict[str, Any]]:
        yield {"x": 1}

    run(Weights(Queue(f"{qname}-traj", dispatch=d), store).publish(0, b"w"))
    inv = play.submit()
    assert run_worker(d, queues=[play], once=True, handle_signals=False) == 0  # offers nothing: not for it
    assert run_worker(d, queues=[play], once=True, handle_signals=False, offers="cpus=4") == 1
    assert play.queue(d).result(inv, timeout=10) == {"records": 1, "weight_version": 0}

    @rollout(data_queue=f"{qname}-traj", dispatch=d, scope=store, mode="a100")
    def gpu(policy: Policy) -> Iterator[dict[str, Any]]:
        yield {"x": 2}

    assert gpu.mode == "a100"


def test_rollout_needs_a_generator_with_a_policy_parameter() -> None:
    with pytest.raises(InvalidError):
        rollout(lambda policy: None, data_queue="x")
    with pytest.raises(InvalidError):

        def no_policy(*args: Any) -> Iterator[dict[str, Any]]:
            yield {}

        rollout(no_policy, data_queue="x")
    with pytest.raises(InvalidError):
        rollout(data_queue="x", flush_every=0)


# ------------------------------------------------------------------------------ the example

STEP = re.compile(r"^step +(\d+) ", re.M)
HOLD = re.compile(r"^holding the batch of step \d+: \[([\d, ]+)\]", re.M)


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, str(REPO / "examples" / "rl" / "train.py"), *args], env=env, stdout=f, stderr=subprocess.STDOUT)


def _reap(p: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait: float = 15) -> None:
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.parametrize("plane", ["embedded", "serve"])
def test_example_trainer_sigkilled_mid_run_resumes(plane: str, lakeshore_bin: str, server: Server, tmp_path: Path) -> None:
    """The example across processes — two rollout worker processes and a trainer process —
    on the embedded plane (its daemon) and on a ``lakeshore serve``: the trainer is
    SIGKILLed between reading a batch and committing it, and started again. No committed
    step is lost, no consumed sample is trained on twice (counted), the reward rises."""
    home = Path(tempfile.mkdtemp(prefix="ls-rl-"))
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(home), PYTHONUNBUFFERED="1")
    env.pop("LAKESHORE_URL", None)
    env.pop("LAKESHORE_TOKEN", None)
    if plane == "serve":
        env.update(LAKESHORE_URL=server.url, LAKESHORE_TOKEN=server.admin_token)
    run = f"crash-{plane}-{secrets.token_hex(4)}"
    steps, hold = 16, 6
    worker_log, first_log, second_log = tmp_path / "worker.log", tmp_path / "trainer1.log", tmp_path / "trainer2.log"
    common = ["--run", run, "--out", str(tmp_path / "out")]
    workers = [_spawn(["worker", *common], env, worker_log) for _ in range(2)]
    try:
        # The first trainer stops after reading step `hold`'s batch (leased, not committed)
        # and is SIGKILLed there: between its read and its commit.
        trainer = _spawn(["trainer", "--steps", str(steps), "--hold", str(hold), *common], env, first_log)
        held: list[int] = []
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and trainer.poll() is None:
            m = HOLD.search(first_log.read_text())
            if m:
                held = [int(i) for i in m.group(1).split(",")]
                break
            time.sleep(0.02)
        assert held and trainer.poll() is None, first_log.read_text()
        trainer.kill()
        trainer.wait()
        before = [int(s) for s in STEP.findall(first_log.read_text())]
        assert before == list(range(1, hold)), first_log.read_text()

        again = _spawn(["trainer", "--steps", str(steps), *common], env, second_log)
        assert again.wait(60) == 0, second_log.read_text()
        out = second_log.read_text()
        resumed = re.search(rf"resumed run '{run}' at step (\d+)", out)
        assert resumed and int(resumed.group(1)) == hold - 1, out  # every committed step is kept
        after = [int(s) for s in STEP.findall(out)]
        assert after == list(range(hold, steps + 1)), out

        async def durable_state() -> tuple[dict[str, Any], int, int, set[int]]:
            from lakeshore import Dispatch

            if plane == "serve":
                dispatch: Dispatch = HttpDispatch(server.url, token=server.admin_token)
            else:
                dispatch = Dispatch(str(home / "lakeshore.db"))
            try:
                q = Queue(f"{run}-traj", dispatch=dispatch)
                ckpt = (await KVInterface(q).kv_batch_get(["trainer"], partition_id="checkpoints"))[0]
                trained = {int(i) for i in ckpt["consumed"]}
                stale = int((await q.stats())["stale_dropped"])
                # What the task has not consumed: the held batch, when the trainer finished
                # before its lease expired, is there once the lease expires.
                left: set[int] = set()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and len(set(held) - trained - left) > stale:
                    meta = await q.reader().get_meta(["reward"], 4096, "train", defer_consume=True, wait=False)
                    left |= set(meta.global_indexes)
                    await asyncio.sleep(0.1)
                return ckpt, await q.consumed("train"), stale, left
            finally:
                dispatch.close()

        ckpt, consumed, stale, left = asyncio.run(durable_state())
        trained = [int(i) for i in ckpt["consumed"]]
        assert int(ckpt["step"]) == steps
        assert len(trained) == steps * 64  # every step's batch, counted once
        assert len(set(trained)) == len(trained), "a consumed sample was trained on twice"
        # The held batch came back when its lease expired: trained on once, or (when the
        # trainer was done before that) left unconsumed in the buffer, or dropped by the
        # staleness bound — never trained on twice, never lost.
        assert all(trained.count(i) <= 1 for i in held)
        assert len(set(held) - set(trained) - left) <= stale, (held, sorted(left), stale)
        assert not set(trained) & left
        # Every consumed record was trained on or dropped as stale: the killed trainer's
        # uncommitted batch came back (its lease expired) rather than being lost.
        assert consumed == len(trained) + stale
        curve = [float(x) for x in ckpt["curve"]]
        assert len(curve) == steps + 1
        assert curve[-1] > curve[0] + 0.2, curve  # 0.1 (uniform) at the start
        assert (tmp_path / "out" / "reward.csv").exists()
    finally:
        for w in workers:  # all drain at once (an idle one ends its claim's long-poll)
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            _reap(w)
        from lakeshore import _daemon

        for sock in home.glob("run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)


def test_example_trainer_without_workers_says_what_it_waits_for(lakeshore_bin: str, tmp_path: Path) -> None:
    """A trainer started with no rollout worker (before its workers, or with none) says
    what it waits for and how to start one, and keeps waiting; ``--workers 0`` and a
    negative ``--steps`` are refused. Found by a new user's trial: the trainer sat silent
    for two minutes and then died of a bare TimeoutError, and ``--workers 0`` hung."""
    home = Path(tempfile.mkdtemp(prefix="ls-rl-"))
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(home), PYTHONUNBUFFERED="1")
    env.pop("LAKESHORE_URL", None)
    env.pop("LAKESHORE_TOKEN", None)
    script = str(REPO / "examples" / "rl" / "train.py")
    try:
        for args, said in ((["--workers", "0"], "--workers 0: 'all' needs 1 or more"), (["--steps", "-1"], "--steps -1: use 0 or more")):
            p = subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True, timeout=120)
            assert p.returncode == 2 and said in p.stderr, p.stderr
        run = f"alone-{secrets.token_hex(4)}"
        log = tmp_path / "trainer.log"
        trainer = _spawn(["trainer", "--run", run, "--steps", "1", "--out", str(tmp_path / "out")], env, log)
        try:
            # Until it says so, or ends (the old trainer ended, with a TimeoutError).
            while trainer.poll() is None and "waiting for rollouts" not in log.read_text():
                time.sleep(0.05)
            out = log.read_text()
            assert trainer.poll() is None, out
            assert f"no worker serves '{run}-rollout': start one" in out and f"worker --run {run}" in out, out
            assert 'partition "default" holds 0 records put' in out, out
        finally:
            _reap(trainer, signal.SIGKILL)
    finally:
        from lakeshore import _daemon

        for sock in home.glob("run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)
