"""Probe: N submits from one thread in requests of K (K=1: SyncQueue.submit; else
submit_many), with the client's and the daemon's CPU per submit.

    LAKESHORE_HOME=$(mktemp -d) LAKESHORE_BIN=... python batchcost.py 3000 K
"""
import json, sys, time, os, subprocess
import lakeshore as dls
N = int(sys.argv[1]); K = int(sys.argv[2])
q = dls.SyncQueue("seedbench")
q.submit({"i": -1})
home = os.environ["LAKESHORE_HOME"]
dpid = int(subprocess.run(["pgrep", "-f", "daemon --target " + home], capture_output=True, text=True).stdout.split()[0])
def dcpu():
    f = open(f"/proc/{dpid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"), int(f[11])/os.sysconf("SC_CLK_TCK")
print("PID", dpid, flush=True); time.sleep(1.0)
d0 = dcpu(); c0 = os.times(); t = time.perf_counter()
if K == 1:
    for i in range(N): q.submit({"i": i})
else:
    for s in range(0, N, K): q.submit_many([{"i": i} for i in range(s, s + K)])
dt = time.perf_counter() - t; c1 = os.times(); d1 = dcpu()
print(json.dumps({"K": K, "seconds": round(dt, 3), "us_per_job": round(dt*1e6/N, 1), "client_cpu_us": round((c1.user-c0.user+c1.system-c0.system)*1e6/N, 1), "daemon_cpu_us": round((d1[0]-d0[0])*1e6/N, 1), "daemon_user_us": round((d1[1]-d0[1])*1e6/N, 1)}))
import socket as _s
c = _s.socket(_s.AF_UNIX); c.connect(q._core.dispatch.socket)
c.sendall(b"POST /v1/daemon/stop HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
while c.recv(65536): pass
