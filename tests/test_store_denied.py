"""A Sibyl store this user may not open is said as that, never as a damaged store (lane
left18).

SQLite answers SQLITE_CANTOPEN (or SQLITE_PERM) for the store file at mode 000 and for a
folder on its path without search permission, the same codes as for a file it cannot make
sense of; kint took them all for damage: a server-side push was held over the store, a
terminal's push, Sibyl's client and status sent the user to `kint pull --discard-local`
(which moves a good store aside and restores over it), and `pull --discard-local` let it
through. Now the OS is asked (kint.store_denied), and a permission this user lacks is
refused as what it is, with how to fix it.

The OS's answer is real in the first test (as the user `nobody` when the suite runs as
root, whose permissions no mode bit stops); the callers are checked with it given.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import kint.store_denied as store_denied
from kint.protocol import ErrorCode, ProtocolError
from other_user import SYSTEM_PYTHON

_ASK = """
import runpy, sys
found = runpy.run_path(sys.argv[1])["denied_reason"](sys.argv[2])
print(found)
"""


def make_store(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE entities (tenant_id TEXT, name TEXT)")


def ask_as_another_user(db: Path) -> str:
    """denied_reason(db) in a process of a user the modes apply to."""
    if os.geteuid() == 0:
        argv, user = [SYSTEM_PYTHON, "-c", _ASK], "nobody"
    else:
        argv, user = [sys.executable, "-c", _ASK], None
    out = subprocess.run([*argv, store_denied.__file__, str(db)], user=user, text=True,
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(os.geteuid() == 0 and SYSTEM_PYTHON is None,
                    reason="as root, needs a system python3 to ask as another user")
def test_the_os_says_which_file_is_closed_to_this_user():
    root = Path(tempfile.mkdtemp(dir="/tmp"))  # outside pytest's 0700 folder
    try:
        root.chmod(0o755)
        open_folder, closed_folder = root / "open", root / "closed"
        open_folder.mkdir(mode=0o755)
        closed_folder.mkdir(mode=0o755)
        store = open_folder / "memory.db"
        make_store(store)
        store.chmod(0o644)
        assert ask_as_another_user(store) == "None"
        assert ask_as_another_user(open_folder / "absent.db") == "None"
        store.chmod(0o000)
        # The store itself: the OS's words alone (the message names the store already).
        assert ask_as_another_user(store) == "Permission denied"
        store.chmod(0o644)
        (open_folder / "memory.db-wal").write_bytes(b"")
        (open_folder / "memory.db-wal").chmod(0o000)
        assert ask_as_another_user(store) == f"{store}-wal: Permission denied"
        make_store(closed_folder / "memory.db")
        closed_folder.chmod(0o700)
        assert ask_as_another_user(closed_folder / "memory.db") == "Permission denied"
    finally:
        for folder in root.rglob("*"):
            folder.chmod(0o700)
        shutil.rmtree(root)


@pytest.fixture
def denied(tmp_path, monkeypatch):
    """A real store, which the OS is taken to refuse this user."""
    db = tmp_path / "memory.db"
    make_store(db)
    monkeypatch.setattr(store_denied, "_denied_by_os",
                        lambda path: "Permission denied" if path == str(db) else None)
    return str(db)


def cantopen() -> sqlite3.OperationalError:
    err = sqlite3.OperationalError("unable to open database file")
    err.sqlite_errorcode, err.sqlite_errorname = sqlite3.SQLITE_CANTOPEN, "SQLITE_CANTOPEN"
    return err


def said_as_denied(message: str, hint: str, db: str) -> None:
    assert f"the store {db} cannot be opened by this user" in message, message
    assert "Permission denied" in message, message
    assert message.count(db) == 1, message  # the store named once, not again in the reason
    assert hint == store_denied.DENIED_HINT
    assert "--discard-local" not in message + hint and "damaged goes aside" not in hint


def test_the_worker_store_reads_say_denied(denied):
    from kint.tenant_worker.store import check_openable, rows_by_tenant
    from kint.tenant_worker.store_errors import StoreDenied, unreadable

    found = unreadable(denied, cantopen())
    assert isinstance(found, StoreDenied)
    said_as_denied(str(found), found.hint, denied)
    for read in (check_openable, rows_by_tenant):
        with pytest.raises(StoreDenied) as raised:
            read(denied)
        said_as_denied(str(raised.value), raised.value.hint, denied)


def test_sibyls_client_probe_says_denied(denied):
    from kint import sibyl_client

    with pytest.raises(ProtocolError) as raised:
        sibyl_client.probe_store(denied)
    assert raised.value.code == ErrorCode.SIBYL_ERROR
    said_as_denied(raised.value.message, raised.value.hint, denied)
    opened = sibyl_client._unreadable(denied, cantopen())
    said_as_denied(opened.message, opened.hint, denied)


@pytest.mark.parametrize("hold_reason", [None, "watcher"])
def test_a_push_is_refused_not_held_nor_sent_to_discard(denied, hold_reason):
    from kint.tenant_worker.push_refusals import _store_rows

    def unreadable_rows():
        raise cantopen()

    held = []
    ctx = SimpleNamespace(config=SimpleNamespace(db=denied, space16="0" * 16),
                          store_rows=unreadable_rows,
                          drift=SimpleNamespace(unreadable=lambda *a: held.append(a)))
    with pytest.raises(ProtocolError) as raised:
        _store_rows(ctx, hold_reason)
    assert raised.value.code == ErrorCode.SIBYL_ERROR and not held
    said_as_denied(raised.value.message, raised.value.hint, denied)
    assert raised.value.message.endswith("; nothing was anchored")


def test_a_discard_does_not_move_a_store_closed_to_this_user(denied):
    from kint.tenant_worker.discard import refuse_if_shared

    ctx = SimpleNamespace(config=SimpleNamespace(db=denied, tenant="t"))
    with pytest.raises(ProtocolError) as raised:
        refuse_if_shared(ctx)
    said_as_denied(raised.value.message, raised.value.hint, denied)
    assert raised.value.message.endswith("; nothing was moved")
