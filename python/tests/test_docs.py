"""Every public class, function, method and property has a docstring."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import lakeshore
from lakeshore import data, dispatch, errors, queue, rl, scopes, wire, worker


def test_public_api_is_documented() -> None:
    missing = []
    for mod in (lakeshore, wire, errors, queue, dispatch, worker, scopes, data, rl):
        assert (mod.__doc__ or "").strip(), mod.__name__
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(f"{mod.__name__}.{name}")
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") or not (callable(value) or isinstance(value, property)):
                        continue
                    if not (getattr(value, "__doc__", None) or "").strip():
                        missing.append(f"{mod.__name__}.{name}.{member}")
    assert not missing, f"undocumented: {sorted(set(missing))}"


def test_timeout_error_does_not_shadow_the_builtin_on_star_import() -> None:
    assert "TimeoutError" not in lakeshore.__all__
    assert issubclass(lakeshore.TimeoutError, TimeoutError)


RUN_BLOCKS = r"""
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
failed = []
for i, (line, code) in enumerate(blocks):
    print(f"--- block {i} (docs/python.md line {line})", flush=True)
    try:
        exec(compile(code, f"docs/python.md:{line}", "exec"), {"__name__": "__main__"})
    except BaseException:
        failed.append(line)
        traceback.print_exc()
print("FAILED", json.dumps(failed), flush=True)
"""


def test_the_python_md_snippets_run(lakeshore_bin: str, tmp_path: Path) -> None:
    """Every ```python block of docs/python.md is a complete program: each runs, in order, in
    a fresh namespace of one process (cwd and LAKESHORE_HOME a temporary directory, no
    LAKESHORE_URL), and the outputs its comments promise are checked below."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    blocks = [
        (doc.count("\n", 0, m.start()) + 2, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", doc, re.S)
    ]
    assert len(blocks) >= 6
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(blocks))
    home = Path(tempfile.mkdtemp(prefix="ls-doc-"))
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(home))
    env.pop("LAKESHORE_URL", None)
    try:
        r = subprocess.run(
            [sys.executable, "-c", RUN_BLOCKS, str(spec)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        from lakeshore import _daemon

        for sock in home.glob("run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)
    out = r.stdout
    assert r.returncode == 0 and "FAILED []" in out, out + r.stderr
    for promised in [
        "{'echo': {'prompt': 'hello'}}",
        "[{'progress': 0.5}]",
        "9900 0",
        "{'of': 4, 'step': 4}",
        "[0.0625, 0.125]",
        "[['denoise']]",
        "(32, 8) [0 1 2]",
        "['p0', 'p0', 'p0', 'p0', 'p1', 'p1', 'p1', 'p1']",
        "[('sess-42', {'status': 'complete'}), ('sess-43', {}), ('sess-44', {})]",
        "True None",
        "[[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7]]",
        "[{'reward': 0.5, 'step': 1}, {'reward': 0.8, 'step': 2}]",
        "3 8 True",
        "from the child",
    ]:
        assert promised in out, f"{promised!r} not in the output:\n{out}"
