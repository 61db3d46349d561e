"""Issue 29 item 16: the seeds' first examples in our names (``import lakeshore as dls`` for
``import dreamlake.lakeshore as dls``, ``lakeshore.data`` for ``persisting``), as the top of
docs/python.md shows them and README points to, each run as written in a fresh process
(cwd and ``LAKESHORE_HOME`` a temporary directory, no ``LAKESHORE_URL``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str) -> str:
    doc = (ROOT / "docs" / "python.md").read_text()
    m = re.search(r"<!-- seed-example: " + name + r" -->\n```python\n(.*?)```", doc, re.S)
    assert m is not None, f"docs/python.md has no seed example {name!r}"
    return m.group(1)


def _run(code: str, lakeshore_bin: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("LAKESHORE_URL", "LAKESHORE_TOKEN")}
    env.update(LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(tmp_path / "home"))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_mapping_is_at_the_top_of_python_md_and_in_readme() -> None:
    doc = (ROOT / "docs" / "python.md").read_text()
    head = doc[: doc.index("## Install")]
    for seed, ours in [
        ("import dreamlake.lakeshore as dls", "import lakeshore as dls"),
        ("from persisting import Queue", "from lakeshore.data import Queue"),
        ("pip install lakeshore", "pip install lakeshore-queue"),
    ]:
        assert seed in head and ours in head, (seed, ours)
    readme = (ROOT / "README.md").read_text()
    assert "import dreamlake.lakeshore as dls" in readme and "from persisting import Queue" in readme
    assert "lakeshore.data" in readme and "lakeshore-queue" in readme


@pytest.mark.parametrize("name,printed", [("queue", "{'got': {'x': 1}}\n"), ("data", "Read 2 records\n")])
def test_the_seed_examples_run_in_our_names(name: str, printed: str, lakeshore_bin: str, tmp_path: Path) -> None:
    code = _example(name)
    assert "dreamlake" not in code.split("#")[0] and "from persisting" not in code.replace("# was: from persisting", "")
    assert _run(code, lakeshore_bin, tmp_path) == printed


def test_the_distribution_is_lakeshore_queue_and_the_module_lakeshore() -> None:
    import importlib.metadata

    import lakeshore

    assert (ROOT / "python" / "pyproject.toml").read_text().count('name = "lakeshore-queue"') == 1
    assert importlib.metadata.distribution("lakeshore-queue").metadata["Name"] == "lakeshore-queue"
    assert Path(lakeshore.__file__).parent.name == "lakeshore"
