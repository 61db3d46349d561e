"""Compute modes and code shipped with the run, end to end (docs/fabric.md).

    python examples/fabric/run.py

submits three texts to sentiment.model.score (mode "cpu" of lakeshore.yaml) from this
directory, starts a worker in a fresh temporary directory that never saw the code, and
prints the results: the worker fetched the code by its digest, ran the mode's setup once,
the on_host_setup hook before its first body, and the function. Without LAKESHORE_URL it
uses the embedded plane ($LAKESHORE_HOME, through the local daemon).

A supervisor can launch the workers instead (docs/providers.md): mode "cpu" asks for what
the local provider offers, and a worker it launches for the runs' shape offers it
($LAKESHORE_OFFERS):

    lakeshore queue set fabric-sentiment --provider local --max-workers 1 \
        --worker-command 'python3 -c "import lakeshore; lakeshore.run_worker(queues=[\"fabric-sentiment\"])"'
    lakeshore provider run    # or: lakeshore serve --providers

From a terminal, in this directory, against a server (shipped code needs one to keep it):

    lakeshore submit fabric-sentiment '{"text": "great"}' --mode cpu --function sentiment.model:score

ships the same code and names the function a worker imports from it (docs/fabric.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # the submit finds lakeshore.yaml from the working directory
sys.path.insert(0, HERE)

from sentiment.model import score  # noqa: E402

# The worker offers what mode "cpu" requires (its resources are each run's requirement:
# a worker offering less never claims them). A provider's workers offer their launch's
# shape themselves (docs/providers.md).
WORKER = (
    "import lakeshore; lakeshore.run_worker(queues=['fabric-sentiment'], "
    "offers={'cpus_milli': 1000, 'memory_bytes': 256 << 20})"
)


def main() -> None:
    texts = ["I love this, it is great", "awful, I hate it", "good but bad"]
    ids = [score.submit(text=t) for t in texts]
    q = score.queue()
    meta = q.get(ids[0]).metadata
    print(f"mode {meta['lakeshore.mode']}, host key {meta['lakeshore.host_key']}, code {meta['lakeshore.code'][:12]}…")
    with tempfile.TemporaryDirectory(prefix="fabric-worker-") as elsewhere:
        env = dict(os.environ, LAKESHORE_CODE_CACHE=os.path.join(elsewhere, "cache"))
        env.pop("PYTHONPATH", None)
        worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=elsewhere, env=env)
        try:
            for inv in ids:
                r = q.result(inv, timeout=120)
                print(f"{r['label']:8} {r['score']:+d}  {r['text']}  ({r['phase']})")
        finally:
            worker.send_signal(signal.SIGTERM)  # drains: nothing new is claimed
            worker.wait(timeout=60)
        print(f"worker exit {worker.returncode}; its directory never held the code: {os.listdir(elsewhere) == ['cache']}")


if __name__ == "__main__":
    main()
