"""The compute fabric's shared definitions agree with the Go package fabric: the golden
vectors of fabric/testdata/vectors.json (host keys, sizes, code digests, config errors),
and the code archive's safety checks (docs/fabric.md)."""

from __future__ import annotations

import base64

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

from lakeshore import code, config

from .signals import handlers, interrupt_main

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "fabric" / "testdata" / "vectors.json").read_text())


@pytest.mark.parametrize("v", VECTORS["host_keys"], ids=lambda v: v["name"])
def test_host_key_vectors(v: dict) -> None:
    c = config.parse("vectors.yaml", v["yaml"])
    assert c.mode(v["mode"]).host_key == v["host_key"]


def test_size_vectors() -> None:
    for s, want in VECTORS["cpus"]:
        if want is None:
            with pytest.raises(ValueError):
                config.parse_cpus(s)
        else:
            assert config.parse_cpus(s) == want, s
    for s, want in VECTORS["memory"]:
        if want is None:
            with pytest.raises(ValueError):
                config.parse_memory(s)
        else:
            assert config.parse_memory(s) == want, s


@pytest.mark.parametrize("v", VECTORS["code"], ids=lambda v: v["name"])
def test_digest_vectors(v: dict, tmp_path: Path) -> None:
    for f in v["files"]:
        p = tmp_path / f["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f["content"], encoding="utf-8")
        p.chmod(0o755 if f["executable"] else 0o644)
    files = code.hash_files(tmp_path, [f["path"] for f in v["files"]])
    assert code.digest(files) == v["digest"]
    snap = code.Snapshot(str(tmp_path), files, v["digest"])
    out = tmp_path / "unpacked"
    out.mkdir()
    _, d = code.read_archive(snap.archive(), str(out))
    assert d == v["digest"]
    assert snap.archive() == snap.archive(), "the archive is deterministic"


@pytest.mark.parametrize("v", VECTORS["bad_archives"], ids=lambda v: v["name"])
def test_bad_archive_vectors(v: dict, tmp_path: Path) -> None:
    """The archives the Go reader refuses (fabric/testdata/vectors.json), refused here with
    the same words: what one reader accepts the other unpacks."""
    with pytest.raises(code.CodeError) as e:
        code.read_archive(base64.b64decode(v["archive"]), str(tmp_path), **v.get("limits", {}))
    assert v["contains"] in str(e.value)


@pytest.mark.parametrize("v", VECTORS["errors"], ids=lambda v: v["field"])
def test_error_vectors(v: dict) -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse("vectors.yaml", v["yaml"])
    assert (e.value.line, e.value.field) == (v["line"], v["field"])
    assert v["contains"] in str(e.value)
    assert e.value.code == "invalid_config"


def test_ssh_inventory() -> None:
    """An ssh provider's hosts: parse as Go's fabric.Host (options as strings, offers as
    resources); a host may be its name alone."""
    c = config.parse(
        "lakeshore.yaml",
        "providers:\n  lab:\n    type: ssh\n    user: ml\n    hosts:\n      - gpu1\n"
        "      - {host: gpu2, port: 2222, workers: 4, offers: {gpus: 4, gpu_type: a100, memory: 1GiB}}\n",
    )
    lab = c.providers["lab"]
    assert lab.options == {"user": "ml"}
    assert [h.options for h in lab.hosts] == [{"host": "gpu1"}, {"host": "gpu2", "port": "2222", "workers": "4"}]
    assert lab.hosts[1].offers == config.Resources(gpus=4, gpu_type="a100", memory_bytes=1 << 30)
    assert lab.hosts[0].offers == config.Resources()


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a file to another user (chown)")
def test_find_refuses_a_parents_file_of_another_user(tmp_path: Path) -> None:
    """The walk up from the working directory never takes a lakeshore.yaml another user
    left in a parent directory (a /tmp/lakeshore.yaml on a shared machine); one in the
    working directory itself, root's, or one named by $LAKESHORE_CONFIG is taken (Go's
    TestFindRefusesAParentsFileOfAnotherUser). Before, the first one found was used."""
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    planted = tmp_path / "lakeshore.yaml"
    planted.write_text("modes:\n  m: {setup: [touch /tmp/pwned]}\n")
    os.chown(planted, 4242, 4242)
    with pytest.raises(config.ConfigError, match=r"belongs to another user \(uid 4242\)") as e:
        config.find(deep, environ={})
    assert f"LAKESHORE_CONFIG={planted}" in str(e.value) and e.value.code == "invalid_config"
    with pytest.raises(config.ConfigError, match="belongs to another user"):
        config.load(deep, environ={})
    assert config.find(tmp_path, environ={}) == planted
    assert config.find(deep, environ={"LAKESHORE_CONFIG": str(planted)}) == planted
    os.chown(planted, 0, 0)
    assert config.find(deep, environ={}) == planted


def test_find_and_modes(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "lakeshore.yaml").write_text("modes:\n  gpu:\n    resources: {gpus: 2}\n    time_limit: 1h30m\n")
    assert config.find(tmp_path / "a" / "b", environ={}) == tmp_path / "lakeshore.yaml"
    c = config.load(tmp_path / "a" / "b", environ={})
    m = c.mode("gpu")
    assert (m.resources.gpus, m.time_limit, m.code) == (2, 5400, False)
    md = m.metadata("ab" * 32)
    assert md[config.META_CODE] == "ab" * 32 and json.loads(md[config.META_RUN])["gpus"] == 2
    with pytest.raises(config.ConfigError, match=r'no mode "cpu" \(allowed: gpu\)'):
        c.mode("cpu")
    other = tmp_path / "elsewhere.yaml"
    other.write_text("modes: {x: {}}\n")
    assert "x" in config.load(tmp_path, environ={"LAKESHORE_CONFIG": str(other)}).modes
    empty = tmp_path / "empty"
    empty.mkdir()
    if config.find(empty, environ={}) is None:
        with pytest.raises(config.ConfigError, match="no lakeshore.yaml"):
            config.load(empty, environ={})


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (apt-get install git)")
def test_snapshot_git_tree_and_cache(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "tracked.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    (tmp_path / "untracked.py").write_text("y = 2\n")
    (tmp_path / "ignored.log").write_text("z\n")
    (tmp_path / "link").symlink_to("/etc/passwd")
    s1 = code.snapshot(tmp_path)
    assert sorted(f.path for f in s1.files) == [".gitignore", "tracked.py", "untracked.py"]
    assert code.snapshot(tmp_path).digest == s1.digest
    # An edit of a tracked file (no git command run) changes the digest.
    (tmp_path / "tracked.py").write_text("x = 22\n")
    s2 = code.snapshot(tmp_path)
    assert s2.digest != s1.digest
    # A new untracked file in a new directory too.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("")
    assert "pkg/m.py" in {f.path for f in code.snapshot(tmp_path).files}
    with pytest.raises(code.CodeError, match="over the ceiling of 10"):
        code.snapshot(tmp_path).archive(10)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (apt-get install git)")
def test_git_context(tmp_path: Path) -> None:
    """A git tree's snapshot carries its commit, branch, dirty flag and diff digest, read
    again when HEAD moves, the branch changes or a file changes (issue 25 item 3)."""
    assert code.git_context(tmp_path) is None, "not a git work tree"
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("a = 1\n")
    s0 = code.snapshot(tmp_path)
    assert s0.git is not None and s0.git.commit == "" and s0.git.branch == "main" and s0.git.dirty
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git_out(tmp_path, "rev-parse", "HEAD")
    s1 = code.snapshot(tmp_path)
    assert s1.digest == s0.digest, "a commit does not change the shipped files"
    assert s1.git == code.GitContext(head, "main", False, "")
    assert json.loads(s1.git.to_json()) == {"commit": head, "branch": "main", "dirty": False, "diff_sha256": ""}
    (tmp_path / "a.py").write_text("a = 2\n")
    s2 = code.snapshot(tmp_path)
    assert s2.git is not None and s2.git.dirty and len(s2.git.diff_sha256) == 64 and s2.git.commit == head
    (tmp_path / "a.py").write_text("a = 1\n")
    _git(tmp_path, "switch", "-q", "-c", "topic")  # same files, same index: only HEAD moved
    s3 = code.snapshot(tmp_path)
    assert s3.git is not None and (s3.git.branch, s3.git.dirty, s3.git.diff_sha256) == ("topic", False, "")
    _git(tmp_path, "checkout", "-q", "--detach")
    s4 = code.snapshot(tmp_path)
    assert s4.git is not None and s4.git.branch == "" and s4.git.commit == head
    assert code.snapshot(tmp_path, config.Code(mounts=(config.Mount("."),))).git is None, "declared mounts carry no git context"

    # A project in a subdirectory: an edit elsewhere in the repository is not its diff, and
    # GIT_DIR in the environment does not point git at another repository.
    _git(tmp_path, "switch", "-q", "main")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.py").write_text("s = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "two")
    head = _git_out(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "a.py").write_text("a = 3\n")
    os.environ["GIT_DIR"] = str(tmp_path / "elsewhere")
    try:
        g = code.git_context(tmp_path / "sub")
    finally:
        del os.environ["GIT_DIR"]
    assert g == code.GitContext(head, "main", False, "")


def _git_out(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_mounts(tmp_path: Path) -> None:
    for p in ["src/a.py", "src/b.pyc", "src/__pycache__/c.py", "src/data/big.bin", "other/x.py"]:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_text(p)
    m = config.Mount("src", exclude=("*.pyc", "__pycache__", "data"))
    assert code.mount_files(tmp_path, [m]) == ["src/a.py"]
    assert code.mount_files(tmp_path, [config.Mount("src", include=("*.py",))]) == ["src/__pycache__/c.py", "src/a.py"]
    # A mount that is (or passes through) a symbolic link, or is missing, is refused: it
    # would ship files from outside the project.
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "secret.py").write_text("x")
    (tmp_path / "linked").symlink_to(outside)
    (tmp_path / "alias").symlink_to(tmp_path / "src")
    for path, want in {"linked": "is a symbolic link", "alias/__pycache__": "is a symbolic link", "nope": "does not exist"}.items():
        with pytest.raises(code.CodeError, match=want):
            code.mount_files(tmp_path, [config.Mount(path)])


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            t.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _info(name: str, type: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    i = tarfile.TarInfo(name)
    i.type, i.linkname = type, link
    return i


@pytest.mark.parametrize(
    "members, want",
    [
        ([(_info("../escape"), b"x")], "bad path"),
        ([(_info("/etc/x"), b"x")], "bad path"),
        ([(_info("link", tarfile.SYMTYPE, "/etc/passwd"), b"")], "only regular files"),
        ([(_info("hard", tarfile.LNKTYPE, "/etc/passwd"), b"")], "only regular files"),
        ([(_info("a"), b"1"), (_info("a"), b"2")], "twice"),
        ([(_info("a"), b"1"), (_info("a/b"), b"2")], "both as a file"),
    ],
)
def test_unsafe_archives_refused(members: list, want: str, tmp_path: Path) -> None:
    with pytest.raises(code.CodeError, match=want):
        code.read_archive(_tar(*members), str(tmp_path))


def test_cache_verifies_and_evicts(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    cache = code.CodeCache(str(tmp_path / "cache"), max_entries=2)
    digests = []
    for i in range(3):
        (src / "m.py").write_text(f"x = {i}\n")
        files = code.hash_files(src, ["m.py"])
        snap = code.Snapshot(str(src), files, code.digest(files))
        d = cache.put(snap.digest, snap.archive())
        assert Path(d, "m.py").read_text() == f"x = {i}\n"
        digests.append(snap.digest)
        os.utime(d, ns=(i * 10**9, i * 10**9))
    assert not cache.has(digests[0]) and cache.has(digests[1]) and cache.has(digests[2])
    # A wrong digest is refused and leaves nothing behind.
    with pytest.raises(code.CodeError, match="refused"):
        cache.put("0" * 64, snap.archive())
    assert sorted(os.listdir(cache.root)) == sorted(digests[1:])
    # A killed worker's half-unpacked leftover is swept by the next cache.
    dead = tmp_path / "cache" / ".tmp-999999-1-abc"
    dead.mkdir()
    code.CodeCache(str(tmp_path / "cache"))
    assert not dead.exists()


def test_a_worker_killed_mid_unpack_leaves_no_entry(tmp_path: Path) -> None:
    """A worker SIGKILLed while it unpacks a digest leaves only its .tmp- directory, never
    an entry under the digest's name; the next cache sweeps it and unpacks afresh."""
    import signal
    import sys
    import time

    src = tmp_path / "src"
    src.mkdir()
    for i in range(200):
        (src / f"f{i:03}.bin").write_bytes(os.urandom(256 << 10))
    files = code.hash_files(src, sorted(p.name for p in src.iterdir()))
    snap = code.Snapshot(str(src), files, code.digest(files))
    archive = tmp_path / "code.tar.gz"
    archive.write_bytes(snap.archive())
    cache_dir = tmp_path / "cache"
    script = (
        "import sys, time\n"
        "from lakeshore import code\n"
        "orig = code._mkdir_inside\n"
        "def slow(root, d):\n"
        "    time.sleep(0.01)\n"  # a slow disk: the kill lands mid-unpack
        "    orig(root, d)\n"
        "code._mkdir_inside = slow\n"
        f"code.CodeCache({str(cache_dir)!r}).put({snap.digest!r}, open({str(archive)!r}, 'rb').read())\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    tmp = None
    while time.monotonic() < deadline:
        tmps = list(cache_dir.glob(".tmp-*")) if cache_dir.exists() else []
        if tmps and len(list(tmps[0].iterdir())) >= 5:
            tmp = tmps[0]
            break
        time.sleep(0.005)
    assert tmp is not None, "the unpack never started"
    p.send_signal(signal.SIGKILL)
    p.wait()
    cache = code.CodeCache(str(cache_dir))
    assert not cache.has(snap.digest), "a half-unpacked entry is under the digest's name"
    assert not tmp.exists(), "the killed worker's leftover was not swept"
    d = cache.put(snap.digest, archive.read_bytes())
    assert len(os.listdir(d)) == 200


def test_an_archive_over_the_ceiling_costs_the_ceiling(tmp_path: Path) -> None:
    """A tree holding a large incompressible file (a checkpoint left in the project) is
    refused at the ceiling without the file or the whole archive in memory. Before, every
    file was read whole and the whole tree compressed into memory before the comparison."""
    import tracemalloc

    (tmp_path / "checkpoint.bin").write_bytes(os.urandom(32 << 20))
    snap = code.snapshot(tmp_path, config.Code(mounts=(config.Mount("."),), max_bytes=1 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(code.CodeError, match="over the ceiling of 1048576"):
            snap.archive(1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"archiving took {peak >> 20} MiB at its peak for a 1 MiB ceiling and a 32 MiB file"
    small = code.snapshot(tmp_path, config.Code(mounts=(config.Mount("."),)))
    assert len(small.archive(64 << 20)) > 32 << 20  # under the ceiling: the whole archive


class _SignalInGet(dict):  # type: ignore[type-arg]
    """Stands in for ``code._trees``: its first ``get`` sends ``signum`` to the main thread
    (the caller's own) and returns only once the handler ran, so the handler runs inside
    the interrupted ``snapshot``'s read of its trees."""

    def __init__(self, signum: int, ran: threading.Event) -> None:
        super().__init__()
        self.signum, self.ran, self.fired = signum, ran, False

    def get(self, key: Any, default: Any = None) -> Any:
        if not self.fired:
            self.fired = True
            interrupt_main(self.signum, self.ran)
        return super().get(key, default)


def test_a_snapshot_made_by_a_signal_handler_inside_a_snapshot_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A SIGUSR1 handler (user code: a SIGTERM handler submitting a last job of a mode that
    # ships code) snapshots while the main thread's snapshot reads its trees. Both are
    # made, alike. Before, that read was under a plain lock, and the handler waited forever
    # for the lock its own interrupted frame held (here a watchdog's SIGUSR2 after 10 s
    # ends the wait).
    (tmp_path / "job.py").write_text("def f():\n    return 1\n")
    mounts = config.Code(mounts=(config.Mount("."),))
    ran = threading.Event()
    got: dict[str, code.Snapshot] = {}

    def on_usr1() -> None:
        try:
            got["nested"] = code.snapshot(tmp_path, mounts)
        finally:
            ran.set()

    monkeypatch.setattr(code, "_trees", _SignalInGet(signal.SIGUSR1, ran))
    with handlers(on_usr1, "the handler's snapshot waited for the lock its interrupted frame held", until=ran):
        outer = code.snapshot(tmp_path, mounts)
        assert got["nested"].digest == outer.digest
