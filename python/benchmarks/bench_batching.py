"""The client's cost per call with many callers at once (docs/benchmarks-python.md,
"Batching"): not a test.

    python python/benchmarks/bench_batching.py submit /tmp/x.db [T [E]]  # T (16) threads x E (100) submits
    python python/benchmarks/bench_batching.py worker /tmp/y.db [N [C]]   # N (500) no-op
                                  # jobs, one run_worker(concurrency=C (8)); CPU ms per job

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


def worker(target: str, n: int = 500, concurrency: int = 8) -> None:
    d = Dispatch(target)
    q = SyncQueue("b", dispatch=d)
    for i in range(0, n, 1000):
        q.submit_many([{"i": j} for j in range(i, min(n, i + 1000))])
    stop = threading.Event()

    def watch() -> None:
        while q.count("queued") > 0:
            time.sleep(0.25)
        stop.set()

    prof = None
    if os.environ.get("BENCH_PROFILE_PORTAL"):
        # cProfile of the client's loop thread (pyinstrument sees only the main thread).
        import cProfile

        prof = cProfile.Profile()
        d._portal.loop.call_soon_threadsafe(prof.enable)
    c0, t0 = os.times(), time.perf_counter()
    threading.Thread(target=watch, daemon=True).start()
    done = run_worker(d, queues={"b": lambda i: i}, concurrency=concurrency, stop=stop, handle_signals=False)
    c1, dt = os.times(), time.perf_counter() - t0
    cpu = c1.user - c0.user + c1.system - c0.system
    print(
        f"{done} jobs, concurrency {concurrency}: wall {dt:.1f} s ({done / dt:.0f} jobs/s), "
        f"worker CPU {cpu * 1e3 / max(done, 1):.2f} ms/job"
    )
    if prof is not None:
        import pstats

        ended = threading.Event()
        d._portal.loop.call_soon_threadsafe(lambda: (prof.disable(), ended.set()))
        ended.wait()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    d.close()


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2], *(int(a) for a in sys.argv[3:5]))
    else:
        submit(sys.argv[2], *(int(a) for a in sys.argv[3:5]))
