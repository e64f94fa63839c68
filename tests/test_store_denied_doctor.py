"""`kint doctor` over a store this user may not open (review18, after lane left18's
kint.store_denied): its `sibyl store` row says so, and the rest of the doctor still
answers. The rows' count opens the worker's read-only connection, which SQLite refuses for
such a store (SQLITE_CANTOPEN); that refusal escaped the whole doctor as INTERNAL ("a bug
in kint") and no row was printed. The connection now says the store is closed to this
user (SIBYL_ERROR, with how to fix it), and the doctor counts nothing, as for any store
its `sibyl store` row names.

The OS's answer is stood in for, as in tests/test_store_denied.py (the suite may run as
root, whom no mode bit stops); the worker's op runs in-process on a real store."""

from __future__ import annotations

import sqlite3

import pytest

import kint.store_denied as store_denied
import kint.tenant_worker.space as space_module
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader


@pytest.fixture
def closed_store(tmp_path, monkeypatch):
    """A space's context over a real store the OS is taken to refuse this user, with
    SQLite's open refused as it then is."""
    monkeypatch.setenv("KINT_OFFLINE", "1")
    monkeypatch.setenv("KINT_RPC_URL", "http://127.0.0.1:9")
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE entities (tenant_id TEXT, name TEXT)")
    monkeypatch.setattr(store_denied, "_denied_by_os",
                        lambda path: "Permission denied" if path == str(db) else None)

    def cantopen(path):
        err = sqlite3.OperationalError("unable to open database file")
        err.sqlite_errorcode, err.sqlite_errorname = sqlite3.SQLITE_CANTOPEN, "SQLITE_CANTOPEN"
        raise err

    monkeypatch.setattr(space_module, "connect_ro", cantopen)
    cfg = WorkerConfig(space_id="ab" * 32, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    return SpaceContext(config=cfg, store=StoreReader(str(db), "t"))


def test_the_read_only_connection_says_the_store_is_closed_to_this_user(closed_store):
    with pytest.raises(ProtocolError) as raised:
        with closed_store.reading():
            pass
    assert raised.value.code == ErrorCode.SIBYL_ERROR, raised.value
    assert "cannot be opened by this user" in raised.value.message
    assert raised.value.hint == store_denied.DENIED_HINT


def test_doctor_answers_with_its_sibyl_store_row_naming_it(closed_store):
    from kint.tenant_worker.doctor import doctor

    checks = {c["name"]: c for c in doctor(closed_store, {})["checks"]}
    row = checks["sibyl store"]
    assert row["ok"] is False and "cannot be opened by this user" in row["detail"], row
    assert row["hint"] == store_denied.DENIED_HINT
    assert "pull" in checks and "disk space" in checks, sorted(checks)
