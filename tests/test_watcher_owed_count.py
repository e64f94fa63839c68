"""The start's count once it is owed (kint/tenant_worker/watcher.py, `_start_count`) and the
mirror that does not read at a count (kint/tenant_worker/sessions.py, `_changes_to_push`).

- An owed count that answers None (the space can no longer push: not connected, no data
  key, no mirror) leaves the store clean and says so (the worker beats at once): a dirty
  mark nothing can clear kept the worker from its idle exit and recycle for good.
- An owed count that answers (0, 0) (nothing left to push) leaves the store clean once its
  signature tells every later commit, with nothing pushed.
- A worker's first size check is due at its first dirty tick whatever the monotonic clock
  reads (it counts from the box's boot): measured from 0 s, a worker started in the box's
  first minute put it off to the clock's 60 s.
- A size check a failed count's wait put off is not used up: a lock let go while the
  store keeps changing (so the quiet trigger never fires) is counted and pushed within
  RETRY_CAP_TICKS ticks. Taken as made, the check came a minute later.
- The mirror that does not read (a corrupt mirror file) is a count that failed for good,
  naming the mirror, not "cannot push": the store stays dirty while the worker serves a
  session, and once the mirror reads again the owed count finds nothing left and the store
  is clean, with no write to it.

Real parts: a real Watcher over a real store, and for the mirror the devchain's anvil, the
test supervisor and the space's worker, its watcher started by a session's `attach`, the
mirror file garbled and put back for real. Stand-ins, in the first four tests: the count,
which answers as the space's would, and the push, which records. What they test is which
answer comes at which tick (a count that fails as a lock would, then None or (0, 0), then
rows), and a real space gives no such sequence in-process: its count needs a connected
space's worker with its data key, a lock held past the read's busy wait, and a disconnect
between two ticks. The real runs are tests/test_watcher_uncounted.py's (a real lock held
by another process: the owed count pushes once it is let go) and
tests/test_watcher_size_trigger.py's (a real push past the size trigger). The third test
also stands in for the watcher module's clock (it reads 5 s): no test can boot the box
again, and the process's own clock is left alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from chain_machines import anchored, new_machine
from conftest import dated_back, write_store

WAIT = {"timeout": 60, "interval": 0.2}


def _watcher_settings(monkeypatch) -> None:
    """The watcher's timings as these tests mean them, whatever the developer's environment
    holds: a Watcher built here reads the pytest process's (settings.lookup), which
    conftest scrubs of only a few variables. No quiet trigger (the owed count, or the size
    check, alone), no ticks of the watcher's own (the test's are the only ones), the size
    trigger at its default, which 100 rows (400 B each) pass and none do not, and the push
    retry at its default (no push fails here, but every tick reads it)."""
    monkeypatch.setenv("KINT_QUIET_SECONDS", "3600")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "32768")
    monkeypatch.delenv("KINT_PUSH_RETRY_SECONDS", raising=False)


def _owed_watcher(tmp_path, monkeypatch, *then: tuple[int, int] | None):
    """A real Watcher whose start's count failed as a lock would (so the count is owed),
    and whose next counts answer `then`, the last one from there on: (the watcher, the
    pushes it asked for, the times it said the store was clean again, the counts made)."""
    from kint.tenant_worker.unanchored import CountFailed
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    dated_back(db)  # a signature that tells: no look owed for its age
    _watcher_settings(monkeypatch)
    failed = [CountFailed("the store is locked by another process", False)]
    answers = list(then)
    counts: list[int] = []

    def count() -> tuple[int, int] | None:
        counts.append(1)
        if failed:
            raise failed.pop()
        return answers.pop(0) if len(answers) > 1 else answers[0]

    pushed: list[str] = []
    settled: list[int] = []
    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0, settled=lambda: settled.append(1))
    watcher.start()
    assert watcher.dirty and watcher.work_left(0), "the failed start count left no work"
    return watcher, pushed, settled, counts


def test_an_owed_start_count_that_cannot_push_leaves_the_store_clean(tmp_path, monkeypatch):
    """The start's count failed (owed); at the next tick it answers None (the space can no
    longer push): the store is clean and the worker told so (`settled`), with nothing
    pushed, and a tick after it counts nothing more. Left dirty, no count could ever clear
    the mark, and the worker kept off its idle exit and recycle for good."""
    watcher, pushed, settled, counts = _owed_watcher(tmp_path, monkeypatch, None)
    try:
        watcher.tick(time.monotonic())
        assert len(counts) == 2, counts  # the owed count, made in the tick
        assert not watcher.dirty and not watcher.work_left(0), "a mark nothing can clear"
        assert settled == [1] and pushed == []
        watcher.tick(time.monotonic())  # no longer owed: no count without a change
        assert len(counts) == 2 and not watcher.dirty
    finally:
        watcher.stop()


def test_an_owed_start_count_with_nothing_left_leaves_the_store_as_a_start_does(
        tmp_path, monkeypatch):
    """Clean, nothing pushed, and no size check of its own made in that tick: the owed
    count is the start's, so the first change after it has its size checked at once, as
    after a start that counted (the once-a-minute rule runs from the last check, and the
    start made none). Taken as a tick's size check, it put off the next change's for a
    minute, and a change past KINT_SIZE_TRIGGER_BYTES waited for the quiet period."""
    watcher, pushed, settled, counts = _owed_watcher(tmp_path, monkeypatch, (0, 0), (100, 0))
    try:
        watcher.tick(time.monotonic())
        assert len(counts) == 2, counts  # the owed count, not a second diff after it
        assert not watcher.dirty and not watcher.work_left(0)
        assert settled == [1] and pushed == []
        assert watcher.counting.uncounted is None
        write_store(Path(watcher.db), {"more": {"rule": "a change"}})  # a real write
        watcher.tick(time.monotonic())
        assert pushed == ["watcher"], "the change's size was not checked at its first tick"
    finally:
        watcher.stop()


def test_a_watchers_first_size_check_is_due_at_once_whatever_the_clock_reads(
        tmp_path, monkeypatch):
    """The watcher's clock reads 5 s, as the monotonic clock does on a box booted 5 s ago (a
    CI machine, a supervisor the deploy units start at boot): the first change after a start
    that found nothing left has its size checked at its first tick, and one past
    KINT_SIZE_TRIGGER_BYTES is pushed. With "no check yet" taken as a check at 0 s, every
    worker started in the box's first minute put that check off to the clock's 60 s, and the
    change waited for the quiet period. The stand-in is the watcher module's clock alone (its
    `time`), not the process's, which pytest and the threads' waits keep reading."""
    from kint.tenant_worker import watcher as watcher_module
    from kint.tenant_worker.watcher import Watcher

    clock = [5.0]
    monkeypatch.setattr(watcher_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    _watcher_settings(monkeypatch)
    db = str(write_store(tmp_path / "memory.db"))
    dated_back(db)  # a signature that tells: the start's count is kept
    counts: list[tuple[int, int]] = []  # nothing left at the start, 100 rows from there on

    def count() -> tuple[int, int]:
        counts.append((100, 0) if counts else (0, 0))
        return counts[-1]

    pushed: list[str] = []
    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0)
    watcher.start()
    try:
        assert not watcher.dirty and counts == [(0, 0)]  # the start found nothing left
        write_store(Path(db), {"more": {"rule": "a change"}})  # a real write
        clock[0] = 6.0
        watcher.tick(watcher_module.time.monotonic())
        assert len(counts) > 1, "the change's size was not checked at its first tick"
        assert pushed == ["watcher"]
    finally:
        watcher.stop()


def test_a_size_check_put_off_by_a_failed_counts_wait_is_not_used_up(tmp_path):
    """The store dirty and past the quiet period while another process holds the lock:
    the quiet trigger's counts fail, further apart (watcher_count.py). The lock is let go
    just after a failed try, so the next tries are not due yet, and from then on the store
    is written at every tick: only the size check can push. It is pushed within
    RETRY_CAP_TICKS ticks. With the check stamped when the count was put off, it came
    SIZE_CHECK_INTERVAL_S later (61 ticks here). The ticks are the test's own, each 1 s on
    the watcher's clock (`now`); no clock is asserted. Timings by a stand-in (the size
    trigger at 1 byte, below any setting's floor)."""
    from kint.tenant_worker.unanchored import CountFailed
    from kint.tenant_worker.watcher import Watcher
    from kint.tenant_worker.watcher_count import RETRY_CAP_TICKS

    values = {"KINT_QUIET_SECONDS": 30.0, "KINT_POLL_SECONDS": 3600.0,
              "KINT_SIZE_TRIGGER_BYTES": 1.0, "KINT_PUSH_RETRY_SECONDS": 1.0}

    def timing(name: str) -> SimpleNamespace:
        return SimpleNamespace(value=values[name], source="test", described="test")

    db = Path(write_store(tmp_path / "memory.db"))
    dated_back(db, 3600)
    lock = {"held": True}
    tries: list[bool] = []  # each count made: whether the lock met it

    def count() -> tuple[int, int]:
        tries.append(lock["held"])
        if lock["held"]:
            raise CountFailed("the store is locked by another process", False)
        return (100, 0)

    pushed: list[str] = []
    watcher = Watcher(str(db), count, lambda reason: pushed.append(reason) or {},
                      timing=timing, generation=lambda: 0)
    now = time.monotonic()
    write_store(db, {"left": {"rule": "a change"}})
    dated_back(db, 3000)  # a new signature: a change
    tick, made = 0, 0
    while tick < 60 or len(tries) == made:  # past a minute, to a tick that made a try
        tick, made = tick + 1, len(tries)
        watcher.tick(now + tick)
        assert tick < 200 and pushed == []
    assert len(tries) > 8 and all(tries), tries  # every try met the lock
    lock["held"] = False
    for after in range(1, 3 * RETRY_CAP_TICKS):
        write_store(db, {f"change-{after}": {"rule": "a change"}})
        dated_back(db, 2000 - after)  # a new signature at every tick
        watcher.tick(now + tick + after)
        if pushed:
            break
    assert pushed == ["watcher"], tries
    assert after <= RETRY_CAP_TICKS, after


def test_a_mirror_that_does_not_read_is_a_count_that_failed_for_good(tmp_path, chain_home):
    """The space anchored and clean; the mirror garbled before the watcher's start: its
    count fails for good naming the mirror (CORRUPT_STATE is a file to mend), not "cannot
    push", which would have left the store clean over a mirror nothing read. Put back, the
    owed count finds nothing left and the store is clean again, with no write to it."""
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS="1",
                     KINT_QUIET_SECONDS="3600")
    with anchored(sb, first="pushed before"):
        db = sb.sibyl_db
        # The drift baseline is the first attach's read: made while the mirror reads.
        sb.call("attach", db, timeout_s=30, args={"session": "no-watcher", "watcher": False})
        dated_back(db)  # a signature that tells: no look owed for its age
        mirror = sb.kint_home / f"mirror-{sb.row(db)['space']}.json.gz"
        original = mirror.read_bytes()
        mirror.write_bytes(original[: len(original) // 2])
        try:
            attached = sb.call("attach", db, timeout_s=60,
                               args={"session": "watching", "watcher": True})
            assert attached["watcher"] is True
            row = sb.wait_for(lambda: (r := sb.row(db))["watcher_uncounted"] and r,
                              what="the watcher's count failing", **WAIT)
            uncounted = row["watcher_uncounted"]
            assert str(mirror) in uncounted["message"], uncounted
            assert uncounted["lasting"] is True, uncounted
            assert row["work_left"] is True, row  # a session is attached
        finally:
            mirror.write_bytes(original)
        row = sb.wait_for(lambda: (r := sb.row(db))["watcher_uncounted"] is None
                          and r["work_left"] is False and r,
                          what="the owed count finding nothing left", **WAIT)
        assert (row["head"] or {}).get("seq") == 1, row  # nothing pushed: nothing was left
