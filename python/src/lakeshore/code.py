"""Code shipped with the run: snapshot, digest, upload once, fetch and unpack on a worker.

At submit (a mode with ``code``, see :mod:`lakeshore.config`) the submitter's code — the
git tree of the project (tracked files and untracked ones not ignored) or the declared
mounts — is addressed by its digest, archived deterministically and uploaded once per
digest to the server (``PUT /v1/namespaces/{ns}/queues/{q}/code/{digest}``). A worker
lacking that digest downloads it, unpacks it into a fresh directory of its cache while
checking every entry (regular files only, clean relative paths, a size bound) and the
digest, renames it into place (so a crash never leaves a half-unpacked entry under its
final name), keeps at most ``max_entries`` digests (least recently used go first), and
imports the function from it with the directory first on ``sys.path`` and ``PYTHONPATH``.

The digest depends on the files' paths, contents and executable bits only (the Go
package ``fabric`` computes the same: ``fabric/testdata/vectors.json``). Hashing is cached
by each file's stat (size, modification time, inode), as git's index does, so a submit of
an unchanged tree reads no file; the listing is redone only when the git index, a
directory or a file changed.

A snapshot of a git tree also carries its :class:`GitContext` (commit, branch, dirty flag,
digest of the diff against the commit, submodule commits), stored on the invocation under
``lakeshore.git`` for reproducibility; it is read again only when the tree, the index,
``HEAD`` or the branch's ref changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import importlib
import importlib.machinery
import io
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeshore import errors, lifecycle
from lakeshore.config import Code, Mount

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "File",
    "CodeError",
    "Snapshot",
    "GitContext",
    "git_context",
    "digest",
    "git_files",
    "mount_files",
    "hash_files",
    "snapshot",
    "write_archive",
    "read_archive",
    "CodeCache",
    "check_pattern",
    "load_function",
    "namespace_cache_dir",
    "function_ref",
]

log = logging.getLogger("lakeshore.code")

_DIGEST = re.compile(r"[0-9a-f]{64}\Z")


class CodeError(errors.InvalidError):
    """Code that cannot be shipped or unpacked: over the size ceiling, a bad archive entry,
    a digest that does not match (an :class:`~lakeshore.errors.InvalidError`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="code", rule=message)


@dataclasses.dataclass(frozen=True)
class File:
    """One file of a code tree: slash-separated ``path`` below the root, ``executable``,
    ``size`` and ``sha256`` (32 bytes)."""

    path: str
    executable: bool
    size: int
    sha256: bytes


def digest(files: Iterable[File]) -> str:
    """The digest of a code tree: the SHA-256, in hex, of ``"lakeshore code 1\\n"`` and,
    per file in byte order of its path, ``<path>\\0<644|755>\\0<size>\\0<sha256 hex>\\n``."""
    h = hashlib.sha256(b"lakeshore code 1\n")
    for f in sorted(files, key=lambda f: f.path.encode("utf-8")):
        h.update(f"{f.path}\0{'755' if f.executable else '644'}\0{f.size}\0{f.sha256.hex()}\n".encode())
    return h.hexdigest()


def _check_path(p: str) -> None:
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        raise CodeError(f"bad path {p!r} in the code tree: paths must be valid UTF-8") from None
    if (
        not p
        or any(c in p for c in "\0\n\\")
        or p.startswith("/")
        or p in (".", "..")
        or p.startswith("../")
        or any(part in ("", ".", "..") for part in p.split("/"))
    ):
        raise CodeError(f"bad path {p!r} in the code tree: want a clean relative path with no '..', backslash, NUL or newline")
    if len(p.encode()) > MAX_PATH_BYTES:
        raise CodeError(f"a path of {len(p.encode())} bytes in the code tree ({p[:40]!r}…): at most {MAX_PATH_BYTES} bytes are allowed")
    for name in p.split("/"):
        if len(name.encode()) > MAX_NAME_BYTES:
            raise CodeError(f"a name of {len(name.encode())} bytes in the code tree path {p[:40]!r}…: at most {MAX_NAME_BYTES} bytes per name are allowed")


MAX_PATH_BYTES = 4096
"""The longest path of a code tree in bytes (Linux's PATH_MAX; the Go fabric.MaxPathBytes)."""
MAX_NAME_BYTES = 255
"""The longest name in a code tree path in bytes (NAME_MAX; the Go fabric.MaxNameBytes)."""


# ------------------------------------------------------------------------------ listing


def git_files(root: str | os.PathLike[str]) -> list[str]:
    """The files git would ship from the work tree at ``root``: tracked and untracked not
    ignored (``git ls-files --cached --others --exclude-standard``), minus deleted ones,
    symbolic links and anything not a regular file; sorted, relative to ``root``.

    Raises:
        CodeError: git failed (not a git work tree, git missing)."""
    try:
        out = subprocess.run(
            _git_argv(str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"),
            capture_output=True,
            check=True,
            env=_git_env(),
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise CodeError(
            f"cannot list the git tree at {root}: {detail.decode(errors='replace').strip() or e}; "
            "ship code from a git work tree or declare code.mounts in lakeshore.yaml"
        ) from None
    files = set()
    for raw in out.split(b"\0"):
        if not raw:
            continue
        p = raw.decode("utf-8", "surrogateescape")
        try:
            st = os.lstat(os.path.join(root, p))
        except OSError:
            continue
        if not _is_regular(st.st_mode):
            continue
        files.add(p)
    return sorted(files, key=lambda p: p.encode("utf-8", "surrogateescape"))


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _translate(pattern: str) -> str:
    """A regular expression for a Go ``path.Match`` pattern (``*`` and ``?`` never match
    ``/``; ``[...]`` classes with ``^`` negation; ``\\`` escapes).

    Raises:
        ValueError: a malformed pattern."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i >= n:
                raise ValueError("syntax error in pattern")
            out.append(re.escape(pattern[i]))
            i += 1
        elif c == "[":
            cls = ["["]
            if i < n and pattern[i] == "^":
                cls.append("^")
                i += 1
            first = True
            while True:
                if i >= n:
                    raise ValueError("syntax error in pattern")
                c = pattern[i]
                if c == "]" and not first:
                    i += 1
                    break
                first = False
                if c == "\\":
                    i += 1
                    if i >= n:
                        raise ValueError("syntax error in pattern")
                    c = pattern[i]
                cls.append(re.escape(c))
                i += 1
                if i + 1 < n and pattern[i] == "-" and pattern[i + 1] != "]":
                    hi = pattern[i + 1]
                    i += 2
                    if hi == "\\":
                        if i >= n:
                            raise ValueError("syntax error in pattern")
                        hi = pattern[i]
                        i += 1
                    cls.append("-" + re.escape(hi))
            cls.append("]")
            out.append("".join(cls))
        else:
            out.append(re.escape(c))
    return "".join(out) + r"\Z"


def check_pattern(pattern: str) -> str:
    """"" for a well-formed include/exclude pattern, else what is wrong with it."""
    try:
        re.compile(_translate(pattern))
    except (ValueError, re.error) as e:
        return str(e)
    return ""


def _match_any(patterns: Sequence[str], rel: str) -> bool:
    parts = rel.split("/")
    for p in patterns:
        rx = re.compile(_translate(p))
        slash = "/" in p
        for i in range(len(parts)):
            if rx.match("/".join(parts[: i + 1])):
                return True
            if not slash and rx.match(parts[i]):
                return True
    return False


def mount_files(root: str | os.PathLike[str], mounts: Sequence[Mount]) -> list[str]:
    """The regular files of ``mounts`` below ``root`` (no symbolic links, no ``.git``),
    filtered by each mount's include and exclude patterns; sorted, relative to ``root``.

    Raises:
        CodeError: a mount whose path (or a directory on the way to it) is a symbolic link or
            does not exist, as the Go SDK's fabric.MountFiles."""
    files = set()
    for m in mounts:
        _check_mount_path(root, m.path)
        base = os.path.join(root, m.path)
        for d, dirs, names in os.walk(base):
            dirs[:] = [x for x in dirs if x != ".git" and not os.path.islink(os.path.join(d, x))]
            for name in names:
                full = os.path.join(d, name)
                if not _is_regular(os.lstat(full).st_mode):
                    continue
                rel = os.path.relpath(full, base).replace(os.sep, "/")
                if (m.include and not _match_any(m.include, rel)) or _match_any(m.exclude, rel):
                    continue
                files.add(rel if m.path == "." else f"{m.path}/{rel}")
    return sorted(files, key=lambda p: p.encode("utf-8", "surrogateescape"))


def _check_mount_path(root: str | os.PathLike[str], mount_path: str) -> None:
    """Refuse a mount path (relative, slash-separated, clean) that does not exist below
    ``root`` or passes through a symbolic link: a link would ship files from outside the
    project."""
    if mount_path == ".":
        return
    p = os.fspath(root)
    for part in mount_path.split("/"):
        p = os.path.join(p, part)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            raise CodeError(f"code mount {mount_path}: {p} does not exist below the project root {root}") from None
        if stat.S_ISLNK(st.st_mode):
            raise CodeError(
                f"code mount {mount_path}: {p} is a symbolic link; a mount ships only files inside the project: "
                "name a directory of the project under code.mounts (or copy the linked files into it)"
            )


# ------------------------------------------------------------------------------ hashing


def _hash_file(full: str) -> tuple[bytes, int]:
    h = hashlib.sha256()
    n = 0
    with open(full, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    return h.digest(), n


def hash_files(root: str | os.PathLike[str], paths: Iterable[str]) -> list[File]:
    """Read the named files below ``root`` and return them as :class:`File` values."""
    out = []
    for p in paths:
        _check_path(p)
        full = os.path.join(root, p)
        st = os.stat(full)
        sha, n = _hash_file(full)
        out.append(File(p, bool(st.st_mode & 0o111), n, sha))
    return out


@dataclasses.dataclass
class Snapshot:
    """A code tree ready to ship: its ``root``, ``files`` and ``digest``, and for a git
    tree its ``git`` context (None for declared mounts or outside git); :meth:`archive`
    builds its archive."""

    root: str
    files: list[File]
    digest: str
    git: GitContext | None = None

    def archive(self, max_bytes: int = 0) -> bytes:
        """The deterministic archive (:func:`write_archive`).

        Raises:
            CodeError: over ``max_bytes`` compressed (> 0), or a file changed since the
                snapshot."""
        # The archive stops at the ceiling: a tree with a large file in it (a checkpoint left
        # in the project) costs the ceiling in memory, not the file's size.
        buf = _CeilingBuffer(max_bytes)
        try:
            write_archive(buf, self.root, self.files)
        except _OverCeiling:
            raise CodeError(
                f"the code archive of {self.root} is over the ceiling of {max_bytes} bytes compressed "
                "(code.max_size in lakeshore.yaml; exclude large files with code.mounts' exclude)"
            ) from None
        return buf.getvalue()


class _OverCeiling(Exception):
    """A write past a _CeilingBuffer's limit."""


class _CeilingBuffer(io.BytesIO):
    """A BytesIO that refuses (_OverCeiling) a write taking it past ``limit`` bytes (0: no
    limit)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, b: Any) -> int:
        if self.limit > 0 and self.tell() + memoryview(b).nbytes > self.limit:
            raise _OverCeiling
        return super().write(b)


class _HashingReader(io.RawIOBase):
    """Reads at most ``size`` bytes of ``src``, hashing them."""

    def __init__(self, src: Any, size: int) -> None:
        self.src, self.left, self.sha = src, size, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self.left:
            n = self.left
        data: bytes = self.src.read(n)
        self.left -= len(data)
        self.sha.update(data)
        return data


@dataclasses.dataclass(frozen=True)
class GitContext:
    """The git state of the tree a run's code was snapshotted from (reproducibility: which
    commit, and whether the shipped code differs from it).

    Attributes:
        commit: the full hash of ``HEAD``; "" in a repository without commits.
        branch: the checked-out branch's short name; "" when ``HEAD`` is detached.
        dirty: whether the project's directory differs from ``HEAD`` (modified, staged,
            deleted or untracked-not-ignored files, or a submodule that moved or is
            modified, below the directory holding ``lakeshore.yaml``).
        diff_sha256: the SHA-256, in hex, of ``git diff --binary HEAD -- .`` in that
            directory (tracked changes; untracked files are in the code digest itself); ""
            when there is no diff.
        submodules: ``(path, commit)`` of each submodule, recursively, in git's order."""

    commit: str
    branch: str
    dirty: bool
    diff_sha256: str
    submodules: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> str:
        """The JSON stored under ``lakeshore.git`` (keys sorted; ``submodules`` left out
        when there are none)."""
        out: dict[str, Any] = {"commit": self.commit, "branch": self.branch, "dirty": self.dirty, "diff_sha256": self.diff_sha256}
        if self.submodules:
            out["submodules"] = [{"path": p, "commit": c} for p, c in self.submodules]
        return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _git_env() -> dict[str, str]:
    """The environment of the git commands run on a project: without ``GIT_*`` variables,
    which could point git at another repository, index or work tree than the project's."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _git_argv(root: str, *args: str) -> list[str]:
    """A git command on the work tree at root; the repository's own fsmonitor hook is not
    run (``core.fsmonitor=false``): snapshotting code runs no program the tree names."""
    return ["git", "-c", "core.fsmonitor=false", "-C", root, *args]


def _git(root: str, *args: str) -> bytes:
    return subprocess.run(_git_argv(root, *args), capture_output=True, check=True, env=_git_env()).stdout


def git_context(root: str | os.PathLike[str]) -> GitContext | None:
    """The :class:`GitContext` of the work tree at ``root``; None when it is not a git work
    tree or git is missing. Runs git four or five times (a few milliseconds): call it when
    the tree changed, as :func:`snapshot` does."""
    root = os.fspath(root)
    try:
        _git(root, "rev-parse", "--is-inside-work-tree")
    except (OSError, subprocess.CalledProcessError):
        return None
    try:
        commit = _git(root, "rev-parse", "--verify", "-q", "HEAD").decode().strip()
    except subprocess.CalledProcessError:
        commit = ""  # no commit yet
    try:
        branch = _git(root, "symbolic-ref", "--short", "-q", "HEAD").decode().strip()
    except subprocess.CalledProcessError:
        branch = ""  # detached
    # Dirty and the diff cover the project's directory (what ships), not the whole repository.
    status = _git(root, "status", "--porcelain=v1", "-z", "--ignore-submodules=none", "--", ".")
    diff = _git(root, "diff", "--binary", "--no-ext-diff", "--no-color", "HEAD", "--", ".") if commit else b""
    submodules: list[tuple[str, str]] = []
    with contextlib.suppress(subprocess.CalledProcessError):
        for line in _git(root, "submodule", "status", "--recursive", "--", ".").decode(errors="replace").splitlines():
            # " <sha> <path> (<describe>)", the first column a status mark or a space.
            fields = line[1:].split(" ")
            if len(fields) >= 2:
                submodules.append((fields[1], fields[0]))
    return GitContext(commit, branch, bool(status), hashlib.sha256(diff).hexdigest() if diff else "", tuple(submodules))


def _git_refs(root: str) -> list[str]:
    """The files whose change means HEAD moved: HEAD itself, the branch's loose ref and
    packed-refs (those that exist)."""
    out: list[str] = []
    try:
        head = _git(root, "rev-parse", "--git-path", "HEAD").decode().strip()
        paths = [head, _git(root, "rev-parse", "--git-path", "packed-refs").decode().strip()]
        ref = _git(root, "symbolic-ref", "-q", "HEAD").decode().strip()
        if ref:
            paths.append(_git(root, "rev-parse", "--git-path", ref).decode().strip())
    except (OSError, subprocess.CalledProcessError):
        return out
    for p in paths:
        full = os.path.join(root, p)
        if os.path.exists(full):
            out.append(full)
    return out


# (size, mtime_ns, inode, ctime_ns): a file's identity for the hash cache.
_Stat = tuple[int, int, int, int]


@dataclasses.dataclass
class _Tree:
    """What a root's last snapshot saw: the stats that decide whether to list again."""

    listed_under: tuple[tuple[str, int], ...]  # (path, mtime_ns) of the git index and the directories
    paths: list[str]
    stats: dict[str, _Stat]
    files: dict[str, File]
    digest: str
    # The fast path's checks, joined once: (full path, mtime_ns) of the index and the
    # directories, (full path, stat) of the files.
    watch_dirs: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    watch_files: list[tuple[str, _Stat]] = dataclasses.field(default_factory=list)
    snapshot: Snapshot | None = None

    def unchanged(self) -> bool:
        """Whether nothing the listing or the hashes depend on changed (one stat each)."""
        stat = os.stat
        try:
            for full, mtime in self.watch_dirs:
                if stat(full).st_mtime_ns != mtime:
                    return False
            for full, sk in self.watch_files:
                st = stat(full)
                if (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) != sk:
                    return False
        except OSError:
            return False
        return True


# The trees snapshot last saw, by (root, mounts). Read and written with one dict operation
# each (atomic, as a thread lock was around them): no lock, so a signal handler (or a
# finalizer) that snapshots while its thread's own snapshot is between the two — a SIGTERM
# handler submitting a last job of a mode that ships code — does not wait forever for a
# lock its interrupted frame holds.
_trees: dict[tuple[str, Any], _Tree] = {}
_RACY_SECONDS = 2.0  # a file modified this recently is hashed again next time (git's "racy" rule)


def _stat_key(st: os.stat_result) -> _Stat:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _dirs_of(root: str, paths: Iterable[str]) -> set[str]:
    dirs = {""}
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(len(parts)):
            dirs.add("/".join(parts[: i + 1]))
    return dirs


def _listed_under(root: str, paths: Iterable[str], git: bool) -> tuple[tuple[str, int], ...] | None:
    out = []
    if git:
        index = _git_index(root)
        if index is not None:
            with contextlib.suppress(OSError):
                out.append((index, os.stat(index).st_mtime_ns))
    for d in sorted(_dirs_of(root, paths)):
        try:
            out.append((os.path.join(root, d), os.stat(os.path.join(root, d)).st_mtime_ns))
        except OSError:
            return None
    return tuple(out)


_git_dirs: dict[str, str | None] = {}


def _git_index(root: str) -> str | None:
    """The git index file of the work tree at root (cached)."""
    if root not in _git_dirs:
        try:
            out = _git(root, "rev-parse", "--git-path", "index").decode().strip()
            _git_dirs[root] = os.path.join(root, out)
        except (OSError, subprocess.CalledProcessError):
            _git_dirs[root] = None
    return _git_dirs[root]


def snapshot(root: str | os.PathLike[str], code: Code | None = None) -> Snapshot:
    """Snapshot the code of the project at ``root``: ``code``'s mounts when it has some,
    else the git tree. An unchanged tree (same index and directory times, same file
    stats) costs one ``stat`` per file and directory; changed files alone are read again.

    Raises:
        CodeError: git failed, or a path cannot be shipped."""
    root = os.path.abspath(root)
    mounts = code.mounts if code is not None else ()
    git = not mounts
    key = (root, mounts)
    tree = _trees.get(key)
    if tree is not None and tree.snapshot is not None and tree.unchanged():
        return tree.snapshot
    paths = git_files(root) if git else mount_files(root, mounts)
    now = time.time()
    stats: dict[str, _Stat] = {}
    files: dict[str, File] = {}
    for p in paths:
        _check_path(p)
        full = os.path.join(root, p)
        st = os.stat(full)
        sk = _stat_key(st)
        old = tree.files.get(p) if tree is not None else None
        if old is not None and tree is not None and tree.stats.get(p) == sk:
            files[p] = old
        else:
            sha, n = _hash_file(full)
            files[p] = File(p, bool(st.st_mode & 0o111), n, sha)
        if now - st.st_mtime > _RACY_SECONDS:
            stats[p] = sk
        else:
            stats[p] = (-1, -1, -1, -1)  # too recent to trust its stat: hash it again next time
    listed = _listed_under(root, paths, git) or ()
    context = None
    if git:
        context = git_context(root)
        refs = []
        for full in _git_refs(root):
            with contextlib.suppress(OSError):
                refs.append((full, os.stat(full).st_mtime_ns))
        listed = listed + tuple(refs)  # a commit or a checkout lists (and reads the context) again
    d = digest(files.values())
    snap = Snapshot(root, list(files.values()), d, context)
    t = _Tree(listed, paths, stats, files, d, list(listed), [(os.path.join(root, p), stats[p]) for p in paths], snap)
    _trees[key] = t
    return snap


def write_archive(out: io.BufferedIOBase | io.BytesIO, root: str, files: Iterable[File]) -> None:
    """Write the deterministic archive of ``files`` (read again from ``root`` and checked
    against their hashes) to ``out``: a gzip-compressed tar (gzip time 0) of regular-file
    entries in path order, mode 0644 or 0755, time 0, owner 0.

    Raises:
        CodeError: a file changed since it was hashed."""
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for f in sorted(files, key=lambda f: f.path.encode("utf-8")):
                info = tarfile.TarInfo(f.path)
                info.size, info.mode, info.mtime, info.uid, info.gid = f.size, 0o755 if f.executable else 0o644, 0, 0, 0
                changed = CodeError(f"{f.path} changed while the code was archived: submit again")
                with open(os.path.join(root, f.path), "rb") as src:
                    reader = _HashingReader(src, f.size)  # read in pieces: a large file is never whole in memory
                    try:
                        tar.addfile(info, reader)
                    except OSError:  # shorter than when it was hashed
                        raise changed from None
                    if src.read(1) or reader.sha.digest() != f.sha256:
                        raise changed


def read_archive(
    data: bytes | io.BufferedIOBase,
    dest: str | None,
    *,
    max_bytes: int = 4 << 30,
    max_files: int = 200_000,
    max_path_bytes: int = 32 << 20,
) -> tuple[list[File], str]:
    """Read a code archive, checking every entry (regular files and directories only;
    clean relative paths; no duplicates, no path both a file and a directory; the
    bounds), and return its files and digest; with ``dest`` (an existing empty directory)
    also write the files there. The bounds are the Go ``fabric.Limits``: ``max_bytes`` of
    the files together, ``max_files`` files and apart from them as many directory entries
    and as many directories the files are in, ``max_path_bytes`` of the files' paths
    together; the two readers refuse the same archives (``fabric/testdata/vectors.json``).

    Raises:
        CodeError: a bad archive."""
    src = io.BytesIO(data) if isinstance(data, bytes) else data
    member = _OneGzipMember(src, max_bytes)
    files: list[File] = []
    seen: set[str] = set()  # the files
    parents: set[str] = set()  # the directories the files are in
    total = path_bytes = dir_entries = 0
    try:
        with tarfile.open(fileobj=member, mode="r|", tarinfo=_StoredName) as tar:
            for m in tar:
                # The name as stored (tarfile strips every trailing slash of a PAX path and
                # of a directory's name), less one trailing slash, a directory's mark, as
                # the Go reader: "x//" is not "x".
                name = m.pax_headers.get("path", _stored_name(m)).removesuffix("/")
                _check_path(name)
                if m.isdir():
                    # Nothing is written for a directory entry, but each costs a header.
                    dir_entries += 1
                    if dir_entries > max_files:
                        raise CodeError(f"the code archive holds more than {max_files} directory entries")
                    continue
                if not m.isreg():
                    raise CodeError(f"the code archive holds {name!r} of tar type {m.type!r}: only regular files are allowed (no links or devices)")
                path_bytes += len(name.encode())
                if path_bytes > max_path_bytes:
                    raise CodeError(f"the code archive's paths take more than {max_path_bytes} bytes together")
                if name in seen:
                    raise CodeError(f"the code archive holds {name!r} twice")
                if name in parents:
                    raise CodeError(f"the code archive holds {name!r} both as a file and as a directory")
                # The directories of name, deepest first, up to the first one already known.
                d = name
                while "/" in d:
                    d = d.rsplit("/", 1)[0]
                    if d in parents:
                        break
                    if d in seen:
                        raise CodeError(f"the code archive holds {d!r} both as a file and as a directory")
                    if len(parents) >= max_files:
                        raise CodeError(f"the code archive holds more than {max_files} directories")
                    parents.add(d)
                seen.add(name)
                if len(files) >= max_files:
                    raise CodeError(f"the code archive holds more than {max_files} files")
                total += m.size
                if total > max_bytes:
                    raise CodeError(f"the code archive unpacks to more than {max_bytes} bytes")
                body = tar.extractfile(m)
                if body is None:
                    raise CodeError(f"the code archive is damaged at {name!r}")
                h = hashlib.sha256()
                n = 0
                out = None
                if dest is not None:
                    target = os.path.join(dest, name)
                    parent = os.path.dirname(target)
                    _mkdir_inside(dest, parent)
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o755 if m.mode & 0o111 else 0o644)
                    out = os.fdopen(fd, "wb")
                try:
                    while chunk := body.read(1 << 20):
                        h.update(chunk)
                        n += len(chunk)
                        if out is not None:
                            out.write(chunk)
                finally:
                    if out is not None:
                        out.close()
                if n != m.size:
                    raise CodeError(f"the code archive is cut short at {name!r}")
                files.append(File(name, bool(m.mode & 0o111), n, h.digest()))
            # Only zero padding after the last entry, then the end of the one gzip member
            # (the Go reader's rule, so both refuse the same archives).
            member.drain()
            if member.last_nonzero >= tar.offset:
                raise CodeError("the code archive has data after its tar end-of-archive blocks: only zero padding may follow the last entry")
    except zlib.error as e:
        raise CodeError(f"the code archive is damaged: {e}") from None
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as e:
        if isinstance(e, FileExistsError):
            raise CodeError(f"the code archive writes {e.filename!r} twice") from None
        raise CodeError(f"the code archive is damaged: {e}") from None
    return files, digest(files)


class _StoredName(tarfile.TarInfo):
    """A tar member that also keeps the name its own header stores (``stored_name``):
    tarfile strips every trailing slash of a directory's name (a plain ``x//`` reads as
    ``x``), where the Go reader sees the name as stored."""

    stored_name = ""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        info = super().frombuf(buf, encoding, errors)
        # As tarfile reads the name (a ustar prefix joined to it), before it strips slashes.
        name = tarfile.nts(buf[0:100], encoding, errors)  # type: ignore[attr-defined]
        prefix = tarfile.nts(buf[345:500], encoding, errors)  # type: ignore[attr-defined]
        if prefix and info.type not in tarfile.GNU_TYPES:
            name = prefix + "/" + name
        info.stored_name = name
        return info


def _stored_name(m: tarfile.TarInfo) -> str:
    """The name of m as its header stores it: ``stored_name`` when tarfile's name is that one
    with trailing slashes stripped, else tarfile's (a GNU long name replaced it)."""
    stored = getattr(m, "stored_name", "")
    return stored if stored and stored.rstrip("/") == m.name else m.name


class _OneGzipMember(io.RawIOBase):
    """The decompressed bytes of the first gzip member of ``src``, refusing (CodeError)
    anything after that member: a second member or trailing bytes. Keeps the offset of the
    last non-zero byte it delivered (``last_nonzero``) for the check of the padding after
    the tar end-of-archive blocks."""

    def __init__(self, src: Any, max_bytes: int) -> None:
        self.src = src
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.buf = b""
        self.pos = 0  # bytes delivered
        self.last_nonzero = -1
        self.limit = max_bytes + (1 << 20)  # the entries' bound, plus headers and padding
        self.first = True

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        while not self.buf:
            if self.z.eof:
                if self.z.unused_data or self.src.read(1):
                    raise CodeError(
                        "the code archive has data after its gzip stream: one gzip member holding one tar archive is "
                        "allowed (no second member, no trailing bytes)"
                    )
                return False
            chunk = self.z.unconsumed_tail or self.src.read(1 << 16)
            if not chunk:
                raise CodeError("the code archive is damaged: its gzip stream is cut short")
            if self.first:
                self.first = False
                if len(chunk) >= 4 and chunk[:2] == b"\x1f\x8b" and chunk[3] & 0xE0:
                    raise CodeError(f"the code archive's gzip header sets reserved flag bits ({chunk[3] & 0xE0:#x}): they must be zero")
            self.buf = self.z.decompress(chunk, 1 << 20)
        return True

    def readinto(self, b: Any) -> int:
        if not self._fill():
            return 0
        n = min(len(b), len(self.buf))
        out, self.buf = self.buf[:n], self.buf[n:]
        b[:n] = out
        stripped = out.rstrip(b"\0")
        if stripped:
            self.last_nonzero = self.pos + len(stripped) - 1
        self.pos += n
        if self.pos > self.limit:
            raise CodeError(f"the code archive unpacks to more than {self.limit} bytes")
        return n

    def drain(self) -> None:
        """Read to the end of the member (its padding), checking what follows it."""
        while self._fill():
            self.read(1 << 20)


def _mkdir_inside(root: str, d: str) -> None:
    rel = os.path.relpath(d, root)
    if rel == ".":
        return
    if rel == ".." or rel.startswith(".." + os.sep):
        raise CodeError(f"bad directory {d!r} in the code archive")
    cur = root
    for part in rel.split(os.sep):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            os.mkdir(cur, 0o755)
            continue
        import stat

        if not stat.S_ISDIR(st.st_mode):
            raise CodeError(f"the code archive uses {cur!r} both as a file and as a directory")


# ------------------------------------------------------------------------------ the worker's cache


_SAFE_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


def namespace_cache_dir(namespace: str, base: str | None = None) -> str:
    """The code cache of one namespace's runs: ``base`` (default
    :func:`default_cache_dir`) / the namespace and a hash of it (``ns-`` and the hash when
    the name is not a plain file name). Workers keep each namespace's archives apart, so a run can use only
    code its own namespace's token fetched."""
    # The name for the reader, a hash of the exact bytes for uniqueness: namespaces that
    # differ only in case share no directory on a case-insensitive file system.
    digest = hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:16]
    name = f"{namespace}-{digest}" if _SAFE_NAMESPACE.match(namespace) else f"ns-{digest}"
    return os.path.join(base or default_cache_dir(), name)


def default_cache_dir() -> str:
    """``$LAKESHORE_CODE_CACHE``, else ``$LAKESHORE_HOME/code-cache`` (``~/.lakeshore``)."""
    if os.environ.get("LAKESHORE_CODE_CACHE"):
        return os.environ["LAKESHORE_CODE_CACHE"]
    home = os.environ.get("LAKESHORE_HOME") or os.path.join(os.path.expanduser("~"), ".lakeshore")
    return os.path.join(home, "code-cache")


class CodeCache:
    """A worker's unpacked code, one directory per digest under ``root``, at most
    ``max_entries`` kept (least recently used removed first, never one in use by this
    process). Entries appear only by an atomic rename of a fully unpacked and verified
    directory; leftovers of a killed worker (``.tmp-<pid>-…``) are removed once their
    process is gone."""

    def __init__(self, root: str | None = None, *, max_entries: int = 16, max_bytes: int = 4 << 30) -> None:
        self.root = root or default_cache_dir()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.in_use: set[str] = set()
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        self._sweep()

    def _sweep(self) -> None:
        for name in os.listdir(self.root):
            if not name.startswith((".tmp-", ".trash-")):
                continue
            try:
                pid = int(name.split("-")[1])
            except (IndexError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid):
                continue
            shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)

    def path(self, digest: str) -> str:
        """The directory of ``digest`` in the cache (which need not hold it yet).

        Raises:
            CodeError: ``digest`` is not 64 lowercase hex digits (a job's metadata names
                it: a path there must never point the worker outside its cache)."""
        if not _DIGEST.match(digest):
            raise CodeError(f"bad code digest {digest!r}: want 64 lowercase hex digits")
        return os.path.join(self.root, digest)

    def has(self, digest: str) -> bool:
        """Whether ``digest`` is unpacked here."""
        return os.path.isdir(self.path(digest))

    def put(self, digest: str, archive: bytes) -> str:
        """Unpack and verify ``archive`` as ``digest`` and return its directory.

        Raises:
            CodeError: a bad digest, a bad archive, or one whose files do not have
                ``digest``."""
        final = self.path(digest)
        if os.path.isdir(final):
            self.touch(digest)
            return final
        tmp = os.path.join(self.root, f".tmp-{os.getpid()}-{threading.get_ident()}-{digest[:12]}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.mkdir(tmp, 0o755)
        try:
            _, got = read_archive(archive, tmp, max_bytes=self.max_bytes)
            if got != digest:
                raise CodeError(f"the downloaded code has digest {got}, not {digest}: refused")
            try:
                os.rename(tmp, final)
            except OSError:
                if not os.path.isdir(final):  # another worker renamed the same digest first: fine
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.touch(digest)
        self.evict()
        return final

    def touch(self, digest: str) -> None:
        """Mark ``digest`` as used now (its directory's time orders the eviction)."""
        path = self.path(digest)
        with contextlib.suppress(OSError):
            os.utime(path)

    def evict(self) -> None:
        """Remove the least recently used digests beyond ``max_entries`` (not those this
        process uses), each renamed away first so that it vanishes at once."""
        entries = []
        for name in os.listdir(self.root):
            if _DIGEST.match(name) and name not in self.in_use:
                with contextlib.suppress(OSError):
                    entries.append((os.stat(os.path.join(self.root, name)).st_mtime_ns, name))
        total = len(entries) + len(self.in_use)
        entries.sort()
        for _, name in entries:
            if total <= self.max_entries:
                break
            trash = os.path.join(self.root, f".trash-{os.getpid()}-{name[:12]}")
            with contextlib.suppress(OSError):
                os.rename(os.path.join(self.root, name), trash)
                shutil.rmtree(trash, ignore_errors=True)
            total -= 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ------------------------------------------------------------------------------ functions


_import_lock = threading.RLock()
_active_root: str | None = None
_base_pythonpath = os.environ.get("PYTHONPATH", "")


def _below(file: str, root: str) -> str | None:
    """``file``'s path below ``root`` with "/" separators, or None when it is outside."""
    try:
        rel = os.path.relpath(os.path.realpath(file), os.path.realpath(root))
    except ValueError:  # another drive (Windows)
        return None
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def function_ref(fn: Any, root: str, shipped: Collection[str] | None = None) -> str:
    """``module:qualname`` of ``fn`` as a worker imports it from the code shipped from
    ``root``: a function of the ``__main__`` script is named by the script's path below
    ``root`` (``jobs/train.py`` → ``jobs.train``); one of a package imported from a
    directory of the code (the src layout) is ``src/pkg.mod:qualname``. With ``shipped``
    (the snapshot's file paths), the function's file must be one of them.

    Raises:
        CodeError: ``fn`` is nested in a function, or its file is not shipped (outside
            ``root``, an installed package, a path the code's mounts or git tree leave
            out: wrap such a function in a module of the project)."""

    def not_shipped(file: str) -> CodeError:
        return CodeError(
            f"{qual} is defined in {file}, which is not in the shipped code at {root}: a worker imports only "
            "shipped code (wrap a function of an installed package in a module of the project)"
        )

    qual = getattr(fn, "__qualname__", "")
    if not qual or "<locals>" in qual:
        raise CodeError(f"{qual or fn!r} is defined inside a function: a worker cannot import it; define it at module level")
    mod = getattr(fn, "__module__", "") or ""
    if mod == "__main__":
        main = sys.modules.get("__main__")
        file = getattr(main, "__file__", None)
        if not file:
            raise CodeError(f"{qual} is defined in an interactive session: a worker cannot import it; put it in a file of the project")
        rel = _below(os.path.abspath(file), root)
        if rel is None or (shipped is not None and rel not in shipped):
            raise not_shipped(file)
        mod = rel[: -len(".py")].replace("/", ".") if rel.endswith(".py") else rel.replace("/", ".")
        return f"{mod}:{qual}"
    # The directory the module's top package is imported from, relative to the root: ""
    # for a module at the root, "src" for the src layout (a mount of src/). The worker puts
    # that directory of the code on sys.path.
    file = getattr(sys.modules.get(mod), "__file__", None)
    if not file:
        return f"{mod}:{qual}"
    rel = _below(file, root)
    if rel is None or (shipped is not None and rel not in shipped):
        raise not_shipped(file)
    parts = rel.split("/")
    names = mod.split(".")
    tail = names + ["__init__.py"] if parts[-1] == "__init__.py" else names[:-1] + [names[-1] + ".py"]
    if len(parts) < len(tail) or parts[-len(tail):] != tail:
        return f"{mod}:{qual}"  # not laid out by its name (a loader of its own): imported as named
    base = "/".join(parts[: len(parts) - len(tail)])
    return f"{base}/{mod}:{qual}" if base else f"{mod}:{qual}"


def load_function(root: str, ref: str) -> Any:
    """Import ``ref`` (``module:qualname``, or ``directory/module:qualname`` for a module
    imported from a directory of the code such as ``src``) from the code unpacked at
    ``root``: ``root`` (or that directory) goes first on ``sys.path`` and ``PYTHONPATH``
    (replacing the previous code root), and
    modules imported from another code root are forgotten, with the set-up hooks they
    registered (``lakeshore.lifecycle``), so that each digest runs its own code. One code
    root at a time per process.

    Raises:
        CodeError: a malformed ``ref``, or one naming a module outside ``root``;
            ImportError, AttributeError: as importing does."""
    global _active_root
    head, _, qual = ref.partition(":")
    base, _, mod_name = head.rpartition("/")
    if not mod_name or not qual:
        raise CodeError(f"bad function reference {ref!r}: want [directory/]module:qualname")
    if base:
        _check_path(base)  # a clean relative directory of the code, never outside it
    code_root = root
    root = os.path.join(root, *base.split("/")) if base else root
    with _import_lock:
        if _active_root != root:
            if _active_root is not None:
                with contextlib.suppress(ValueError):
                    sys.path.remove(_active_root)
                prefix = _active_root + os.sep
                for name, m in list(sys.modules.items()):
                    f = getattr(m, "__file__", None) or ""
                    if f.startswith(prefix):
                        del sys.modules[name]
                # And the hooks those modules registered: the next body is another code's.
                lifecycle._forget_code(prefix)
            sys.path.insert(0, root)
            os.environ["PYTHONPATH"] = root + (os.pathsep + _base_pythonpath if _base_pythonpath else "")
            importlib.invalidate_caches()
            _active_root = root
        inside = os.path.realpath(code_root) + os.sep

        def shipped(path: str | None) -> bool:
            return bool(path) and os.path.realpath(path or "").startswith(inside)

        # Only the shipped code's own modules, checked before any code runs and before
        # anything in sys.modules is touched: the reference's top-level module must be
        # found in the code's directory itself (the standard library's os:system, or the
        # worker's own lakeshore, names no shipped function).
        top = mod_name.split(".")[0]
        spec = importlib.machinery.PathFinder.find_spec(top, [root])
        origins = [spec.origin] if spec is not None and spec.origin else []
        origins += list(spec.submodule_search_locations or []) if spec is not None else []
        if not origins or not all(shipped(o) for o in origins):
            raise CodeError(f"the function reference {ref!r} names module {mod_name!r}, which is not in the shipped code")
        # The worker's own copy of that package (a worker serving the queue by an @udf
        # imported it) is set aside: the run's function is the shipped one.
        for name, m in list(sys.modules.items()):
            if (name == top or name.startswith(top + ".")) and not shipped(getattr(m, "__file__", None)):
                del sys.modules[name]
        obj: Any = importlib.import_module(mod_name)
        if not shipped(getattr(obj, "__file__", None)):
            raise CodeError(f"the function reference {ref!r} names module {mod_name!r}, which is not in the shipped code")
        for part in qual.split("."):
            obj = getattr(obj, part)
    return getattr(obj, "fn", obj) if type(obj).__name__ == "UDF" else obj
