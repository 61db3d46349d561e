"""Probe (docs/benchmarks-python.md, "Eight threads and four worker processes against the seed
packages"): bench_seeds.py's 8-thread enqueue on the default plane of $LAKESHORE_HOME, with
counts of the requests sent (on callers' threads, and through the loop's submit batcher with
their sizes), the client's and the daemon's CPU per submit; stops the daemon at the end.

    LAKESHORE_HOME=$(mktemp -d) LAKESHORE_BIN=... python enq8.py 5000 [threads]
"""
import json, sys, threading, time, os, collections, tempfile
import lakeshore as dls
from lakeshore import queue as lq, _transport
N = int(sys.argv[1]); T = int(sys.argv[2]) if len(sys.argv) > 2 else 8
stats = collections.Counter(); sizes = collections.Counter()
orig_cb = _transport.HttpTransport.call_blocking
def cb(self, *a, **k):
    stats["blocking"] += 1
    return orig_cb(self, *a, **k)
_transport.HttpTransport.call_blocking = cb
orig_send = lq.QueueCore._send_submits
async def send(self, bodies):
    stats["batched_requests"] += 1; sizes[len(bodies)] += 1
    return await orig_send(self, bodies)
lq.QueueCore._send_submits = send
q = dls.SyncQueue("seedbench")
if os.environ.get("INFLIGHT"): q._core._submits._max_in_flight = int(os.environ["INFLIGHT"])
q.submit({"i": -1})
stats.clear(); sizes.clear()
def part(k):
    for i in range(k, N, T):
        q.submit({"i": i})
threads = [threading.Thread(target=part, args=(k,)) for k in range(T)]
import subprocess
import benchjobs
dcpu, dpid = benchjobs.daemon_cpu()
d0 = dcpu()
if os.environ.get("SHOWPID"): print("PID", dpid, flush=True); time.sleep(1.0)
c0 = os.times(); t = time.perf_counter()
for th in threads: th.start()
for th in threads: th.join()
dt = time.perf_counter() - t; c1 = os.times(); d1 = dcpu()
stats["daemon_cpu_ms_per_job"] = round((d1 - d0) * 1e3 / N, 3)
print(json.dumps({"seconds": dt, "jobs/s": N/dt, "cpu_ms_per_job": (c1.user-c0.user+c1.system-c0.system)*1e3/N, **stats, "sizes": sorted(sizes.items())[:30]}))

import socket as _s
c = _s.socket(_s.AF_UNIX); c.connect(q._core.dispatch.socket)
c.sendall(b"POST /v1/daemon/stop HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
while c.recv(65536): pass
