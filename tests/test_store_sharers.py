"""Two KINT_HOMEs serving one Sibyl store are named, never refused
(kint/tenant_worker/store_sharers.py): `kint doctor`'s `store shared` row and a worker's
warning at its start name the other home.

Another home's worker is stood in for by a process that names itself as kint's workers do
(kint.proc_name) and holds open what one holds: the store, and the log under its home."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader
from kint.tenant_worker.store_sharers import (SHARING_HINT, Sharer, other_homes_on_store,
                                              look_and_warn)

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc")

HOLDER = """
import sys
from kint.proc_name import set_process_name
set_process_name(sys.argv[1])
held = [open(path, "ab" if path.endswith(".log") else "rb") for path in sys.argv[2:]]
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "memory.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE entities (tenant_id TEXT, name TEXT)")
    conn.close()
    return db


@pytest.fixture
def holder():
    """Start processes named `name` holding `paths` open, each until the test ends."""
    started: list[subprocess.Popen] = []

    def start(name: str, *paths: Path, env: dict | None = None) -> int:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, name, *map(str, paths)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env)
        started.append(proc)
        assert proc.stdout.readline() == "holding\n"
        return proc.pid

    yield start
    for proc in started:
        proc.stdin.close()
        proc.wait(timeout=30)


def _home(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def _started(pid: int) -> str:
    """Field 22 of /proc/PID/stat (proc(5)), counted after the name's closing ')'."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_another_homes_worker_on_the_store_is_named_by_its_home(tmp_path, store, holder):
    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    pid = holder("kint-worker", store, theirs / "supervisor.log")
    assert other_homes_on_store(str(store), mine) == [Sharer(pid, str(theirs), _started(pid))]


def test_this_homes_worker_and_other_programs_are_not_named(tmp_path, store, holder):
    mine = _home(tmp_path / "mine")
    holder("kint-worker", store, mine / "supervisor.log")  # an earlier supervisor's worker
    holder("python-agent", store, _home(tmp_path / "agent") / "supervisor.log")
    assert other_homes_on_store(str(store), mine) == []


def test_a_home_read_from_the_environment_when_no_log_is_held(tmp_path, store, holder):
    theirs = tmp_path / "theirs-by-env"
    pid = holder("kint-worker", store, env={**os.environ, "KINT_HOME": str(theirs)})
    assert other_homes_on_store(str(store), _home(tmp_path / "mine")) == [
        Sharer(pid, str(theirs), _started(pid))]


def _context(home: Path, db: Path) -> SpaceContext:
    cfg = WorkerConfig(space_id="ab" * 32, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    return SpaceContext(config=cfg, store=StoreReader(str(db), "t"))


def test_doctor_warns_naming_the_other_home_and_does_not_fail_for_it(tmp_path, store, holder,
                                                                    monkeypatch):
    from kint.tenant_worker.doctor import doctor

    monkeypatch.setenv("KINT_OFFLINE", "1")
    monkeypatch.setenv("KINT_RPC_URL", "http://127.0.0.1:9")
    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    ctx = _context(mine, store)
    assert "store shared" not in {c["name"] for c in doctor(ctx, {})["checks"]}

    holder("kint-worker", store, theirs / "supervisor.log")
    checks = {c["name"]: c for c in doctor(ctx, {})["checks"]}
    row = checks["store shared"]
    assert row["ok"] is True and row["warn"] is True, row
    assert str(theirs) in row["detail"] and str(store) in row["detail"], row
    assert row["hint"] == SHARING_HINT


def test_status_shows_what_the_last_look_found_while_that_worker_runs(tmp_path, store,
                                                                      monkeypatch):
    """`status` names another home's worker on the store as the worker's last look (its
    start's, doctor's) found it, and drops it once that worker is gone, without a look of
    its own (a walk of every process per status): only doctor and the log said so."""
    from kint.render_space import space_status_text
    from kint.tenant_worker import store_sharers
    from kint.tenant_worker.status import status

    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    ctx = _context(mine, store)
    look_and_warn(str(store), mine, "ab" * 8)  # nobody else yet
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, "kint-worker", str(store),
                             str(theirs / "supervisor.log")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "holding\n"
        assert status(ctx, {})["store_shared"] is None  # status does not look itself
        look_and_warn(str(store), mine, "ab" * 8)  # a look: this worker's start
        looks = []
        real_look = store_sharers._look
        monkeypatch.setattr(store_sharers, "_look", lambda *a: looks.append(a) or real_look(*a))
        shown = status(ctx, {})
        assert looks == []
        assert shown["store_shared"] == {
            "message": f"the Sibyl store {store} is also served by kint of another KINT_HOME "
                       f"({theirs}): two homes anchor and watch the same rows, each with its "
                       f"own vault",
            "hint": SHARING_HINT}, shown["store_shared"]
        line = f"WARNING: {shown['store_shared']['message']}; {SHARING_HINT}"
        assert line in space_status_text(shown).splitlines()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    gone = status(ctx, {})
    assert gone["store_shared"] is None
    assert "WARNING" not in space_status_text(gone)


def test_status_does_not_take_a_later_kint_worker_on_that_pid_for_the_one_found(
        tmp_path, store, holder):
    """The worker the last look found exits and its pid goes to another kint worker (of
    another space, or another home, not holding this store): status drops the sharing, as
    the pid's start time is not the found worker's. A pid cannot be made to repeat here, so
    the kept record is pointed at a live kint worker started after the one found."""
    from kint.tenant_worker import store_sharers
    from kint.tenant_worker.status import status

    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    ctx = _context(mine, store)
    found_pid = holder("kint-worker", store, theirs / "supervisor.log")
    (found,) = other_homes_on_store(str(store), mine)
    assert found.pid == found_pid and status(ctx, {})["store_shared"] is not None
    later_pid = holder("kint-worker", _home(tmp_path / "elsewhere") / "supervisor.log")
    key = (str(store), os.path.realpath(mine))
    with store_sharers._last_found_lock:
        store_sharers._last_found[key] = [found._replace(pid=later_pid)]
    try:
        assert status(ctx, {})["store_shared"] is None
    finally:
        with store_sharers._last_found_lock:
            store_sharers._last_found.pop(key, None)


def test_a_worker_says_so_once_at_its_start(tmp_path, store, holder, caplog):
    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    holder("kint-worker", store, theirs / "supervisor.log")
    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        look_and_warn(str(store), mine, "ab" * 8)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"space {'ab' * 8}: the Sibyl store {store} is also served by "
                           f"kint of another KINT_HOME ({theirs})"), line


def test_later_looks_name_each_other_home_once_in_the_log(tmp_path, store, holder, caplog):
    """A running worker looks again (its heartbeat starts `LaterLooks.look` when `due`): a
    home found again is not said again; one found since is said, alone."""
    from kint.tenant_worker.store_sharers import LOOK_EVERY_S, LaterLooks

    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    looks = LaterLooks(str(store), mine, "ab" * 8, now=100.0)
    assert not looks.due(100.0 + LOOK_EVERY_S)  # the start's look has not ended yet
    holder("kint-worker", store, theirs / "supervisor.log")
    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        looks.look()  # the start's
        assert not looks.due(100.0 + LOOK_EVERY_S / 2) and looks.due(100.0 + LOOK_EVERY_S)
        assert not looks.due(100.0 + LOOK_EVERY_S)  # one at a time
        looks.look()
        later = _home(tmp_path / "later")
        holder("kint-worker", store, later / "supervisor.log")
        assert looks.due(100.0 + 2 * LOOK_EVERY_S)
        looks.look()
    first, second = [r.getMessage() for r in caplog.records]
    assert f"({theirs})" in first and str(later) not in first, first
    assert f"({later})" in second and str(theirs) not in second, second


def test_two_real_homes_on_one_store_each_hear_of_the_other(tmp_path):
    """Two supervisors, two KINT_HOMEs, one store: the second home's worker warns at its
    start in its log, and its doctor has the row; the first home's worker, which started
    before the second's, learns of it at a later look of its own (no doctor asked), once in
    its log and in its status; both serve (a warning, not a refusal).

    The first home's supervisor is the test one (tests/support/run_supervisor.py), so that
    its worker looks again every LOOK_S rather than every minute (KINT_TEST_SHARING_LOOK_S,
    tests/support/kint_test_timings.py)."""
    from conftest import make_sandbox, write_store

    (tmp_path / "shared").mkdir()
    db = write_store(tmp_path / "shared" / "memory.db")
    first = make_sandbox(tmp_path / "first", KINT_TEST_SHARING_LOOK_S=str(LOOK_S))
    second = make_sandbox(tmp_path / "second")
    try:
        first.start_entitled()
        # An agent session's attach reads the rows: the first home's worker holds the store.
        first.call("attach", db, args={"session": "agent", "watcher": False})
        first_log = first.kint_home / "supervisor.log"
        assert first.call("status", db)["store_shared"] is None  # alone on the store
        second.start()
        assert second.call("status", db)["store"]["exists"]
        log = second.kint_home / "supervisor.log"
        line = second.wait_for(
            lambda: next((x for x in log.read_text().splitlines() if "store shared" in x
                          or "another KINT_HOME" in x), None),
            timeout=20, what="the second home's worker warning at its start")
        assert f"({first.kint_home})" in line and "WARNING" in line, line
        out = second.kint("--db", str(db), "doctor")
        assert f"[WARN] store shared: the Sibyl store {db} is also served by kint of another " \
               f"KINT_HOME ({first.kint_home})" in out.stdout, out.stdout
        # `kint status` says so too, from what the worker found at its start.
        shown = second.kint("--db", str(db), "status")
        assert f"WARNING: the Sibyl store {db} is also served by kint of another KINT_HOME " \
               f"({first.kint_home})" in shown.stdout, shown.stdout
        as_json = json.loads(second.kint("--db", str(db), "status", "--json").stdout)
        assert str(first.kint_home) in as_json["store_shared"]["message"], as_json
        # And `kint supervisor status`, in the space's row, from the worker's beats.
        row = second.wait_for(lambda: _shared_row(second, db), timeout=20,
                              what="the second home's supervisor status row naming it")
        assert row["store_shared"] == as_json["store_shared"], row
        space = row["space"]
        sup_text = second.kint("supervisor", "status").stdout
        assert f"WARNING: space {space}: the Sibyl store {db} is also served by kint of " \
               f"another KINT_HOME ({first.kint_home})" in sup_text, sup_text
        assert SHARING_HINT in sup_text, sup_text

        # The first home's worker, started before, learns it with no doctor run.
        said = first.wait_for(lambda: first.call("status", db)["store_shared"], timeout=20,
                              what="the first home's status naming the second home")
        assert f"({second.kint_home})" in said["message"] and said["hint"] == SHARING_HINT
        row = first.wait_for(lambda: _shared_row(first, db), timeout=20,
                             what="the first home's supervisor status row naming it")
        assert row["store_shared"] == said, row
        first.wait_for(lambda: _sharing_lines(first_log), timeout=20,
                       what="the first home's worker warning in its log")
        time.sleep(LOOK_S * 4)  # a few more looks: each finds the same home, none says it
        [warned] = _sharing_lines(first_log)
        assert f"({second.kint_home})" in warned and "WARNING" in warned, warned
        assert first.call("status", db)["store"]["exists"]
    finally:
        first.shutdown()
        second.shutdown()


def _shared_row(sb: Any, db: Path) -> dict[str, Any] | None:
    """The first row of `kint supervisor status` (--json) serving `db` whose worker's beats
    say another home shares it (the CLI's call and the test's may name two spaces of it)."""
    return next((r for r in sb.sup_status()["spaces"]
                 if r["store"] == str(db) and r["store_shared"]), None)


# How often the first home's worker looks in the test above.
LOOK_S = 0.3


def _sharing_lines(log: Path) -> list[str]:
    return [x for x in log.read_text().splitlines() if "another KINT_HOME" in x]


def _without_home(**extra: str) -> dict[str, str]:
    """This process's environment without KINT_HOME (and with `extra`): a worker whose home
    is read from its log alone, or from `extra`'s."""
    return {**{k: v for k, v in os.environ.items() if k != "KINT_HOME"}, **extra}


def test_a_worker_holding_its_log_rotated_or_deleted_is_named_by_its_home(tmp_path, store,
                                                                         holder):
    """An idle worker keeps the log it last wrote open: after the supervisor's rotation
    that is `supervisor.log.1` (kint.logs.rotate_if_large), after the next `supervisor.log.1
    (deleted)`. Its home is still that file's folder, not its environment's (none here)."""
    mine = _home(tmp_path / "mine")
    rotated, deleted = _home(tmp_path / "rotated"), _home(tmp_path / "deleted")
    (rotated / "supervisor.log.1").touch()
    (deleted / "supervisor.log.1").touch()
    (mine / "supervisor.log.1").touch()
    env = _without_home()
    first = holder("kint-worker", store, rotated / "supervisor.log.1", env=env)
    second = holder("kint-worker", store, deleted / "supervisor.log.1", env=env)
    (deleted / "supervisor.log.1").unlink()
    assert Path(f"/proc/{second}/fd").is_dir()
    assert sorted(other_homes_on_store(str(store), mine)) == sorted([
        Sharer(first, str(rotated), _started(first)),
        Sharer(second, str(deleted), _started(second))])
    # This home's own worker of an earlier supervisor, holding the rotated log: not another.
    mine_pid = holder("kint-worker", store, mine / "supervisor.log.1", env=env)
    assert mine_pid not in {s.pid for s in other_homes_on_store(str(store), mine)}


def test_a_home_from_the_environment_is_resolved_as_one_from_the_log(tmp_path, store, holder):
    theirs = _home(tmp_path / "theirs")
    (tmp_path / "link").symlink_to(theirs)
    pid = holder("kint-worker", store, env=_without_home(KINT_HOME=str(tmp_path / "link")))
    assert other_homes_on_store(str(store), _home(tmp_path / "mine")) == [
        Sharer(pid, os.path.realpath(theirs), _started(pid))]


def test_a_worker_is_named_once_with_the_home_first_read_for_it(tmp_path, store, holder,
                                                                 caplog):
    """A later look that reads no home for a worker named by its home (its log moved where
    no kint log is, no KINT_HOME in its environment) neither names it again (by its pid)
    nor forgets its home: status keeps saying it."""
    mine, theirs = _home(tmp_path / "mine"), _home(tmp_path / "theirs")
    pid = holder("kint-worker", store, theirs / "supervisor.log", env=_without_home())
    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        look_and_warn(str(store), mine, "ab" * 8)
        (theirs / "supervisor.log").rename(tmp_path / "elsewhere.txt")
        look_and_warn(str(store), mine, "ab" * 8)
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"({theirs})" in line, line
    assert other_homes_on_store(str(store), mine) == [Sharer(pid, str(theirs), _started(pid))]


def test_a_look_reads_the_open_files_of_kint_workers_only(tmp_path, store, holder,
                                                          monkeypatch):
    """The look, every minute in every worker, reads each process's name and lists the open
    files of kint's workers alone: not those of another program holding the store (nor of
    any other process), which could hold tens of thousands. `pull --discard-local`'s check
    (store_holders.other_holders without a name) still sees every holder."""
    from kint.tenant_worker import store_holders

    theirs = _home(tmp_path / "theirs")
    worker = holder("kint-worker", store, theirs / "supervisor.log")
    other = holder("python-agent", store, _home(tmp_path / "agent") / "supervisor.log")
    listed: list[str] = []
    real_listdir = os.listdir

    def listdir(path="."):
        listed.append(str(path))
        return real_listdir(path)

    monkeypatch.setattr(store_holders.os, "listdir", listdir)
    found = other_homes_on_store(str(store), _home(tmp_path / "mine"))
    assert [s.pid for s in found] == [worker]
    walked = {int(p.split("/")[2]) for p in listed
              if p.startswith("/proc/") and p.endswith("/fd")}
    assert worker in walked and other not in walked, walked
    # Any other walked is a kint worker (of the tests running beside this one, or gone since).
    names = {pid: store_holders._comm(str(pid)) for pid in walked}
    assert set(names.values()) <= {"kint-worker", None}, names
    assert sorted(store_holders.other_holders(str(store))) == sorted([worker, other])
