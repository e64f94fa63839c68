"""The store watcher's count while it cannot be made, and while the space cannot push
(kint/tenant_worker/watcher_count.py, kint/tenant_worker/watcher.py `work_left`).

- A count that keeps meeting another process's lock (the start's, owed) was made again
  at every tick, each try holding the watcher's thread in the read's busy wait (2 s by
  default) for as long as the lock was held. It is now tried 1, 2, 4, then every
  RETRY_CAP_TICKS ticks on, and once the lock is let go the rows are counted and pushed
  within RETRY_CAP_TICKS ticks, with no write to the store.
- A dirty store the space cannot push from (no cached data key: the count answers None)
  kept the beat's `has_work` true for good, the store changing or not, so the idle stop
  never came for a worker no session used. It now idles out while the store keeps
  changing; the next session that can push pushes the rows.

Real parts: the devchain's anvil, the test supervisor and the space's worker, a real
watcher started by a session's `attach`, a real SQLite lock held by another process
(tests/support/locked_store.py), the data key's cache file moved aside for real and the
store written through Sibyl's own client. The ticks and counts are read from the worker's
trace (tests/support/kint_test_trace.py): no clock is read.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from chain_machines import anchored, new_machine
from conftest import dated_back, write_rules
from support.locked_store import locked

WAIT = {"timeout": 60, "interval": 0.1}
FAST_POLL = {"KINT_POLL_SECONDS": "0.25", "KINT_TEST_POLL_MINIMUM_S": "0.25"}
LOCKED_TICKS = 16  # enough for the tries to reach their cap and keep to it


def _trace(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _tick_gaps(lines: list[str]) -> list[int]:
    """The ticks from each count of `lines` to the next (the start's count comes before
    any tick)."""
    gaps, ticks, seen = [], 0, False
    for line in lines:
        if line == "tick":
            ticks += 1
        elif line.startswith("count"):
            if seen:
                gaps.append(ticks)
            seen, ticks = True, 0
    return gaps


def test_a_count_that_keeps_meeting_a_lock_is_tried_further_apart(tmp_path, chain_home):
    """The rows are the store's before the machine connected, all unanchored; the store is
    in rollback-journal mode, where another process's exclusive lock keeps out the
    worker's open connections too (tests/test_watcher_uncounted.py). The watcher's start
    meets the lock: every try while it is held fails, and they come further apart."""
    from kint.tenant_worker.watcher_count import RETRY_CAP_TICKS

    trace = tmp_path / "watcher.trace"
    sb = new_machine(tmp_path / "machine", chain_home, KINT_QUIET_SECONDS="0",
                     KINT_TEST_STORE_BUSY_WAIT_S="0.2", KINT_TEST_WATCHER_TRACE=str(trace),
                     **FAST_POLL)
    db = sb.sibyl_db
    try:
        write_rules(db, sb.tenant, left="left unanchored by an earlier session")
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
        with locked(db):
            pass  # the lock's own table made once, so that taking the lock writes nothing
        dated_back(db)  # a signature that tells: no look owed for its age
        sb.call("connect", db, args={"dev": True}, timeout_s=300)
        sb.call("attach", db, timeout_s=30, args={"session": "no-watcher", "watcher": False})
        with locked(db):
            sb.call("attach", db, timeout_s=60, args={"session": "watching", "watcher": True})
            held = sb.wait_for(lambda: (t := _trace(trace)).count("tick") >= LOCKED_TICKS
                               and t, what=f"{LOCKED_TICKS} ticks under the lock", **WAIT)
        assert {line for line in held if line.startswith("count")} == {"count failed"}, held
        gaps = _tick_gaps(held)
        assert len(gaps) >= 4, held
        # 1, 2, 4, 4...: at every tick (all 1) before the change.
        assert gaps == [min(2 ** n, RETRY_CAP_TICKS) for n in range(len(gaps))], gaps

        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="the rows pushed once the lock is let go", **WAIT)
        # The first count that could be made after the last that met the lock: the try
        # after it, no more than the cap's ticks on. Read over the whole trace, not from
        # the moment the lock was let go, which a try made before this thread read the
        # trace would have landed ahead of.
        lines = _trace(trace)
        last_failed = len(lines) - 1 - lines[::-1].index("count failed")
        after = lines[last_failed + 1:]
        assert "count ok" in after, after
        ticks = after[:after.index("count ok")].count("tick")
        assert ticks <= RETRY_CAP_TICKS, after  # the push no later than the cap
    finally:
        sb.shutdown()


def test_a_store_the_space_cannot_push_from_keeps_no_idle_stop_waiting(tmp_path, chain_home):
    """The space anchored; its data key's cache moved aside (as one that expired is none):
    the watcher's count answers None. The store changes after its session left, and keeps
    changing, yet the worker is stopped idle; the rows stay for a session that can push:
    with the key back, the next session's worker counts them at its start and pushes them
    (seq 2), with no write to the store."""
    sb = new_machine(tmp_path / "machine", chain_home, KINT_QUIET_SECONDS="1",
                     KINT_WORKER_IDLE_SECONDS="2", **FAST_POLL)
    with anchored(sb, first="pushed before"):
        db = sb.sibyl_db
        row = sb.row(db)
        cache = sb.kint_home / f"vault-{row['space']}.aes"
        cache.rename(cache.with_name(cache.name + ".aside"))
        sb.call("attach", db, timeout_s=30, args={"session": "watching", "watcher": True})
        pid = sb.row(db)["pid"]
        sb.call("detach", db, args={"session": "watching"})  # the idle period runs from here
        written = []

        def stopped_while_written() -> bool:
            written.append(len(written))
            write_rules(db, sb.tenant, **{f"change-{len(written)}": "a change"})
            return sb.row(db)["pid"] is None

        sb.wait_for(stopped_while_written, what="the idle stop while the store changes",
                    timeout=60, interval=0.3)
        lines = (sb.kint_home / "supervisor.log").read_text().splitlines()
        assert any(f"{pid} kint.worker" in line and "stop requested (idle)" in line
                   for line in lines), lines[-20:]
        assert len(written) > 1, written
        assert (sb.row(db)["head"] or {}).get("seq") == 1  # nothing pushed without a key

        cache.with_name(cache.name + ".aside").rename(cache)  # the key back
        sb.call("attach", db, timeout_s=60, args={"session": "again", "watcher": True})
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the rows pushed by the next session's watcher", **WAIT)


def test_the_data_key_back_makes_a_dirty_store_work_again_at_the_next_ticks(
        tmp_path, chain_home):
    """A dirty store the space cannot push from (the data key's cache moved aside) is no
    work once no session is attached. The key back makes it work again at once, with no
    count: `cannot_push` was cleared only by the next count, which before the quiet period
    is the size check's, once a minute, and meanwhile the idle stop could take rows the
    worker could push. The beat shows it within a few ticks (KINT_QUIET_SECONDS and
    KINT_WORKER_IDLE_SECONDS far off: no quiet trigger counts, no idle stop comes)."""
    trace = tmp_path / "watcher.trace"
    sb = new_machine(tmp_path / "machine", chain_home, KINT_QUIET_SECONDS="600",
                     KINT_WORKER_IDLE_SECONDS="600", KINT_TEST_WATCHER_TRACE=str(trace),
                     **FAST_POLL)
    with anchored(sb, first="pushed before"):
        db = sb.sibyl_db
        cache = sb.kint_home / f"vault-{sb.row(db)['space']}.aes"
        aside = cache.with_name(cache.name + ".aside")
        cache.rename(aside)
        sb.call("attach", db, timeout_s=30, args={"session": "watching", "watcher": True})
        counted = len(_trace(trace))
        write_rules(db, sb.tenant, second="written while no key is cached")
        # The write's first tick makes the size check (the first is due at once): None.
        sb.wait_for(lambda: "count ok" in _trace(trace)[counted:],
                    what="the size check after the write", **WAIT)
        sb.call("detach", db, args={"session": "watching"})
        sb.wait_for(lambda: sb.row(db)["work_left"] is False,
                    what="the store no work without its key", **WAIT)

        aside.rename(cache)  # the key back
        back = len(_trace(trace))
        # Forty ticks (ten seconds): past the beats' idle cadence (3 s at most), well
        # short of the next size check (a minute after the last).
        sb.wait_for(lambda: sb.row(db)["work_left"]
                    or _trace(trace)[back:].count("tick") >= 40,
                    what="the beat after the key's return", **WAIT)
        assert sb.row(db)["work_left"] is True
        assert "count ok" not in _trace(trace)[back:]  # no count made it so
