"""A store a killed writer left mid-transaction (kint/tenant_worker/store.py): a hot rollback
journal, which no read-only connection may undo, so every read-only read failed with
"attempt to write a readonly database", the worker's start check with it, and its space was
quarantined after its restarts. At its start the worker now lets SQLite roll the cut-short
transaction back through one read-write open, as Sibyl's next open would: the store reads
as it was before that transaction, nothing of it kept.

Real files and a real SQLite: the writer is a forked process killed with SIGKILL inside its
transaction, once its journal is on disk."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from conftest import TENANT, write_store
from kint.tenant_worker.store import StoreReader, check_openable


def killed_mid_transaction(db: Path) -> None:
    """Leave `db` as a writer killed inside a transaction leaves it: a hot rollback
    journal beside it (the store in rollback-journal mode, as any SQLite tool may set).
    Its own connection is closed before the writer starts, so none of this process's is
    left open on the store (test_discard_uncounted's discard moves it)."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE").fetchone()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: spills its transaction to the file, then waits to be killed
        try:
            os.close(read)
            conn = sqlite3.connect(db, isolation_level=None)
            conn.execute("PRAGMA cache_size=1")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE cut_short (x)")
            for _ in range(500):
                conn.execute("INSERT INTO cut_short VALUES (?)", ("x" * 500,))
            os.write(write, b"1")
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert Path(f"{db}-journal").exists()


def test_a_transaction_a_killed_writer_cut_short_is_rolled_back_at_the_workers_start(
        tmp_path, caplog):
    db = write_store(tmp_path / "memory.db")
    before = StoreReader(str(db), TENANT).facts().rows
    killed_mid_transaction(db)
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly database"):
        ro.execute("PRAGMA schema_version").fetchone()  # what every read met before
    ro.close()

    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        assert check_openable(str(db)) is None  # it raised StoreUnreadable: a crash loop
    assert "a killed writer cut short" in caplog.text and "rolled it back" in caplog.text
    assert not Path(f"{db}-journal").exists()
    assert StoreReader(str(db), TENANT).facts().rows == before  # as it was before
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "cut_short" not in tables  # nothing of the cut-short transaction kept


def test_a_worker_already_counting_the_store_rolls_it_back_at_its_next_count(tmp_path):
    """A writer killed while the worker runs: the next row count (every status) met the
    same refusal until Sibyl opened the store again; it now rolls back and counts."""
    db = write_store(tmp_path / "memory.db")
    reader = StoreReader(str(db), TENANT)
    before = reader.facts().rows
    killed_mid_transaction(db)
    assert reader.facts().rows == before  # counted anew: the files changed
    assert not Path(f"{db}-journal").exists()
