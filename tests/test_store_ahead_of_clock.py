"""A store whose files' times are ahead of the wall clock (the clock stepped back; a store
copied with its times) has its counts kept once they have stood (kint/tenant_worker/
store.py, `settled` and `SettledRule`), until the clock comes within two seconds of
those times; so do the heartbeat's unanchored figure and the watcher's clean mark.

Counts are kept only once the files' newest mtime is two seconds in the past: a commit
within one tick of the files' clock may leave them as they were. An mtime in the future
never was, until the clock caught up (hours maybe), so every `kint status` counted every
tier again. Such a time is moved by any commit now (it stamps the present), so the count
is kept once the same signature has been seen two seconds apart (the monotonic clock).

Real parts: a real Sibyl store, the worker's real reader, tally and Watcher; the count is
wrapped only to tell a count from the kept one, and the watcher's push records. The future
time is set with os.utime; the clock reaching it is the wall clock's read fixed at it
(`time.time_ns`), as the box's clock cannot be stepped here.
"""

from __future__ import annotations

import os
import time

import pytest

from conftest import TENANT, write_store
from kint.tenant_worker.store import SETTLED_AFTER_NS, StoreReader
from kint.tenant_worker.store_errors import StoreNotCounted


def test_counts_of_a_store_ahead_of_the_clock_are_kept_once_steady(tmp_path, monkeypatch):
    db = str(write_store(tmp_path / "memory.db"))
    ahead = time.time_ns() + 3600 * 10**9
    for path in (db, db + "-wal"):
        if os.path.exists(path):
            os.utime(path, ns=(ahead, ahead))
    reader = StoreReader(db, TENANT)
    counted: list[int] = []
    count_rows = reader._count_rows

    def counting(*args, **kw):
        counted.append(1)
        return count_rows(*args, **kw)

    reader._count_rows = counting  # type: ignore[method-assign]
    first = reader.facts()
    assert reader.facts() == first and len(counted) == 2  # seen once: not kept yet
    time.sleep(SETTLED_AFTER_NS / 1e9 + 0.1)
    assert reader.facts() == first and len(counted) == 3  # steady: this count is kept
    assert reader.facts() == first and len(counted) == 3
    assert reader.facts(read=False) == first
    # The clock came within two seconds of the files' time: a commit now may stamp the
    # same tick, so the kept count is no longer used (`keep is not False`).
    monkeypatch.setattr(time, "time_ns", lambda: ahead)
    with pytest.raises(StoreNotCounted):
        reader.facts(read=False)
    assert reader.facts() == first and len(counted) == 4


def _dated_ahead(db: str) -> int:
    """The store's files dated an hour ahead of the clock; that time (ns)."""
    ahead = time.time_ns() + 3600 * 10**9
    for path in (db, db + "-wal"):
        if os.path.exists(path):
            os.utime(path, ns=(ahead, ahead))
    return ahead


def test_the_heartbeat_figure_of_a_store_ahead_is_recounted_once_the_clock_nears(
        tmp_path, monkeypatch):
    """The same rule for `kint supervisor status`'s UNANCHORED figure (unanchored.py): one
    counted at a signature ahead of the clock is fresh once that signature has stood two
    seconds, and stale again (recounted) once the clock comes within two seconds of the
    files' times, where it stayed fresh and missed a commit stamped in their tick. The
    clock reaching those times is the wall clock's read set to them (`time.time_ns`):
    stepping the box's clock cannot be had here."""
    from kint.tenant_worker.mirror_file import Mirror
    from kint.tenant_worker.store import settled, store_signature
    from kint.tenant_worker.unanchored import UnanchoredTally, key_of

    db = str(write_store(tmp_path / "memory.db"))
    ahead = _dated_ahead(db)
    mirror = Mirror("ab" * 32)
    sig = store_signature(db)
    key = key_of(sig, mirror)
    tally = UnanchoredTally()
    tally.counted(3, key, 0.0, settled(sig))  # first seen: not told yet
    assert tally.at_beat(1.0, db, mirror, may_start=False)[0]["unanchored_stale"] is True
    tally.counted(3, key, 2.5, settled(sig))  # the same signature, 2.5 s on: told
    assert tally.at_beat(3.0, db, mirror, may_start=False)[0]["unanchored_stale"] is False
    monkeypatch.setattr(time, "time_ns", lambda: ahead)
    fields, start = tally.at_beat(4.0, db, mirror, may_start=True)
    assert fields["unanchored_stale"] is True and start, fields


@pytest.mark.parametrize("held", [False, True])
def test_the_watcher_looks_again_at_a_store_ahead_once_the_clock_nears(
        tmp_path, monkeypatch, held):
    """And for the watcher's clean mark (watcher.py): a store ahead of the clock is marked
    clean after a push (or the push's hold kept) once its signature has stood two seconds;
    once the clock comes within two seconds of its times the store is looked at again,
    where it stayed clean and a commit stamped in that tick was not pushed until the next
    write. The push is the test's (it records; held, it raises HELD)."""
    from kint.protocol import ErrorCode, ProtocolError
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    pushed: list[float] = []

    def push(_reason: str) -> dict:
        pushed.append(1)
        if held:
            raise ProtocolError(ErrorCode.HELD, "held")
        return {"message": "anchored"}

    watcher = Watcher(db, lambda: (1, 0), push, generation=lambda: 0)
    ahead = _dated_ahead(db)  # a change to the store the watcher has read
    start = time.monotonic()  # the ticks' clock, in the test's hands from here
    watcher.tick(start)  # seen at 0: pushed, but not told till 2 s on
    watcher.tick(start + 1.0)  # not told yet: nothing, not a push at every tick
    assert len(pushed) == 1 and watcher.dirty
    watcher.tick(start + 3.0)  # told: looked at once more (pushed again)
    assert len(pushed) == 2 and watcher.dirty == held
    watcher.tick(start + 4.0)  # clean (or held at that signature): nothing to do
    assert len(pushed) == 2
    monkeypatch.setattr(time, "time_ns", lambda: ahead)
    watcher.tick(start + 5.0)  # the clock near: not clean, looked at once it tells again
    assert len(pushed) == 2 and watcher.dirty, "the store was taken as clean still"
    monkeypatch.setattr(time, "time_ns", lambda: ahead + SETTLED_AFTER_NS)
    watcher.tick(start + 6.0)
    assert len(pushed) == 3 and watcher.dirty == held, "the store was not looked at again"


def test_a_clean_store_ahead_is_counted_once_when_it_tells_again(tmp_path, monkeypatch):
    """A store found clean (by the start's count) ahead of the clock, doubted once the
    clock nears its times, is counted once when its signature tells again and marked clean:
    it stayed dirty up to the next size check (a minute), the worker's idle exit with it.
    The quiet period is an hour: only counts look at the store."""
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "3600")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")  # the watcher's own ticks: none here
    counted: list[int] = []
    watcher = Watcher(db, lambda: counted.append(1) or (0, 0), lambda _r: {},
                      generation=lambda: 0)
    ahead = _dated_ahead(db)
    start = time.monotonic()
    watcher.start()  # counted at a signature seen first: not told
    try:
        watcher.tick(start + 3.0)  # told: counted once more, clean
        assert len(counted) == 2 and not watcher.dirty
        monkeypatch.setattr(time, "time_ns", lambda: ahead)
        watcher.tick(start + 4.0)  # the clock near: dirty, nothing counted till it tells
        assert len(counted) == 2 and watcher.dirty
        monkeypatch.setattr(time, "time_ns", lambda: ahead + SETTLED_AFTER_NS)
        watcher.tick(start + 5.0)
        assert len(counted) == 3 and not watcher.dirty, "left dirty till the size check"
    finally:
        watcher.stop()
