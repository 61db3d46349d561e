"""Hatch build hook: ship the ``lakeshore`` binary in the wheel.

Building a wheel (``pip wheel python/``, ``python -m build --wheel python/`` or ``python -m
build python/``) runs ``go build -trimpath -o <tmp>/lakeshore ./cmd/lakeshore`` and puts the
binary at ``lakeshore/_bin/lakeshore`` in the wheel, tagged ``py3-none-<platform>`` (the
binary is native; the Python code runs on any CPython ≥ 3.10). The client finds it there when
``LAKESHORE_BIN`` is unset (``lakeshore._daemon.find_binary``).

Where the Go sources are:

- building from the repository: its root, ``python/..``;
- building from the sdist (``python -m build python/`` builds the sdist first, then the wheel
  from it, where ``..`` is not the repository): the sdist carries the Go module under
  ``_go/`` (the repository's tracked files that ``go build ./cmd/lakeshore`` needs: Go
  sources without tests, ``go.mod``, ``go.sum`` and the embedded assets and migrations), put
  there by this hook when it builds the sdist. The Go build downloads the module's
  dependencies as any ``go build`` does (``GOPROXY``, ``GOFLAGS`` apply).

``LAKESHORE_WHEEL_BINARY=/path/to/lakeshore`` ships that binary instead of building one (a
binary built elsewhere, or the test suite's, to keep its wheel test fast).
``LAKESHORE_SKIP_GO_BUILD=1``, editable installs, and builds without a Go toolchain (with a
warning) ship no binary: the client then uses ``LAKESHORE_BIN`` or ``lakeshore`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
import warnings
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Tracked files of the repository that the sdist's _go/ leaves out: not needed by
# `go build ./cmd/lakeshore`.
_SKIP_DIRS = ("python/", "docs/", "examples/", ".ci/", ".github/")


def _go_toolchain() -> str | None:
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)


def _module_files(repo: Path) -> list[str]:
    """The repository's tracked files the Go build needs (``git ls-files``), relative."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout.decode()
    keep = []
    for f in out.split("\0"):
        if not f or f.startswith(_SKIP_DIRS) or f.endswith("_test.go") or "/testdata/" in f or f.startswith("testdata/"):
            continue
        if (repo / f).is_file():
            keep.append(f)
    return keep


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


class GoBinaryHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "lakeshore-go-binary"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root).resolve()
        if self.target_name == "sdist":
            repo = root.parent
            if (repo / "go.mod").is_file() and (repo / ".git").exists() and shutil.which("git"):
                for f in _module_files(repo):
                    build_data["force_include"][str(repo / f)] = f"_go/{f}"
            return
        if self.target_name != "wheel" or version == "editable" or os.environ.get("LAKESHORE_SKIP_GO_BUILD"):
            return
        prebuilt = os.environ.get("LAKESHORE_WHEEL_BINARY")
        if prebuilt:
            if not (os.path.isfile(prebuilt) and os.access(prebuilt, os.X_OK)):
                raise RuntimeError(f"LAKESHORE_WHEEL_BINARY={prebuilt} is not an executable file")
            self._ship(build_data, Path(prebuilt))
            return
        src = root / "_go" if (root / "_go" / "go.mod").is_file() else root.parent
        go = _go_toolchain()
        if go is None or not (src / "cmd" / "lakeshore").is_dir():
            warnings.warn(
                f"no Go toolchain or no Go sources ({src / 'cmd' / 'lakeshore'}): the wheel ships no lakeshore binary "
                "(set LAKESHORE_WHEEL_BINARY to ship a prebuilt one)",
                stacklevel=1,
            )
            return
        out = Path(tempfile.mkdtemp(prefix="lakeshore-wheel-")) / "lakeshore"
        subprocess.run([go, "build", "-trimpath", "-o", str(out), "./cmd/lakeshore"], cwd=src, check=True)
        self._ship(build_data, out)

    def _ship(self, build_data: dict[str, Any], binary: Path) -> None:
        build_data["force_include"][str(binary)] = "lakeshore/_bin/lakeshore"
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{_platform_tag()}"
