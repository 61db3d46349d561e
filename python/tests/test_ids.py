"""Client-made ULIDs: the canonical encoding (the ULID spec's time vector), monotonic
within a millisecond, and the table-driven encoder against the plain 26-step one."""

from __future__ import annotations

import random
import signal
import threading

import pytest

from lakeshore import _ids

from .signals import handlers, interrupt_main


def _reference(n: int) -> str:
    # The ULID spec's encoding, five bits at a time from the low end.
    out = []
    for _ in range(26):
        out.append("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[n & 31])
        n >>= 5
    return "".join(reversed(out))


def test_the_spec_time_vector_and_monotonic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ids, "_last_ms", -1)
    monkeypatch.setattr(_ids.time, "time_ns", lambda: 1469918176385 * 1_000_000 + 999_999)
    monkeypatch.setattr(_ids.os, "urandom", lambda k: bytes(range(1, k + 1)))
    a, b = _ids.new_ulid(), _ids.new_ulid()
    rand = int.from_bytes(bytes(range(1, 11)), "big")
    assert a == "01ARYZ6S41" + _reference(rand)[10:]
    assert b == "01ARYZ6S41" + _reference(rand + 1)[10:]  # the same millisecond: + 1
    assert _ids.is_ulid(a) and a < b


def test_the_encoder_matches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    for n in [0, (1 << 128) - 1, 1 << 80, (1 << 80) - 1] + [rng.getrandbits(128) for _ in range(2000)]:
        ms, rand = n >> 80, n & ((1 << 80) - 1)
        monkeypatch.setattr(_ids, "_last_ms", -1)
        monkeypatch.setattr(_ids.time, "time_ns", lambda: ms * 1_000_000)
        monkeypatch.setattr(_ids.os, "urandom", lambda k: rand.to_bytes(k, "big"))
        assert _ids.new_ulid() == _reference(n)


def test_random_bits_are_drawn_without_the_lock_held(monkeypatch: pytest.MonkeyPatch) -> None:
    # os.urandom lets go of the GIL: with the lock held, threads making ids at once queued
    # on it (fails on the old new_ulid, which drew them inside the lock).
    monkeypatch.setattr(_ids, "_last_ms", -1)

    def urandom(k: int) -> bytes:
        assert not _ids._lock.locked(), "os.urandom called with the ids' lock held"
        return bytes(k)

    monkeypatch.setattr(_ids.os, "urandom", urandom)
    assert _ids.is_ulid(_ids.new_ulid())


def test_an_id_made_while_drawing_is_followed_monotonically(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another thread makes an id of the same millisecond while this one draws its bits:
    # this one's id follows it (+ 1), the bits drawn are unused.
    ms = 1469918176385
    monkeypatch.setattr(_ids, "_last_ms", -1)
    monkeypatch.setattr(_ids.time, "time_ns", lambda: ms * 1_000_000)

    def urandom(k: int) -> bytes:
        monkeypatch.setattr(_ids, "_last_ms", ms)
        monkeypatch.setattr(_ids, "_last_rand", 41)
        return bytes([0xFF] * k)

    monkeypatch.setattr(_ids.os, "urandom", urandom)
    assert _ids.new_ulid() == _reference((ms << 80) | 42)
    assert (_ids._last_ms, _ids._last_rand) == (ms, 42)


class _SignalInside:
    """Stands in for ``_ids._lock``: takes the real lock, then interrupts the main thread
    (the caller's own) with ``signum`` and returns only once its handler ran, so the
    handler runs while the interrupted ``new_ulid`` holds the lock."""

    def __init__(self, lock: threading.Lock, signum: int, ran: threading.Event) -> None:
        self.lock = lock
        self.signum = signum
        self.ran = ran
        self.fired = False

    def __enter__(self) -> None:
        self.lock.acquire()
        if not self.fired:
            self.fired = True
            interrupt_main(self.signum, self.ran)

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_an_id_made_by_a_signal_handler_inside_new_ulid_is_made_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A SIGUSR1 handler (user code: a SIGTERM handler that submits a last job, whose body
    # gets a new id) runs while the main thread's new_ulid holds the ids' lock. The
    # handler's id is made without that lock (fresh random bits), the interrupted one then
    # completes, and the two differ. Before, the handler waited forever for the lock its
    # own interrupted frame held (here a watchdog's SIGUSR2 after 10 s ends the wait).
    ran = threading.Event()
    got: dict[str, object] = {}

    def on_usr1() -> None:
        try:
            got["nested"] = _ids.new_ulid()
        finally:
            ran.set()

    monkeypatch.setattr(_ids, "_lock", _SignalInside(_ids._lock, signal.SIGUSR1, ran))
    with handlers(on_usr1, "the handler's new_ulid waited for the lock its interrupted frame held", until=ran):
        outer = _ids.new_ulid()
        assert isinstance(got.get("nested"), str), got
        nested = str(got["nested"])
        assert _ids.is_ulid(outer) and _ids.is_ulid(nested) and outer != nested
        assert _ids.new_ulid() > outer  # the monotonic sequence goes on from the interrupted id
