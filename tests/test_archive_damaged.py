"""A store whose archive (memory_forget moves an entity there) is damaged, its rows still
read: kint-server's drift check reads that archive when the anchored rows are gone from
the store (changes.store_lost), and its failure was answered INTERNAL naming the store,
where the push's own read of a damaged store holds the push for a human (push_refusals).
Now the drift check's failure is answered as the rows' read answers the same SQLite
error (push_refusals.read_refusal): the push is HELD, nothing anchored, and `kint
status` shows that hold (it failed INTERNAL itself).

Real parts: a real Sibyl store whose archive's b-tree pages are overwritten with bytes
SQLite cannot make sense of (its rows' pages untouched), and a machine on the session's
devchain (real supervisor and workers), the push asked of the supervisor as kint-server's
tool push asks it (a session attached: the drift baseline live).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from chain_machines import anchored_then_forgotten, kjson, new_machine
from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED

MALFORMED = "database disk image is malformed"


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("archive-damaged"), chain_home)
    yield sb
    sb.shutdown()


def _damage_archive(db: Path) -> None:
    """The root page of each b-tree of Sibyl's archive (the table and its indexes; with one
    archived row, the whole of each) overwritten, the WAL folded into the store first: its
    other tables read as before."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [p for (p,) in conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'archived_entities' AND "
            "rootpage > 0")]
    assert len(pages) >= 1
    with open(db, "r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * size)
            fh.write(b"\xff" * size)


def _forgotten_in_a_damaged_archive(sb, tmp_path: Path, tenant: str) -> Path:
    """A store of `tenant` whose one rule was anchored, then forgotten through Sibyl (the
    store holds none of the anchored rows: the drift check reads the archive), its archive
    damaged with the supervisor stopped (no worker's connection open on it)."""
    db = anchored_then_forgotten(sb, tmp_path, tenant)
    sb.shutdown()
    _damage_archive(db)
    sb.start_entitled()
    return db


def _server_push_refused(sb, tenant: str, db: Path):  # noqa: ANN202 - a KintError
    """kint-server's tool push (a `hold_reason`) of `tenant`'s space on `db`, a session
    attached first (the drift baseline: the store as the session found it, so the push runs
    the drift check): the error it was refused with."""
    from kint.client import KintError
    from kint.spaces import resolve

    ref = resolve(tenant, db)
    scope = {"tenant": ref.tenant, "db": ref.db, "space": ref.label}
    with sb.client() as kint:
        kint.call("attach", **scope, args={"session": "agent", "watcher": False},
                  timeout_s=60)
        with pytest.raises(KintError) as refused:
            kint.call("push", **scope, args={"hold_reason": "tool"}, timeout_s=120)
    return refused.value


def test_a_server_push_over_a_damaged_archive_is_held_as_a_damaged_store(machine, tmp_path):
    """The drift check met the damaged archive and answered INTERNAL ("store PATH cannot be
    read: database disk image is malformed"), where the same store's damaged rows hold the
    push. Now HELD, as kint-server's push over a store kint cannot read is; `kint status`
    (with the session's baseline) shows the hold, where it failed INTERNAL; nothing was
    anchored."""
    sb, tenant = machine, "kint-archive-damaged"
    db = _forgotten_in_a_damaged_archive(sb, tmp_path, tenant)
    head = kjson(sb, "--tenant", tenant, "--db", str(db), "status")["head"]
    held = _server_push_refused(sb, tenant, db)
    assert held.code == "HELD", (held.code, held.message)
    assert held.message.startswith(f"refusing to anchor: kint cannot read the store {db} "
                                   f"({MALFORMED})"), held.message
    assert held.hint == NOTHING_ANCHORED_OR_DROPPED

    out = sb.kint("--tenant", tenant, "--db", str(db), "status", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    status = json.loads(out.stdout)
    assert status["held"]["message"] == held.message, status["held"]
    assert status["head"] == head  # nothing anchored


def test_a_server_push_over_an_archive_kint_does_not_read_is_the_rows_refusal(machine,
                                                                             tmp_path):
    """An archive of a shape kint does not read (its `category` renamed, as another Sibyl's
    might be) is no damaged file: the rows' read of a store whose table is so is refused as
    SQLite's error, nothing held, to be tried again. The drift check said it otherwise
    (the hint to check the file); now the same refusal as the rows' read, and nothing
    waits for a human. `kint status` over the same store (the session's baseline: its drift
    check reads the archive) says the same of it as the push, each with its own hint,
    where the push said "reading the store PATH failed (SQLITE_ERROR: ...)"."""
    from kint.protocol.hints import STORE_READ_FAILED_HINT

    sb, tenant = machine, "kint-archive-renamed"
    db = anchored_then_forgotten(sb, tmp_path, tenant)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("ALTER TABLE archived_entities RENAME COLUMN category TO cat")
    log = sb.kint_home / "supervisor.log"
    held = log.read_text().count("push HELD")
    err = _server_push_refused(sb, tenant, db)
    assert err.code == "INTERNAL", (err.code, err.message)
    said = f"store {db} cannot be read: no such column: category (SQLITE_ERROR, code 1)"
    assert err.message == f"{said}; nothing was anchored", err.message
    assert err.hint == STORE_READ_FAILED_HINT
    assert log.read_text().count("push HELD") == held
    status = sb.kint("--tenant", tenant, "--db", str(db), "status")
    assert status.returncode != 0, status.stdout + status.stderr
    assert status.stderr.startswith(f"kint: error: {said} [INTERNAL]"), status.stderr
