"""What Python users pick instead of Lakeshore, measured as bench_queue.py measures Lakeshore
(docs/benchmarks-python.md): Celery (Redis broker and result backend) and RQ, on a Redis this
script starts with ``--appendonly yes --appendfsync always`` (every write fsynced: the
durability class of Lakeshore's synced SQLite file).

    python -m venv /tmp/pyb/venv && /tmp/pyb/venv/bin/pip install celery redis rq
    /tmp/pyb/venv/bin/python python/benchmarks/bench_peers.py celery
    /tmp/pyb/venv/bin/python python/benchmarks/bench_peers.py rq
    #   --enqueue N --jobs N --workers 4 --rate R --seconds S --only enqueue|burn|latency

celery and rq are imported only when run for them; they are not dependencies of the package.

- enqueue: 16 threads calling ``task.delay(i)`` / ``Queue.enqueue(noop, i)``.
- burn-down: N no-op jobs enqueued, then 4 worker processes (Celery: one ``celery worker
  -c 4`` prefork pool; RQ: four ``rq worker --burst`` processes of class SimpleWorker, which
  runs jobs in the worker process — the default Worker forks a child per job and is slower)
  until every result is stored. Reported from the workers' start (their boot included, as
  bench_queue.py does) and from the first result (boot excluded).
- latency: jobs enqueued at a fixed rate, 2 worker processes; enqueue → result observed by
  the client, which polls the result keys in Redis every millisecond with one pipelined
  round trip (``celery-task-meta-<id>``, ``rq:results:<id>``): what ``AsyncResult.get`` /
  ``Job.latest_result`` wait for, without a thread per waiting job.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_celery_app: Any = None


def noop(i: int) -> int:
    """The RQ job (imported by the workers as bench_peers.noop)."""
    return i


def celery_app() -> Any:
    """The Celery app, built on first use from $BENCH_REDIS_URL (workers import it as
    ``bench_peers:app``)."""
    global _celery_app
    if _celery_app is None:
        from celery import Celery

        url = os.environ["BENCH_REDIS_URL"]
        app = Celery("bench_peers", broker=url, backend=url)
        app.conf.update(task_ignore_result=False, broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)
        app.task(name="noop")(noop)
        _celery_app = app
    return _celery_app


def __getattr__(name: str) -> Any:
    if name == "app":
        return celery_app()
    raise AttributeError(name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(tmp: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
         "--appendfsync", "always", "--dir", str(tmp), "--save", ""],
        stdout=open(tmp / "redis.log", "wb"), stderr=subprocess.STDOUT,
    )
    import redis

    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return f"redis://127.0.0.1:{port}/0", p
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


class System:
    def __init__(self, kind: str, url: str) -> None:
        import redis

        self.kind, self.url = kind, url
        self.r = redis.Redis.from_url(url)
        if kind == "celery":
            self.task = celery_app().tasks["noop"]
        else:
            import rq

            self.q = rq.Queue("bench", connection=self.r)

    def submit(self, i: int) -> str:
        if self.kind == "celery":
            return str(self.task.delay(i).id)
        return str(self.q.enqueue("bench_peers.noop", i, result_ttl=3600).id)

    def result_key(self, job_id: str) -> str:
        return ("celery-task-meta-" if self.kind == "celery" else "rq:results:") + job_id

    def done(self, ids: list[str]) -> list[bool]:
        pipe = self.r.pipeline(transaction=False)
        for j in ids:
            pipe.exists(self.result_key(j))
        return [bool(x) for x in pipe.execute()]

    def workers(self, n: int, burst: bool) -> list[subprocess.Popen[bytes]]:
        env = dict(os.environ, BENCH_REDIS_URL=self.url, PYTHONPATH=str(HERE))
        log = open(Path(tempfile.gettempdir()) / f"bench-peers-{self.kind}.log", "ab")
        if self.kind == "celery":
            cmd = [sys.executable, "-m", "celery", "-A", "bench_peers:app", "worker", "-c", str(n),
                   "-P", "prefork", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"]
            return [subprocess.Popen(cmd, env=env, cwd=HERE, stdout=log, stderr=log)]
        cmd = [sys.executable, "-m", "rq.cli", "worker", "--url", self.url, "-w", "rq.worker.SimpleWorker", "-q", "bench"]
        if burst:
            cmd.append("--burst")
        return [subprocess.Popen(cmd, env=env, cwd=HERE, stdout=log, stderr=log) for _ in range(n)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def enqueue(s: System, n: int, threads: int = 16) -> float:
    s.submit(0)
    per = n // threads
    barrier = threading.Barrier(threads + 1)

    def run() -> None:
        barrier.wait()
        for i in range(per):
            s.submit(i)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return per * threads / (time.perf_counter() - t0)


def count_results(s: System) -> int:
    pattern = "celery-task-meta-*" if s.kind == "celery" else "rq:results:*"
    return sum(1 for _ in s.r.scan_iter(pattern, count=10000))


def burn_down(s: System, jobs: int, workers: int) -> tuple[float, float]:
    s.r.flushdb()
    for i in range(jobs):
        s.submit(i)
    t0 = time.perf_counter()
    procs = s.workers(workers, burst=True)
    first = None
    while True:
        done = count_results(s)
        if done and first is None:
            first = time.perf_counter()
        if done >= jobs:
            break
        time.sleep(0.05)
    t1 = time.perf_counter()
    stop(procs)
    assert first is not None
    return jobs / (t1 - t0), jobs / (t1 - first) if t1 > first else float("inf")


def latency(s: System, rate: float, seconds: float, workers: int) -> tuple[float, float, int]:
    s.r.flushdb()
    procs = s.workers(workers, burst=False)
    try:
        warm = s.submit(-1)
        deadline = time.monotonic() + 120
        while not s.done([warm])[0]:
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not start")
            time.sleep(0.01)
        pending: dict[str, float] = {}
        lock = threading.Lock()
        samples: list[float] = []
        n = int(rate * seconds)
        finished = threading.Event()

        def collect() -> None:
            while not (finished.is_set() and not pending):
                with lock:
                    ids = list(pending)
                if ids:
                    now_done = s.done(ids)
                    t = time.perf_counter()
                    with lock:
                        for j, d in zip(ids, now_done):
                            if d:
                                samples.append(t - pending.pop(j))
                time.sleep(0.001)

        c = threading.Thread(target=collect)
        c.start()
        start = time.perf_counter()
        for i in range(n):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            t = time.perf_counter()
            j = s.submit(i)
            with lock:
                pending[j] = t
        finished.set()
        c.join(120)
    finally:
        stop(procs)
    qs = statistics.quantiles(samples, n=100)
    return qs[49] * 1e3, qs[98] * 1e3, len(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=["celery", "rq"])
    ap.add_argument("--enqueue", type=int, default=8000)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--only", choices=["enqueue", "burn", "latency"], help="run one part")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    url, redis_proc = start_redis(tmp)
    os.environ["BENCH_REDIS_URL"] = url
    try:
        s = System(args.system, url)
        print(f"{args.system}: {url} (appendfsync always, {tmp})", flush=True)
        if args.only in (None, "enqueue"):
            print(f"enqueue, 16 threads: {enqueue(s, args.enqueue):,.0f} jobs/s", flush=True)
        if args.only in (None, "burn"):
            wall, steady = burn_down(s, args.jobs, args.workers)
            print(f"burn-down {args.jobs:,} no-op jobs, {args.workers} processes: {wall:,.0f} jobs/s "
                  f"({steady:,.0f} jobs/s from the first result)", flush=True)
        if args.only in (None, "latency"):
            p50, p99, n = latency(s, args.rate, args.seconds, 2)
            print(f"latency enqueue->result at {args.rate:g} jobs/s ({n} jobs, 2 worker processes): "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
