"""A store the watcher cannot count (kint/tenant_worker/watcher.py, `_counted`,
`_start_count`, `work_left`): not read as clean, and not work that holds the worker for good.

- The start's count of what an earlier session left unanchored met the store locked by
  another process (its read waits out the busy timeout, then fails). It was taken as a
  store with nothing to push, so those rows waited for the next write. The count is now
  owed and made again (further apart while it fails: tests/test_watcher_count_backoff.py):
  once the lock is let go, the rows are pushed with no write to the store (the lock leaves
  the store's files as they were).
- A dirty store that can never be counted (its file no longer a database) kept the beat's
  `has_work` true for good, so the supervisor never stopped the worker as idle (nor
  recycled it for its memory: the same check). It now stops it once no session is
  attached, and meanwhile `kint supervisor status` (its `--json` and the line under its
  table) and the log name the store and the error. With a session attached it still holds
  off a recycle: the successor's start refuses a store that is no database, and the
  session's space was restarted into quarantine.
- A count that fails for a moment (another process's lock held past the busy wait) is not
  such a store: taken as one, it let the idle stop take a dirty store whose rows no session
  was left to push. The worker keeps it until it is counted and pushed.

Real parts: the devchain's anvil, the test supervisor and the space's worker, a real
watcher started by a session's `attach`, a real SQLite lock held by another process
(tests/support/locked_store.py) and a store file overwritten for real.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import pytest

from chain_machines import anchored, new_machine, ok
from conftest import dated_back, write_rules, write_store
from support.locked_store import locked

WAIT = {"timeout": 60, "interval": 0.2}
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the memory figure comes from /proc/self/smaps_rollup")


def _log_lines(sb) -> list[str]:
    return (sb.kint_home / "supervisor.log").read_text().splitlines()


def _journal_mode(db, mode: str | None = None) -> str:
    """The store's journal mode, set to `mode` first when given (no other connection open)."""
    with closing(sqlite3.connect(db)) as conn:
        if mode is not None:
            conn.execute(f"PRAGMA journal_mode={mode}")
        return conn.execute("PRAGMA journal_mode").fetchone()[0]


@contextmanager
def _left_unanchored(tmp_path, chain_home, **env: str) -> Iterator[tuple]:
    """A machine (polling every second, `env` besides) whose store holds a row written
    before it connects (none anchored, so none is drift that would hold a push), in
    rollback-journal mode with the lock's own table made: (the machine, the store),
    stopped on the way out."""
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS="1", **env)
    db = sb.sibyl_db
    try:
        write_rules(db, sb.tenant, left="left unanchored by an earlier session")
        assert _journal_mode(db, "DELETE") == "delete"
        with locked(db):
            pass  # the lock's own table made once, so that taking the lock writes nothing
        yield sb, db
        assert _journal_mode(db) == "delete"  # the premise held throughout
    finally:
        sb.shutdown()


def test_a_start_count_that_meets_a_lock_pushes_the_rows_once_it_is_let_go(tmp_path,
                                                                           chain_home):
    """The rows are the store's before this machine connected (its mirror empty at seq 0):
    all of them unanchored. The store is in rollback-journal mode, where another process's
    exclusive lock keeps out even the worker's connections already open (in WAL mode an
    open reader's shared lock refuses the lock itself); nothing of kint's changes the
    mode (it opens the store read-only; Sibyl's client would set WAL, and none writes).
    The worker's reads wait half a second on the lock, not SQLite's 2 s busy timeout
    (KINT_TEST_STORE_BUSY_WAIT_S, tests/support/kint_test_timings.py): the start's count
    that meets it fails all the same, sooner."""
    with _left_unanchored(tmp_path, chain_home, KINT_QUIET_SECONDS="0",
                          KINT_TEST_STORE_BUSY_WAIT_S="0.5") as (sb, db):
        dated_back(db)  # a signature that tells: no look owed for its age
        sb.call("connect", db, args={"dev": True}, timeout_s=300)
        # The drift baseline is the first attach's read of the store: made before the lock.
        sb.call("attach", db, timeout_s=30, args={"session": "no-watcher", "watcher": False})
        with locked(db):
            attached = sb.call("attach", db, timeout_s=60,
                               args={"session": "watching", "watcher": True})
            assert attached["watcher"] is True
            assert any("watcher: what an earlier session left unanchored could not be "
                       "counted" in line for line in _log_lines(sb)), _log_lines(sb)[-20:]
        # No write since: the rows are pushed once the count can be made.
        row = sb.wait_for(lambda: ((r := sb.row(db))["head"] or {}).get("seq") == 1 and r,
                          what="the rows left unanchored pushed after the lock", **WAIT)
        assert row["watcher_uncounted"] is None, row
        lines = _log_lines(sb)
        assert any("0 deleted row(s) were left unanchored by an earlier session" in line
                   for line in lines), lines[-20:]
        status = sb.call("status", db, args={"chain": True})
        assert status["unanchored"] == 0, status


def test_a_count_that_meets_a_lock_keeps_the_dirty_store_the_workers(tmp_path, chain_home):
    """Rows left unanchored (none pushed yet, so none is drift that would hold the push),
    a session that attached and left, and the watcher's count meeting another process's
    lock: the worker, past its idle period and held only by its dirty store, was
    stopped at the next beat, and the rows waited for the next session. The beat that says
    the count failed says the store is still work, and once the lock is let go the rows are
    pushed, by the same worker, before its idle stop. The store is in rollback-journal
    mode, as in the first test (the lock keeps out the worker's open connections too)."""
    with _left_unanchored(tmp_path, chain_home, KINT_QUIET_SECONDS="12",
                          KINT_WORKER_IDLE_SECONDS="3") as (sb, db):
        sb.call("connect", db, args={"dev": True}, timeout_s=300)
        sb.call("attach", db, timeout_s=30, args={"session": "watching", "watcher": True})
        pid = sb.row(db)["pid"]
        sb.wait_for(lambda: sb.row(db)["work_left"], what="the rows counted", **WAIT)
        sb.call("detach", db, args={"session": "watching"})  # the idle period runs from here
        # Taken well inside the quiet period: the watcher's next count meets it (a size
        # check's, else the quiet period's push's).
        with locked(db):
            row = sb.wait_for(lambda: (r := sb.row(db))["watcher_uncounted"] and r,
                              what="the watcher's count failing", **WAIT)
            assert "locked by another process" in row["watcher_uncounted"]["message"], row
            assert row["watcher_uncounted"]["lasting"] is False, row
            assert row["work_left"] is True and row["pid"] == pid, row
            shown = ok(sb.kint("supervisor", "status")).stdout
            assert "the worker keeps the store (no idle stop, no recycle)" in shown, shown
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="the rows pushed once the lock is let go", **WAIT)
        assert any(f"{pid} kint.worker" in line and "watcher: anchored 1 row change(s)" in line
                   for line in _log_lines(sb)), _log_lines(sb)[-20:]
        sb.wait_for(lambda: sb.row(db)["pid"] is None, what="the idle stop", **WAIT)


def test_an_owed_count_that_succeeds_is_the_one_its_push_goes_on(tmp_path, monkeypatch):
    """The start's count failed and is owed; the tick that makes it finds rows past the
    quiet period and pushes on that count, where the push diffed the whole store again in
    the same tick. A real Watcher over a real store; stand-ins: the count (it fails once
    as a lock would: the lock itself is the tests' above) and the push (it records)."""
    from kint.tenant_worker.unanchored import CountFailed
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    dated_back(db)  # a signature that tells: no look owed for its age
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_POLL_SECONDS", "3600")  # the watcher's own ticks: none here
    answers: list = [CountFailed("the store is locked by another process", False)]
    counts: list[int] = []

    def count() -> tuple[int, int]:
        counts.append(1)
        if answers:
            raise answers.pop()
        return (1, 0)

    pushed: list[str] = []
    watcher = Watcher(db, count, lambda reason: pushed.append(reason) or {},
                      generation=lambda: 0)
    watcher.start()
    try:
        assert len(counts) == 1 and watcher.work_left(0), "the failed count's store no work"
        watcher.tick(time.monotonic())
        assert pushed == ["watcher"] and not watcher.dirty
        assert len(counts) == 2, f"{len(counts) - 1} counts in the tick that pushed"
    finally:
        watcher.stop()


def _recycle_limit(sb, mib: int) -> None:
    """KINT_WORKER_RECYCLE_MIB in config.toml, as a user sets it, read by the supervisor at
    once (0: no recycle)."""
    sb._config_file(f"worker_recycle_mib = {mib}\n")
    sb.call("sup.reload")


@contextmanager
def _uncountable(tmp_path, chain_home, recycle_mib: int,
                 **env: str) -> Iterator[tuple]:
    """A connected machine whose store, watched by an attached session's watcher, is
    overwritten with bytes that are no database: (the machine, the store, the worker's pid,
    the status row once it says the count fails). Its KINT_WORKER_RECYCLE_MIB is
    `recycle_mib` in config.toml (the default, 22 MiB, is about what a worker holds: a
    recycle could come first, whatever the test looks at)."""
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS="1",
                     KINT_QUIET_SECONDS="0", **env)
    _recycle_limit(sb, recycle_mib)
    with anchored(sb, first="pushed before"):
        db = sb.sibyl_db
        sb.call("attach", db, timeout_s=30, args={"session": "watching", "watcher": True})
        pid = sb.row(db)["pid"]
        for leftover in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            leftover.unlink(missing_ok=True)
        db.write_bytes(b"not a database any more " * 4096)  # a change: the store is dirty
        try:
            row = sb.wait_for(lambda: (r := sb.row(db))["watcher_uncounted"] and r,
                              what="the watcher's count failing in the status", **WAIT)
        except AssertionError as err:  # what the worker said, for the failure to show
            said = [line for line in _log_lines(sb) if f" {pid} " in line]
            raise AssertionError(f"{err}\n" + "\n".join(said[-40:])) from None
        yield sb, db, pid, row


def test_a_store_that_cannot_be_counted_keeps_no_idle_stop_waiting(tmp_path, chain_home):
    with _uncountable(tmp_path, chain_home, 0, KINT_WORKER_IDLE_SECONDS="2") as (sb, db, pid,
                                                                                  row):
        message = row["watcher_uncounted"]["message"]
        assert str(db) in message and "file is not a database" in message, row
        assert row["watcher_uncounted"]["lasting"] is True, row
        # Dirty, but no work this worker can finish: held only while a session is attached.
        assert row["work_left"] is True, row
        shown = ok(sb.kint("supervisor", "status")).stdout
        assert f"watcher of {row['space']}: cannot count the store's unanchored rows" in shown
        assert str(db) in shown, shown
        as_json = json.loads(ok(sb.kint("supervisor", "status", "--json")).stdout)
        assert [s["watcher_uncounted"]["message"] for s in as_json["spaces"]] == [message]
        assert any("watcher: cannot count unanchored rows (StoreUnreadable: store "
                   f"{db}" in line for line in _log_lines(sb)), _log_lines(sb)[-20:]

        # Once its session leaves, the worker goes idle and is stopped, where it ran on.
        sb.call("detach", db, args={"session": "watching"})
        sb.wait_for(lambda: sb.row(db)["work_left"] is False or sb.row(db)["pid"] is None,
                    what="the store no work once the session left", **WAIT)
        sb.wait_for(lambda: sb.row(db)["pid"] is None, what="the idle stop", **WAIT)
        assert any(f"{pid} kint.worker" in line and "stop requested (idle)" in line
                   for line in _log_lines(sb)), _log_lines(sb)[-20:]


def _beats(sb, db, pid: int, count: int) -> list[dict]:
    """The next `count` beats' rows of worker `pid` (each a beat of its own: the moment
    it came, as of the worker's start, differs), or fewer when it is gone first."""
    rows: dict[float, dict] = {}

    def seen() -> bool:
        row = sb.row(db)
        if row["pid"] != pid:
            return True
        if row["last_beat_age_s"] is not None:
            rows.setdefault(round(row["uptime_s"] - row["last_beat_age_s"], 1), row)
        return len(rows) > count

    sb.wait_for(seen, what=f"{count} beats of worker {pid}", **WAIT)
    return list(rows.values())[1:]  # the first may be from before the caller's change


@linux_only
def test_a_store_that_cannot_be_counted_keeps_a_recycle_waiting_only_for_a_session(
        tmp_path, chain_home):
    """Over KINT_WORKER_RECYCLE_MIB with a session attached, the worker keeps serving it:
    a recycle handed the session to a successor whose start refuses a store that is no
    database, restarted six times in a second and quarantined. Once the session leaves,
    the recycle stops the worker, and no successor is started for it."""
    with _uncountable(tmp_path, chain_home, 0, KINT_TEST_QUIET_SECONDS="1") as (sb, db, pid,
                                                                                 row):
        assert row["sessions"] == 1, row
        _recycle_limit(sb, 1)
        beats = _beats(sb, db, pid, 3)
        assert len(beats) == 3 and all(b["work_left"] is True for b in beats), beats
        assert any((b["memory_mib"] or 0) > 1 for b in beats), beats  # over the limit
        assert not any(f"worker {pid} holds" in line for line in _log_lines(sb))
        sb.call("detach", db, args={"session": "watching"})
        sb.wait_for(lambda: any(f"worker {pid} holds" in line for line in _log_lines(sb)),
                    what="the worker recycled for its memory", **WAIT)
        assert any(f"{pid} kint.worker" in line and "stop requested (recycle)" in line
                   for line in _log_lines(sb)), _log_lines(sb)[-20:]
        row = sb.wait_for(lambda: (r := sb.row(db))["pid"] is None and r,
                          what="the recycled worker gone", **WAIT)
        assert row["state"] != "quarantined" and row["restarts"] == 0, row
        assert not any("cannot start" in line for line in _log_lines(sb)), _log_lines(sb)[-20:]


def test_memory_status_names_what_the_watcher_cannot_count():
    """The tool's description names `watcher_uncounted` and each of its fields, as it
    names every other of the watcher's: the agent reads what a field means there."""
    from kint.agent_server.tools import STATUS
    from kint.tenant_worker.watcher_count import Uncounted, WatcherCount

    counting = WatcherCount(lambda: None)
    counting.uncounted = Uncounted("the store is locked", 0.0, False)
    assert "`watcher_uncounted`" in STATUS
    for field in counting.for_beat(1.0) or {}:
        assert f"`{field}`" in STATUS, field
