"""A store another process keeps locked past SQLite's busy wait (a writer in exclusive
locking mode, a long migration) is fine, only taken: the space's status says so (`BUSY`,
try again), as a push does (tests/test_agent_server.py), never INTERNAL with "cannot be
read" and "check the store file", which sends the user to look for a broken file; and
doctor answers, its `sibyl store` row warning of the lock.

Real parts: a real Worker over a real Sibyl store (not serving: the status op is called
on its context), and a real second process holding SQLite's exclusive lock on the store.
Each read's busy wait is a fifth of a second here (`short_busy_waits`): the lock is held
past any wait, so the 2 s and 5 s of the defaults would only be waited out at every read.
"""

from __future__ import annotations

import pytest

from support.locked_store import locked
from support.worker_over import worker_over
from kint.protocol.errors import ProtocolError


@pytest.fixture
def short_busy_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store reads' busy waits (SQLite's timeout on another process's lock) cut to
    0.2 s, in this process, where the worker runs."""
    from kint.rows import export
    from kint.tenant_worker import store

    monkeypatch.setattr(store, "READ_BUSY_WAIT_S", 0.2)
    monkeypatch.setattr(export, "READ_BUSY_WAIT_S", 0.2)


def test_status_of_a_locked_store_is_busy_and_answers_once_it_is_let_go(tmp_path,
                                                                       short_busy_waits):
    from kint.tenant_worker.status import status

    with worker_over(tmp_path) as (worker, db):
        with locked(db):
            with pytest.raises(ProtocolError) as busy:
                status(worker.ctx, {})
        assert busy.value.code == "BUSY", (busy.value.code, busy.value.message)
        assert f"the store {db} is locked by another process" in busy.value.message
        assert "check the store file" not in (busy.value.hint or "")
        assert status(worker.ctx, {})["rows"] is not None  # once it is let go


def test_counts_queued_behind_one_the_lock_refused_do_not_wait_it_out_again(tmp_path):
    """Five statuses of a store another process keeps locked, each count under the
    reader's lock: each waited the whole busy wait in turn (BUSY 2, 4, 6, 8 and 10 s on,
    the ops behind them held). Now one waits it out; those behind it, the store unchanged,
    try with a wait long enough for a write's commit only, and are BUSY too; the lock let
    go, the next count reads the store. The real busy wait (2 s), once: the waits each
    count was given are recorded by a subclass around the real count."""
    import threading

    from conftest import write_store
    from kint.tenant_worker import store
    from kint.tenant_worker.store_errors import StoreLocked

    waits: list[float | None] = []

    class Recorded(store.StoreReader):
        def _count_rows(self, recover: bool = True,
                        wait_s: float | None = None) -> dict[str, int]:
            waits.append(wait_s)
            return super()._count_rows(recover, wait_s)

    db = write_store(tmp_path / "memory.db", tenant="t")
    reader = Recorded(str(db), "t")
    assert reader.facts().rows is not None
    said: list[BaseException] = []

    def count() -> None:
        try:
            reader.facts()
        except BaseException as err:  # noqa: BLE001 - what each count said, looked at below
            said.append(err)

    with locked(db):
        counts = [threading.Thread(target=count) for _ in range(5)]
        for thread in counts:
            thread.start()
        for thread in counts:
            thread.join(60)
    assert len(said) == 5 and all(isinstance(e, StoreLocked) for e in said), said
    assert waits[1:] == [None] + [store.REFUSED_AGAIN_WAIT_S] * 4, waits
    assert reader.facts().rows is not None  # let go: read, within that window or past it


def test_doctor_over_a_locked_store_answers_and_says_it_is_locked(tmp_path, short_busy_waits):
    """Doctor counts the store's changes itself: a store locked past the busy wait failed
    the whole op (sqlite3's own error, which only "does not read" errors were caught
    beside), where its rows should say why they are not counted, and the rest answer."""
    from kint.tenant_worker.doctor import doctor

    with worker_over(tmp_path) as (worker, db):
        with locked(db):
            checks = {c["name"]: c for c in doctor(worker.ctx, {})["checks"]}
        store = checks["sibyl store"]
        assert store["ok"] and store.get("warn"), store
        assert f"the store {db} is locked by another process" in store["detail"], store
        assert "disk space" in checks and "state files" in checks
        checks = {c["name"]: c for c in doctor(worker.ctx, {})["checks"]}
        assert checks["sibyl store"]["ok"] and not checks["sibyl store"].get("warn")


def test_a_read_that_fails_outside_the_file_is_not_held_as_an_unreadable_store(tmp_path,
                                                                              caplog):
    """A push takes a store read that failed as "store unreadable", a hold for a human, only
    when SQLite says the file itself cannot be read (corrupt, not a database, not to be
    opened or read: tests/test_agent_server.py holds over one). A store whose schema is not
    the one kint reads (a column renamed, as another Sibyl version might) fails with
    SQLITE_ERROR: it is refused as that error, nothing held, nothing sent to
    `--discard-local`; it used to be held like a corrupt file."""
    import sqlite3
    from contextlib import closing

    from kint.tenant_worker.push_refusals import _store_rows

    with worker_over(tmp_path) as (worker, db):
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("ALTER TABLE entities RENAME COLUMN body TO body_v2")
            conn.commit()
        for hold_reason in ("tool", None):
            caplog.clear()
            with pytest.raises(ProtocolError) as refused:
                _store_rows(worker.ctx, hold_reason)
            err = refused.value
            # The hint sends a user to the supervisor log: the failed read is there, with
            # where it failed (it was not logged at all).
            assert "the supervisor log has the details" in (err.hint or ""), err.hint
            logged = [r for r in caplog.records if r.name == "kint.worker"
                      and f"reading the store {db} failed (SQLITE_ERROR: " in r.getMessage()]
            assert logged and logged[0].exc_info is not None, caplog.text
            assert err.code == "INTERNAL", (err.code, err.message)
            assert err.message.startswith(f"store {db} cannot be read: no such column: body "
                                          f"(SQLITE_ERROR, code 1)"), err.message
            assert "nothing was anchored" in err.message
            assert "--discard-local" not in (err.hint or "") and "not a damaged store" in \
                (err.hint or ""), err.hint
        assert worker.ctx.drift.held is None  # nothing waits for a human


def test_is_damaged_tells_the_file_from_the_rest():
    """The codes that say a store's file cannot be read, by SQLite's own errors: a file that
    is not a database is damaged; a lock and a missing column are not."""
    import sqlite3
    import tempfile
    from pathlib import Path

    from kint.tenant_worker.store_errors import is_damaged

    with tempfile.TemporaryDirectory() as folder:
        junk = Path(folder) / "junk.db"
        junk.write_bytes(b"not a database at all " * 400)
        conn = sqlite3.connect(f"file:{junk}?mode=ro", uri=True)
        with pytest.raises(sqlite3.DatabaseError) as notadb:
            conn.execute("select * from sqlite_master").fetchall()
        conn.close()
        assert is_damaged(notadb.value), notadb.value.sqlite_errorname
        good = sqlite3.connect(":memory:")
        good.execute("create table t (x)")
        with pytest.raises(sqlite3.OperationalError) as column:
            good.execute("select y from t")
        assert not is_damaged(column.value), column.value.sqlite_errorname


def _sqlite_full() -> Exception:
    """A real SQLITE_FULL from SQLite itself: a database allowed one page, made to grow."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA max_page_count=2")
    conn.execute("create table t (x)")
    try:
        conn.execute("insert into t values (?)", (b"\0" * 65536,))
    except sqlite3.DatabaseError as err:
        return err
    finally:
        conn.close()
    raise AssertionError("SQLite let a database of two pages grow")


def test_a_store_read_over_a_full_disk_is_disk_full_for_the_watcher_and_the_exit_push(
        tmp_path, monkeypatch, caplog):
    """A push whose store read meets a full disk re-raises SQLite's error for
    state_health.guarded to name (push_refusals._store_rows). A push from a request goes
    through guarded; the watcher's and the exit push did not, so the watcher recorded it
    as INTERNAL with a traceback. Both now answer DISK_FULL naming the store.

    The store read is the real `_store_rows`, its error a real SQLITE_FULL from SQLite; only
    the moment is staged (ctx.store_rows raises it, and the push stands in for the chain
    steps before that read), since a read of a store on a full disk does not meet SQLITE_FULL
    at a moment a test can choose (tests/test_pull_disk_full.py fills a real disk for the
    writes)."""
    import logging
    import os
    import time

    from kint.tenant_worker import push as push_mod
    from kint.tenant_worker import sessions
    from kint.tenant_worker.push_refusals import _store_rows
    from kint.tenant_worker.state_health import store_full
    from kint.tenant_worker.watcher import Watcher

    full = _sqlite_full()
    assert store_full(full), full

    def read_full() -> None:
        raise full

    with worker_over(tmp_path) as (worker, db):
        ctx = worker.ctx
        monkeypatch.setattr(ctx, "store_rows", read_full)
        # The push's read of the rows alone, whatever the push is given (server_push
        # passes the exit push's bound and the stop's refusal).
        monkeypatch.setattr(push_mod, "push",
                            lambda c, args, **_given: _store_rows(c, args["hold_reason"]))
        with pytest.raises(ProtocolError) as refused:
            sessions.server_push(ctx, "watcher")
        assert refused.value.code == "DISK_FULL", refused.value
        assert f"Sibyl's store {db}" in refused.value.message

        monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
        watcher = Watcher(str(db), lambda: (1, 0),
                          lambda reason: sessions.server_push(ctx, reason))
        caplog.set_level(logging.INFO, logger="kint.worker")
        os.utime(db, ns=(time.time_ns(), time.time_ns() + 10**9))  # a store change
        watcher.tick(time.monotonic())
        failure = watcher.backoff.failure
        assert failure is not None and failure.code == "DISK_FULL", failure
        assert f"Sibyl's store {db}" in failure.message
        assert "watcher push failed" not in caplog.text  # no traceback: not a bug

        with pytest.raises(ProtocolError) as exit_refused:
            sessions.exit_push(ctx, {})
        assert exit_refused.value.code == "DISK_FULL"
        assert "exit push not made (DISK_FULL)" in caplog.text, caplog.text


def test_any_op_that_meets_the_lock_is_busy_naming_the_store_never_internal(
        tmp_path, short_busy_waits):
    """Only the push and the status caught the lock themselves: a pull's read of the store
    (its fork check), a rekey's or a discard's restore writing through Sibyl, any other op's
    read came out of the worker as INTERNAL, "a bug in kint". The worker's wrapper round
    every op (state_health.guarded) says BUSY, naming the store and the lock, with the op's
    own words to run it again, whether SQLite's error comes bare, inside Sibyl's
    StorageError (its writes) or as a count's StoreLocked. Real lock, real read; the ops
    are stood in for by handlers that read the store as the real ones do
    (tests/test_agent_server.py runs a real pull)."""
    from sibyl_memory_client.exceptions import StorageError

    from kint.protocol.hints import (STORE_LOCKED_HINT, STORE_LOCKED_PULL_HINT,
                                     STORE_LOCKED_PUSH_HINT)
    from kint.tenant_worker.state_health import guarded

    def read(ctx, args):
        return {"rows": len(ctx.store_rows() or [])}

    def count(ctx, args):  # store_errors.unreadable's StoreLocked, as a count raises it
        return {"rows": ctx.store.facts().rows}

    def sibyl_write(ctx, args):
        try:
            ctx.store_rows()
        except Exception as err:
            raise StorageError("write failed") from err
        return {}

    hints = {"pull": STORE_LOCKED_PULL_HINT, "push": STORE_LOCKED_PUSH_HINT,
             "rekey": STORE_LOCKED_HINT, "history": STORE_LOCKED_HINT}
    with worker_over(tmp_path) as (worker, db):
        with locked(db):
            for op, hint in hints.items():
                for handler in (read, count, sibyl_write):
                    with pytest.raises(ProtocolError) as busy:
                        guarded(op, handler)(worker.ctx, {})
                    said = busy.value
                    assert (said.code, said.hint) == ("BUSY", hint), (op, said.code, said.hint)
                    assert said.message.startswith(f"the store {db} is locked by another "
                                                   f"process (database is locked"), said.message
        assert guarded("pull", read)(worker.ctx, {})["rows"] >= 0  # let go: it reads


def test_a_discard_over_a_locked_store_is_refused_whether_its_holder_is_seen_or_not(
        tmp_path, short_busy_waits, monkeypatch):
    """A discard counts the store's tenants before it moves the file; a count the lock
    refused was taken for a store nobody can read, and let through: only the look for
    other processes holding the store stopped the move, and where that look sees nothing
    (another user's process, a Mac without lsof: store_holders.py) the store was moved
    aside under its writer. Refused BUSY: naming the holder's pid where it is seen, the
    lock where it is not. The look that sees nothing is stood in for (here /proc sees it)."""
    from kint.protocol.hints import STORE_LOCKED_PULL_HINT
    from kint.tenant_worker import store_holders
    from kint.tenant_worker.discard import refuse_to_move

    with worker_over(tmp_path) as (worker, db):
        with locked(db):
            with pytest.raises(ProtocolError) as seen:
                refuse_to_move(worker.ctx)
            assert seen.value.code == "BUSY" and "open in 1 other process" in \
                seen.value.message, seen.value.message
            monkeypatch.setattr(store_holders, "other_holders", lambda db, named=None: [])
            with pytest.raises(ProtocolError) as unseen:
                refuse_to_move(worker.ctx)
        said = unseen.value
        assert (said.code, said.hint) == ("BUSY", STORE_LOCKED_PULL_HINT), said.message
        assert said.message.startswith(f"the store {db} is locked by another process")
        assert said.message.endswith("; nothing was moved"), said.message
        assert db.exists()
        refuse_to_move(worker.ctx)  # let go, and nobody holds it: the move may go ahead


def test_export_of_a_locked_store_is_busy_not_a_store_to_check(tmp_path, short_busy_waits,
                                                              monkeypatch):
    """`kint export` read a locked store's refusal as "cannot be read" (SIBYL_ERROR), its
    hint to check the user's permission and that it is Sibyl's store: it is BUSY, to run
    again once the writer lets go. Real lock, the command run in this process."""
    from click.testing import CliRunner

    from conftest import write_store
    from kint.commands.common import Ctx
    from kint.commands.export import export_cmd

    db = write_store(tmp_path / "memory.db", tenant="t")
    monkeypatch.setenv("KINT_TENANT", "t")
    with locked(db):
        out = CliRunner().invoke(export_cmd, [], obj=Ctx(None, str(db), False))
    said = out.stderr if hasattr(out, "stderr") else out.output
    assert out.exit_code == 2, said
    assert f"the store {db} is locked by another process" in said and "[BUSY]" in said, said
    assert "hint: run kint export again once the other writer lets go of the store" in said
    out = CliRunner().invoke(export_cmd, [], obj=Ctx(None, str(db), False))
    assert out.exit_code == 0, out.output
