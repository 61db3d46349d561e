"""Probe: the same put_batch workload on the seed package (persisting), with its CPU.

    cd $(mktemp -d) && /tmp/seedbench-venv/bin/python .../pbt.py 100000
"""
import asyncio, json, sys, tempfile, time, os
from persisting import Queue
R = int(sys.argv[1])
async def main():
    q = Queue("seedbench", storage_path=tempfile.mkdtemp(dir="."))
    rows = [{"step": i, "reward": i / 10, "tag": "t%d" % i} for i in range(R // 100)]
    c0 = os.times(); t = time.perf_counter()
    for _ in range(100):
        await q.put_batch(rows)
    t1 = time.perf_counter()
    await q.flush()
    t2 = time.perf_counter(); c1 = os.times()
    print(json.dumps({"seconds": round(t2 - t, 3), "puts": round(t1 - t, 3), "flush": round(t2 - t1, 3), "cpu": round(c1.user-c0.user+c1.system-c0.system, 3)}))
asyncio.run(main())
