"""The watcher's one look at a store found clean, or a push held, at a signature read within
two seconds of the store's last write (kint/tenant_worker/watcher.py, `_untold`, and
watcher_look.py, `_look_again`; store.SettledRule): what marks it, and what the look leaves
behind.

Real parts: a real Watcher over a real Sibyl store, its ticks' clock in the test's hands.
Stand-ins: the count and the push (they record; the push raises HELD where the test says,
and the count returns None where the space cannot push: no chain nor data key here), and
the wall clock's read (`time.time_ns`, which store.settled measures the files' age by) set
at a fixed distance from the files' times, which are set with os.utime: whether a
signature tells is then the test's, never a race with the box's clock.
"""

from __future__ import annotations

import os
import time

import pytest

from conftest import write_store
from kint.protocol import ErrorCode, ProtocolError

SECOND_NS = 10**9


def _dated(db: str, stamp: int) -> None:
    """The store's files dated `stamp` (ns): a change of its signature, no write."""
    for path in (db, db + "-wal"):
        if os.path.exists(path):
            os.utime(path, ns=(stamp, stamp))


def _clock_at(monkeypatch, stamp: int, after_s: float) -> None:
    """The wall clock read `after_s` seconds after `stamp`: under two, a signature dated
    `stamp` does not tell every later commit; two or more, it does."""
    monkeypatch.setattr(time, "time_ns", lambda: stamp + int(after_s * SECOND_NS))


def test_a_start_that_cannot_count_leaves_the_store_clean(tmp_path, monkeypatch):
    """A worker that cannot push (not connected, no data key cached: its count is None)
    started within two seconds of the store's last write must not take the store as dirty
    to look at once its signature tells: the count then is None as well, so the store
    stayed dirty for good, and the beat's `has_work` (heartbeat.py, the watcher's dirty
    mark) kept the supervisor from stopping the worker when idle or recycling it. Ticks a
    minute and more apart, past the size check's interval and short of the quiet period."""
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")  # the watcher's own ticks: none here
    counted: list[int] = []
    watcher = Watcher(db, lambda: counted.append(1), lambda _r: pytest.fail("pushed"),
                      generation=lambda: 0)
    stamp = os.stat(db).st_mtime_ns
    _dated(db, stamp)
    _clock_at(monkeypatch, stamp, 0.5)
    now = time.monotonic()
    watcher.start()
    try:
        assert counted == [1] and not watcher.dirty, "dirty with nothing counted"
        _clock_at(monkeypatch, stamp, 3.0)  # the signature tells from here
        for minute in range(1, 4):
            watcher.tick(now + 70 * minute)
        assert not watcher.dirty, "a store nothing can count stayed dirty for good"
    finally:
        watcher.stop()


def test_the_look_at_a_held_push_leaves_no_size_check_to_the_next_change(tmp_path,
                                                                         monkeypatch):
    """A push held within two seconds of the store's last write is tried again once that
    write is two seconds old, by the quiet trigger (the quiet period had passed), and held
    again. The size check the look forces was left pending, so the next change's first
    tick diffed the whole store at once, where the once-a-minute rule would have waited."""
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "1")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "1000000")
    counted: list[int] = []
    pushed: list[int] = []

    def push(_reason: str) -> dict:
        pushed.append(1)
        raise ProtocolError(ErrorCode.HELD, "held")

    watcher = Watcher(db, lambda: counted.append(1) or (1, 0), push, generation=lambda: 0)
    stamp = time.time_ns()
    _dated(db, stamp)  # a change
    _clock_at(monkeypatch, stamp, 0.5)
    now = time.monotonic()
    watcher.tick(now)  # dirty; the first size check: a row, under the trigger
    watcher.tick(now + 1)  # quiet: pushed, held at a signature that does not tell yet
    assert (len(counted), len(pushed)) == (2, 1) and watcher.dirty
    _clock_at(monkeypatch, stamp, 3.0)
    watcher.tick(now + 2)  # it tells: tried again by the quiet trigger, held again
    watcher.tick(now + 3)  # held at this signature: nothing
    assert (len(counted), len(pushed)) == (3, 2)
    _dated(db, stamp + 10 * SECOND_NS)  # the next change, seconds after the last check
    _clock_at(monkeypatch, stamp + 10 * SECOND_NS, 0.5)
    watcher.tick(now + 4)
    assert len(counted) == 3, "the next change was diffed at once, past the once-a-minute rule"


def test_a_change_ends_the_look_owed_to_the_signature_before(tmp_path, monkeypatch):
    """A store found clean at the start at a signature that did not tell yet is owed one
    look at that signature. A change ends it: one that brings the files back to that very
    signature (moved back by hand with their times) is a change like any, pushed once the
    quiet period has passed, not held back until that signature tells."""
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "1")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")  # the watcher's own ticks: none here
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "1000000")
    counted: list[int] = []
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        counted.append(1)
        return (0, 0) if len(counted) == 1 else (1, 0)  # the start's: nothing left

    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0)
    stamp = time.time_ns()
    _dated(db, stamp)
    _clock_at(monkeypatch, stamp, 0.5)  # the files' time does not tell throughout
    now = time.monotonic()
    watcher.start()  # nothing left, at a signature that does not tell: a look owed
    try:
        assert watcher.dirty and not pushed
        _dated(db, stamp + SECOND_NS)  # a change
        watcher.tick(now + 0.5)
        _dated(db, stamp)  # and back to the signature the start counted at
        watcher.tick(now + 1)
        watcher.tick(now + 2.5)  # the quiet period has passed since that change
        assert pushed == ["watcher"], "the change waited for an old signature to tell"
    finally:
        watcher.stop()
