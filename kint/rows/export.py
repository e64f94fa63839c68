"""Read-only export of a tenant's rows from a Sibyl store (docs/how-it-works.md, "The leaf
and the rows root", and push step 3).

Every read goes through a `mode=ro` connection, in rowid order, and returns the stored
text of each column untouched.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from typing import Iterator

from kint.rows.canon import FIELDS, Row, Tier, journal_content_key, numbered_journal_key

_QUERIES: dict[Tier, str] = {
    "entity": "SELECT category, name, status, body FROM entities WHERE tenant_id = ? "
              "ORDER BY rowid",
    "state": "SELECT document_key, body FROM state_documents WHERE tenant_id = ? ORDER BY rowid",
    "reference": "SELECT doc_key, body, metadata FROM reference_documents WHERE tenant_id = ? "
                 "ORDER BY rowid",
    "journal": "SELECT ts, evaluated, acted, forward, extra FROM journal_events "
               "WHERE tenant_id = ? ORDER BY rowid",
}


# How long a read of the rows waits on another process's lock (SQLite's busy timeout)
# before it fails: longer than a count's (kint.tenant_worker.store.READ_BUSY_WAIT_S), as
# what waits here is a push, a verify or an export that would rather go on than refuse.
READ_BUSY_WAIT_S = 5.0


def connect_ro(db: str) -> sqlite3.Connection:
    """A read-only connection; raises sqlite3.Error when the store cannot be opened."""
    uri = "file:" + urllib.parse.quote(db) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=READ_BUSY_WAIT_S, check_same_thread=False)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def export_rows(conn: sqlite3.Connection, tenant: str) -> list[Row]:
    """Every row of `tenant` in the four tiers the SDK writes, in rowid order per tier."""
    tables = _tables(conn)
    rows: list[Row] = []
    if "entities" in tables:
        for category, name, status, body in conn.execute(_QUERIES["entity"], (tenant,)):
            rows.append(Row("entity", category, name, {"status": status, "body": body}))
    if "state_documents" in tables:
        for key, body in conn.execute(_QUERIES["state"], (tenant,)):
            rows.append(Row("state", None, key, {"body": body}))
    if "reference_documents" in tables:
        for key, body, metadata in conn.execute(_QUERIES["reference"], (tenant,)):
            rows.append(Row("reference", None, key, {"body": body, "metadata": metadata}))
    if "journal_events" in tables:
        rows.extend(_journal_rows(conn.execute(_QUERIES["journal"], (tenant,))))
    return rows


def _journal_rows(cursor: Iterator[tuple[str | None, ...]]) -> Iterator[Row]:
    seen: dict[str, int] = {}
    for values in cursor:
        content = journal_content_key(*values)
        occurrence = seen.get(content, 0)
        seen[content] = occurrence + 1
        yield Row("journal", None, numbered_journal_key(content, occurrence),
                  dict(zip(FIELDS["journal"], values)))


def read_row(conn: sqlite3.Connection, tenant: str, tier: str, category: str | None,
             key: str) -> Row | None:
    """Re-read one row by the key a search returned. For the journal that key is the
    event's uuid; the row comes back under its content key. None when it is gone."""
    if tier == "entity":
        found = conn.execute(
            "SELECT status, body FROM entities WHERE tenant_id = ? AND category = ? AND name = ?",
            (tenant, category, key)).fetchone()
        if not found:
            return None
        return Row("entity", category, key, {"status": found[0], "body": found[1]})
    if tier == "state":
        found = conn.execute(
            "SELECT body FROM state_documents WHERE tenant_id = ? AND document_key = ?",
            (tenant, key)).fetchone()
        return Row("state", None, key, {"body": found[0]}) if found else None
    if tier == "reference":
        found = conn.execute(
            "SELECT body, metadata FROM reference_documents WHERE tenant_id = ? AND doc_key = ?",
            (tenant, key)).fetchone()
        return (Row("reference", None, key, {"body": found[0], "metadata": found[1]})
                if found else None)
    if tier == "journal":
        found = conn.execute(
            "SELECT rowid, ts, evaluated, acted, forward, extra FROM journal_events "
            "WHERE tenant_id = ? AND id = ?", (tenant, key)).fetchone()
        if not found:
            return None
        rowid, *values = found
        (earlier,) = conn.execute(
            "SELECT count(*) FROM journal_events WHERE tenant_id = ? AND rowid < ? "
            "AND ts IS ? AND evaluated IS ? AND acted IS ? AND forward IS ? AND extra IS ?",
            (tenant, rowid, *values)).fetchone()
        content = journal_content_key(*values)
        return Row("journal", None, numbered_journal_key(content, int(earlier)),
                   dict(zip(FIELDS["journal"], values)))
    raise ValueError(f"unknown tier {tier!r}")
