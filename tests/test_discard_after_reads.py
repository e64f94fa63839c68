"""`kint pull --discard-local` after `kint status` and `kint verify` calls served by the
same worker leaves one backup file, as docs/commands.md promises: the store with every row
it held, and no `-wal` or `-shm` beside it. The worker keeps a read-only connection to the
store on each thread that read it (calls that overlap run on more than one of its op
threads), and the pull closed only its own thread's: while another stayed open SQLite kept
the `-wal` (emptied by the checkpoint) and the `-shm`, which the discard then moved aside
as two more backups. The calls here are sent at once, so that they overlap.

A real anvil, the machine's real supervisor and worker, a real Sibyl store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from chain_machines import anchored, new_machine, ok
from conftest import KINT, write_rules

RULE = "every release needs a green deadlift test"
READS = (["status"], ["verify", "release"], ["verify", "local"], ["status"])


def test_a_discard_after_overlapping_reads_leaves_one_backup_file(tmp_path, chain_home):
    with anchored(new_machine(tmp_path / "m", chain_home), release=RULE) as m:
        # An unanchored row, so the store has a WAL with something in it at the discard.
        write_rules(m.sibyl_db, m.tenant, local="written here, never anchored")
        calls = [subprocess.Popen([KINT, *argv], env=m.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for argv in READS]
        for call in calls:  # verify's decision (refuse on the unanchored row) is no matter
            assert call.wait(timeout=90) in (0, 1), call.stderr.read()
            call.stderr.close()
        backups = json.loads(ok(m.kint("pull", "--discard-local", "--json")).stdout)["backups"]
        store = Path(m.sibyl_db)
        assert len(backups) == 1 and backups[0].startswith(f"{store}.kint-backup-"), backups
        beside = sorted(p.name for p in store.parent.iterdir()
                        if p.name.startswith(f"{store.name}.kint-backup-"))
        assert beside == [Path(backups[0]).name], beside
        with closing(sqlite3.connect(f"file:{backups[0]}?mode=ro", uri=True)) as kept:
            names = {r[0] for r in kept.execute("select name from entities")}
        assert {"release", "local"} <= names, names


def test_a_connection_another_thread_reads_through_is_not_closed_under_it(tmp_path):
    """The discard closes the worker's idle readers only: one an op is reading through on
    another thread at that moment stays open for it (the discard then moves the `-wal` and
    `-shm` aside with the store), and kept by that thread until a later close finds it
    idle. Real SQLite connections on real threads."""
    import threading

    from kint.rows.export import connect_ro
    from kint.tenant_worker.store_readers import StoreReaders

    db = tmp_path / "memory.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("create table t (x)")
    readers = StoreReaders(lambda: connect_ro(str(db)))
    store = (1, 1)
    inside, leave = threading.Event(), threading.Event()
    seen: list[sqlite3.Connection] = []

    def op() -> None:
        with readers.reading(store) as conn:
            seen.append(conn)
            inside.set()
            leave.wait(10)
            conn.execute("select count(*) from t").fetchone()  # still open under it
        with readers.reading(store) as conn:  # left open: the same one
            seen.append(conn)
            conn.execute("select count(*) from t").fetchone()

    with readers.reading(store) as idle:  # this thread's, idle once the block ends
        idle.execute("select 1").fetchone()
    worker = threading.Thread(target=op)
    worker.start()
    assert inside.wait(10)
    assert readers.close_idle() == 1  # the op's reader is in use; this thread's is closed
    _assert_closed(idle)
    leave.set()
    worker.join(10)
    assert seen[0] is seen[1] and readers.close_idle() == 0
    _assert_closed(seen[0])


def _assert_closed(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("select 1")
    except sqlite3.ProgrammingError:
        return
    raise AssertionError("the idle reader was left open")
