#!/usr/bin/env python3
"""A Lakeshore exec provider in a few lines: workers as local processes.

Attach it with `lakeshore queue set Q --provider exec:/path/to/exec_local.py …`. The
supervisor runs `exec_local.py launch|stop|list` with JSON on stdin (docs/providers.md).
Replace Popen/kill with your cloud's or Kubernetes' API to launch workers there.
"""
import json, os, signal, subprocess, sys, time

STATE = os.environ.get("EXEC_PROVIDER_DIR", "/tmp/lakeshore-exec-provider")
os.makedirs(STATE, exist_ok=True)
op, req = sys.argv[1], json.load(sys.stdin)


def drop(path):
    """Remove a launch record; a stop and a list may both drop a record that has ended."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


if op == "launch":
    env = {**os.environ, **req["env"]}
    proc = subprocess.Popen(req["command"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(STATE, req["id"]), "w") as f:
        json.dump({"pid": proc.pid, "namespace": req["namespace"], "queue": req["queue"]}, f)
elif op == "stop":
    path = os.path.join(STATE, req["id"])
    try:  # a list running meanwhile may drop the record of a worker that has ended
        pid = json.load(open(path))["pid"]
    except FileNotFoundError:
        sys.exit(0)  # an unknown or ended launch is not an error
    try:
        os.killpg(pid, signal.SIGTERM)  # drain: running jobs finish
        deadline = time.time() + req["grace_seconds"]
        while time.time() < deadline:
            os.kill(pid, 0)  # raises once it is gone
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    drop(path)
elif op == "list":
    launches = []
    for launch_id in os.listdir(STATE):
        try:
            rec = json.load(open(os.path.join(STATE, launch_id)))
        except FileNotFoundError:
            continue  # stopped meanwhile
        try:
            os.kill(rec["pid"], 0)
            with open(f"/proc/{rec['pid']}/stat") as f:  # a zombie has ended
                alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if alive:
            launches.append({"id": launch_id, "namespace": rec["namespace"],
                             "queue": rec["queue"], "state": "running"})
        else:
            drop(os.path.join(STATE, launch_id))
    json.dump({"launches": launches}, sys.stdout)
else:
    sys.exit(f"unknown operation {op!r}; use launch, stop or list")
