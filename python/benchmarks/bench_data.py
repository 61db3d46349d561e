"""The data queue from Python (docs/benchmarks-python.md): put rows/s (put_batch + flush)
and read rows/s with Reader.get_batch (Arrow answer → numpy columns, no Python object per
row), against ``lakeshore serve`` on loopback (a binary with the data routes).

    LAKESHORE_BIN=./lakeshore python python/benchmarks/bench_data.py --rows 200000 --batch 65536
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_queue import plane
from lakeshore import HttpDispatch
from lakeshore.data import Queue


async def run(url: str, rows: int, put_batch: int, read_batch: int) -> tuple[float, float]:
    d = HttpDispatch(url)
    q = Queue("bench", batch_size=put_batch, auto_flush_interval_sec=0, dispatch=d)
    recs = [{"step": i, "reward": i / 7, "length": i % 512} for i in range(rows)]
    t = time.perf_counter()
    for i in range(0, rows, put_batch):
        await q.put_batch(recs[i : i + put_batch])
    await q.flush()
    put_rate = rows / (time.perf_counter() - t)
    reader = q.reader()
    got = 0
    c0, t = os.times(), time.perf_counter()
    while got < rows:
        n = min(read_batch, rows - got)
        b = await reader.get_batch(["step", "reward", "length"], n, "bench")
        assert isinstance(b["reward"], np.ndarray) and len(b["reward"]) == n
        got += n
    get_rate = rows / (time.perf_counter() - t)
    c1 = os.times()
    cpu = c1.user - c0.user + c1.system - c0.system
    print(f"  (client CPU {cpu * 1e6 / rows:.2f} µs/row read)", flush=True)
    d.close()
    return put_rate, get_rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--put-batch", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=65536)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lsd-"))
    os.environ["LAKESHORE_HOME"] = str(home)
    url, server = plane("http", home)
    try:
        put_rate, get_rate = asyncio.run(run(url, args.rows, args.put_batch, args.batch))
        print(f"data queue over loopback HTTP, {args.rows:,} rows of 3 fields: put_batch({args.put_batch}) + flush "
              f"{put_rate:,.0f} rows/s; get_batch({args.batch}) {get_rate:,.0f} rows/s", flush=True)
    finally:
        assert server is not None
        server.terminate()
        server.wait()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
