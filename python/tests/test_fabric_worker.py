"""Code shipped with the run, end to end, and the lifecycle hooks (docs/fabric.md).

A project (a git work tree with a lakeshore.yaml) submits a function defined only in its
own files; a worker started in another directory, which never saw them, fetches the code
by digest, runs the mode's setup once, its run_setup and env before each body, its
on_host_setup hook once before the first body, and the function. A changed line is a new
digest: the next run gets the new code, the old invocation keeps its result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import lakeshore
from lakeshore import _fabric, code, config, errors, lifecycle

from .conftest import Server
from .signals import handlers, interrupt_main


@pytest.fixture
def mem(lakeshore_bin: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[lakeshore.Dispatch]:
    monkeypatch.setenv("LAKESHORE_BIN", lakeshore_bin)
    d = lakeshore.Dispatch(":memory:")
    yield d
    d.close()

YAML = """\
modes:
  small:
    resources: {cpus: 1}
    setup: ["echo setup >> {marker}"]
    run_setup: ["echo run >> {marker}"]
    env: {GREETING: hello}
    code: true
"""

OPS = """\
import os
import lakeshore
from lakeshore import lifecycle
from mylib.util import shout

MODEL = None

@lifecycle.on_host_setup
def load_model():
    global MODEL
    MODEL = "model-v1"

@lakeshore.udf(queue="{queue}", mode="small")
def greet(name):
    assert MODEL is not None, "a body ran before on_host_setup"
    return f"{{os.environ['GREETING']}} {{shout(name)}} ({{MODEL}}, {{lifecycle.phase()}})"
"""


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


def _env(server: Server, tmp: Path) -> dict[str, str]:
    env = dict(os.environ, LAKESHORE_URL=server.url, LAKESHORE_TOKEN=server.admin_token, LAKESHORE_CODE_CACHE=str(tmp / "cache"))
    env.pop("LAKESHORE_CONFIG", None)
    # Only the SDK under test on the path (a worktree's, not the one the venv installed),
    # never the project's directory: the worker's processes never see the code.
    env["PYTHONPATH"] = str(Path(lakeshore.__file__).resolve().parent.parent)
    return env


def _submit(proj: Path, env: dict[str, str]) -> str:
    r = subprocess.run(
        [sys.executable, "-c", "import mylib.ops; print(mylib.ops.greet.submit(name='ada'))"],
        cwd=proj, env=env, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _work(where: Path, env: dict[str, str], queue: str) -> None:
    script = f"import lakeshore; lakeshore.run_worker(queues=['{queue}'], once=True, wait=30, offers={{'cpus_milli': 1000}})"
    r = subprocess.run([sys.executable, "-c", script], cwd=where, env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (apt-get install git)")
def test_shipped_code_runs_on_a_worker_elsewhere(server: Server, tmp_path: Path, qname: str) -> None:
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    (proj / "mylib").mkdir(parents=True)
    elsewhere.mkdir()
    marker = tmp_path / "marker.txt"
    (proj / "lakeshore.yaml").write_text(YAML.replace("{marker}", str(marker)))
    (proj / "mylib" / "__init__.py").write_text("")
    (proj / "mylib" / "util.py").write_text("def shout(s):\n    return s.upper()\n")
    (proj / "mylib" / "ops.py").write_text(OPS.format(queue=qname))
    _git(proj, "init", "-q")
    _git(proj, "add", ".")
    _git(proj, "commit", "-q", "-m", "one")
    env = _env(server, tmp_path)

    inv1 = _submit(proj, env)
    _work(elsewhere, env, qname)
    d = lakeshore.HttpDispatch(server.url, token=server.admin_token)
    try:
        q = lakeshore.SyncQueue(qname, dispatch=d)
        assert q.result(inv1, timeout=30) == "hello ADA (model-v1, ready)"
        md = q.get(inv1).metadata
        assert md["lakeshore.mode"] == "small" and len(md["lakeshore.code"]) == 64
        assert md["lakeshore.function"] == "mylib.ops:greet"
        assert md["lakeshore.host_key"].startswith("hk1_")
        git = json.loads(md["lakeshore.git"])
        assert git["branch"] and len(git["commit"]) == 40 and git["dirty"] is False and git["diff_sha256"] == ""
        assert marker.read_text().split() == ["setup", "run"]

        # A changed line: a new digest, the new code runs; the old invocation keeps its own.
        (proj / "mylib" / "util.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
        inv2 = _submit(proj, env)
        md2 = q.get(inv2).metadata
        assert md2["lakeshore.code"] != md["lakeshore.code"]
        assert json.loads(md2["lakeshore.git"])["dirty"] is True, "the edit is not committed"
        _work(elsewhere, env, qname)
        assert q.result(inv2, timeout=30) == "hello ADA! (model-v1, ready)"
        assert q.result(inv1, timeout=30) == "hello ADA (model-v1, ready)"
        # Two worker processes, two environments: setup ran once in each.
        assert marker.read_text().split() == ["setup", "run", "setup", "run"]
        assert not (elsewhere / "mylib").exists(), "the worker's directory never saw the code"
    finally:
        d.close()


def test_unknown_mode_fails_at_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mem: lakeshore.Dispatch) -> None:
    (tmp_path / "lakeshore.yaml").write_text("modes:\n  small: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKESHORE_CONFIG", raising=False)

    @lakeshore.udf(queue="fabric-unknown-mode", mode="huge", dispatch=mem)
    def f() -> int:
        return 1

    with pytest.raises(lakeshore.config.ConfigError, match=r'no mode "huge" \(allowed: small\)'):
        f.submit()
    # A mode without code: the declaration travels, no upload.
    inv = f.submit(_mode="small")
    assert f.queue().get(inv).metadata["lakeshore.mode"] == "small"


def test_mode_resources_are_the_requirement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mem: lakeshore.Dispatch) -> None:
    """A mode's resources are each run's requirement (docs/fabric.md): a worker offering
    less leaves the run queued, one offering enough runs it; the decorator's ``requires``
    wins over the mode's."""
    (tmp_path / "lakeshore.yaml").write_text(
        "modes:\n  a100: {resources: {gpus: 1, gpu_type: a100, memory: 1GiB, labels: {zone: east}}, code: false}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKESHORE_CONFIG", raising=False)

    @lakeshore.udf(queue="fabric-mode-requirement", mode="a100", dispatch=mem)
    def f(x: int) -> int:
        return x + 1

    want = {"gpus": 1, "gpu_type": "a100", "memory_bytes": 1 << 30, "labels": {"zone": "east"}}
    inv = f.submit(1)
    assert f.queue().get(inv).requirement == want
    lakeshore.run_worker(mem, queues=["fabric-mode-requirement"], once=True, wait=0.3, handle_signals=False, offers={"gpus": 1})
    assert f.queue().get(inv).state == "queued"
    lakeshore.run_worker(
        mem, queues=["fabric-mode-requirement"], once=True, wait=5, handle_signals=False,
        offers={"gpus": 2, "gpu_type": "a100", "memory_bytes": 2 << 30, "labels": {"zone": "east"}},
    )
    assert f.queue().result(inv, timeout=30) == 2

    @lakeshore.udf(queue="fabric-mode-requirement-own", mode="a100", dispatch=mem, requires={"gpus": 4})
    def g() -> int:
        return 1

    assert g.queue().get(g.submit()).requirement == {"gpus": 4}


def test_a_mode_with_commands_and_no_code_warns_at_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mem: lakeshore.Dispatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A mode that declares setup commands but ships no code says at the first submit that
    workers run them only when they trust declarations (its runs would otherwise fail there)."""
    (tmp_path / "lakeshore.yaml").write_text("modes:\n  prep: {setup: [pip install x], code: false}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKESHORE_CONFIG", raising=False)

    @lakeshore.udf(queue="fabric-no-code-warning", mode="prep", dispatch=mem)
    def f() -> int:
        return 1

    with caplog.at_level("WARNING", logger="lakeshore.worker"):
        f.submit()
        f.submit()
    said = [r.getMessage() for r in caplog.records if "ships no code" in r.getMessage()]
    assert len(said) == 1 and "'prep' declares setup" in said[0] and "trust_declarations=True" in said[0], said


@pytest.fixture
def hooks() -> Iterator[None]:
    lifecycle._reset()
    yield None
    lifecycle._reset()


def test_lifecycle_order(mem: lakeshore.Dispatch, hooks: object) -> None:
    events: list[str] = []
    lifecycle.on_host_setup(lambda: events.append(f"host:{lifecycle.phase()}"))
    lifecycle.on_run_setup(lambda: events.append("run"))
    lifecycle.on_shutdown(lambda: events.append(f"shutdown:{lifecycle.phase()}"))

    def body(i: int) -> int:
        events.append(f"body{i}")
        return i

    q = lakeshore.SyncQueue("fabric-lifecycle", dispatch=mem)
    for i in range(2):
        q.submit({"i": i})
    stop = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while not (events.count("body0") and events.count("body1")):
            if done.wait(0.01):
                return
        stop.set()

    t = threading.Thread(target=watch)
    t.start()
    try:
        n = lakeshore.run_worker(mem, queues={"fabric-lifecycle": body}, stop=stop, handle_signals=False)
    finally:
        done.set()
        t.join()
    assert n == 2
    assert events == ["host:setup", "run", "body0", "run", "body1", "shutdown:draining"]


def test_failed_host_setup_fails_the_start_not_the_jobs(mem: lakeshore.Dispatch, hooks: object) -> None:
    @lifecycle.on_host_setup
    def broken() -> None:
        raise RuntimeError("no GPU here")

    q = lakeshore.SyncQueue("fabric-broken-setup", dispatch=mem)
    inv = q.submit({"x": 1})
    with pytest.raises(RuntimeError, match="no GPU here"):
        lakeshore.run_worker(mem, queues={"fabric-broken-setup": lambda x: x}, once=True, wait=0.5, handle_signals=False)
    assert q.get(inv).state == "queued", "the job stays queued for another worker"


def test_a_runs_env_is_not_the_next_jobs(mem: lakeshore.Dispatch) -> None:
    """A declared env applies to its run's body only: a later job of the same worker
    process, declaring nothing, sees the environment as it was."""
    seen = []
    q = lakeshore.SyncQueue("fabric-env-leak", dispatch=mem)
    os.environ.pop("FABRIC_LEAK", None)
    os.environ["FABRIC_KEPT"] = "before"
    try:
        run = json.dumps({"mode": "a", "env": {"FABRIC_LEAK": "job-1", "FABRIC_KEPT": "job-1"}})
        first = q.submit({"x": 1}, metadata={"lakeshore.run": run})
        second = q.submit({"x": 2})
        body = lambda x: seen.append((x, os.environ.get("FABRIC_LEAK"), os.environ.get("FABRIC_KEPT")))  # noqa: E731
        for _ in range(2):
            lakeshore.run_worker(mem, queues={"fabric-env-leak": body}, once=True, wait=5, handle_signals=False, trust_declarations=True)
        q.result(first, timeout=10)
        q.result(second, timeout=10)
        assert seen == [(1, "job-1", "job-1"), (2, None, "before")]
        assert "FABRIC_LEAK" not in os.environ and os.environ["FABRIC_KEPT"] == "before"
    finally:
        os.environ.pop("FABRIC_KEPT", None)
        os.environ.pop("FABRIC_LEAK", None)


def test_a_job_declaring_nothing_never_runs_beside_a_declared_env(mem: lakeshore.Dispatch) -> None:
    """A job that declares nothing takes the context gate too: on a worker of concurrency 2
    it waits for a declared run's body to end rather than run beside it and read its env
    (another submitter's token). Before, it ran at once and read the declared value."""
    seen: dict[int, str | None] = {}
    q = lakeshore.SyncQueue("fabric-env-beside", dispatch=mem)
    os.environ.pop("FABRIC_BESIDE", None)
    declared_started = threading.Event()

    def body(x: int) -> None:
        seen[x] = os.environ.get("FABRIC_BESIDE")
        if x == 1:
            declared_started.set()
            time.sleep(0.5)

    try:
        run = json.dumps({"mode": "a", "env": {"FABRIC_BESIDE": "secret-of-job-1"}})
        first = q.submit(1, metadata={"lakeshore.run": run})
        second = q.submit(2)
        t = threading.Thread(
            target=lambda: lakeshore.run_worker(
                mem, queues={"fabric-env-beside": body}, concurrency=2, exit_when_idle=True, handle_signals=False, trust_declarations=True
            )
        )
        t.start()
        q.result(first, timeout=10)
        q.result(second, timeout=10)
        t.join(10)
        assert declared_started.is_set()
        assert seen == {1: "secret-of-job-1", 2: None}, "the job declaring nothing read the declared run's env"
        assert "FABRIC_BESIDE" not in os.environ
    finally:
        os.environ.pop("FABRIC_BESIDE", None)


def test_a_plain_run_takes_the_gate_without_a_wait_unless_a_context_is_set() -> None:
    """Preparer.try_enter_plain: at once when the gate is free or held by plain runs; not
    while a declared context holds it (enter_plain waits for it in a worker thread), and a
    declared run waits for the plain runs."""
    p = _fabric.Preparer(None, trust_declarations=True)
    assert p.try_enter_plain("p1") and p.try_enter_plain("p2")
    md = {config.META_RUN: json.dumps({"env": {"LAKESHORE_TEST_PLAIN": "d"}})}
    os.environ.pop("LAKESHORE_TEST_PLAIN", None)
    entered = threading.Event()
    t = threading.Thread(target=lambda: (p.prepare("ns", "q", md, job_id="d1"), entered.set()))
    t.start()
    assert not entered.wait(0.3), "a declared run set its env beside plain runs"
    assert not p.try_enter_plain("p3"), "a plain run went ahead of the waiting declared one"
    p.release("p1")
    p.release("p2")
    assert entered.wait(5)
    assert os.environ["LAKESHORE_TEST_PLAIN"] == "d"
    assert not p.try_enter_plain("p3")
    plain = threading.Event()
    t2 = threading.Thread(target=lambda: (p.enter_plain("p3"), plain.set()))
    t2.start()
    assert not plain.wait(0.3), "a plain run ran beside a declared env"
    p.release("d1")
    assert plain.wait(5)
    assert "LAKESHORE_TEST_PLAIN" not in os.environ
    p.release("p3")
    assert not p.holders and p.context is None
    t.join()
    t2.join()


def test_declared_commands_need_shipped_code_or_trust(mem: lakeshore.Dispatch, tmp_path: Path) -> None:
    """The submit right alone is no shell on a worker: a run that declares setup, run_setup
    or env but ships no code fails its attempt, the commands unrun, unless the worker
    trusts declarations (docs/fabric.md, "Who may run commands on a worker")."""
    marker = tmp_path / "pwned"
    q = lakeshore.SyncQueue("fabric-untrusted", dispatch=mem)
    run = json.dumps({"setup": [f"touch {marker}"], "run_setup": [f"touch {marker}"], "env": {"LD_PRELOAD": "/x.so"}})
    inv = q.submit({}, metadata={"lakeshore.run": run}, max_attempts=1)
    plain = q.submit({"x": 1})
    handler = {"fabric-untrusted": lambda **kw: "ran"}
    lakeshore.run_worker(mem, queues=handler, once=True, wait=5, handle_signals=False)
    with pytest.raises(errors.InvocationError, match="ships no code"):
        q.result(inv, timeout=10)
    assert not marker.exists() and "LD_PRELOAD" not in os.environ
    lakeshore.run_worker(mem, queues=handler, once=True, wait=5, handle_signals=False)
    assert q.result(plain, timeout=10) == "ran"

    trusted = q.submit({}, metadata={"lakeshore.run": json.dumps({"setup": [f"touch {marker}"]})})
    lakeshore.run_worker(mem, queues=handler, once=True, wait=5, handle_signals=False, trust_declarations=True)
    assert q.result(trusted, timeout=10) == "ran" and marker.exists()


def test_shipped_code_needs_a_queue_that_runs_it(mem: lakeshore.Dispatch, tmp_path: Path) -> None:
    """On a queue the worker serves with its own function, a run that ships code fails its
    attempt before anything is fetched or imported: the submit right is no code execution
    there (docs/fabric.md, "Who may run commands on a worker"). Queues served by name or
    by an @udf run shipped code, as thunks run submitted code."""
    q = lakeshore.SyncQueue("fabric-own", dispatch=mem)
    md = {"lakeshore.code": "ab" * 32, "lakeshore.function": "os:system"}
    inv = q.submit({"command": "true"}, metadata=md, max_attempts=1)
    handler = {"fabric-own": lambda **kw: "ours"}
    lakeshore.run_worker(mem, queues=handler, once=True, wait=5, handle_signals=False)
    with pytest.raises(errors.InvocationError, match="serves with its own function"):
        q.result(inv, timeout=10)


def test_a_function_outside_the_shipped_code_is_refused(tmp_path: Path) -> None:
    """A function reference names a module of the shipped code, never another importable
    module (``os:system`` would run a shell command with the payload)."""
    root = tmp_path / "root"
    (root / "shipped_outside_check").mkdir(parents=True)
    (root / "shipped_outside_check" / "__init__.py").write_text("")
    (root / "shipped_outside_check" / "mod.py").write_text("def f():\n    return 'shipped'\n")
    assert code.load_function(str(root), "shipped_outside_check.mod:f")() == "shipped"
    before = {name: sys.modules[name] for name in ("os", "json", "lakeshore", "lakeshore.worker")}
    for ref in ("os:system", "json:dumps", "lakeshore:run_worker"):
        with pytest.raises(code.CodeError, match="not in the shipped code"):
            code.load_function(str(root), ref)
    assert all(sys.modules.get(name) is m for name, m in before.items()), "a refused reference touches no loaded module"


def test_a_src_layout_function_is_imported_from_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function of a package under ``src/`` (the src layout; a mount of ``src``) is named
    with that directory, ``src/pkg.mod:f``, and the worker imports it from there; a function
    outside the shipped code is refused at submit."""
    root = tmp_path / "proj"
    (root / "src" / "srclayout_check").mkdir(parents=True)
    (root / "src" / "srclayout_check" / "__init__.py").write_text("")
    (root / "src" / "srclayout_check" / "tasks.py").write_text("def embed(x):\n    return ('embedded', x)\n")
    monkeypatch.syspath_prepend(str(root / "src"))
    import importlib

    tasks = importlib.import_module("srclayout_check.tasks")
    ref = code.function_ref(tasks.embed, str(root))
    assert ref == "src/srclayout_check.tasks:embed"
    for name in [m for m in sys.modules if m.startswith("srclayout_check")]:
        del sys.modules[name]
    sys.path.remove(str(root / "src"))  # the worker's sys.path is its own (monkeypatch restores it)
    assert code.load_function(str(root), ref)(1) == ("embedded", 1)
    with pytest.raises(code.CodeError, match="not in the shipped code"):
        code.function_ref(test_a_src_layout_function_is_imported_from_its_directory, str(root))
    for bad in ("../x/m:f", "/abs/m:f", "a/../../m:f"):
        with pytest.raises(code.CodeError):
            code.load_function(str(root), bad)


def test_the_shipped_copy_replaces_the_workers_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker serving a queue by an @udf imported the function's module itself: a run
    that ships that module runs the shipped copy, not the worker's (found in review: the
    worker's copy was found in sys.modules and refused as not shipped)."""
    own, shipped = tmp_path / "own", tmp_path / "shipped"
    own.mkdir()
    shipped.mkdir()
    (own / "udfcopy_check.py").write_text("def f():\n    return 'own'\n")
    (shipped / "udfcopy_check.py").write_text("def f():\n    return 'shipped'\n")
    monkeypatch.syspath_prepend(str(own))
    import importlib

    assert importlib.import_module("udfcopy_check").f() == "own"
    assert code.load_function(str(shipped), "udfcopy_check:f")() == "shipped"


def test_a_function_the_snapshot_leaves_out_is_refused_at_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function whose file is under the project but not shipped (an in-project virtual
    environment, a path outside the mounts) is refused at submit, not on every attempt."""
    root = tmp_path / "proj"
    venv = root / ".venv" / "lib" / "site-packages"
    venv.mkdir(parents=True)
    (venv / "venvpkg_check.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(venv))
    import importlib

    fn = importlib.import_module("venvpkg_check").f
    assert code.function_ref(fn, str(root)) == ".venv/lib/site-packages/venvpkg_check:f"
    with pytest.raises(code.CodeError, match="not in the shipped code"):
        code.function_ref(fn, str(root), {"jobs.py"})


def test_the_set_up_key_is_computed_not_stated() -> None:
    """A worker keys the set-ups it did by the host key of the declared set-up, so a run
    stating another run's host key cannot make that run skip its set-up."""
    m = config.parse("t.yaml", "modes:\n  g:\n    resources: {cpus: 2, gpus: 1, labels: {zone: a}}\n    setup: [pip install x]\n").mode("g")
    decl = m.declaration()
    assert config.declaration_host_key(decl) == m.host_key == decl["host_key"]
    lying = {**decl, "setup": []}
    assert config.declaration_host_key(lying) != m.host_key
    assert config.declaration_host_key({}) == config.declaration_host_key({"host_key": m.host_key})


def test_each_namespace_has_its_own_code_cache(tmp_path: Path) -> None:
    """A digest fetched for one namespace's run is never another namespace's."""
    a, b = code.namespace_cache_dir("team-a", str(tmp_path)), code.namespace_cache_dir("team-b", str(tmp_path))
    assert a != b and os.path.dirname(a) == os.path.dirname(b) == str(tmp_path)
    upper, lower = code.namespace_cache_dir("Prod", str(tmp_path)), code.namespace_cache_dir("prod", str(tmp_path))
    assert upper.lower() != lower.lower(), "apart on a case-insensitive file system too"
    odd = code.namespace_cache_dir("../x", str(tmp_path))
    assert os.path.dirname(odd) == str(tmp_path) and os.path.basename(odd).startswith("ns-")


def test_failed_run_setup_fails_the_attempt(mem: lakeshore.Dispatch, hooks: object) -> None:
    ran = []

    @lifecycle.on_run_setup
    def broken() -> None:
        raise RuntimeError("scratch disk full")

    q = lakeshore.SyncQueue("fabric-broken-run-setup", dispatch=mem)
    inv = q.submit({"x": 1}, max_attempts=1)
    lakeshore.run_worker(mem, queues={"fabric-broken-run-setup": lambda x: ran.append(x)}, once=True, wait=5, handle_signals=False)
    with pytest.raises(errors.InvocationError, match="scratch disk full"):
        q.result(inv, timeout=10)
    assert ran == []


def test_the_fabric_example_runs(lakeshore_bin: str, tmp_path: Path) -> None:
    """examples/fabric/run.py: submitted from the example's directory, run by a worker in
    a fresh directory, on the embedded plane of a fresh LAKESHORE_HOME."""
    script = Path(__file__).resolve().parents[2] / "examples" / "fabric" / "run.py"
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(tmp_path / "home"))
    for k in ("LAKESHORE_URL", "LAKESHORE_CONFIG", "LAKESHORE_TOKEN"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "positive +4  I love this, it is great  (ready)" in r.stdout
    assert "its directory never held the code: True" in r.stdout


def test_a_code_path_in_metadata_is_refused(mem: lakeshore.Dispatch, tmp_path: Path) -> None:
    """``lakeshore.code`` names a digest of the worker's cache, never a directory: a submitter
    who puts a path there (absolute or ``..``) gets a failed attempt, and the worker imports
    nothing from it."""
    evil = tmp_path / "evil" / "sentiment"
    evil.mkdir(parents=True)
    (evil / "__init__.py").write_text("")
    (evil / "model.py").write_text("def score(text):\n    return {'pwned': True}\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    q = lakeshore.SyncQueue("fabric-code-path", dispatch=mem)
    for path in (str(tmp_path / "evil"), os.path.relpath(tmp_path / "evil", cache)):
        md = {"lakeshore.code": path, "lakeshore.function": "sentiment.model:score"}
        inv = q.submit(envelope=lakeshore.Envelope(payload={"text": "x"}, metadata=md, max_attempts=1))
        old = os.environ.get("LAKESHORE_CODE_CACHE")
        os.environ["LAKESHORE_CODE_CACHE"] = str(cache)
        try:
            # A queue served by name runs shipped code (one with the worker's own function
            # refuses it before looking at the digest: test_shipped_code_needs_a_queue_that_runs_it).
            lakeshore.run_worker(mem, queues=["fabric-code-path"], once=True, wait=5, handle_signals=False)
        finally:
            if old is None:
                os.environ.pop("LAKESHORE_CODE_CACHE", None)
            else:
                os.environ["LAKESHORE_CODE_CACHE"] = old
        with pytest.raises(errors.InvocationError, match="bad code digest"):
            q.result(inv, timeout=10)
    assert "sentiment" not in sys.modules


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_for_pid(path: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path} within {timeout}s")


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.timeout(120)
def test_a_hung_declared_command_is_killed_with_its_attempt(mem: lakeshore.Dispatch, tmp_path: Path) -> None:
    """A run_setup command that hangs is killed, with what it started, when its attempt
    times out: nothing of the attempt runs on beside its retry, and the worker goes on.
    Before, the worker's thread waited on the command for good (the job timed out, the
    `sleep` ran on, the worker took nothing more)."""
    pidfile = tmp_path / "sleep.pid"
    q = lakeshore.SyncQueue("fabric-hung-run-setup", dispatch=mem)
    run = json.dumps({"run_setup": [f"sleep 300 & echo $! > {pidfile}; wait"]})
    inv = q.submit({}, metadata={"lakeshore.run": run}, attempt_timeout=2, max_attempts=1)
    done = threading.Event()

    def work() -> None:
        handler = {"fabric-hung-run-setup": lambda **kw: "ran"}
        lakeshore.run_worker(mem, queues=handler, once=True, wait=5, handle_signals=False, trust_declarations=True)
        done.set()

    threading.Thread(target=work, daemon=True).start()
    pid = _wait_for_pid(pidfile)
    with pytest.raises(errors.InvocationError):
        q.result(inv, timeout=30)
    assert q.get(inv).state == "timeout"
    assert done.wait(30), "the worker still waits on the hung command"
    assert _gone(pid), "the hung command's child runs on after its attempt ended"


def _sigkill_then_retry(
    script: str, env: dict[str, str], tmp_path: Path, q: lakeshore.SyncQueue, inv: str, pidfiles: dict[Path, str]
) -> None:
    """Run the worker ``script`` until every file of ``pidfiles`` names a process, SIGKILL
    the worker, and check that each of those processes is gone (the failure says the
    process by its description); then run the script again and check the job ends once, as
    "ran" on its second attempt (claimed again after its lease)."""
    worker = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env)
    try:
        pids = {what: _wait_for_pid(path) for path, what in pidfiles.items()}
        worker.kill()
        worker.wait(10)
        for what, pid in pids.items():
            assert _gone(pid), f"{what} runs on after its worker was SIGKILLed"
    finally:
        worker.kill()
        worker.wait(10)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert q.result(inv, timeout=30) == "ran"
    got = q.get(inv)
    assert (got.state, got.attempt) == ("succeeded", 2)


@pytest.mark.timeout(180)
def test_a_sigkilled_worker_leaves_no_declared_command_running(server: Server, tmp_path: Path, qname: str) -> None:
    """A worker SIGKILLed while a declared command runs leaves nothing of it running (its
    guard kills the command's group and whatever carries its mark, a process that left
    the group included); the job is claimed again after its lease and ends once."""
    pidfile, escaped = tmp_path / "sleep.pid", tmp_path / "escaped.pid"
    gate = tmp_path / "gate"
    env = _env(server, tmp_path)
    d = lakeshore.HttpDispatch(server.url, token=server.admin_token)
    try:
        q = lakeshore.SyncQueue(qname, dispatch=d)
        # The second run of the command (the retry) passes the gate the first one waits on.
        cmd = (
            f"if [ -e {gate} ]; then exit 0; fi; touch {gate}; "
            f"setsid sleep 301 & echo $! > {escaped}; sleep 300 & echo $! > {pidfile}; wait"
        )
        inv = q.submit({}, metadata={"lakeshore.run": json.dumps({"run_setup": [cmd]})}, max_attempts=3)
        script = (
            "import lakeshore; lakeshore.run_worker(queues={%r: lambda **kw: 'ran'}, lease_ttl=2, "
            "once=True, wait=30, trust_declarations=True)" % qname
        )
        _sigkill_then_retry(
            script, env, tmp_path, q, inv,
            {pidfile: "the command's child", escaped: "a process that left the command's group"},
        )  # fmt: skip
    finally:
        d.close()


@pytest.mark.timeout(180)
def test_a_sigkilled_worker_leaves_no_child_of_its_body_running(server: Server, tmp_path: Path, qname: str) -> None:
    """A body's own subprocess (a `torchrun` of a training job) dies with its worker, even
    when the worker is SIGKILLed: it would otherwise run on beside the job's retry. The job
    is claimed again after its lease and ends once, on its second attempt."""
    pidfile, gate = tmp_path / "child.pid", tmp_path / "gate"
    env = _env(server, tmp_path)
    d = lakeshore.HttpDispatch(server.url, token=server.admin_token)
    try:
        q = lakeshore.SyncQueue(qname, dispatch=d)
        inv = q.submit({}, max_attempts=3)
        script = textwrap.dedent(f"""
            import os, subprocess, lakeshore
            def body():
                if os.path.exists({str(gate)!r}):
                    return "ran"
                open({str(gate)!r}, "w").close()
                child = subprocess.Popen(["sleep", "302"], start_new_session=True)
                open({str(pidfile)!r}, "w").write(str(child.pid))
                child.wait()
            lakeshore.run_worker(queues={{{qname!r}: body}}, lease_ttl=2, once=True, wait=30)
        """)
        _sigkill_then_retry(script, env, tmp_path, q, inv, {pidfile: "the body's child"})
    finally:
        d.close()


def test_a_set_up_is_done_in_each_directory_of_the_code(server: Server, tmp_path: Path, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each namespace unpacks a digest into its own directory, and an evicted digest is
    unpacked again into a fresh one, so a mode's ``setup`` (run in the code's directory:
    ``pip install -e .``, a build) is done in each. Before, the set-ups a worker did were
    keyed by (host key, digest) alone: after team-a's run, team-b's run of the same code and
    mode skipped its setup and ran in a directory that never got it, and so did a run of a
    digest the cache had evicted and fetched again."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "job.py").write_text("def f():\n    return 1\n")
    snap = code.snapshot(src, config.Code(mounts=(config.Mount("."),)))
    monkeypatch.setenv("LAKESHORE_CODE_CACHE", str(tmp_path / "cache"))
    m = config.parse("t.yaml", "modes:\n  g:\n    setup: [touch built]\n").mode("g")
    md = {config.META_RUN: json.dumps(m.declaration()), config.META_CODE: snap.digest}
    dispatches = {ns: lakeshore.HttpDispatch(server.url, token=server.admin_token, namespace=ns) for ns in ("team-a", "team-b")}
    try:
        for ns, d in dispatches.items():
            _fabric.upload(d, qname, snap, 1 << 20)
            p = _fabric.Preparer(d)
            p.prepare(ns, qname, md)
            p.release("")
            built = Path(code.CodeCache(code.namespace_cache_dir(ns)).path(snap.digest)) / "built"
            assert built.exists(), f"{ns}'s code directory never got the setup"
        # One worker serving both namespaces (team-b's code fetched anew).
        p = _fabric.Preparer(dispatches["team-a"])
        p.prepare("team-a", qname, md)
        p.release("")
        p.d = dispatches["team-b"]
        shutil.rmtree(code.namespace_cache_dir("team-b"))
        p.prepare("team-b", qname, md)
        p.release("")
        assert (Path(p.caches["team-b"].path(snap.digest)) / "built").exists(), "team-b's directory never got the setup"
        # The cache evicted team-a's digest; fetched again, its fresh directory is set up again.
        p.d = dispatches["team-a"]
        shutil.rmtree(p.caches["team-a"].path(snap.digest))
        p.prepare("team-a", qname, md)
        p.release("")
        assert (Path(p.caches["team-a"].path(snap.digest)) / "built").exists(), "the fetched-again directory never got the setup"
    finally:
        for d in dispatches.values():
            d.close()


def test_runs_of_another_env_wait_for_the_running_ones() -> None:
    """A run's env is the worker process's (os.environ), so with concurrency > 1 runs of one
    context (namespace, digest, env) run at once and another context's wait until they end.
    Before, a second run's preparation replaced the first's env while its body ran (A's body
    read B's value) and A's end put back the original under B's body (B read None)."""
    p = _fabric.Preparer(None, trust_declarations=True)

    def md(value: str) -> dict[str, str]:
        return {config.META_RUN: json.dumps({"env": {"LAKESHORE_TEST_CONTEXT": value}})}

    os.environ.pop("LAKESHORE_TEST_CONTEXT", None)
    p.prepare("ns", "q", md("a"), job_id="a1")
    p.prepare("ns", "q", md("a"), job_id="a2")  # the same context: at once
    assert os.environ["LAKESHORE_TEST_CONTEXT"] == "a"

    entered = threading.Event()

    def prepare_b() -> None:
        p.prepare("ns", "q", md("b"), job_id="b1")
        entered.set()

    t = threading.Thread(target=prepare_b)
    t.start()
    assert not entered.wait(0.3), "a run of another env started while a's ran"
    assert os.environ["LAKESHORE_TEST_CONTEXT"] == "a", "a's body saw another run's env"
    # A third run of a's context, after b's waits: it waits behind b (no starvation).
    late = threading.Event()
    t2 = threading.Thread(target=lambda: (p.prepare("ns", "q", md("a"), job_id="a3"), late.set()))
    t2.start()
    assert not late.wait(0.3), "a later run of the running context went ahead of the waiting one"
    p.release("a1")
    assert not entered.wait(0.2)
    assert os.environ["LAKESHORE_TEST_CONTEXT"] == "a", "a2's body still runs with a's env"
    p.release("a2")
    assert entered.wait(5)
    assert os.environ["LAKESHORE_TEST_CONTEXT"] == "b"
    assert not late.is_set()
    p.release("b1")
    assert late.wait(5)
    assert os.environ["LAKESHORE_TEST_CONTEXT"] == "a"
    p.release("a3")
    p.release("a3")  # twice: a no-op
    assert "LAKESHORE_TEST_CONTEXT" not in os.environ, "the last run's end puts back what its env replaced"
    t.join()
    t2.join()

    # A job stopped while it waits gives up its turn.
    p.prepare("ns", "q", md("a"), job_id="a4")
    stopped = threading.Event()
    failed: list[BaseException] = []

    def prepare_stopped() -> None:
        try:
            p.prepare("ns", "q", md("c"), job_id="c1", stopped=stopped)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            failed.append(e)

    t3 = threading.Thread(target=prepare_stopped)
    t3.start()
    stopped.set()
    t3.join(5)
    assert failed and isinstance(failed[0], _fabric.CommandStopped)
    assert not p.waiting
    p.release("a4")
    assert "LAKESHORE_TEST_CONTEXT" not in os.environ


HOOKS_OPS = """\
import lakeshore
from lakeshore import lifecycle
from mylib.version import VERSION

def _note(what):
    with open({marker!r}, "a") as f:
        f.write(what + "\\n")

@lifecycle.on_run_setup
def before():
    _note(f"hook-{{VERSION}}")

@lakeshore.udf(queue="{queue}", mode="small")
def which():
    _note(f"body-{{VERSION}}")
    return VERSION
"""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (apt-get install git)")
def test_a_new_digest_forgets_the_old_codes_hooks(server: Server, tmp_path: Path, qname: str) -> None:
    """A worker that runs a run of another digest forgets the modules of the code before,
    and the run set-up hooks they registered with them: each body runs its own code's
    hooks, once. Before, every import of shipped code added its hooks for good: after
    versions 1, 2 and 1 again, a body ran three hooks, two of them of code it was not."""
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    (proj / "mylib").mkdir(parents=True)
    elsewhere.mkdir()
    marker = tmp_path / "marker.txt"
    (proj / "lakeshore.yaml").write_text("modes:\n  small:\n    resources: {cpus: 1}\n    code: true\n")
    (proj / "mylib" / "__init__.py").write_text("")
    (proj / "mylib" / "ops.py").write_text(HOOKS_OPS.format(queue=qname, marker=str(marker)))
    env = _env(server, tmp_path)

    def submit(version: int) -> str:
        (proj / "mylib" / "version.py").write_text(f"VERSION = {version}\n")
        r = subprocess.run(
            [sys.executable, "-c", "import mylib.ops; print(mylib.ops.which.submit())"],
            cwd=proj, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    _git(proj, "init", "-q")
    _git(proj, "add", ".")
    _git(proj, "commit", "-q", "-m", "one")
    ids = [submit(1), submit(2), submit(1)]
    script = f"import lakeshore; lakeshore.run_worker(queues=['{qname}'], max_jobs=3, offers={{'cpus_milli': 1000}})"
    r = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = lakeshore.HttpDispatch(server.url, token=server.admin_token)
    try:
        q = lakeshore.SyncQueue(qname, dispatch=d)
        assert [q.result(i, timeout=30) for i in ids] == [1, 2, 1]
    finally:
        d.close()
    assert marker.read_text().split() == ["hook-1", "body-1", "hook-2", "body-2", "hook-1", "body-1"]


def test_a_declared_commands_output_costs_its_tail(tmp_path: Path) -> None:
    """A declared command that prints without end (a build's log, a progress bar into a
    pipe) costs the worker the last OUTPUT_TAIL bytes of each stream, not what it printed,
    and its failure still quotes the end of its stderr. Before, the worker kept all of it:
    300 MB printed by a setup command took 892 MB of the worker's memory."""
    import tracemalloc

    printed = 64 << 20
    cmd = f"head -c {printed} /dev/zero | tr '\\0' x; echo the end of the log >&2; exit 3"
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match=r"setup command .* exited with 3: the end of the log$"):
            _fabric._shell(cmd, str(tmp_path), None, "setup")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * _fabric.OUTPUT_TAIL + (4 << 20), f"the command's {printed >> 20} MiB of output took {peak >> 20} MiB at the peak"
    # The output a background process of the command holds open is waited for, as before:
    # the command returns once that process is done.
    late = tmp_path / "late"
    _fabric._shell(f"(sleep 0.5; echo late > {late}) &", str(tmp_path), None, "setup")
    assert late.read_text() == "late\n"


def test_a_stopped_command_takes_its_background_process_with_it(tmp_path: Path) -> None:
    """A declared command whose shell has exited while a process it left in the background
    still holds its output open is stopped with that process: the whole group is killed,
    as it is while the shell runs (nothing of an attempt runs on beside its retry). Before,
    the group was killed only while the shell itself ran, so the background process
    outlived the stop."""
    pidfile = tmp_path / "pid"
    stopped = threading.Event()

    def stop_once_started() -> None:
        while not pidfile.exists() or not pidfile.read_text().endswith("\n"):
            if stopped.wait(0.01):
                return
        stopped.set()

    threading.Thread(target=stop_once_started, daemon=True).start()
    pid = 0
    try:
        with pytest.raises(_fabric.CommandStopped):
            _fabric._shell(f"sleep 1000 & echo $! > {pidfile}", str(tmp_path), None, "setup", stopped)
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 60  # a bound on a hang, not a verdict on speed
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(pid), "the background process outlived its command's stop"
    finally:
        stopped.set()
        if pid and _alive(pid):
            os.kill(pid, 9)


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class _SignalInAdd(set):  # type: ignore[type-arg]
    """Stands in for ``_fabric._uploaded``: its first ``add`` sends ``signum`` to the main
    thread (the caller's own) and returns only once the handler ran, so the handler runs
    inside the interrupted ``upload``'s record of what it uploaded."""

    def __init__(self, signum: int, ran: threading.Event) -> None:
        super().__init__()
        self.signum, self.ran, self.fired = signum, ran, False

    def add(self, key: object) -> None:
        if not self.fired:
            self.fired = True
            interrupt_main(self.signum, self.ran)
        super().add(key)


def test_an_upload_by_a_signal_handler_inside_an_upload_is_made(
    server: Server, tmp_path: Path, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SIGUSR1 handler (user code: a SIGTERM handler submitting a last job of a mode that
    # ships code) uploads the code while the main thread's upload records what it uploaded.
    # Both return and the server holds the archive. Before, the record was under a plain
    # lock, and the handler waited forever for the lock its own interrupted frame held
    # (here a watchdog's SIGUSR2 after 10 s ends the wait).
    src = tmp_path / "src"
    src.mkdir()
    (src / "job.py").write_text("def f():\n    return 1\n")
    snap = code.snapshot(src, config.Code(mounts=(config.Mount("."),)))
    d = lakeshore.HttpDispatch(server.url, token=server.admin_token)
    ran = threading.Event()

    def on_usr1() -> None:
        try:
            _fabric.upload(d, qname, snap, 1 << 20)
        finally:
            ran.set()

    uploaded = _SignalInAdd(signal.SIGUSR1, ran)
    monkeypatch.setattr(_fabric, "_uploaded", uploaded)
    try:
        with handlers(on_usr1, "the handler's upload waited for the lock its interrupted frame held", until=ran):
            _fabric.upload(d, qname, snap, 1 << 20)
            assert (id(d), d.namespace, qname, snap.digest) in uploaded
            d.run(d._transport.call("HEAD", _fabric.code_path(d.namespace, qname, snap.digest), raw=True, retry="safe"))
    finally:
        d.close()
