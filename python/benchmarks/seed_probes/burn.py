"""Probe: bench_seeds.py's burn-down (N queued no-op jobs, W worker processes) with the time
to the first success and the CPU of the workers and of the daemon; run from this directory
(benchjobs.py) and stops the daemon at the end.

    PYTHONPATH=. LAKESHORE_HOME=$(mktemp -d) LAKESHORE_BIN=... python burn.py 5000 4
"""
import json, os, subprocess, sys, time
import lakeshore as dls
import benchjobs
N, W = int(sys.argv[1]), int(sys.argv[2])
WORKER = """
import lakeshore as dls
import benchjobs
dls.run_worker(dls.SyncQueue("seedbench"))
"""
q = dls.SyncQueue("seedbench")
for i in range(N):
    benchjobs.noop.submit(i)
dcpu, dpid = benchjobs.daemon_cpu()
d0 = dcpu()
t = time.perf_counter()
workers = [subprocess.Popen([sys.executable, "-c", WORKER]) for _ in range(W)]
first = None
try:
    while (n := q.count("succeeded")) < N:
        if n and first is None: first = time.perf_counter() - t
        time.sleep(0.005)
    seconds = time.perf_counter() - t
finally:
    cpu = 0.0
    for w in workers:
        try:
            f = open(f"/proc/{w.pid}/stat").read().rsplit(")", 1)[1].split()
            cpu += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except OSError: pass
        w.kill(); w.wait()
print(json.dumps({"seconds": round(seconds, 3), "first_success": round(first, 3), "workers_cpu_s": cpu, "daemon_cpu_s": round(dcpu() - d0, 3)}))
import socket as _s
c = _s.socket(_s.AF_UNIX); c.connect(q._core.dispatch.socket)
c.sendall(b"POST /v1/daemon/stop HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
while c.recv(65536): pass
