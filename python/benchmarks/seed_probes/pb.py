"""Probe: bench_seeds.py's put_batch workload (ours) with the time of the puts and of the
flush, and the client's and the daemon's CPU; run in a fresh directory.

    cd $(mktemp -d) && LAKESHORE_HOME=$PWD/home LAKESHORE_BIN=... python .../pb.py 100000
"""
import asyncio, json, sys, tempfile, time, os, subprocess
from lakeshore.data import Queue
R = int(sys.argv[1])
async def main():
    q = Queue("seedbench", storage_path=tempfile.mkdtemp(dir="."))
    rows = [{"step": i, "reward": i / 10, "tag": "t%d" % i} for i in range(R // 100)]
    await q.put_batch(rows[:1]); await q.flush()
    home = os.environ["LAKESHORE_HOME"]
    dpid = int(subprocess.run(["pgrep", "-f", "lakeshore.*" + home], capture_output=True, text=True).stdout.split()[0])
    def dcpu():
        f = open(f"/proc/{dpid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    d0 = dcpu(); c0 = os.times()
    t = time.perf_counter()
    for _ in range(100):
        await q.put_batch(rows)
    t1 = time.perf_counter()
    await q.flush()
    t2 = time.perf_counter(); c1 = os.times(); d1 = dcpu()
    print(json.dumps({"seconds": round(t2 - t, 3), "puts": round(t1 - t, 3), "flush": round(t2 - t1, 3), "client_cpu": round(c1.user-c0.user+c1.system-c0.system, 3), "daemon_cpu": round(d1-d0, 3)}))
asyncio.run(main())
