"""Probe (docs/benchmarks-python.md, "Eight threads: the next request waits for the callers
just answered"): bench_seeds.py's 8-thread enqueue on the default plane of $LAKESHORE_HOME,
timing every blocking request (``_http11.BlockingPool.request``, send to answer): how many
requests, the wall time inside them and between them (medians), the client's and the
daemon's CPU per submit; stops the daemon at the end.

    LAKESHORE_HOME=$(mktemp -d) LAKESHORE_BIN=... python requestgaps.py 5000 [threads]
"""
import json, os, socket, statistics, sys, threading, time
import lakeshore as dls
from lakeshore import _http11
import benchjobs

N = int(sys.argv[1]); T = int(sys.argv[2]) if len(sys.argv) > 2 else 8
spans = []
orig = _http11.BlockingPool.request
def request(self, *a, **k):
    s = time.perf_counter()
    r = orig(self, *a, **k)
    spans.append((s, time.perf_counter()))
    return r
_http11.BlockingPool.request = request
q = dls.SyncQueue("seedbench")
q.submit({"i": -1})
spans.clear()
def part(k):
    for i in range(k, N, T):
        q.submit({"i": i})
threads = [threading.Thread(target=part, args=(k,)) for k in range(T)]
dcpu, _ = benchjobs.daemon_cpu()
d0 = dcpu(); c0 = os.times(); t = time.perf_counter()
for th in threads: th.start()
for th in threads: th.join()
dt = time.perf_counter() - t; c1 = os.times(); d1 = dcpu()
spans.sort()
gaps = [spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1)]
print(json.dumps({
    "seconds": round(dt, 3), "requests": len(spans),
    "in_requests_s": round(sum(e - s for s, e in spans), 3),
    "request_p50_us": round(statistics.median(e - s for s, e in spans) * 1e6),
    "gap_p50_us": round(statistics.median(gaps) * 1e6) if gaps else 0,
    "client_cpu_ms": round((c1.user - c0.user + c1.system - c0.system) * 1e3 / N, 3),
    "daemon_cpu_ms": round((d1 - d0) * 1e3 / N, 3)}))
c = socket.socket(socket.AF_UNIX); c.connect(q._core.dispatch.socket)
c.sendall(b"POST /v1/daemon/stop HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
while c.recv(65536): pass
