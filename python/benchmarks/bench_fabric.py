"""Submit overhead of code shipped with the run, with an unchanged tree (docs/benchmarks-fabric.md).

    LAKESHORE_BIN=$PWD/lakeshore .venv/bin/python python/benchmarks/bench_fabric.py [--mb 50] [--files 500] [--n 200]

Makes a git work tree of --files files, --mb megabytes in all (incompressible bytes), with a
lakeshore.yaml of two modes: "plain" (no code) and "shipped" (the git tree). On the
embedded plane of a fresh LAKESHORE_HOME it times, alternating, --n submits of each kind
after one warm-up submit each (the first shipped submit hashes and uploads the tree), and
prints the medians and the difference: what a submit of an unchanged tree costs over the
plain submit (no upload: the digest is known, the stat cache says nothing changed); then a
worker's preparation of that digest, first (download, unpack, verify) and later (cached).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time


def _body(x: int) -> int:
    return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="fabric-bench-")
    os.environ["LAKESHORE_HOME"] = os.path.join(root, "home")
    os.environ.pop("LAKESHORE_URL", None)
    os.environ.pop("LAKESHORE_CONFIG", None)
    proj = os.path.join(root, "proj")
    per = a.mb * 1_000_000 // a.files
    for i in range(a.files):
        d = os.path.join(proj, f"pkg{i % 20}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"m{i}.py"), "wb") as f:
            f.write(os.urandom(per))
    with open(os.path.join(proj, "lakeshore.yaml"), "w") as f:
        f.write("modes:\n  plain: {code: false}\n  shipped: {code: true}\ncode:\n  max_size: 200MB\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", "-C", proj, *cmd], check=True, env=env)
    time.sleep(2.5)  # past the stat cache's racy window: files just written are hashed again
    os.chdir(proj)

    import lakeshore

    f = _body
    f.__module__ = "bench"  # as if imported from bench.py of the tree
    u = lakeshore.udf(f, queue="fabric-bench")
    t0 = time.perf_counter()
    u.submit(x=0, _mode="shipped")
    first = time.perf_counter() - t0
    u.submit(x=0)
    plain, shipped, declared = [], [], []
    cpu = {"plain": [], "shipped": [], "declared": []}
    for i in range(a.n):
        for kind, out, mode in (("plain", plain, None), ("shipped", shipped, "shipped"), ("declared", declared, "plain")):
            c = time.thread_time()
            t = time.perf_counter()
            u.submit(x=i, _mode=mode)
            out.append(time.perf_counter() - t)
            cpu[kind].append(time.thread_time() - c)
    mp, ms, md = (statistics.median(x) * 1e3 for x in (plain, shipped, declared))
    cp, cs, cd = (statistics.median(cpu[k]) * 1e3 for k in ("plain", "shipped", "declared"))
    print(f"tree: {a.files} files, {a.mb} MB; first shipped submit (hash + archive + upload): {first * 1e3:.0f} ms")
    print(f"median submit over {a.n}: plain {mp:.3f} ms, mode without code {md:.3f} ms, mode with code (unchanged tree) {ms:.3f} ms")
    print(f"overhead of code shipping with an unchanged tree: {ms - mp:.3f} ms (mode declaration alone: {md - mp:.3f} ms)")
    print(f"CPU time of the submitting thread (median): plain {cp:.3f} ms, mode without code {cd:.3f} ms, with code {cs:.3f} ms: overhead {cs - cp:.3f} ms")

    # A worker's first run of the new digest (download, unpack, verify) and a later one.
    from lakeshore import _fabric, code, config

    os.environ["LAKESHORE_CODE_CACHE"] = os.path.join(root, "worker-cache")
    digest = code.snapshot(proj).digest
    prep = _fabric.Preparer(u.queue().dispatch)
    md = {config.META_CODE: digest, config.META_RUN: "{}"}
    t = time.perf_counter()
    prep.prepare(u.queue().dispatch.namespace, "fabric-bench", md)
    cold = time.perf_counter() - t
    warm = []
    for _ in range(20):
        t = time.perf_counter()
        prep.prepare(u.queue().dispatch.namespace, "fabric-bench", md)
        warm.append(time.perf_counter() - t)
    print(f"worker: first run of the digest (download + unpack + verify) {cold * 1e3:.0f} ms; later runs {statistics.median(warm) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
