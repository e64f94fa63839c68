"""The store watcher does not take a push for the whole change when a commit after the
push's read may have left the store's signature as it was (kint/tenant_worker/watcher.py,
store.SettledRule).

After a push, the watcher cleared the store's dirty mark when the signature read again
matched the one read before the push. A commit within one tick of the files' clock, inside
the size a restarted WAL already had, changes neither times nor sizes
(tests/test_store_same_tick.py): one that landed while the push ran was never pushed, and
the store read as clean until the next write. A signature read within two seconds of the
files' last change now clears nothing: the store stays dirty, and is looked at once more
when that signature tells every later commit (not at every tick till then: each look is a
diff of the whole store). A held push likewise is tried again then, not only at the next
change.

Real parts: a real Watcher over a real store written by Sibyl's own client, its clock in
the test's hands. Two stand-ins: the push (it records, and makes the second commit while
"running", where a real push's timing cannot be had), and, as in
tests/test_store_same_tick.py, the files' times set back after that commit, which is what
a commit inside the same tick leaves. The files are dated by hand before the first tick:
at the present (the first tick is then inside their tick: checked after it, and the setup
done again when a stalled box missed it, never a bound on how long a step takes), or an
hour ahead of the clock (the clock stepped back: such a signature tells only once it has
stood two seconds, store.SettledRule, which the test's ticks never reach).
"""

from __future__ import annotations

import os
import time

import pytest

from conftest import sibyl_client, write_store
from kint.protocol import ErrorCode, ProtocolError
from support.same_tick import restarted_wal, same_tick_commit

# How many times the setup is done again when a stalled box ran the first tick past the
# files' tick (the "now" dating), before the test gives up.
PREMISE_ATTEMPTS = 5
# Where the files are dated before the first tick, from the clock's present (ns).
DATINGS = {"now": 0, "ahead": 3600 * 10**9}


def _two_ticks(folder, held: bool, dating: str) -> tuple[list[str], bool, list[str]] | None:
    """A store written just before a watcher's first tick, its files dated by `dating`,
    and a commit inside their tick while the first tick's push runs: (the pushes after the
    first tick, whether the store was still dirty, the pushes after the second), or None
    when the first tick was not inside the files' tick (the premise)."""
    from kint.tenant_worker.store import settled, store_signature
    from kint.tenant_worker.watcher import Watcher

    folder.mkdir()
    db = str(write_store(folder / "memory.db"))
    client = sibyl_client(db)
    wal_size = restarted_wal(db, client)
    pushed: list[str] = []

    def push(reason: str) -> dict:
        pushed.append(reason)
        if len(pushed) == 1:  # lands after the push read its rows, inside their tick
            same_tick_commit(db, client, wal_size, "while-pushing")
            if held:
                raise ProtocolError(ErrorCode.HELD, "held")
        return {"message": "anchored"}

    try:
        watcher = Watcher(db, lambda: (1, 0), push, generation=lambda: 0)
        client.set_entity("notes", "to-push", {"n": 1})  # a write just now
        stamp = time.time_ns() + DATINGS[dating]
        for suffix in ("", "-wal"):
            os.utime(f"{db}{suffix}", ns=(stamp, stamp))
        now = time.monotonic()
        watcher.tick(now)
        watcher.tick(now + 1)  # the signature does not tell yet: nothing, at every tick
        if settled(store_signature(db)) is True:
            return None  # the ticks may have run past the files' tick: done again
        first, dirty = list(pushed), watcher.dirty
        _until_told(db)
        watcher.tick(now + 3)  # it tells: the store is looked at once more, and pushed
        return first, dirty, pushed
    finally:
        client.storage.close()


def _until_told(db: str) -> None:
    """Wait until the files' times are two seconds in the past, for files dated at the
    present (the wall clock; none for files ahead of it, which tell by standing steady, on
    the ticks' clock)."""
    from kint.tenant_worker.store import settled, store_signature

    deadline = time.monotonic() + 30
    while settled(store_signature(db)) is False and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("dating", sorted(DATINGS))
@pytest.mark.parametrize("held", [False, True])
def test_a_commit_inside_the_tick_of_a_pushed_change_is_looked_at_again(tmp_path,
                                                                         monkeypatch, held,
                                                                         dating):
    """The push goes through (the store must stay dirty), or is held (its hold must not
    wait for a change it may have missed: the commit puts back what held it)."""
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "1000000")
    for attempt in range(PREMISE_ATTEMPTS):
        ticks = _two_ticks(tmp_path / f"try-{attempt}", held, dating)
        if ticks is not None:
            break
    else:
        pytest.fail(f"the box stalled past the files' tick {PREMISE_ATTEMPTS} times")
    first, dirty, pushed = ticks
    assert first == ["watcher"], "pushed again before the signature told every commit"
    assert dirty, "the commit the push did not read was taken as pushed"
    assert pushed == ["watcher", "watcher"], "the commit inside the tick was not pushed"


def _start_then_commit(folder, dating: str) -> tuple[bool, list[str]] | None:
    """A store written just before a watcher starts, its files dated by `dating`, and a
    commit inside their tick right after the start's count read its rows: (whether the
    store was dirty after the start, the pushes once its signature told), or None when the
    start was not inside the files' tick."""
    from kint.tenant_worker.store import settled, store_signature
    from kint.tenant_worker.watcher import Watcher

    folder.mkdir()
    db = str(write_store(folder / "memory.db"))
    client = sibyl_client(db)
    wal_size = restarted_wal(db, client)
    counted: list[int] = []
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        counted.append(1)
        if len(counted) == 1:  # the start's count: nothing left, then a commit after it
            same_tick_commit(db, client, wal_size, "after-the-start")
            return (0, 0)
        return (1, 0)

    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0)
    try:
        client.set_entity("notes", "written-before", {"n": 1})  # a write just now
        stamp = time.time_ns() + DATINGS[dating]
        for suffix in ("", "-wal"):
            os.utime(f"{db}{suffix}", ns=(stamp, stamp))
        now = time.monotonic()
        watcher.start()  # its own ticks wait an hour (KINT_POLL_SECONDS): the test's only
        if settled(store_signature(db)) is True:
            return None
        dirty = watcher.dirty
        _until_told(db)
        watcher.tick(now + 3)
        return dirty, pushed
    finally:
        watcher.stop()
        client.storage.close()


@pytest.mark.parametrize("dating", sorted(DATINGS))
def test_a_commit_inside_the_tick_of_the_starts_count_is_pushed(tmp_path, monkeypatch,
                                                                 dating):
    """The start's count of what an earlier session left read a signature within the
    files' tick, and found nothing: the store was taken as clean, and a commit right after
    the count, leaving the signature as it was, waited for the next write."""
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")
    for attempt in range(PREMISE_ATTEMPTS):
        result = _start_then_commit(tmp_path / f"try-{attempt}", dating)
        if result is not None:
            break
    else:
        pytest.fail(f"the box stalled past the files' tick {PREMISE_ATTEMPTS} times")
    dirty, pushed = result
    assert dirty, "a count within the files' tick was taken for a clean store"
    assert pushed == ["watcher"], "the commit after the start's count was not pushed"


def _pushed_then_looked(folder) -> tuple[int, int, bool, int] | None:
    """A push inside the files' tick that missed nothing: (the counts made until the
    signature told, the counts after the tick that found it told, whether the store was
    still dirty then, how many times the watcher said it was clean), or None when the
    ticks were not inside the files' tick."""
    from kint.tenant_worker.store import settled, store_signature
    from kint.tenant_worker.watcher import Watcher

    folder.mkdir()
    db = str(write_store(folder / "memory.db"))
    counted: list[int] = []
    pushed: list[str] = []
    clean: list[int] = []

    def count() -> tuple[int, int]:
        counted.append(1)
        return (0, 0) if pushed else (1, 0)

    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0, settled=lambda: clean.append(1))
    client = sibyl_client(db)
    try:
        client.set_entity("notes", "to-push", {"n": 1})  # a write just now
    finally:
        client.storage.close()
    stamp = time.time_ns()
    for suffix in ("", "-wal"):
        if os.path.exists(f"{db}{suffix}"):
            os.utime(f"{db}{suffix}", ns=(stamp, stamp))
    now = time.monotonic()
    watcher.tick(now)  # pushed
    watcher.tick(now + 1)
    watcher.tick(now + 1.5)
    if settled(store_signature(db)) is True:
        return None
    before = len(counted)
    _until_told(db)
    watcher.tick(now + 3)
    return before, len(counted), watcher.dirty, len(clean)


def test_a_push_inside_the_files_tick_is_looked_at_once_when_it_tells(tmp_path,
                                                                      monkeypatch):
    """After a push within two seconds of the store's last write the store stays dirty (a
    commit may have been missed), and each tick until the signature told diffed the whole
    store again, clearing nothing; now the ticks till then do nothing, and one count once
    it tells finds the store clean."""
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    for attempt in range(PREMISE_ATTEMPTS):
        result = _pushed_then_looked(tmp_path / f"try-{attempt}")
        if result is not None:
            break
    else:
        pytest.fail(f"the box stalled past the files' tick {PREMISE_ATTEMPTS} times")
    before, after, dirty, clean = result
    assert before == 1, f"{before - 1} diff(s) of the store before its signature told"
    assert after == 2 and not dirty and clean == 1, (after, dirty, clean)
