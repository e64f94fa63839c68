"""`kint pull --discard-local` moves the whole store file, so it counts whose rows are in it
first (discard.refuse_if_shared); a store whose count failed was moved aside uncounted,
whatever the failure. Now only a file SQLite cannot read as a database (damaged, not a
database) goes aside so, as the way out of it; a file SQLite reads and kint cannot count
is refused, nothing moved: a newer Sibyl's schema this kint does not read (here a table
keyed by a collation kint's SQLite lacks, another tenant's row in it), or another tool's
file that --db names (no table with Sibyl's tenant_id). v0.3.0 moved any file aside.
Sibyl's own store with a hot journal (a writer killed mid-transaction) is no such file: its
transaction is rolled back, as the worker's row count does, and the store counted.

Real parts: a machine on the session's devchain (real supervisor and workers), real Sibyl
stores, the real `kint pull --discard-local`.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from chain_machines import kjson, new_machine
from conftest import sibyl_client, write_rules as write
from kint.protocol.hints import STORE_UNCOUNTED_DISCARD_HINT
from test_store_cut_short import killed_mid_transaction


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("discard-uncounted"), chain_home)
    yield sb
    sb.shutdown()


def _anchored(sb, tmp_path: Path, tenant: str) -> Path:
    db = tmp_path / "memory.db"
    write(db, tenant, **{"kept": "anchored on chain"})
    kjson(sb, "--tenant", tenant, "--db", str(db), "connect", "--dev")
    kjson(sb, "--tenant", tenant, "--db", str(db), "push")
    return db


def _backups(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.glob(f"{db.name}.kint-backup-*"))


def _replaced(sb, db: Path, write_new) -> None:
    """The store replaced by the file `write_new` writes, with the supervisor stopped (no
    worker's connection open on the old one) and its -wal and -shm gone with it."""
    sb.shutdown()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    write_new(db)
    sb.start_entitled()


def _refused_unmoved(sb, db: Path, tenant: str, said: str) -> None:
    out = sb.kint("--tenant", tenant, "--db", str(db), "pull", "--discard-local")
    assert out.returncode == 5 and "[SIBYL_ERROR]" in out.stderr, out.stdout + out.stderr
    assert said in out.stderr and "nothing was moved" in out.stderr, out.stderr
    assert STORE_UNCOUNTED_DISCARD_HINT in out.stderr.replace("\n", " "), out.stderr
    assert _backups(db) == [] and db.exists()


def test_a_newer_sibyls_schema_kint_cannot_count_is_not_moved_aside(machine, tmp_path):
    """A table of a newer Sibyl's, keyed by a collation this kint's SQLite does not know,
    holding another tenant's row: the count fails (SQLITE_ERROR), and the store was moved
    aside uncounted, that row with it. Now refused naming SQLite's error; the row stays."""
    sb, tenant = machine, "kint-discard-newer"
    db = _anchored(sb, tmp_path, tenant)
    with closing(sqlite3.connect(db)) as conn:
        conn.create_collation("sibyl_v9", lambda a, b: (a > b) - (a < b))
        conn.execute("CREATE TABLE graph_edges (tenant_id TEXT COLLATE sibyl_v9, edge TEXT)")
        conn.execute("INSERT INTO graph_edges VALUES ('someone-else', 'theirs')")
        conn.commit()
    _refused_unmoved(sb, db, tenant, "no such collation sequence: sibyl_v9")
    with closing(sqlite3.connect(db)) as conn:
        conn.create_collation("sibyl_v9", lambda a, b: (a > b) - (a < b))
        assert conn.execute("SELECT edge FROM graph_edges").fetchall() == [("theirs",)]


def test_another_tools_file_at_the_stores_path_is_not_moved_aside(machine, tmp_path):
    """A file SQLite reads with no table keyed by Sibyl's tenant_id (another tool's, put
    where --db points) counted as nobody's rows, and was moved aside from under that tool.
    Now refused naming its tables; the file stays where it was."""
    sb, tenant = machine, "kint-discard-foreign"
    db = _anchored(sb, tmp_path, tenant)

    def notes(path: Path) -> None:
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            conn.execute("INSERT INTO notes (body) VALUES ('another tool''s note')")
            conn.commit()

    _replaced(sb, db, notes)
    _refused_unmoved(sb, db, tenant, "holds tables but none with Sibyl's tenant_id (notes)")


def test_a_store_a_killed_writer_cut_short_is_rolled_back_then_moved_aside(machine, tmp_path):
    """Sibyl's own store in rollback-journal mode, its writer killed mid-transaction while
    the worker runs (no start check to roll it back): the count's read-only read meets the
    hot journal (SQLITE_READONLY_ROLLBACK), and the discard refused it as a store kint
    cannot count. It is rolled back as the worker's row count does (one read-write open),
    counted, moved aside and restored, as before the count was asked."""
    sb, tenant = machine, "kint-discard-cut-short"
    db = _anchored(sb, tmp_path, tenant)
    sb.shutdown()  # no connection on it: a WAL store leaves WAL only when alone
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    sb.start_entitled()
    kjson(sb, "--tenant", tenant, "--db", str(db), "status")  # the worker runs
    killed_mid_transaction(db)
    kjson(sb, "--tenant", tenant, "--db", str(db), "pull", "--discard-local")
    assert len(_backups(db)) == 1
    assert "SQLite rolled it back" in (sb.kint_home / "supervisor.log").read_text()
    _holds_only_kept(db, tenant)


def test_a_store_sqlite_cannot_read_is_still_moved_aside_and_restored(machine, tmp_path):
    """The way out of a damaged store stays: a file SQLite reads as no database is moved
    aside uncounted (nobody's rows can be read from it), kept as the backup, and the pull
    restores the anchored rows into a new store."""
    sb, tenant = machine, "kint-discard-damaged"
    db = _anchored(sb, tmp_path, tenant)

    def damaged(path: Path) -> None:  # SQLite's header, then nothing SQLite can read
        path.write_bytes(kept[:100] + os.urandom(len(kept) - 100))

    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    kept = db.read_bytes()
    _replaced(sb, db, damaged)
    kjson(sb, "--tenant", tenant, "--db", str(db), "pull", "--discard-local")
    assert len(_backups(db)) == 1
    assert "moving it aside without counting its tenants" in \
        (sb.kint_home / "supervisor.log").read_text()
    _holds_only_kept(db, tenant)


def _holds_only_kept(db: Path, tenant: str) -> None:
    """The restored store holds the anchored rule `_anchored` wrote, and nothing more."""
    client = sibyl_client(db, tenant)
    try:
        assert [e["name"] for e in client.list_entities(category="rules")] == ["kept"]
    finally:
        client.storage.close()


def test_a_tenant_id_column_is_told_whatever_its_case(tmp_path):
    """SQLite's column names know no case, so a table that spells Sibyl's column TENANT_ID
    is keyed by it: counted, where the count took it for an unkeyed table and a store of
    such tables for another tool's file. In process: the count alone, on a real file."""
    from kint.tenant_worker.store import rows_by_tenant

    db = tmp_path / "memory.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE entities (TENANT_ID TEXT, name TEXT)")
        conn.execute("INSERT INTO entities VALUES ('someone-else', 'theirs')")
        conn.commit()
    assert rows_by_tenant(str(db)) == {"someone-else": 1}
