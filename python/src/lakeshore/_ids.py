"""ULIDs: the ids the plane uses, made on the client so a repeated submit is harmless."""

from __future__ import annotations

import os
import re
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every pair of characters, by the 10 bits it encodes: a ULID is 13 lookups, not 26 steps.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_ULID_RE = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0
# The last millisecond's encoding (new_ulid): (milliseconds, 10 characters), one tuple so
# that a thread reads a matching pair.
_prefix: tuple[int, str] = (-1, "")


_making = threading.local()
"""``active`` is set on a thread while it is inside :func:`new_ulid`'s monotonic part: a
signal handler (or a finalizer) that runs there and makes an id itself must not wait for
``_lock``, which its own interrupted frame may hold until the handler returns."""


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def new_ulid() -> str:
    """A new ULID: 48 bits of Unix milliseconds and 80 random bits, 26 Crockford base32
    characters. Ids made in the same millisecond by one process increase monotonically,
    except one made by a signal handler (or a finalizer) that interrupted this function on
    its own thread: that one has fresh random bits, without waiting for the lock the
    interrupted call may hold (it would wait forever: that call goes on only once the
    handler returns)."""
    global _last_ms, _last_rand
    ms = time.time_ns() // 1_000_000
    if getattr(_making, "active", False):
        return _encode(ms, int.from_bytes(os.urandom(10), "big"))
    drawn = None  # fresh random bits, drawn outside the lock
    _making.active = True
    try:
        while True:
            with _lock:
                if ms <= _last_ms and _last_rand < (1 << 80) - 1:
                    ms = _last_ms
                    rand = _last_rand + 1
                elif drawn is not None:
                    rand = drawn
                else:
                    rand = -1
                if rand >= 0:
                    _last_ms, _last_rand = ms, rand
                    break
            # A new millisecond: os.urandom lets go of the GIL for its system call, so it
            # is made without the lock held (with it held, the threads submitting at once
            # queued on the lock, each then woken by the OS); another thread may have moved
            # on meanwhile, then the bits are unused and the id follows that thread's.
            drawn = int.from_bytes(os.urandom(10), "big")
    finally:
        _making.active = False
    return _encode(ms, rand)


def _encode(ms: int, rand: int) -> str:
    """The ULID of ``ms`` milliseconds and 80 bits ``rand``."""
    global _prefix
    p = _PAIRS
    at, prefix = _prefix
    if at != ms:
        # The first 10 characters are the millisecond's (5 pairs of 48 bits and 2 zero
        # bits): made once a millisecond, kept for the ids that follow in it.
        prefix = p[ms >> 40] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023] + p[(ms >> 10) & 1023] + p[ms & 1023]
        _prefix = (ms, prefix)
    return "".join(
        (
            prefix,
            p[rand >> 70],
            p[(rand >> 60) & 1023],
            p[(rand >> 50) & 1023],
            p[(rand >> 40) & 1023],
            p[(rand >> 30) & 1023],
            p[(rand >> 20) & 1023],
            p[(rand >> 10) & 1023],
            p[rand & 1023],
        )
    )


def is_ulid(s: object) -> bool:
    """Whether s is a ULID in canonical upper-case form."""
    return isinstance(s, str) and _ULID_RE.match(s) is not None
