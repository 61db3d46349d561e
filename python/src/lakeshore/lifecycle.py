"""Worker lifecycle hooks: Python code a worker runs around its bodies.

::

    from lakeshore import lifecycle

    @lifecycle.on_host_setup      # once per worker process, before its first body
    def load_model():
        global MODEL
        MODEL = load("checkpoint.pt")

    @lifecycle.on_run_setup       # before every body
    def scratch():
        os.makedirs("/tmp/scratch", exist_ok=True)

    @lifecycle.on_shutdown        # when the worker drains, after its last body
    def flush():
        writer.close()

    lifecycle.phase()             # "setup", "ready" or "draining"

The phases follow the declared ones of a compute mode (:mod:`lakeshore.config`): ``setup:``
commands ~ ``on_host_setup``, ``run_setup:`` commands ~ ``on_run_setup``.

Rules (``run_worker`` keeps them):

- no body runs before every ``on_host_setup`` hook registered so far has finished; hooks
  run in registration order, once per process (a hook registered later — by code shipped
  with a run and imported by the worker — runs before the first body that follows; the
  set-up hooks of shipped code are forgotten with its modules when a run of another digest
  replaces it);
- a host set-up hook that raises fails the worker's start (``run_worker`` raises it
  before it claims anything), not the jobs: they stay queued for another worker; one
  registered by shipped code fails that attempt (retried as any failure);
- a run set-up hook that raises fails that attempt; the body does not run;
- shutdown hooks run once, after the last body, when the worker drains or returns; one
  that raises is logged and the others still run.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Literal, TypeVar

__all__ = ["on_host_setup", "on_run_setup", "on_shutdown", "phase", "Phase", "host_key"]

log = logging.getLogger("lakeshore.lifecycle")

F = TypeVar("F", bound=Callable[[], object])

Phase = Literal["setup", "ready", "draining"]
"""A worker process's phase: ``setup`` (host set-up not finished), ``ready`` (claiming
and running bodies), ``draining`` (no new claims; finishing)."""

_lock = threading.RLock()
_host: list[Callable[[], object]] = []
_run: list[Callable[[], object]] = []
_shutdown: list[Callable[[], object]] = []
_host_done = 0  # how many of _host have run
_shutdown_done = False
_phase: Phase = "setup"
_host_key = ""


def on_host_setup(fn: F) -> F:
    """Register ``fn`` to run once per worker process before its first body."""
    with _lock:
        _host.append(fn)
    return fn


def on_run_setup(fn: F) -> F:
    """Register ``fn`` to run before every body (in the body's thread for sync bodies)."""
    with _lock:
        _run.append(fn)
    return fn


def on_shutdown(fn: F) -> F:
    """Register ``fn`` to run once when the worker drains, after its last body."""
    with _lock:
        _shutdown.append(fn)
    return fn


def phase() -> Phase:
    """This process's phase: ``"setup"``, ``"ready"`` or ``"draining"``."""
    return _phase


def host_key() -> str:
    """The host key of the last run this worker prepared for ("" before any)."""
    return _host_key


def run_host_setup() -> None:
    """Run the host set-up hooks not run yet, in order (the worker calls it before its
    first claim and before each body). Raises what a hook raises; that hook runs again at
    the next call."""
    global _host_done
    with _lock:
        while _host_done < len(_host):
            _host[_host_done]()
            _host_done += 1


def pending_host_setup() -> bool:
    """Whether a host set-up hook has not run yet."""
    return _host_done < len(_host)


def has_run_setup() -> bool:
    """Whether any run set-up hook is registered."""
    return bool(_run)


def run_run_setup() -> None:
    """Run the run set-up hooks in order. Raises what a hook raises."""
    for fn in list(_run):
        fn()


def run_shutdown() -> None:
    """Run the shutdown hooks once, in order; a hook that raises is logged."""
    global _shutdown_done
    with _lock:
        if _shutdown_done:
            return
        _shutdown_done = True
        hooks = list(_shutdown)
    for fn in hooks:
        try:
            fn()
        except Exception:  # noqa: BLE001 - shutdown is best effort
            log.exception("lakeshore worker: shutdown hook %s failed", getattr(fn, "__qualname__", fn))


def _forget_code(prefix: str) -> None:
    """Forget the set-up hooks defined in files under ``prefix``: the code root of a digest
    whose modules the worker forgot to import another's (``code.load_function``), so that
    no body runs the hooks of code it is not. Shutdown hooks stay: the old code's objects
    are still in the process, and their clean-up still due."""
    global _host_done
    with _lock:
        done = [fn for fn in _host[:_host_done] if not _defined_under(fn, prefix)]
        _host[:] = done + [fn for fn in _host[_host_done:] if not _defined_under(fn, prefix)]
        _host_done = len(done)
        _run[:] = [fn for fn in _run if not _defined_under(fn, prefix)]


def _defined_under(fn: Callable[[], object], prefix: str) -> bool:
    """Whether ``fn``'s code is in a file under ``prefix`` (False when it has no file)."""
    try:
        path = inspect.getfile(inspect.unwrap(fn))
    except (TypeError, ValueError):
        return False
    return path.startswith(prefix)


def _set_phase(p: Phase) -> None:
    global _phase
    _phase = p


def _set_host_key(k: str) -> None:
    global _host_key
    _host_key = k


def _reset() -> None:
    """Forget every hook and start over (tests)."""
    global _host_done, _shutdown_done, _phase, _host_key
    with _lock:
        _host.clear()
        _run.clear()
        _shutdown.clear()
        _host_done, _shutdown_done, _phase, _host_key = 0, False, "setup", ""
