"""Hatch build hook: ship the ``lakeshore`` binary in the wheel.

Building a wheel (``pip wheel python/`` or ``python -m build python/``) runs
``go build -o <tmp>/lakeshore ./cmd/lakeshore`` in the repository and puts the binary at
``lakeshore/_bin/lakeshore`` in the wheel, which is then platform-specific. The client finds it
there when ``LAKESHORE_BIN`` is unset. Editable installs and builds with
``LAKESHORE_SKIP_GO_BUILD=1`` (or without a Go toolchain, with a warning) ship no binary: the
client then uses ``LAKESHORE_BIN`` or ``lakeshore`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class GoBinaryHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "lakeshore-go-binary"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable" or os.environ.get("LAKESHORE_SKIP_GO_BUILD"):
            return
        repo = Path(self.root).resolve().parent
        go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
        if go is None or not (repo / "cmd" / "lakeshore").is_dir():
            warnings.warn("no Go toolchain or no ../cmd/lakeshore: the wheel ships no lakeshore binary", stacklevel=1)
            return
        out = Path(tempfile.mkdtemp(prefix="lakeshore-wheel-")) / "lakeshore"
        subprocess.run([go, "build", "-trimpath", "-o", str(out), "./cmd/lakeshore"], cwd=repo, check=True)
        build_data["force_include"][str(out)] = "lakeshore/_bin/lakeshore"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
