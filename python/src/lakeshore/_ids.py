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


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def new_ulid() -> str:
    """A new ULID: 48 bits of Unix milliseconds and 80 random bits, 26 Crockford base32
    characters. Ids made in the same millisecond by one process increase monotonically."""
    global _last_ms, _last_rand
    ms = time.time_ns() // 1_000_000
    drawn = None  # fresh random bits, drawn outside the lock
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
        # A new millisecond: os.urandom lets go of the GIL for its system call, so it is
        # made without the lock held (with it held, the threads submitting at once queued
        # on the lock, each then woken by the OS); another thread may have moved on
        # meanwhile, then the bits are unused and the id follows that thread's.
        drawn = int.from_bytes(os.urandom(10), "big")
    n = (ms << 80) | rand
    p = _PAIRS
    return (
        p[n >> 120]
        + p[(n >> 110) & 1023]
        + p[(n >> 100) & 1023]
        + p[(n >> 90) & 1023]
        + p[(n >> 80) & 1023]
        + p[(n >> 70) & 1023]
        + p[(n >> 60) & 1023]
        + p[(n >> 50) & 1023]
        + p[(n >> 40) & 1023]
        + p[(n >> 30) & 1023]
        + p[(n >> 20) & 1023]
        + p[(n >> 10) & 1023]
        + p[n & 1023]
    )


def is_ulid(s: object) -> bool:
    """Whether s is a ULID in canonical upper-case form."""
    return isinstance(s, str) and _ULID_RE.match(s) is not None
