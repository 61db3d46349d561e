"""The compute fabric's glue between the SDK's parts: what a submit of a mode adds
(metadata, the code upload once per digest) and what a worker does before a body of a
run that carries a declaration (fetch and unpack its code, run its setup once per
environment and its run_setup each time, import its function). docs/fabric.md."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from lakeshore import code, config, errors, lifecycle

log = logging.getLogger("lakeshore.worker")

_uploaded: set[tuple[int, str, str, str]] = set()  # (id(dispatch), namespace, queue, digest)
_uploaded_lock = threading.Lock()
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
    return f"/v1/namespaces/{quote(namespace, safe='')}/queues/{quote(queue, safe='')}/code/{digest}"


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
    with _uploaded_lock:
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
        self.prepared: set[tuple[str, str]] = set()
        # Host keys whose set-up this worker did, most recent first: the worker's claims
        # prefer their jobs (warm host keys).
        self.warm: list[str] = []
        # The values the last run's env replaced (None: unset), put back after its body.
        self.saved_env: dict[str, str | None] = {}

    def needed(self, metadata: Any) -> bool:
        """Whether a job with ``metadata`` needs preparing (a hop off the worker's loop)."""
        return bool(metadata) and (config.META_RUN in metadata or config.META_CODE in metadata)

    def prepare(self, namespace: str, queue: str, metadata: Any, *, own_handler: bool = False) -> Callable[..., Any] | None:
        """Prepare the run (in a worker thread): fetch and unpack its code, run its setup
        commands once per (host key, digest), the host set-up hooks its code registered,
        its env and run_setup commands; return the function it names, or None (the
        worker's own). ``own_handler``: the queue runs a callable the worker's owner gave
        (not thunks, not an ``@udf``), whose submitters may not ship code or commands to it
        unless the worker trusts them. Raises what failed (the attempt fails)."""
        decl = json.loads(metadata.get(config.META_RUN) or "{}")
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
                for c in self.caches.values():
                    c.in_use = set()
                cache.in_use = {digest}
                cache.touch(digest)
                root = cache.path(digest)
            cwd = root or os.getcwd()
            env_key = (host_key, digest)
            if env_key not in self.prepared:
                for cmd in decl.get("setup") or []:
                    _shell(cmd, cwd, None, "setup")
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
            env = {str(k): str(v) for k, v in (decl.get("env") or {}).items()}
            self._restore_env()
            self.saved_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            for cmd in decl.get("run_setup") or []:
                _shell(cmd, cwd, env, "run_setup")
        return fn


    def restore_env(self) -> None:
        """Put back what the last prepared run's env replaced, after its body: a run's
        environment is its own, never a later job's."""
        with self.lock:
            self._restore_env()

    def _restore_env(self) -> None:
        saved, self.saved_env = self.saved_env, {}
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _shell(cmd: str, cwd: str, env: dict[str, str] | None, what: str) -> None:
    full_env = {**os.environ, **env} if env else None
    p = subprocess.run(cmd, shell=True, cwd=cwd, env=full_env, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip()[-500:]
        raise RuntimeError(f"{what} command {cmd!r} exited with {p.returncode}: {tail}")
