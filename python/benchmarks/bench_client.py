"""Quick figures for the Python client (not a test): codec speed, and round trips against a
running server.

    python python/benchmarks/bench_client.py                 # codec only
    LAKESHORE_URL=http://127.0.0.1:7077 python python/benchmarks/bench_client.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from lakeshore import HttpDispatch, Queue, SyncQueue, wire


def per_op(fn: Callable[[], Any], n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def codec() -> None:
    payload = {"prompt": "a lighthouse at dusk", "seed": 1234, "temperature": 0.7}
    data = wire.encode(payload)
    arr = np.random.default_rng(0).random((512, 512), dtype=np.float32)  # 1 MiB
    big = wire.encode({"x": arr})
    rows = [{"id": i, "reward": i / 3, "tag": "t"} for i in range(10000)]
    rows_data = wire.encode(rows)
    print(f"encode small map      {per_op(lambda: wire.encode(payload), 20000) * 1e6:8.1f} µs"
          f"   (msgpack-python {per_op(lambda: msgpack.packb(payload), 20000) * 1e6:.1f} µs)")
    print(f"decode small map      {per_op(lambda: wire.decode(data), 20000) * 1e6:8.1f} µs"
          f"   (msgpack-python {per_op(lambda: msgpack.unpackb(data), 20000) * 1e6:.1f} µs)")
    print(f"encode 1 MiB ndarray  {per_op(lambda: wire.encode({'x': arr}), 200) * 1e6:8.1f} µs")
    print(f"decode 1 MiB ndarray  {per_op(lambda: wire.decode(big), 200) * 1e6:8.1f} µs")
    print(f"encode 10k-row list   {per_op(lambda: wire.encode(rows), 10) * 1e3:8.1f} ms"
          f"   (msgpack-python {per_op(lambda: msgpack.packb(rows), 10) * 1e3:.1f} ms)")
    print(f"decode 10k-row list   {per_op(lambda: wire.decode(rows_data), 10) * 1e3:8.1f} ms"
          f"   (msgpack-python {per_op(lambda: msgpack.unpackb(rows_data), 10) * 1e3:.1f} ms)")


def client(url: str) -> None:
    d = HttpDispatch(url)
    q = SyncQueue("bench-" + str(os.getpid()), dispatch=d)
    lat = []
    for i in range(300):
        t = time.perf_counter()
        inv = q.submit({"i": i})
        job = q.claim()
        assert job is not None
        q.ack(job, i)
        assert q.result(inv) == i
        lat.append(time.perf_counter() - t)
    lat.sort()
    print(f"submit+claim+ack+result, one thread: p50 {statistics.median(lat) * 1e3:.2f} ms, "
          f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.2f} ms")
    n = 2000
    t = time.perf_counter()
    for i in range(n // 4):
        q.submit(i)
    print(f"sync submit, one thread: {n // 4 / (time.perf_counter() - t):.0f}/s")
    aq = Queue(q.name + "-a", dispatch=d)

    async def many() -> None:
        await asyncio.gather(*(aq.submit(i) for i in range(n)))

    t = time.perf_counter()
    asyncio.run(many())
    print(f"asyncio submit, {n} concurrent: {n / (time.perf_counter() - t):.0f}/s")
    d.close()


if __name__ == "__main__":
    codec()
    if os.environ.get("LAKESHORE_URL"):
        client(os.environ["LAKESHORE_URL"])
