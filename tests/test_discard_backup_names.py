"""The names `pull --discard-local` gives the store it moves aside: kint v0.3.0's
`<name>.kint-backup-<YYYYmmdd-HHMMSS>` (09-cli.md, "kint pull"; 10-configuration.md, "The
store"), the -wal and -shm beside it under the names SQLite opens them by, and never a
rename onto an earlier backup, which would lose the rows that discard set aside.

The real move over real files, with the checks made before it (another tenant's rows,
another process holding the store: tests/test_chain_faults.py) stood down and the clock
held at one second. The name through the real `kint pull --discard-local` is checked in
tests/test_chain_e2e.py."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

STAMP = "20251205-034500"  # 1764906300, UTC
AT = 1764906300


def test_the_store_and_its_wal_and_shm_are_moved_under_v030s_stamp_and_never_onto_a_backup(
        tmp_path, monkeypatch):
    from kint.tenant_worker import discard

    db = tmp_path / "memory.db"
    files = {"": b"the store", "-wal": b"its wal", "-shm": b"its shm"}
    for suffix, content in files.items():
        (tmp_path / f"memory.db{suffix}").write_bytes(content)
    monkeypatch.setattr(discard, "refuse_to_move", lambda ctx: None)
    real_gmtime = time.gmtime
    monkeypatch.setattr(discard.time, "gmtime", lambda *a: real_gmtime(AT))
    ctx = SimpleNamespace(config=SimpleNamespace(db=str(db)))

    first = discard.discard_local(ctx)
    assert first == [f"{db}.kint-backup-{STAMP}{suffix}" for suffix in files]
    assert not any((tmp_path / f"memory.db{suffix}").exists() for suffix in files)

    # The restore made a new store; a second discard in the same second keeps the first.
    (tmp_path / "memory.db").write_bytes(b"the restored store")
    second = discard.discard_local(ctx)
    assert second == [f"{db}.kint-backup-{STAMP}-2"]
    for path, suffix in zip(first, files):
        with open(path, "rb") as kept:
            assert kept.read() == files[suffix]


def test_a_backup_opens_with_the_writes_its_wal_held(tmp_path, monkeypatch):
    """A row committed to the WAL and not yet copied into the database file (its writer
    ended without a checkpoint, a killed process) is in the backup when the backup is
    opened: the WAL is folded into the store before the move, and nothing of it is left
    beside the backup or the store's old name."""
    from kint.tenant_worker import discard

    db = _store_with_a_row_in_its_wal(tmp_path)
    store = db.parent
    monkeypatch.setattr(discard, "refuse_to_move", lambda ctx: None)
    moved = discard.discard_local(SimpleNamespace(config=SimpleNamespace(db=str(db))))
    assert len(moved) == 1 and moved[0].startswith(str(store / "memory.db.kint-backup-"))
    assert sorted(p.name for p in store.iterdir()) == [Path(moved[0]).name]
    backup = sqlite3.connect(moved[0])
    try:
        assert backup.execute("select x from t").fetchall() == [("kept in the wal",)]
    finally:
        backup.close()


KILLED_DISCARD = """
import os, shutil, signal, sys
from types import SimpleNamespace
from kint.tenant_worker import discard

real_move = shutil.move

def move_then_die(src, dst):
    real_move(src, dst)
    if os.path.basename(str(src)) == "memory.db":
        os.kill(os.getpid(), signal.SIGKILL)  # between the store's move and the next

discard.refuse_to_move = lambda ctx: None
shutil.move = move_then_die
discard.discard_local(SimpleNamespace(config=SimpleNamespace(db=sys.argv[1])))
"""


def _store_with_a_row_in_its_wal(folder: Path) -> Path:
    """A store as a killed writer leaves it: the row committed to the -wal only."""
    import shutil

    live = folder / "live"
    live.mkdir()
    writer = sqlite3.connect(live / "memory.db")
    writer.execute("pragma journal_mode=wal")
    writer.execute("pragma wal_autocheckpoint=0")  # the row stays in the WAL
    writer.execute("create table t (x)")
    writer.execute("insert into t values ('kept in the wal')")
    writer.commit()
    store = folder / "store"
    store.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(live / f"memory.db{suffix}", store / f"memory.db{suffix}")
    writer.close()
    return store / "memory.db"


def _tables(db: Path) -> list[tuple[str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select name from sqlite_master").fetchall()
    finally:
        conn.close()


def test_a_discard_killed_after_the_stores_move_leaves_no_wal_for_the_restore(tmp_path):
    """A real SIGKILL right after the store's rename: no -wal is left beside the store's
    old name, so the store the restore then creates there starts empty (before, the old
    -wal stayed and SQLite replayed its table into the new store), and the backup opens
    with the row its WAL held."""
    import subprocess
    import sys

    db = _store_with_a_row_in_its_wal(tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILLED_DISCARD, str(db)],
                            cwd=Path(__file__).parent.parent, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert not db.exists()
    assert sorted(p.name for p in db.parent.iterdir() if not p.name.startswith(
        "memory.db.kint-backup-")) == []
    backups = [p for p in db.parent.iterdir() if p.name.startswith("memory.db.kint-backup-")
               and not p.name.endswith(("-wal", "-shm"))]
    assert len(backups) == 1
    assert sqlite3.connect(backups[0]).execute("select x from t").fetchall() == [
        ("kept in the wal",)]
    assert _tables(db) == []  # the restore's new store: nothing replayed into it


def test_a_wal_left_beside_no_store_is_moved_aside_before_the_restore(tmp_path, monkeypatch):
    """What a discard killed between its moves left before this fix (the store gone, its
    -wal still there): the next discard moves the -wal aside under a backup name of its
    own, so the restored store does not replay it."""
    from kint.tenant_worker import discard

    db = _store_with_a_row_in_its_wal(tmp_path)
    db.rename(db.with_name("memory.db.kint-backup-20251205-034500"))
    monkeypatch.setattr(discard, "refuse_to_move", lambda ctx: None)
    moved = discard.discard_local(SimpleNamespace(config=SimpleNamespace(db=str(db))))
    assert len(moved) == 1 and moved[0].endswith("-wal"), moved
    assert not Path(f"{db}-wal").exists()
    assert _tables(db) == []
