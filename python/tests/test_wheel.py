"""The wheel: it ships ``lakeshore/_bin/lakeshore`` (tagged for the platform, executable),
the installed package finds it in the documented order, and the build from the sdist
(``python -m build``) works.

The fast test builds the wheel with ``LAKESHORE_WHEEL_BINARY`` set to a small executable
that runs the session's binary (the hook ships it instead of running ``go build``). The build backend's own Go build, from
the repository and from the sdist, took minutes here on a cold Go build cache (6 min 40 s
once for ``pip wheel python/``; 9 s with a warm cache), so that test runs only with
``LAKESHORE_TEST_WHEEL_BUILD=1``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]


def _sha256(path: Path | None = None, data: bytes | None = None) -> str:
    h = hashlib.sha256()
    if path is not None:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    if data is not None:
        h.update(data)
    return h.hexdigest()


def _build(cmd: list[str], out: Path, env: dict[str, str]) -> Path:
    r = subprocess.run(cmd, cwd=PYTHON_DIR.parent, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _check_wheel(wheel: Path) -> zipfile.ZipInfo:
    """The wheel's binary entry, after checking the tag and the contents."""
    name = wheel.name
    assert name.startswith("lakeshore_queue-") and "-py3-none-" in name and not name.endswith("-any.whl"), name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {"lakeshore/__init__.py", "lakeshore/py.typed", "lakeshore/data.py", "lakeshore/_bin/lakeshore"} <= names
        assert not any(n.startswith(("_go/", "tests/")) for n in names)
        info = z.getinfo("lakeshore/_bin/lakeshore")
        assert (info.external_attr >> 16) & stat.S_IXUSR, "the shipped binary is not executable"
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
        assert "Root-Is-Purelib: false" in wheel_meta
    return info


FIND = """
import os, sys, json
import lakeshore, lakeshore._daemon as d
print(json.dumps({"module": lakeshore.__file__, "found": d.find_binary(*sys.argv[1:2])}))
"""


def _find(site: Path, env: dict[str, str], *arg: str) -> dict[str, str]:
    import json

    r = subprocess.run(
        [sys.executable, "-c", FIND, *arg], env=dict(env, PYTHONPATH=str(site)), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    out: dict[str, str] = json.loads(r.stdout)
    return out


def test_the_wheel_ships_the_binary_and_find_binary_uses_it(lakeshore_bin: str, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    # A small executable that runs the session's binary stands for it: compressing the
    # 100 MB binary into the wheel would take most of this test's time.
    given = tmp_path / "lakeshore-given"
    given.write_text(f'#!/bin/sh\nexec {lakeshore_bin} "$@"\n')
    given.chmod(0o755)
    env = dict(os.environ, LAKESHORE_WHEEL_BINARY=str(given))
    env.pop("LAKESHORE_SKIP_GO_BUILD", None)
    wheel = _build(
        [sys.executable, "-m", "pip", "wheel", str(PYTHON_DIR), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        out,
        env,
    )
    info = _check_wheel(wheel)
    with zipfile.ZipFile(wheel) as z, z.open(info) as f:
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    assert h.hexdigest() == _sha256(given)  # the binary it was given, intact

    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    shipped = site / "lakeshore" / "_bin" / "lakeshore"
    assert os.access(shipped, os.X_OK)

    # The lookup order: binary=, else $LAKESHORE_BIN, else the wheel's, else PATH.
    bare = {k: v for k, v in os.environ.items() if k not in ("LAKESHORE_BIN", "PYTHONPATH")}
    bare["PATH"] = str(tmp_path / "empty-path")
    got = _find(site, bare)
    assert got["module"] == str(site / "lakeshore" / "__init__.py")  # the installed copy, not the checkout
    assert got["found"] == str(shipped)
    assert _find(site, dict(bare, LAKESHORE_BIN=lakeshore_bin))["found"] == lakeshore_bin
    assert _find(site, dict(bare, LAKESHORE_BIN=lakeshore_bin), str(shipped))["found"] == str(shipped)
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "lakeshore").symlink_to(lakeshore_bin)
    shipped.chmod(0o644)  # a wheel's binary that is not executable is skipped
    assert _find(site, dict(bare, PATH=str(on_path)))["found"] == str(on_path / "lakeshore")
    shipped.chmod(0o755)

    # The shipped binary serves the embedded plane for the installed package.
    script = textwrap.dedent(
        """
        import lakeshore
        with lakeshore.Dispatch(":memory:") as d:
            q = lakeshore.SyncQueue("wheel", dispatch=d)
            inv = q.submit({"x": 1})
            job = q.claim()
            q.ack(job, job.payload["x"] + 1)
            print(q.result(inv, timeout=10), d.info.pid > 0)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], env=dict(bare, PYTHONPATH=str(site)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "True"]


@pytest.mark.skipif(
    not os.environ.get("LAKESHORE_TEST_WHEEL_BUILD"),
    reason="the backend's own go build takes minutes on a cold cache; set LAKESHORE_TEST_WHEEL_BUILD=1 to run it",
)
def test_python_m_build_from_the_sdist_builds_the_binary(tmp_path: Path) -> None:
    """``python -m build python/``: the sdist (with the Go module under _go/), then the wheel
    built from the unpacked sdist, whose hook runs ``go build`` there."""
    out = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("LAKESHORE_WHEEL_BINARY", "LAKESHORE_SKIP_GO_BUILD")}
    wheel = _build([sys.executable, "-m", "build", "--no-isolation", str(PYTHON_DIR), "-o", str(out)], out, env)
    (sdist,) = out.glob("*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as t:
        names = t.getnames()
    assert any(n.endswith("/_go/go.mod") for n in names) and any(n.endswith("/_go/cmd/lakeshore/main.go") for n in names)
    assert not any(n.endswith("_test.go") for n in names)
    _check_wheel(wheel)
    with zipfile.ZipFile(wheel) as z:
        binary = tmp_path / "lakeshore"
        binary.write_bytes(z.read("lakeshore/_bin/lakeshore"))
    binary.chmod(0o755)
    r = subprocess.run([str(binary), "daemon", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--socket" in r.stdout, r.stdout + r.stderr
