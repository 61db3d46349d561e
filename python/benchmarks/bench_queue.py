"""Lakeshore from Python: enqueue from 16 threads, burn-down of no-op jobs with 4 worker
processes, and enqueue → result latency at a fixed rate (docs/benchmarks-python.md).

    LAKESHORE_BIN=./lakeshore python python/benchmarks/bench_queue.py daemon   # the embedded daemon
    LAKESHORE_BIN=./lakeshore python python/benchmarks/bench_queue.py http     # lakeshore serve, loopback
    LAKESHORE_BIN=./lakeshore python python/benchmarks/bench_queue.py http-memory  # serve --target :memory:

Both serve a SQLite file in a fresh temporary $LAKESHORE_HOME (durable: every commit is
synced as the SQLite plane does). Options: --sequential N (submits in a row from one
thread; also the count of --only floor, the same submits on a raw socket without the SDK,
and of --only calls, SyncQueue.call in a row against two worker processes),
--enqueue N, --jobs N, --workers N,
--rate R, --seconds S.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
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

import msgpack

import lakeshore
from lakeshore import Queue, SyncQueue, run_worker, udf
from lakeshore._ids import new_ulid


def plane(kind: str, home: Path) -> tuple[str, subprocess.Popen[bytes] | None]:
    """The dispatch target of the run (a path for the daemon, a URL for HTTP)."""
    db = str(home / "bench.db") if kind != "http-memory" else ":memory:"
    if kind == "daemon":
        return db, None
    binary = lakeshore._daemon.find_binary()
    log = open(home / "serve.log", "wb")
    env = dict(os.environ, LAKESHORE_HOME=str(home))
    env.pop("LAKESHORE_ADMIN_TOKEN", None)
    p = subprocess.Popen([binary, "serve", "--target", db, "--addr", "127.0.0.1:0"], stderr=log, env=env)
    for _ in range(200):
        m = re.search(r"url=(http://\S+)", (home / "serve.log").read_text())
        if m:
            return m.group(1), p
        time.sleep(0.05)
    raise RuntimeError("serve did not start")


def dispatch(target: str) -> lakeshore.Dispatch:
    return lakeshore.Dispatch(target)


def enqueue(target: str, n: int, threads: int = 16) -> float:
    d = dispatch(target)
    q = SyncQueue("enqueue", dispatch=d)
    q.submit(0)  # connections and daemon up before the clock starts
    per = n // threads
    barrier = threading.Barrier(threads + 1)

    def run() -> None:
        barrier.wait()
        for i in range(per):
            q.submit({"i": i})

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    c0, t0 = os.times(), time.perf_counter()
    for t in ts:
        t.join()
    c1, dt = os.times(), time.perf_counter() - t0
    d.close()
    cpu = c1.user - c0.user + c1.system - c0.system
    print(f"  (client CPU {cpu * 1e3 / (per * threads):.3f} ms/submit)", flush=True)
    return per * threads / dt


def sequential(target: str, n: int) -> tuple[float, float, float, float]:
    """n submits in a row from one thread: the median and p99 of one submit (ms), the
    client's CPU per submit (ms) and submits/s."""
    d = dispatch(target)
    q = SyncQueue("sequential", dispatch=d)
    q.submit(0)  # connections and daemon up before the clock starts
    samples = []
    c0, t0 = os.times(), time.perf_counter()
    for i in range(n):
        t = time.perf_counter_ns()
        q.submit(i)
        samples.append(time.perf_counter_ns() - t)
    c1, dt = os.times(), time.perf_counter() - t0
    d.close()
    cpu = c1.user - c0.user + c1.system - c0.system
    qs = statistics.quantiles(samples, n=100)
    return qs[49] / 1e6, qs[98] / 1e6, cpu * 1e3 / n, n / dt


def floor(target: str, n: int) -> tuple[float, float]:
    """n submits in a row on one raw blocking socket, without the SDK (the body packed by
    hand, the answer read by Content-Length): the median and p99 of one submit (ms), the
    server's and the kernel's part of a submit."""
    d = dispatch(target)
    SyncQueue("floor", dispatch=d).submit(0)  # the daemon up
    if d._transport.uds:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(d._transport.uds)
        host = "lakeshore"
    else:
        host = target.removeprefix("http://")
        name, port = host.rsplit(":", 1)
        sock = socket.create_connection((name, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    path = "/v1/namespaces/default/queues/floor/invocations"
    samples = []
    for i in range(n):
        body = msgpack.packb({"id": new_ulid(), "payload": msgpack.packb(i)}, use_bin_type=True)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/msgpack\r\n"
            f"Content-Type: application/msgpack\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        t = time.perf_counter_ns()
        sock.sendall(head.encode() + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        answer_head, _, rest = buf.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)content-length: *(\d+)", answer_head)
        assert m and answer_head.startswith(b"HTTP/1.1 200"), answer_head
        while len(rest) < int(m.group(1)):
            rest += sock.recv(65536)
        samples.append(time.perf_counter_ns() - t)
    sock.close()
    d.close()
    qs = statistics.quantiles(samples, n=100)
    return qs[49] / 1e6, qs[98] / 1e6


@udf(queue="burn")
def noop(i: int) -> int:
    return i


def burn_worker(target: str, concurrency: int) -> None:
    d = dispatch(target)
    q = SyncQueue("burn", dispatch=d)
    stop = threading.Event()

    def watch() -> None:
        while q.count("queued") > 0:
            time.sleep(0.2)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    run_worker(d, queues=[noop], concurrency=concurrency, stop=stop, handle_signals=False)
    d.close()


def burn_down(target: str, jobs: int, workers: int, concurrency: int) -> float:
    d = dispatch(target)
    q = SyncQueue("burn", dispatch=d)
    for i in range(0, jobs, 1000):
        q.submit_many([{"i": j} for j in range(i, min(jobs, i + 1000))])
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=burn_worker, args=(target, concurrency)) for _ in range(workers)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    first = None
    while (done := q.count("succeeded")) < jobs:
        if done and first is None:
            first = time.perf_counter()
        time.sleep(0.05)
    t1 = time.perf_counter()
    dt = t1 - t0
    if first is not None:
        print(f"  ({jobs / (t1 - first):,.0f} jobs/s from the first result)", flush=True)
    for p in procs:
        p.join(60)
    d.close()
    return jobs / dt


def latency_worker(target: str, stop_file: str) -> None:
    d = dispatch(target)
    stop = threading.Event()

    def watch() -> None:
        while not os.path.exists(stop_file):
            time.sleep(0.1)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()

    @udf(queue="latency", dispatch=d)
    def echo(i: int) -> int:
        return i

    run_worker(d, queues=[echo], concurrency=4, stop=stop, handle_signals=False)
    d.close()


def calls(target: str, n: int, workers: int) -> tuple[float, float, float]:
    """n ``SyncQueue.call`` (submit, then wait for the result) in a row from one thread,
    echoed by ``workers`` worker processes: the median and p99 of one call (ms) and the
    caller's CPU per call (ms)."""
    stop_file = tempfile.mktemp(prefix="lakeshore-bench-stop-")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=latency_worker, args=(target, stop_file)) for _ in range(workers)]
    for p in procs:
        p.start()
    d = dispatch(target)
    q = SyncQueue("latency", dispatch=d)
    q.call({"i": -1}, timeout=60)  # workers up
    samples = []
    c0 = os.times()
    for i in range(n):
        t = time.perf_counter_ns()
        q.call({"i": i}, timeout=60)
        samples.append(time.perf_counter_ns() - t)
    c1 = os.times()
    Path(stop_file).touch()
    for p in procs:
        p.join(60)
    os.unlink(stop_file)
    d.close()
    qs = statistics.quantiles(samples, n=100)
    return qs[49] / 1e6, qs[98] / 1e6, (c1.user - c0.user + c1.system - c0.system) * 1e3 / n


def proc_cpu(pid: int) -> float:
    """A process's user + system CPU so far (s), from /proc/PID/stat (Linux); 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(
    target: str, rate: float, seconds: float, workers: int, server_pid: int | None = None
) -> tuple[float, float, int]:
    stop_file = tempfile.mktemp(prefix="lakeshore-bench-stop-")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=latency_worker, args=(target, stop_file)) for _ in range(workers)]
    for p in procs:
        p.start()
    d = dispatch(target)

    async def main() -> list[float]:
        q = Queue("latency", dispatch=d)
        await q.result(await q.submit({"i": -1}), timeout=60)  # workers up
        samples: list[float] = []

        async def one(i: int) -> None:
            t = time.perf_counter()
            inv = await q.submit({"i": i})
            await q.result(inv, timeout=60)
            samples.append(time.perf_counter() - t)

        tasks = []
        s0 = proc_cpu(server_pid) if server_pid else 0.0
        w0 = sum(proc_cpu(p.pid) for p in procs if p.pid)
        c0, start = os.times(), time.perf_counter()
        n = int(rate * seconds)
        for i in range(n):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        c1 = os.times()
        w1 = sum(proc_cpu(p.pid) for p in procs if p.pid)
        s1 = proc_cpu(server_pid) if server_pid else 0.0
        cpu = c1.user - c0.user + c1.system - c0.system
        server = f", server {(s1 - s0) * 1e3 / n:.3f}" if server_pid else ""
        print(
            f"  (CPU ms/job: client {cpu * 1e3 / n:.3f} (submit + result){server}, workers {(w1 - w0) * 1e3 / n:.3f})",
            flush=True,
        )
        return samples

    samples = asyncio.run(main())
    Path(stop_file).touch()
    for p in procs:
        p.join(60)
    os.unlink(stop_file)
    d.close()
    qs = statistics.quantiles(samples, n=100)
    return qs[49] * 1e3, qs[98] * 1e3, len(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plane", choices=["daemon", "http", "http-memory"])
    ap.add_argument("--enqueue", type=int, default=8000)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--sequential", type=int, default=2000, help="submits in a row from one thread")
    ap.add_argument(
        "--only",
        choices=["floor", "sequential", "calls", "enqueue", "burn", "latency"],
        help="run one part (floor and calls: only when named)",
    )
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lsb-"))
    os.environ["LAKESHORE_HOME"] = str(home)
    target, server = plane(args.plane, home)
    try:
        print(f"plane {args.plane}: {target}", flush=True)
        if args.only == "floor":
            p50, p99 = floor(target, args.sequential)
            print(f"floor: raw socket submit, 1 thread ({args.sequential:,}): p50 {p50:.3f} ms, p99 {p99:.3f} ms", flush=True)
            return
        if args.only == "calls":
            p50, p99, cpu = calls(target, args.sequential, 2)
            print(
                f"call (submit + result) in a row, 1 thread ({args.sequential:,}, 2 worker processes): "
                f"p50 {p50:.3f} ms, p99 {p99:.3f} ms, client CPU {cpu:.3f} ms/call",
                flush=True,
            )
            return
        if args.only in (None, "sequential"):
            p50, p99, cpu, rate = sequential(target, args.sequential)
            print(
                f"sequential submit, 1 thread ({args.sequential:,}): p50 {p50:.3f} ms, p99 {p99:.3f} ms, "
                f"client CPU {cpu:.3f} ms/submit, {rate:,.0f} submits/s",
                flush=True,
            )
        if args.only in (None, "enqueue"):
            print(f"enqueue, 16 threads: {enqueue(target, args.enqueue):,.0f} jobs/s", flush=True)
        if args.only in (None, "burn"):
            rate = burn_down(target, args.jobs, args.workers, args.concurrency)
            print(f"burn-down {args.jobs:,} no-op jobs, {args.workers} processes x {args.concurrency}: {rate:,.0f} jobs/s", flush=True)
        if args.only not in (None, "latency"):
            return
        p50, p99, n = latency(target, args.rate, args.seconds, 2, server.pid if server is not None else None)
        print(f"latency enqueue->result at {args.rate:g} jobs/s ({n} jobs, 2 worker processes): p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        for sock in home.glob("run/*/daemon.sock"):
            lakeshore._daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
