"""Lakeshore from Python against the real seed packages, same machine, same run (issue 30
item 6).

The seed documents (``shared/seeds/`` of the project's workspace) describe two public
packages: ``dreamlake-lakeshore`` (import ``dreamlake.lakeshore``: a job queue whose local
plane is an in-process SQLite file) and ``persisting`` (a data queue of records on Lance).
Each workload below is one program written against *their* API; for ours its imports are
rewritten (``dreamlake.lakeshore`` → ``lakeshore``, ``persisting`` → ``lakeshore.data``),
as ``python/tests/test_differential.py`` does for semantics. The two run alternately, each
run in a fresh directory (``LAKESHORE_HOME`` and the data queue's ``storage_path``), and
the table gives every run's figure, the medians, and **ours ÷ theirs** (time, so lower is
better).

Both sides' packages are compiled to bytecode before the runs (``compile_packages``), as
``pip install`` leaves theirs.

Durability: both job planes commit every submit to a SQLite file in WAL mode with
``synchronous=FULL`` (theirs is Python's ``sqlite3`` default; ours the daemon's writer).
``persisting``'s local mode writes Lance files and does not fsync; ours syncs every flush.

Their interpreter needs ``dreamlake-lakeshore==0.5.0``, ``persisting==0.3.0`` and numpy::

    python3 -m venv /tmp/seedbench-venv
    /tmp/seedbench-venv/bin/pip install dreamlake-lakeshore==0.5.0 persisting==0.3.0 numpy
    go build -o /tmp/lakeshore ./cmd/lakeshore
    LAKESHORE_BIN=/tmp/lakeshore .venv/bin/python python/benchmarks/bench_seeds.py \\
        --real-python /tmp/seedbench-venv/bin/python --runs 3

``--only enqueue1,burn4`` runs some workloads; ``--jobs`` and ``--records`` size them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

# The rewrites that make a program for their packages one for ours.
_OURS = [
    ("import dreamlake.lakeshore as dls", "import lakeshore as dls"),
    ("from persisting import", "from lakeshore.data import"),
]

# The job module every job workload imports (a file, so that worker processes import the
# function by reference, as both packages' local planes run it).
_JOBS = """
import dreamlake.lakeshore as dls

@dls.udf(queue="seedbench")
def noop(i):
    return i
"""

_WORKER = """
import dreamlake.lakeshore as dls
import benchjobs  # noqa: F401  (binds noop to its queue in this process)
dls.run_worker(dls.SyncQueue("seedbench"))
"""

# Each program prints one JSON object: {"seconds": …} and maybe more figures.
_PROGRAMS: dict[str, str] = {
    # One thread submitting N jobs in a row, each durable before the next.
    "enqueue1": """
import json, sys, time
import dreamlake.lakeshore as dls
N = int(sys.argv[1])
q = dls.SyncQueue("seedbench")
q.submit({"i": -1})  # warm-up: opens the plane (ours: starts the daemon)
t = time.perf_counter()
for i in range(N):
    q.submit({"i": i})
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    # Eight threads submitting N jobs in all.
    "enqueue8": """
import json, sys, threading, time
import dreamlake.lakeshore as dls
N = int(sys.argv[1])
q = dls.SyncQueue("seedbench")
q.submit({"i": -1})
def part(k):
    for i in range(k, N, 8):
        q.submit({"i": i})
threads = [threading.Thread(target=part, args=(k,)) for k in range(8)]
t = time.perf_counter()
for th in threads:
    th.start()
for th in threads:
    th.join()
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    # N no-op jobs queued first, then W worker processes; timed from the workers' start
    # until every job succeeded (their start-up included, the same for both).
    "burn": """
import json, os, subprocess, sys, time
import dreamlake.lakeshore as dls
import benchjobs
N, W = int(sys.argv[1]), int(sys.argv[2])
q = dls.SyncQueue("seedbench")
for i in range(N):
    benchjobs.noop.submit(i)
t = time.perf_counter()
workers = [subprocess.Popen([sys.executable, "-c", os.environ["SEEDBENCH_WORKER"]]) for _ in range(W)]
try:
    while q.count("succeeded") < N:
        if all(w.poll() is not None for w in workers):
            raise SystemExit("every worker process exited before the burn-down ended (codes %s)"
                             % [w.returncode for w in workers])
        time.sleep(0.005)
    seconds = time.perf_counter() - t
finally:
    for w in workers:
        w.kill()
        w.wait()
print(json.dumps({"seconds": seconds}))
""",
    # One worker process running; N calls in a row, each submit then wait for its result.
    "latency": """
import json, os, statistics, subprocess, sys, time
import dreamlake.lakeshore as dls
import benchjobs
N = int(sys.argv[1])
q = dls.SyncQueue("seedbench")
worker = subprocess.Popen([sys.executable, "-c", os.environ["SEEDBENCH_WORKER"]])
try:
    q.result(benchjobs.noop.submit(-1), timeout=120)  # the worker is up
    lat = []
    t = time.perf_counter()
    for i in range(N):
        s = time.perf_counter()
        q.result(benchjobs.noop.submit(i), timeout=60)
        lat.append(time.perf_counter() - s)
    seconds = time.perf_counter() - t
finally:
    worker.kill()
    worker.wait()
lat.sort()
print(json.dumps({"seconds": seconds, "p50_ms": statistics.median(lat) * 1e3,
                  "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1e3}))
""",
    # 100 × put_batch(R/100 records) then flush.
    "put_batch": """
import asyncio, json, sys, tempfile, time
from persisting import Queue
R = int(sys.argv[1])
async def main():
    q = Queue("seedbench", storage_path=tempfile.mkdtemp(dir="."))
    rows = [{"step": i, "reward": i / 10, "tag": "t%d" % i} for i in range(R // 100)]
    t = time.perf_counter()
    for _ in range(100):
        await q.put_batch(rows)
    await q.flush()
    print(json.dumps({"seconds": time.perf_counter() - t}))
asyncio.run(main())
""",
    # R single puts then flush.
    "put_single": """
import asyncio, json, sys, tempfile, time
from persisting import Queue
R = int(sys.argv[1])
async def main():
    q = Queue("seedbench", storage_path=tempfile.mkdtemp(dir="."))
    t = time.perf_counter()
    for i in range(R):
        await q.put({"step": i, "reward": i / 10, "tag": "t%d" % i})
    await q.flush()
    print(json.dumps({"seconds": time.perf_counter() - t}))
asyncio.run(main())
""",
    # R records put and flushed (not timed), then read back with get_batch(1024) by one
    # task until it has them all (both packages' readers track the task's consumption).
    "get_batch": """
import asyncio, json, sys, tempfile, time
from persisting import Queue, SequentialSampler
R = int(sys.argv[1])
async def main():
    q = Queue("seedbench", storage_path=tempfile.mkdtemp(dir="."))
    rows = [{"step": i, "reward": i / 10, "tag": "t%d" % i} for i in range(R)]
    for k in range(0, R, 1000):
        await q.put_batch(rows[k:k + 1000])
    await q.flush()
    reader = q.reader()
    got = 0
    t = time.perf_counter()
    while got < R:
        meta = await reader.get_meta(fields=["step", "reward", "tag"], batch_size=1024,
                                     task_name="train", sampler=SequentialSampler())
        if meta.size == 0:
            raise SystemExit("the reader found no more records at %d of %d" % (got, R))
        data = await reader.get_data(meta)
        got += meta.size
    print(json.dumps({"seconds": time.perf_counter() - t, "rows": got}))
asyncio.run(main())
""",
}

# name -> (program, its arguments from the options, what the figure is)
_WORKLOADS = {
    "enqueue1": ("enqueue1", lambda a: [a.jobs], "enqueue from 1 thread, {jobs} jobs"),
    "enqueue8": ("enqueue8", lambda a: [a.jobs], "enqueue from 8 threads, {jobs} jobs"),
    "burn1": ("burn", lambda a: [a.jobs, 1], "burn-down, 1 worker process, {jobs} no-op jobs"),
    "burn4": ("burn", lambda a: [a.jobs, 4], "burn-down, 4 worker processes, {jobs} no-op jobs"),
    "latency": ("latency", lambda a: [a.calls], "submit → result in a row, 1 worker, {calls} calls"),
    "put_batch": ("put_batch", lambda a: [a.records], "data: 100 × put_batch + flush, {records} records"),
    "put_single": ("put_single", lambda a: [a.records], "data: single puts + flush, {records} records"),
    "get_batch": ("get_batch", lambda a: [a.records], "data: get_meta + get_data of 1,024, {records} records"),
}


def ours(program: str) -> str:
    """program with its imports rewritten for this repository's SDK."""
    for theirs, mine in _OURS:
        program = program.replace(theirs, mine)
    return program


def stop_daemon(env: dict[str, str]) -> None:
    """Stop the daemon of env's LAKESHORE_HOME, if one runs (``POST /v1/daemon/stop``)."""
    sock = subprocess.run([os.environ.get("LAKESHORE_BIN", "lakeshore"), "daemon", "--print-socket"],
                          env=env, capture_output=True, text=True, timeout=60).stdout.strip()
    if not sock or not os.path.exists(sock):
        return
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(30)
        c.connect(sock)
        c.sendall(b"POST /v1/daemon/stop HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        while c.recv(65536):
            pass
    for _ in range(300):  # until it let go of its socket
        if not os.path.exists(sock):
            return
        time.sleep(0.01)


def run_once(python: str, program: str, args: list[int], mine: bool, timeout: float = 600) -> dict[str, float]:
    """Run program under python in a fresh directory; return its figures (``seconds`` NaN
    when it failed or gave no answer in ``timeout`` seconds: the table says failed)."""
    with tempfile.TemporaryDirectory(prefix="seedbench-") as d:
        home = Path(d)
        jobs, worker = textwrap.dedent(_JOBS), textwrap.dedent(_WORKER)
        if mine:
            jobs, worker, program = ours(jobs), ours(worker), ours(program)
        (home / "benchjobs.py").write_text(jobs)
        env = dict(os.environ, LAKESHORE_HOME=str(home / "home"), SEEDBENCH_WORKER=worker,
                   PYTHONPATH=str(home) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("LAKESHORE_URL", None)
        try:
            r = subprocess.run([python, "-c", textwrap.dedent(program), *map(str, args)],
                               capture_output=True, text=True, timeout=timeout, env=env, cwd=home)
        except subprocess.TimeoutExpired:
            print(f"# {'ours' if mine else 'theirs'} failed: no answer in {timeout:g} s", file=sys.stderr, flush=True)
            return {"seconds": math.nan}
        finally:
            if mine:  # our plane's daemon outlives the program: stop it with its home
                stop_daemon(env)
        if r.returncode != 0:  # a failed run is reported as such, and the others still count
            why = (r.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"# {'ours' if mine else 'theirs'} failed: {why[:300]}", file=sys.stderr, flush=True)
            return {"seconds": math.nan}
        return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def compile_packages(python: str, modules: list[str]) -> None:
    """Compile the packages of modules (as python imports them) to bytecode, as ``pip
    install`` leaves a wheel's: an editable install under ``PYTHONDONTWRITEBYTECODE=1`` (this
    machine's environment) would otherwise compile every module again in every process,
    each worker process's start included, which theirs, installed from wheels, never does."""
    for module in modules:
        where = subprocess.run([python, "-c", f"import os, {module} as m; print(os.path.dirname(m.__file__))"],
                               capture_output=True, text=True, timeout=120)
        if where.returncode == 0:
            subprocess.run([python, "-m", "compileall", "-q", where.stdout.strip()], capture_output=True, timeout=300)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real-python", required=True, help="an interpreter with dreamlake-lakeshore 0.5.0 and persisting 0.3.0")
    ap.add_argument("--ours-python", default=sys.executable, help="an interpreter with this repository's SDK (default: this one)")
    ap.add_argument("--runs", type=int, default=3, help="counted runs of each side, alternated")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=600, help="seconds a run may take before it counts as failed")
    ap.add_argument("--only", default=",".join(_WORKLOADS), help="comma-separated: " + ", ".join(_WORKLOADS))
    a = ap.parse_args()
    compile_packages(a.real_python, ["dreamlake.lakeshore", "persisting"])
    compile_packages(a.ours_python, ["lakeshore"])
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load {os.getloadavg()[0]:.1f}", flush=True)
    print("| workload | theirs (s) | ours (s) | ours ÷ theirs |")
    print("|---|---|---|--:|")
    for name in a.only.split(","):
        prog, args, label = _WORKLOADS[name]
        figures: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for _ in range(a.runs):
            for mine in (False, True):
                figures[mine].append(run_once(a.ours_python if mine else a.real_python, _PROGRAMS[prog], args(a), mine, a.timeout))
        med = {m: statistics.median([f["seconds"] for f in figures[m] if not math.isnan(f["seconds"])] or [math.nan])
               for m in figures}
        cell = {m: " · ".join("failed" if math.isnan(f["seconds"]) else f"{f['seconds']:.3f}" for f in figures[m])
                + f" (**{med[m]:.3f}**)" for m in figures}
        extra = ""
        if any("p50_ms" in f for f in figures[True]):
            extra = "; p50 ms theirs " + " · ".join(f"{f.get('p50_ms', math.nan):.2f}" for f in figures[False]) + \
                    ", ours " + " · ".join(f"{f.get('p50_ms', math.nan):.2f}" for f in figures[True])
        print(f"| {label.format(**vars(a))}{extra} | {cell[False]} | {cell[True]} | {med[True] / med[False]:.2f} |", flush=True)
    print(f"# done {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
