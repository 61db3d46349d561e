"""A Lakeshore client in Python's standard library only (urllib + json), no msgpack.

Usage: python3 stdlib_client.py BASE_URL
Submits {"x": 1}, claims it, posts a frame, acks it with a result, waits for the result
and reads the frames, all as plain JSON. Prints "ok" and exits 0 on success.
"""

import json
import sys
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
QUEUE = BASE + "/v1/namespaces/default/queues/py-jobs"


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["Content-Type"] == "application/json", resp.headers["Content-Type"]
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {url}: HTTP {e.code}: {e.read().decode()}")


sub = call("POST", QUEUE + "/invocations", {"payload": {"x": 1}})
inv_id = sub["id"]
assert sub["existing"] is False

jobs = call("POST", QUEUE + "/claim", {"wait": 5})["jobs"]
assert len(jobs) == 1, jobs
job = jobs[0]
assert job["id"] == inv_id and job["payload"] == {"x": 1}, job

inv = BASE + "/v1/invocations/" + inv_id
call("POST", inv + "/frames", {"token": job["token"], "value": {"progress": 0.5}})
call("POST", inv + "/settle", {"token": job["token"], "outcome": "succeeded",
                               "result": {"y": job["payload"]["x"] + 1}})

w = call("GET", inv + "/wait?timeout=10")
assert w["done"] is True, w
assert w["invocation"]["state"] == "succeeded", w
assert w["invocation"]["result"] == {"y": 2}, w

frames = call("GET", inv + "/frames?since=-1")
assert [f["kind"] for f in frames["frames"]] == ["VALUE", "END"], frames
assert frames["frames"][0]["value"] == {"progress": 0.5}, frames
assert frames["closed"] is True

# An error names the field in JSON terms.
req = urllib.request.Request(QUEUE + "/invocations", data=b'{"priority": "high"}', method="POST")
req.add_header("Content-Type", "application/json")
try:
    urllib.request.urlopen(req, timeout=30)
    raise SystemExit("a bad priority was accepted")
except urllib.error.HTTPError as e:
    body = json.loads(e.read())
    assert e.code == 400 and body["code"] == "invalid", body
    assert body["details"]["field"] == "priority", body

print("ok")
