"""A store whose anchored rows its tenant forgot (memory_forget archives an entity) is told
from one that lost them by its archive (changes.store_lost). A read of that archive that
another process's lock refused was taken for an empty archive: the pull restored the rows
the tenant forgot on purpose, kint-server's push was held for a human over a "lost" store,
and verify said "`kint pull` restores them". Now the lock is what it is: the pull and the
server push answer BUSY, restoring and anchoring nothing, verify says nothing of the rows.
A lock met by the drift check's second read of the rows is the push's BUSY too, and any
other failure there is refused as the push's own read of the rows refuses it.
An archive of a shape kint does not read is refused naming the store, not as a bug in kint.

Real parts: real Sibyl stores, a real second process holding SQLite's exclusive lock on the
store (support/locked_store.py), and, for the pull and the push, a machine on the session's
devchain (real supervisor and workers). The lock is taken where a writer that starts between the
op's two reads would take it: after the store's rows were read, before its archive is. A
lock held from the start refuses the rows' read first, which was always answered BUSY.

Why the stores are put in rollback-journal mode first: Sibyl opens every store in WAL mode,
where an open connection (the worker's, between those two reads) keeps any other from
taking the exclusive lock, so the gap cannot be met there; a store in rollback-journal mode
(one Sibyl has not opened since, as a copy made by another tool can be) is read without a
lock between statements, and a writer can take it in the gap.
"""

from __future__ import annotations

import sqlite3
import subprocess
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, closing, nullcontext
from pathlib import Path
from typing import Any

import pytest

from chain_machines import anchored_then_forgotten, forget_rule, kjson, new_machine
from conftest import KINT, sibyl_client
from conftest import write_rules as write
from kint.protocol.hints import (STORE_LOCKED_PULL_HINT, STORE_LOCKED_PUSH_HINT,
                                 STORE_READ_FAILED_HINT, STORE_UNREADABLE_HINT)
from support.locked_store import locked

RESTORING = "restoring them from the first epoch"


def _rollback_journal(db: Path) -> None:
    """`db` out of WAL mode (every connection to it closed), as a copy Sibyl never opened."""
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)


def _rules(db: Path, tenant: str) -> set[str]:
    client = sibyl_client(db, tenant)
    try:
        return {e["name"] for e in client.list_entities(category="rules")}
    finally:
        client.storage.close()


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    """A machine whose workers hold each read of a store's archive while the file `hold`
    exists (KINT_TEST_HOLD_ARCHIVE, tests/support/kint_test_faults.py), and each drift
    check's read of the rows while the file `hold_rows` exists (KINT_TEST_HOLD_DRIFT_ROWS)."""
    root = tmp_path_factory.mktemp("archive-locked")
    sb = new_machine(root, chain_home, KINT_TEST_HOLD_ARCHIVE=str(root / "hold-archive"),
                     KINT_TEST_HOLD_DRIFT_ROWS=str(root / "hold-drift-rows"))
    sb.hold = root / "hold-archive"
    sb.hold_rows = root / "hold-drift-rows"
    yield sb
    sb.shutdown()


def _pull_under_lock(sb, db: Path, tenant: str) -> subprocess.CompletedProcess:
    """`kint pull`, the store locked by another process from the moment the pull, its rows
    read, reaches the archive's read until the pull ends, or says it restores the rows (the
    lock let go then, so that its restore can go on as it would have)."""
    reached = Path(str(sb.hold) + ".reached")
    reached.unlink(missing_ok=True)
    sb.hold.touch()
    log = sb.kint_home / "supervisor.log"
    said = log.read_text().count(RESTORING)
    proc = subprocess.Popen([KINT, "--tenant", tenant, "--db", str(db), "pull"], env=sb.env,
                            text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        sb.wait_for(reached.exists, timeout=60, what="the pull to reach the archive's read")
        with locked(db):
            sb.hold.unlink()
            sb.wait_for(lambda: proc.poll() is not None
                        or log.read_text().count(RESTORING) > said, timeout=60,
                        what="the pull to end, or to restore")
        out, err = proc.communicate(timeout=90)
    finally:
        sb.hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert log.read_text().count(RESTORING) == said, \
        "the pull took a locked archive for an empty one, the store for a lost one"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _forgotten_on_a_rollback_store(sb, tmp_path, tenant: str):
    """A store of `tenant` whose one rule was anchored, then forgotten through Sibyl (in
    its archive), switched to a rollback journal with the supervisor stopped (its workers'
    connections closed), and the supervisor started again: the store both tests lock."""
    db = anchored_then_forgotten(sb, tmp_path, tenant)
    sb.shutdown()
    _rollback_journal(db)
    sb.start_entitled()
    return db


def _attached(sb, tenant: str, db: Path) -> dict:
    """The scope of `tenant`'s space on `db`, a session attached to it: the drift baseline
    live (the store as the session found it), so a push or a status runs the drift check."""
    from kint.spaces import resolve

    ref = resolve(tenant, db)
    scope = {"tenant": ref.tenant, "db": ref.db, "space": ref.label}
    with sb.client() as kint:
        kint.call("attach", **scope, args={"session": "agent", "watcher": False},
                  timeout_s=60)
    return scope


def _push_under_lock(sb, db: Path, scope: dict, hold: Path, *, what: str) -> list:
    """kint-server's push (a `hold_reason`) of `scope`, held at the read the file `hold`
    holds until another process locks `db`, then let go under that lock until the push
    ends: the KintErrors it was refused with (none if it went through)."""
    return _push_held(sb, scope, hold, what=what, meanwhile=lambda: locked(db))


def _push_held(sb, scope: dict, hold: Path, *, what: str,
               meanwhile: Callable[[], AbstractContextManager[Any]]) -> list:
    """kint-server's push of `scope`, held at the read the file `hold` holds until
    `meanwhile()` is entered, then let go inside it until the push ends: the KintErrors it
    was refused with (none if it went through)."""
    from kint.client import KintError

    reached = Path(str(hold) + ".reached")
    reached.unlink(missing_ok=True)
    hold.touch()
    refused: list[KintError] = []

    def push() -> None:
        with sb.client() as kint:
            try:
                kint.call("push", **scope, args={"hold_reason": "tool"}, timeout_s=120)
            except KintError as err:
                refused.append(err)

    pushing = threading.Thread(target=push, daemon=True)
    pushing.start()
    try:
        sb.wait_for(reached.exists, timeout=60, what=what)
        with meanwhile():
            hold.unlink()
            pushing.join(timeout=90)
            assert not pushing.is_alive(), "the push did not end"
    finally:
        hold.unlink(missing_ok=True)
    return refused


def _assert_the_pushs_busy(refused: list, db: Path, went_through: str) -> None:
    """`refused` (from _push_under_lock) is the one BUSY a push meets over the lock on `db`:
    the push's hint, its message naming the store and the lock, nothing anchored."""
    assert len(refused) == 1, went_through
    busy = refused[0]
    assert (busy.code, busy.hint) == ("BUSY", STORE_LOCKED_PUSH_HINT), busy
    assert busy.message == (f"the store {db} is locked by another process (database is "
                            f"locked); nothing was anchored"), busy.message


def test_a_pull_over_a_locked_archive_is_busy_and_restores_nothing(machine, tmp_path):
    """On the archive read as empty, the pull took the store for a lost one and restored
    the forgotten rule from the first epoch. Now BUSY, with the pull's hint, nothing
    restored; once the lock is let go, a pull finds the store at the chain head, the rule
    still forgotten."""
    sb, tenant = machine, "kint-archive-pull"
    db = _forgotten_on_a_rollback_store(sb, tmp_path, tenant)

    out = _pull_under_lock(sb, db, tenant)
    assert out.returncode != 0 and "[BUSY]" in out.stderr, out.stdout + out.stderr
    assert f"the store {db} is locked by another process" in out.stderr
    assert STORE_LOCKED_PULL_HINT in out.stderr
    assert _rules(db, tenant) == set()

    pulled = kjson(sb, "--tenant", tenant, "--db", str(db), "pull")
    assert pulled["applied"] == [] and pulled["message"].startswith("already at the chain head")
    assert _rules(db, tenant) == set()


def test_a_server_push_over_a_locked_archive_is_busy_not_held(machine, tmp_path):
    """kint-server's push (a `hold_reason`, a session attached: the drift baseline live)
    reads the archive in its drift check (drift.evaluate, from push_refusals.rows_to_push).
    Read as empty under the lock, it took the store for a lost one and held the push for a
    human (HELD, "`kint pull` restores them"). Now BUSY with the push's hint, ending as a
    refusal over the push's own read of the rows ends: nothing was anchored."""
    sb, tenant = machine, "kint-archive-push"
    db = _forgotten_on_a_rollback_store(sb, tmp_path, tenant)
    scope = _attached(sb, tenant, db)
    refused = _push_under_lock(sb, db, scope, sb.hold,
                               what="the drift check to reach the archive")
    _assert_the_pushs_busy(refused, db, "the push went through over a store that holds none "
                           "of its rows")
    assert "push HELD" not in (sb.kint_home / "supervisor.log").read_text()


def test_a_server_push_whose_drift_check_meets_a_lock_on_the_rows_is_the_pushs_busy(
        machine, tmp_path):
    """The drift check reads the store's rows again (drift.evaluate's export_rows) after
    the push's own read of them: a lock taken between the two is refused as that read
    refuses it (push_refusals.read_refusal), BUSY ending "nothing was anchored", the push's
    hint, where state_health.guarded's BUSY left out what the push did."""
    sb, tenant = machine, "kint-drift-rows-push"
    db = _forgotten_on_a_rollback_store(sb, tmp_path, tenant)
    scope = _attached(sb, tenant, db)
    refused = _push_under_lock(sb, db, scope, sb.hold_rows,
                               what="the drift check to reach the rows")
    _assert_the_pushs_busy(refused, db, "the push went through under another process's lock")


def test_a_server_push_whose_drift_check_cannot_read_the_rows_is_the_rows_refusal(
        machine, tmp_path):
    """A failure other than a lock at the drift check's second read of the rows (a column
    of the entities renamed after the push's own read, as another Sibyl's might be) is
    refused as that read refuses the same SQLite error (push_refusals.read_refusal):
    INTERNAL naming the store and SQLite's error as `kint status` would, "nothing was
    anchored", the hint to push again, nothing held for a human."""
    sb, tenant = machine, "kint-drift-rows-shape"
    db = _forgotten_on_a_rollback_store(sb, tmp_path, tenant)
    scope = _attached(sb, tenant, db)
    log = sb.kint_home / "supervisor.log"
    held = log.read_text().count("push HELD")

    def renamed() -> AbstractContextManager[None]:
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("ALTER TABLE entities RENAME COLUMN body TO body_v2")
            conn.commit()
        return nullcontext()

    refused = _push_held(sb, scope, sb.hold_rows, what="the drift check to reach the rows",
                         meanwhile=renamed)
    assert len(refused) == 1, "the push went through a store whose rows it cannot read"
    err = refused[0]
    assert (err.code, err.hint) == ("INTERNAL", STORE_READ_FAILED_HINT), err
    assert err.message == (f"store {db} cannot be read: no such column: body (SQLITE_ERROR, "
                           f"code 1); nothing was anchored"), err.message
    assert log.read_text().count("push HELD") == held


def test_status_with_a_baseline_over_a_locked_archive_is_busy(machine, tmp_path):
    """`kint status` of a connected space with a session attached (the drift baseline live)
    runs the drift check (status.py, `held`), which reads the archive when the store holds
    none of the anchored rows. With the lock taken there, after the counts were read, the
    status is BUSY naming the store and the lock, with the hint to run it again, as the
    push's is (above): never INTERNAL sending the user to check the file, nor a hold over a
    "lost" store. Once the lock is let go, it answers, the rule told forgotten, not lost."""
    from kint.protocol.hints import STORE_LOCKED_HINT

    sb, tenant = machine, "kint-archive-status"
    db = _forgotten_on_a_rollback_store(sb, tmp_path, tenant)
    _attached(sb, tenant, db)  # the baseline: the status runs the drift check

    reached = Path(str(sb.hold) + ".reached")
    reached.unlink(missing_ok=True)
    sb.hold.touch()
    proc = subprocess.Popen([KINT, "--tenant", tenant, "--db", str(db), "status"],
                            env=sb.env, text=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sb.wait_for(reached.exists, timeout=60, what="the status to reach the archive")
        with locked(db):
            sb.hold.unlink()
            out, err = proc.communicate(timeout=90)
    finally:
        sb.hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0 and "[BUSY]" in err, out + err
    assert f"the store {db} is locked by another process" in err, err
    assert STORE_LOCKED_HINT in err.replace("\n", " "), err
    assert "[INTERNAL]" not in err and "check the store file" not in err, err

    # Let go, the archive is read: the rule was forgotten (behind this session's tools),
    # not lost with the store.
    held = kjson(sb, "--tenant", tenant, "--db", str(db), "status")["held"]
    assert held["message"].startswith("refusing to anchor: 1 row(s) changed behind Sibyl's "
                                      "tools"), held


def test_a_pull_over_an_archive_kint_does_not_read_names_the_store(machine, tmp_path):
    """An archive of a shape kint does not read (its `category` renamed, as another Sibyl's
    might be) raised StoreUnreadable, which no part of the op answered: the pull said
    "pull failed inside the worker", "a bug in kint", and named no store. Now it names the
    store and SQLite's error, sends the user to the file, and restores nothing."""
    sb, tenant = machine, "kint-archive-shape"
    db = anchored_then_forgotten(sb, tmp_path, tenant)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("ALTER TABLE archived_entities RENAME COLUMN category TO cat")
    log = sb.kint_home / "supervisor.log"
    said = log.read_text().count(RESTORING)

    out = sb.kint("--tenant", tenant, "--db", str(db), "pull")
    assert out.returncode != 0 and "[INTERNAL]" in out.stderr, out.stdout + out.stderr
    assert (f"store {db} cannot be read: no such column: category (SQLITE_ERROR, code 1)"
            in out.stderr), out.stderr
    assert STORE_UNREADABLE_HINT in out.stderr and "bug in kint" not in out.stderr, out.stderr
    assert log.read_text().count(RESTORING) == said
    assert _rules(db, tenant) == set()


def test_verify_over_a_locked_archive_does_not_send_the_user_to_a_pull(tmp_path):
    """Verify's why for a tenant with no row in the store (verify_empty.no_rows_why) said
    the forgotten rule was lost ("`kint pull` restores them") when the archive's read met
    the lock; which of the two it is cannot be told then, and the why says neither. The
    lock is taken as the tenant's mirror is read, between the store's counts and its
    archive; the mirror is the one a push of the rule left."""
    from kint.rows.export import connect_ro
    from kint.tenant_worker import verify_empty
    from kint.tenant_worker.mirror_file import LEAF_LEN, Mirror, MirrorRow

    tenant, db = "kint-archive-verify", tmp_path / "forgets.db"
    write(db, tenant, **{"forgotten": "anchored, then forgotten"})
    write(db, "another", **{"theirs": "another tenant's rule"})
    forget_rule(db, tenant)
    _rollback_journal(db)
    row = MirrorRow("entity", "rules", "forgotten", bytes(LEAF_LEN), 1)
    mirror = Mirror(space_id="ab" * 32, rows={row.canonical_id: row})

    with ExitStack() as lock, closing(connect_ro(str(db))) as conn:
        conn.execute("PRAGMA busy_timeout = 200")  # the lock is held past any wait

        def mirror_then_locked() -> Mirror:
            lock.enter_context(locked(db))
            return mirror

        why = verify_empty.no_rows_why(conn, str(db), tenant, mirror_then_locked)
    said = f"the store {db} holds no rows of tenant {tenant}; it holds those of 1 other"
    assert why is not None and why.startswith(said), why
    assert "restores them" not in why and "forgotten here" not in why, why
    # The lock let go, the archive tells the rule was forgotten here, as before.
    with closing(connect_ro(str(db))) as conn:
        why = verify_empty.no_rows_why(conn, str(db), tenant, lambda: mirror)
    assert why is not None and why.endswith(
        "; 1 row(s) anchored for this tenant were forgotten here (the next `kint push` "
        "anchors their deletion)"), why


def test_only_a_store_without_an_archive_has_an_empty_one(tmp_path):
    """Every failed read of the archive was read as "no archive": an archive of a shape
    kint does not read (here one without `category`, as another Sibyl's might be) too.
    Now only a store with no archive table has none; that failure is StoreUnreadable,
    SQLite's words kept, as the store's other reads say it."""
    from kint.rows.export import connect_ro
    from kint.tenant_worker.store import archived_entities
    from kint.tenant_worker.store_errors import StoreLocked, StoreUnreadable

    bare, other = tmp_path / "bare.db", tmp_path / "other.db"
    with closing(sqlite3.connect(bare)) as conn:
        conn.execute("CREATE TABLE entities (tenant_id TEXT, category TEXT, name TEXT)")
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE archived_entities (tenant_id TEXT, name TEXT)")
    with closing(connect_ro(str(bare))) as conn:
        assert archived_entities(conn, "t", str(bare)) == set()
    with closing(connect_ro(str(other))) as conn, pytest.raises(StoreUnreadable) as failed:
        archived_entities(conn, "t", str(other))
    assert not isinstance(failed.value, StoreLocked)
    assert str(failed.value) == (f"store {other} cannot be read: no such column: category "
                                 f"(SQLITE_ERROR, code 1)"), failed.value
