"""A fan-out with asyncio.gather: submit a hundred jobs, await every result concurrently.

    python examples/python/fanout.py        # a :memory: plane with a worker thread
"""

from __future__ import annotations

import asyncio
import threading

import lakeshore
from lakeshore import Queue, run_worker, udf

plane = lakeshore.Dispatch(":memory:")


@udf(queue="score", dispatch=plane)
async def score(seed: int) -> float:
    await asyncio.sleep(0.01)  # an async body: awaits on the worker's event loop
    return (seed * 7919 % 1000) / 1000


async def main() -> None:
    q = Queue("score", dispatch=plane)
    ids = await q.submit_many([{"seed": i} for i in range(100)])
    results = await asyncio.gather(*(q.result(i, timeout=60) for i in ids))
    print(f"{len(results)} results, best {max(results):.3f}")


if __name__ == "__main__":
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, args=(plane,), kwargs={"queues": [score], "concurrency": 16, "stop": stop})
    worker.start()
    asyncio.run(main())
    stop.set()
    worker.join()
    plane.close()
