"""Quickstart: a producer, a worker that keeps its "model" in memory and streams progress,
and an asyncio fan-out, against a running `lakeshore serve`.

    lakeshore serve --target :memory: &
    LAKESHORE_URL=http://127.0.0.1:7077 python examples/python/quickstart.py

The worker here is the hand-written loop (`q.working()`) that `lakeshore.run_worker` and
`@lakeshore.udf` package (docs/python.md); it shows what each job goes through.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from lakeshore import Queue, SyncQueue


def worker(q: SyncQueue, jobs: int) -> None:
    """Load the model once, then serve jobs: progress frames, then the result."""
    weights = np.linspace(0.0, 1.0, 4, dtype=np.float32)  # stands in for a model
    served = 0
    while served < jobs:
        with q.working(wait=10.0) as job:
            if job is None:
                continue
            x = np.asarray(job.payload["x"], dtype=np.float32)
            for step in range(3):
                q.post(job, {"step": step, "of": 3})
            job.result = {"y": x * weights, "seed": job.payload["seed"]}
            served += 1


async def fan_out(n: int) -> list[float]:
    """Submit n jobs and gather their results without blocking the event loop."""
    q = Queue("quickstart")
    ids = [await q.submit({"x": [1, 2, 3, 4], "seed": i}) for i in range(n)]
    results = await asyncio.gather(*(q.result(i, timeout=60) for i in ids))
    return [float(r["y"].sum()) for r in results]


def main() -> None:
    q = SyncQueue("quickstart")  # the plane of $LAKESHORE_URL
    t = threading.Thread(target=worker, args=(q, 5), daemon=True)
    t.start()

    inv = q.submit({"x": [1, 2, 3, 4], "seed": 0}, key="quickstart/0")
    for progress in q.stream(inv, timeout=30):
        print("progress", progress)
    print("result", q.result(inv, timeout=30))

    print("fan-out", asyncio.run(fan_out(4)))
    t.join(30)


if __name__ == "__main__":
    main()
