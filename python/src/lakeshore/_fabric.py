"""The compute fabric's glue between the SDK's parts: what a submit of a mode adds
(metadata, the code upload once per digest) and what a worker does before a body of a
run that carries a declaration (fetch and unpack its code, run its setup once per
environment and its run_setup each time, import its function). docs/fabric.md."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from lakeshore import code, config, errors, lifecycle
from lakeshore._transport import queue_path

log = logging.getLogger("lakeshore.worker")

# (id(dispatch), namespace, queue, digest) uploaded. Read and added to with one set
# operation each (atomic): no lock, so a signal handler (or a finalizer) that submits a
# code-shipping run while its thread's own upload is adding does not wait forever for a
# lock its interrupted frame holds.
_uploaded: set[tuple[int, str, str, str]] = set()
_refs: dict[tuple[int, str], str] = {}
_metadata: dict[tuple[int, str], tuple[config.Mode, dict[str, str]]] = {}
_warned: set[tuple[str, str]] = set()  # (project file, mode) told that it ships no code

#: How a worker's owner lets its submitters run declared commands or ship code to queues
#: it serves with its own function: the hint every refusal of that kind ends with.
TRUST_HINT = (
    "run_worker(trust_declarations=True) or LAKESHORE_TRUST_DECLARATIONS=1 "
    "(docs/fabric.md, \"Who may run commands on a worker\")"
)


def code_path(namespace: str, queue: str, digest: str) -> str:
    """The route of a code archive."""
    return f"{queue_path(namespace, queue)}/code/{digest}"


def upload(dispatch: Any, queue: str, snap: code.Snapshot, max_bytes: int) -> None:
    """Upload ``snap`` to ``queue``'s code store unless this process already did or the
    server already holds it (HEAD first: the archive is built only when needed).

    Raises:
        code.CodeError: over ``max_bytes``; errors.DispatchError: the server's refusal."""
    key = (id(dispatch), dispatch.namespace, queue, snap.digest)
    if key in _uploaded:
        return
    path = code_path(dispatch.namespace, queue, snap.digest)
    t = dispatch._transport
    try:
        dispatch.run(t.call("HEAD", path, raw=True, retry="safe"))
    except errors.DispatchError as e:
        # A HEAD answer has no body: a missing archive is a bare 404.
        if e.status == 501:
            raise code.CodeError(
                "the server keeps no code archives (it runs without a code directory): "
                "submit this mode to a `lakeshore serve` or the local daemon, or set code: false on the mode"
            ) from None
        if not isinstance(e, errors.NotFoundError) and e.status != 404:
            raise
        data = snap.archive(max_bytes)
        dispatch.run(t.call("PUT", path, content=data, content_type="application/gzip", retry="safe"))
    _uploaded.add(key)


def submit_options(mode_name: str, fn: Callable[..., Any] | None, queue: str, dispatch: Any) -> dict[str, Any]:
    """The submit options of a run of mode ``mode_name`` (from the project file found from
    the working directory): its metadata — with the code digest, the git context and, for
    ``fn``, the function reference when the mode ships code —, its time limit as the
    attempt timeout and its resources as the requirement (``requires``).

    Raises:
        config.ConfigError: no project file, no such mode; code.CodeError: the code cannot
            be shipped."""
    cfg = config.load()
    mode = cfg.mode(mode_name)
    declared = [k for k in ("setup", "run_setup", "env") if getattr(mode, k)]
    if declared and not mode.code and (cfg.file, mode_name) not in _warned:
        _warned.add((cfg.file, mode_name))
        log.warning(
            "lakeshore: mode %r declares %s but ships no code (no code: section in %s): a worker runs "
            "those only when started with %s; else the runs fail",
            mode_name, ", ".join(declared), cfg.file, TRUST_HINT,
        )
    digest = ""
    git = None
    ref = None
    if mode.code:
        snap = code.snapshot(cfg.dir, cfg.code)
        if fn is not None:
            # Before the upload: a function the snapshot does not ship is refused with
            # nothing sent.
            rk = (id(fn), snap.digest)
            ref = _refs.get(rk)
            if ref is None:
                ref = _refs[rk] = code.function_ref(fn, cfg.dir, {f.path for f in snap.files})
        upload(dispatch, queue, snap, cfg.code.max_bytes if cfg.code else config.DEFAULT_MAX_CODE_BYTES)
        digest, git = snap.digest, snap.git
    mk = (id(mode), digest)
    cached = _metadata.get(mk)
    if cached is None or cached[0] is not mode:
        cached = _metadata[mk] = (mode, mode.metadata(digest))
    md = dict(cached[1])
    if git is not None:
        md[config.META_GIT] = git.to_json()
    if digest and ref is not None:
        md[config.META_FUNCTION] = ref
    out: dict[str, Any] = {"metadata": md}
    if mode.time_limit:
        out["attempt_timeout"] = float(mode.time_limit)
    requirement = mode.resources.requirement()
    if requirement is not None:
        out["requires"] = requirement
    return out


# The context of a run that declares nothing (no shipped code, no env): it takes the
# context gate as declared runs do, so it never runs beside a declared run's env or code
# root (Preparer.try_enter_plain).
PLAIN: tuple[Any, ...] = ("", "", ())


class Preparer:
    """A worker's preparation of runs that carry a declaration: its code cache, the
    environments already set up (host key, digest), one at a time."""

    def __init__(self, dispatch: Any, trust_declarations: bool = False) -> None:
        self.d = dispatch
        # Whether declared commands and env of runs that ship no code are run (the
        # worker's owner trusts every submitter of its queues; docs/fabric.md).
        self.trust = trust_declarations
        self.lock = threading.Lock()
        self.caches: dict[str, code.CodeCache] = {}  # by namespace
        self.prepared: set[tuple[str, str, str]] = set()  # (host key, namespace, digest)
        # Host keys whose set-up this worker did, most recent first: the worker's claims
        # prefer their jobs (warm host keys).
        self.warm: list[str] = []
        # The values the running context's env replaced (None: unset), put back when its
        # last run ends.
        self.saved_env: dict[str, str | None] = {}
        # The context gate: a run's code root and env are the worker process's (sys.path,
        # os.environ), so runs of one context — (namespace, digest, env) — run at once and
        # another context's wait until they end, in the order they came (docs/fabric.md).
        self.gate = threading.Condition()
        self.context: tuple[Any, ...] | None = None  # the context of the running runs
        self.holders: set[str] = set()  # the jobs of that context that hold the gate
        self.waiting: list[tuple[Any, ...]] = []  # the contexts waiting, in arrival order

    def needed(self, metadata: Any) -> bool:
        """Whether a job with ``metadata`` needs preparing (a hop off the worker's loop)."""
        return bool(metadata) and (config.META_RUN in metadata or config.META_CODE in metadata)

    def prepare(
        self,
        namespace: str,
        queue: str,
        metadata: Any,
        *,
        own_handler: bool = False,
        stopped: threading.Event | None = None,
        job_id: str = "",
    ) -> Callable[..., Any] | None:
        """Prepare the run (in a worker thread): fetch and unpack its code, run its setup
        commands once per (host key, digest), the host set-up hooks its code registered,
        its env and run_setup commands; return the function it names, or None (the
        worker's own). ``own_handler``: the queue runs a callable the worker's owner gave
        (not thunks, not an ``@udf``), whose submitters may not ship code or commands to it
        unless the worker trusts them. ``stopped``, set when the job is stopped, kills a
        declared command that still runs (CommandStopped). Raises what failed (the attempt
        fails)."""
        decl = _declaration(metadata.get(config.META_RUN) or "{}")
        digest = metadata.get(config.META_CODE, "")
        if not self.trust:
            declared = [k for k in ("setup", "run_setup", "env") if decl.get(k)]
            if digest and own_handler:
                # Anyone who may submit to the queue writes the metadata: on a queue that
                # runs the worker's own function, shipped code (its function, its modules
                # on sys.path, its commands) would be code execution for the submit right.
                raise PermissionError(
                    f"this run ships code to queue {queue!r}, which this worker serves with its own function: "
                    "a worker runs shipped code only on queues it serves by name (thunks) or by an @udf, or "
                    f"when started with {TRUST_HINT}"
                )
            if declared and not digest:
                # Without shipped code (whose submitter runs their own code here anyway) its
                # commands would be a shell on this worker for the submit right alone.
                raise PermissionError(
                    f"this run declares {', '.join(declared)} but ships no code: a worker runs a run's declared "
                    f"commands and env only for runs that ship their code, or when started with {TRUST_HINT}"
                )
        # The set-ups this worker did are keyed by the host key of the declared set-up
        # itself, never by the one the declaration states (a submitter could name another
        # run's key to make that run skip its set-up).
        host_key = config.declaration_host_key(decl) if decl else ""
        env = {str(k): str(v) for k, v in (decl.get("env") or {}).items()}
        first = self._enter((namespace if digest else "", digest, tuple(sorted(env.items()))), job_id, stopped)
        try:
            return self._prepare(namespace, queue, metadata, decl, digest, host_key, env, first, stopped)
        except BaseException:
            self.release(job_id)
            raise

    def try_enter_plain(self, job_id: str) -> bool:
        """On the worker's loop, for a run that declares nothing (its context is
        :data:`PLAIN`: no shipped code, no env): take the context gate if that needs no
        wait — no run of another context holds it or waits for it. Return whether it did;
        if not, the run waits in a worker thread (:meth:`enter_plain`)."""
        with self.gate:
            if self.waiting or not self._free_for(PLAIN):
                return False
            self._take(PLAIN, job_id)
            return True

    def enter_plain(self, job_id: str, stopped: threading.Event | None = None) -> None:
        """In a worker thread: take the context gate for a run that declares nothing,
        waiting for the runs of a declared context to end (their env and code root are the
        process's). Raises CommandStopped when the job is stopped while it waits."""
        self._enter(PLAIN, job_id, stopped)

    def _enter(self, context: tuple[Any, ...], job_id: str, stopped: threading.Event | None) -> bool:
        """Take the context gate for ``job_id``: at once when no run holds it or the runs
        holding it are of ``context`` and no other context waits before it; else wait
        until they end. Return whether this run is the first of its context (it sets the
        env). Raises CommandStopped when the job is stopped while it waits."""
        with self.gate:
            self.waiting.append(context)
            try:
                while not self._may_enter(context):
                    if stopped is not None and stopped.is_set():
                        raise CommandStopped("stopped while waiting for the runs of another code or env to end")
                    self.gate.wait(COMMAND_POLL)
            finally:
                self.waiting.remove(context)
            return self._take(context, job_id)

    def _may_enter(self, context: tuple[Any, ...]) -> bool:
        """Whether a run of ``context`` may take the gate now (self.gate held): no other
        context waits before it, and the gate is free or held by runs of ``context``."""
        ahead = self.waiting[: self.waiting.index(context)]
        if any(c != context for c in ahead):
            return False
        return self._free_for(context)

    def _free_for(self, context: tuple[Any, ...]) -> bool:
        """Whether the gate is free or held by runs of ``context`` (self.gate held)."""
        return not self.holders or self.context == context

    def _take(self, context: tuple[Any, ...], job_id: str) -> bool:
        """Give ``job_id`` the gate for ``context`` (self.gate held, the run may enter);
        return whether it is the first run of its context (it sets the env)."""
        first = not self.holders
        self.context = context
        self.holders.add(job_id)
        self.gate.notify_all()
        return first

    def release(self, job_id: str) -> None:
        """After the body of a prepared run (or its failed preparation): let go of the
        context gate; the last run of its context puts back what its env replaced, so a
        later job of the worker process never sees another run's environment. A job that
        holds nothing is a no-op."""
        with self.gate:
            if job_id not in self.holders:
                return
            self.holders.discard(job_id)
            if not self.holders:
                if self.context != PLAIN:  # PLAIN set no env (and may be on the loop: no wait)
                    with self.lock:
                        self._restore_env()
                self.context = None
            self.gate.notify_all()

    def _prepare(
        self,
        namespace: str,
        queue: str,
        metadata: Any,
        decl: dict[str, Any],
        digest: str,
        host_key: str,
        env: dict[str, str],
        first: bool,
        stopped: threading.Event | None,
    ) -> Callable[..., Any] | None:
        with self.lock:
            root = None
            if digest:
                # One cache per namespace: an archive fetched for one namespace's run (the
                # server checked that namespace's token) is never another namespace's,
                # however its runs name the digest.
                cache = self.caches.get(namespace)
                if cache is None:
                    cache = self.caches[namespace] = code.CodeCache(code.namespace_cache_dir(namespace))
                if not cache.has(digest):
                    data, _ = self.d.run(self.d._transport.call("GET", code_path(namespace, queue, digest), raw=True, retry="safe"))
                    cache.put(digest, data)
                    # A fresh directory (first fetch, or again after the cache evicted it):
                    # the set-ups done in the one before are not in it.
                    self.prepared = {k for k in self.prepared if k[1:] != (namespace, digest)}
                for c in self.caches.values():
                    c.in_use = set()
                cache.in_use = {digest}
                cache.touch(digest)
                root = cache.path(digest)
            cwd = root or os.getcwd()
            # Set-ups run in the code's directory, one per namespace and digest (each
            # namespace unpacks its own copy), so they are done once per such directory.
            env_key = (host_key, namespace if digest else "", digest)
            if env_key not in self.prepared:
                for cmd in decl.get("setup") or []:
                    _shell(cmd, cwd, None, "setup", stopped)
                self.prepared.add(env_key)
            if env_key[0]:
                if env_key[0] in self.warm:
                    self.warm.remove(env_key[0])
                self.warm.insert(0, env_key[0])
            lifecycle._set_host_key(env_key[0])
            fn = None
            ref = metadata.get(config.META_FUNCTION)
            if root is not None and ref:
                fn = code.load_function(root, ref)
            lifecycle.run_host_setup()
            if first:
                self.saved_env = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
            for cmd in decl.get("run_setup") or []:
                _shell(cmd, cwd, env, "run_setup", stopped)
        return fn

    def _restore_env(self) -> None:
        saved, self.saved_env = self.saved_env, {}
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _declaration(text: str) -> dict[str, Any]:
    """The run declaration of a job's metadata (``lakeshore.run``), its commands and env
    checked: the metadata is whatever a submitter wrote, not necessarily a project file's.

    Raises:
        ValueError: saying which field is wrong and what it must be."""
    try:
        decl = json.loads(text)
    except ValueError as e:
        raise ValueError(f"the run declaration ({config.META_RUN}) is not JSON: {e}") from None
    if not isinstance(decl, dict):
        raise ValueError(f"the run declaration ({config.META_RUN}) must be a JSON object")
    for key in ("setup", "run_setup"):
        cmds = decl.get(key) or []
        if not isinstance(cmds, list) or not all(isinstance(c, str) and "\0" not in c for c in cmds):
            raise ValueError(f"the run declaration's {key} must be a list of commands (strings without a NUL byte)")
    env = decl.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and config._ENV_KEY.match(k) and isinstance(v, str) and "\0" not in v for k, v in env.items()
    ):
        raise ValueError(
            "the run declaration's env must map environment variable names ([A-Za-z_][A-Za-z0-9_]*) "
            "to strings without a NUL byte"
        )
    return decl


class CommandStopped(RuntimeError):
    """A declared command killed because its job was stopped (killed, its lease lost, the
    worker's second signal) while it ran."""


COMMAND_POLL = 0.1
"""Seconds between two looks, while a declared command runs, at whether its job was
stopped."""


OUTPUT_TAIL = 64 << 10
"""Bytes of a declared command's stdout and of its stderr a worker keeps while it runs
(the last ones: what a failure quotes)."""


class _Tail(threading.Thread):
    """Reads a command's output pipe to its end, keeping only its last ``OUTPUT_TAIL``
    bytes: a command that prints without end (a build log, a progress bar) costs the
    worker this much, not what it printed."""

    def __init__(self, pipe: Any) -> None:
        super().__init__(daemon=True, name="lakeshore-command-output")
        self.pipe = pipe
        self.kept = bytearray()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError), self.pipe:  # closed at its end
            while chunk := self.pipe.read1(1 << 16):
                self.kept += chunk
                if len(self.kept) > 2 * OUTPUT_TAIL:
                    del self.kept[:-OUTPUT_TAIL]

    def text(self) -> str:
        return bytes(self.kept[-OUTPUT_TAIL:]).decode(errors="replace")


def _shell(cmd: str, cwd: str, env: dict[str, str] | None, what: str, stopped: threading.Event | None = None) -> None:
    """Run a declared command with ``sh`` in ``cwd``: in a process group of its own, known
    to the worker's guard (so a worker that dies, even by SIGKILL, leaves nothing of it
    running), and killed with its whole group as soon as ``stopped`` is set (its job was
    killed or lost its lease: nothing of an attempt runs on beside its retry). Of its
    output only the last ``OUTPUT_TAIL`` bytes of each stream are kept.

    Raises:
        CommandStopped: ``stopped`` was set; RuntimeError: the command failed."""
    guard = _command_guard()
    full_env = {**os.environ, **(env or {}), GUARD_ENV: guard.mark}
    p = subprocess.Popen(
        cmd, shell=True, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    guard.add(p.pid)
    tails = [_Tail(p.stdout), _Tail(p.stderr)]
    for t in tails:
        t.start()
    try:
        # Until the command has exited and its output pipes are closed (what it left
        # running in the background may hold them), as communicate() waits.
        while p.poll() is None or any(t.is_alive() for t in tails):
            if stopped is not None and stopped.is_set():
                raise CommandStopped(f"{what} command {cmd!r} was stopped: its job was killed or lost its lease")
            if p.returncode is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=COMMAND_POLL)
            else:
                for t in tails:
                    t.join(COMMAND_POLL / len(tails))
    finally:
        if p.returncode is None or any(t.is_alive() for t in tails):
            # Stopped, or the worker's thread left otherwise: the command's whole group goes,
            # with what it left in the background holding its output once it has exited
            # (its process group outlives it while a member does, so the pid names no other).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        guard.remove(p.pid)
    if p.returncode != 0:
        out, err = (t.text() for t in tails)
        tail = (err or out).strip()[-500:]
        raise RuntimeError(f"{what} command {cmd!r} exited with {p.returncode}: {tail}")


GUARD_ENV = "LAKESHORE_COMMAND_GUARD"
"""The environment variable every declared command of a Python worker carries (and
whatever it starts inherits), set to its worker's guard's mark: the guard kills the
processes that carry it when the worker dies, those that left the command's process group
included (Go's exec worker has the same, ``LAKESHORE_EXEC_GUARD``)."""

# The guard: a process of its own that reads "+PGID" and "-PGID" lines (a command's
# process group started, ended) from a pipe of its worker; when the pipe closes — the
# worker exited or died, even by SIGKILL — it kills every group still registered and every
# process carrying its mark. It ignores terminal signals: it must outlive its worker.
_GUARD_SOURCE = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
mark = ("%s=%s" % (sys.argv[1], sys.argv[2])).encode()
groups = set()
for line in sys.stdin.buffer:
    line = line.strip()
    if len(line) > 1 and line[1:].isdigit() and int(line[1:]) > 1:
        (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
me = os.getpid()
try:
    pids = os.listdir("/proc")
except OSError:  # no /proc (macOS): the groups alone
    pids = []
for _ in range(3 if pids else 0):  # a process forked while the first pass ran is found by the next
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if mark in f.read().split(b"\0"):
                    os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass
"""


class _CommandGuard:
    """A worker process's guard of its declared commands (started at its first command)."""

    def __init__(self) -> None:
        self.mark = os.urandom(16).hex()
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _GUARD_SOURCE, GUARD_ENV, self.mark],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )  # fmt: skip

    def _send(self, line: str) -> None:
        with self.lock, contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()

    def pid_changed(self) -> bool:
        """Whether this is a forked child of the process that started the guard (which
        then needs its own)."""
        return self.pid != os.getpid()

    def add(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def remove(self, pgid: int) -> None:
        self._send(f"-{pgid}")


def guard_children() -> None:
    """Put this process under its guard (Linux): every process it starts from now on — a
    body's ``subprocess`` calls, what they start in turn — carries the guard's mark in its
    environment, so a worker that dies, even by SIGKILL, leaves nothing of its attempts
    running beside their retries (the guard kills every process with the mark once the
    worker's pipe closes, as Go's exec worker's guard does for its commands). A process the
    worker started before, or one that clears its environment, is not covered; the SDK's
    daemons drop the mark (they are no attempt's)."""
    if not sys.platform.startswith("linux"):
        return
    os.environ[GUARD_ENV] = _command_guard().mark


_guard: _CommandGuard | None = None
_guard_lock = threading.Lock()


def _command_guard() -> _CommandGuard:
    global _guard
    with _guard_lock:
        if _guard is None or _guard.pid_changed() or _guard.proc.poll() is not None:  # none, forked, or killed
            old = _guard.mark if _guard is not None else None
            _guard = _CommandGuard()
            if old is not None and os.environ.get(GUARD_ENV) == old:
                os.environ[GUARD_ENV] = _guard.mark  # this process's children: the new guard's
        return _guard
