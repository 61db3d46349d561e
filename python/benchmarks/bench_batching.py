"""The client's cost per call with many callers at once (docs/benchmarks-python.md,
"Batching"): not a test.

    python python/benchmarks/bench_batching.py submit /tmp/x.db   # 16 threads x 100 submits
    python python/benchmarks/bench_batching.py worker /tmp/y.db   # 500 no-op jobs, one
                                                                  # run_worker(concurrency=8)

``submit`` prints the wall rate and this process's CPU time per submit (user + system,
from os.times: less sensitive to the machine's load than the wall time); ``worker`` the
rate of one in-process worker. The target is a SQLite file served by the local daemon.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from lakeshore import Dispatch, SyncQueue, run_worker


def submit(target: str, threads: int = 16, each: int = 100) -> None:
    d = Dispatch(target)
    q = SyncQueue("q", dispatch=d)
    q.count()  # the daemon is up

    def run() -> None:
        for i in range(each):
            q.submit({"i": i})

    c0, t0 = os.times(), time.perf_counter()
    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c1, dt = os.times(), time.perf_counter() - t0
    n = threads * each
    cpu = c1.user - c0.user + c1.system - c0.system
    print(f"{n} submits: wall {dt:.1f} s ({n / dt:.0f}/s), client CPU {cpu * 1e3 / n:.2f} ms/submit")
    d.close()


def worker(target: str, n: int = 500) -> None:
    d = Dispatch(target)
    q = SyncQueue("b", dispatch=d)
    q.submit_many([{"i": i} for i in range(n)])
    stop = threading.Event()

    def watch() -> None:
        while q.count("succeeded") < n:
            time.sleep(0.02)
        stop.set()

    t0 = time.perf_counter()
    threading.Thread(target=watch, daemon=True).start()
    done = run_worker(d, queues={"b": lambda i: i}, concurrency=8, stop=stop, handle_signals=False)
    print(f"{done} jobs: {n / (time.perf_counter() - t0):.0f} jobs/s")
    d.close()


if __name__ == "__main__":
    {"submit": submit, "worker": worker}[sys.argv[1]](sys.argv[2])
