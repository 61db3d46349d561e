"""The harness of the tests of calls made from a signal handler.

A handler runs on the main thread inside whatever frame it interrupted, so a call it makes
that waits for something that frame holds waits forever. These tests put a stand-in inside
the call to interrupt that sends a real signal to the main thread there
(:func:`interrupt_main`), run the call under test in the SIGUSR1 handler, and turn a wait
that would last forever into a failure: a watchdog's SIGUSR2 raises :class:`Hung`
(:func:`handlers`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


class Hung(Exception):
    """Raised on the main thread by the watchdog of :func:`handlers`: the handler's call
    did not return."""


def interrupt_main(signum: int, ran: threading.Event) -> None:
    """Send ``signum`` to the main thread (the caller's own in these tests) and return
    once its handler has set ``ran``: the handler runs inside the caller's frame."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signum)
    while not ran.is_set():  # the handler runs at this loop's next turn
        pass


@contextlib.contextmanager
def handlers(on_usr1: Callable[[], None], hung: str, until: threading.Event, seconds: float = 10) -> Iterator[None]:
    """Within the block SIGUSR1 runs ``on_usr1`` on the main thread, and a watchdog raises
    :class:`Hung` with the message ``hung`` there (by SIGUSR2) unless ``until`` is set
    within ``seconds``. When the block ends ``until`` is set and both handlers are put
    back."""
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main, "signal handlers run on the main thread"

    def on_usr2(_signum: int, _frame: object) -> None:
        raise Hung(hung)

    def watchdog() -> None:
        if not until.wait(seconds):
            signal.pthread_kill(main, signal.SIGUSR2)

    old_usr1 = signal.signal(signal.SIGUSR1, lambda _signum, _frame: on_usr1())
    old_usr2 = signal.signal(signal.SIGUSR2, on_usr2)
    try:
        threading.Thread(target=watchdog, daemon=True).start()
        yield
    finally:
        until.set()
        signal.signal(signal.SIGUSR1, old_usr1)
        signal.signal(signal.SIGUSR2, old_usr2)
