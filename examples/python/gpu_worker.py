"""A GPU-style worker: the model loads once per worker process, every job streams its
progress, and the client reads the frames live.

    python examples/python/gpu_worker.py worker &      # as many as you have GPUs
    python examples/python/gpu_worker.py submit        # submits, streams progress, prints results
    python examples/python/gpu_worker.py demo          # both in one process (a :memory: plane)

Without LAKESHORE_URL both use the embedded plane ($LAKESHORE_HOME/lakeshore.db, served by
the local daemon the first of them starts). SIGTERM drains a worker: the running job
finishes, nothing new is claimed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

import lakeshore
from lakeshore import lifecycle, run_worker, udf


WEIGHTS: dict[str, np.ndarray[Any, Any]] = {}


@lifecycle.on_host_setup
def load_weights() -> None:
    """Stands in for loading weights onto the GPU: slow, once per worker process, before
    its first body (run_worker runs it before it claims anything)."""
    time.sleep(0.5)
    WEIGHTS["denoise"] = np.linspace(0.0, 1.0, 16, dtype=np.float32).reshape(4, 4)


@udf(queue="denoise", lease_ttl=10.0)
def denoise(image: np.ndarray[Any, Any], steps: int = 4) -> Iterator[dict[str, Any]]:
    """A generator body: each yield is a VALUE frame (progress); the return is the result."""
    w = WEIGHTS["denoise"]
    x = image.astype(np.float32)
    for step in range(steps):
        x = np.tanh(x @ w)  # the "GPU" work
        yield {"step": step + 1, "of": steps, "norm": float(np.linalg.norm(x))}
    return x  # type: ignore[misc]


def submit() -> None:
    ids = [denoise.submit(image=np.eye(4, dtype=np.float32) * i, steps=4) for i in range(1, 4)]
    q = denoise.queue()
    for inv in ids:
        for frame in q.stream(inv, timeout=60):
            print(f"{inv[-6:]} progress {frame['step']}/{frame['of']} norm={frame['norm']:.3f}")
        print(f"{inv[-6:]} result shape {q.result(inv).shape}")


def demo() -> None:
    d = lakeshore.Dispatch(":memory:")
    lakeshore.dispatch._default = d  # the process default, as a test would
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, kwargs={"queues": [denoise], "stop": stop}, daemon=True)
    worker.start()
    submit()
    stop.set()
    worker.join()
    d.close()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "demo"
    if mode == "worker":
        run_worker(queues=[denoise], concurrency=1)
    elif mode == "submit":
        submit()
    else:
        demo()
