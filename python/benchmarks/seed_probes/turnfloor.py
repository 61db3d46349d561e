"""Probe: the floor of a one-process burn-down — N queued jobs, then one thread settling each
and claiming the next in a row (``POST …/settle-and-claim`` on the SDK's blocking connection,
no worker machinery); compare its ms/job with burn.py's (N, 1).

    LAKESHORE_BIN=... python turnfloor.py 3000
"""
import os, sys, tempfile, time
import msgpack
import lakeshore
from lakeshore import SyncQueue

N = int(sys.argv[1])
d = lakeshore.Dispatch(os.path.join(tempfile.mkdtemp(), "turnfloor.db"))
q = SyncQueue("turnfloor", dispatch=d)
for i in range(0, N, 500):
    q.submit_many([{"i": j} for j in range(i, min(N, i + 500))])
core, transport = q._core, d._transport
path = core.path + "/settle-and-claim"
claim = {"kind": core.kind, "max": 1, "wait": 0.0, "worker": "turnfloor"}
ans = transport.call_blocking("POST", path, {"settles": [], "claim": claim})
t, n = time.perf_counter(), 0
cpu = time.process_time()
while ans.get("jobs"):
    job = ans["jobs"][0]
    settle = {"id": job["id"], "token": job["token"], "outcome": "succeeded", "result": msgpack.packb(1)}
    ans = transport.call_blocking("POST", path, {"settles": [settle], "claim": claim})
    n += 1
dt = time.perf_counter() - t
print(f"{n} jobs {dt:.3f} s, {dt / n * 1e3:.3f} ms/job, client CPU {(time.process_time() - cpu) / n * 1e3:.3f} ms/job")
d.close()
