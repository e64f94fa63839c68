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
    """Why the -wal keeps SQLite's name: a row committed to the WAL and not yet copied into
    the database file (its writer ended without a checkpoint, a killed process) is in the
    backup when the backup is opened."""
    import shutil

    from kint.tenant_worker import discard

    live = tmp_path / "live"
    live.mkdir()
    writer = sqlite3.connect(live / "memory.db")
    writer.execute("pragma journal_mode=wal")
    writer.execute("pragma wal_autocheckpoint=0")  # the row stays in the WAL
    writer.execute("create table t (x)")
    writer.execute("insert into t values ('kept in the wal')")
    writer.commit()
    # The files as a killed writer leaves them: the row in the -wal only.
    store = tmp_path / "store"
    store.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(live / f"memory.db{suffix}", store / f"memory.db{suffix}")
    writer.close()
    monkeypatch.setattr(discard, "refuse_to_move", lambda ctx: None)
    moved = discard.discard_local(SimpleNamespace(config=SimpleNamespace(db=str(
        store / "memory.db"))))
    assert len(moved) == 2 and moved[1] == moved[0] + "-wal"
    backup = sqlite3.connect(moved[0])
    try:
        assert backup.execute("select x from t").fetchall() == [("kept in the wal",)]
    finally:
        backup.close()
