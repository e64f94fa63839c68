"""A store closed to this user when its worker starts, and under the store watcher (lane
denied18, after left18's kint.store_denied).

The worker's start checked the store and, for one this user may not open, exited fatally:
the space was quarantined with the denied message under the quarantine hint, not
SIBYL_ERROR and the permission hint, and a fixed mode was read only at the next retry or
after `kint supervisor restart`. It now starts anyway, as for a store another process holds
locked, and its status says what is wrong until the first call after the fix reads it.

The first test is a real supervisor and worker running as the user `nobody` when the suite
runs as root (whom no mode bit stops), over a store in a folder `nobody` may not search:
the system python3 runs them, with the worktree and the venv's packages first on its path
(the venv's own python lives under root's 0700 home). The watcher and the heartbeat are
checked in-process with the OS's refusal given (a PermissionError from the stat).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import kint
import kint.store_denied as store_denied
from conftest import TENANT, write_store
from kint.supervisor.pidlock import running_pid
from other_user import SYSTEM_PYTHON_LIKE_THIS

AS_ROOT = os.geteuid() == 0

# One call to the supervisor of KINT_HOME (started by the client when none runs), its
# answer or refusal printed as one JSON line.
_CALL = """
import json, os, sys
from pathlib import Path
from kint.client import Client, KintError
op, db = sys.argv[1], sys.argv[2] or None
where = {"tenant": sys.argv[3], "db": db, "space": sys.argv[3]} if db else {}
try:
    with Client(Path(os.environ["KINT_HOME"]), autostart=op != "sup.stop") as client:
        print(json.dumps({"ok": client.call(op, timeout_s=30, args=json.loads(sys.argv[4]),
                                            **where)}))
except KintError as err:
    print(json.dumps({"code": err.code, "message": err.message, "hint": err.hint}))
"""


class AsNobody:
    """A HOME and KINT_HOME owned by `nobody` (when this runs as root; else this user),
    and calls to the supervisor made as that user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.kint_home = root / "home", root / "kint"
        self.folder = self.home / ".sibyl-memory"
        self.db = self.folder / "memory.db"
        self.python = SYSTEM_PYTHON_LIKE_THIS if AS_ROOT else sys.executable
        # The worktree and the venv's packages ahead of the system's (kint's own Popen of
        # the supervisor and its workers' forkserver inherit the environment).
        path = [str(Path(kint.__file__).resolve().parent.parent),
                sysconfig.get_paths()["purelib"]]
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(self.home),
                    "KINT_HOME": str(self.kint_home), "SIBYL_MEMORY_TELEMETRY": "0",
                    "KINT_OFFLINE": "1", "KINT_RPC_URL": "http://127.0.0.1:9",
                    "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
                    "PYTHONPATH": os.pathsep.join(path)}

    def user(self) -> dict:
        return {"user": "nobody", "group": "nogroup", "extra_groups": []} if AS_ROOT else {}

    def call(self, op: str, db: Path | None = None, **args: str) -> dict:
        out = subprocess.run([self.python, "-c", _CALL, op, str(db or ""), TENANT,
                              json.dumps(args)],
                             env=self.env, cwd=self.root, text=True, capture_output=True,
                             timeout=90, **self.user())
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    def space_row(self) -> dict:
        rows = [r for r in self.call("sup.status")["ok"]["spaces"] if r["store"] == str(self.db)]
        assert len(rows) == 1, rows
        return rows[0]


@pytest.fixture
def nobody():
    if AS_ROOT and SYSTEM_PYTHON_LIKE_THIS is None:
        pytest.skip("as root, needs a system python3 of this version to run kint as another user")
    root = Path(tempfile.mkdtemp(dir="/tmp"))  # outside pytest's 0700 folder
    root.chmod(0o755)
    machine = AsNobody(root)
    machine.folder.mkdir(parents=True)
    machine.kint_home.mkdir(mode=0o700)
    write_store(machine.db)
    if AS_ROOT:
        for path in (root, *root.rglob("*")):
            shutil.chown(path, "nobody", "nogroup")
    try:
        yield machine
    finally:
        machine.folder.chmod(0o700)
        pid = running_pid(machine.kint_home)
        if pid:
            machine.call("sup.stop")
            if running_pid(machine.kint_home):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("closed", ["folder", "file"])
def test_a_worker_started_over_a_closed_store_says_so_and_reads_it_once_fixed(nobody, closed):
    # The store's folder `nobody` may not search, or the store file it may not read.
    (nobody.folder if closed == "folder" else nobody.db).chmod(0o000)
    refused = nobody.call("status", nobody.db)
    assert refused.get("code") == "SIBYL_ERROR", refused
    assert f"the store {nobody.db} cannot be opened by this user" in refused["message"]
    assert "Permission denied" in refused["message"], refused
    assert refused["message"].count(str(nobody.db)) == 1, refused  # named once
    assert refused["hint"] == store_denied.DENIED_HINT
    row = nobody.space_row()
    assert row["state"] != "QUARANTINED", row
    nobody.folder.chmod(0o755)  # the user's fix: no restart, no retry waited for
    nobody.db.chmod(0o644)
    answer = nobody.call("status", nobody.db)
    assert "ok" in answer, answer
    assert answer["ok"]["store"]["exists"] is True and answer["ok"]["rows"]["entity"] == 1
    assert nobody.space_row()["state"] != "QUARANTINED"
    # Closed again, and the space's worker started anew (as after an idle exit or a
    # recycle: the supervisor knows the space, so no path check comes first).
    (nobody.folder if closed == "folder" else nobody.db).chmod(0o000)
    assert nobody.call("sup.restart", target=TENANT)["ok"]["restarted"]
    refused = nobody.call("status", nobody.db)
    assert refused.get("code") == "SIBYL_ERROR", refused
    assert refused["hint"] == store_denied.DENIED_HINT
    assert nobody.space_row()["state"] != "QUARANTINED"


def _closed_at(db: str, closed: list[bool]):
    """store_signature as the OS answers it while `closed[0]`: a PermissionError, as for a
    folder on the store's path this user may not search."""
    from kint.tenant_worker.store import store_signature

    def signature(path: str):
        if closed[0]:
            raise PermissionError(13, "Permission denied", path)
        return store_signature(path)
    return signature


@pytest.mark.parametrize("what", ["folder", "file"])
def test_the_watcher_says_a_closed_store_once_when_it_begins_and_once_when_it_ends(
        tmp_path, monkeypatch, caplog, what):
    import kint.tenant_worker.watcher as watcher_module

    db = str(write_store(tmp_path / "memory.db"))
    closed = [False]
    if what == "folder":  # the stat itself refused
        monkeypatch.setattr(watcher_module, "store_signature", _closed_at(db, closed))
    # A closed file still stats: only the OS's answer to a read says it (root reads a file
    # at mode 000, so that answer is given here).
    monkeypatch.setattr(store_denied, "_denied_by_os",
                        lambda path: "Permission denied" if closed[0] and path == db else None)
    watcher = watcher_module.Watcher(db, lambda: None, lambda reason: None,
                                     timing=lambda name: _Value(1.0), generation=lambda: 0)
    caplog.set_level(logging.INFO, logger="kint.worker")
    watcher.tick(0.0)
    closed[0] = True  # a `chmod` of the store or its folder, for as many polls as it lasts
    for tick in range(1, 6):
        watcher.tick(float(tick))
        assert watcher.closed is not None
    closed[0] = False  # the user's fix: the store as it was, so no change to push
    for tick in range(6, 10):
        watcher.tick(float(tick))
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 2, [r.getMessage() for r in said]
    assert f"the store {db} cannot be opened by this user" in said[0].getMessage()
    assert said[0].getMessage().count(db) == 1, said[0].getMessage()  # named once
    assert store_denied.DENIED_HINT in said[0].getMessage()
    assert f"the store {db} can be read by this user again" in said[1].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    assert watcher.closed is None and not watcher.dirty


class _Value:
    """A settings value as the watcher reads one."""

    def __init__(self, value: float) -> None:
        self.value, self.source, self.described = value, "default", "default"


def test_the_heartbeat_keeps_its_last_figure_over_a_closed_store(tmp_path, monkeypatch):
    import kint.tenant_worker.unanchored as unanchored

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setattr(unanchored, "store_signature", _closed_at(db, [True]))
    tally = unanchored.UnanchoredTally()
    mirror = SimpleNamespace(head=SimpleNamespace(seq=3, digest="ab"))  # all a key reads
    tally.counted(2, (None, 3, "ab"), 0.0, True)
    fields, start = tally.at_beat(10.0, db, mirror, may_start=True)
    assert fields["unanchored"] == 2 and fields["unanchored_stale"] is True
    assert start is False  # a recount could only fail


def test_the_heartbeat_keeps_its_last_figure_over_a_store_file_closed_to_this_user(
        tmp_path, monkeypatch):
    # The file at mode 000 stats (its signature reads) but does not open: no recount that
    # could only fail, as for a closed folder (root reads it, so the OS's answer is given).
    import kint.tenant_worker.unanchored as unanchored

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setattr(store_denied, "_denied_by_os",
                        lambda path: "Permission denied" if path == db else None)
    tally = unanchored.UnanchoredTally()
    mirror = SimpleNamespace(head=SimpleNamespace(seq=3, digest="ab"))
    tally.counted(2, (None, 3, "ab"), 0.0, True)
    fields, start = tally.at_beat(10.0, db, mirror, may_start=True)
    assert fields["unanchored"] == 2 and fields["unanchored_stale"] is True
    assert start is False
