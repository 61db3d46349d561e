"""A worker of a module with ten ``@udf`` queues: jobs/s with the work on one queue of the
ten, and spread over all ten (docs/benchmarks-python.md, "Ten @udf queues").

    LAKESHORE_BIN=./lakeshore python python/benchmarks/bench_multiqueue.py --jobs 300 --concurrency 1 [--only one|spread]

Runs ``lakeshore serve`` on a SQLite file in a fresh temporary ``$LAKESHORE_HOME``; each
case submits its jobs first, then times ``run_worker`` from its start until every job
succeeded (a watcher drains the worker then).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import lakeshore
from lakeshore import HttpDispatch, SyncQueue, run_worker, udf


def serve(home: Path) -> tuple[str, subprocess.Popen[bytes]]:
    binary = lakeshore._daemon.find_binary()
    log = open(home / "serve.log", "wb")
    env = dict(os.environ, LAKESHORE_HOME=str(home))
    env.pop("LAKESHORE_URL", None)
    proc = subprocess.Popen([binary, "serve", "--target", str(home / "bench.db"), "--addr", "127.0.0.1:0"], env=env, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"url=(http://127\.0\.0\.1:\d+)", (home / "serve.log").read_text(errors="replace"))
        if m:
            return m.group(1), proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("lakeshore serve did not start")


def case(d: HttpDispatch, prefix: str, jobs: int, spread: bool, concurrency: int) -> float:
    names = [f"{prefix}-{i}" for i in range(10)]
    funcs = [udf(queue=n, dispatch=d)(lambda x: x) for n in names]  # a module's ten @udf functions
    queues = [SyncQueue(n, dispatch=d) for n in names]
    for i in range(jobs):
        queues[i % 10 if spread else 9].submit(i)
    stop = threading.Event()
    done = 0

    def watch() -> None:
        nonlocal done
        while not stop.is_set():
            done = sum(q.count("succeeded") for q in (queues if spread else queues[9:]))
            if done >= jobs:
                stop.set()
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    start = time.monotonic()
    run_worker(d, queues=funcs, concurrency=concurrency, stop=stop, handle_signals=False)
    return jobs / (time.monotonic() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--only", choices=("one", "spread"), help="run one case only")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lakeshore-bench-mq-"))
    url, proc = serve(home)
    try:
        d = HttpDispatch(url)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        if args.only != "spread":
            one = case(d, "one", args.jobs, False, args.concurrency)
            print(f"work on one queue of ten: {one:,.1f} jobs/s ({args.jobs} jobs, concurrency {args.concurrency})")
        if args.only != "one":
            spread = case(d, "spread", args.jobs, True, args.concurrency)
            print(f"work spread over ten queues: {spread:,.1f} jobs/s ({args.jobs} jobs, concurrency {args.concurrency})")
        d.close()
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
